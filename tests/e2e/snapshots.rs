//! `scan` and snapshot leftovers, on a control plane of this test's own with the real
//! snapshot-controller (external-snapshotter v8.7.0, built from its Go module by
//! `tools/build.sh snapshot-controller`) and the CRDs of its release (`tools/snapshot-crds.sh`):
//! the controller binds the pre-provisioned contents and acts on the snapshots' deletes, as
//! docs/snapshot-controller-notes.md shows. No CSI driver runs, so these are the cases the
//! common controller alone decides.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

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

/// The snapshot-controller's bin dir (built, or found in the cache by its pin).
fn snapshot_controller() -> PathBuf {
    let out = Command::new(repo().join("tools/build.sh"))
        .arg("snapshot-controller")
        .stderr(Stdio::inherit())
        .output()
        .expect("running tools/build.sh snapshot-controller");
    assert!(
        out.status.success(),
        "tools/build.sh snapshot-controller failed ({})",
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("snapshot-controller")
}

/// A pre-provisioned content and the snapshot that binds it, as the notes' `objects.yaml`.
fn pair(content: &str, snapshot: &str, policy: &str, labels: &str) -> String {
    format!(
        "apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotContent
metadata:
  name: {content}
  labels: {labels}
spec:
  deletionPolicy: {policy}
  driver: example.csi.invalid
  source:
    snapshotHandle: handle-{content}
  volumeSnapshotRef:
    namespace: {NS}
    name: {snapshot}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: {snapshot}
  namespace: {NS}
  labels: {labels}
spec:
  source:
    volumeSnapshotContentName: {content}
---
"
    )
}

fn jsonpath(cp: &ControlPlane, args: &[&str], path: &str) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    let p = format!("jsonpath={path}");
    all.extend_from_slice(&["-o", &p]);
    cp.kubectl_ok(&all).unwrap_or_default()
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    wait_for(what, Duration::from_secs(60), || {
        let ok = f();
        async move { ok.then_some(()) }
    })
    .await
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

    let crds = Command::new(repo().join("tools/snapshot-crds.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("tools/snapshot-crds.sh");
    assert!(crds.status.success(), "tools/snapshot-crds.sh failed");
    let mut apply = vec!["apply".to_string()];
    for p in String::from_utf8_lossy(&crds.stdout).lines() {
        apply.extend(["-f".to_string(), p.to_string()]);
    }
    let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
    cp.kubectl_ok(&apply).unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl_ok(&["wait", "--for=condition=Established", "crd", "--all"])
        .unwrap_or_else(|e| panic!("{e}"));
    let log = std::fs::File::create(cp.dir.join("snapshot-controller.log")).unwrap();
    let _controller = Running(
        Command::new(&controller)
            .arg(format!("--kubeconfig={}", cp.kubeconfig("admin").display()))
            .args([
                "--leader-election=false",
                "--feature-gates=CSIVolumeGroupSnapshot=false",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the snapshot-controller"),
    );

    cp.kubectl_ok(&["create", "namespace", NS])
        .unwrap_or_else(|e| panic!("{e}"));
    let velero = "{velero.io/backup-name: nightly}";
    let objects = [
        pair("kept-content", "kept-snap", "Retain", "{}"),
        pair("backup-content", "backup-snap", "Retain", velero),
        pair("alive-content", "alive-snap", "Retain", "{}"),
        pair("lost-content", "lost-snap", "Retain", "{}"),
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

    let (code, lines, out) = scan(&operator, &[]);
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
    let (code, lines, out) = scan(&operator, &["--exclude-snapshot-selector="]);
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
