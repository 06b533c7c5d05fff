//! The facts the operator reports, produced by the real controller-manager: binding, release of
//! a Retain volume with its claimRef intact, and a recreated claim that cannot bind.

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::support::*;

#[tokio::test]
async fn controller_manager_binds_then_releases_a_retain_volume_keeping_its_claim_ref() {
    let admin = cp().admin().await;
    let Claimed {
        pv: pv_name,
        ns,
        class: class_name,
        claim,
    } = claimed_volume(&admin, "life", "Retain").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);

    let bound = wait_pv_phase(&pvs, &pv_name, "Bound").await;
    let r = bound
        .spec
        .as_ref()
        .unwrap()
        .claim_ref
        .as_ref()
        .expect("claimRef when Bound");
    assert_eq!(r.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(r.name.as_deref(), Some("data"));
    assert_eq!(
        r.uid, claim.metadata.uid,
        "the claimRef carries the claim's uid"
    );
    // The PV controller binds the volume first (its claimRef), then the claim (its volumeName),
    // in a second update: the claim may lag the volume by a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let bound_claim = loop {
        let c = claims.get("data").await.unwrap();
        let named =
            c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(pv_name.as_str());
        if named || std::time::Instant::now() > deadline {
            break c;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        bound_claim.spec.as_ref().unwrap().volume_name.as_deref(),
        Some(pv_name.as_str())
    );

    delete(&claims, "data").await;
    let released = wait_pv_phase(&pvs, &pv_name, "Released").await;
    let r = released
        .spec
        .as_ref()
        .unwrap()
        .claim_ref
        .as_ref()
        .expect("claimRef survives release");
    assert_eq!(r.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(r.name.as_deref(), Some("data"));
    assert_eq!(
        r.uid, claim.metadata.uid,
        "the stale pointer still names the old uid"
    );
    let status = released.status.as_ref().unwrap();
    let since = status
        .last_phase_transition_time
        .as_ref()
        .expect("lastPhaseTransitionTime");
    assert!(since.0 >= claim.metadata.creation_timestamp.as_ref().unwrap().0);

    delete(&pvs, &pv_name).await;
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}

#[tokio::test]
async fn a_recreated_claim_stays_pending_while_the_released_volume_names_the_old_uid() {
    let admin = cp().admin().await;
    let Claimed {
        pv: pv_name,
        ns,
        class: class_name,
        claim: old,
    } = claimed_volume(&admin, "recreate", "Retain").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    delete(&claims, "data").await;
    wait_pv_phase(&pvs, &pv_name, "Released").await;

    // Same name, class and size: only the stale claimRef can stop it from binding.
    let new = create(&claims, &pvc(&ns, "data", &class_name, "1Gi")).await;
    assert_ne!(new.uid(), old.uid(), "same name, new identity");
    // The binder has looked at the new claim and found nothing to bind it to, twice: each time
    // it looks, it tries to provision instead and says it cannot (the class has no
    // provisioner), counting the same Event up.
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(admin.clone(), &ns);
    let uid = new.uid().unwrap();
    let looked = wait_for(
        "the binder to look at the new claim twice",
        Duration::from_secs(60),
        || async {
            let lp = ListParams::default().fields(&format!("involvedObject.uid={uid}"));
            let list = events.list(&lp).await.ok()?;
            list.items
                .into_iter()
                .find(|e| e.count.unwrap_or(1) >= 2)
                .map(|e| {
                    format!(
                        "{}: {}",
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    )
                })
        },
    )
    .await;
    println!("lifecycle: the binder on the new claim: {looked}");
    let new = claims.get("data").await.unwrap();
    assert_eq!(
        new.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "the new claim cannot bind the Released volume"
    );
    let pv = pvs.get(&pv_name).await.unwrap();
    assert_eq!(phase(&pv), "Released");
    assert_eq!(
        pv.spec.unwrap().claim_ref.unwrap().uid,
        old.metadata.uid,
        "the PV still points at the old uid"
    );

    delete(&claims, "data").await;
    delete(&pvs, &pv_name).await;
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}

#[tokio::test]
async fn two_control_planes_run_side_by_side_and_stop_without_leftovers() {
    let a = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let b = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let (url_a, url_b) = (a.env_value("APISERVER_URL"), b.env_value("APISERVER_URL"));
    assert_ne!(url_a, url_b, "each instance has its own ports");
    let version = a.kubectl_ok(&["version", "-o", "json"]).unwrap();
    assert!(
        version.contains("\"gitVersion\": \"v1.36.3\""),
        "stamped version: {version}"
    );
    let pids = a.pids();
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver, kube-controller-manager"
    );
    let port: u16 = url_a.rsplit(':').next().unwrap().parse().unwrap();

    drop(a);
    for pid in pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .unwrap_or_default()
                    .contains("zombie"),
            "process {pid} outlived down.sh"
        );
    }
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "the apiserver port {port} is free again"
    );
    // The other instance is unaffected.
    assert!(b.kubectl_ok(&["get", "--raw", "/readyz"]).is_ok());
}

#[tokio::test]
async fn a_killed_owner_leaves_no_control_plane_behind() {
    // The owner (a test binary, the demo) dies without cleaning up: SIGKILL, no Drop, no trap.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("controlplane-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut owner = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"controlplane/up.sh "$1" --owner-pid $$ 2>/dev/null && echo up && exec sleep 600"#)
        .arg("owner")
        .arg(&dir)
        .current_dir(repo())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(owner.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "up", "the control plane started");
    let pids: Vec<u32> = std::fs::read_to_string(dir.join("pids"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    assert_eq!(pids.len(), 3);
    let url = std::fs::read_to_string(dir.join("env")).unwrap();
    let port: u16 = url
        .lines()
        .find_map(|l| l.strip_prefix("APISERVER_URL="))
        .and_then(|u| u.rsplit(':').next()?.parse().ok())
        .unwrap();

    owner.kill().unwrap();
    owner.wait().unwrap();
    let alive = |pid: &u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
            !s.lines()
                .any(|l| l.starts_with("State:") && l.contains('Z'))
        })
    };
    wait_for(
        "the watchdog to stop everything",
        Duration::from_secs(30),
        || {
            let gone = !pids.iter().any(alive);
            async move { gone.then_some(()) }
        },
    )
    .await;
    assert!(
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
        "port {port} is free"
    );
}
