//! What the snapshot tests and the snapshot churn benchmark share: the real snapshot-controller
//! and csi-snapshotter sidecar (external-snapshotter v8.7.0, built from its Go module), the
//! project's own test CSI driver (`tools/csi-test-driver`), the objects of a dynamic snapshot's
//! lifecycle, and kubectl helpers.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

/// The snapshot-controller's bin dir (built, or found in the cache by its pin).
pub fn snapshot_controller() -> PathBuf {
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

pub fn jsonpath(cp: &ControlPlane, args: &[&str], path: &str) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    let p = format!("jsonpath={path}");
    all.extend_from_slice(&["-o", &p]);
    cp.kubectl_ok(&all).unwrap_or_default()
}

pub async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    wait_for(what, Duration::from_secs(60), || {
        let ok = f();
        async move { ok.then_some(()) }
    })
    .await
}

/// The external-snapshotter's CRDs of its release, applied to `cp` and established.
pub fn apply_snapshot_crds(cp: &ControlPlane) {
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
}

/// The CRDs and the snapshot-controller, on `cp`.
pub fn install_snapshots(cp: &ControlPlane, controller: &Path) -> Running {
    apply_snapshot_crds(cp);
    let log = std::fs::File::create(cp.dir.join("snapshot-controller.log")).unwrap();
    Running(
        Command::new(controller)
            .arg(format!("--kubeconfig={}", cp.kubeconfig("admin").display()))
            .args([
                "--leader-election=false",
                "--feature-gates=CSIVolumeGroupSnapshot=false",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the snapshot-controller"),
    )
}

/// A pre-provisioned content and the snapshot in `ns` that binds it, as the notes'
/// `objects.yaml` (docs/snapshot-controller-notes.md).
pub fn pair(ns: &str, content: &str, snapshot: &str, policy: &str, labels: &str) -> String {
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
    namespace: {ns}
    name: {snapshot}
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata:
  name: {snapshot}
  namespace: {ns}
  labels: {labels}
spec:
  source:
    volumeSnapshotContentName: {content}
---
"
    )
}

/// The driver every lifecycle object names: the project's own test CSI driver.
pub const TEST_DRIVER: &str = "test.csi.leftovers.dev";

/// A tool's bin dir (built, or found in the cache by its pin).
pub fn tool(name: &str) -> PathBuf {
    let out = Command::new(repo().join("tools/build.sh"))
        .arg(name)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running tools/build.sh {name}: {e}"));
    assert!(
        out.status.success(),
        "tools/build.sh {name} failed ({})",
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The backend snapshots the test driver holds: (id, source volume).
pub fn backend(state: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(state).unwrap_or_else(|_| "[]".into());
    let list: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
    list.iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or_default().to_string(),
                s["source"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// `n` claims bound to PVs of the test driver (static, pre-bound: the controller-manager binds
/// them), two VolumeSnapshotClasses of that driver (Delete and Retain).
pub fn lifecycle_objects(ns: &str, n: usize) -> String {
    let mut y = format!(
        "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: life-sc}}
provisioner: {TEST_DRIVER}
reclaimPolicy: Retain
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {{name: life-delete}}
driver: {TEST_DRIVER}
deletionPolicy: Delete
---
apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshotClass
metadata: {{name: life-retain}}
driver: {TEST_DRIVER}
deletionPolicy: Retain
---
"
    );
    for i in 0..n {
        y.push_str(&format!(
            "apiVersion: v1
kind: PersistentVolume
metadata: {{name: life-pv-{i}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: life-sc
  csi: {{driver: {TEST_DRIVER}, volumeHandle: vol-{i}}}
  claimRef: {{namespace: {ns}, name: data-{i}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: data-{i}, namespace: {ns}}}
spec:
  storageClassName: life-sc
  volumeName: life-pv-{i}
  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
---
"
        ));
    }
    y
}

pub fn snapshot_of_claim(ns: &str, name: &str, claim: &str, class: &str) -> String {
    format!(
        "apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {{name: {name}, namespace: {ns}}}
spec:
  volumeSnapshotClassName: {class}
  source: {{persistentVolumeClaimName: {claim}}}
---
"
    )
}

pub fn count(cp: &ControlPlane, args: &[&str]) -> usize {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "name"]);
    cp.kubectl_ok(&all).unwrap_or_default().lines().count()
}

/// The test CSI driver and external-resizer's csi-resizer sidecar (as the admin), running on a
/// control plane: every claim bound to a PV of [`TEST_DRIVER`] whose request is raised is grown
/// by the real resizer through the driver's ControllerExpandVolume (a volume handle
/// `limit-<bytes>-<name>` cannot grow past <bytes>: the driver's OutOfRange, which the resizer
/// records as ControllerResizeInfeasible). Its own socket, so it may run beside a [`Csi`].
pub struct Resizer {
    _driver: Running,
    _sidecar: Running,
}

impl Resizer {
    pub async fn start(cp: &ControlPlane) -> Resizer {
        let sidecar = tool("csi-resizer").join("csi-resizer");
        let driver = tool("csi-test-driver").join("csi-test-driver");
        let socket = cp.dir.join("csi-resize.sock");
        let log = std::fs::File::create(cp.dir.join("csi-resize-driver.log")).unwrap();
        let driver = Running(
            Command::new(&driver)
                .arg(format!("-endpoint=unix://{}", socket.display()))
                .arg(format!(
                    "-state={}",
                    cp.dir.join("resize-backend.json").display()
                ))
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting the test CSI driver"),
        );
        wait_until("the driver's socket", || socket.exists()).await;
        let log = std::fs::File::create(cp.dir.join("csi-resizer.log")).unwrap();
        let sidecar = Running(
            Command::new(&sidecar)
                .arg(format!("--csi-address={}", socket.display()))
                .arg(format!("--kubeconfig={}", cp.kubeconfig("admin").display()))
                .arg("--leader-election=false")
                .arg("--timeout=10s")
                .arg("--handle-volume-inuse-error=false")
                // A failed resize is retried with a backoff that doubles up to 5 minutes by
                // default: the expansion test's refused growth, once lowered, would wait for
                // the next retry. Capped at 10 s, the recovery is seen within seconds (a CI run
                // on a loaded machine waited more than 60 s).
                .arg("--retry-interval-max=10s")
                // Its API client's defaults (5 requests/s, bursts of 10) make 100 expansions at
                // once take a minute: a real resizer's throughput, set for the churn's burst.
                .arg("--kube-api-qps=50")
                .arg("--kube-api-burst=100")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting the csi-resizer sidecar"),
        );
        Resizer {
            _driver: driver,
            _sidecar: sidecar,
        }
    }
}

/// The test CSI driver and the csi-snapshotter sidecar, running on a control plane.
pub struct Csi {
    /// The driver's backend: the state file listing the snapshots it holds ([`backend`]).
    pub state: PathBuf,
    _driver: Running,
    _sidecar: Running,
}

impl Csi {
    /// Starts the driver (its socket and state in `cp.dir`) and the sidecar (as the admin).
    pub async fn start(cp: &ControlPlane) -> Csi {
        let sidecar = tool("csi-snapshotter").join("csi-snapshotter");
        let driver = tool("csi-test-driver").join("csi-test-driver");
        let socket = cp.dir.join("csi.sock");
        let state = cp.dir.join("backend.json");
        let log = std::fs::File::create(cp.dir.join("csi-test-driver.log")).unwrap();
        let driver = Running(
            Command::new(&driver)
                .arg(format!("-endpoint=unix://{}", socket.display()))
                .arg(format!("-state={}", state.display()))
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting the test CSI driver"),
        );
        wait_until("the driver's socket", || socket.exists()).await;
        let log = std::fs::File::create(cp.dir.join("csi-snapshotter.log")).unwrap();
        let sidecar = Running(
            Command::new(&sidecar)
                .arg(format!("--csi-address={}", socket.display()))
                .arg(format!("--kubeconfig={}", cp.kubeconfig("admin").display()))
                .arg("--leader-election=false")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("starting the csi-snapshotter sidecar"),
        );
        Csi {
            state,
            _driver: driver,
            _sidecar: sidecar,
        }
    }
}
