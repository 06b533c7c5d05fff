//! A claim whose expansion stopped (`ExpansionStuck`, issue 30), with the real control plane's
//! expand controller and external-resizer's csi-resizer sidecar (v1.14.0, built from its Go
//! module) growing the volumes of the project's test CSI driver: a class that allows expansion,
//! volumes bound by the PV controller, their claims' requests raised.
//!
//! - A hostPath volume: no in-tree plugin expands it and no resizer serves it, so the expand
//!   controller hands it to an external one (its `ExternalExpanding` event) and nothing grows
//!   it: a real expansion stopped before anything acted on it.
//! - A CSI volume the driver cannot grow past 1.5Gi: the resizer's ControllerExpandVolume gets
//!   OutOfRange and the resizer records ControllerResizeInfeasible; the request lowered back to
//!   1.5Gi, the resizer grows it and the resize completes.
//! - 100 CSI volumes grown normally by the resizer while the operator runs: nothing published.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};
use volume_leftovers::model::expansion::ResizeStep;

use crate::csi::{Resizer, TEST_DRIVER};
use crate::support::*;

/// A PV of the test CSI driver (which the resizer grows), `handle` its volume handle.
fn csi_pv(name: &str, class: &str, size: &str, handle: &str) -> PersistentVolume {
    let mut p = pv(name, class, size, "Retain");
    let spec = p.spec.as_mut().unwrap();
    spec.host_path = None;
    spec.csi = Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
        driver: TEST_DRIVER.into(),
        volume_handle: handle.into(),
        ..Default::default()
    });
    p
}

/// Waits until claim `name` has the capacity `size` and no resize status.
async fn wait_grown(claims: &Api<PersistentVolumeClaim>, name: &str, size: &str) {
    wait_for(
        &format!("claim {name} grown to {size} by the resizer"),
        Duration::from_secs(60),
        || async {
            let s = claims.get(name).await.ok()?.status?;
            let capacity = s.capacity?.get("storage")?.0.clone();
            let pending = s.allocated_resource_statuses.is_some_and(|m| !m.is_empty());
            (capacity == size && !pending).then_some(())
        },
    )
    .await;
}

/// `volume-leftovers scan` as the operator's identity, with these flags: (exit code, the line
/// of `pv` if any, everything it printed).
fn scan_line(
    cp: &ControlPlane,
    pv: &str,
    flags: &[&str],
) -> (Option<i32>, Option<serde_json::Value>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .arg("scan")
        .args(flags)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .output()
        .expect("running scan");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let text = format!(
        "--- stdout\n{stdout}--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["name"] == pv);
    (out.status.code(), line, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_expansion_is_published_after_its_grace_and_clears_once_it_completes() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());

    // A class that allows expansion (without it the API server refuses the raised request),
    // a 1Gi hostPath volume and its claim, bound by the PV controller.
    let class_name = unique("grow-sc");
    let mut sc = class(&class_name, "Retain");
    sc.allow_volume_expansion = Some(true);
    create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    let ns = unique("grow-ns");
    create_ns(&admin, &ns).await;
    let pv_name = unique("grow-pv");
    create(&pvs, &pv(&pv_name, &class_name, "1Gi", "Retain")).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    create(&claims, &pvc(&ns, "data", &class_name, "1Gi")).await;
    // And a 1Gi volume of the test CSI driver, which cannot grow past 1.5Gi.
    let limited_pv = unique("limited-pv");
    let handle = format!("limit-{}-{limited_pv}", 1536u64 << 20);
    create(&pvs, &csi_pv(&limited_pv, &class_name, "1Gi", &handle)).await;
    create(&claims, &pvc(&ns, "limited", &class_name, "1Gi")).await;
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    wait_pv_phase(&pvs, &limited_pv, "Bound").await;
    for claim in ["data", "limited"] {
        wait_for(
            "the claim Bound with its capacity",
            Duration::from_secs(60),
            || async {
                let c = claims.get(claim).await.ok()?;
                let s = c.status?;
                (s.phase.as_deref() == Some("Bound") && s.capacity.is_some()).then_some(())
            },
        )
        .await;
    }
    let _resizer = Resizer::start(cp).await;

    let grace = Duration::from_secs(8);
    let settings = volume_leftovers::run::settings::Settings {
        graces: volume_leftovers::decide::plan::Graces {
            expansion_grace: grace,
            ..test_settings().graces
        },
        ..test_settings()
    };
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_synced().await;

    // The requests raised: the API server accepts them (the class allows expansion); the expand
    // controller passes the hostPath one on to an external resizer that is not there, and the
    // resizer asks the driver to grow the CSI one, which it cannot.
    for claim in ["data", "limited"] {
        claims
            .patch(
                claim,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
            )
            .await
            .expect("raising the request");
    }
    let raised = Instant::now();
    let events = Api::<Event>::namespaced(admin.clone(), &ns);
    let said = wait_for(
        "the expand controller's ExternalExpanding event on the claim",
        Duration::from_secs(60),
        || async {
            let list = events.list(&ListParams::default()).await.ok()?;
            list.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("ExternalExpanding")
                    && e.involved_object.name.as_deref() == Some("data")
            })
        },
    )
    .await;
    eprintln!(
        "expansion: the expand controller said {:?} after {:.1?}",
        said.message.unwrap_or_default(),
        raised.elapsed()
    );

    // Not published while the resize could still be under way.
    while raised.elapsed() < grace - Duration::from_secs(1) {
        for pv in [&pv_name, &limited_pv] {
            assert!(
                leftovers.get_opt(pv).await.unwrap().is_none(),
                "ExpansionStuck published about {pv} {:.1?} after the raise, within the grace of {grace:?}",
                raised.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let vl = wait_leftover(&leftovers, &pv_name, "ExpansionStuck", |o| {
        reason(o) == Some(Reason::ExpansionStuck)
    })
    .await;
    let took = raised.elapsed();
    assert!(
        took >= grace - Duration::from_millis(500),
        "published after {took:?}"
    );
    let s = vl.status.unwrap();
    let e = s
        .claim
        .as_ref()
        .unwrap()
        .expansion
        .as_ref()
        .expect("status.claim.expansion");
    assert_eq!((e.requested.as_str(), e.capacity.as_str()), ("2Gi", "1Gi"));
    assert_eq!(e.stopped_at, ResizeStep::NotStarted, "{e:?}");
    assert!(
        s.message.contains(
            "which asks for 2Gi but has 1Gi: its expansion stopped before anything acted on it"
        ),
        "{}",
        s.message
    );
    eprintln!("expansion: ExpansionStuck published {took:.1?} after the raise (grace {grace:?})");
    let first_pv = pv_name.clone();

    // The resizer's answer about the CSI volume: the driver cannot grow it to 2Gi.
    let pv_name = limited_pv.clone();
    let vl = wait_leftover(
        &leftovers,
        &pv_name,
        "stopped at ControllerInfeasible",
        |o| {
            o.status
                .as_ref()
                .and_then(|s| s.claim.as_ref()?.expansion.as_ref())
                .is_some_and(|e| e.stopped_at == ResizeStep::ControllerInfeasible)
        },
    )
    .await;
    let s = vl.status.unwrap();
    assert!(
        s.message.contains("cannot grow past 1610612736 bytes"),
        "{}",
        s.message
    );
    assert!(
        s.message.contains("lower the request back"),
        "{}",
        s.message
    );

    // scan says the same, with the same keys; by default it holds back a step only seconds
    // old, and says so.
    let (code, line, text) = scan_line(cp, &pv_name, &["--expansion-grace", "0s"]);
    let line = line.unwrap_or_else(|| panic!("no line for {pv_name}\n{text}"));
    let s = leftovers.get(&pv_name).await.unwrap().status.unwrap();
    assert_eq!(code, Some(3), "{text}");
    assert_eq!(line["reason"], "ExpansionStuck", "{line}");
    assert_eq!(
        line["expansion"]["stopped_at"], "ControllerInfeasible",
        "{line}"
    );
    assert_eq!(line["expansion"]["requested"], "2Gi", "{line}");
    assert_eq!(line["expansion"]["capacity_bytes"], 1i64 << 30, "{line}");
    assert_eq!(line["message"], s.message.as_str(), "{line}");
    let (_, held, text) = scan_line(cp, &pv_name, &[]);
    assert!(
        held.is_none(),
        "a step seconds old reported by default\n{text}"
    );
    assert!(
        text.contains(&pv_name) && text.contains("--expansion-grace 3600s"),
        "{text}"
    );

    // The request lowered back, as the recovery from expansion failures permits (above the
    // capacity: the API server refuses less) ...
    claims
        .patch(
            "limited",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "1536Mi"}}}})),
        )
        .await
        .expect("lowering the request back");
    let refused = claims
        .patch(
            "limited",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await;
    assert!(
        refused.is_err(),
        "the API server let the request fall to the capacity"
    );
    // ... and the resizer grows the disk to it: the capacity follows, the resize status goes.
    wait_grown(&claims, "limited", "1536Mi").await;
    wait_leftover_gone(&leftovers, &pv_name).await;
    let (code, line, text) = scan_line(cp, &pv_name, &["--expansion-grace", "0s"]);
    assert!(line.is_none(), "a completed expansion reported\n{text}");
    assert_ne!(code, Some(4), "{text}");

    operator.stop().await;
    for claim in ["data", "limited"] {
        delete(&claims, claim).await;
    }
    for pv in [&pv_name, &first_pv] {
        wait_pv_phase(&pvs, pv, "Released").await;
        delete(&pvs, pv).await;
    }
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}

/// How many claims the churn expands.
const CHURN: usize = 100;

/// 100 claims expanded normally while the operator runs, with an expansion grace of 10 s: no
/// ExpansionStuck is published at any moment (the audit log: no create of a VolumeLeftover named
/// after one of their PVs). The real expand controller sees every raise and the real csi-resizer
/// grows every volume through the test CSI driver (no node expansion: the resize completes at
/// the controller). Prints `churn:` lines, the figures docs/benchmarks.md shows
/// (scripts/figures.sh expansion-churn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_normal_expansions_publish_nothing_at_any_moment() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let class_name = unique("churn-sc");
    let mut sc = class(&class_name, "Retain");
    sc.allow_volume_expansion = Some(true);
    create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    let ns = unique("churn-ns");
    create_ns(&admin, &ns).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let prefix = unique("churn-pv");
    let names: Vec<String> = (0..CHURN).map(|i| format!("{prefix}-{i}")).collect();
    let t = Instant::now();
    for (i, name) in names.iter().enumerate() {
        let mut p = csi_pv(name, &class_name, "1Gi", &format!("vol-{name}"));
        p.spec.as_mut().unwrap().claim_ref = Some(claim_ref(&ns, &format!("data-{i}"), ""));
        create(&pvs, &p).await;
        create(&claims, &pvc(&ns, &format!("data-{i}"), &class_name, "1Gi")).await;
    }
    wait_for("every claim Bound", Duration::from_secs(180), || async {
        let list = claims.list(&ListParams::default()).await.ok()?;
        let bound = list
            .items
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .is_some_and(|s| s.phase.as_deref() == Some("Bound") && s.capacity.is_some())
            })
            .count();
        (bound == CHURN).then_some(())
    })
    .await;
    println!(
        "churn: {CHURN} volumes of the test CSI driver and their claims bound by the PV controller in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let grace = Duration::from_secs(10);
    let settings = volume_leftovers::run::settings::Settings {
        graces: volume_leftovers::decide::plan::Graces {
            expansion_grace: grace,
            ..test_settings().graces
        },
        ..test_settings()
    };
    let _resizer = Resizer::start(cp).await;
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_synced().await;
    let started = jiff::Timestamp::now();

    // Each claim raised to 2Gi, spread over 3 s; the resizer grows each.
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CHURN {
        let claims = claims.clone();
        tasks.spawn(async move {
            let name = format!("data-{i}");
            tokio::time::sleep(Duration::from_millis((i as u64 * 37) % 3000)).await;
            claims
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
                )
                .await
                .expect("raising the request");
            (name, Instant::now())
        });
    }
    let mut raised: std::collections::HashMap<String, Instant> = Default::default();
    while let Some(r) = tasks.join_next().await {
        let (name, at) = r.expect("a raise");
        raised.insert(name, at);
    }
    // One listing every 250 ms (not a poll per claim): when each claim's resize completed (to
    // within the 250 ms).
    let mut took: Vec<Duration> = Vec::new();
    loop {
        let list = claims
            .list(&ListParams::default())
            .await
            .expect("listing the claims");
        for c in list.items {
            let name = c.metadata.name.unwrap_or_default();
            let grown = c.status.is_some_and(|s| {
                s.capacity
                    .and_then(|m| m.get("storage").map(|q| q.0 == "2Gi"))
                    .unwrap_or(false)
                    && s.allocated_resource_statuses.is_none_or(|m| m.is_empty())
            });
            if grown && let Some(at) = raised.remove(&name) {
                took.push(at.elapsed());
            }
        }
        if raised.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(180),
            "not grown by the resizer after 180 s: {:?}",
            raised.keys().collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    took.sort();
    println!(
        "churn: {CHURN} expansions in {:.1} s, each raise to completion (by the real resizer) {:.1} s median, {:.1} s longest; expansion grace {grace:?}",
        t.elapsed().as_secs_f64(),
        took[CHURN / 2].as_secs_f64(),
        took[CHURN - 1].as_secs_f64()
    );
    // Nothing held in its grace any more (wait_idle): an expansion the operator saw stop is
    // either seen completed since or published, which the audit below would show.
    operator.wait_idle().await;
    operator.stop().await;

    let names: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let audit = cp.audit();
    let written: Vec<String> = audit
        .iter()
        .filter(|e| {
            e["objectRef"]["resource"] == "volumeleftovers"
                && e["stageTimestamp"]
                    .as_str()
                    .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                    .is_some_and(|at| at >= started)
        })
        .filter(|e| {
            !matches!(e["verb"].as_str(), Some("get" | "list" | "watch"))
                && e["objectRef"]["name"]
                    .as_str()
                    .is_some_and(|n| names.contains(n))
        })
        .map(|e| format!("{} {}", e["verb"], e["objectRef"]["name"]))
        .collect();
    assert!(
        written.is_empty(),
        "a normal expansion was published: {written:?}"
    );
    let claim_events = audit
        .iter()
        .filter(|e| {
            e["objectRef"]["resource"] == "persistentvolumeclaims"
                && e["objectRef"]["namespace"] == ns.as_str()
                && matches!(e["verb"].as_str(), Some("patch" | "update"))
        })
        .count();
    println!(
        "churn: the audit log: {claim_events} writes to the claims, 0 writes of a VolumeLeftover about their volumes"
    );

    for i in 0..CHURN {
        let _ = claims
            .delete(&format!("data-{i}"), &Default::default())
            .await;
    }
    for name in names {
        let _ = pvs.delete(name, &Default::default()).await;
    }
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}
