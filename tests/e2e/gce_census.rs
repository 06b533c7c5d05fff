//! The operator's GCE census end to end: the operator binary (`run --census-config` with a
//! `gce:` section and nothing else) on the real control plane, listing the project's own test
//! Compute server (`tests/fake-gce-compute/server.py`, NOT Google's; see tests/gce.rs) with
//! Google's client and a service-account key the server verifies.
//!
//! One project listed as a whole (aggregated): its regional disk of this cluster nobody
//! references → DiskWithoutVolume; another cluster's disk → nothing; a Bound PV whose disk is
//! in a zone with no disks (named only by the aggregated answer's warning) → VolumeWithoutDisk
//! after two listings; a Bound PV in a zone the answer marks UNREACHABLE → nothing (Unknown). A
//! second project listed by locations, one zone answering 403 → that zone's `census_up` 0, one
//! log line, and a Bound PV there without its disk → nothing.
//!
//! The seed's GKE scenario, changing the servers' state while the operator runs (the server
//! reads its state file again when it changes): a Retain StorageClass `sc-fast-repl` on
//! `pd.csi.storage.gke.io` with `replication-type: regional-pd`, a claim bound to the PV the
//! provisioner writes for a regional disk (`projects/P/regions/R/disks/pvc-…`, a node-affinity
//! term per replica zone). The claim deleted → Released → ClaimDeleted; the PV deleted → a
//! tombstone (VolumeDeleted, subject Disk) whose message says the census finds the disk; the disk
//! deleted in Compute → the tombstone closed after two listings, and never a DiskWithoutVolume
//! about that disk (watched, and absent from the audit log). In a second project listed by its
//! region: an unattributed disk → OwnerUnknown, an attached one → DiskInUse; then the region
//! hangs → `--census-timeout` ends each request, `census_up` 0, one log line (timeout), a Bound
//! PV whose disk is gone meanwhile → nothing, the findings about the region unchanged.
//!
//! The project's snapshots (`snapshots: true`), on a control plane of its own: no snapshot CRDs
//! → `scan` concludes nothing about them (exit 4); the PD CSI driver's snapshot no content
//! names → SnapshotWithoutContent (operator and `scan`), a named one, another cluster's and a
//! hand-made one → nothing; a project answering 403 on its snapshots → their scope Unknown, its
//! disks still censused; a content importing the reported snapshot clears it.
//!
//! When the server's Python cannot be installed the tests skip, except in CI (`CI=true`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume,
    PersistentVolumeClaim, VolumeNodeAffinity,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::ObjectMeta;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use volume_leftovers::decide::census::disk_leftover_name;
use volume_leftovers::decide::classify::NOTE_FOUND;
use volume_leftovers::model::crd::{Hint, Reason, Subject, VolumeLeftover};

use crate::support::*;

/// The operator binary with the census configuration `config`, short intervals, its log in
/// `log`.
fn start_operator(cp: &ControlPlane, config: &Path, port: u16, log: &Path) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"));
    cmd.args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--census-interval", "1s", "--census-image-grace", "3s"])
        .args([
            "--census-timeout",
            "3s",
            "--grace",
            "4s",
            "--delete-grace",
            "6s",
        ])
        .arg("--census-config")
        .arg(config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    println!("operator log: {}", log.display());
    Running(cmd.spawn().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gce_census_admits_aggregated_scopes_and_keeps_unknown_ones_unknown() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let cluster = unique("e2e-gke");
    let dir = cp.dir.join(unique("gce-census"));
    let agg = ComputeServer::start(
        dir.join("agg"),
        json!({
            "project": "p-agg",
            "zones": ["europe-west1-b", "europe-west1-c", "europe-west1-d"],
            "regions": ["europe-west1"],
            "unreachable": ["zones/europe-west1-d"],
            "disks": [
                {
                    "region": "europe-west1", "name": "pvc-seed", "id": "7001", "sizeGb": "20",
                    "type": "pd-ssd", "replicaZones": ["europe-west1-b", "europe-west1-c"],
                    "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
                    "lastDetachTimestamp": "2026-03-02T09:30:00.000-08:00", "status": "READY",
                    "labels": {"goog-k8s-cluster-name": cluster},
                    "description": json!({
                        "kubernetes.io/created-for/pv/name": "pvc-seed",
                        "kubernetes.io/created-for/pvc/name": "pvc2",
                        "kubernetes.io/created-for/pvc/namespace": "default",
                    }).to_string(),
                },
                {
                    "zone": "europe-west1-b", "name": "theirs", "id": "7002", "sizeGb": "10",
                    "type": "pd-balanced", "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
                    "status": "READY", "labels": {"goog-k8s-cluster-name": "another-cluster"},
                },
            ],
        }),
    );
    let fixed = ComputeServer::start(
        dir.join("fixed"),
        json!({
            "project": "p-fixed",
            "zones": ["europe-west1-b", "europe-west1-c"],
            "errors": {"zones/europe-west1-c": {"status": 403}},
        }),
    );
    let Some((agg, fixed)) = started(agg, fixed) else {
        return;
    };

    // Bound PVs: one whose disk is in a zone with no disks, one in an unreachable zone, one in
    // the zone that answers 403.
    let class = unique("gce-sc");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &crate::support::class(&class, "Retain"),
    )
    .await;
    let ns = unique("gce-ns");
    create_ns(&admin, &ns).await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let gone_pv = unique("gce-gone-pv");
    let unreachable_pv = unique("gce-unreachable-pv");
    let forbidden_pv = unique("gce-forbidden-pv");
    for (pv, claim, handle) in [
        (
            &gone_pv,
            "gone",
            "projects/p-agg/zones/europe-west1-c/disks/gone-disk",
        ),
        (
            &unreachable_pv,
            "unreachable",
            "projects/p-agg/zones/europe-west1-d/disks/far-disk",
        ),
        (
            &forbidden_pv,
            "forbidden",
            "projects/p-fixed/zones/europe-west1-c/disks/hidden-disk",
        ),
    ] {
        create(&pvs, &gce_pv(pv, &class, handle)).await;
        create(&claims, &pvc(&ns, claim, &class, "10Gi")).await;
        wait_pv_phase(&pvs, pv, "Bound").await;
    }

    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\ngce:\n{}{}",
            agg.section("p-agg", ""),
            fixed.section(
                "p-fixed",
                "    locations: [europe-west1-b, europe-west1-c]\n"
            ),
        ),
    )
    .unwrap();
    let port = free_port();
    let log = dir.join("operator.log");
    let mut operator = start_operator(cp, &config, port, &log);
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let region = volume_leftovers::census::gce::vocabulary::location("p-agg", "europe-west1");

    // The seed's disk: a regional PD of this cluster nothing names.
    let seed = wait_leftover(
        &leftovers,
        &disk_leftover_name(&region, "pvc-seed"),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    let s = seed.status.clone().unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.hints.is_empty(), "ours: {:?}", s.hints);
    assert_eq!(s.capacity_bytes, Some(20 << 30));
    let info = s.image.unwrap();
    assert_eq!(
        (
            info.account.as_deref(),
            info.region.as_deref(),
            info.zone.as_deref(),
            info.cluster_id.as_deref()
        ),
        (Some("p-agg"), Some("europe-west1"), None, None)
    );
    assert_eq!(
        info.owner.and_then(|o| o.claim_name).as_deref(),
        Some("pvc2")
    );

    // The empty zone joined the census when the aggregated answer named it: the PV whose disk
    // is not there is data loss.
    let lost = wait_leftover(&leftovers, &gone_pv, "VolumeWithoutDisk", |o| {
        reason(o) == Some(Reason::VolumeWithoutDisk)
    })
    .await;
    assert_eq!(lost.status.unwrap().subject, Subject::VolumeAndDisk);
    assert_eq!(
        scraped(
            port,
            r#"volume_leftovers_census_up{backend="gce",scope="p-agg/europe-west1-c"}"#
        ),
        Some(1.0)
    );

    // Unknown: the unreachable zone and the forbidden one.
    wait_for(
        "census_up of the unreachable and the forbidden zones to be 0",
        Duration::from_secs(60),
        || async {
            let up = |s: &str| {
                scraped(
                    port,
                    &format!(r#"volume_leftovers_census_up{{backend="gce",scope="{s}"}}"#),
                )
            };
            (up("p-agg/europe-west1-d") == Some(0.0)
                && up("p-fixed/europe-west1-c") == Some(0.0)
                && up("p-fixed/europe-west1-b") == Some(1.0))
            .then_some(())
        },
    )
    .await;
    // Their siblings of the same listings decided twice more: the Unknown zones were too.
    wait_census_settled(port, "gce", "p-agg/europe-west1-b").await;
    wait_census_settled(port, "gce", "p-fixed/europe-west1-b").await;
    for not in [&unreachable_pv, &forbidden_pv] {
        assert!(
            leftovers.get_opt(not).await.unwrap().is_none(),
            "{not}: a finding while its zone is Unknown"
        );
    }
    let all: Vec<String> = leftovers
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|o| o.status.as_ref()?.image.as_ref().map(|i| i.name.clone()))
        .collect();
    assert!(!all.contains(&"theirs".to_string()), "{all:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    let failing: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.contains("the census of the scope failed") && l.contains("p-fixed/europe-west1-c")
        })
        .collect();
    assert_eq!(failing.len(), 1, "one line when it starts failing:\n{text}");
    assert!(failing[0].contains("forbidden"), "{}", failing[0]);

    operator.stop();
    for n in [seed.name_any(), gone_pv.clone()] {
        let _ = leftovers.delete(&n, &Default::default()).await;
    }
    for pv in [&gone_pv, &unreachable_pv, &forbidden_pv] {
        let _ = pvs.delete(pv, &Default::default()).await;
    }
}

// --- The seed's GKE scenario ------------------------------------------------------------------

const DRIVER: &str = "pd.csi.storage.gke.io";
/// The project listed as a whole, and its region of the regional PD.
const GKE_PROJECT: &str = "p-gke";
const GKE_REGION: &str = "europe-west1";
const GKE_ZONES: [&str; 2] = ["europe-west1-b", "europe-west1-c"];
/// The project listed by locations, its one region made to hang.
const HANG_PROJECT: &str = "p-gke-hang";
const HANG_REGION: &str = "europe-west4";
const HANG_ZONES: [&str; 2] = ["europe-west4-a", "europe-west4-b"];

/// `sc-fast-repl` as the seed applies it: the PD CSI driver, Retain, regional PDs. (Immediate
/// binding: the control plane has no scheduler to pick a node for WaitForFirstConsumer.)
fn regional_class(name: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        provisioner: DRIVER.into(),
        reclaim_policy: Some("Retain".into()),
        volume_binding_mode: Some("Immediate".into()),
        parameters: Some(
            [("type", "pd-ssd"), ("replication-type", "regional-pd")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        ),
        ..StorageClass::default()
    }
}

/// The PV the external-provisioner writes for `claim` once the driver made a regional disk:
/// named `pvc-<claim uid>` like the disk, pre-bound to the claim (the PV controller completes
/// the binding), `provisioned-by` the driver, and one node-affinity term per replica zone (one
/// per accessible-topology segment, under the driver's key).
fn provisioned_pv(
    claim: &PersistentVolumeClaim,
    class: &str,
    handle: &str,
    zones: [&str; 2],
) -> PersistentVolume {
    let name = format!("pvc-{}", claim.uid().unwrap());
    let mut pv = gce_pv(&name, class, handle);
    pv.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_string(),
            DRIVER.to_string(),
        )]
        .into(),
    );
    let spec = pv.spec.as_mut().unwrap();
    // The disk's size (20 GB, `sizeGb`): the PV controller binds no PV smaller than the claim.
    spec.capacity = Some([("storage".to_string(), Quantity("20Gi".into()))].into());
    spec.claim_ref = Some(claim_ref(
        &claim.namespace().unwrap(),
        &claim.name_any(),
        &claim.uid().unwrap(),
    ));
    let csi = spec.csi.as_mut().unwrap();
    csi.fs_type = Some("ext4".into());
    csi.volume_attributes = Some(
        [(
            "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
            format!("1764000000000-1234-{DRIVER}"),
        )]
        .into(),
    );
    let term = |zone: &str| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: "topology.gke.io/zone".into(),
            operator: "In".into(),
            values: Some(vec![zone.into()]),
        }]),
        ..NodeSelectorTerm::default()
    };
    spec.node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: zones.iter().map(|z| term(z)).collect(),
        }),
    });
    pv
}

/// A regional disk as Compute lists it; with `owner` (cluster, PV, claim) labelled and described
/// as the GKE driver does (`None`: made by hand, nothing names an owner).
fn regional_disk(
    region: &str,
    zones: [&str; 2],
    name: &str,
    id: &str,
    owner: Option<(&str, &str, &PersistentVolumeClaim)>,
) -> Value {
    let mut d = json!({
        "region": region, "name": name, "id": id, "sizeGb": "20", "type": "pd-ssd",
        "replicaZones": zones, "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
        "status": "READY",
    });
    if let Some((cluster, pv, claim)) = owner {
        d["labels"] = json!({"goog-k8s-cluster-name": cluster});
        d["description"] = json!({
            "kubernetes.io/created-for/pv/name": pv,
            "kubernetes.io/created-for/pvc/name": claim.name_any(),
            "kubernetes.io/created-for/pvc/namespace": claim.namespace().unwrap(),
            "storage.gke.io/created-by": DRIVER,
        })
        .to_string()
        .into();
    }
    d
}

/// The GCE census's `census_up` of `project/location`.
fn census_up(port: u16, project: &str, location: &str) -> Option<f64> {
    scraped(
        port,
        &format!(r#"volume_leftovers_census_up{{backend="gce",scope="{project}/{location}"}}"#),
    )
}

/// What the scenario made and watches.
struct Gke {
    cluster: String,
    repl: ComputeServer,
    hang: ComputeServer,
    classes: Api<StorageClass>,
    class: String,
    claims: Api<PersistentVolumeClaim>,
    pvs: Api<PersistentVolume>,
    leftovers: Api<VolumeLeftover>,
    /// The claim `pvc2` of the seed, its PV and disk (`pvc-<claim uid>`), and the PV's handle.
    claim: PersistentVolumeClaim,
    pv: String,
    handle: String,
    /// The claim and PV in the hanging project.
    kept_claim: PersistentVolumeClaim,
    kept_pv: String,
    /// The aggregated listing's path on `repl`.
    aggregated: String,
}

impl Gke {
    /// Step a's objects: the class, two claims of it, and for each the regional disk (written
    /// into the running server's state) and the PV the driver and the external-provisioner
    /// make, bound by the controller-manager.
    async fn provision(admin: &kube::Client, repl: ComputeServer, hang: ComputeServer) -> Gke {
        let cluster = unique("e2e-gke-repl");
        let class = unique("sc-fast-repl");
        let classes = Api::<StorageClass>::all(admin.clone());
        create(&classes, &regional_class(&class)).await;
        let ns = unique("gke-ns");
        create_ns(admin, &ns).await;
        let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
        let pvs = Api::<PersistentVolume>::all(admin.clone());
        let claim = create(&claims, &pvc(&ns, "pvc2", &class, "20Gi")).await;
        let kept_claim = create(&claims, &pvc(&ns, "kept", &class, "20Gi")).await;
        let pv = format!("pvc-{}", claim.uid().unwrap());
        let kept_pv = format!("pvc-{}", kept_claim.uid().unwrap());
        let handle = format!("projects/{GKE_PROJECT}/regions/{GKE_REGION}/disks/{pv}");
        let kept_handle = format!("projects/{HANG_PROJECT}/regions/{HANG_REGION}/disks/{kept_pv}");
        let g = Gke {
            aggregated: format!("/compute/v1/projects/{GKE_PROJECT}/aggregated/disks"),
            leftovers: Api::<VolumeLeftover>::all(admin.clone()),
            cluster,
            repl,
            hang,
            classes,
            class,
            claims,
            pvs,
            claim,
            pv,
            handle,
            kept_claim,
            kept_pv,
        };
        g.repl.set_state(&g.repl_state(true));
        g.hang.set_state(&g.hang_state(false));
        create(
            &g.pvs,
            &provisioned_pv(&g.claim, &g.class, &g.handle, GKE_ZONES),
        )
        .await;
        create(
            &g.pvs,
            &provisioned_pv(&g.kept_claim, &g.class, &kept_handle, HANG_ZONES),
        )
        .await;
        wait_pv_phase(&g.pvs, &g.pv, "Bound").await;
        wait_pv_phase(&g.pvs, &g.kept_pv, "Bound").await;
        g
    }

    /// The aggregated project: its region, with the seed's disk or without.
    fn repl_state(&self, with_disk: bool) -> Value {
        let disks: Vec<Value> = with_disk
            .then(|| {
                let owner = (self.cluster.as_str(), self.pv.as_str(), &self.claim);
                regional_disk(GKE_REGION, GKE_ZONES, &self.pv, "8001", Some(owner))
            })
            .into_iter()
            .collect();
        json!({"project": GKE_PROJECT, "zones": GKE_ZONES, "regions": [GKE_REGION], "disks": disks})
    }

    /// The hanging project: a disk nobody can attribute, an attached disk of this cluster, and
    /// the disk under the Bound PV `kept` — unless `hang`: then the region hangs and that disk
    /// is gone (the census must not see it missing).
    fn hang_state(&self, hang: bool) -> Value {
        let mut mounted = regional_disk(HANG_REGION, HANG_ZONES, "mounted", "8102", None);
        mounted["labels"] = json!({"goog-k8s-cluster-name": self.cluster});
        mounted["users"] = json!([format!(
            "https://www.googleapis.com/compute/v1/projects/{HANG_PROJECT}/zones/{}/instances/gke-node-1",
            HANG_ZONES[0]
        )]);
        let loose = regional_disk(HANG_REGION, HANG_ZONES, "loose", "8101", None);
        let mut state =
            json!({"project": HANG_PROJECT, "regions": [HANG_REGION], "disks": [loose, mounted]});
        if hang {
            state["errors"] = json!({format!("regions/{HANG_REGION}"): {"hang": 600}});
        } else {
            let owner = (
                self.cluster.as_str(),
                self.kept_pv.as_str(),
                &self.kept_claim,
            );
            let kept = regional_disk(HANG_REGION, HANG_ZONES, &self.kept_pv, "8103", Some(owner));
            state["disks"].as_array_mut().unwrap().push(kept);
        }
        state
    }

    /// The census configuration: the first project listed as a whole, the second by its region.
    fn config(&self, path: &Path) {
        let section = |f: &ComputeServer, project: &str, extra: &str| f.section(project, extra);
        let text = format!(
            "clusterName: {}\ngce:\n{}{}",
            self.cluster,
            section(&self.repl, GKE_PROJECT, ""),
            section(
                &self.hang,
                HANG_PROJECT,
                &format!("    locations: [{HANG_REGION}]\n")
            ),
        );
        std::fs::write(path, text).unwrap();
    }

    /// Waits until the census has completed `n` more listings of the aggregated project's
    /// region than now, and the operator has decided and written what they concluded.
    async fn listings(&self, port: u16, n: u32) {
        let labels = format!(r#"backend="gce",scope="{GKE_PROJECT}/{GKE_REGION}""#);
        wait_settled_after(port, "runs", n, &[labels]).await;
    }

    /// The name a finding about the seed's disk without a volume would have.
    fn disk_finding(&self) -> String {
        let region = volume_leftovers::census::gce::vocabulary::location(GKE_PROJECT, GKE_REGION);
        disk_leftover_name(&region, &self.pv)
    }

    /// Steps b and c: the claim deleted, the PV Released (ClaimDeleted); the PV deleted, its
    /// finding the disk's tombstone, confirmed by the census over several listings and never
    /// joined by a DiskWithoutVolume.
    async fn claim_then_volume_deleted(&self, port: u16, recorder: &Recorder) {
        delete(&self.claims, "pvc2").await;
        wait_pv_phase(&self.pvs, &self.pv, "Released").await;
        let released = wait_leftover(&self.leftovers, &self.pv, "ClaimDeleted", |o| {
            reason(o) == Some(Reason::ClaimDeleted)
        })
        .await;
        let s = released.status.clone().unwrap();
        assert_eq!(s.subject, Subject::Volume);
        assert_eq!(s.reclaim_policy, "Retain");
        assert_eq!(
            s.source.volume_handle.as_deref(),
            Some(self.handle.as_str())
        );

        delete(&self.pvs, &self.pv).await;
        let tomb = wait_leftover(&self.leftovers, &self.pv, "VolumeDeleted", |o| {
            reason(o) == Some(Reason::VolumeDeleted)
        })
        .await;
        assert_eq!(tomb.uid(), released.uid(), "the same object");
        let s = tomb.status.clone().unwrap();
        assert_eq!(s.subject, Subject::Disk);
        assert_eq!(
            s.source.volume_handle.as_deref(),
            Some(self.handle.as_str())
        );
        assert!(s.message.ends_with(NOTE_FOUND), "{}", s.message);
        // Listings that find the disk while only the tombstone names it: a census that did not
        // count the tombstone would report the disk now.
        self.listings(port, 3).await;
        let still = self.leftovers.get(&self.pv).await.unwrap();
        assert_eq!(reason(&still), Some(Reason::VolumeDeleted));
        assert_eq!(
            recorder.of(&self.disk_finding()),
            Vec::<Option<Reason>>::new(),
            "the tombstone names the disk: no DiskWithoutVolume"
        );
    }

    /// Step d: the disk deleted in Compute; once two listings missed it, the tombstone is
    /// closed, and no DiskWithoutVolume was ever written about the disk.
    async fn disk_deleted(&self, cp: &ControlPlane, recorder: &Recorder) {
        let from = self.repl.requests(&self.aggregated);
        self.repl.set_state(&self.repl_state(false));
        wait_leftover_gone(&self.leftovers, &self.pv).await;
        let listings = self.repl.requests(&self.aggregated) - from;
        assert!(
            listings >= 2,
            "closed after {listings} listing(s) without the disk"
        );
        let disk_finding = self.disk_finding();
        assert_eq!(
            recorder.of(&disk_finding),
            Vec::<Option<Reason>>::new(),
            "nor once the disk is gone"
        );
        assert_eq!(cp.operator_writes(&disk_finding), 0);
    }

    /// Step e: the hanging project's region stops answering (each request would hang for ten
    /// minutes, longer than a scope's whole listing may take): the census timeout ends each
    /// request, the scope is Unknown (`census_up` 0, one log line naming a timeout), the Bound
    /// PV whose disk is gone meanwhile gets no finding, and what was published about the scope
    /// stays as it was.
    async fn region_hangs(&self, port: u16, published: &[String], log: &Path) {
        let path = format!("/compute/v1/projects/{HANG_PROJECT}/regions/{HANG_REGION}/disks");
        let mut before = Vec::new();
        for name in published {
            before.push(self.leftovers.get(name).await.unwrap());
        }
        let from = self.hang.requests(&path);
        self.hang.set_state(&self.hang_state(true));
        // Three attempts of 3 s and their backoff: far under the 300 s a listing may take, and
        // the 600 s each request would hang without the timeout.
        wait_for(
            "census_up of the hanging region to be 0",
            Duration::from_secs(40),
            || async { (census_up(port, HANG_PROJECT, HANG_REGION) == Some(0.0)).then_some(()) },
        )
        .await;
        // A second whole listing failed, and the operator decided what followed from both.
        let labels = format!(r#"backend="gce",scope="{HANG_PROJECT}/{HANG_REGION}""#);
        wait_settled_after(port, "failures", 1, &[labels]).await;
        assert!(
            self.hang.requests(&path) >= from + 6,
            "each failed listing tried three times"
        );
        assert_eq!(census_up(port, HANG_PROJECT, HANG_REGION), Some(0.0));
        assert!(
            self.leftovers
                .get_opt(&self.kept_pv)
                .await
                .unwrap()
                .is_none(),
            "{}: a finding while its region is Unknown",
            self.kept_pv
        );
        for before in &before {
            let now = self.leftovers.get(&before.name_any()).await.unwrap();
            assert_eq!(
                now.resource_version(),
                before.resource_version(),
                "{} changed while its region hung",
                before.name_any()
            );
        }
        let text = std::fs::read_to_string(log).unwrap();
        let failing: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.contains("the census of the scope failed")
                    && l.contains(&format!("{HANG_PROJECT}/{HANG_REGION}"))
            })
            .collect();
        assert_eq!(failing.len(), 1, "one line when it starts failing:\n{text}");
        assert!(failing[0].contains("timeout"), "{}", failing[0]);
    }

    async fn cleanup(&self, published: &[String]) {
        for name in published {
            delete(&self.leftovers, name).await;
        }
        delete(&self.pvs, &self.kept_pv).await;
        delete(&self.claims, "kept").await;
        delete(&self.classes, &self.class).await;
    }
}

/// The seed's GKE scenario, the operator binary on the real control plane listing the project's
/// own Compute server: a Retain claim of the regional class deleted, then its PV, and the disk
/// followed until the census no longer finds it; then a region that hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retained_regional_pd_is_followed_until_gone_and_a_hanging_region_stays_unknown() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let dir = cp.dir.join(unique("gke-repl"));
    let repl = ComputeServer::start(dir.join("repl"), json!({"project": GKE_PROJECT}));
    let hang = ComputeServer::start(dir.join("hang"), json!({"project": HANG_PROJECT}));
    let Some((repl, hang)) = started(repl, hang) else {
        return;
    };
    let g = Gke::provision(&admin, repl, hang).await;
    let config = dir.join("census.yaml");
    g.config(&config);
    // Every VolumeLeftover the operator ever publishes, to prove that no DiskWithoutVolume was.
    let recorder = Recorder::start(admin.clone()).await;
    let (port, log) = (free_port(), dir.join("operator.log"));
    let mut operator = start_operator(cp, &config, port, &log);

    // a. The hanging project's disks while it answers: unattributed → OwnerUnknown, attached →
    // DiskInUse. The Bound regional PV whose disk the census finds: nothing about either.
    let hang_scope = volume_leftovers::census::gce::vocabulary::location(HANG_PROJECT, HANG_REGION);
    let mut published = Vec::new();
    for (disk, hint) in [("loose", Hint::OwnerUnknown), ("mounted", Hint::DiskInUse)] {
        let name = disk_leftover_name(&hang_scope, disk);
        let o = wait_leftover(&g.leftovers, &name, "DiskWithoutVolume", |o| {
            reason(o) == Some(Reason::DiskWithoutVolume)
        })
        .await;
        assert_eq!(o.status.unwrap().hints, vec![hint], "{disk}");
        published.push(name);
    }
    g.listings(port, 2).await;
    assert_eq!(census_up(port, GKE_PROJECT, GKE_REGION), Some(1.0));
    assert_eq!(census_up(port, HANG_PROJECT, HANG_REGION), Some(1.0));
    for not in [&g.pv, &g.kept_pv, &g.disk_finding()] {
        assert!(
            g.leftovers.get_opt(not).await.unwrap().is_none(),
            "{not} reported"
        );
    }

    g.claim_then_volume_deleted(port, &recorder).await;
    g.disk_deleted(cp, &recorder).await;
    g.region_hangs(port, &published, &log).await;
    assert_eq!(
        census_up(port, GKE_PROJECT, GKE_REGION),
        Some(1.0),
        "the other project counts"
    );

    operator.stop();
    recorder.stop();
    g.cleanup(&published).await;
}

// --- The project's snapshots (`snapshots: true`) ---------------------------------------------

/// A pre-provisioned VolumeSnapshotContent of the PD CSI driver naming `handle`.
fn gce_content(name: &str, handle: &str) -> String {
    format!(
        "apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata:
  name: {name}
spec:
  deletionPolicy: Retain
  driver: {DRIVER}
  source:
    snapshotHandle: {handle}
  volumeSnapshotRef:
    namespace: default
    name: {name}
"
    )
}

/// `scan` with this census file, as the operator's identity.
fn scan_with(cp: &ControlPlane, config: &Path) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "--census-image-grace", "0s", "--census-config"])
        .arg(config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The GCE snapshot census end to end, on a control plane of its own. Before the snapshot CRDs
/// are served, `scan` concludes nothing about the snapshots (exit 4, said per scope). Then: the
/// PD CSI driver's snapshot no content names → `SnapshotWithoutContent` with the handle a
/// content would carry (`projects/P/global/snapshots/NAME`), from the operator and from `scan`;
/// the one a content names, another cluster's, one cut by hand → nothing; a project whose role
/// lacks `compute.snapshots.list` (403) → its snapshots' `census_up` 0 and `scan` exit 4 naming
/// them, its disks still censused; a content importing the reported snapshot clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gce_snapshot_census_reports_the_snapshots_no_content_names() {
    let cluster = unique("e2e-gke-snap");
    let project = "p-snap";
    let snap = ComputeServer::start(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("gce-snap")),
        json!({
            "project": project,
            "zones": ["europe-west1-b"], "regions": ["europe-west1"],
            "snapshots": [
                gce_csi_snapshot("snapshot-orphan", "8101", &cluster),
                gce_csi_snapshot("snapshot-kept", "8102", &cluster),
                gce_csi_snapshot("snapshot-theirs", "8103", "another-cluster"),
                {"name": "by-hand", "id": "8104", "diskSizeGb": "10", "status": "READY",
                 "creationTimestamp": "2026-03-03T10:00:00.000-08:00",
                 "description": "a backup made by hand",
                 "labels": {"goog-k8s-cluster-name": cluster}},
            ],
        }),
    );
    let denied = ComputeServer::start(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique("gce-snap-denied")),
        json!({
            "project": "p-denied",
            "zones": ["europe-west1-b"],
            "snapshots": [gce_csi_snapshot("snapshot-hidden", "8201", &cluster)],
            "errors": {"global/snapshots": {"status": 403, "message": "Required 'compute.snapshots.list' permission for 'projects/p-denied'"}},
        }),
    );
    let Some((snap, denied)) = started(snap, denied) else {
        return;
    };
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let dir = cp.dir.join(unique("gce-snapshots"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\ngce:\n{}{}",
            snap.section(project, "    snapshots: true\n"),
            denied.section(
                "p-denied",
                "    locations: [europe-west1-b]\n    snapshots: true\n"
            ),
        ),
    )
    .unwrap();
    let scope = volume_leftovers::census::gce::vocabulary::snapshots(project);
    let orphan = disk_leftover_name(&scope, "snapshot-orphan");
    let handle = |name: &str| format!("projects/{project}/global/snapshots/{name}");

    // A control plane just started answers 429 while the CRD's storage initializes.
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    wait_for(
        "VolumeLeftovers to be listed",
        Duration::from_secs(60),
        || {
            let leftovers = leftovers.clone();
            async move { leftovers.list(&Default::default()).await.ok().map(|_| ()) }
        },
    )
    .await;

    // No snapshot CRDs yet: which snapshots the contents name is not known.
    let (code, stdout, stderr) = scan_with(&cp, &config);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(
        stderr.contains("gce:p-snap/snapshots: the VolumeSnapshotContents could not be read"),
        "{stderr}"
    );
    assert!(!stdout.contains(&orphan), "nothing concluded:\n{stdout}");

    crate::csi::apply_snapshot_crds(&cp);
    let file = dir.join("content.yaml");
    std::fs::write(&file, gce_content("kept-content", &handle("snapshot-kept"))).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    let port = free_port();
    let log = dir.join("operator.log");
    let _operator = start_operator(&cp, &config, port, &log);
    let found = wait_leftover(&leftovers, &orphan, "SnapshotWithoutContent", |o| {
        reason(o) == Some(Reason::SnapshotWithoutContent)
    })
    .await;
    let s = found.status.clone().unwrap();
    assert_eq!(s.subject, Subject::BackendSnapshot);
    assert!(s.hints.is_empty(), "ours: {:?}", s.hints);
    assert_eq!(s.source.driver.as_deref(), Some(DRIVER));
    let info = s.snapshot.expect("status.snapshot");
    assert_eq!(
        info.snapshot_handle.as_deref(),
        Some(handle("snapshot-orphan").as_str())
    );
    assert_eq!(info.content.as_deref(), Some("snapcontent-8101"));
    assert_eq!(info.snapshot.as_deref(), Some("shop/vs-snapshot-orphan"));
    let up = |scope: &str| {
        scraped(
            port,
            &format!(r#"volume_leftovers_census_up{{backend="gce",scope="{scope}"}}"#),
        )
    };
    wait_for(
        "the denied project's snapshots down, its disks and p-snap's snapshots up",
        Duration::from_secs(60),
        || async {
            (up("p-snap/snapshots") == Some(1.0)
                && up("p-denied/snapshots") == Some(0.0)
                && up("p-denied/europe-west1-b") == Some(1.0))
            .then_some(())
        },
    )
    .await;
    wait_census_settled(port, "gce", "p-snap/snapshots").await;
    let others = ["snapshot-kept", "snapshot-theirs", "by-hand"];
    for not in others {
        let n = disk_leftover_name(&scope, not);
        assert!(
            leftovers.get_opt(&n).await.unwrap().is_none(),
            "{not}: no finding"
        );
    }
    let hidden = disk_leftover_name(
        &volume_leftovers::census::gce::vocabulary::snapshots("p-denied"),
        "snapshot-hidden",
    );
    assert!(leftovers.get_opt(&hidden).await.unwrap().is_none());

    // `scan` says the same, and that it does not know the denied project's snapshots.
    let (code, stdout, stderr) = scan_with(&cp, &config);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(
        stderr.contains("the GCE census of gce:p-denied/snapshots failed (forbidden)")
            && stderr.contains("nothing is said about its snapshots"),
        "{stderr}"
    );
    let line = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["name"] == orphan.as_str())
        .unwrap_or_else(|| panic!("scan reports {orphan}: {stdout}\n{stderr}"));
    assert_eq!(line["reason"], "SnapshotWithoutContent", "{line}");
    assert_eq!(
        line["snapshot_handle"],
        handle("snapshot-orphan").as_str(),
        "{line}"
    );
    assert_eq!(line["created_for_content"], "snapcontent-8101", "{line}");
    assert_eq!(
        line["created_for_snapshot"], "shop/vs-snapshot-orphan",
        "{line}"
    );
    assert_eq!(line["scope"], "gce:p-snap/snapshots", "{line}");
    assert_eq!(line["project"], project, "{line}");
    for not in others {
        let n = disk_leftover_name(&scope, not);
        assert!(!stdout.contains(&n), "scan: {not} is no finding: {stdout}");
    }
    assert!(!stdout.contains(&hidden), "Unknown, not orphaned: {stdout}");

    // A content imports the reported snapshot: its finding goes.
    std::fs::write(
        &file,
        gce_content("imported-content", &handle("snapshot-orphan")),
    )
    .unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_leftover_gone(&leftovers, &orphan).await;
}
