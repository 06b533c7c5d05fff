//! `scan` keeps out what is kept on purpose, as the operator does: the binary with
//! `--exclude-storage-class` and `--exclude-selector`, and a PV labelled `leftovers.dev/ignore`,
//! on a control plane of this test's own (so that "nothing found" is the whole cluster's answer).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use crate::support::*;

/// `volume-leftovers scan` as the operator's identity: (exit code, names reported, output).
fn scan(kubeconfig: &Path, flags: &[&str]) -> (Option<i32>, BTreeSet<String>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .arg("scan")
        .args(flags)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .expect("running scan");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let text = format!(
        "--- stdout\n{stdout}--- stderr\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = stdout
        .lines()
        .map(|l| {
            let row: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            row["name"].as_str().expect("a name").to_string()
        })
        .collect();
    (out.status.code(), names, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reports_neither_excluded_classes_nor_matching_labels_nor_ignored_volumes() {
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let label = |pv: String, labels: serde_json::Value| {
        let pvs = pvs.clone();
        async move {
            pvs.patch(
                &pv,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .unwrap_or_else(|e| panic!("labelling {pv}: {e}"));
        }
    };
    // Four Retain volumes whose claims were deleted: each a ClaimDeleted leftover.
    let by_class = released_volume(&admin, "byclass", "Retain").await;
    let by_selector = released_volume(&admin, "bysel", "Retain").await;
    let ignored = released_volume(&admin, "ignored", "Retain").await;
    let reported = released_volume(&admin, "reported", "Retain").await;
    label(by_selector.pv.clone(), json!({"team": "archive"})).await;
    // The label the flags never configure, in the case a person may type it.
    label(ignored.pv.clone(), json!({"leftovers.dev/ignore": "True"})).await;
    // The reported one carries the selector's key with another value: it does not match.
    label(reported.pv.clone(), json!({"team": "db"})).await;
    for r in [&by_class, &by_selector, &ignored, &reported] {
        wait_pv_phase(&pvs, &r.pv, "Released").await;
    }
    let operator = cp.kubeconfig("operator");
    let classes = format!("--exclude-storage-class=scratch,{}", by_class.class);
    let excluding = [classes.as_str(), "--exclude-selector=team=archive"];

    // Without exclusions, the three that are not labelled to be ignored are reported: each is a
    // leftover `scan` would report.
    let (code, names, out) = scan(&operator, &[]);
    assert_eq!(code, Some(3), "leftovers found\n{out}");
    assert_eq!(
        names,
        [&by_class.pv, &by_selector.pv, &reported.pv]
            .into_iter()
            .cloned()
            .collect(),
        "the ignore label applies without any flag\n{out}"
    );

    // With them: only the one no exclusion names.
    let (code, names, out) = scan(&operator, &excluding);
    assert_eq!(code, Some(3), "a leftover found\n{out}");
    assert_eq!(names, [reported.pv.clone()].into(), "{out}");

    // The same exclusions from the environment (as the chart and deploy/ pass them).
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "-o", "table"])
        .env("KUBECONFIG", &operator)
        .env(
            "VL_EXCLUDE_STORAGE_CLASSES",
            format!("scratch,{}", by_class.class),
        )
        .env("VL_EXCLUDE_SELECTOR", "team=archive")
        .output()
        .expect("running scan");
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{table}");
    let rows: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(rows, [reported.pv.as_str()], "{table}");

    // Once that one is gone, the excluded ones alone make a clean cluster: exit 0, no line.
    reported.cleanup(&admin).await;
    wait_for(
        "the reported PV to be deleted",
        std::time::Duration::from_secs(60),
        || async {
            pvs.get_opt(&reported.pv)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    let (code, names, out) = scan(&operator, &excluding);
    assert_eq!(code, Some(0), "clean: everything left is excluded\n{out}");
    assert!(names.is_empty(), "{out}");
}
