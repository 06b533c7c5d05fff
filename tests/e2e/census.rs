//! The operator's Ceph RBD census end to end: the real control plane (binding and release by the
//! controller-manager) and a real Ceph (`ceph/up.sh`), the census running as the read-only user.
//!
//! The seed's scenario: an image and a PV with ceph-csi's attributes, its claim bound, the claim
//! deleted with Retain → ClaimDeleted; `kubectl delete pv` → a VolumeDeleted tombstone naming the
//! image, which the census sees; `rbd rm` → the tombstone clears. Beside it: an image nobody
//! references → DiskWithoutVolume after the image grace (one without ownership metadata says
//! OwnerUnknown, one with a watcher DiskInUse); an image of another cluster → nothing; the image
//! under a Bound PV removed → VolumeWithoutDisk; Ceph down mid-run (OSDs paused, monitor frozen)
//! → Unknown: nothing deleted, nothing invented, and it all resumes when Ceph does; one image
//! whose details cannot be read → its finding held, the rest of the census counting.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, ResourceExt};
use volume_leftovers::census::CensusSettings;
use volume_leftovers::census::ceph::handle::PoolKey;
use volume_leftovers::census::ceph::rbd;
use volume_leftovers::census::ceph::vocabulary::leftover_name;
use volume_leftovers::census::config::CensusConfig;
use volume_leftovers::model::crd::{Hint, Reason, Subject, VolumeLeftover};

use crate::ceph::{Ceph, Frozen, Watch, uuid};
use crate::support::*;

fn class_retain(name: &str) -> StorageClass {
    crate::support::class(name, "Retain")
}

/// The resourceVersion, by name, of every VolumeLeftover this test's operator made about this
/// test's Ceph (its fsid) or this test's volumes. Not every one in the cluster: other tests share
/// the control plane, and the operator rightly writes findings about their volumes too.
async fn versions(
    leftovers: &Api<VolumeLeftover>,
    fsid: &str,
    pvs: &[&str],
) -> BTreeMap<String, String> {
    leftovers
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|o| {
            let ours = o
                .status
                .as_ref()
                .and_then(|s| s.image.as_ref())
                .is_some_and(|i| i.cluster_id.as_deref() == Some(fsid));
            ours || pvs.contains(&o.name_any().as_str())
        })
        .map(|o| (o.name_any(), o.resource_version().unwrap()))
        .collect()
}

/// Every object of `before` is still there with the same resourceVersion.
#[track_caller]
fn unchanged(before: &BTreeMap<String, String>, now: &BTreeMap<String, String>, when: &str) {
    for (name, rv) in before {
        assert_eq!(now.get(name), Some(rv), "{name} changed {when}");
    }
}

/// `volume-leftovers scan` with the census configured, as the operator's identity.
fn scan(config_file: &std::path::Path, kubeconfig: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args([
            "scan",
            "--census-image-grace",
            "3s",
            "--expansion-grace",
            "0s",
        ])
        .arg("--census-config")
        .arg(config_file)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .unwrap()
}

fn image_of(o: &VolumeLeftover) -> Option<String> {
    o.status
        .as_ref()
        .and_then(|s| s.image.as_ref())
        .map(|i| i.name.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_census_reports_images_and_volumes_that_lost_each_other_and_keeps_everything_when_ceph_is_down()
 {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let ceph = Ceph::start();
    let pool = ceph.pool().to_string();
    let fsid = ceph.var("CEPH_FSID").to_string();
    let spec = |name: &str| format!("{pool}/{name}");
    let meta = |image: &str, cluster: &str, pv: &str| {
        for (k, v) in [
            (rbd::META_CLUSTER_NAME, cluster),
            (rbd::META_PV_NAME, pv),
            (rbd::META_PVC_NAMESPACE, "db"),
            (rbd::META_PVC_NAME, "data"),
        ] {
            ceph.rbd(&["image-meta", "set", &spec(image), k, v]);
        }
    };
    let img = |n| format!("csi-vol-{}", uuid(n));
    let (kept, bound, orphan, theirs, mapped) = (img(11), img(12), img(13), img(14), img(15));
    let legacy = format!("legacy-{}", uuid(16));
    for i in [&kept, &bound, &orphan, &theirs, &mapped, &legacy] {
        ceph.rbd(&["create", &spec(i), "--size", "16M"]);
    }
    meta(&kept, "e2e", "kept-pv");
    meta(&bound, "e2e", "bound-pv");
    meta(&orphan, "e2e", "pvc-long-gone");
    meta(&theirs, "another-cluster", "pvc-theirs");
    meta(&mapped, "e2e", "pvc-mapped");
    let _watch = Watch(
        Command::new("rbd")
            .arg("-c")
            .arg(ceph.var("CEPH_CONF"))
            .args(["--id", "admin", "watch", &spec(&mapped)])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("rbd watch"),
    );

    // The volumes: a claimed one whose claim goes (Retain), and a Bound one.
    let class = unique("census-sc");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &self::class_retain(&class),
    )
    .await;
    let ns = unique("census-ns");
    create_ns(&admin, &ns).await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let kept_pv = unique("kept-pv");
    let bound_pv = unique("bound-pv");
    create(&pvs, &rbd_pv(&kept_pv, &class, &fsid, &pool, &kept)).await;
    create(&claims, &pvc(&ns, "kept", &class, "16Mi")).await;
    wait_pv_phase(&pvs, &kept_pv, "Bound").await;
    create(&pvs, &rbd_pv(&bound_pv, &class, &fsid, &pool, &bound)).await;
    create(&claims, &pvc(&ns, "bound", &class, "16Mi")).await;
    wait_pv_phase(&pvs, &bound_pv, "Bound").await;

    let config_text = format!(
        "clusterName: e2e\nclusters:\n  - clusterID: {fsid}\n    monitors: [\"{}\"]\n    user: {}\n    keyring: {}\n    pools: [{{name: {pool}}}]\n",
        ceph.var("CEPH_MON_HOST"),
        ceph.var("CEPH_RO_USER"),
        ceph.var("CEPH_RO_KEYRING"),
    );
    let config_file = ceph.dir.join("census.yaml");
    std::fs::write(&config_file, &config_text).unwrap();
    let config = CensusConfig::parse(&config_text).unwrap();
    let key = PoolKey::new(&fsid, &pool, None);
    let mut settings = test_settings();
    settings.census = Some(CensusSettings {
        config,
        interval: Duration::from_secs(1),
        image_grace: Duration::from_secs(3),
        timeout: Duration::from_secs(3),
        deadline: Duration::from_secs(30),
    });
    let operator = Operator::start(cp.operator_client().await, settings);
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());

    // Images nobody references, older than the grace.
    let orphan_vl = wait_leftover(
        &leftovers,
        &leftover_name(&key, &orphan),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    let s = orphan_vl.status.clone().unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.hints.is_empty(), "{:?}", s.hints);
    let info = s.image.unwrap();
    assert_eq!(
        (
            info.backend,
            info.cluster_id.as_deref(),
            info.pool.as_deref()
        ),
        (
            Some(volume_leftovers::model::crd::DiskBackend::named("ceph")),
            Some(fsid.as_str()),
            Some(pool.as_str())
        )
    );
    assert_eq!(info.size_bytes, Some(16 * 1024 * 1024));
    assert_eq!(
        info.owner.unwrap().volume_name.as_deref(),
        Some("pvc-long-gone")
    );
    assert_eq!(orphan_vl.spec.volume_name, "");
    let legacy_vl = wait_leftover(
        &leftovers,
        &leftover_name(&key, &legacy),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    assert_eq!(legacy_vl.status.unwrap().hints, vec![Hint::OwnerUnknown]);
    let mapped_vl = wait_leftover(
        &leftovers,
        &leftover_name(&key, &mapped),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    assert_eq!(mapped_vl.status.unwrap().hints, vec![Hint::DiskInUse]);
    // The other cluster's image, and the ones volumes name, are nobody's findings.
    operator.wait_idle().await;
    let names: Vec<String> = leftovers
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(image_of)
        .collect();
    for not in [&theirs, &kept, &bound] {
        assert!(!names.contains(not), "{not} was reported: {names:?}");
    }

    // The seed's scenario: the claim goes (Retain), then the PV; the tombstone names the image
    // and stays while the census finds it.
    delete(&claims, "kept").await;
    wait_leftover(&leftovers, &kept_pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    cp.kubectl_ok(&["delete", "pv", &kept_pv]).unwrap();
    let tomb = wait_leftover(&leftovers, &kept_pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let m = tomb.status.unwrap().message;
    assert!(m.contains(&format!("the RBD image {pool}/{kept}")), "{m}");
    // The census finds the image: the tombstone stays and says so.
    let confirmed = wait_leftover(&leftovers, &kept_pv, "the census finds the image", |o| {
        o.status.as_ref().is_some_and(|s| {
            s.message
                .ends_with(volume_leftovers::decide::classify::NOTE_FOUND)
        })
    })
    .await;
    assert_eq!(reason(&confirmed), Some(Reason::VolumeDeleted));
    assert!(
        leftovers
            .get_opt(&leftover_name(&key, &kept))
            .await
            .unwrap()
            .is_none(),
        "a tombstone's image is not also an orphan"
    );

    // An image grown in Ceph under a Bound volume (`rbd resize`, as by hand or by an expansion
    // that stopped before the PV was updated): it bills more than the cluster shows.
    let grown = img(18);
    ceph.rbd(&["create", &spec(&grown), "--size", "16M"]);
    let grown_pv = unique("grown-pv");
    create(&pvs, &rbd_pv(&grown_pv, &class, &fsid, &pool, &grown)).await;
    create(&claims, &pvc(&ns, "grown", &class, "16Mi")).await;
    wait_pv_phase(&pvs, &grown_pv, "Bound").await;
    operator.wait_idle().await;
    assert!(
        leftovers.get_opt(&grown_pv).await.unwrap().is_none(),
        "an image of its volume's size is no finding"
    );
    ceph.rbd(&["resize", &spec(&grown), "--size", "32M"]);
    let mismatch = wait_leftover(&leftovers, &grown_pv, "DiskSizeMismatch", |o| {
        reason(o) == Some(Reason::DiskSizeMismatch)
    })
    .await;
    let s = mismatch.status.unwrap();
    assert_eq!(s.disk_size_bytes, Some(32 << 20));
    assert!(
        s.message.contains("Its disk is 32Mi, larger"),
        "{}",
        s.message
    );

    // The image under the Bound volume is removed: data loss.
    ceph.rbd(&["rm", &spec(&bound)]);
    let lost = wait_leftover(&leftovers, &bound_pv, "VolumeWithoutDisk", |o| {
        reason(o) == Some(Reason::VolumeWithoutDisk)
    })
    .await;
    let s = lost.status.unwrap();
    assert_eq!(s.subject, Subject::VolumeAndDisk);
    assert!(s.message.contains("its data is lost"), "{}", s.message);

    // Ceph stops answering: every census answer is Unknown. Nothing is deleted, nothing is
    // invented: a new volume naming an image that does not exist is not reported meanwhile.
    let before = versions(&leftovers, &fsid, &[&kept_pv, &bound_pv, &grown_pv]).await;
    // The outage: the OSDs paused (clients hold every request: `ceph osd pause`), then the
    // monitor frozen (connecting times out). Not a frozen OSD: SIGSTOP in the middle of a request
    // can leave that object's requests held for minutes after SIGCONT (seen with memstore), which
    // makes the recovery below a matter of Ceph's luck; the operator's answer to that is Unknown
    // for the pool (the listing) or for the one image (its details), as designed.
    ceph.ceph(&["osd", "pause"]);
    wait_metric(
        &operator.metrics,
        &format!(r#"volume_leftovers_census_up{{pool="{key}"}}"#),
        |v| v == 0.0,
    )
    .await;
    let frozen = Frozen::new(ceph.pid("CEPH_MON_PID"));
    let failures = format!(r#"volume_leftovers_census_failures_total{{pool="{key}"}}"#);
    let failed = metric(&operator.metrics, &failures);
    let ghost_pv = unique("ghost-pv");
    create(&pvs, &rbd_pv(&ghost_pv, &class, &fsid, &pool, &img(17))).await;
    // Two censuses fail with the ghost's PV there: the two listings that "missing" needs were
    // tried, and neither may count.
    wait_metric(&operator.metrics, &failures, |v| v >= failed + 2.0).await;
    operator.wait_idle().await;
    let during = versions(&leftovers, &fsid, &[&kept_pv, &bound_pv, &grown_pv]).await;
    unchanged(&before, &during, "while Ceph was down");
    assert!(
        !during.contains_key(&ghost_pv),
        "a finding invented while Ceph was down"
    );
    drop(frozen);
    ceph.ceph(&["osd", "unpause"]);

    // Ceph is back: what it could not say before, it says now (the census reconnects at its
    // next turn; the time is printed, the bound is 3 minutes).
    let thawed = std::time::Instant::now();
    wait_for(
        &format!("VolumeLeftover {ghost_pv}: VolumeWithoutDisk after Ceph is back"),
        Duration::from_secs(180),
        || async {
            let o = leftovers.get_opt(&ghost_pv).await.ok().flatten()?;
            (reason(&o) == Some(Reason::VolumeWithoutDisk)).then_some(())
        },
    )
    .await;
    println!(
        "census: the finding Ceph could not confirm while stalled came {:.1} s after it was back",
        thawed.elapsed().as_secs_f64()
    );
    // And nothing else changed: the same Ceph says the same about everything else.
    operator.wait_idle().await;
    let after = versions(&leftovers, &fsid, &[&kept_pv, &bound_pv, &grown_pv]).await;
    unchanged(&before, &after, "after Ceph was back");
    // `scan` runs the same census once: the same image findings under the same names, and the
    // volume whose image is gone.
    let out = scan(&config_file, &cp.kubeconfig("operator"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "leftovers found: {stderr}");
    let line_of = |name: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!(r#"{{"name": "{name}","#)))
            .unwrap_or_else(|| panic!("no line for {name} in:\n{stdout}"))
            .to_string()
    };
    assert!(line_of(&leftover_name(&key, &orphan)).contains(r#""reason": "DiskWithoutVolume""#));
    assert!(line_of(&ghost_pv).contains(r#""reason": "VolumeWithoutDisk""#));
    let grown_line = line_of(&grown_pv);
    assert!(
        grown_line.contains(r#""reason": "DiskSizeMismatch""#)
            && grown_line.contains(&format!(r#""disk_size_bytes": {}"#, 32 << 20)),
        "{grown_line}"
    );
    assert!(
        !stdout.contains(&theirs),
        "another cluster's image in the scan:\n{stdout}"
    );
    assert!(
        !stdout.contains(&leftover_name(&key, &kept)),
        "a tombstone's image is its record, not an orphan, in the scan too:\n{stdout}"
    );

    // An image whose details cannot be read (its header made unreadable, as an OSD that holds
    // its requests makes it): the finding about it stays as it is, the metric counts it, and
    // `scan` says its census is incomplete. Then it is readable again.
    let orphan_name = leftover_name(&key, &orphan);
    let orphan_rv = leftovers
        .get(&orphan_name)
        .await
        .unwrap()
        .resource_version();
    let id = ceph.rbd_json(&["info", &spec(&orphan)])["id"]
        .as_str()
        .expect("image id")
        .to_string();
    let header = format!("rbd_header.{id}");
    let saved = ceph.dir.join("features.bin");
    let saved_arg = saved.to_str().unwrap();
    ceph.rados(
        &["-p", &pool, "getomapval", &header, "features", saved_arg],
        b"",
    );
    let features = std::fs::read(&saved).unwrap();
    assert_eq!(features.len(), 8, "the features of {header}: {features:?}");
    ceph.rados(&["-p", &pool, "setomapval", &header, "features"], b"x");
    let unread = format!(r#"volume_leftovers_census_images_unread{{pool="{key}"}}"#);
    wait_metric(&operator.metrics, &unread, |v| v >= 1.0).await;
    operator.wait_idle().await;
    let o = leftovers.get(&orphan_name).await.unwrap();
    assert_eq!(
        o.resource_version(),
        orphan_rv,
        "the unreadable image's finding changed"
    );
    assert_eq!(reason(&o), Some(Reason::DiskWithoutVolume));
    let out = scan(&config_file, &cp.kubeconfig("operator"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(stderr.contains("could not be read"), "{stderr}");
    ceph.rados(&["-p", &pool, "setomapval", &header, "features"], &features);

    // The removed image's tombstone clears after two censuses without it.
    ceph.rbd(&["rm", &spec(&kept)]);
    wait_leftover_gone(&leftovers, &kept_pv).await;
    operator.stop().await;
    for pv in [&ghost_pv, &bound_pv, &grown_pv] {
        delete(&pvs, pv).await;
    }
    delete(&Api::<StorageClass>::all(admin.clone()), &class).await;
    delete(
        &Api::<k8s_openapi::api::core::v1::Namespace>::all(admin),
        &ns,
    )
    .await;
    ceph.stop();
}

/// The `-ceph` image (`VL_IMAGE_CEPH=1 scripts/image.sh`) carries every library the census
/// loads: its root filesystem alone (chroot, none of the host's libraries visible) runs `scan
/// --census-config` against the real Ceph and control plane and reports an unreferenced image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ceph_image_carries_what_the_census_needs() {
    let binary = std::env::var_os("VL_RELEASE_BINARY")
        .filter(|b| !b.is_empty())
        .map(std::path::PathBuf::from)
        .expect(
            "VL_RELEASE_BINARY is not set: this test builds the -ceph image from the release binary \
             (scripts/test.sh builds it and sets it)",
        );
    let cp = cp();
    let ceph = Ceph::start();
    let pool = ceph.pool().to_string();
    let fsid = ceph.var("CEPH_FSID").to_string();
    let orphan = format!("csi-vol-{}", uuid(21));
    ceph.rbd(&["create", &format!("{pool}/{orphan}"), "--size", "4M"]);

    let image_dir = ceph.dir.join("image");
    let out = Command::new(crate::support::repo().join("scripts/image.sh"))
        .env("VL_BINARY", &binary)
        .env("VL_IMAGE_DIR", &image_dir)
        .env("VL_IMAGE_CEPH", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "VL_IMAGE_CEPH=1 scripts/image.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(image_dir.join("summary.json")).unwrap())
            .unwrap();
    let version = summary["version"].as_str().unwrap_or_default().to_string();
    assert!(version.ends_with("-ceph"), "{summary}");
    let oci = summary["oci"].as_str().expect("oci").to_string();

    // The image's root filesystem, unpacked as a runtime would.
    let bundle = ceph.dir.join("bundle");
    let out = Command::new("umoci")
        .args(["unpack", "--image", &oci])
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "umoci unpack: {out:?}");
    let rootfs = bundle.join("rootfs");
    assert!(
        ["lib", "usr/lib"]
            .iter()
            .any(|d| rootfs.join(d).join("x86_64-linux-gnu/librbd.so.1").exists()),
        "librbd in the image"
    );
    let cfg = rootfs.join("cfg");
    std::fs::create_dir_all(&cfg).unwrap();
    let flat = cp
        .kubectl_ok(&[
            "config",
            "view",
            "--raw",
            "--flatten",
            "--kubeconfig",
            cp.kubeconfig("operator").to_str().unwrap(),
        ])
        .unwrap();
    std::fs::write(cfg.join("kubeconfig"), flat).unwrap();
    std::fs::copy(ceph.var("CEPH_RO_KEYRING"), cfg.join("keyring")).unwrap();
    std::fs::write(
        cfg.join("census.yaml"),
        format!(
            "clusters:\n  - clusterID: {fsid}\n    monitors: [\"{}\"]\n    user: {}\n    keyring: /cfg/keyring\n    pools: [{{name: {pool}}}]\n",
            ceph.var("CEPH_MON_HOST"),
            ceph.var("CEPH_RO_USER"),
        ),
    )
    .unwrap();
    let out = Command::new("/usr/sbin/chroot")
        .arg(&rootfs)
        .args([
            "/usr/local/bin/volume-leftovers",
            "scan",
            "--census-image-grace",
            "0s",
            "--census-config",
            "/cfg/census.yaml",
        ])
        .env_clear()
        .env("KUBECONFIG", "/cfg/kubeconfig")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let key = PoolKey::new(&fsid, &pool, None);
    assert!(
        stdout.contains(&format!(r#"{{"name": "{}","#, leftover_name(&key, &orphan))),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&bundle);
    ceph.stop();
}
