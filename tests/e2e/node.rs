//! The chart and deploy/ as pods on a real node (issue 11): a control plane started with
//! `controlplane/up.sh DIR --node` (containerd, runc, a CNI bridge, kubelet, kube-scheduler and
//! kube-proxy in iptables mode, all from pinned Go modules, node/build.sh), the project's image
//! (scripts/image.sh, from the release binary) imported into the node's containerd without a
//! registry, then the operator installed with Helm (two replicas, the chart's defaults) or with
//! `kubectl apply -k deploy/`, and what the pods do, proven on the node:
//!
//! - the pods are Running and Ready; the kernel shows uid/gid 65532, no capabilities, NoNewPrivs,
//!   seccomp and a read-only root (a write by root fails with EROFS);
//! - each pod talks to the API server through the `kubernetes` Service (KUBERNETES_SERVICE_HOST,
//!   kube-proxy's DNAT) with the ServiceAccount token the kubelet projected into it: every request
//!   with that pod's User-Agent carries the token's `JTI=` credential id and the pod's name in
//!   `authentication.kubernetes.io/pod-name` (audit log);
//! - the mariadb leftover is reported (ClaimDeleted), written by the Lease holder only;
//! - deleting the leader pod hands over (the other pod's `volume_leftovers_leader` turns 1, the
//!   Lease changes holder), never two leaders at once (sampled every 100 ms);
//! - `kubectl rollout restart` completes; a finding made before is not written again, and findings
//!   made during the rollout are written exactly twice (create + status apply);
//! - `/metrics` answers through the Service's ClusterIP (kube-proxy) and from each EndpointSlice
//!   address; both pods through the ClusterIP (said, not asserted: see node/NOTES.md, problem 8).
//!
//! Needs root, the release binary (`VL_RELEASE_BINARY`, as tests/e2e/image.rs) and node/build.sh's
//! components; when any of it cannot be built or started, the tests fail (never skip). The two
//! tests, and release.rs's, take turns: one kube-proxy per machine (node/up.sh). Figures go to stderr (`node: ...`),
//! also when the tests pass; `VL_NODE_DEBUG=1` adds timestamps and every leader sample.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::Value;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};

use crate::support::*;

/// Namespace, release, Deployment, Service and Lease: all `volume-leftovers`, as docs/operations.md
/// installs it and deploy/ names it.
pub(crate) const NS: &str = "volume-leftovers";
pub(crate) const NAME: &str = "volume-leftovers";
const SELECTOR: &str = "app.kubernetes.io/instance=volume-leftovers";
/// What `image: volume-leftovers:0.1.0` resolves to, and what scripts/image.sh tags.
const IMAGE: &str = "docker.io/library/volume-leftovers:0.1.0";
const UID: &str = "65532";
const SA_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";
const CHART: &str = "charts/volume-leftovers";

/// A line in the test log, also when the test passes.
fn note(line: &str) {
    static T0: OnceLock<Instant> = OnceLock::new();
    let t0 = T0.get_or_init(Instant::now);
    if std::env::var_os("VL_NODE_DEBUG").is_some() {
        let _ = writeln!(
            std::io::stderr(),
            "node: [{:.2}] {line}",
            t0.elapsed().as_secs_f64()
        );
    } else {
        let _ = writeln!(std::io::stderr(), "node: {line}");
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

pub(crate) fn tmp() -> PathBuf {
    option_env!("CARGO_TARGET_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/tmp"))
}

/// One kube-proxy per machine: the tests of this file and release.rs take turns.
pub(crate) async fn node_turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

// --- the cluster ----------------------------------------------------------------------------

/// A control plane with a real node (`controlplane/up.sh DIR --owner-pid PID --node`), stopped
/// (node first) when dropped; its watchdog stops it too if this process dies.
pub(crate) struct Cluster {
    pub(crate) dir: PathBuf,
    pub(crate) bin: PathBuf,
    pub(crate) node_dir: PathBuf,
    node_bin: PathBuf,
    containerd: String,
    /// `up.sh` started → control plane ready.
    cp_start: Duration,
    /// control plane ready → Node Ready and kube-proxy synced (node/up.sh).
    node_start: Duration,
}

pub(crate) fn env_of(dir: &Path, key: &str) -> Result<String, String> {
    let env = std::fs::read_to_string(dir.join("env"))
        .map_err(|e| format!("{}/env: {e}", dir.display()))?;
    env.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_string))
        .ok_or_else(|| format!("no {key} in {}/env", dir.display()))
}

impl Cluster {
    fn start() -> Result<Cluster, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        // Named like support.rs's control planes, so that scripts/test.sh's check for leftover
        // processes covers this one (and its node) too.
        let dir = tmp().join(format!("controlplane-node-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let t0 = Instant::now();
        let mut child = Command::new(repo().join("controlplane/up.sh"))
            .arg(&dir)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .arg("--node")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running controlplane/up.sh --node: {e}"))?;
        // The two "ready" lines, timed as they come.
        let stderr = child.stderr.take().expect("piped stderr");
        let reader = std::thread::spawn(move || {
            BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
                .map(|l| (t0.elapsed(), l))
                .collect::<Vec<_>>()
        });
        let status = child
            .wait()
            .map_err(|e| format!("waiting for controlplane/up.sh: {e}"))?;
        let lines = reader.join().unwrap_or_default();
        let text: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
        if !status.success() {
            return Err(format!(
                "controlplane/up.sh {} --node failed ({status}):\n{text}",
                dir.display()
            ));
        }
        let at = |needle: &str| {
            lines
                .iter()
                .find(|(_, l)| l.contains(needle))
                .map(|(t, _)| *t)
                .ok_or_else(|| format!("up.sh did not say {needle:?}:\n{text}"))
        };
        let cp_ready = at("control plane ready at")?;
        let node_ready = at("ready (run dir")?;
        let node_dir = PathBuf::from(env_of(&dir, "NODE_RUN_DIR")?);
        Ok(Cluster {
            bin: env_of(&dir, "BIN_DIR")?.into(),
            node_bin: env_of(&node_dir, "NODE_BIN_DIR")?.into(),
            containerd: env_of(&node_dir, "CONTAINERD_ADDRESS")?,
            cp_start: cp_ready,
            node_start: node_ready.saturating_sub(cp_ready),
            dir,
            node_dir,
        })
    }

    pub(crate) fn start_or_fail() -> Cluster {
        Self::start().unwrap_or_else(|e| {
            panic!("the control plane with a node could not be started (tests never skip):\n{e}")
        })
    }

    pub(crate) fn kubeconfig(&self) -> PathBuf {
        self.dir.join("admin.kubeconfig")
    }

    pub(crate) fn kubectl(&self, args: &[&str]) -> Output {
        Command::new(self.bin.join("kubectl"))
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .output()
            .expect("running kubectl")
    }

    pub(crate) fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(crate) async fn client(&self) -> Client {
        client_of(&self.kubeconfig()).await
    }

    /// `ctr` on the node's containerd, in the CRI's namespace.
    pub(crate) fn ctr(&self, args: &[&str]) -> Output {
        Command::new(self.node_bin.join("ctr"))
            .args(["--address", &self.containerd, "--namespace", "k8s.io"])
            .args(args)
            .output()
            .expect("running ctr")
    }

    /// Imports a docker-archive into the node's containerd (what `ctr -n k8s.io images import`
    /// does on a real node; no registry).
    fn import_image(&self, tarball: &Path) -> Duration {
        let t = Instant::now();
        let out = self.ctr(&["images", "import", tarball.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "ctr images import {}: {}{}",
            tarball.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let took = t.elapsed();
        let list = self.ctr(&["images", "list", "-q"]);
        let names = String::from_utf8_lossy(&list.stdout);
        assert!(
            names.lines().any(|l| l.trim() == IMAGE),
            "{IMAGE} is not in the node's containerd after the import:\n{names}"
        );
        took
    }

    /// The host PID of a container (its init process), from containerd.
    fn container_pid(&self, container_id: &str) -> u32 {
        let out = self.ctr(&["tasks", "list"]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 3 && f[0] == container_id && f[2] == "RUNNING")
                    .then(|| f[1].parse().ok())
                    .flatten()
            })
            .unwrap_or_else(|| panic!("no running task {container_id} in containerd:\n{text}"))
    }

    /// The audit events of the operator's identity (the chart's and deploy/'s ServiceAccount),
    /// parsed. Only lines naming it are parsed: the node's components make most of the log.
    fn operator_events(&self) -> Vec<Value> {
        let path = self.dir.join("audit.log");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        let mut out = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            if !l.contains(OPERATOR_USER) {
                continue;
            }
            match serde_json::from_str::<Value>(l) {
                Ok(v) if v["user"]["username"] == OPERATOR_USER => out.push(v),
                Ok(_) => {}
                Err(_) if i + 1 == lines.len() && !complete => {}
                Err(e) => panic!("audit log line {}: {e}", i + 1),
            }
        }
        out
    }

    /// What went wrong, for a failing test: the pods, events, the operator's logs.
    fn explain(&self) {
        note("--- the cluster at the failure:");
        for args in [
            &["get", "nodes,pods,leases,vl", "-A", "-o", "wide"][..],
            &["get", "events", "-A", "--sort-by=.lastTimestamp"][..],
            &["-n", NS, "logs", "-l", SELECTOR, "--tail=30", "--prefix"][..],
        ] {
            let out = self.kubectl(args);
            note(&format!("$ kubectl {}", args.join(" ")));
            for l in String::from_utf8_lossy(&out.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&out.stderr).lines())
            {
                note(&format!("  {l}"));
            }
        }
        note(&format!(
            "the logs of the node are in {}",
            self.node_dir.display()
        ));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.explain();
        }
        let t = Instant::now();
        let _ = Command::new(repo().join("controlplane/down.sh"))
            .arg(&self.dir)
            .status();
        note(&format!(
            "controlplane/down.sh (node first: containers, kube-proxy's rules, ...) took {}",
            secs(t.elapsed())
        ));
    }
}

/// An admin client (made in the runtime that uses it: a kube Client's worker task lives there).
async fn client_of(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let mut config = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("config");
    volume_leftovers::watch::client::tune(&mut config, Duration::from_secs(20));
    Client::try_from(config).expect("client")
}

/// Runs `f` on a thread and a runtime of its own, so that the test's blocking calls (kubectl, the
/// audit log) never delay it: observers that must keep their pace.
fn on_own_runtime<T, Fut>(f: impl FnOnce() -> Fut + Send + 'static) -> std::thread::JoinHandle<T>
where
    T: Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
            .block_on(f())
    })
}

// --- the image and Helm, built once per test binary -------------------------------------------

/// The docker-archive scripts/image.sh builds from the release binary (`VL_RELEASE_BINARY`), and
/// how long the build took.
fn image() -> (PathBuf, Duration) {
    static IMAGE_TAR: OnceLock<Result<(PathBuf, Duration), String>> = OnceLock::new();
    let built = IMAGE_TAR.get_or_init(|| {
        let binary = match std::env::var_os("VL_RELEASE_BINARY") {
            Some(b) if !b.is_empty() => PathBuf::from(b),
            _ => {
                return Err(
                    "VL_RELEASE_BINARY is not set: these tests build the container image \
                            from the release binary. Run `cargo build --release` and set \
                            VL_RELEASE_BINARY to the binary it made (scripts/test.sh does both)"
                        .into(),
                );
            }
        };
        if !binary.is_file() {
            return Err(format!(
                "VL_RELEASE_BINARY={} is not a file: run `cargo build --release`",
                binary.display()
            ));
        }
        // The images of earlier test processes (46 MB each) go; this one's stays for the other
        // test of this process.
        for e in std::fs::read_dir(tmp()).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("node-image-")
                && pid.parse::<u32>().is_ok()
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
        let dir = tmp().join(format!("node-image-{}", std::process::id()));
        let t = Instant::now();
        let out = Command::new(repo().join("scripts/image.sh"))
            .env("VL_BINARY", &binary)
            .env("VL_IMAGE_DIR", &dir)
            .output()
            .map_err(|e| format!("running scripts/image.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/image.sh failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let tar = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
        if !tar.is_file() {
            return Err(format!("scripts/image.sh printed no tarball: {stdout}"));
        }
        Ok((tar, t.elapsed()))
    });
    match built {
        Ok(v) => v.clone(),
        Err(e) => panic!("the image could not be built (tests never skip):\n{e}"),
    }
}

/// helm, built by tools/build.sh (cached), run in the repository with its own home.
pub(crate) fn helm(cluster: &Cluster, args: &[&str]) -> String {
    static HELM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let helm = HELM.get_or_init(|| {
        let out = Command::new(repo().join("tools/build.sh"))
            .arg("helm")
            .output()
            .map_err(|e| format!("running tools/build.sh helm: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tools/build.sh helm failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("helm"))
    });
    let helm = match helm {
        Ok(p) => p,
        Err(e) => panic!("helm could not be built (tests never skip):\n{e}"),
    };
    let home = cluster.dir.join("helm-home");
    let out = Command::new(helm)
        .current_dir(repo())
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECACHEDIR", home.join("kube-cache"))
        .env_remove("KUBECONFIG")
        .env_remove("HELM_NAMESPACE")
        .env_remove("HELM_KUBECONTEXT")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(args)
        .output()
        .expect("running helm");
    assert!(
        out.status.success(),
        "helm {args:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

// --- pods --------------------------------------------------------------------------------------

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn terminating(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_some()
}

pub(crate) fn pod_name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn pod_ip(p: &Pod) -> Option<String> {
    p.status.as_ref()?.pod_ip.clone()
}

/// The operator's pods (terminating ones included).
async fn operator_pods(pods: &Api<Pod>) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(SELECTOR))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
}

/// Waits until exactly `n` operator pods exist, none terminating, all Running and Ready; returns
/// them, and for each the time (since `since`) it was first seen Ready.
pub(crate) async fn wait_ready(
    pods: &Api<Pod>,
    n: usize,
    since: Instant,
    timeout: Duration,
) -> (Vec<Pod>, BTreeMap<String, Duration>) {
    let mut first_ready: BTreeMap<String, Duration> = BTreeMap::new();
    let start = Instant::now();
    loop {
        let all = operator_pods(pods).await;
        for p in &all {
            if is_ready(p) {
                first_ready.entry(pod_name(p)).or_insert(since.elapsed());
            }
        }
        let live: Vec<Pod> = all.into_iter().filter(|p| !terminating(p)).collect();
        if live.len() == n
            && live.iter().all(|p| {
                is_ready(p) && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        {
            return (live, first_ready);
        }
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {n} Ready operator pods; have: {:?}",
            live.iter()
                .map(|p| (
                    pod_name(p),
                    is_ready(p),
                    p.status.as_ref().and_then(|s| s.phase.clone())
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// --- HTTP to the pods, and the leader ------------------------------------------------------------

/// GET http://ADDR/PATH (HTTP/1.0, 2 s bound): (status, body).
async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    get_within(addr, path, Duration::from_secs(2)).await
}

async fn get_within(addr: &str, path: &str, bound: Duration) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let code = head.split_whitespace().nth(1)?.parse().ok()?;
        Some((code, body.to_string()))
    };
    tokio::time::timeout(bound, fut).await.ok().flatten()
}

/// The value of a sample (`name` or `name{labels}`) in a metrics text.
fn sample(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// `volume_leftovers_leader` of the pod at `ip`; `None` when it does not answer within a second
/// (a pod that is gone does not answer at all).
async fn leading(ip: &str) -> Option<bool> {
    let (code, body) =
        get_within(&format!("{ip}:8080"), "/metrics", Duration::from_secs(1)).await?;
    (code == 200).then_some(())?;
    sample(&body, "volume_leftovers_leader").map(|v| v == 1.0)
}

async fn lease_holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(NAME)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}

/// Pod name → (first seen, first seen Ready).
type PodTimes = Arc<Mutex<BTreeMap<String, (Instant, Option<Instant>)>>>;

/// Samples every operator pod's `volume_leftovers_leader` every 100 ms until finished, recording
/// any moment with two leaders, and when each pod was first seen and first seen Ready.
struct LeaderSampler {
    overlaps: Arc<Mutex<Vec<String>>>,
    samples: Arc<AtomicU32>,
    times: PodTimes,
    stop: Arc<AtomicBool>,
    task: std::thread::JoinHandle<()>,
}

impl LeaderSampler {
    fn start(kubeconfig: PathBuf) -> LeaderSampler {
        let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
        let samples = Arc::new(AtomicU32::new(0));
        let times: PodTimes = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (overlaps, samples, times, stop) = (
                overlaps.clone(),
                samples.clone(),
                times.clone(),
                stop.clone(),
            );
            on_own_runtime(move || async move {
                let pods = Api::<Pod>::namespaced(client_of(&kubeconfig).await, NS);
                while !stop.load(Ordering::SeqCst) {
                    let it = Instant::now();
                    let all =
                        match tokio::time::timeout(Duration::from_secs(2), operator_pods(&pods))
                            .await
                        {
                            Ok(all) => all,
                            Err(_) => {
                                note("sample: listing the pods timed out");
                                continue;
                            }
                        };
                    let listed = it.elapsed();
                    {
                        let now = Instant::now();
                        let mut t = times.lock().unwrap();
                        for p in &all {
                            let e = t.entry(pod_name(p)).or_insert((now, None));
                            if e.1.is_none() && is_ready(p) {
                                e.1 = Some(now);
                            }
                        }
                    }
                    let checks = all.iter().filter_map(|p| {
                        let ip = pod_ip(p)?;
                        let name = pod_name(p);
                        Some(async move {
                            let t = Instant::now();
                            let l = leading(&ip).await;
                            if std::env::var_os("VL_NODE_DEBUG").is_some()
                                && t.elapsed() > Duration::from_millis(500)
                            {
                                note(&format!("sample: {ip} took {:?}: {l:?}", t.elapsed()));
                            }
                            (name, l)
                        })
                    });
                    let leaders: Vec<String> = futures::future::join_all(checks)
                        .await
                        .into_iter()
                        .filter(|(_, l)| *l == Some(true))
                        .map(|(n, _)| n)
                        .collect();
                    if leaders.len() > 1 {
                        overlaps.lock().unwrap().push(leaders.join(","));
                    }
                    samples.fetch_add(1, Ordering::Relaxed);
                    if std::env::var_os("VL_NODE_DEBUG").is_some() {
                        note(&format!(
                            "sample: {:?} listed in {listed:?}, iteration {:?}",
                            all.iter()
                                .map(|p| (pod_name(p), is_ready(p), terminating(p)))
                                .collect::<Vec<_>>(),
                            it.elapsed()
                        ));
                    }
                    if std::env::var_os("VL_NODE_DEBUG").is_some() {
                        note("sample: sleeping");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if std::env::var_os("VL_NODE_DEBUG").is_some() {
                        note("sample: slept");
                    }
                }
                if std::env::var_os("VL_NODE_DEBUG").is_some() {
                    note("sample: stopped");
                }
            })
        };
        LeaderSampler {
            overlaps,
            samples,
            times,
            stop,
            task,
        }
    }

    /// (samples, moments with two leaders, pod name → first seen to Ready).
    fn finish(self) -> (u32, Vec<String>, BTreeMap<String, Option<Duration>>) {
        // Two more samples, so that the final state is in.
        let (n, t) = (self.samples.load(Ordering::Relaxed), Instant::now());
        while self.samples.load(Ordering::Relaxed) < n + 2 && t.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop.store(true, Ordering::SeqCst);
        if let Err(e) = self.task.join() {
            std::panic::resume_unwind(e);
        }
        let times = self
            .times
            .lock()
            .unwrap()
            .iter()
            .map(|(n, (seen, ready))| (n.clone(), ready.map(|r| r.duration_since(*seen))))
            .collect();
        (
            self.samples.load(Ordering::Relaxed),
            self.overlaps.lock().unwrap().clone(),
            times,
        )
    }
}

// --- what the audit log says ---------------------------------------------------------------------

/// The pod named in a User-Agent `volume-leftovers/<version> (<pod>)`.
fn pod_of(e: &Value) -> String {
    let ua = e["userAgent"].as_str().unwrap_or("");
    ua.split_once(" (")
        .and_then(|(_, r)| r.strip_suffix(')'))
        .unwrap_or(ua)
        .to_string()
}

/// Write requests on VolumeLeftovers: (object name) → [(pod, verb, subresource)], in order.
fn writes(events: &[Value]) -> BTreeMap<String, Vec<(String, String, String)>> {
    let mut out: BTreeMap<String, Vec<(String, String, String)>> = BTreeMap::new();
    for e in events {
        let verb = e["verb"].as_str().unwrap_or("");
        if e["objectRef"]["resource"] == "volumeleftovers"
            && matches!(verb, "create" | "update" | "patch" | "delete")
        {
            out.entry(e["objectRef"]["name"].as_str().unwrap_or("").to_string())
                .or_default()
                .push((
                    pod_of(e),
                    verb.to_string(),
                    e["objectRef"]["subresource"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ));
        }
    }
    out
}

/// Exactly a create and a status apply, by one pod.
fn assert_create_and_status(name: &str, w: &[(String, String, String)]) -> String {
    let verbs: Vec<(&str, &str)> = w.iter().map(|(_, v, s)| (v.as_str(), s.as_str())).collect();
    assert_eq!(
        verbs,
        [("create", ""), ("patch", "status")],
        "{name}: written {w:?}, not exactly create + status apply"
    );
    let by: BTreeSet<&str> = w.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(by.len(), 1, "{name}: written by several pods: {w:?}");
    w[0].0.clone()
}

// --- what the kernel and the token say about a pod ----------------------------------------------

/// The claims of a JWT, unverified (the test reads what the kubelet's token carries).
fn jwt_claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).expect("a JWT has three parts");
    let mut bytes = Vec::new();
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in payload.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => panic!("not base64url: {payload}"),
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    serde_json::from_slice(&bytes).expect("JWT claims are JSON")
}

fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/PID/status"))
        .trim()
        .to_string()
}

/// What one pod is, seen from the node.
struct PodFacts {
    name: String,
    ip: String,
    jti: String,
}

/// Checks, on the node, the security context and the in-cluster configuration of a pod's
/// container, and reads the JTI of the ServiceAccount token the kubelet projected into it.
fn inspect(cluster: &Cluster, pod: &Pod, kubernetes_ip: &str) -> PodFacts {
    let name = pod_name(pod);
    let status = pod.status.as_ref().expect("pod status");
    let cs = &status
        .container_statuses
        .as_ref()
        .expect("container statuses")[0];
    assert_eq!(cs.restart_count, 0, "{name} restarted: {cs:?}");
    assert_eq!(cs.image, IMAGE, "{name} runs {}", cs.image);
    let id = cs
        .container_id
        .as_deref()
        .and_then(|c| c.strip_prefix("containerd://"))
        .unwrap_or_else(|| panic!("{name}: container id {:?}", cs.container_id))
        .to_string();
    let pid = cluster.container_pid(&id);
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    for key in ["Uid", "Gid"] {
        let ids: Vec<String> = status_field(&proc_status, key)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(ids, [UID; 4], "{name}: {key} (real, effective, saved, fs)");
    }
    for cap in ["CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            u64::from_str_radix(&status_field(&proc_status, cap), 16).unwrap(),
            0,
            "{name}: {cap}"
        );
    }
    assert_eq!(status_field(&proc_status, "NoNewPrivs"), "1", "{name}");
    assert_eq!(
        status_field(&proc_status, "Seccomp"),
        "2",
        "{name}: RuntimeDefault seccomp filter"
    );
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        Path::new("/usr/local/bin/volume-leftovers"),
        "{name}"
    );
    // A read-only root: mounted ro, and not even root on the host can write into it.
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    let root_opts = mountinfo
        .lines()
        .rev()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.len() > 5 && f[4] == "/").then_some(f[5])
        })
        .expect("a root mount");
    assert!(
        root_opts.split(',').any(|o| o == "ro"),
        "{name}: / is mounted {root_opts}"
    );
    let err = std::fs::write(format!("/proc/{pid}/root/write-probe"), "x")
        .expect_err("the container's root must be read-only");
    assert_eq!(err.raw_os_error(), Some(30), "{name}: EROFS, not {err}");
    // The in-cluster configuration: the `kubernetes` Service's address, no kubeconfig.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    for want in [
        format!("KUBERNETES_SERVICE_HOST={kubernetes_ip}"),
        "KUBERNETES_SERVICE_PORT=443".to_string(),
        format!("POD_NAME={name}"),
        format!("POD_NAMESPACE={NS}"),
    ] {
        assert!(environ.contains(&want), "{name}: {want} not in {environ:?}");
    }
    assert!(
        !environ.iter().any(|v| v.starts_with("KUBECONFIG=")),
        "{name}: {environ:?}"
    );
    // The token the kubelet projected: bound to this pod.
    let token_path = format!("/proc/{pid}/root/{SA_DIR}/token");
    let token = std::fs::read_to_string(&token_path)
        .unwrap_or_else(|e| panic!("{name}: {token_path}: {e}"));
    let claims = jwt_claims(token.trim());
    assert_eq!(claims["sub"], OPERATOR_USER, "{name}: {claims}");
    assert_eq!(
        claims["kubernetes.io"]["pod"]["name"].as_str(),
        Some(name.as_str()),
        "{name}: the token is bound to its pod: {claims}"
    );
    let jti = claims["jti"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no jti in {claims}"))
        .to_string();
    PodFacts {
        name,
        ip: pod_ip(pod).expect("pod IP"),
        jti,
    }
}

/// Every request a pod made (its User-Agent) was authenticated with the token projected into it:
/// the token's JTI as credential id, the pod's name in the extra the API server derives from a
/// bound token. Returns how many requests that was.
fn assert_authenticated_with_projected_token(events: &[Value], pod: &PodFacts) -> usize {
    let ua = format!(
        "volume-leftovers/{} ({})",
        env!("CARGO_PKG_VERSION"),
        pod.name
    );
    let mine: Vec<&Value> = events.iter().filter(|e| e["userAgent"] == ua).collect();
    assert!(
        !mine.is_empty(),
        "no request with User-Agent {ua:?} in the audit log"
    );
    for e in &mine {
        let extra = &e["user"]["extra"];
        assert_eq!(
            extra["authentication.kubernetes.io/credential-id"],
            serde_json::json!([format!("JTI={}", pod.jti)]),
            "a request of {} without its projected token's credential id: {e}",
            pod.name
        );
        assert_eq!(
            extra["authentication.kubernetes.io/pod-name"],
            serde_json::json!([pod.name]),
            "{e}"
        );
    }
    mine.len()
}

// --- the scenario ------------------------------------------------------------------------------

/// scripts/demo-scenario.yaml applied, its claim bound and deleted: mariadb-pv is Released.
/// Returns when the claim was deleted.
pub(crate) async fn mariadb_released(cluster: &Cluster, client: &Client) -> Instant {
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("scripts/demo-scenario.yaml").to_str().unwrap(),
    ]);
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), "mariadb");
    wait_for(
        "PVC mariadb/mariadb to be Bound",
        Duration::from_secs(60),
        || async {
            let c = claims.get_opt("mariadb").await.ok().flatten()?;
            (c.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(())
        },
    )
    .await;
    let deleted = Instant::now();
    delete(&claims, "mariadb").await;
    wait_pv_phase(
        &Api::<PersistentVolume>::all(client.clone()),
        "mariadb-pv",
        "Released",
    )
    .await;
    deleted
}

/// Waits for the ClaimDeleted VolumeLeftover `name`.
pub(crate) async fn wait_claim_deleted(client: &Client, name: &str) {
    wait_leftover(
        &Api::<VolumeLeftover>::all(client.clone()),
        name,
        "ClaimDeleted",
        |o| reason(o) == Some(Reason::ClaimDeleted),
    )
    .await;
}

/// Waits until the pod at `ip` leads and has nothing queued or in flight.
async fn wait_leader_idle(ip: &str) {
    wait_for(
        &format!("the leader at {ip} to be idle"),
        Duration::from_secs(60),
        || async {
            let (_, body) = get(&format!("{ip}:8080"), "/metrics").await?;
            let idle = sample(&body, "volume_leftovers_leader") == Some(1.0)
                && sample(&body, "volume_leftovers_queued_volumes") == Some(0.0)
                && sample(&body, "volume_leftovers_writes_in_flight") == Some(0.0);
            idle.then_some(())
        },
    )
    .await;
}

// --- the tests -----------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_on_a_real_node_one_writer_hands_over_and_rolls_out() {
    let _turn = node_turn().await;
    let started = Instant::now();
    let (tarball, image_build) = image();
    let cluster = Cluster::start_or_fail();
    let import = cluster.import_image(&tarball);
    note(&format!(
        "control plane up in {}, node Ready (containerd, kubelet, scheduler, kube-proxy synced) {} \
         later; image built in {}, imported in {}",
        secs(cluster.cp_start),
        secs(cluster.node_start),
        secs(image_build),
        secs(import)
    ));
    let client = cluster.client().await;
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let leases = Api::<Lease>::namespaced(client.clone(), NS);
    let kubernetes_ip = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("its ClusterIP");

    // --- install: docs/operations.md's command, with the image the node has --------------------------
    // The namespace as deploy/ makes it: the restricted Pod Security level, enforced.
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("deploy/namespace.yaml").to_str().unwrap(),
    ]);
    // Watches the pods from before they exist: leaders, and how long each took to be Ready.
    let sampler = LeaderSampler::start(cluster.kubeconfig());
    let t = Instant::now();
    helm(
        &cluster,
        &[
            "install",
            NAME,
            CHART,
            "-n",
            NS,
            "--set",
            "image.pullPolicy=Never",
        ],
    );
    let (ready, first_ready) = wait_ready(&pods, 2, t, Duration::from_secs(120)).await;
    let to_ready = t.elapsed();
    note(&format!(
        "helm install → both pods Ready in {} (first Ready at {:?})",
        secs(to_ready),
        first_ready.values().map(|d| secs(*d)).collect::<Vec<_>>()
    ));
    let facts: Vec<PodFacts> = ready
        .iter()
        .map(|p| inspect(&cluster, p, &kubernetes_ip))
        .collect();
    note(
        "both pods: uid/gid 65532, no capabilities, NoNewPrivs, seccomp 2, read-only root (EROFS), in-cluster configuration through the kubernetes Service",
    );

    // --- the mariadb leftover, written by the leader only --------------------------------------
    let claim_deleted = mariadb_released(&cluster, &client).await;
    wait_claim_deleted(&client, "mariadb-pv").await;
    let found = claim_deleted.elapsed();
    let leader = wait_for("a Lease holder", Duration::from_secs(30), || {
        lease_holder(&leases)
    })
    .await;
    assert!(
        facts.iter().any(|f| f.name == leader),
        "the Lease holder {leader} is one of the pods"
    );
    let events = wait_for(
        "the audit log to show mariadb-pv's create and status apply",
        Duration::from_secs(15),
        || {
            let events = cluster.operator_events();
            let done = writes(&events)
                .get("mariadb-pv")
                .is_some_and(|w| w.len() >= 2);
            async move { done.then_some(events) }
        },
    )
    .await;
    let w = writes(&events);
    let writer = assert_create_and_status("mariadb-pv", &w["mariadb-pv"]);
    assert_eq!(writer, leader, "the Lease holder writes");
    let by: BTreeSet<String> = w.values().flatten().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(by, BTreeSet::from([leader.clone()]), "one writer: {w:?}");
    for f in &facts {
        let n = assert_authenticated_with_projected_token(&events, f);
        note(&format!(
            "{}: {n} requests, each with credential-id JTI={} and pod-name {}",
            f.name, f.jti, f.name
        ));
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| !facts.iter().any(|f| pod_of(e) == f.name))
            .count(),
        0,
        "every request of {OPERATOR_USER} came from the two pods"
    );
    note(&format!(
        "mariadb-pv ClaimDeleted {} after the claim was deleted; written twice, by the leader {leader}",
        secs(found)
    ));

    // --- /metrics through the Service (kube-proxy) and its EndpointSlice ------------------------
    let svc = Api::<Service>::namespaced(client.clone(), NS)
        .get(NAME)
        .await
        .expect("the Service");
    let cluster_ip = svc.spec.and_then(|s| s.cluster_ip).expect("a ClusterIP");
    let slices = Api::<EndpointSlice>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={NAME}")))
        .await
        .expect("EndpointSlices");
    let endpoint_ips: BTreeSet<String> = slices
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect();
    let pod_ips: BTreeSet<String> = facts.iter().map(|f| f.ip.clone()).collect();
    assert_eq!(
        endpoint_ips, pod_ips,
        "the Service's endpoints are the two pods"
    );
    for ip in &endpoint_ips {
        let (code, body) = get(&format!("{ip}:8080"), "/metrics")
            .await
            .unwrap_or_else(|| panic!("no answer from the endpoint {ip}:8080"));
        assert_eq!(code, 200);
        assert!(body.contains("volume_leftovers_leader "), "{body}");
    }
    // Through the ClusterIP both pods answer (kube-proxy picks one per connection): the leader
    // says 1, the standby 0.
    // kube-proxy programs an endpoint within about a second of the EndpointSlice (minSyncPeriod),
    // so the requests are spread over up to 15 s.
    // A request that gets no answer (kube-proxy has not programmed the Service yet: once in CI
    // the first one did not) is tried again within the same 15 s.
    let through = Instant::now();
    let mut seen = BTreeSet::new();
    // Before the rules are in place, a connection to the ClusterIP may also reach whatever the
    // sandbox's network answers there (once in CI: a 426 with no body); such an answer is
    // counted and the request tried again, like one that gets no answer.
    let (mut tries, mut unanswered) = (0, 0);
    let mut strangers: Vec<u16> = Vec::new();
    while seen.len() < 2 && through.elapsed() < Duration::from_secs(15) {
        tries += 1;
        match get(&format!("{cluster_ip}:8080"), "/metrics").await {
            Some((200, body)) => {
                seen.insert(
                    sample(&body, "volume_leftovers_leader").expect("the leader gauge") as i64,
                );
            }
            Some((code, _)) => strangers.push(code),
            None => unanswered += 1,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Reachable through the Service: the point. Both pods behind it: expected (kube-proxy picks
    // an endpoint at random per connection), and said when it does not happen, with what
    // kube-proxy programmed (once in a dozen runs only the standby answered for 15 s; see
    // node/NOTES.md).
    let rules = || {
        Command::new("iptables")
            .args(["-w", "5", "-t", "nat", "-S"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(&format!("{NS}/{NAME}")))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        !seen.is_empty(),
        "nothing answered through {cluster_ip}:8080 in {tries} requests over 15 s (other answers: {strangers:?}); the Service's rules:\n{}",
        rules()
    );
    if unanswered > 0 || !strangers.is_empty() {
        note(&format!(
            "{unanswered} of {tries} requests through {cluster_ip}:8080 got no answer, {} another one ({strangers:?})",
            strangers.len()
        ));
    }
    if seen.len() < 2 {
        let mut direct = Vec::new();
        for f in &facts {
            direct.push((f.name.clone(), f.ip.clone(), leading(&f.ip).await));
        }
        note(&format!(
            "WARNING: only {seen:?} answered through {cluster_ip}:8080 in {tries} requests; \
             directly: {direct:?}; the Service's rules:\n{}",
            rules()
        ));
    } else {
        note(&format!(
            "/metrics through the Service {cluster_ip}:8080 (kube-proxy, iptables): both pods \
             answered, the leader (1) and the standby (0), within {tries} requests"
        ));
    }

    // --- the leader pod deleted: another one takes over ------------------------------------------
    // The leader releases the Lease as it stops; the standby and the pod the ReplicaSet creates in
    // its place race for it (in CI the replacement, its image cached, was up within 2 s and won),
    // so either may lead, but only one, and never the deleted pod.
    let t = Instant::now();
    cluster.kubectl_ok(&["-n", NS, "delete", "pod", &leader, "--wait=false"]);
    let new_leader = wait_for(
        "another pod to hold the Lease",
        Duration::from_secs(30),
        || async {
            lease_holder(&leases)
                .await
                .filter(|h| !h.is_empty() && *h != leader)
        },
    )
    .await;
    let new_leader_ip = wait_for(
        "the new leader's address",
        Duration::from_secs(30),
        || async {
            pods.get_opt(&new_leader)
                .await
                .ok()
                .flatten()
                .as_ref()
                .and_then(pod_ip)
        },
    )
    .await;
    wait_for(
        "the new leader to say it leads",
        Duration::from_secs(30),
        || async { (leading(&new_leader_ip).await == Some(true)).then_some(()) },
    )
    .await;
    let handover = t.elapsed();
    let standby = facts.iter().find(|f| f.name != leader).unwrap();
    let role = if new_leader == standby.name {
        "the standby"
    } else {
        "the replacement pod"
    };
    note(&format!(
        "leader pod {leader} deleted → {role} {new_leader} leads (Lease holder, metric 1) in {}",
        secs(handover)
    ));
    let (after_delete, _) = wait_ready(&pods, 2, t, Duration::from_secs(120)).await;
    assert!(
        after_delete.iter().any(|p| pod_name(p) == new_leader),
        "the new leader {new_leader} is one of the two Ready pods"
    );
    for p in after_delete.iter().filter(|p| pod_name(p) != new_leader) {
        let ip = pod_ip(p).expect("a Ready pod has an address");
        assert_eq!(
            leading(&ip).await,
            Some(false),
            "{} does not lead while {new_leader} does",
            pod_name(p)
        );
    }
    let replacement_ready = t.elapsed();
    // A finding after the handover: the new leader writes it, once.
    let handed = {
        let pvs = Api::<PersistentVolume>::all(client.clone());
        let claimed = claimed_volume(&client, "node-del", "Retain").await;
        wait_pv_phase(&pvs, &claimed.pv, "Bound").await;
        delete(
            &Api::<PersistentVolumeClaim>::namespaced(client.clone(), &claimed.ns),
            "data",
        )
        .await;
        wait_claim_deleted(&client, &claimed.pv).await;
        claimed.pv
    };
    wait_leader_idle(&new_leader_ip).await;
    let w = writes(&cluster.operator_events());
    assert_eq!(
        assert_create_and_status(&handed, &w[&handed]),
        new_leader,
        "the new leader writes"
    );

    // --- kubectl rollout restart: no duplicate writes --------------------------------------------
    // Volumes bound before; their claims are deleted one every 250 ms from the restart on, until
    // the rollout has completed, and the rest after it.
    const ROLL: usize = 12;
    let mut bound = Vec::new();
    for i in 0..ROLL {
        bound.push(claimed_volume(&client, &format!("node-roll{i}"), "Retain").await);
    }
    for c in &bound {
        wait_pv_phase(
            &Api::<PersistentVolume>::all(client.clone()),
            &c.pv,
            "Bound",
        )
        .await;
    }
    let old_pods: BTreeSet<String> = after_delete.iter().map(pod_name).collect();
    let before = writes(&cluster.operator_events());
    let rolled = Arc::new(AtomicBool::new(false));
    let t = Instant::now();
    cluster.kubectl_ok(&[
        "-n",
        NS,
        "rollout",
        "restart",
        &format!("deployment/{NAME}"),
    ]);
    // One claim goes at the restart and one at every step of the rollout the pods show (a pod
    // created, Ready, terminating, gone), so that findings are made around each handover.
    let deleter = {
        let kubeconfig = cluster.kubeconfig();
        let rolled = rolled.clone();
        let namespaces: Vec<String> = bound.iter().map(|c| c.ns.clone()).collect();
        on_own_runtime(move || async move {
            let client = client_of(&kubeconfig).await;
            let pods = Api::<Pod>::namespaced(client.clone(), NS);
            let mut during = Vec::new();
            let mut last = None;
            while during.len() < namespaces.len() && !rolled.load(Ordering::SeqCst) {
                let state: BTreeSet<(String, bool, bool)> = operator_pods(&pods)
                    .await
                    .iter()
                    .map(|p| (pod_name(p), is_ready(p), terminating(p)))
                    .collect();
                if last.as_ref() != Some(&state) {
                    let ns = &namespaces[during.len()];
                    delete(
                        &Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns),
                        "data",
                    )
                    .await;
                    let (ready, term) = (
                        state.iter().filter(|s| s.1 && !s.2).count(),
                        state.iter().filter(|s| s.2).count(),
                    );
                    during.push((
                        t.elapsed(),
                        format!("{} pods, {ready} Ready, {term} terminating", state.len()),
                    ));
                    last = Some(state);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            during
        })
    };
    let kubeconfig = cluster.kubeconfig();
    let kubectl = cluster.bin.join("kubectl");
    let status = tokio::task::spawn_blocking(move || {
        Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args([
                "-n",
                NS,
                "rollout",
                "status",
                &format!("deployment/{NAME}"),
                "--timeout=240s",
            ])
            .output()
            .expect("kubectl rollout status")
    })
    .await
    .unwrap();
    let rollout = t.elapsed();
    rolled.store(true, Ordering::SeqCst);
    assert!(
        status.status.success(),
        "kubectl rollout status: {}{}",
        String::from_utf8_lossy(&status.stdout),
        String::from_utf8_lossy(&status.stderr)
    );
    let during = deleter.join().expect("the claim deleter");
    for c in &bound[during.len()..] {
        delete(
            &Api::<PersistentVolumeClaim>::namespaced(client.clone(), &c.ns),
            "data",
        )
        .await;
    }
    note(&format!(
        "rollout restart completed in {} (kubectl rollout status); {} claims deleted during it, {} \
         after: {:?}",
        secs(rollout),
        during.len(),
        ROLL - during.len(),
        during
            .iter()
            .map(|(at, pods)| format!("{} ({pods})", secs(*at)))
            .collect::<Vec<_>>(),
    ));
    assert!(
        during.len() >= 3,
        "at least 3 findings must be made during the rollout (the rollout took {rollout:?})"
    );
    let (after_rollout, _) = wait_ready(&pods, 2, Instant::now(), Duration::from_secs(60)).await;
    let new_pods: BTreeSet<String> = after_rollout.iter().map(pod_name).collect();
    assert!(
        new_pods.is_disjoint(&old_pods),
        "the rollout replaced both pods: {new_pods:?} after {old_pods:?}"
    );
    // The old pods stop (SIGTERM: they release the Lease if they hold it, and exit).
    wait_for(
        "the old pods to be gone",
        Duration::from_secs(60),
        || async {
            let left: Vec<String> = operator_pods(&pods).await.iter().map(pod_name).collect();
            left.iter().all(|p| !old_pods.contains(p)).then_some(())
        },
    )
    .await;
    let old_gone = t.elapsed();
    for c in &bound {
        wait_claim_deleted(&client, &c.pv).await;
    }
    let final_leader = wait_for(
        "a Lease holder after the rollout",
        Duration::from_secs(30),
        || lease_holder(&leases),
    )
    .await;
    assert!(
        new_pods.contains(&final_leader),
        "the Lease moved to a new pod, not {final_leader}"
    );
    let final_ip = after_rollout
        .iter()
        .find(|p| pod_name(p) == final_leader)
        .and_then(pod_ip)
        .expect("the leader's IP");
    wait_leader_idle(&final_ip).await;
    let after = writes(&cluster.operator_events());
    for name in ["mariadb-pv", handed.as_str()] {
        assert_eq!(
            after.get(name),
            before.get(name),
            "{name}, found before the rollout, is not written again"
        );
    }
    let mut writers: BTreeMap<String, usize> = BTreeMap::new();
    for c in &bound {
        *writers
            .entry(assert_create_and_status(&c.pv, &after[&c.pv]))
            .or_default() += 1;
    }
    note(&format!(
        "{ROLL} findings made during and after the rollout: each exactly create + status apply, \
         by one pod each ({writers:?}); mariadb-pv and {handed} not written again"
    ));
    let (samples, overlaps, pod_times) = sampler.finish();
    assert_eq!(overlaps, Vec::<String>::new(), "two leaders at once");
    note(&format!(
        "never two leaders at once ({samples} samples of every pod's leader gauge, 100 ms apart)"
    ));
    note(&format!(
        "pods from first seen to Ready: {:?}",
        pod_times
            .iter()
            .map(|(n, d)| format!("{n}: {}", d.map(secs).unwrap_or_else(|| "never".into())))
            .collect::<Vec<_>>()
    ));
    assert_eq!(
        pod_times.len(),
        5,
        "2 installed, 1 replacement, 2 from the rollout: {pod_times:?}"
    );
    assert!(
        pod_times.values().all(Option::is_some),
        "every pod turned Ready: {pod_times:?}"
    );
    note(&format!(
        "timings: control plane {}, node Ready {} after it; install → 2 pods Ready {}; handover on \
         pod deletion {}; both Ready again {} after the deletion; rollout restart {} (old pods \
         gone {}); whole test {}",
        secs(cluster.cp_start),
        secs(cluster.node_start),
        secs(to_ready),
        secs(handover),
        secs(replacement_ready),
        secs(rollout),
        secs(old_gone),
        secs(started.elapsed())
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deploy_applied_with_kustomize_runs_on_a_real_node_with_one_writer() {
    let _turn = node_turn().await;
    let started = Instant::now();
    let (tarball, _) = image();
    let cluster = Cluster::start_or_fail();
    cluster.import_image(&tarball);
    let client = cluster.client().await;
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let leases = Api::<Lease>::namespaced(client.clone(), NS);
    let kubernetes_ip = Api::<Service>::namespaced(client.clone(), "default")
        .get("kubernetes")
        .await
        .expect("the kubernetes Service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("its ClusterIP");

    // docs/operations.md's command, verbatim (deploy/ names the image volume-leftovers:0.1.0).
    let t = Instant::now();
    let out = cluster.kubectl(&["apply", "-k", repo().join("deploy").to_str().unwrap()]);
    assert!(
        out.status.success(),
        "kubectl apply -k deploy/: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (ready, _) = wait_ready(&pods, 2, t, Duration::from_secs(120)).await;
    let to_ready = t.elapsed();
    let facts: Vec<PodFacts> = ready
        .iter()
        .map(|p| inspect(&cluster, p, &kubernetes_ip))
        .collect();

    let claim_deleted = mariadb_released(&cluster, &client).await;
    wait_claim_deleted(&client, "mariadb-pv").await;
    let found = claim_deleted.elapsed();
    let leader = wait_for("a Lease holder", Duration::from_secs(30), || {
        lease_holder(&leases)
    })
    .await;
    let events = wait_for(
        "the audit log to show mariadb-pv's create and status apply",
        Duration::from_secs(15),
        || {
            let events = cluster.operator_events();
            let done = writes(&events)
                .get("mariadb-pv")
                .is_some_and(|w| w.len() >= 2);
            async move { done.then_some(events) }
        },
    )
    .await;
    let w = writes(&events);
    assert_eq!(
        assert_create_and_status("mariadb-pv", &w["mariadb-pv"]),
        leader,
        "the Lease holder writes"
    );
    let by: BTreeSet<String> = w.values().flatten().map(|(p, _, _)| p.clone()).collect();
    assert_eq!(by, BTreeSet::from([leader.clone()]), "one writer: {w:?}");
    for f in &facts {
        assert_authenticated_with_projected_token(&events, f);
    }
    note(&format!(
        "kubectl apply -k deploy/ → 2 pods Ready in {}; mariadb-pv ClaimDeleted {} after its \
         claim was deleted, written twice by the leader {leader}; both pods authenticated with \
         their projected tokens; whole test {}",
        secs(to_ready),
        secs(found),
        secs(started.elapsed())
    ));
}
