//! `scan` and snapshot leftovers, on a control plane of this test's own with the real
//! snapshot-controller (external-snapshotter v8.7.0, built from its Go module by
//! `tools/build.sh snapshot-controller`) and the CRDs of its release (`tools/snapshot-crds.sh`):
//! the controller binds the pre-provisioned contents and acts on the snapshots' deletes, as
//! docs/snapshot-controller-notes.md shows. No CSI driver runs, so these are the cases the
//! common controller alone decides.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::csi::*;
use crate::support::*;

const NS: &str = "snaps";

/// `volume-leftovers scan` with `KUBECONFIG`: (exit code, the JSON lines, stdout and stderr).
fn scan(kubeconfig: &Path, flags: &[&str]) -> (Option<i32>, Vec<Value>, String) {
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
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    (out.status.code(), lines, text)
}

/// The snapshot lines (those with a `kind`), as `(name, reason)`.
fn snapshot_findings(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .filter(|l| l.get("kind").is_some())
        .map(|l| {
            (
                l["name"].as_str().unwrap().to_string(),
                l["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reports_the_content_a_deleted_snapshot_left_and_the_snapshot_whose_content_is_gone() {
    let controller = snapshot_controller();
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let operator = cp.kubeconfig("operator");

    // Without the snapshot CRDs there is nothing to check, and that is no error.
    let (code, lines, out) = scan(&operator, &[]);
    assert_eq!(
        code,
        Some(0),
        "a clean cluster without snapshot CRDs\n{out}"
    );
    assert!(lines.is_empty(), "{out}");

    let _controller = install_snapshots(&cp, &controller);

    cp.kubectl_ok(&["create", "namespace", NS])
        .unwrap_or_else(|e| panic!("{e}"));
    let velero = "{velero.io/backup-name: nightly}";
    let objects = [
        pair(NS, "kept-content", "kept-snap", "Retain", "{}"),
        pair(NS, "backup-content", "backup-snap", "Retain", velero),
        pair(NS, "alive-content", "alive-snap", "Retain", "{}"),
        pair(NS, "lost-content", "lost-snap", "Retain", "{}"),
    ]
    .concat();
    let file = cp.dir.join("snapshots.yaml");
    std::fs::write(&file, objects).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut uids = std::collections::BTreeMap::new();
    for (content, snap) in [
        ("kept-content", "kept-snap"),
        ("backup-content", "backup-snap"),
        ("alive-content", "alive-snap"),
        ("lost-content", "lost-snap"),
    ] {
        wait_until(&format!("{snap} and {content} bound"), || {
            let bound = jsonpath(
                &cp,
                &["volumesnapshot", "-n", NS, snap],
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
        uids.insert(
            snap,
            jsonpath(&cp, &["volumesnapshot", "-n", NS, snap], "{.metadata.uid}"),
        );
    }

    // Bound both ways: nothing to report.
    let (code, lines, out) = scan(&operator, &[]);
    assert_eq!(code, Some(0), "every snapshot bound\n{out}");
    assert!(lines.is_empty(), "{out}");

    // The snapshots of two Retain contents deleted: the controller lets them go at once and
    // marks their contents.
    cp.kubectl_ok(&[
        "delete",
        "volumesnapshot",
        "-n",
        NS,
        "kept-snap",
        "backup-snap",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    // A content removed under its bound snapshot (its finalizer is the sidecar's to remove, and
    // no sidecar runs: taken off by hand).
    cp.kubectl_ok(&[
        "delete",
        "volumesnapshotcontent",
        "lost-content",
        "--wait=false",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&[
        "patch",
        "volumesnapshotcontent",
        "lost-content",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    wait_until("the two snapshots and the content gone", || {
        cp.kubectl_ok(&["get", "volumesnapshot", "-n", NS, "-o", "name"])
            .unwrap_or_default()
            .lines()
            .count()
            == 2
            && cp
                .kubectl_ok(&[
                    "get",
                    "volumesnapshotcontent",
                    "lost-content",
                    "--ignore-not-found",
                    "-o",
                    "name",
                ])
                .unwrap_or_default()
                .trim()
                .is_empty()
    })
    .await;

    // By the operator's graces, a snapshot whose content is gone (a state the objects do not
    // date) is held back from one look, and named on stderr with the time it would be reported.
    let (code, lines, out) = scan(&operator, &[]);
    assert_eq!(code, Some(3), "leftovers found\n{out}");
    assert_eq!(
        snapshot_findings(&lines),
        [("kept-content".to_string(), "SnapshotDeleted".to_string())],
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "held back 1 state(s) that have not lasted their grace (--grace 120s, --delete-grace 600s, --expansion-grace 3600s), not reported: VolumeSnapshot {NS}/lost-snap (SnapshotContentMissing from "
        )),
        "{out}"
    );
    // With no grace, it is reported.
    let (code, lines, out) = scan(&operator, &["--grace", "0s"]);
    assert_eq!(code, Some(3), "leftovers found\n{out}");
    assert_eq!(
        snapshot_findings(&lines),
        [
            ("kept-content".to_string(), "SnapshotDeleted".to_string()),
            (
                format!("{NS}/lost-snap"),
                "SnapshotContentMissing".to_string()
            ),
        ],
        "Velero's content is kept out\n{out}"
    );
    let kept = &lines[0];
    assert_eq!(kept["kind"], "VolumeSnapshotContent");
    assert_eq!(kept["snapshot"], format!("{NS}/kept-snap"));
    assert_eq!(kept["snapshot_uid"], uids["kept-snap"].as_str());
    assert_eq!(kept["deletion_policy"], "Retain");
    assert_eq!(kept["driver"], "example.csi.invalid");
    assert_eq!(kept["snapshot_handle"], "handle-kept-content");
    let lost = &lines[1];
    assert_eq!(lost["kind"], "VolumeSnapshot");
    assert_eq!(lost["content"], "lost-content");
    assert_eq!(lost["uid"], uids["lost-snap"].as_str());

    // With no backup-tool selector, Velero's content is reported too.
    let (code, lines, out) = scan(
        &operator,
        &["--exclude-snapshot-selector=", "--grace", "0s"],
    );
    assert_eq!(code, Some(3), "{out}");
    let names: Vec<String> = snapshot_findings(&lines)
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        ["backup-content", "kept-content", &format!("{NS}/lost-snap")],
        "{out}"
    );

    // An identity that may read volumes but not snapshots: the report is incomplete (exit 4),
    // never clean, and says which permission it lacked.
    let role = cp.dir.join("no-snapshots.yaml");
    std::fs::write(
        &role,
        format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{{"name":"vl-no-snapshots"}},
"rules":[{{"apiGroups":[""],"resources":["persistentvolumes","persistentvolumeclaims"],"verbs":["get","list"]}},
{{"apiGroups":["storage.k8s.io"],"resources":["storageclasses"],"verbs":["list"]}}]}},
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{{"name":"vl-no-snapshots"}},
"roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"vl-no-snapshots"}},
"subjects":[{{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"{RESTRICTED_USER}"}}]}}]}}"#
        ),
    )
    .unwrap();
    cp.kubectl_ok(&["apply", "-f", role.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    let (code, lines, out) = scan(&cp.kubeconfig("restricted"), &[]);
    assert_eq!(code, Some(4), "unknown is never clean\n{out}");
    assert!(snapshot_findings(&lines).is_empty(), "{out}");
    assert!(
        out.contains("list volumesnapshots.snapshot.storage.k8s.io")
            && out.contains("list volumesnapshotcontents.snapshot.storage.k8s.io"),
        "names what it may not do\n{out}"
    );

    // Read-only, as the audit log shows: the operator's identity listed both kinds and wrote
    // none.
    let audit = cp.audit();
    let by_operator = |resource: &str, verbs: &[&str]| {
        audit
            .iter()
            .filter(|e| {
                e["user"]["username"] == OPERATOR_USER
                    && e["objectRef"]["apiGroup"] == "snapshot.storage.k8s.io"
                    && e["objectRef"]["resource"] == resource
                    && verbs.contains(&e["verb"].as_str().unwrap_or_default())
            })
            .count()
    };
    for resource in ["volumesnapshotcontents", "volumesnapshots"] {
        assert!(by_operator(resource, &["list"]) > 0, "{resource} listed");
        assert_eq!(
            by_operator(
                resource,
                &["create", "update", "patch", "delete", "deletecollection"]
            ),
            0,
            "no write on {resource}"
        );
    }
}

/// The operator started before the snapshot CRDs exist is ready and reports nothing about
/// snapshots; once they are installed (discovery asked again) it watches both kinds, and as the
/// real snapshot-controller binds and releases the objects it publishes each finding under its
/// own name: SnapshotDeleted for a Retain content whose snapshot was deleted, its
/// ContentDeleted tombstone when that content is deleted too, SnapshotContentMissing for a
/// Bound snapshot whose content was removed (and that Retain content's own tombstone), SnapshotDeleteStuck for a Delete content that
/// nothing deletes (no CSI sidecar runs here: the backend delete never happens), never Velero's
/// content (counted instead), and nothing while everything is bound. The audit log shows it
/// listed and watched both kinds and wrote neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_watches_snapshots_once_served_and_publishes_each_finding() {
    use kube::Api;
    use volume_leftovers::decide::snapshot::{content_leftover_name, snapshot_leftover_name};
    use volume_leftovers::model::crd::{Reason, Subject, VolumeLeftover};
    use volume_leftovers::telemetry::{Kind, StoreState};

    let controller = snapshot_controller();
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_synced().await;
    for k in [Kind::volumesnapshotcontents, Kind::volumesnapshots] {
        assert_eq!(operator.health.get(k), StoreState::NotServed);
    }
    let (ready, report) = operator.health.report();
    assert!(ready, "ready without the snapshot CRDs: {report}");

    let _controller = install_snapshots(&cp, &controller);
    let h = operator.health.clone();
    wait_for(
        "the snapshot stores to sync once the CRDs are served",
        Duration::from_secs(60),
        || {
            let synced = [Kind::volumesnapshotcontents, Kind::volumesnapshots]
                .iter()
                .all(|k| h.get(*k) == StoreState::Synced);
            async move { synced.then_some(()) }
        },
    )
    .await;

    cp.kubectl_ok(&["create", "namespace", NS])
        .unwrap_or_else(|e| panic!("{e}"));
    let velero = "{velero.io/backup-name: nightly}";
    let pairs = [
        ("kept-content", "kept-snap", "Retain", "{}"),
        ("backup-content", "backup-snap", "Retain", velero),
        ("lost-content", "lost-snap", "Retain", "{}"),
        ("stuck-content", "stuck-snap", "Delete", "{}"),
    ];
    let objects: String = pairs
        .iter()
        .map(|(c, s, p, l)| pair(NS, c, s, p, l))
        .collect();
    let file = cp.dir.join("operator-snapshots.yaml");
    std::fs::write(&file, objects).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    for (content, snap, _, _) in pairs {
        wait_until(&format!("{snap} and {content} bound"), || {
            let bound = jsonpath(
                &cp,
                &["volumesnapshot", "-n", NS, snap],
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
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    operator.wait_idle().await;
    let none = leftovers.list(&Default::default()).await.unwrap().items;
    assert!(none.is_empty(), "bound both ways: {none:?}");

    cp.kubectl_ok(&[
        "delete",
        "volumesnapshot",
        "-n",
        NS,
        "kept-snap",
        "backup-snap",
        "stuck-snap",
        "--wait=false",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&[
        "delete",
        "volumesnapshotcontent",
        "lost-content",
        "--wait=false",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&[
        "patch",
        "volumesnapshotcontent",
        "lost-content",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .unwrap_or_else(|e| panic!("{e}"));

    let reason = |o: &VolumeLeftover| o.status.as_ref().map(|s| s.reason);
    let kept = wait_leftover(
        &leftovers,
        &content_leftover_name("kept-content"),
        "SnapshotDeleted",
        |o| reason(o) == Some(Reason::SnapshotDeleted),
    )
    .await;
    let s = kept.status.unwrap();
    assert_eq!(s.subject, Subject::SnapshotContent);
    let info = s.snapshot.expect("status.snapshot");
    assert_eq!(info.snapshot.as_deref(), Some(&*format!("{NS}/kept-snap")));
    assert_eq!(info.snapshot_handle.as_deref(), Some("handle-kept-content"));
    assert_eq!(info.deletion_policy.as_deref(), Some("Retain"));
    wait_leftover(
        &leftovers,
        &snapshot_leftover_name(NS, "lost-snap"),
        "SnapshotContentMissing",
        |o| reason(o) == Some(Reason::SnapshotContentMissing),
    )
    .await;
    wait_leftover(
        &leftovers,
        &content_leftover_name("stuck-content"),
        "SnapshotDeleteStuck (no sidecar deletes its backend snapshot)",
        |o| reason(o) == Some(Reason::SnapshotDeleteStuck),
    )
    .await;
    operator.wait_idle().await;
    assert!(
        leftovers
            .get_opt(&content_leftover_name("backup-content"))
            .await
            .unwrap()
            .is_none(),
        "Velero's content is kept out"
    );
    let excluded = wait_metric(
        &operator.metrics,
        r#"volume_leftovers_snapshots_excluded{resource="volumesnapshotcontents"}"#,
        |v| v == 1.0,
    )
    .await;
    assert_eq!(excluded, 1.0);

    // The Retain content deleted too (its finalizer taken off by hand: no sidecar runs): the
    // backend snapshot stays, and the finding becomes its tombstone, under the same name.
    cp.kubectl_ok(&[
        "delete",
        "volumesnapshotcontent",
        "kept-content",
        "--wait=false",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&[
        "patch",
        "volumesnapshotcontent",
        "kept-content",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let tomb = wait_leftover(
        &leftovers,
        &content_leftover_name("kept-content"),
        "ContentDeleted",
        |o| reason(o) == Some(Reason::ContentDeleted),
    )
    .await;
    let s = tomb.status.unwrap();
    assert!(s.deleted_at.is_some());
    assert_eq!(
        s.snapshot.and_then(|i| i.snapshot_handle).as_deref(),
        Some("handle-kept-content")
    );
    // lost-content, a Retain content deleted under its bound snapshot, left its backend
    // snapshot too: its tombstone beside the snapshot's finding.
    operator.wait_idle().await;
    let found: std::collections::BTreeMap<String, Option<Reason>> = leftovers
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|o| (kube::ResourceExt::name_any(o), reason(o)))
        .collect();
    let want = std::collections::BTreeMap::from([
        (
            content_leftover_name("kept-content"),
            Some(Reason::ContentDeleted),
        ),
        (
            content_leftover_name("lost-content"),
            Some(Reason::ContentDeleted),
        ),
        (
            content_leftover_name("stuck-content"),
            Some(Reason::SnapshotDeleteStuck),
        ),
        (
            snapshot_leftover_name(NS, "lost-snap"),
            Some(Reason::SnapshotContentMissing),
        ),
    ]);
    assert_eq!(found, want);

    // Read-only: the operator's identity listed and watched both kinds, and wrote neither.
    let audit = cp.audit();
    let by_operator = |resource: &str, verbs: &[&str]| {
        audit
            .iter()
            .filter(|e| {
                e["user"]["username"] == OPERATOR_USER
                    && e["objectRef"]["apiGroup"] == "snapshot.storage.k8s.io"
                    && e["objectRef"]["resource"] == resource
                    && verbs.contains(&e["verb"].as_str().unwrap_or_default())
            })
            .count()
    };
    for resource in ["volumesnapshotcontents", "volumesnapshots"] {
        assert!(by_operator(resource, &["list"]) > 0, "{resource} listed");
        assert!(by_operator(resource, &["watch"]) > 0, "{resource} watched");
        assert_eq!(
            by_operator(
                resource,
                &["create", "update", "patch", "delete", "deletecollection"]
            ),
            0,
            "no write on {resource}"
        );
    }
    operator.stop().await;
}

/// Dynamic snapshots, cut and deleted for real: the snapshot-controller and external-snapshotter's
/// csi-snapshotter sidecar (both v8.7.0, from their Go module) with the project's own test CSI
/// driver (`tools/csi-test-driver`: the CSI hostpath driver is not served by the module proxy;
/// its backend is a state file). Rounds of snapshots of every claim, made ready and deleted with
/// a Delete class, pass through every transient state of a normal delete: the operator writes
/// nothing at any moment (its write counter stays 0, and no VolumeLeftover exists). Then one
/// snapshot with a Retain class: deleted, its content is SnapshotDeleted at once (the
/// controller's mark); its content deleted, the sidecar lets it go without deleting the backend
/// snapshot, which the driver still holds: the ContentDeleted tombstone, naming its handle,
/// driver, size, class and source volume.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_snapshots_through_the_csi_sidecar_publish_nothing_until_one_is_retained() {
    use kube::Api;
    use volume_leftovers::decide::snapshot::content_leftover_name;
    use volume_leftovers::model::crd::{Reason, VolumeLeftover};

    const CLAIMS: usize = 4;
    const ROUNDS: usize = 3;
    let controller = snapshot_controller();
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let _controller = install_snapshots(&cp, &controller);
    let csi = Csi::start(&cp).await;
    let state = csi.state.clone();

    let ns = "life";
    cp.kubectl_ok(&["create", "namespace", ns])
        .unwrap_or_else(|e| panic!("{e}"));
    let file = cp.dir.join("lifecycle.yaml");
    std::fs::write(&file, lifecycle_objects(ns, CLAIMS)).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    for i in 0..CLAIMS {
        wait_until(&format!("data-{i} bound"), || {
            jsonpath(
                &cp,
                &["pvc", "-n", ns, &format!("data-{i}")],
                "{.status.phase}",
            ) == "Bound"
        })
        .await;
    }

    // A delete grace that covers a normal delete on a loaded machine (the controller's and the
    // sidecar's queues take seconds per object here); the mutation that drops it still fails.
    let settings = volume_leftovers::run::settings::Settings {
        graces: volume_leftovers::decide::plan::Graces {
            grace: Duration::from_secs(4),
            delete_grace: Duration::from_secs(60),
            expansion_grace: Duration::from_secs(4),
        },
        ..test_settings()
    };
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_idle().await;
    let writes = |m: &volume_leftovers::telemetry::Metrics| {
        let text = m.encode();
        text.lines()
            .filter(|l| l.starts_with("volume_leftovers_writes_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert_eq!(writes(&operator.metrics), 0.0, "nothing to write at start");

    let started = std::time::Instant::now();
    let mut cut = 0;
    for round in 0..ROUNDS {
        let snaps: String = (0..CLAIMS)
            .map(|i| {
                snapshot_of_claim(
                    ns,
                    &format!("r{round}-s{i}"),
                    &format!("data-{i}"),
                    "life-delete",
                )
            })
            .collect();
        let file = cp.dir.join(format!("round-{round}.yaml"));
        std::fs::write(&file, snaps).unwrap();
        cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
            .unwrap_or_else(|e| panic!("{e}"));
        wait_until(&format!("round {round}: every snapshot ready"), || {
            (0..CLAIMS).all(|i| {
                jsonpath(
                    &cp,
                    &["volumesnapshot", "-n", ns, &format!("r{round}-s{i}")],
                    "{.status.readyToUse}",
                ) == "true"
            })
        })
        .await;
        assert_eq!(backend(&state).len(), CLAIMS, "the driver cut them");
        cut += CLAIMS;
        cp.kubectl_ok(&[
            "delete",
            "volumesnapshot",
            "-n",
            ns,
            "--all",
            "--wait=false",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        wait_until(
            &format!("round {round}: snapshots, contents and backend gone"),
            || {
                count(&cp, &["volumesnapshot", "-n", ns]) == 0
                    && count(&cp, &["volumesnapshotcontent"]) == 0
                    && backend(&state).is_empty()
            },
        )
        .await;
    }
    // Decided, and nothing held in its grace: every state the churn passed through has resolved
    // (a state still held would be a finding waiting for its grace to end).
    operator.wait_idle().await;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin);
    let none = leftovers.list(&Default::default()).await.unwrap().items;
    assert!(none.is_empty(), "a normal snapshot lifecycle: {none:?}");
    assert_eq!(writes(&operator.metrics), 0.0, "no write at any moment");
    println!(
        "snapshot lifecycle: {ROUNDS} rounds, {cut} snapshots cut and deleted through the sidecar in {:.1} s; operator writes 0, VolumeLeftovers 0",
        started.elapsed().as_secs_f64()
    );

    // Retained: its content outlives the snapshot, then its backend snapshot outlives both.
    let file = cp.dir.join("retained.yaml");
    std::fs::write(
        &file,
        snapshot_of_claim(ns, "kept", "data-0", "life-retain"),
    )
    .unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_until("the retained snapshot ready", || {
        jsonpath(
            &cp,
            &["volumesnapshot", "-n", ns, "kept"],
            "{.status.readyToUse}",
        ) == "true"
    })
    .await;
    let content = jsonpath(
        &cp,
        &["volumesnapshot", "-n", ns, "kept"],
        "{.status.boundVolumeSnapshotContentName}",
    );
    let handle = jsonpath(
        &cp,
        &["volumesnapshotcontent", &content],
        "{.status.snapshotHandle}",
    );
    assert!(!handle.is_empty());
    cp.kubectl_ok(&["delete", "volumesnapshot", "-n", ns, "kept"])
        .unwrap_or_else(|e| panic!("{e}"));
    let reason = |o: &VolumeLeftover| o.status.as_ref().map(|s| s.reason);
    let name = content_leftover_name(&content);
    let found = wait_leftover(&leftovers, &name, "SnapshotDeleted", |o| {
        reason(o) == Some(Reason::SnapshotDeleted)
    })
    .await;
    let info = found.status.as_ref().unwrap().snapshot.clone().unwrap();
    assert_eq!(info.snapshot_handle.as_deref(), Some(handle.as_str()));
    assert_eq!(info.snapshot_class.as_deref(), Some("life-retain"));
    assert_eq!(info.restore_size_bytes, Some(1 << 30));
    let s = found.status.unwrap();
    assert_eq!(s.source.driver.as_deref(), Some(TEST_DRIVER));
    assert_eq!(s.source.volume_handle.as_deref(), Some("vol-0"));

    cp.kubectl_ok(&["delete", "volumesnapshotcontent", &content])
        .unwrap_or_else(|e| panic!("{e}"));
    let tomb = wait_leftover(&leftovers, &name, "ContentDeleted", |o| {
        reason(o) == Some(Reason::ContentDeleted)
    })
    .await;
    assert_eq!(
        backend(&state),
        [(handle.clone(), "vol-0".to_string())],
        "the driver still holds the backend snapshot the tombstone names"
    );
    let info = tomb.status.unwrap().snapshot.unwrap();
    assert_eq!(info.snapshot_handle.as_deref(), Some(handle.as_str()));
    operator.stop().await;
}
