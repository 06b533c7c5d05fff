//! A claim whose expansion stopped (`ExpansionStuck`, issue 30), with the real control plane's
//! expand controller: a class that allows expansion, a volume bound by the PV controller, its
//! claim's request raised. No resizer serves the volume (a hostPath PV: no in-tree plugin expands
//! it and no CSI external-resizer runs here), so kube-controller-manager's expand controller
//! hands it to an external one (its `ExternalExpanding` event) and nothing grows it: a real
//! stuck expansion. Where a state needs a resizer's answer (infeasible, completed), the test
//! writes the claim's status through the API as a resizer would, and says so.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};
use volume_leftovers::model::expansion::ResizeStep;

use crate::support::*;

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
    let _lock = operator_lock(Flavor::Full).await;
    let cp = cp();
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
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    wait_for(
        "the claim Bound with its capacity",
        Duration::from_secs(60),
        || async {
            let c = claims.get("data").await.ok()?;
            let s = c.status?;
            (s.phase.as_deref() == Some("Bound") && s.capacity.is_some()).then_some(())
        },
    )
    .await;

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

    // The request raised: the API server accepts it (the class allows expansion) and the
    // expand controller passes it on to an external resizer that is not there.
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .expect("raising the request");
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
        assert!(
            leftovers.get_opt(&pv_name).await.unwrap().is_none(),
            "ExpansionStuck published {:.1?} after the raise, within the grace of {grace:?}",
            raised.elapsed()
        );
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

    // A resizer's answer, written by the test as the CSI external-resizer writes it: the disk
    // cannot grow to 2Gi.
    let since = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "allocatedResources": {"storage": "2Gi"},
                "allocatedResourceStatuses": {"storage": "ControllerResizeInfeasible"},
                "conditions": [{
                    "type": "ControllerResizeError", "status": "True",
                    "lastTransitionTime": since,
                    "message": "resize volume \"data\" by resizer \"example.csi\" failed: rpc error: code = OutOfRange desc = the pool has no room for 2Gi",
                }],
            }})),
        )
        .await
        .expect("writing the claim's status as a resizer would");
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
        s.message.contains("the pool has no room for 2Gi"),
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
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "1536Mi"}}}})),
        )
        .await
        .expect("lowering the request back");
    let refused = claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}})),
        )
        .await;
    assert!(
        refused.is_err(),
        "the API server let the request fall to the capacity"
    );
    // ... and the resizer grows the disk to it (written by the test as a resizer would: the
    // capacity follows, the resize status and the error go).
    claims
        .patch_status(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "capacity": {"storage": "1536Mi"},
                "allocatedResources": {"storage": "1536Mi"},
                "allocatedResourceStatuses": null,
                "conditions": null,
            }})),
        )
        .await
        .expect("completing the resize as a resizer would");
    wait_leftover_gone(&leftovers, &pv_name).await;
    let (code, line, text) = scan_line(cp, &pv_name, &["--expansion-grace", "0s"]);
    assert!(line.is_none(), "a completed expansion reported\n{text}");
    assert_ne!(code, Some(4), "{text}");

    operator.stop().await;
    delete(&claims, "data").await;
    wait_pv_phase(&pvs, &pv_name, "Released").await;
    delete(&pvs, &pv_name).await;
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}

/// How many claims the churn expands.
const CHURN: usize = 100;

/// 100 claims expanded normally while the operator runs, with an expansion grace of 10 s: no
/// ExpansionStuck is published at any moment (the audit log: no create of a VolumeLeftover named
/// after one of their PVs). The real expand controller sees every raise; no resizer serves a
/// hostPath volume, so the test completes each resize as the external-resizer and the kubelet do
/// (the claim's status: allocatedResources and the resize status while it "grows", then the
/// capacity), after 0.5 to 4 s. Prints `churn:` lines, the figures docs/benchmarks.md shows
/// (scripts/figures.sh expansion-churn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_normal_expansions_publish_nothing_at_any_moment() {
    let _lock = operator_lock(Flavor::Full).await;
    let cp = cp();
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
        let mut p = pv(name, &class_name, "1Gi", "Retain");
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
        "churn: {CHURN} hostPath volumes and claims bound by the PV controller in {:.1} s",
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
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_synced().await;
    let started = jiff::Timestamp::now();

    // Each claim: raised to 2Gi; the "resizer" answers at once (allocatedResources, in
    // progress), and the resize completes 0.5 to 4 s later (capacity 2Gi, nothing pending).
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CHURN {
        let claims = claims.clone();
        tasks.spawn(async move {
            let name = format!("data-{i}");
            tokio::time::sleep(Duration::from_millis((i as u64 * 37) % 3000)).await;
            let raised = Instant::now();
            claims
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
                )
                .await
                .expect("raising the request");
            claims
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {
                        "allocatedResources": {"storage": "2Gi"},
                        "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
                    }})),
                )
                .await
                .expect("the resizer's answer");
            tokio::time::sleep(Duration::from_millis(500 + (i as u64 * 131) % 3500)).await;
            claims
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {
                        "capacity": {"storage": "2Gi"},
                        "allocatedResourceStatuses": null,
                    }})),
                )
                .await
                .expect("the resize completed");
            raised.elapsed()
        });
    }
    let mut took: Vec<Duration> = Vec::new();
    while let Some(r) = tasks.join_next().await {
        took.push(r.expect("an expansion"));
    }
    took.sort();
    println!(
        "churn: {CHURN} expansions in {:.1} s, each raise to completion {:.1} s median, {:.1} s longest; expansion grace {grace:?}",
        t.elapsed().as_secs_f64(),
        took[CHURN / 2].as_secs_f64(),
        took[CHURN - 1].as_secs_f64()
    );
    // Past the grace of the last one: anything held would have been published by now.
    tokio::time::sleep(grace + Duration::from_secs(3)).await;
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
