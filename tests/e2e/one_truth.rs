//! Issue 33: `scan` and the operator tell the same truth, end to end. A control plane of this
//! test's own (every controller, and the CSI snapshot-controller with its release's CRDs), a
//! real Ceph (`ceph/up.sh`), moto's EC2 (`scripts/moto.sh`) and the project's Compute test
//! server, and one world holding every reason the real controllers leave:
//!
//! - from the controller-manager: ClaimDeleted (a ceph-csi volume whose claim went; a hostPath
//!   one whose StorageClass went too: `StorageClassMissing`; a Delete-policy ceph-csi volume
//!   whose external delete never comes: `ReclaimPolicyDelete`), ClaimRecreated (a GCE volume
//!   whose claim was made again, Pending), PreboundClaimMissing (an EBS volume pre-bound to a
//!   claim that never comes), ReclaimFailed (a Delete hostPath volume its deleter refuses);
//! - from the census, for each backend: VolumeWithoutDisk (Ceph; GCE and EBS by their CSI
//!   handles, and by in-tree sources located by their zones), DiskWithoutVolume (this cluster's,
//!   one nobody attributes: `OwnerUnknown`, one in use: `DiskInUse`; another cluster's and those
//!   a PV names are nothing), SnapshotWithoutContent (GCE and EBS); the GCE section names this
//!   cluster by a name of its own;
//! - from the snapshot-controller: SnapshotDeleted, SnapshotDeleteStuck (no sidecar deletes the
//!   backend snapshot), SnapshotContentMissing;
//! - the tombstones, watched by the operator: VolumeDeleted and ContentDeleted.
//!
//! The operator binary runs with `--grace 0s --delete-grace 0s` and a 1 s census interval until
//! two more listings of every scope were decided and written; then `scan` runs once with the
//! same census file, graces, image grace and price table, and its findings are the operator's
//! VolumeLeftovers: the same names, reasons and facts (hints, the claim's uid and current uid,
//! capacity, the source with its zones, where the disk is, what it costs a month). The
//! tombstones are the operator's alone: `scan` has no memory of a deleted object (it reads the
//! VolumeDeleted ones only to know that their disks are named); everything else is compared.
//!
//! Not in the world, because the real controllers do not keep them: ClaimStillPresent (the
//! binder releases a volume only once its claim is gone, and no claim comes back with the same
//! uid), ReleasedWithoutClaim (a Released volume whose claimRef is cleared is made Available),
//! BoundClaimMissing (a Bound volume whose claim goes is released at once: a moment only),
//! ClaimRefInvalid (a claimRef the binder would write is complete), ClaimUnknown (the operator
//! may read claims), ContentNeverBound and SnapshotRecreated (the snapshot-controller binds a
//! content whose snapshot names it, and a snapshot made again names its content afresh).
//! `tests/e2e/odd.rs` writes them by hand on a control plane without the binder.
//!
//! When moto or the Compute server's Python cannot be had the test skips, except in CI
//! (`CI=true`), where it fails; Ceph and the control plane it never skips.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, GCEPersistentDiskVolumeSource, ObjectReference,
    PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use volume_leftovers::census::ceph::handle::PoolKey;
use volume_leftovers::census::ceph::rbd;
use volume_leftovers::decide::census::Scope;
use volume_leftovers::decide::snapshot::{content_leftover_name, snapshot_leftover_name};
use volume_leftovers::model::crd::{Reason, Subject, VolumeLeftover, VolumeLeftoverStatus};

use crate::ceph::{Ceph, Watch, uuid};
use crate::csi::{install_snapshots, jsonpath, pair, snapshot_controller, wait_until};
use crate::support::*;

/// This cluster's name in the file (ceph-csi's metadata, the EBS tags)...
const CLUSTER: &str = "e2e-1t";
/// ... and in the GCE section's own `clusterName` (GKE's label).
const GKE: &str = "gke-1t";
const PROJECT: &str = "p-1t";
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const AZ: &str = "us-east-1a";
const SNAPS: &str = "snaps-1t";
const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// What both are given: the graces, the census and its image grace, the price table.
fn shared_flags(config: &Path, prices: &Path) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--grace",
        "0s",
        "--delete-grace",
        "0s",
        "--expansion-grace",
        "0s",
        "--census-image-grace",
        "0s",
        "--census-config",
    ]
    .map(String::from)
    .into();
    flags.push(config.display().to_string());
    flags.push("--price-table".into());
    flags.push(prices.display().to_string());
    flags
}

/// The binary as the operator's identity, reaching moto with its keys and the Compute server
/// with the section's key file.
fn binary(cp: &ControlPlane) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"));
    cmd.env("KUBECONFIG", cp.kubeconfig("operator"))
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS");
    cmd
}

/// A disk of the Compute server's state: zonal (`zone`) or regional (`region`, two replicas).
fn gce_disk(location: &str, name: &str, id: &str, labels: Value) -> Value {
    let mut d = json!({
        "name": name, "id": id, "sizeGb": "10", "type": "pd-balanced", "status": "READY",
        "creationTimestamp": "2026-03-01T10:00:00.000-08:00", "labels": labels,
    });
    if location.matches('-').count() == 2 {
        d["zone"] = json!(location);
    } else {
        d["region"] = json!(location);
        d["type"] = json!("pd-ssd");
        d["replicaZones"] = json!([format!("{location}-b"), format!("{location}-c")]);
    }
    d
}

/// `pv` pre-bound by name to the claim `ns/claim` (the binder binds exactly these two).
fn for_claim(mut pv: PersistentVolume, ns: &str, claim: &str) -> PersistentVolume {
    pv.spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(ns.into()),
        name: Some(claim.into()),
        ..ObjectReference::default()
    });
    pv
}

/// A Retain PV with only the in-tree source `set` makes, in the zones `zones` require.
fn in_tree(
    name: &str,
    class: &str,
    zones: &[&str],
    set: impl FnOnce(&mut k8s_openapi::api::core::v1::PersistentVolumeSpec),
) -> PersistentVolume {
    let mut p = pv(name, class, "10Gi", "Retain");
    let spec = p.spec.as_mut().unwrap();
    spec.host_path = None;
    set(spec);
    if !zones.is_empty() {
        spec.node_affinity = Some(zone_affinity(ZONE_KEY, zones));
    }
    p
}

/// What a scan line and a VolumeLeftover say of a finding, in the same words. Volume-style
/// findings (volumes, disks, backend snapshots): reason, hints, the claim's uids, capacity,
/// the source with its zones, where a cloud disk is (the keys `scan` prints of it: backend,
/// account or project, region, zone, tags; a backend snapshot's handle and what it was cut
/// for), the monthly cost. Snapshot objects' findings: reason, the content and snapshot and
/// their uids, the policy, the handle, the size, the monthly cost.
type Facts = BTreeMap<String, Value>;

fn line_facts(l: &Value) -> (String, Facts) {
    let name = l["name"].as_str().expect("a name").to_string();
    let cost = json!([l["monthly_cost_minor_units"], l["currency"]]);
    if let Some(kind) = l["kind"].as_str() {
        let name = match kind {
            "VolumeSnapshotContent" => content_leftover_name(&name),
            _ => {
                let (ns, n) = name.split_once('/').expect("namespace/name");
                snapshot_leftover_name(ns, n)
            }
        };
        let keys = [
            "reason",
            "content",
            "snapshot",
            "snapshot_uid",
            "snapshot_current_uid",
            "deletion_policy",
            "snapshot_handle",
            "restore_size_bytes",
        ];
        let mut f: Facts = keys
            .iter()
            .map(|k| (k.to_string(), l[*k].clone()))
            .collect();
        f.insert("cost".into(), cost);
        return (name, f);
    }
    let keys = [
        "reason",
        "hints",
        "claim_uid",
        "claim_current_uid",
        "capacity",
        "source_type",
        "driver",
        "volume_handle",
        "pool",
        "image_name",
        "disk_name",
        "path",
        "zones",
        "snapshot_handle",
        "created_for_content",
        "created_for_snapshot",
    ];
    let mut f: Facts = keys
        .iter()
        .map(|k| (k.to_string(), l[*k].clone()))
        .collect();
    let disk = l.get("backend").map(|backend| {
        let account = if l["account"].is_null() {
            &l["project"]
        } else {
            &l["account"]
        };
        json!({"backend": backend, "account": account, "region": l["region"],
               "zone": l["zone"], "tags": l["tags"]})
    });
    f.insert("disk".into(), disk.unwrap_or(Value::Null));
    f.insert("cost".into(), cost);
    (name, f)
}

fn leftover_facts(o: &VolumeLeftover) -> (String, Facts) {
    let s: &VolumeLeftoverStatus = o.status.as_ref().expect("a status");
    let cost = match &s.cost {
        Some(c) => json!([c.monthly_minor_units, c.currency]),
        None => json!([null, null]),
    };
    let snap = s.snapshot.clone().unwrap_or_default();
    if matches!(s.subject, Subject::SnapshotContent | Subject::Snapshot) {
        let f: Facts = [
            ("reason", v(&s.reason)),
            ("content", v(&snap.content)),
            ("snapshot", v(&snap.snapshot)),
            ("snapshot_uid", v(&snap.snapshot_uid)),
            ("snapshot_current_uid", v(&snap.current_uid)),
            ("deletion_policy", v(&snap.deletion_policy)),
            ("snapshot_handle", v(&snap.snapshot_handle)),
            ("restore_size_bytes", v(&snap.restore_size_bytes)),
            ("cost", cost),
        ]
        .into_iter()
        .map(|(k, x)| (k.to_string(), x))
        .collect();
        return (o.name_any(), f);
    }
    let (claim_uid, claim_current_uid) = match &s.claim {
        Some(c) => (c.uid.clone(), c.current_uid.clone()),
        None => (None, None),
    };
    let src = &s.source;
    let backend_snapshot = s.subject == Subject::BackendSnapshot;
    let about_disk = matches!(
        s.reason,
        Reason::DiskWithoutVolume | Reason::SnapshotWithoutContent | Reason::VolumeWithoutDisk
    );
    let disk = s
        .image
        .as_ref()
        .filter(|i| about_disk && i.backend.as_ref().is_some_and(|b| b.as_str() != "ceph"))
        .map(|i| {
            json!({"backend": i.backend, "account": i.account, "region": i.region,
                   "zone": i.zone, "tags": i.tags})
        });
    let f: Facts = [
        ("reason", v(&s.reason)),
        ("hints", v(&s.hints)),
        ("claim_uid", v(&claim_uid)),
        ("claim_current_uid", v(&claim_current_uid)),
        ("capacity", v(&s.capacity)),
        ("source_type", v(&src.kind)),
        ("driver", v(&src.driver)),
        ("volume_handle", v(&src.volume_handle)),
        ("pool", v(&src.pool)),
        ("image_name", v(&src.image_name)),
        ("disk_name", v(&src.disk_name)),
        ("path", v(&src.path)),
        ("zones", v(&src.zones)),
        (
            "snapshot_handle",
            v(&snap.snapshot_handle.filter(|_| backend_snapshot)),
        ),
        (
            "created_for_content",
            v(&snap.content.filter(|_| backend_snapshot)),
        ),
        (
            "created_for_snapshot",
            v(&snap.snapshot.filter(|_| backend_snapshot)),
        ),
        ("disk", disk.unwrap_or(Value::Null)),
        ("cost", cost),
    ]
    .into_iter()
    .map(|(k, x)| (k.to_string(), x))
    .collect();
    (o.name_any(), f)
}

/// A fact of a status in the words of a JSON line.
fn v<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).expect("serializes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_the_operator_tell_the_same_truth() {
    // How long each step took, printed at the end (docs/testing.md gives the total).
    let began = Instant::now();
    let mut took: Vec<(&str, Duration)> = Vec::new();
    let mut lap = {
        let mut last = Instant::now();
        move |what: &'static str, took: &mut Vec<(&str, Duration)>| {
            took.push((what, last.elapsed()));
            last = Instant::now();
        }
    };

    // ---- the parts ----
    let Some(moto) = moto() else { return };
    let mut regional = gce_disk(
        "europe-west1",
        "gce-regional",
        "9007",
        json!({"goog-k8s-cluster-name": GKE}),
    );
    regional["users"] = json!([format!(
        "projects/{PROJECT}/zones/europe-west1-b/instances/vm-1"
    )]);
    let gce_state = json!({
        "project": PROJECT,
        "zones": ["europe-west1-b", "europe-west1-c"], "regions": ["europe-west1"],
        "disks": [
            {
                "zone": "europe-west1-b", "name": "gce-orphan", "id": "9001", "sizeGb": "10",
                "type": "pd-balanced", "status": "READY",
                "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
                "labels": {"goog-k8s-cluster-name": GKE},
                "description": json!({
                    "kubernetes.io/created-for/pv/name": "pvc-long-gone",
                    "kubernetes.io/created-for/pvc/name": "data",
                    "kubernetes.io/created-for/pvc/namespace": "shop",
                    "storage.gke.io/created-by": "pd.csi.storage.gke.io",
                }).to_string(),
            },
            gce_disk("europe-west1-b", "gce-anon", "9002", json!({})),
            gce_disk("europe-west1-b", "gce-theirs", "9003", json!({"goog-k8s-cluster-name": "another"})),
            gce_disk("europe-west1-b", "gce-named", "9004", json!({"goog-k8s-cluster-name": GKE})),
            gce_disk("europe-west1-b", "gce-named-intree", "9005", json!({"goog-k8s-cluster-name": GKE})),
            gce_disk("europe-west1-b", "gce-recreated", "9006", json!({"goog-k8s-cluster-name": GKE})),
            regional,
        ],
        "snapshots": [
            gce_csi_snapshot("snapshot-1t", "9101", GKE),
            gce_csi_snapshot("snapshot-theirs", "9102", "another"),
        ],
    });
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("one-truth"));
    let Some(gce) = available(
        "the test Compute server",
        ComputeServer::start(dir.join("gce"), gce_state),
    ) else {
        return;
    };
    let ceph = Ceph::start();
    let controller = snapshot_controller();
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let _snapshot_controller = install_snapshots(&cp, &controller);
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    // A control plane just started answers 429 while the CRD's storage initializes.
    wait_for(
        "VolumeLeftovers to be listed",
        Duration::from_secs(60),
        || {
            let leftovers = leftovers.clone();
            async move { leftovers.list(&Default::default()).await.ok().map(|_| ()) }
        },
    )
    .await;
    lap("the parts started", &mut took);

    // ---- Ceph: images, their metadata, one watched ----
    let pool = ceph.pool().to_string();
    let fsid = ceph.var("CEPH_FSID").to_string();
    let spec = |name: &str| format!("{pool}/{name}");
    let img = |n| format!("csi-vol-{}", uuid(n));
    let (released, tomb, hung, orphan, anon, theirs, watched) =
        (img(1), img(2), img(3), img(4), img(5), img(6), img(7));
    let lost = img(8);
    for i in [&released, &tomb, &hung, &orphan, &anon, &theirs, &watched] {
        ceph.rbd(&["create", &spec(i), "--size", "16M"]);
    }
    for (image, cluster) in [
        (&orphan, CLUSTER),
        (&theirs, "another"),
        (&watched, CLUSTER),
    ] {
        for (k, v) in [
            (rbd::META_CLUSTER_NAME, cluster),
            (rbd::META_PV_NAME, "pvc-long-gone"),
            (rbd::META_PVC_NAMESPACE, "db"),
            (rbd::META_PVC_NAME, "data"),
        ] {
            ceph.rbd(&["image-meta", "set", &spec(image), k, v]);
        }
    }
    let _watch = Watch(
        Command::new("rbd")
            .arg("-c")
            .arg(ceph.var("CEPH_CONF"))
            .args(["--id", "admin", "watch", &spec(&watched)])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rbd watch"),
    );

    // ---- EBS: volumes and a snapshot in moto ----
    let ec2 = writer(moto.port, REGION).await;
    let ours = format!("kubernetes.io/cluster/{CLUSTER}");
    let ebs_orphan = create_volume(
        &ec2,
        AZ,
        &[
            (ours.as_str(), "owned"),
            ("CSIVolumeName", "pvc-long-gone"),
            ("kubernetes.io/created-for/pvc/name", "data"),
            ("kubernetes.io/created-for/pvc/namespace", "shop"),
        ],
    )
    .await;
    let ebs_anon = create_volume(&ec2, AZ, &[]).await;
    // Another cluster's: nothing (no finding below names it).
    create_volume(&ec2, AZ, &[("kubernetes.io/cluster/another", "owned")]).await;
    let ebs_named = create_volume(&ec2, AZ, &[(ours.as_str(), "owned")]).await;
    let ebs_named_intree = create_volume(&ec2, AZ, &[(ours.as_str(), "owned")]).await;
    let ebs_prebound = create_volume(&ec2, AZ, &[(ours.as_str(), "owned")]).await;
    let ebs_snapshot = create_snapshot(
        &ec2,
        &ebs_named,
        &[
            (ours.as_str(), "owned"),
            ("CSIVolumeSnapshotName", "snapshot-1t"),
            ("kubernetes.io/created-for/volumesnapshot/name", "nightly"),
            ("kubernetes.io/created-for/volumesnapshot/namespace", "shop"),
            (
                "kubernetes.io/created-for/volumesnapshotcontent/name",
                "snapcontent-1t",
            ),
        ],
    )
    .await;

    // ---- the volumes ----
    let classes = Api::<StorageClass>::all(admin.clone());
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let ns = "vols-1t";
    create_ns(&admin, ns).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), ns);
    let retain = "sc-retain";
    create(&classes, &class(retain, "Retain")).await;
    let mut hung_class = class("sc-ceph-delete", "Delete");
    hung_class.provisioner = "rbd.csi.ceph.com".into();
    create(&classes, &hung_class).await;
    let recreated_class = "sc-recreated";
    create(&classes, &class(recreated_class, "Retain")).await;

    let gce_handle = |disk: &str| format!("projects/{PROJECT}/zones/europe-west1-b/disks/{disk}");
    let mut hung_pv = rbd_pv("ceph-hung", "sc-ceph-delete", &fsid, &pool, &hung);
    hung_pv
        .spec
        .as_mut()
        .unwrap()
        .persistent_volume_reclaim_policy = Some("Delete".into());
    hung_pv.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_string(),
            "rbd.csi.ceph.com".to_string(),
        )]
        .into(),
    );
    // (PV, its claim, the claim's class and size), each pre-bound to its claim.
    let bound: Vec<(PersistentVolume, &str, &str, &str)> = vec![
        (
            rbd_pv("ceph-released", retain, &fsid, &pool, &released),
            "released",
            retain,
            "16Mi",
        ),
        (
            rbd_pv("ceph-tomb", retain, &fsid, &pool, &tomb),
            "tomb",
            retain,
            "16Mi",
        ),
        (hung_pv, "hung", "sc-ceph-delete", "16Mi"),
        (
            rbd_pv("ceph-lost", retain, &fsid, &pool, &lost),
            "ceph-lost",
            retain,
            "16Mi",
        ),
        (
            gce_pv("gce-lost", retain, &gce_handle("gce-ghost")),
            "gce-lost",
            retain,
            "10Gi",
        ),
        (
            gce_pv("gce-named", retain, &gce_handle("gce-named")),
            "gce-named",
            retain,
            "10Gi",
        ),
        (
            gce_pv(
                "gce-recreated",
                recreated_class,
                &gce_handle("gce-recreated"),
            ),
            "recreated",
            recreated_class,
            "10Gi",
        ),
        (
            in_tree("gce-lost-intree", retain, &["europe-west1-b"], |s| {
                s.gce_persistent_disk = Some(GCEPersistentDiskVolumeSource {
                    pd_name: "gce-ghost-intree".into(),
                    ..Default::default()
                })
            }),
            "gce-lost-intree",
            retain,
            "10Gi",
        ),
        (
            in_tree("gce-named-intree", retain, &["europe-west1-b"], |s| {
                s.gce_persistent_disk = Some(GCEPersistentDiskVolumeSource {
                    pd_name: "gce-named-intree".into(),
                    ..Default::default()
                })
            }),
            "gce-named-intree",
            retain,
            "10Gi",
        ),
        (
            ebs_pv("ebs-lost", retain, "vol-0123456789abcdef0", AZ),
            "ebs-lost",
            retain,
            "10Gi",
        ),
        (
            ebs_pv("ebs-named", retain, &ebs_named, AZ),
            "ebs-named",
            retain,
            "10Gi",
        ),
        (
            in_tree("ebs-lost-intree", retain, &[], |s| {
                s.aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
                    volume_id: format!("aws://{AZ}/vol-0fedcba9876543210"),
                    ..Default::default()
                })
            }),
            "ebs-lost-intree",
            retain,
            "10Gi",
        ),
        (
            in_tree("ebs-named-intree", retain, &[], |s| {
                s.aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
                    volume_id: format!("aws://{AZ}/{ebs_named_intree}"),
                    ..Default::default()
                })
            }),
            "ebs-named-intree",
            retain,
            "10Gi",
        ),
    ];
    let mut claim_uids = BTreeMap::new();
    for (p, claim, class, size) in &bound {
        create(&pvs, &for_claim(p.clone(), ns, claim)).await;
        let c = create(&claims, &pvc(ns, claim, class, size)).await;
        claim_uids.insert(claim.to_string(), c.uid().unwrap());
    }
    // Pre-bound to a claim that never comes: Available.
    let mut prebound = ebs_pv("ebs-prebound", retain, &ebs_prebound, AZ);
    prebound = for_claim(prebound, ns, "never");
    create(&pvs, &prebound).await;
    for (p, _, _, _) in &bound {
        wait_pv_phase(&pvs, &p.name_any(), "Bound").await;
    }
    wait_pv_phase(&pvs, "ebs-prebound", "Available").await;
    // Claims gone: Released (the hung one waits for an external deleter that never comes).
    for claim in ["released", "tomb", "hung", "recreated"] {
        delete(&claims, claim).await;
    }
    for p in ["ceph-released", "ceph-tomb", "ceph-hung", "gce-recreated"] {
        wait_pv_phase(&pvs, p, "Released").await;
    }
    // The claim made again: Pending (its volume names the old one's uid).
    let again = create(&claims, &pvc(ns, "recreated", recreated_class, "10Gi")).await;
    // A Delete hostPath volume whose deleter refuses it (not under /tmp): Failed, for real; a
    // Retain one whose StorageClass went too.
    let failed = released_volume(&admin, "failed", "Delete").await;
    let classless = released_volume(&admin, "classless", "Retain").await;
    delete(&classes, &classless.class).await;
    wait_pv_phase(&pvs, &failed.pv, "Failed").await;
    wait_pv_phase(&pvs, &classless.pv, "Released").await;
    lap(
        "the volumes made and bound, their claims deleted",
        &mut took,
    );

    // ---- snapshot objects, bound by the snapshot-controller ----
    cp.kubectl_ok(&["create", "namespace", SNAPS])
        .unwrap_or_else(|e| panic!("{e}"));
    let pairs = [
        ("left-content", "left-snap", "Retain"),
        ("gone-content", "gone-snap", "Retain"),
        ("lost-content", "lost-snap", "Retain"),
        ("stuck-content", "stuck-snap", "Delete"),
    ];
    let file = dir.join("snapshots.yaml");
    std::fs::write(
        &file,
        pairs
            .iter()
            .map(|(c, s, p)| pair(SNAPS, c, s, p, "{}"))
            .collect::<String>(),
    )
    .unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    for (content, snap, _) in pairs {
        wait_until(&format!("{snap} and {content} bound"), || {
            let bound = jsonpath(
                &cp,
                &["volumesnapshot", "-n", SNAPS, snap],
                "{.status.boundVolumeSnapshotContentName}",
            );
            let uid = jsonpath(
                &cp,
                &["volumesnapshotcontent", content],
                "{.spec.volumeSnapshotRef.uid}",
            );
            bound == content && !uid.is_empty()
        })
        .await;
    }
    cp.kubectl_ok(&[
        "delete",
        "volumesnapshot",
        "-n",
        SNAPS,
        "left-snap",
        "gone-snap",
        "stuck-snap",
        "--wait=false",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    lap("the snapshots bound and three deleted", &mut took);

    // ---- the census file, the price table, the operator ----
    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {CLUSTER}
clusters:
  - clusterID: {fsid}
    monitors: [\"{}\"]
    user: {}
    keyring: {}
    pools: [{{name: {pool}}}]
gce:
{}ebs:
  - region: {REGION}
    account: \"{ACCOUNT}\"
    endpoint: http://127.0.0.1:{}
    snapshots: true
",
            ceph.var("CEPH_MON_HOST"),
            ceph.var("CEPH_RO_USER"),
            ceph.var("CEPH_RO_KEYRING"),
            gce.section(
                PROJECT,
                &format!(
                    "    locations: [europe-west1-b, europe-west1]\n    clusterName: {GKE}\n    snapshots: true\n"
                )
            ),
            moto.port,
        ),
    )
    .unwrap();
    let prices = dir.join("prices.yaml");
    std::fs::write(
        &prices,
        format!(
            r#"currency: USD
volumes:
  - storageClass: {retain}
    perGiBMonth: "0.10"
  - driver: rbd.csi.ceph.com
    perGiBMonth: "0.02"
  - driver: pd.csi.storage.gke.io
    perGiBMonth: "0.04"
  - driver: ebs.csi.aws.com
    perGiBMonth: "0.08"
snapshots:
  - driver: pd.csi.storage.gke.io
    perGiBMonth: "0.05"
  - driver: ebs.csi.aws.com
    perGiBMonth: "0.05"
"#
        ),
    )
    .unwrap();
    let flags = shared_flags(&config, &prices);
    let port = free_port();
    let log = dir.join("operator.log");
    println!("operator log: {}", log.display());
    let mut operator = Running(
        binary(&cp)
            .args(["run", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--census-interval", "1s", "--census-timeout", "5s"])
            .args(&flags)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for(
        "the operator to be ready",
        Duration::from_secs(60),
        || async {
            let (code, _) = http_get(&format!("http://127.0.0.1:{port}/readyz"))?;
            (code == 200).then_some(())
        },
    )
    .await;
    lap("the operator ready", &mut took);

    // ---- the tombstones, which only a watching operator makes ----
    let published = |name: String, want: Reason| {
        let leftovers = leftovers.clone();
        async move {
            wait_leftover(&leftovers, &name, &format!("{want:?}"), |o| {
                reason(o) == Some(want)
            })
            .await
        }
    };
    published("ceph-tomb".into(), Reason::ClaimDeleted).await;
    published(
        content_leftover_name("gone-content"),
        Reason::SnapshotDeleted,
    )
    .await;
    delete(&pvs, "ceph-tomb").await;
    for content in ["gone-content", "lost-content"] {
        cp.kubectl_ok(&["delete", "volumesnapshotcontent", content, "--wait=false"])
            .unwrap_or_else(|e| panic!("{e}"));
        cp.kubectl_ok(&[
            "patch",
            "volumesnapshotcontent",
            content,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
    }
    published("ceph-tomb".into(), Reason::VolumeDeleted).await;
    for content in ["gone-content", "lost-content"] {
        published(content_leftover_name(content), Reason::ContentDeleted).await;
    }
    lap("the tombstones published", &mut took);

    // ---- converged: two more listings of every scope, decided and written ----
    let scopes = [
        Scope::from(PoolKey::new(&fsid, &pool, None)),
        volume_leftovers::census::gce::vocabulary::location(PROJECT, "europe-west1-b"),
        volume_leftovers::census::gce::vocabulary::location(PROJECT, "europe-west1"),
        volume_leftovers::census::gce::vocabulary::snapshots(PROJECT),
        volume_leftovers::census::ebs::vocabulary::region(Some(ACCOUNT), REGION),
        volume_leftovers::census::ebs::vocabulary::snapshots(Some(ACCOUNT), REGION),
    ];
    let labels: Vec<String> = scopes.iter().map(census_labels).collect();
    wait_listings_settled(port, &labels).await;
    lap(
        "two more listings of every scope decided and written",
        &mut took,
    );

    // ---- scan, once ----
    let out = binary(&cp).arg("scan").args(&flags).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    lap("scan", &mut took);
    assert_eq!(
        out.status.code(),
        Some(3),
        "leftovers found, and nothing it could not read:\n{stderr}"
    );
    let scanned: BTreeMap<String, Facts> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .map(|l| line_facts(&l))
        .collect();
    assert_eq!(
        scanned.len(),
        stdout.lines().count(),
        "one line per name:\n{stdout}"
    );

    // ---- the operator's VolumeLeftovers ----
    let objects = leftovers.list(&Default::default()).await.unwrap().items;
    let mut tombstones = BTreeMap::new();
    let mut operator_says = BTreeMap::new();
    for o in &objects {
        match reason(o) {
            // The operator's memory of a deleted object: scan has none.
            Some(r @ (Reason::VolumeDeleted | Reason::ContentDeleted)) => {
                tombstones.insert(o.name_any(), r);
            }
            _ => {
                let (name, facts) = leftover_facts(o);
                operator_says.insert(name, facts);
            }
        }
    }
    let ebs = volume_leftovers::census::ebs::vocabulary::region(Some(ACCOUNT), REGION);
    let zone = volume_leftovers::census::gce::vocabulary::location(PROJECT, "europe-west1-b");
    let disk = volume_leftovers::decide::census::disk_leftover_name;
    let expected = [
        ("ceph-released".to_string(), Reason::ClaimDeleted),
        ("ceph-hung".into(), Reason::ClaimDeleted),
        (classless.pv.clone(), Reason::ClaimDeleted),
        ("gce-recreated".into(), Reason::ClaimRecreated),
        ("ebs-prebound".into(), Reason::PreboundClaimMissing),
        (failed.pv.clone(), Reason::ReclaimFailed),
        ("ceph-lost".into(), Reason::VolumeWithoutDisk),
        ("gce-lost".into(), Reason::VolumeWithoutDisk),
        ("gce-lost-intree".into(), Reason::VolumeWithoutDisk),
        ("ebs-lost".into(), Reason::VolumeWithoutDisk),
        ("ebs-lost-intree".into(), Reason::VolumeWithoutDisk),
        (disk(&scopes[0], &orphan), Reason::DiskWithoutVolume),
        (disk(&scopes[0], &anon), Reason::DiskWithoutVolume),
        (disk(&scopes[0], &watched), Reason::DiskWithoutVolume),
        (disk(&zone, "gce-orphan"), Reason::DiskWithoutVolume),
        (disk(&zone, "gce-anon"), Reason::DiskWithoutVolume),
        (disk(&scopes[2], "gce-regional"), Reason::DiskWithoutVolume),
        (disk(&ebs, &ebs_orphan), Reason::DiskWithoutVolume),
        (disk(&ebs, &ebs_anon), Reason::DiskWithoutVolume),
        (
            disk(&scopes[3], "snapshot-1t"),
            Reason::SnapshotWithoutContent,
        ),
        (
            disk(&scopes[5], &ebs_snapshot),
            Reason::SnapshotWithoutContent,
        ),
        (
            content_leftover_name("left-content"),
            Reason::SnapshotDeleted,
        ),
        (
            content_leftover_name("stuck-content"),
            Reason::SnapshotDeleteStuck,
        ),
        (
            snapshot_leftover_name(SNAPS, "lost-snap"),
            Reason::SnapshotContentMissing,
        ),
    ];
    let published_reasons: BTreeMap<String, Value> = operator_says
        .iter()
        .map(|(n, f)| (n.clone(), f["reason"].clone()))
        .collect();
    let want: BTreeMap<String, Value> = expected
        .iter()
        .map(|(n, r)| (n.clone(), json!(r)))
        .collect();
    assert_eq!(
        published_reasons, want,
        "the world's findings, as the operator publishes them"
    );
    assert_eq!(
        tombstones,
        BTreeMap::from([
            ("ceph-tomb".to_string(), Reason::VolumeDeleted),
            (
                content_leftover_name("gone-content"),
                Reason::ContentDeleted
            ),
            (
                content_leftover_name("lost-content"),
                Reason::ContentDeleted
            ),
        ])
    );
    // A few facts the comparison below would pass on if both sides lost them.
    let facts = |n: &str| &operator_says[n];
    assert_eq!(
        facts("gce-recreated")["claim_current_uid"],
        json!(again.uid().unwrap())
    );
    assert_eq!(
        facts("gce-recreated")["claim_uid"],
        json!(claim_uids["recreated"])
    );
    assert_eq!(facts("gce-lost-intree")["zones"], json!(["europe-west1-b"]));
    assert_eq!(
        facts(&disk(&zone, "gce-orphan"))["hints"],
        json!([]),
        "{GKE} is this cluster"
    );
    assert_eq!(
        facts(&disk(&ebs, &ebs_anon))["hints"],
        json!(["OwnerUnknown"])
    );
    assert_eq!(
        facts(&disk(&scopes[0], &watched))["hints"],
        json!(["DiskInUse"])
    );
    assert_eq!(facts("ceph-hung")["hints"], json!(["ReclaimPolicyDelete"]));
    assert_eq!(
        facts(&classless.pv)["hints"],
        json!(["StorageClassMissing"])
    );
    assert_eq!(
        facts("gce-lost")["cost"],
        json!([null, null]),
        "a lost disk bills nothing"
    );
    assert_eq!(
        facts(&disk(&zone, "gce-orphan"))["cost"],
        json!([40, "USD"])
    );

    // ---- one truth ----
    let mut differences = Vec::new();
    for name in scanned.keys().chain(operator_says.keys()) {
        let (s, o) = (scanned.get(name), operator_says.get(name));
        if s != o && !differences.iter().any(|(n, _, _)| n == name) {
            differences.push((name.clone(), s, o));
        }
    }
    for (name, s, o) in &differences {
        eprintln!("{name}:\n  scan:     {s:?}\n  operator: {o:?}");
    }
    assert!(
        differences.is_empty(),
        "scan and the operator differ about {:?}",
        differences.iter().map(|(n, _, _)| n).collect::<Vec<_>>()
    );
    lap("compared", &mut took);

    operator.stop();
    for (what, d) in &took {
        println!("one truth: {what}: {:.1} s", d.as_secs_f64());
    }
    println!(
        "one truth: {} findings compared, {} tombstones the operator's alone, {:.1} s in all",
        scanned.len(),
        tombstones.len(),
        began.elapsed().as_secs_f64()
    );
}
