//! The operator's EBS census end to end: the operator binary (`run --census-config` with an
//! `ebs:` section and nothing else) on the real control plane, listing moto's EC2
//! (`scripts/moto.sh`, `moto[server]`) through the real `aws-sdk-ec2` by its endpoint override.
//!
//! An unattached volume no PV names, older than the grace → DiskWithoutVolume with its facts; a
//! volume whose tags name another cluster → nothing; the volume under a Bound PV deleted →
//! VolumeWithoutDisk after two listings; a region answering 403 (a gate in front of moto that
//! the test closes) → that region Unknown (`census_up{backend="ebs",scope}` 0), what was
//! published about it unchanged.
//!
//! When moto cannot be installed or started the test skips, except in CI (`CI=true`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, ResourceExt};
use volume_leftovers::decide::census::disk_leftover_name;
use volume_leftovers::model::crd::{Reason, Subject, VolumeLeftover};

use crate::support::*;

/// A gate in front of moto: forwards each request while open, answers EC2's 403
/// (`UnauthorizedOperation`) once closed. One request per connection (`Connection: close`).
struct Gate {
    port: u16,
    closed: Arc<AtomicBool>,
}

impl Gate {
    fn start(target: u16) -> Gate {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let closed = Arc::new(AtomicBool::new(false));
        let c = closed.clone();
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(conn) = conn else { continue };
                let c = c.clone();
                std::thread::spawn(move || {
                    let _ = pass(conn, target, &c);
                });
            }
        });
        Gate { port, closed }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// One request: read it, forward it to moto (or refuse it), write the answer back.
fn pass(mut conn: TcpStream, target: u16, closed: &AtomicBool) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    if closed.load(Ordering::SeqCst) {
        let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>e2e-gate</RequestID></Response>";
        let answer = format!(
            "HTTP/1.1 403 Forbidden\r\nContent-Type: text/xml;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        return conn.write_all(answer.as_bytes());
    }
    // The request again, on a connection of its own to moto, closed after its answer.
    let mut out = String::new();
    for l in head.trim_end().lines() {
        if !l.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(l);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    let mut up = TcpStream::connect(("127.0.0.1", target))?;
    up.write_all(out.as_bytes())?;
    up.write_all(&buf[head_end..])?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    conn.write_all(&answer)
}

/// Every VolumeLeftover's resourceVersion, by name.
/// The operator binary with the census configuration `config`, its log in `log`.
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
            "--expansion-grace",
            "4s",
        ])
        .arg("--census-config")
        .arg(config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    println!("operator log: {}", log.display());
    Running(cmd.spawn().unwrap())
}

/// The resourceVersion of each of `names` that exists. Only this test's findings: other tests
/// share the control plane, and the operator rightly writes findings about their volumes too.
async fn versions(leftovers: &Api<VolumeLeftover>, names: &[String]) -> BTreeMap<String, String> {
    leftovers
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|o| names.contains(&o.name_any()))
        .map(|o| (o.name_any(), o.resource_version().unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ebs_census_reports_volumes_and_pvs_that_lost_each_other_and_keeps_a_forbidden_region()
{
    let Some(moto) = moto() else { return };
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let gate = Gate::start(moto.port);
    let (east, west) = ("us-east-1", "us-west-2");
    let ec2 = writer(moto.port, east).await;
    let ec2_west = writer(moto.port, west).await;
    let cluster = unique("e2e-eks");
    let ours = format!("kubernetes.io/cluster/{cluster}");
    let orphan = create_volume(
        &ec2,
        "us-east-1a",
        &[
            (ours.as_str(), "owned"),
            ("CSIVolumeName", "pvc-long-gone"),
            ("kubernetes.io/created-for/pvc/name", "data"),
            ("kubernetes.io/created-for/pvc/namespace", "shop"),
            ("Name", "scratch"),
        ],
    )
    .await;
    let theirs = create_volume(
        &ec2,
        "us-east-1a",
        &[("kubernetes.io/cluster/another-cluster", "owned")],
    )
    .await;
    let bound = create_volume(&ec2, "us-east-1a", &[(ours.as_str(), "owned")]).await;
    let far = create_volume(&ec2_west, "us-west-2a", &[(ours.as_str(), "owned")]).await;

    // A Bound PV naming `bound`.
    let class = unique("ebs-sc");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &crate::support::class(&class, "Retain"),
    )
    .await;
    let ns = unique("ebs-ns");
    create_ns(&admin, &ns).await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let bound_pv = unique("ebs-bound-pv");
    create(&pvs, &ebs_pv(&bound_pv, &class, &bound, "us-east-1a")).await;
    create(&claims, &pvc(&ns, "bound", &class, "10Gi")).await;
    wait_pv_phase(&pvs, &bound_pv, "Bound").await;

    let dir = cp.dir.join(unique("ebs-census"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\nebs:\n  - region: {east}\n    endpoint: http://127.0.0.1:{}\n  - region: {west}\n    endpoint: http://127.0.0.1:{}\n",
            moto.port, gate.port
        ),
    )
    .unwrap();
    let port = free_port();
    let log = dir.join("operator.log");
    let mut operator = start_operator(cp, &config, port, &log);
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let east_scope = volume_leftovers::census::ebs::vocabulary::region(None, east);
    let west_scope = volume_leftovers::census::ebs::vocabulary::region(None, west);

    // The volume nobody references, older than the grace: a finding with its facts.
    let found = wait_leftover(
        &leftovers,
        &disk_leftover_name(&east_scope, &orphan),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    let s = found.status.clone().unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.hints.is_empty(), "ours: {:?}", s.hints);
    assert_eq!(s.capacity_bytes, Some(10 << 30));
    assert!(
        s.message.contains(&format!("EBS volume {orphan} ({east})")),
        "{}",
        s.message
    );
    let info = s.image.unwrap();
    assert_eq!(info.name, orphan);
    // Where it is and what attributes it, in the fields every backend fills (issue 33: the
    // region sat in `pool`, and neither its zone nor its tags were said).
    assert_eq!(
        (
            info.backend,
            info.region.as_deref(),
            info.zone.as_deref(),
            info.pool.as_deref(),
            info.cluster_id.as_deref()
        ),
        (
            Some(volume_leftovers::model::crd::DiskBackend::named("ebs")),
            Some(east),
            Some("us-east-1a"),
            None,
            None
        )
    );
    assert_eq!(
        info.tags,
        [
            ("CSIVolumeName", "pvc-long-gone"),
            ("kubernetes.io/created-for/pvc/name", "data"),
            ("kubernetes.io/created-for/pvc/namespace", "shop"),
            (ours.as_str(), "owned"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
        "the attributing tags, not its Name"
    );
    let owner = info.owner.expect("the CSI driver's record");
    assert_eq!(owner.volume_name.as_deref(), Some("pvc-long-gone"));
    assert_eq!(owner.claim_name.as_deref(), Some("data"));
    assert_eq!(owner.cluster_name.as_deref(), Some(cluster.as_str()));
    let far_vl = wait_leftover(
        &leftovers,
        &disk_leftover_name(&west_scope, &far),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    assert_eq!(
        scraped(
            port,
            r#"volume_leftovers_census_up{backend="ebs",scope="us-east-1"}"#
        ),
        Some(1.0)
    );
    // Another cluster's volume, and the one a PV names: nobody's findings.
    wait_census_settled(port, "ebs", "us-east-1").await;
    for not in [&theirs, &bound] {
        assert!(
            leftovers
                .get_opt(&disk_leftover_name(&east_scope, not))
                .await
                .unwrap()
                .is_none(),
            "{not} was reported"
        );
    }
    assert!(leftovers.get_opt(&bound_pv).await.unwrap().is_none());

    // The volume under the Bound PV grown in the backend (ModifyVolume, as the console does):
    // it bills 20 GiB while the PV says 10Gi.
    ec2.modify_volume()
        .volume_id(&bound)
        .size(20)
        .send()
        .await
        .expect("ModifyVolume");
    let grown = wait_leftover(&leftovers, &bound_pv, "DiskSizeMismatch", |o| {
        reason(o) == Some(Reason::DiskSizeMismatch)
    })
    .await;
    let s = grown.status.unwrap();
    assert_eq!(s.disk_size_bytes, Some(20 << 30));
    assert_eq!(s.capacity_bytes, Some(10 << 30));
    assert!(
        s.message
            .contains("Its disk is 20Gi, larger than the PV's capacity"),
        "{}",
        s.message
    );

    // The volume under the Bound PV is deleted: data loss, once two listings missed it.
    ec2.delete_volume()
        .volume_id(&bound)
        .send()
        .await
        .expect("DeleteVolume");
    let lost = wait_leftover(&leftovers, &bound_pv, "VolumeWithoutDisk", |o| {
        reason(o) == Some(Reason::VolumeWithoutDisk)
    })
    .await;
    let s = lost.status.unwrap();
    assert_eq!(s.subject, Subject::VolumeAndDisk);

    // The western region answers 403: Unknown, and what was published about it stays.
    let ours = [found.name_any(), far_vl.name_any(), bound_pv.clone()];
    let before = versions(&leftovers, &ours).await;
    assert_eq!(before.len(), ours.len(), "{before:?}");
    gate.close();
    wait_for(
        "census_up of us-west-2 to be 0",
        Duration::from_secs(60),
        || async {
            (scraped(
                port,
                r#"volume_leftovers_census_up{backend="ebs",scope="us-west-2"}"#,
            ) == Some(0.0))
            .then_some(())
        },
    )
    .await;
    // Two more rounds of the other region decided: the forbidden one's failures were too.
    wait_census_settled(port, "ebs", "us-east-1").await;
    let during = versions(&leftovers, &ours).await;
    for (name, rv) in &before {
        assert_eq!(
            during.get(name),
            Some(rv),
            "{name} changed while us-west-2 was forbidden"
        );
    }
    assert_eq!(
        scraped(
            port,
            r#"volume_leftovers_census_up{backend="ebs",scope="us-east-1"}"#
        ),
        Some(1.0),
        "the other region counts"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let failing: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("the census of the scope failed"))
        .collect();
    assert_eq!(failing.len(), 1, "one line when it starts failing:\n{text}");
    assert!(failing[0].contains("forbidden"), "{}", failing[0]);
    assert!(
        !text.contains("Ceph RBD census on"),
        "no Ceph census without clusters:\n{text}"
    );

    operator.stop();
    for n in [found.name_any(), far_vl.name_any(), bound_pv.clone()] {
        let _ = leftovers.delete(&n, &Default::default()).await;
    }
    let _ = pvs.delete(&bound_pv, &Default::default()).await;
}

/// An upgrade from a version whose reasons, hints and subjects said "image": a published,
/// acknowledged finding spelled with the old names (`ImageWithoutVolume`, subject `Image`, hint
/// `ImageInUse`, and the old reason in its label and in what the acknowledgement covered) is
/// rewritten once, in place, with the new names: the same object (uid), its acknowledgement still
/// covering it (Acknowledged, not Superseded), firstSeen kept, and then left alone. (A disk
/// finding has no Event; that a renamed one about a PV sends none is `src/tests/plan.rs`'s.)
#[tokio::test(flavor = "multi_thread")]
async fn an_old_named_finding_is_renamed_in_place_keeping_its_acknowledgement() {
    let Some(moto) = moto() else { return };
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let region = "us-east-1";
    let ec2 = writer(moto.port, region).await;
    let cluster = unique("e2e-rename");
    let ours = format!("kubernetes.io/cluster/{cluster}");
    let attached = create_volume(&ec2, "us-east-1a", &[(ours.as_str(), "owned")]).await;
    let scope = volume_leftovers::census::ebs::vocabulary::region(None, region);
    let name = disk_leftover_name(&scope, &attached);

    let dir = cp.dir.join(unique("ebs-rename"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\nebs:\n  - region: {region}\n    endpoint: http://127.0.0.1:{}\n",
            moto.port
        ),
    )
    .unwrap();
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let raw =
        Api::<DynamicObject>::all_with(admin.clone(), &ApiResource::erase::<VolumeLeftover>(&()));

    // Published by today's operator, then stopped.
    let mut operator = start_operator(cp, &config, free_port(), &dir.join("first.log"));
    let found = wait_leftover(&leftovers, &name, "DiskWithoutVolume", |o| {
        reason(o) == Some(Reason::DiskWithoutVolume)
    })
    .await;
    operator.stop();
    let first_seen = found.status.as_ref().unwrap().first_seen.clone();

    // What an earlier version would have left: acknowledged, every disk word spelled "image".
    let ack = serde_json::json!({"by": "ops", "ticket": "OPS-7", "reason": "kept for the move"});
    raw.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({
            "metadata": {"labels": {
                "leftovers.dev/reason": "ImageWithoutVolume",
                "leftovers.dev/state": "Acknowledged",
                "hint.leftovers.dev/ImageInUse": "true",
            }},
            "spec": {"acknowledgement": ack},
        })),
    )
    .await
    .expect("label and acknowledge it");
    let mut old = serde_json::to_value(found.status.as_ref().unwrap()).unwrap();
    old["reason"] = "ImageWithoutVolume".into();
    old["subject"] = "Image".into();
    old["hints"] = serde_json::json!(["ImageInUse"]);
    old["state"] = "Acknowledged".into();
    old["acknowledged"] = serde_json::json!({
        "acknowledgement": ack,
        "reason": "ImageWithoutVolume",
        "volumeUID": "",
    });
    // Applied as the operator applies its status (its field manager), as an earlier version
    // of it would have: fields it no longer writes (the hint) are then removed by its next apply.
    let before = raw
        .patch_status(
            &name,
            &PatchParams::apply("volume-leftovers").force(),
            &Patch::Apply(serde_json::json!({
                "apiVersion": "leftovers.dev/v1alpha1",
                "kind": "VolumeLeftover",
                "status": old,
            })),
        )
        .await
        .expect("the schema still admits the old names");
    assert_eq!(before.data["status"]["reason"], "ImageWithoutVolume");

    // Today's operator again: the object moves to the new names, once.
    let port = free_port();
    let mut operator = start_operator(cp, &config, port, &dir.join("second.log"));
    let moved = wait_for(
        "the old names rewritten",
        Duration::from_secs(60),
        || async {
            let o = raw.get(&name).await.ok()?;
            (o.data["status"]["reason"] == "DiskWithoutVolume").then_some(o)
        },
    )
    .await;
    assert_eq!(moved.metadata.uid, before.metadata.uid, "the same object");
    let status = &moved.data["status"];
    assert_eq!(status["subject"], "Disk");
    assert_eq!(status["state"], "Acknowledged", "{status}");
    assert_eq!(status["acknowledged"]["reason"], "DiskWithoutVolume");
    assert_eq!(status["acknowledged"]["acknowledgement"], ack);
    assert_eq!(
        status["firstSeen"],
        serde_json::to_value(&first_seen).unwrap()
    );
    assert!(
        status.get("hints").is_none(),
        "an unattached volume: {status}"
    );
    let labels = moved.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["leftovers.dev/reason"], "DiskWithoutVolume");
    assert!(
        !labels.contains_key("hint.leftovers.dev/ImageInUse"),
        "{labels:?}"
    );
    assert_eq!(
        moved.data["spec"]["acknowledgement"], ack,
        "people's field untouched"
    );

    // Left alone afterwards: two more census rounds, decided and written, write nothing more.
    wait_census_settled(port, "ebs", region).await;
    let after = raw.get(&name).await.unwrap();
    assert_eq!(
        after.metadata.resource_version, moved.metadata.resource_version,
        "written again after the move"
    );
    operator.stop();
    let _ = leftovers.delete(&name, &Default::default()).await;
}

/// A pre-provisioned VolumeSnapshotContent naming the backend snapshot `handle`.
fn content_of(name: &str, handle: &str) -> String {
    format!(
        "apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata:
  name: {name}
spec:
  deletionPolicy: Retain
  driver: ebs.csi.aws.com
  source:
    snapshotHandle: {handle}
  volumeSnapshotRef:
    namespace: default
    name: {name}
"
    )
}

/// The EBS snapshot census (`snapshots: true`) end to end, on a control plane of its own with
/// the snapshot CRDs: the snapshot the EBS CSI driver cut that no content names becomes
/// `SnapshotWithoutContent` with what the driver recorded; the one a content names, another
/// cluster's, and one without the driver's tag are nothing; a content that starts naming the
/// reported snapshot (an import) clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ebs_snapshot_census_reports_the_snapshots_no_content_names() {
    let Some(moto) = moto() else { return };
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    crate::csi::apply_snapshot_crds(&cp);
    let admin = cp.admin().await;
    let region = "eu-central-1";
    let ec2 = writer(moto.port, region).await;
    let cluster = unique("e2e-eks");
    let ours = format!("kubernetes.io/cluster/{cluster}");
    let volume = create_volume(&ec2, "eu-central-1a", &[(ours.as_str(), "owned")]).await;
    let csi = |snapshot: &'static str| {
        vec![
            (ours.clone(), "owned".to_string()),
            (
                "CSIVolumeSnapshotName".into(),
                format!("snapshot-{snapshot}"),
            ),
            (
                "kubernetes.io/created-for/volumesnapshot/name".into(),
                snapshot.to_string(),
            ),
            (
                "kubernetes.io/created-for/volumesnapshot/namespace".into(),
                "shop".to_string(),
            ),
            (
                "kubernetes.io/created-for/volumesnapshotcontent/name".into(),
                format!("snapcontent-{snapshot}"),
            ),
        ]
    };
    let tags = |t: &[(String, String)]| -> Vec<(String, String)> { t.to_vec() };
    let make = async |t: Vec<(String, String)>| {
        let t: Vec<(&str, &str)> = t.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        create_snapshot(&ec2, &volume, &t).await
    };
    let orphan = make(tags(&csi("nightly"))).await;
    let named = make(tags(&csi("kept"))).await;
    let mut other = csi("theirs");
    other[0] = (
        "kubernetes.io/cluster/another-cluster".into(),
        "owned".into(),
    );
    let theirs = make(other).await;
    let by_hand = make(vec![(ours.clone(), "owned".into())]).await;
    let file = cp.dir.join("named-content.yaml");
    std::fs::write(&file, content_of("kept-content", &named)).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));

    let dir = cp.dir.join(unique("ebs-snapshots"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\nebs:\n  - region: {region}\n    endpoint: http://127.0.0.1:{}\n    snapshots: true\n",
            moto.port
        ),
    )
    .unwrap();
    let port = free_port();
    let log = dir.join("operator.log");
    let _operator = start_operator(&cp, &config, port, &log);
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let scope = volume_leftovers::census::ebs::vocabulary::snapshots(None, region);
    let name = disk_leftover_name(&scope, &orphan);
    let found = wait_leftover(&leftovers, &name, "SnapshotWithoutContent", |o| {
        reason(o) == Some(Reason::SnapshotWithoutContent)
    })
    .await;
    let s = found.status.clone().unwrap();
    assert_eq!(s.subject, Subject::BackendSnapshot);
    assert!(s.hints.is_empty(), "ours: {:?}", s.hints);
    assert_eq!(s.source.driver.as_deref(), Some("ebs.csi.aws.com"));
    assert_eq!(s.source.volume_handle.as_deref(), Some(volume.as_str()));
    let snap = s.snapshot.expect("status.snapshot");
    assert_eq!(snap.snapshot_handle.as_deref(), Some(orphan.as_str()));
    assert_eq!(snap.content.as_deref(), Some("snapcontent-nightly"));
    assert_eq!(snap.snapshot.as_deref(), Some("shop/nightly"));
    assert_eq!(
        scraped(
            port,
            &format!(r#"volume_leftovers_census_up{{backend="ebs",scope="{region}/snapshots"}}"#)
        ),
        Some(1.0)
    );
    // The one a content names, another cluster's, one the driver did not cut: nothing.
    wait_census_settled(port, "ebs", &format!("{region}/snapshots")).await;
    for not in [&named, &theirs, &by_hand] {
        let n = disk_leftover_name(&scope, not);
        assert!(
            leftovers.get_opt(&n).await.unwrap().is_none(),
            "{not}: no finding"
        );
    }
    // `scan` says the same, with the snapshot's keys.
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "--census-image-grace", "0s", "--census-config"])
        .arg(&config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["name"] == name.as_str())
        .unwrap_or_else(|| panic!("scan reports {name}: {stdout}\n{stderr}"));
    assert_eq!(line["reason"], "SnapshotWithoutContent", "{line}");
    assert_eq!(line["snapshot_handle"], orphan.as_str(), "{line}");
    assert_eq!(line["created_for_content"], "snapcontent-nightly", "{line}");
    assert_eq!(line["created_for_snapshot"], "shop/nightly", "{line}");
    assert_eq!(line["scope"], format!("ebs:{region}/snapshots"), "{line}");
    for not in [&named, &theirs, &by_hand] {
        let n = disk_leftover_name(&scope, not);
        assert!(!stdout.contains(&n), "scan: {not} is no finding: {stdout}");
    }
    // A content imports the reported snapshot: its finding goes.
    std::fs::write(&file, content_of("imported-content", &orphan)).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_leftover_gone(&leftovers, &name).await;
}
