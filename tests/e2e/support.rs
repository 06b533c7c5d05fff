//! The test harness: real control planes (controlplane/up.sh), clients for the admin and for the
//! operator's identity, the audit log, an in-process operator, builders for objects.
//!
//! A control plane is shared per test binary. It cannot be built or started → every test that
//! needs it fails with the reason (never skips). The watchdog of up.sh stops it when this test
//! binary exits, also on panic or interrupt.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    Namespace, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use volume_leftovers::decide::plan::Graces;
use volume_leftovers::model::crd::VolumeLeftover;
use volume_leftovers::run::controller;
use volume_leftovers::run::settings::Settings;
use volume_leftovers::telemetry::{Health, Kind, Metrics, StoreState};
use volume_leftovers::watch::feed::FeedTiming;

/// The identity `deploy/` grants (its ServiceAccount), as up.sh puts it in the token file.
pub const OPERATOR_USER: &str = "system:serviceaccount:volume-leftovers:volume-leftovers";
/// A plain user with no rights, for tests that grant their own.
pub const RESTRICTED_USER: &str = "vl-restricted";

/// A running control plane.
pub struct ControlPlane {
    pub dir: PathBuf,
    pub bin: PathBuf,
    /// Stop it on drop (instances owned by one test); shared ones are stopped by the watchdog.
    owned: bool,
}

/// Which control plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Every controller; watch cache on. Binding, release and garbage collection happen.
    Full,
    /// No PV binder and no garbage collector; watch cache off. For states that no controller
    /// would keep (written as admin) and for forcing a 410 with an etcd compaction.
    Quiet,
}

static RUN_COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

impl ControlPlane {
    /// Starts a new control plane in a fresh run directory.
    pub fn start(flavor: Flavor, owned: bool) -> Result<ControlPlane, String> {
        Self::start_with(flavor, owned, &[])
    }

    /// Starts a new control plane with extra environment for up.sh (e.g. `PV_SYNC_PERIOD`).
    pub fn start_with(
        flavor: Flavor,
        owned: bool,
        env: &[(&str, &str)],
    ) -> Result<ControlPlane, String> {
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        // Integration tests get CARGO_TARGET_TMPDIR; the benchmark examples that share this
        // harness use the same place.
        let tmp = option_env!("CARGO_TARGET_TMPDIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo().join("target/tmp"));
        let dir = tmp.join(format!("controlplane-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut cmd = Command::new(repo().join("controlplane/up.sh"));
        cmd.arg(&dir)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .envs(env.iter().copied());
        if flavor == Flavor::Quiet {
            cmd.env("WATCH_CACHE", "false").env(
                "KCM_CONTROLLERS",
                "*,-persistentvolume-binder-controller,-garbage-collector-controller",
            );
        }
        let out = cmd
            .output()
            .map_err(|e| format!("running controlplane/up.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "controlplane/up.sh failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let env = std::fs::read_to_string(dir.join("env")).map_err(|e| e.to_string())?;
        let bin = env
            .lines()
            .find_map(|l| l.strip_prefix("BIN_DIR="))
            .ok_or("no BIN_DIR in env")?
            .into();
        let cp = ControlPlane { dir, bin, owned };
        cp.kubectl_ok(&[
            "apply",
            "-f",
            path_str(&repo().join("crds/volumeleftovers.yaml")),
            "-f",
            path_str(&repo().join("deploy/namespace.yaml")),
            "-f",
            path_str(&repo().join("deploy/serviceaccount.yaml")),
            "-f",
            path_str(&repo().join("deploy/clusterrole.yaml")),
            "-f",
            path_str(&repo().join("deploy/clusterrolebinding.yaml")),
            "-f",
            path_str(&repo().join("deploy/role.yaml")),
            "-f",
            path_str(&repo().join("deploy/rolebinding.yaml")),
        ])?;
        cp.kubectl_ok(&[
            "wait",
            "--for=condition=established",
            "crd/volumeleftovers.leftovers.dev",
        ])?;
        Ok(cp)
    }

    /// Starts a control plane without the CRD and deploy/ objects (for start-up tests).
    pub fn start_bare(flavor: Flavor) -> ControlPlane {
        let cp = Self::start(flavor, true).unwrap_or_else(|e| panic!("{e}"));
        cp.kubectl_ok(&[
            "delete",
            "crd",
            "volumeleftovers.leftovers.dev",
            "--wait=true",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        cp
    }

    pub fn kubeconfig(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.kubeconfig"))
    }

    pub fn env_value(&self, key: &str) -> String {
        let env = std::fs::read_to_string(self.dir.join("env")).expect("env file");
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("{key} not in env"))
    }

    /// kubectl as admin.
    pub fn kubectl(&self, args: &[&str]) -> std::process::Output {
        Command::new(self.bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig("admin"))
            .args(args)
            .output()
            .expect("running kubectl")
    }

    pub fn kubectl_ok(&self, args: &[&str]) -> Result<String, String> {
        let out = self.kubectl(args);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// A client for `who`, with the operator's request bounds (no built-in retries, timeouts).
    pub async fn client(&self, who: &str) -> Client {
        let mut config = self.config(who).await;
        volume_leftovers::watch::client::tune(&mut config, Duration::from_secs(20));
        Client::try_from(config).expect("client")
    }

    pub async fn config(&self, who: &str) -> Config {
        let kc = Kubeconfig::read_from(self.kubeconfig(who)).expect("kubeconfig");
        Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("config")
    }

    pub async fn admin(&self) -> Client {
        self.client("admin").await
    }

    /// The operator's identity: exactly the ServiceAccount deploy/ binds.
    pub async fn operator_client(&self) -> Client {
        self.client("operator").await
    }

    /// The audit log entries so far, parsed, from every file the API server wrote: rotated
    /// files (`audit-<time>.log`, oldest first) and then `audit.log`. A proof that something
    /// never happened must not miss the part of the log that rotated away, so the reader fails
    /// on anything it cannot read: a compressed or unreadable rotated file, a line that is not
    /// JSON (except a last line still being written).
    pub fn audit(&self) -> Vec<serde_json::Value> {
        let mut rotated: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .expect("run dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("audit-") && !n.starts_with("audit-policy"))
            })
            .collect();
        rotated.sort();
        for p in &rotated {
            assert!(
                p.extension().and_then(|e| e.to_str()) == Some("log"),
                "audit log {} cannot be read (compressed?): the proof would have a gap",
                p.display()
            );
        }
        let mut out = Vec::new();
        for p in rotated
            .iter()
            .chain(std::iter::once(&self.dir.join("audit.log")))
        {
            let text = std::fs::read_to_string(p)
                .unwrap_or_else(|e| panic!("reading audit log {}: {e}", p.display()));
            let lines: Vec<&str> = text.lines().collect();
            for (i, l) in lines.iter().enumerate() {
                match serde_json::from_str(l) {
                    Ok(v) => out.push(v),
                    Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
                    Err(e) => panic!("audit log {} line {}: {e}", p.display(), i + 1),
                }
            }
        }
        assert!(
            !out.is_empty(),
            "the audit log is empty: nothing could be proven"
        );
        out
    }

    /// Write requests (create, update, patch, delete) the operator identity made on the
    /// VolumeLeftover `name`.
    pub fn operator_writes(&self, name: &str) -> usize {
        self.operator_writes_on("volumeleftovers", name)
    }

    /// Write requests the operator identity made on the object `name` of `resource`.
    pub fn operator_writes_on(&self, resource: &str, name: &str) -> usize {
        self.audit()
            .iter()
            .filter(|e| {
                e["user"]["username"] == OPERATOR_USER
                    && e["objectRef"]["resource"] == resource
                    && e["objectRef"]["name"] == name
                    && matches!(
                        e["verb"].as_str(),
                        Some("create" | "update" | "patch" | "delete")
                    )
            })
            .count()
    }

    /// PIDs of the processes up.sh started.
    pub fn pids(&self) -> Vec<u32> {
        std::fs::read_to_string(self.dir.join("pids"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
            .collect()
    }

    pub fn stop(&self) {
        let _ = Command::new(repo().join("controlplane/down.sh"))
            .arg(&self.dir)
            .status();
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        if self.owned {
            self.stop();
        }
    }
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn shared(
    cell: &'static OnceLock<Result<ControlPlane, String>>,
    flavor: Flavor,
) -> &'static ControlPlane {
    match cell.get_or_init(|| ControlPlane::start(flavor, false)) {
        Ok(cp) => cp,
        Err(e) => panic!("the control plane could not be started (tests never skip):\n{e}"),
    }
}

/// The shared full control plane of this test binary.
pub fn cp() -> &'static ControlPlane {
    static CP: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    shared(&CP, Flavor::Full)
}

/// The shared quiet control plane (no binder, no GC, no watch cache).
pub fn quiet() -> &'static ControlPlane {
    static CP: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    shared(&CP, Flavor::Quiet)
}

/// The most full control planes the operator tests lease (see [`full_planes`]).
const MAX_FULL_PLANES: usize = 4;

/// How many full control planes the operator tests share: `VL_E2E_FULL_PLANES` (1 to 4), 2 by
/// default. The tests that run an operator each hold one for their whole run, one after another
/// on a single plane; with two, two of them run at once (the e2e binary took about half as
/// long on the 2-core CI machine; docs/testing.md has the figures). The first is [`cp()`], which
/// the tests without an operator use too.
pub fn full_planes() -> usize {
    std::env::var("VL_E2E_FULL_PLANES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .clamp(1, MAX_FULL_PLANES)
}

/// The `i`th shared full control plane (0 is [`cp()`]), started when first leased.
fn full_plane(i: usize) -> &'static ControlPlane {
    static MORE: [OnceLock<Result<ControlPlane, String>>; MAX_FULL_PLANES - 1] =
        [const { OnceLock::new() }; MAX_FULL_PLANES - 1];
    match i {
        0 => cp(),
        i => shared(&MORE[i - 1], Flavor::Full),
    }
}

/// A shared control plane held by one test that runs an operator on it.
pub struct Lease {
    /// The control plane, the test's alone while the lease lives (tests without an operator may
    /// use it too).
    pub cp: &'static ControlPlane,
    _plane: tokio::sync::MutexGuard<'static, ()>,
    _permit: Option<tokio::sync::SemaphorePermit<'static>>,
}

/// Operators watch the whole cluster. Tests that run one on a shared control plane lease it, so
/// that two operators with different views (say, one denied claims) never write the same
/// objects at once: a quiet plane (there is one), or any free one of the [`full_planes`] full
/// ones, waiting while all are leased.
/// (Async locks: each test has its own runtime, and the lease is held across awaits.)
///
/// It also removes what earlier tests left behind: VolumeLeftovers whose PV they deleted after
/// stopping their operator (findings have no ownerReference, so no garbage collector removes
/// them; the next operator would turn them into tombstones).
pub async fn lease(flavor: Flavor) -> Lease {
    static FULL: [tokio::sync::Mutex<()>; MAX_FULL_PLANES] =
        [const { tokio::sync::Mutex::const_new(()) }; MAX_FULL_PLANES];
    static FREE_FULL: OnceLock<tokio::sync::Semaphore> = OnceLock::new();
    static QUIET: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let lease = match flavor {
        Flavor::Full => {
            let permit = FREE_FULL
                .get_or_init(|| tokio::sync::Semaphore::new(full_planes()))
                .acquire()
                .await
                .expect("the semaphore is never closed");
            // A permit means one of the planes is free.
            let (i, plane) = FULL[..full_planes()]
                .iter()
                .enumerate()
                .find_map(|(i, m)| m.try_lock().ok().map(|g| (i, g)))
                .expect("a free full control plane for each permit");
            Lease {
                cp: full_plane(i),
                _plane: plane,
                _permit: Some(permit),
            }
        }
        Flavor::Quiet => Lease {
            _plane: QUIET.lock().await,
            cp: quiet(),
            _permit: None,
        },
    };
    forget_deleted_volumes(&lease.cp.admin().await).await;
    lease
}

/// Deletes every VolumeLeftover whose PV does not exist, after waiting (up to 20 s) for the PVs
/// being deleted to be gone.
pub async fn forget_deleted_volumes(admin: &Client) {
    let api = Api::<PersistentVolume>::all(admin.clone());
    let start = Instant::now();
    let pvs = loop {
        let items = api
            .list_metadata(&ListParams::default())
            .await
            .expect("list PVs")
            .items;
        let terminating = items
            .iter()
            .any(|p| p.metadata.deletion_timestamp.is_some());
        if !terminating || start.elapsed() > Duration::from_secs(20) {
            break items;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let pvs: std::collections::HashSet<String> =
        pvs.into_iter().filter_map(|p| p.metadata.name).collect();
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    // Right after the control plane starts, the CRD's storage may still be initialising (429).
    let listed = wait_for("a list of VolumeLeftovers", Duration::from_secs(60), || {
        let api = leftovers.clone();
        async move { api.list_metadata(&ListParams::default()).await.ok() }
    })
    .await;
    for o in listed.items {
        let name = o.metadata.name.unwrap_or_default();
        if !pvs.contains(&name) {
            delete(&leftovers, &name).await;
        }
    }
}

/// A name no other test (or run) uses.
pub fn unique(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{n}-{:x}", std::process::id(), nanos % 0xfffff)
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Operator settings for tests: the operator's defaults (what `run` without flags runs with,
/// concurrency included) with short graces, retries and timeouts, and small pages (pagination is
/// exercised).
pub fn test_settings() -> Settings {
    Settings {
        resync: Duration::from_secs(30),
        graces: Graces {
            grace: Duration::from_secs(4),
            delete_grace: Duration::from_secs(6),
            expansion_grace: Duration::from_secs(4),
        },
        page_size: 3,
        watch_timeout: 20,
        request_timeout: Duration::from_secs(3),
        feed: FeedTiming {
            retry_initial: Duration::from_millis(200),
            retry_max: Duration::from_secs(2),
            not_found_max: Duration::from_secs(1),
            list_page: Duration::from_secs(5),
            not_served_every: Duration::from_secs(2),
        },
        shutdown_grace: Duration::from_secs(3),
        reminder: Duration::from_secs(60),
        events: Some("e2e-operator".into()),
        ..Settings::default()
    }
}

/// The in-process operator logs into the test's captured output, which the harness prints
/// when the test fails: a failure in CI comes with what the operator said. `VL_TEST_LOG` sets
/// the filter (default: the operator's info and everyone's warnings).
fn log_to_test_output() {
    let filter =
        std::env::var("VL_TEST_LOG").unwrap_or_else(|_| "warn,volume_leftovers=info".to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_test_writer()
        .with_ansi(false)
        .try_init();
}

/// How long a failing store is trusted in tests.
pub const TEST_STALE_AFTER: Duration = Duration::from_secs(3);

/// An operator running in this test's runtime.
pub struct Operator {
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<controller::Ended>>,
}

impl Operator {
    pub fn start(client: Client, settings: Settings) -> Operator {
        log_to_test_output();
        let health = Arc::new(Health::new(TEST_STALE_AFTER));
        let metrics = Arc::new(Metrics::default());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(controller::run(
            client,
            settings,
            health.clone(),
            metrics.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Operator {
            health,
            metrics,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Waits until every store has synced (the first sweep is then queued).
    pub async fn wait_synced(&self) {
        let h = self.health.clone();
        wait_for(
            "the operator's stores to sync",
            Duration::from_secs(60),
            || {
                let h = h.clone();
                async move {
                    // A kind the API server does not serve (the snapshot CRDs where they
                    // are not installed) has nothing to sync.
                    Kind::ALL
                        .iter()
                        .all(|k| matches!(h.get(*k), StoreState::Synced | StoreState::NotServed))
                        .then_some(())
                }
            },
        )
        .await
    }

    /// Waits until the operator has decided everything it had to: stores synced, nothing queued,
    /// no write in flight, no finding held in its grace period, and at least one decision made.
    /// An absence asserted after this is an absence the operator had the chance to get wrong: a
    /// false finding still held in its grace (a BoundClaimMissing read from a claim cache that
    /// lags) would be published before this returns, not hidden by the grace.
    pub async fn wait_idle(&self) {
        self.wait_quiet(true).await;
    }

    /// As [`Operator::wait_idle`], but findings may stay held in their grace (for a test that
    /// holds one on purpose, with a grace longer than the test).
    pub async fn wait_decided(&self) {
        self.wait_quiet(false).await;
    }

    async fn wait_quiet(&self, nothing_held: bool) {
        self.wait_synced().await;
        let m = self.metrics.clone();
        let idle = |first: bool| {
            metric(&m, "volume_leftovers_queued_volumes") == 0.0
                && metric(&m, "volume_leftovers_writes_in_flight") == 0.0
                && (!nothing_held || pending_total(&m) == 0.0)
                && (!first || metric(&m, "volume_leftovers_decisions_total") > 0.0)
        };
        wait_for("the operator to be idle", Duration::from_secs(60), || {
            let idle = idle(true);
            async move { idle.then_some(()) }
        })
        .await;
        // Twice, a moment apart: an event that arrived meanwhile is decided too.
        tokio::time::sleep(Duration::from_millis(300)).await;
        wait_for("the operator to be idle", Duration::from_secs(60), || {
            let idle = idle(false);
            async move { idle.then_some(()) }
        })
        .await;
    }

    /// Whether the operator's loop is still running (it ends only when stopped, or by a panic).
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("operator stops within 20 s")
                .expect("operator task");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

// --- builders ---------------------------------------------------------------------------------

pub fn class(name: &str, reclaim: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        provisioner: "kubernetes.io/no-provisioner".into(),
        reclaim_policy: Some(reclaim.into()),
        volume_binding_mode: Some("Immediate".into()),
        ..StorageClass::default()
    }
}

/// A hostPath PV (the controller-manager can bind it without any node or driver).
pub fn pv(name: &str, class: &str, size: &str, reclaim: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity(size.into()))].into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some(reclaim.into()),
            storage_class_name: Some(class.into()),
            host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                path: format!("/mnt/data/{name}"),
                type_: None,
            }),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

pub fn claim_ref(ns: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(ns.into()),
        name: Some(name.into()),
        uid: Some(uid.into()),
        ..ObjectReference::default()
    }
}

pub fn pvc(ns: &str, name: &str, class: &str, size: &str) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            resources: Some(VolumeResourceRequirements {
                requests: Some([("storage".to_string(), Quantity(size.into()))].into()),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

pub async fn create_ns(client: &Client, name: &str) {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
}

pub async fn create<K>(api: &Api<K>, obj: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("create {obj:?}: {e}"))
}

/// Deletes, ignoring "not found".
pub async fn delete<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete {name}: {e}"),
    }
}

pub fn phase(pv: &PersistentVolume) -> &str {
    pv.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub async fn wait_pv_phase(
    api: &Api<PersistentVolume>,
    name: &str,
    want: &str,
) -> PersistentVolume {
    wait_for(
        &format!("PV {name} to be {want}"),
        Duration::from_secs(60),
        || async {
            let pv = api.get_opt(name).await.ok().flatten()?;
            (phase(&pv) == want).then_some(pv)
        },
    )
    .await
}

pub async fn wait_leftover<F>(
    api: &Api<VolumeLeftover>,
    name: &str,
    what: &str,
    pred: F,
) -> VolumeLeftover
where
    F: Fn(&VolumeLeftover) -> bool,
{
    wait_for(
        &format!("VolumeLeftover {name}: {what}"),
        Duration::from_secs(60),
        || async {
            let o = api.get_opt(name).await.ok().flatten()?;
            pred(&o).then_some(o)
        },
    )
    .await
}

pub async fn wait_leftover_gone(api: &Api<VolumeLeftover>, name: &str) {
    wait_for(
        &format!("VolumeLeftover {name} to be deleted"),
        Duration::from_secs(60),
        || async { matches!(api.get_opt(name).await, Ok(None)).then_some(()) },
    )
    .await
}

/// A volume and the claim that will bind it: class (Immediate, `reclaim`), namespace, a 1Gi PV
/// and a claim `data` for it, all created; the controller-manager binds them.
pub async fn claimed_volume(client: &Client, prefix: &str, reclaim: &str) -> Claimed {
    let class_name = unique(&format!("{prefix}-sc"));
    let ns = unique(&format!("{prefix}-ns"));
    let pv_name = unique(&format!("{prefix}-pv"));
    create(
        &Api::<StorageClass>::all(client.clone()),
        &class(&class_name, reclaim),
    )
    .await;
    create_ns(client, &ns).await;
    let pvs = Api::<PersistentVolume>::all(client.clone());
    create(&pvs, &pv(&pv_name, &class_name, "1Gi", reclaim)).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let claim = create(&claims, &pvc(&ns, "data", &class_name, "1Gi")).await;
    Claimed {
        pv: pv_name,
        ns,
        class: class_name,
        claim,
    }
}

/// What [`claimed_volume`] made.
pub struct Claimed {
    pub pv: String,
    pub ns: String,
    pub class: String,
    pub claim: PersistentVolumeClaim,
}

/// A volume released for real: [`claimed_volume`], bound by the controller-manager, then the
/// claim deleted (the PV turns `Released`, or `Failed` when its delete fails).
pub async fn released_volume(client: &Client, prefix: &str, reclaim: &str) -> Released {
    let c = claimed_volume(client, prefix, reclaim).await;
    wait_pv_phase(
        &Api::<PersistentVolume>::all(client.clone()),
        &c.pv,
        "Bound",
    )
    .await;
    delete(
        &Api::<PersistentVolumeClaim>::namespaced(client.clone(), &c.ns),
        "data",
    )
    .await;
    Released {
        pv: c.pv,
        ns: c.ns,
        class: c.class,
        claim_uid: c.claim.metadata.uid.unwrap_or_default(),
    }
}

/// What [`released_volume`] made.
pub struct Released {
    pub pv: String,
    pub ns: String,
    pub class: String,
    pub claim_uid: String,
}

impl Released {
    pub async fn cleanup(&self, client: &Client) {
        delete(&Api::<PersistentVolume>::all(client.clone()), &self.pv).await;
        delete(&Api::<StorageClass>::all(client.clone()), &self.class).await;
        delete(&Api::<Namespace>::all(client.clone()), &self.ns).await;
    }
}

/// The operator binary, killed when dropped.
pub struct Running(pub std::process::Child);

impl Running {
    /// SIGTERM, then wait for the exit (killed after 15 s).
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(15) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP proxy in front of the apiserver whose connections a test can cut, to make the operator
/// lose its watches for a while.
pub struct Proxy {
    pub addr: std::net::SocketAddr,
    accepted: Arc<AtomicU32>,
    open: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: std::net::SocketAddr) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let accepted = Arc::new(AtomicU32::new(0));
        let conns: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let accept = {
            let (open, conns, accepted) = (open.clone(), conns.clone(), accepted.clone());
            tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    accepted.fetch_add(1, Ordering::Relaxed);
                    if !open.load(Ordering::SeqCst) {
                        continue; // dropped: connection refused in effect
                    }
                    let task = tokio::spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    conns.lock().unwrap().push(task);
                }
            })
        };
        Proxy {
            addr,
            accepted,
            open,
            conns,
            accept,
        }
    }

    /// Connections accepted so far (including the ones dropped while cut).
    pub fn accepted(&self) -> u32 {
        self.accepted.load(Ordering::Relaxed)
    }

    /// Drops every connection and refuses new ones.
    pub fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        for t in self.conns.lock().unwrap().drain(..) {
            t.abort();
        }
    }

    pub fn resume(&self) {
        self.open.store(true, Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

/// Sets a PV's status as an admin would (only on the quiet control plane, where no binder
/// rewrites it).
pub async fn set_pv_phase(api: &Api<PersistentVolume>, name: &str, phase: &str) {
    api.patch_status(
        name,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({"status": {"phase": phase}})),
    )
    .await
    .unwrap_or_else(|e| panic!("set phase of {name}: {e}"));
}

/// GET on a local plain-HTTP endpoint (`http://127.0.0.1:port/path`): (status code, body), or
/// `None` when it does not answer within 2 s. In this process, not through a `curl`: the waits
/// poll every 100 ms, and a process per poll took CPU from the cores the control plane and the
/// operator share (up to 7 s of it in a 70 s first start of the 50,000-PV fleet). An HTTP/1.0
/// request, so that the answer ends with the connection (never chunked).
pub fn http_get(url: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, "/"),
    };
    let addr = std::net::ToSocketAddrs::to_socket_addrs(authority)
        .ok()?
        .next()?;
    let limit = Duration::from_secs(2);
    let mut conn = std::net::TcpStream::connect_timeout(&addr, limit).ok()?;
    conn.set_read_timeout(Some(limit)).ok()?;
    conn.set_write_timeout(Some(limit)).ok()?;
    write!(
        conn,
        "GET {path} HTTP/1.0\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).ok()?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// A free local port for a server started a moment later, drawn below the kernel's ephemeral
/// range as scripts/free-ports.py does (which says why: the tests' many clients draw from that
/// range too, and took a released port before its server bound it).
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let top: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let seed = std::collections::hash_map::RandomState::new();
    for attempt in 0u32..2000 {
        let mut h = seed.build_hasher();
        h.write_u32(attempt);
        let port = 10000 + (h.finish() % u64::from(top.saturating_sub(10000).max(1))) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 10000..{top}")
}

/// The reason a VolumeLeftover reports.
pub fn reason(o: &VolumeLeftover) -> Option<volume_leftovers::model::crd::Reason> {
    o.status.as_ref().map(|s| s.reason)
}

/// A client with the operator's identity that reaches the API server through `proxy`.
pub async fn operator_client_through(cp: &ControlPlane, proxy: &Proxy) -> Client {
    let mut config = cp.config("operator").await;
    config.cluster_url = format!("https://{}", proxy.addr)
        .parse()
        .expect("proxy url");
    Client::try_from(config).expect("client")
}

/// A proxy in front of this control plane's API server.
pub async fn proxy_to(cp: &ControlPlane) -> Proxy {
    let url = cp.env_value("APISERVER_URL");
    Proxy::start(
        url.trim_start_matches("https://")
            .parse()
            .expect("host:port"),
    )
    .await
}

/// Every VolumeLeftover event an admin watch sees, as (name, reason) — `None` for a deletion —
/// until [`Recorder::stop`].
/// (name, reason) pairs, in the order the watch delivered them.
type Seen = Arc<Mutex<Vec<(String, Option<volume_leftovers::model::crd::Reason>)>>>;

pub struct Recorder {
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    /// Starts watching; returns once the watch has listed (so nothing after is missed).
    pub async fn start(client: Client) -> Recorder {
        use futures::StreamExt;
        use kube::runtime::watcher;
        let seen: Seen = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut ready = Some(ready_tx);
                let mut s = watcher(
                    Api::<VolumeLeftover>::all(client),
                    watcher::Config::default(),
                )
                .boxed();
                while let Some(ev) = s.next().await {
                    match ev {
                        Ok(watcher::Event::InitDone) => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                        }
                        Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                            let name = kube::ResourceExt::name_any(&o);
                            seen.lock().unwrap().push((name, reason(&o)));
                        }
                        Ok(watcher::Event::Delete(o)) => {
                            let name = kube::ResourceExt::name_any(&o);
                            seen.lock().unwrap().push((name, None));
                        }
                        _ => {}
                    }
                }
            })
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), ready_rx).await;
        Recorder { seen, task }
    }

    /// What was seen about `name` so far.
    pub fn of(&self, name: &str) -> Vec<Option<volume_leftovers::model::crd::Reason>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, r)| *r)
            .collect()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// The value of one sample of the operator's metrics (`name{labels}`, labels in the order the
/// exposition writes them), `None` when no such series exists.
pub fn metric_opt(metrics: &Metrics, sample: &str) -> Option<f64> {
    metrics
        .encode()
        .lines()
        .find(|l| l.starts_with(sample) && l[sample.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The value of one sample of the operator's metrics. A series that does not exist fails the
/// test: a misspelt name or label, or a family the operator never created, must not read as 0
/// (an assertion of 0 would then pass without having looked at anything). Where "absent" is an
/// expected answer, say so with [`metric_or_zero`].
#[track_caller]
pub fn metric(metrics: &Metrics, sample: &str) -> f64 {
    metric_opt(metrics, sample).unwrap_or_else(|| {
        panic!(
            "no series {sample} in the operator's metrics:\n{}",
            metrics.encode()
        )
    })
}

/// The value of one sample, 0 when the series does not exist (yet): only for families whose
/// series appear with their first value (a write result, a finding's labels).
pub fn metric_or_zero(metrics: &Metrics, sample: &str) -> f64 {
    metric_opt(metrics, sample).unwrap_or(0.0)
}

/// Every series of the metric `name`: its labels and its value.
pub fn samples(metrics: &Metrics, name: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    metrics
        .encode()
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let labels = labels
                .split(',')
                .filter(|kv| !kv.is_empty())
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.trim_matches('"').to_string()))
                })
                .collect();
            Some((labels, value.parse().ok()?))
        })
        .collect()
}

/// Findings held in their grace period, all reasons together (the family exists from the
/// start, one series per reason at 0).
#[track_caller]
pub fn pending_total(metrics: &Metrics) -> f64 {
    let series = samples(metrics, "volume_leftovers_pending_findings");
    assert!(
        !series.is_empty(),
        "no volume_leftovers_pending_findings series:\n{}",
        metrics.encode()
    );
    series.iter().map(|(_, v)| v).sum()
}

/// Waits until a metric sample exists and satisfies `pred` (a series that never appears fails
/// at the timeout, whatever `pred` says about 0).
pub async fn wait_metric(metrics: &Metrics, sample: &str, pred: impl Fn(f64) -> bool) -> f64 {
    wait_for(&format!("metric {sample}"), Duration::from_secs(60), || {
        let v = metric_opt(metrics, sample).filter(|v| pred(*v));
        async move { v }
    })
    .await
}

/// A copy of `who`'s kubeconfig whose server is `url` (for the binary behind a proxy).
pub fn kubeconfig_via(cp: &ControlPlane, who: &str, url: &str) -> PathBuf {
    let text = std::fs::read_to_string(cp.kubeconfig(who)).expect("kubeconfig");
    let original = cp.env_value("APISERVER_URL");
    let path = cp.dir.join(format!("{who}-via-{}.kubeconfig", unique("p")));
    std::fs::write(&path, text.replace(&original, url)).expect("write kubeconfig");
    path
}

/// The operator binary's `/metrics` sample `sample` (the series with its labels), when it
/// answers.
pub fn scraped(port: u16, sample: &str) -> Option<f64> {
    let (_, body) = http_get(&format!("http://127.0.0.1:{port}/metrics"))?;
    body.lines()
        .find_map(|l| l.strip_prefix(sample)?.trim().parse().ok())
}

/// The sum of the operator binary's `/metrics` series named `name` (every label set).
pub fn scraped_sum(port: u16, name: &str) -> Option<f64> {
    let (_, body) = http_get(&format!("http://127.0.0.1:{port}/metrics"))?;
    let values: Vec<f64> = body
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Waits until the operator binary on `port` has completed two more listings of the cloud
/// census scope (`backend`, `scope` as its metrics label it) than now, and has nothing queued,
/// no write in flight and no finding held in its grace: every listing before has been decided
/// and what it decided written. An absence asserted after this is one the operator had the
/// chance to get wrong.
pub async fn wait_census_settled(port: u16, backend: &str, scope: &str) {
    wait_listings_settled(port, &[format!(r#"backend="{backend}",scope="{scope}""#)]).await
}

/// The labels of a census scope's series, as the operator's metrics write them: `pool` for a
/// Ceph pool, `backend` and `scope` for a cloud scope.
pub fn census_labels(scope: &volume_leftovers::decide::census::Scope) -> String {
    if scope.backend().labelled_as_pool() {
        return format!(r#"pool="{scope}""#);
    }
    let full = scope.to_string();
    let (backend, name) = full.split_once(':').expect("backend:scope");
    format!(r#"backend="{backend}",scope="{name}""#)
}

/// [`wait_census_settled`] for several scopes at once, each by its labels
/// ([`census_labels`]): each has completed two more listings than now, and everything they
/// concluded has been decided and written.
pub async fn wait_listings_settled(port: u16, labels: &[String]) {
    wait_settled_after(port, "runs", 2, labels).await
}

/// Waits until each census scope (by its labels) has `n` more listings than now that ended
/// as `ended` says (`runs`: completed; `failures`: failed), and everything they concluded has
/// been decided and written.
pub async fn wait_settled_after(port: u16, ended: &str, n: u32, labels: &[String]) {
    let runs: Vec<String> = labels
        .iter()
        .map(|l| format!("volume_leftovers_census_{ended}_total{{{l}}}"))
        .collect();
    let start: Vec<f64> = runs
        .iter()
        .map(|r| scraped(port, r).unwrap_or(0.0))
        .collect();
    wait_for(
        &format!("{n} more listings ({ended}) of {labels:?}, decided and written"),
        Duration::from_secs(60),
        || async {
            (runs
                .iter()
                .zip(&start)
                .all(|(r, s)| scraped(port, r).unwrap_or(0.0) >= s + f64::from(n))
                && scraped(port, "volume_leftovers_queued_volumes ") == Some(0.0)
                && scraped(port, "volume_leftovers_writes_in_flight ") == Some(0.0)
                && scraped_sum(port, "volume_leftovers_pending_findings") == Some(0.0))
            .then_some(())
        },
    )
    .await
}

// --- the parts the census tests share: the cloud test servers, PVs as the drivers make them ---

/// A part a test needs that cannot be had here (a cloud test server's Python): `None`, a loud
/// skip, except in CI (`CI=true`), where the test fails (make test installs every part first).
pub fn available<T>(what: &str, part: Result<T, String>) -> Option<T> {
    match part {
        Ok(v) => Some(v),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{what} cannot be started (CI=true: failing, not skipping): {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: {what} cannot be started: {e}");
            None
        }
    }
}

/// A running test Compute server (`tests/fake-gce-compute/server.py`, the project's own, NOT
/// Google's) for one project; stopped on drop.
pub struct ComputeServer {
    child: std::process::Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for ComputeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Compute server's interpreter and Google's discovery document.
fn compute_python() -> Result<(PathBuf, PathBuf), String> {
    let out = Command::new(repo().join("scripts/gce-python.sh"))
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("scripts/gce-python.sh: {e}"))?;
    if !out.status.success() {
        return Err(format!("scripts/gce-python.sh failed: {}", out.status));
    }
    let py = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let doc = Command::new(&py)
        .args(["-c", "import googleapiclient, pathlib; print(pathlib.Path(googleapiclient.__file__).parent / 'discovery_cache/documents/compute.v1.json')"])
        .output()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !doc.status.success() {
        return Err("cannot locate compute.v1.json".into());
    }
    Ok((
        py,
        PathBuf::from(String::from_utf8_lossy(&doc.stdout).trim()),
    ))
}

impl ComputeServer {
    /// The server's process, for a benchmark's CPU split.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts a server in `dir` answering from `state`, with a service-account key it trusts in
    /// `dir/keys/key.json`.
    pub fn start(dir: PathBuf, state: serde_json::Value) -> Result<ComputeServer, String> {
        use std::io::BufRead;
        let (py, doc) = compute_python()?;
        std::fs::create_dir_all(&dir).unwrap();
        let state_file = dir.join("state.json");
        std::fs::write(&state_file, state.to_string()).unwrap();
        let mut child = Command::new(py)
            .arg(repo().join("tests/fake-gce-compute/server.py"))
            .arg("--discovery")
            .arg(doc)
            .arg("--state")
            .arg(&state_file)
            .arg("--write-keys")
            .arg(dir.join("keys"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
            .spawn()
            .map_err(|e| format!("spawning server.py: {e}"))?;
        let mut line = String::new();
        let read = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        match (read, line.trim().strip_prefix("listening ")) {
            (Ok(_), Some(p)) => Ok(ComputeServer {
                port: p.parse().unwrap(),
                child,
                dir,
            }),
            _ => {
                let _ = child.kill();
                Err(format!("server.py did not start: {line:?}"))
            }
        }
    }

    /// Replaces the server's state: written beside and renamed over the file, which the server
    /// reads again at its next request.
    pub fn set_state(&self, state: &serde_json::Value) {
        let tmp = self.dir.join("state.json.tmp");
        std::fs::write(&tmp, state.to_string()).unwrap();
        std::fs::rename(&tmp, self.dir.join("state.json")).unwrap();
    }

    /// How many requests the server has had for `path`.
    pub fn requests(&self, path: &str) -> u64 {
        let (_, body) = http_get(&format!("http://127.0.0.1:{}/_fake/requests", self.port))
            .expect("the server's request counts");
        let counts: serde_json::Value = serde_json::from_str(&body).unwrap();
        counts[path].as_u64().unwrap_or(0)
    }

    /// The `gce:` section naming this server.
    pub fn section(&self, project: &str, extra: &str) -> String {
        format!(
            "  - project: {project}\n    keyFile: {}\n    endpoint: http://127.0.0.1:{}\n{extra}",
            self.dir.join("keys/key.json").display(),
            self.port
        )
    }
}

/// A running ARM test server (`tests/fake-azure-arm/server.py`, the project's own, NOT
/// Microsoft's) with its token endpoint, over TLS with a CA of its own; stopped on drop.
pub struct ArmServer {
    child: std::process::Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl Drop for ArmServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ArmServer {
    /// Starts a server in `dir` answering from `state`; the CA it made is `dir/tls/ca.pem`,
    /// and `dir/client-secret` holds `secret`.
    pub fn start(
        dir: PathBuf,
        state: serde_json::Value,
        secret: &str,
    ) -> Result<ArmServer, String> {
        use std::io::BufRead;
        let out = Command::new(repo().join("scripts/azure-python.sh"))
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("scripts/azure-python.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/azure-python.sh failed: {}", out.status));
        }
        let py = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
        std::fs::write(dir.join("client-secret"), secret).unwrap();
        let mut child = Command::new(py)
            .arg(repo().join("tests/fake-azure-arm/server.py"))
            .arg("--state")
            .arg(dir.join("state.json"))
            .arg("--tls-dir")
            .arg(dir.join("tls"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
            .spawn()
            .map_err(|e| format!("spawning server.py: {e}"))?;
        let mut line = String::new();
        let read = std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        match (read, line.trim().strip_prefix("listening ")) {
            (Ok(_), Some(p)) => Ok(ArmServer {
                port: p.parse().unwrap(),
                child,
                dir,
            }),
            _ => {
                let _ = child.kill();
                Err(format!("server.py did not start: {line:?}"))
            }
        }
    }

    /// Replaces the server's state (written beside, renamed over).
    pub fn set_state(&self, state: &serde_json::Value) {
        let tmp = self.dir.join("state.json.tmp");
        std::fs::write(&tmp, state.to_string()).unwrap();
        std::fs::rename(&tmp, self.dir.join("state.json")).unwrap();
    }

    /// How many requests the server has had for `path` (lower-cased, without the query).
    pub fn requests(&self, path: &str) -> u64 {
        let out = Command::new("curl")
            .args(["-s", "--cacert"])
            .arg(self.dir.join("tls/ca.pem"))
            .arg(format!("https://127.0.0.1:{}/_fake/requests", self.port))
            .output()
            .expect("curl");
        let counts: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("the server's request counts");
        counts[path.to_ascii_lowercase()].as_u64().unwrap_or(0)
    }

    /// An `azure:` section naming this server: the subscription, its groups, a client secret.
    pub fn section(
        &self,
        subscription: &str,
        groups: &[&str],
        tenant: &str,
        client: &str,
        extra: &str,
    ) -> String {
        let url = format!("https://127.0.0.1:{}", self.port);
        format!(
            "  - subscription: {subscription}\n    resourceGroups: [{}]\n    tenantId: {tenant}\n    clientId: {client}\n    clientSecretFile: {}\n    endpoint: {url}\n    authorityHost: {url}\n    caFile: {}\n{extra}",
            groups.join(", "),
            self.dir.join("client-secret").display(),
            self.dir.join("tls/ca.pem").display(),
        )
    }
}

/// Both servers, or `None` (the test skips) when they cannot be started outside CI.
pub fn started(
    a: Result<ComputeServer, String>,
    b: Result<ComputeServer, String>,
) -> Option<(ComputeServer, ComputeServer)> {
    available("the test Compute server", a.and_then(|a| Ok((a, b?))))
}

/// moto's standalone server on a free port of 127.0.0.1, stopped on drop.
pub struct Moto {
    child: std::process::Child,
    pub port: u16,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moto, or `None` (the test skips) when it cannot be started outside CI.
pub fn moto() -> Option<Moto> {
    available("moto", start_moto())
}

fn start_moto() -> Result<Moto, String> {
    let server = match std::env::var("VL_MOTO_SERVER") {
        Ok(p) => p,
        Err(_) => {
            let out = Command::new(repo().join("scripts/moto.sh"))
                .stderr(std::process::Stdio::inherit())
                .output()
                .map_err(|e| format!("scripts/moto.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!("scripts/moto.sh failed: {}", out.status));
            }
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    };
    let port = free_port();
    let child = Command::new(&server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("{server}: {e}"))?;
    let mut moto = Moto { child, port };
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = moto.child.try_wait() {
            return Err(format!("moto_server exited: {status}"));
        }
        if Instant::now() > until {
            return Err("moto_server did not listen within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(moto)
}

/// The keys moto is given (it checks none without IAM users).
pub const KEY_ID: &str = "AKIATESTTESTTEST";
pub const SECRET: &str = "test-secret";

/// A plain SDK client, for the test's own writes to moto.
#[cfg(feature = "ebs")]
pub async fn writer(port: u16, region: &str) -> aws_sdk_ec2::Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            KEY_ID, SECRET, None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_ec2::Client::new(&sdk)
}

/// The tag specification of `tags` for a resource of `kind`.
#[cfg(feature = "ebs")]
fn tagged(
    kind: aws_sdk_ec2::types::ResourceType,
    tags: &[(&str, &str)],
) -> aws_sdk_ec2::types::TagSpecification {
    use aws_sdk_ec2::types::{Tag, TagSpecification};
    let mut spec = TagSpecification::builder().resource_type(kind);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    spec.build()
}

/// Creates a 10 GiB gp3 volume with these tags; returns its id.
#[cfg(feature = "ebs")]
pub async fn create_volume(ec2: &aws_sdk_ec2::Client, az: &str, tags: &[(&str, &str)]) -> String {
    let mut req = ec2
        .create_volume()
        .availability_zone(az)
        .size(10)
        .volume_type(aws_sdk_ec2::types::VolumeType::Gp3);
    if !tags.is_empty() {
        req = req.tag_specifications(tagged(aws_sdk_ec2::types::ResourceType::Volume, tags));
    }
    req.send()
        .await
        .expect("CreateVolume")
        .volume_id()
        .expect("an id")
        .to_string()
}

/// Creates a snapshot of `volume` with these tags; returns its id.
#[cfg(feature = "ebs")]
pub async fn create_snapshot(
    ec2: &aws_sdk_ec2::Client,
    volume: &str,
    tags: &[(&str, &str)],
) -> String {
    let mut req = ec2.create_snapshot().volume_id(volume);
    if !tags.is_empty() {
        req = req.tag_specifications(tagged(aws_sdk_ec2::types::ResourceType::Snapshot, tags));
    }
    req.send()
        .await
        .expect("CreateSnapshot")
        .snapshot_id()
        .expect("an id")
        .to_string()
}

/// A Retain PV of `class` with this CSI source (and no other), `size`.
fn csi_volume(
    name: &str,
    class: &str,
    size: &str,
    csi: k8s_openapi::api::core::v1::CSIPersistentVolumeSource,
) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some([("storage".to_string(), Quantity(size.into()))].into()),
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            storage_class_name: Some(class.into()),
            csi: Some(csi),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// Node affinity requiring `key In zones` (where a zonal disk can be attached).
pub fn zone_affinity(key: &str, zones: &[&str]) -> k8s_openapi::api::core::v1::VolumeNodeAffinity {
    use k8s_openapi::api::core::v1::{
        NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity,
    };
    VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: key.into(),
                    operator: "In".into(),
                    values: Some(zones.iter().map(|z| z.to_string()).collect()),
                }]),
                ..NodeSelectorTerm::default()
            }],
        }),
    }
}

/// A PV as ceph-csi provisions it: driver, handle, and the attributes naming its image.
pub fn rbd_pv(name: &str, class: &str, fsid: &str, pool: &str, image: &str) -> PersistentVolume {
    csi_volume(
        name,
        class,
        "16Mi",
        k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: "rbd.csi.ceph.com".into(),
            volume_handle: format!("0001-0024-{fsid}-0000000000000001-{image}"),
            volume_attributes: Some(BTreeMap::from([
                ("clusterID".to_string(), fsid.to_string()),
                ("pool".to_string(), pool.to_string()),
                ("imageName".to_string(), image.to_string()),
            ])),
            ..Default::default()
        },
    )
}

/// A PV as the GCE PD CSI driver provisions it.
pub fn gce_pv(name: &str, class: &str, handle: &str) -> PersistentVolume {
    csi_volume(
        name,
        class,
        "10Gi",
        k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: "pd.csi.storage.gke.io".into(),
            volume_handle: handle.into(),
            ..Default::default()
        },
    )
}

/// A PV as the Azure Disk CSI driver provisions it: its handle the disk's resource id.
pub fn azure_pv(name: &str, class: &str, disk_id: &str) -> PersistentVolume {
    csi_volume(
        name,
        class,
        "10Gi",
        k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: "disk.csi.azure.com".into(),
            volume_handle: disk_id.into(),
            ..Default::default()
        },
    )
}

/// A PV as the EBS CSI driver provisions it, in `zone`.
pub fn ebs_pv(name: &str, class: &str, volume_id: &str, zone: &str) -> PersistentVolume {
    let mut pv = csi_volume(
        name,
        class,
        "10Gi",
        k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
            driver: "ebs.csi.aws.com".into(),
            volume_handle: volume_id.into(),
            ..Default::default()
        },
    );
    pv.spec.as_mut().unwrap().node_affinity =
        Some(zone_affinity("topology.kubernetes.io/zone", &[zone]));
    pv
}

/// A snapshot as the PD CSI driver cuts it: its marker and what it was cut for in the
/// description, the cluster's label.
pub fn gce_csi_snapshot(name: &str, id: &str, cluster: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "id": id, "diskSizeGb": "20", "status": "READY",
        "storageBytes": "1048576", "creationTimestamp": "2026-03-03T10:00:00.000-08:00",
        "sourceDisk": "zones/europe-west1-b/disks/pvc-source",
        "labels": {"goog-k8s-cluster-name": cluster},
        "description": serde_json::json!({
            "kubernetes.io/created-for/volumesnapshot/name": format!("vs-{name}"),
            "kubernetes.io/created-for/volumesnapshot/namespace": "shop",
            "kubernetes.io/created-for/volumesnapshotcontent/name": format!("snapcontent-{id}"),
            "storage.gke.io/created-by": "pd.csi.storage.gke.io",
        }).to_string(),
    })
}
