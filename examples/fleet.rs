//! The issue-10 benchmark on a real control plane: the operator's memory and timings at 50,000
//! realistic CSI PVs, 40,000 claims and 10,000 leftovers, against the API server's own floor, and
//! `scan` against `kubectl get`. Figures, not assertions.
//!
//!   cargo build --release && cargo run --release --example fleet -- converge [key=value ...]
//!   cargo build --release && cargo run --release --example fleet -- latency  [key=value ...]
//!
//! converge (defaults: pvs=50000 leftovers=10000 snapshots=4 census=1 concurrency=16 floor=16
//! rounds=1 settle=20 alternate=0 restarts=0 scans=2 soak=0 soak_changes=1000 watch_cache=true
//! create_concurrency=48 original=0):
//! 1. a control plane with the watch cache on and without the PV binder and garbage collector
//!    (admin-written statuses stay as written), with the snapshot CRDs of the snapshot-controller's
//!    release unless snapshots=0; with census=1, the project's test Compute server
//!    (tests/fake-gce-compute, NOT Google's) and the operator run with a `gce:` census of its
//!    project; the operator's RSS on the empty cluster (its census finds no disk);
//! 2. the cluster (examples/common/fleet.rs: Ceph RBD and GCE PD CSI volumes with their attributes,
//!    labels, annotations and finalizers, created by the field manager `csi-provisioner`, statuses
//!    by `kube-controller-manager`; claims bound to them; leftovers Released with their claim gone;
//!    for one volume in `snapshots`, a ready VolumeSnapshot of its claim and the content the
//!    snapshot-controller makes, kept when the claim is gone); then every PD volume's disk in the
//!    Compute server (attached while bound, detached when a leftover: no finding of their own);
//! 3. the API floor: a minimal client doing the operator's LISTs (pages of 500, concurrently,
//!    bodies not decoded) and then the 2 requests per new finding (create, status apply; the same
//!    objects, through the library's writer) with `floor` writes in flight;
//! 4. the release binary as the deploy/ identity: time to ready, time to every finding published,
//!    requests, RSS after convergence (and per cached object, minus the empty-cluster RSS), when
//!    each store synced; with rounds=N, N first starts with the floor (3.) before and after
//!    each (N + 1 floors), every phase after deleting every VolumeLeftover and `settle` seconds,
//!    each first start compared with the mean of the two floors around it (the API server's cost
//!    for the same work drifts within a run), then one more first start, not compared, for what
//!    follows (with alternate=1, each variant's first start too, in every round); each line
//!    says what CPU every process spent (the machine's cores are shared by all of them) and
//!    which kinds the API server listed from etcd meanwhile (its own metrics: a list it made of
//!    its own accord, to fill a watch cache again, shows as one more than the phase's lists);
//!    with restarts=N, after 5., N rounds of the lists and a restart (each variant's too,
//!    with alternate=1), medians compared;
//! 5. a restart on the converged cluster: time to ready, when each store synced, when the
//!    re-evaluation of every name ended, writes (0 expected), RSS (like the first start's,
//!    `SETTLED` after idle);
//! 6. `scan`: peak RSS and wall time, against `kubectl get pv,pvc -A -o json`, and with
//!    original=N against the seed's original tool (tests/seed/leftovers.py, its Python client
//!    from scripts/seed-python.sh), N runs, each followed by a scan, medians compared;
//! 7. with variants=label@BINARY@K=V+K=V;...: the first start and a restart again for each other
//!    build or environment of the operator (an allocator, MALLOC_ARENA_MAX, ...), RSS per object
//!    over that variant's own empty-cluster RSS;
//! 8. with soak=SECONDS: `soak_changes` finding changes spread over that time (a claim deleted and
//!    its volume Released; later the volume bound to a new claim again), RSS sampled every minute.
//!
//! latency (defaults: pvs=10000 secs=30 concurrency=4,8,16,32 rates=20,100): a cluster of bound
//! volumes (half Retain, half Delete); for each `--concurrency` and rate, finding changes on Retain
//! volumes (a claim deleted, then its volume
//! patched Released, as the PV controller does) at that rate for `secs`, and the time from the
//! volume's patch returning to an admin watch seeing its VolumeLeftover with a status (p50, p99,
//! max). Each run uses fresh volumes; when they run out, the used ones are bound again.
//!
//! The operator binary is `$VL_BIN`, else `volume-leftovers` beside this example's directory
//! (`<target>/release/`), so a `CARGO_TARGET_DIR` elsewhere works. Stops everything it started.

#[path = "../tests/e2e/csi.rs"]
mod csi;
#[path = "common/fleet.rs"]
mod objects;
#[path = "../tests/e2e/support.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher;
use kube::{Api, Client};
use objects::Shape;
use support::*;
use volume_leftovers::decide::plan::{Action, plan};
use volume_leftovers::model::crd::VolumeLeftover;
use volume_leftovers::model::exclude::Exclusions;
use volume_leftovers::model::finding::Verdict;
use volume_leftovers::publish::writer::Writer;

// --- arguments ------------------------------------------------------------------------------------

struct Args(BTreeMap<String, String>);

impl Args {
    fn parse() -> (String, Args) {
        let mut it = std::env::args().skip(1);
        let mode = it.next().unwrap_or_else(|| "converge".into());
        let kv = it
            .filter_map(|a| {
                let (k, v) = a.split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect();
        (mode, Args(kv))
    }
    fn num(&self, k: &str, d: usize) -> usize {
        self.0.get(k).and_then(|v| v.parse().ok()).unwrap_or(d)
    }
    fn list(&self, k: &str, d: &[usize]) -> Vec<usize> {
        self.0
            .get(k)
            .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_else(|| d.to_vec())
    }
    fn text(&self, k: &str, d: &str) -> String {
        self.0.get(k).cloned().unwrap_or_else(|| d.into())
    }
}

// --- the operator process -------------------------------------------------------------------------

/// The operator is killed when this benchmark dies, even by a signal that skips destructors (the
/// control plane has its own watchdog; without this, an interrupted run left operators retrying
/// against a stopped API server).
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    unsafe extern "C" {
        fn prctl(option: std::ffi::c_int, arg2: std::ffi::c_ulong, ...) -> std::ffi::c_int;
    }
    const PR_SET_PDEATHSIG: std::ffi::c_int = 1;
    const SIGKILL: std::ffi::c_ulong = 9;
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and only sets a flag of the child.
    unsafe {
        cmd.pre_exec(|| {
            if prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn operator_bin() -> PathBuf {
    if let Ok(b) = std::env::var("VL_BIN") {
        return b.into();
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.join("volume-leftovers")));
    match beside {
        Some(b) if b.exists() => b,
        _ => repo().join("target/release/volume-leftovers"),
    }
}

fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Where a process's resident memory is, from /proc/PID/smaps: glibc's main heap, the other
/// anonymous mappings (the arenas of other threads, large chunks, stacks; the three largest
/// named by size), and file-backed pages (the binary, libraries).
fn resident_by_mapping(pid: u32) -> String {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let (mut heap, mut file, mut anon) = (0u64, 0u64, Vec::new());
    let mut kind = "";
    for line in smaps.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && !first.ends_with(':') {
            // A mapping's header: range perms offset dev inode [path].
            let path = line.split_whitespace().nth(5).unwrap_or_default();
            kind = match path {
                "[heap]" => "heap",
                "" => "anon",
                p if p.starts_with('/') => "file",
                _ => "other",
            };
        } else if first == "Rss:" {
            let kib: u64 = words.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            match kind {
                "heap" => heap += kib,
                "file" => file += kib,
                "anon" => anon.push(kib),
                _ => {}
            }
        }
    }
    anon.sort_unstable_by(|a, b| b.cmp(a));
    format!(
        "main heap {:.1} MiB, other anonymous {:.1} MiB in {} mappings (largest {}), files {:.1} MiB",
        mib(heap),
        mib(anon.iter().sum()),
        anon.iter().filter(|k| **k > 0).count(),
        anon.iter()
            .take(3)
            .map(|k| format!("{:.1}", mib(*k)))
            .collect::<Vec<_>>()
            .join(", "),
        mib(file)
    )
}

/// The operator's last account of glibc's heap (its `volume_leftovers::engine::heap` debug line).
fn last_heap_line(log: &std::path::Path) -> String {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .rev()
        .find(|l| l.contains("free heap pages returned"))
        .map(|l| {
            let field = |k: &str| {
                l.split_whitespace()
                    .find_map(|w| w.strip_prefix(&format!("{k}=")))
                    .and_then(|v| v.parse::<u64>().ok())
                    .map_or("?".to_string(), |b| format!("{:.1}", b as f64 / 1048576.0))
            };
            format!(
                "malloc in use {} MiB (mmapped {}), free kept {} MiB",
                field("in_use"),
                field("mmapped"),
                field("free")
            )
        })
        .unwrap_or_else(|| "no heap line in the log".into())
}

/// How long after idle the operator's memory is measured, first start and restart alike: past
/// its next `Tick::Ages` (every 15 s), when what was freed since the last return of free heap
/// pages is returned too. Measured sooner, a restart showed up to a third more RSS than the
/// same live heap after a first start: the garbage of re-reading every store, not yet returned.
const SETTLED: Duration = Duration::from_secs(20);

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

struct Operator {
    run: Running,
    port: u16,
    started: Instant,
    log: PathBuf,
    /// Whether it runs a census (`--census-config`).
    census: bool,
}

impl Operator {
    fn start(cp: &ControlPlane, label: &str, extra: &[&str]) -> Operator {
        Operator::start_variant(cp, label, extra, &Variant::default())
    }

    fn start_variant(cp: &ControlPlane, label: &str, extra: &[&str], v: &Variant) -> Operator {
        let port = free_port();
        let log = cp.dir.join(format!("fleet-operator-{label}.log"));
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec!["run", "--listen", &listen];
        args.extend_from_slice(extra);
        let started = Instant::now();
        let mut cmd = Command::new(v.bin.clone().unwrap_or_else(operator_bin));
        cmd.args(&args)
            .env("KUBECONFIG", cp.kubeconfig("operator"))
            .env("VL_LOG_FORMAT", "text")
            .env(
                "VL_LOG",
                "info,volume_leftovers::engine::heap=debug,volume_leftovers::run::controller::census=debug",
            )
            .envs(v.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stderr(std::fs::File::create(&log).expect("log file"));
        die_with_parent(&mut cmd);
        let child = cmd.spawn().expect("start the operator");
        Operator {
            run: Running(child),
            port,
            started,
            log,
            census: extra.contains(&"--census-config"),
        }
    }

    fn pid(&self) -> u32 {
        self.run.0.id()
    }

    fn rss(&self) -> u64 {
        proc_kib(self.pid(), "VmRSS:")
    }

    fn hwm(&self) -> u64 {
        proc_kib(self.pid(), "VmHWM:")
    }

    async fn ready(&self, timeout: Duration) -> Duration {
        wait_for("/readyz", timeout, || async {
            http_get(&format!("http://127.0.0.1:{}/readyz", self.port)).filter(|(c, _)| *c == 200)
        })
        .await;
        self.started.elapsed()
    }

    /// The sum of every sample whose name and labels start with `prefix`.
    fn metric(&self, prefix: &str) -> f64 {
        let (_, m) =
            http_get(&format!("http://127.0.0.1:{}/metrics", self.port)).unwrap_or_default();
        m.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Waits until nothing is queued or in flight and the decision count stopped moving, and,
    /// when the operator runs a census, the census has answered (a listing or a failure): the
    /// verdicts of the volumes it covers wait for that answer, so an empty queue before it is
    /// not the end of the work.
    async fn idle(&self, timeout: Duration) -> Duration {
        let mut last = -1.0;
        let mut still = 0;
        let start = Instant::now();
        loop {
            let decisions = self.metric("volume_leftovers_decisions_total");
            let busy = self.metric("volume_leftovers_queued_volumes")
                + self.metric("volume_leftovers_writes_in_flight");
            let answered = !self.census
                || self.metric("volume_leftovers_census_runs_total")
                    + self.metric("volume_leftovers_census_failures_total")
                    > 0.0;
            if busy == 0.0 && answered && decisions == last && decisions > 0.0 {
                still += 1;
                if still >= 4 {
                    return self.started.elapsed() - Duration::from_millis(750);
                }
            } else {
                still = 0;
            }
            last = decisions;
            assert!(start.elapsed() < timeout, "the operator never went idle");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// When each store synced, and when every store had listed, from the operator's log, in
    /// seconds after its "starting" line.
    fn timeline(&self) -> Vec<(String, f64)> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let stamp =
            |l: &str| -> Option<jiff::Timestamp> { l.split_whitespace().next()?.parse().ok() };
        let mut start = None;
        let mut out = Vec::new();
        for l in text.lines() {
            let Some(t) = stamp(l) else { continue };
            if l.contains(" starting") && start.is_none() {
                start = Some(t);
            }
            let Some(s) = start else { continue };
            let at = t.duration_since(s).as_secs_f64();
            if l.contains("store synced") {
                let r = l
                    .split("resource=")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next())
                    .unwrap_or("?")
                    .trim_matches('"');
                out.push((r.to_string(), at));
            } else if l.contains("all stores listed") {
                out.push(("all stores listed".into(), at));
            } else if (l.contains("census done") && !l.contains("disks=0")
                || l.contains("census of the scope failed"))
                && !out.iter().any(|(what, _)| what == CENSUS_ANSWERED)
            {
                // The verdicts of the censused volumes wait for it (Census::has_answered); a
                // scope without disks (the project's snapshots) says nothing about that.
                out.push((CENSUS_ANSWERED.into(), at));
            }
        }
        out
    }

    fn stop(mut self) {
        self.run.stop();
    }
}

/// The timeline's entry for the census's first answer (a listing or a failure).
const CENSUS_ANSWERED: &str = "the census first answered";

fn timeline_text(t: &[(String, f64)]) -> String {
    t.iter()
        .map(|(what, s)| format!("{what} {s:.1} s"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Another build or environment of the operator, to compare (`variants=` of converge):
/// `label@BINARY@K=V+K=V;label@@K=V` (an empty binary is the default one).
#[derive(Clone, Debug, Default)]
struct Variant {
    label: String,
    bin: Option<PathBuf>,
    env: Vec<(String, String)>,
}

fn variants(spec: &str) -> Vec<Variant> {
    spec.split(';')
        .filter(|v| !v.is_empty())
        .map(|v| {
            let mut parts = v.splitn(3, '@');
            let label = parts.next().unwrap_or_default().to_string();
            let bin = parts.next().filter(|b| !b.is_empty()).map(PathBuf::from);
            let env = parts
                .next()
                .unwrap_or_default()
                .split('+')
                .filter_map(|kv| {
                    let (k, v) = kv.split_once('=')?;
                    Some((k.to_string(), v.to_string()))
                })
                .collect();
            Variant { label, bin, env }
        })
        .collect()
}

// --- building the cluster -------------------------------------------------------------------------

fn pp(manager: &str) -> PostParams {
    PostParams {
        field_manager: Some(manager.into()),
        ..PostParams::default()
    }
}

fn patch_params(manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    }
}

/// Retries a request a few times (a local API server under load may answer 429 or time out).
async fn retry<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = kube::Result<T>>,
{
    let mut last = None;
    for attempt in 0..8u32 {
        match f().await {
            Ok(v) => return v,
            Err(e) => {
                last = Some(e.to_string());
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt + 1))).await;
            }
        }
    }
    panic!("{what}: {}", last.unwrap_or_default());
}

async fn create_classes_and_namespaces(admin: &Client) {
    let classes = Api::<StorageClass>::all(admin.clone());
    for c in objects::classes() {
        classes
            .create(&pp("kubectl-client-side-apply"), &c)
            .await
            .expect("class");
    }
    let nss = Api::<Namespace>::all(admin.clone());
    futures::stream::iter(objects::namespaces())
        .map(|n| {
            let nss = nss.clone();
            async move { nss.create(&PostParams::default(), &n).await.map(|_| ()) }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .expect("namespaces");
}

/// Claim `i` (when not a leftover), then volume `i` bound to it, then their statuses as the PV
/// controller writes them. Returns the claim's uid.
async fn make_pair(admin: &Client, shape: &Shape, i: usize) -> Option<String> {
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let uid = if shape.is_leftover(i) {
        objects::gone_claim_uid(i)
    } else {
        let claims =
            Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &objects::namespace(i));
        let c = objects::claim(shape, i);
        let p = pp("kube-controller-manager");
        let made = retry("create claim", || claims.create(&p, &c)).await;
        made.metadata.uid.unwrap_or_default()
    };
    let pv = objects::volume(shape, i, &uid);
    let name = objects::pv_name(i);
    let p = pp("csi-provisioner");
    retry("create PV", || pvs.create(&p, &pv)).await;
    let status = Patch::Merge(serde_json::json!({"status": {"phase": objects::phase(shape, i)}}));
    let kcm = patch_params("kube-controller-manager");
    retry("PV status", || pvs.patch_status(&name, &kcm, &status)).await;
    if !shape.is_leftover(i) {
        let claims =
            Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &objects::namespace(i));
        let s = Patch::Merge(objects::claim_status(i));
        let claim = objects::claim_name(i);
        retry("claim status", || claims.patch_status(&claim, &kcm, &s)).await;
        Some(uid)
    } else {
        None
    }
}

/// The snapshot API's kinds, as dynamic objects (k8s-openapi has no types for them).
fn snapshot_api(admin: &Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    match ns {
        Some(ns) => Api::namespaced_with(admin.clone(), ns, &ar),
        None => Api::all_with(admin.clone(), &ar),
    }
}

/// Volume `i`'s snapshot as a dynamic snapshot leaves it: the VolumeSnapshot a backup tool
/// creates, the content the snapshot-controller makes for it, the content's status from the
/// csi-snapshotter sidecar, then the snapshot's from the controller (both ready).
async fn make_snapshot(admin: &Client, shape: &Shape, i: usize) {
    let ns = objects::namespace(i);
    let snapshots = snapshot_api(admin, "VolumeSnapshot", "volumesnapshots", Some(&ns));
    let contents = snapshot_api(
        admin,
        "VolumeSnapshotContent",
        "volumesnapshotcontents",
        None,
    );
    let vs: DynamicObject =
        serde_json::from_value(objects::volume_snapshot(shape, i)).expect("VolumeSnapshot");
    let backup = pp("snapscheduler");
    let made = retry("create snapshot", || snapshots.create(&backup, &vs)).await;
    let uid = made.metadata.uid.unwrap_or_default();
    let content: DynamicObject = serde_json::from_value(objects::snapshot_content(shape, i, &uid))
        .expect("VolumeSnapshotContent");
    let name = objects::content_name(&uid);
    let made_by = pp("snapshot-controller");
    retry("create content", || contents.create(&made_by, &content)).await;
    let status = Patch::Merge(objects::snapshot_content_status(shape, i));
    let sidecar = patch_params("csi-snapshotter");
    retry("content status", || {
        contents.patch_status(&name, &sidecar, &status)
    })
    .await;
    let status = Patch::Merge(objects::volume_snapshot_status(i, &name));
    let controller = patch_params("snapshot-controller");
    let snapshot = objects::snapshot_name(i);
    retry("snapshot status", || {
        snapshots.patch_status(&snapshot, &controller, &status)
    })
    .await;
}

/// The snapshot CRDs of the snapshot-controller's release and its classes.
async fn install_snapshot_kinds(cp: &ControlPlane, admin: &Client) {
    csi::apply_snapshot_crds(cp);
    let classes = snapshot_api(admin, "VolumeSnapshotClass", "volumesnapshotclasses", None);
    let apply = pp("kubectl-client-side-apply");
    for c in objects::snapshot_classes() {
        let c: DynamicObject = serde_json::from_value(c).expect("VolumeSnapshotClass");
        retry("snapshot class", || classes.create(&apply, &c)).await;
    }
}

async fn build(admin: &Client, shape: &Shape, every: usize, concurrency: usize) -> Duration {
    let t = Instant::now();
    let done = std::sync::atomic::AtomicUsize::new(0);
    futures::stream::iter(0..shape.pvs)
        .map(|i| {
            let done = &done;
            async move {
                make_pair(admin, shape, i).await;
                if objects::has_snapshot(every, i) {
                    make_snapshot(admin, shape, i).await;
                }
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                if n.is_multiple_of(10_000) {
                    eprintln!("  {n} volumes in {:.0} s", t.elapsed().as_secs_f64());
                }
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<()>>()
        .await;
    t.elapsed()
}

/// How many VolumeLeftovers exist (one list request of one item: the server counts the rest).
async fn count(api: &Api<VolumeLeftover>) -> usize {
    let page = api
        .list_metadata(&ListParams::default().limit(1))
        .await
        .expect("list");
    page.items.len() + page.metadata.remaining_item_count.unwrap_or(0) as usize
}

/// Deletes every VolumeLeftover, 32 requests in flight (a deletecollection of thousands of
/// custom resources outlives a client's request timeout), and waits until none is left.
async fn delete_all_leftovers(admin: &Client) {
    let api = Api::<VolumeLeftover>::all(admin.clone());
    loop {
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = ListParams::default().limit(500);
            if let Some(t) = token.take() {
                lp = lp.continue_token(&t);
            }
            let page = api.list_metadata(&lp).await.expect("list");
            names.extend(page.items.into_iter().filter_map(|o| o.metadata.name));
            match page.metadata.continue_ {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        if names.is_empty() {
            return;
        }
        futures::stream::iter(names)
            .map(|n| {
                let api = api.clone();
                async move { delete(&api, &n).await }
            })
            .buffer_unordered(32)
            .collect::<Vec<()>>()
            .await;
        let _ = count(&api).await;
    }
}

/// Every VolumeLeftover's status, by name.
async fn statuses(client: &Client) -> BTreeMap<String, serde_json::Value> {
    let api = Api::<VolumeLeftover>::all(client.clone());
    let mut out = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let page = api.list(&lp).await.expect("list");
        for o in page.items {
            let name = o.metadata.name.clone().unwrap_or_default();
            out.insert(name, serde_json::to_value(&o.status).unwrap_or_default());
        }
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return out,
        }
    }
}

/// The findings whose status changed, and the fields that did (in the first of them).
fn changed(
    before: &BTreeMap<String, serde_json::Value>,
    after: &BTreeMap<String, serde_json::Value>,
) -> String {
    let names: Vec<&String> = after
        .iter()
        .filter(|(n, s)| before.get(*n) != Some(*s))
        .map(|(n, _)| n)
        .collect();
    let Some(first) = names.first() else {
        return "no status changed".into();
    };
    let (b, a) = (
        &before.get(*first).cloned().unwrap_or_default(),
        &after[*first],
    );
    let mut fields = Vec::new();
    if let (Some(b), Some(a)) = (b.as_object(), a.as_object()) {
        for k in b.keys().chain(a.keys()) {
            if b.get(k) != a.get(k) && !fields.iter().any(|(f, _, _): &(String, _, _)| f == k) {
                fields.push((k.clone(), b.get(k).cloned(), a.get(k).cloned()));
            }
        }
    }
    format!(
        "{} statuses changed; {first}: {}",
        names.len(),
        fields
            .iter()
            .map(|(k, b, a)| format!(
                "{k}: {} -> {}",
                b.as_ref().map_or("-".into(), |v| v.to_string()),
                a.as_ref().map_or("-".into(), |v| v.to_string())
            ))
            .collect::<Vec<_>>()
            .join("; ")
    )
}

// --- the API floor --------------------------------------------------------------------------------

#[derive(serde::Deserialize)]
struct Page {
    metadata: PageMeta,
    #[serde(default)]
    items: Vec<serde::de::IgnoredAny>,
}

#[derive(serde::Deserialize)]
struct PageMeta {
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

/// Lists `path` page by page (500), reading only the continue token, as the operator lists every
/// kind (whole objects: claims too, of which it keeps the metadata). (objects, bytes)
async fn list_raw(client: &Client, path: &str) -> (usize, usize) {
    let (mut n, mut bytes) = (0, 0);
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let req = kube::core::Request::new(path).list(&lp).expect("request");
        let text = client.request_text(req).await.expect("list");
        bytes += text.len();
        let page: Page = serde_json::from_str(&text).expect("page");
        n += page.items.len();
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return (n, bytes),
        }
    }
}

const PV_PATH: &str = "/api/v1/persistentvolumes";
const PVC_PATH: &str = "/api/v1/persistentvolumeclaims";
const SC_PATH: &str = "/apis/storage.k8s.io/v1/storageclasses";
const VL_PATH: &str = "/apis/leftovers.dev/v1alpha1/volumeleftovers";
const VSC_PATH: &str = "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents";
const VS_PATH: &str = "/apis/snapshot.storage.k8s.io/v1/volumesnapshots";

/// What the operator lists: the four kinds, and the two snapshot kinds where they are served.
fn kinds(snapshots: bool) -> Vec<&'static str> {
    let mut k = vec![PV_PATH, PVC_PATH, SC_PATH, VL_PATH];
    if snapshots {
        k.extend([VSC_PATH, VS_PATH]);
    }
    k
}

/// The operator's lists, concurrently, as its feeds do them. (seconds, per list: objects, bytes,
/// seconds)
async fn the_lists(
    client: &Client,
    paths: &[&'static str],
) -> (f64, Vec<(&'static str, usize, usize, f64)>) {
    let t = Instant::now();
    let one = |path: &'static str| {
        let client = client.clone();
        async move {
            let t = Instant::now();
            let (n, b) = list_raw(&client, path).await;
            (path, n, b, t.elapsed().as_secs_f64())
        }
    };
    let all = futures::future::join_all(paths.iter().map(|p| one(p))).await;
    (t.elapsed().as_secs_f64(), all)
}

/// What the operator would create for every finding (computed before the clock starts).
async fn creates(cp: &ControlPlane, client: &Client) -> Vec<Action> {
    let report = volume_leftovers::scan::read(
        client.clone(),
        &cp.env_value("APISERVER_URL"),
        Duration::from_secs(60),
        &Exclusions::default(),
        None,
        &volume_leftovers::scan::progress::Progress::hidden(),
    )
    .await
    .expect("scan::read");
    let now = Time(jiff::Timestamp::now());
    report
        .findings
        .into_iter()
        .map(|f| {
            let name = f.volume_name.clone();
            plan(
                &name,
                Some(&Verdict::Leftover(Box::new(f))),
                None,
                &now,
                &now,
                None,
            )
        })
        .collect()
}

/// The floor: the operator's lists, then every create (2 requests each) with `c` in flight.
async fn floor(
    cp: &ControlPlane,
    client: &Client,
    paths: &[&'static str],
    actions: &[Action],
    c: usize,
) -> (f64, f64, usize) {
    let (lists, _) = the_lists(client, paths).await;
    let t = Instant::now();
    let writer = Writer::new(Api::all(client.clone()), Duration::from_secs(30));
    let requests: u32 = futures::stream::iter(actions.iter().cloned())
        .map(|a| {
            let w = writer.clone();
            async move { w.execute(a).await.map(|w| w.requests).unwrap_or(0) }
        })
        .buffer_unordered(c)
        .collect::<Vec<u32>>()
        .await
        .into_iter()
        .sum();
    let writes = t.elapsed().as_secs_f64();
    let _ = cp;
    (lists, writes, requests as usize)
}

// --- CPU time per process -------------------------------------------------------------------------

/// User + system CPU seconds of a process so far (all its threads), from /proc/PID/stat.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command's closing parenthesis: state is field 3, utime 14 and stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum::<u64>() as f64 / 100.0
}

/// Processes the benchmark starts besides the control plane and the operator (the census's test
/// Compute server), by the name the CPU split gives them.
static OTHER_PROCESSES: Mutex<Vec<(&'static str, u32)>> = Mutex::new(Vec::new());

/// The key under which `cpu_now` records the whole machine's busy CPU seconds (every core); the
/// split shows what no named process spent of it as "rest of the machine", so a figure says what
/// else was running.
const MACHINE: &str = "(machine)";
/// And the time the hypervisor gave to other guests (steal), which no process of ours saw.
const STEAL: &str = "(steal)";

/// (busy, steal) CPU seconds of the whole machine since boot, from /proc/stat's first line: user,
/// nice, system, irq and softirq count as busy; idle and iowait do not.
fn machine_cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0) as f64 / 100.0;
    (at(0) + at(1) + at(2) + at(5) + at(6), at(7))
}

/// CPU seconds so far of the control plane's processes (by the names up.sh gave them), this
/// benchmark (the floor's client), the operator when one runs, the other processes the benchmark
/// started, and the machine as a whole.
fn cpu_now(cp: &ControlPlane, op: Option<&Operator>) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = std::fs::read_to_string(cp.dir.join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            Some((name.to_string(), cpu_seconds(pid.trim())))
        })
        .collect();
    out.insert("benchmark".into(), cpu_seconds("self"));
    if let Some(op) = op {
        out.insert("operator".into(), cpu_seconds(&op.pid().to_string()));
    }
    for (name, pid) in OTHER_PROCESSES.lock().unwrap().iter() {
        out.insert(name.to_string(), cpu_seconds(&pid.to_string()));
    }
    let (busy, steal) = machine_cpu_seconds();
    out.insert(MACHINE.into(), busy);
    out.insert(STEAL.into(), steal);
    out
}

/// What each process spent between two `cpu_now`s, busiest first, with the phase's wall time.
fn cpu_spent(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>, wall: f64) -> String {
    let delta =
        |k: &str| after.get(k).copied().unwrap_or(0.0) - before.get(k).copied().unwrap_or(0.0);
    let mut spent: Vec<(String, f64)> = after
        .keys()
        .filter(|k| *k != MACHINE && *k != STEAL)
        .map(|k| (k.clone(), delta(k)))
        .collect();
    let named: f64 = spent.iter().map(|(_, s)| s).sum();
    // A process's own account and /proc/stat's tick at different moments: a small negative
    // remainder is rounding, not a finding.
    spent.push((
        "rest of the machine".into(),
        (delta(MACHINE) - named).max(0.0),
    ));
    spent.retain(|(_, s)| *s >= 0.05);
    spent.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = spent.iter().map(|(_, s)| s).sum();
    let steal = delta(STEAL);
    format!(
        "CPU {total:.1} s over {wall:.1} s ({:.2} cores): {}{}",
        total / wall.max(0.001),
        spent
            .iter()
            .map(|(k, s)| format!("{k} {s:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        if steal >= 0.05 {
            format!("; stolen by the hypervisor {steal:.1}")
        } else {
            String::new()
        }
    )
}

// --- scan and kubectl -----------------------------------------------------------------------------

/// The API server's own counters of where its data came from, by resource: the lists it read
/// from etcd (`apiserver_storage_list_total`) and its watch caches filled again from etcd
/// (`apiserver_watch_cache_initializations_total`). A phase's difference says whether the API
/// server listed a kind from etcd meanwhile, whoever asked.
async fn api_counters(cp: &ControlPlane) -> BTreeMap<(String, String), f64> {
    const NAMES: [&str; 2] = [
        "apiserver_storage_list_total",
        "apiserver_watch_cache_initializations_total",
    ];
    let client = cp.admin().await;
    let Ok(req) = axum::http::Request::get("/metrics").body(Vec::new()) else {
        return BTreeMap::new();
    };
    let text = client.request_text(req).await.unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let (name, labels) = key.split_once('{')?;
            NAMES.contains(&name).then_some(())?;
            let resource = labels.split("resource=\"").nth(1)?.split('"').next()?;
            Some((
                (name.to_string(), resource.to_string()),
                value.parse().ok()?,
            ))
        })
        .collect()
}

/// What changed in [`api_counters`] between `before` and `after`, for the line of a phase.
fn api_counters_spent(
    before: &BTreeMap<(String, String), f64>,
    after: &BTreeMap<(String, String), f64>,
) -> String {
    let part = |name: &str| {
        let moved: Vec<String> = after
            .iter()
            .filter(|((n, _), _)| n == name)
            .filter_map(|(k, v)| {
                let d = v - before.get(k).copied().unwrap_or(0.0);
                (d > 0.0).then(|| format!("{} {d:.0}", k.1))
            })
            .collect();
        if moved.is_empty() {
            "none".to_string()
        } else {
            moved.join(", ")
        }
    };
    format!(
        "the API server's lists from etcd: {}; its watch caches filled again: {}",
        part("apiserver_storage_list_total"),
        part("apiserver_watch_cache_initializations_total")
    )
}

/// (peak RSS KiB, wall seconds, exit code) of a command, through GNU time when installed, else by
/// polling VmHWM.
fn measured(cmd: &mut Command) -> (u64, f64, i32) {
    let gnu = std::path::Path::new("/usr/bin/time").exists();
    let out = std::env::temp_dir().join(format!("fleet-time-{}", std::process::id()));
    let t = Instant::now();
    let mut child = if gnu {
        let prog = cmd.get_program().to_owned();
        let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
        let envs: Vec<_> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        Command::new("/usr/bin/time")
            .arg("-f")
            .arg("%M")
            .arg("-o")
            .arg(&out)
            .arg(prog)
            .args(args)
            .envs(envs)
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn")
    } else {
        cmd.stdout(Stdio::null()).spawn().expect("spawn")
    };
    let mut hwm = 0;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s;
        }
        if !gnu {
            hwm = hwm.max(proc_kib(child.id(), "VmHWM:"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = t.elapsed().as_secs_f64();
    if gnu {
        hwm = std::fs::read_to_string(&out)
            .ok()
            .and_then(|s| s.lines().last()?.trim().parse().ok())
            .unwrap_or(0);
    }
    (hwm, wall, status.code().unwrap_or(-1))
}

/// `volume-leftovers scan -o json` as the deploy/ identity.
fn scan_command(cp: &ControlPlane) -> Command {
    let mut cmd = Command::new(operator_bin());
    cmd.args(["scan", "-o", "json"])
        .env("KUBECONFIG", cp.kubeconfig("operator"));
    cmd
}

/// Starts the operator (a variant of it) on a cluster without VolumeLeftovers and waits until
/// it has published `target` findings: (operator, ready after, published after, CPU spent).
async fn first_start(
    cp: &ControlPlane,
    label: &str,
    run: &[&str],
    v: &Variant,
    target: f64,
) -> (Operator, Duration, Duration, String) {
    let counters = api_counters(cp).await;
    let before = cpu_now(cp, None);
    let op = Operator::start_variant(cp, label, run, v);
    let ready = op.ready(Duration::from_secs(600)).await;
    wait_for("every finding published", Duration::from_secs(3600), || {
        let done = op.metric(r#"volume_leftovers_writes_total{op="create",result="ok"}"#) >= target;
        async move { done.then_some(()) }
    })
    .await;
    let published = op.started.elapsed();
    let spent = cpu_spent(&before, &cpu_now(cp, Some(&op)), published.as_secs_f64());
    let spent = format!(
        "{spent}; {}",
        api_counters_spent(&counters, &api_counters(cp).await)
    );
    (op, ready, published, spent)
}

// --- converge -------------------------------------------------------------------------------------

fn control_plane(watch_cache: &str) -> ControlPlane {
    ControlPlane::start_with(
        Flavor::Full,
        true,
        &[
            (
                "KCM_CONTROLLERS",
                // No binder (admin-written statuses stay), no garbage collector, no expander
                // (it GETs the volume of every claim that changes: load that is not the
                // operator's).
                "*,-persistentvolume-binder-controller,-garbage-collector-controller,-persistentvolume-expander-controller",
            ),
            ("WATCH_CACHE", watch_cache),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn converge(args: &Args) {
    let shape = Shape {
        pvs: args.num("pvs", Shape::ISSUE.pvs),
        leftovers: args.num("leftovers", Shape::ISSUE.leftovers),
    };
    let concurrency = args.num("concurrency", 16).to_string();
    let watch_cache = args.text("watch_cache", "true");
    // One volume in `snapshots` has a snapshot (0: no snapshot CRDs); with census=1 the
    // operator censuses the PD volumes' disks in the project's test Compute server.
    let every = args.num("snapshots", 4);
    let census = args.num("census", 1) > 0;
    let snapshots = objects::snapshots(&shape, every);
    let disks = if census {
        (0..shape.pvs)
            .filter(|&i| objects::gce_disk(&shape, i).is_some())
            .count()
    } else {
        0
    };
    let paths = kinds(every > 0);
    let bin = operator_bin();
    assert!(
        bin.exists(),
        "build the operator first: cargo build --release ({})",
        bin.display()
    );
    println!(
        "fleet: {} PVs (Ceph RBD and GCE PD CSI), {} claims, {} leftovers, {snapshots} VolumeSnapshots and their contents (one volume in {every}), {}; operator {}; --concurrency {concurrency}; apiserver watch cache {watch_cache}{}",
        shape.pvs,
        shape.claims(),
        shape.leftovers,
        if census {
            format!(
                "the census on: {disks} GCE disks in the project's test Compute server (Python, NOT Google's)"
            )
        } else {
            "no census".to_string()
        },
        bin.display(),
        if watch_cache == "true" {
            " (etcd's watch progress notifications every 5 s, as kubeadm sets them)"
        } else {
            ""
        }
    );
    let cp = control_plane(&watch_cache);
    let admin = cp.admin().await;
    create_classes_and_namespaces(&admin).await;
    if every > 0 {
        install_snapshot_kinds(&cp, &admin).await;
    }
    // The Compute server starts empty: the empty cluster's operator censuses a project without
    // disks; the disks come with the cluster.
    let compute = census.then(|| {
        ComputeServer::start(cp.dir.join("compute"), objects::gce_state(&shape, false))
            .unwrap_or_else(|e| panic!("the test Compute server: {e}"))
    });
    if let Some(c) = &compute {
        OTHER_PROCESSES
            .lock()
            .unwrap()
            .push(("census server", c.pid()));
    }
    let config = cp.dir.join("census.yaml");
    let mut run = vec!["--concurrency".to_string(), concurrency.clone()];
    if let Some(c) = &compute {
        std::fs::write(
            &config,
            format!(
                "clusterName: {}\ngce:\n{}",
                objects::GKE_CLUSTER,
                c.section(objects::GCE_PROJECT, "")
            ),
        )
        .expect("census.yaml");
        run.extend(["--census-config".to_string(), config.display().to_string()]);
    }
    let run: Vec<&str> = run.iter().map(String::as_str).collect();
    let run = run.as_slice();

    // 1. The same binary on the empty cluster.
    let op = Operator::start(&cp, "empty", run);
    let ready = op.ready(Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let empty_rss = op.rss();
    println!(
        "empty cluster: ready in {:.2} s, RSS {:.1} MiB (peak {:.1} MiB)",
        ready.as_secs_f64(),
        mib(empty_rss),
        mib(op.hwm())
    );
    op.stop();
    let variants = variants(&args.text("variants", ""));
    let mut empty = HashMap::new();
    for v in &variants {
        let op = Operator::start_variant(&cp, &format!("empty-{}", v.label), run, v);
        op.ready(Duration::from_secs(120)).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        println!(
            "empty cluster, variant {}: RSS {:.1} MiB",
            v.label,
            mib(op.rss())
        );
        empty.insert(v.label.clone(), op.rss());
        op.stop();
    }

    // 2. The cluster.
    let took = build(&admin, &shape, every, args.num("create_concurrency", 48)).await;
    println!(
        "created {} PVs, {} claims, {snapshots} VolumeSnapshots and contents (with statuses) in {:.0} s",
        shape.pvs,
        shape.claims(),
        took.as_secs_f64()
    );
    if let Some(c) = &compute {
        c.set_state(&objects::gce_state(&shape, true));
    }

    // 3. The floor.
    let client = cp.operator_client().await;
    let actions = creates(&cp, &client).await;
    assert_eq!(actions.len(), shape.leftovers, "findings the library sees");
    let (t, lists) = the_lists(&client, &paths).await;
    println!(
        "wire: {}; the {} lists concurrently {t:.2} s",
        lists
            .iter()
            .map(|(p, n, b, s)| format!(
                "{} {n} objects {:.0} B/object {s:.2} s",
                p.rsplit('/').next().unwrap_or(p),
                *b as f64 / (*n).max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join("; "),
        paths.len()
    );
    let c: usize = concurrency.parse().unwrap_or(4);
    let target = shape.leftovers as f64;
    for f in args.list("floor", &[16]) {
        if f == c {
            continue; // measured with each round below
        }
        let (lists, writes, requests) = floor(&cp, &client, &paths, &actions, f).await;
        println!(
            "API floor, {f} writes in flight: lists {lists:.2} s + {} findings ({requests} requests) {writes:.2} s = {:.2} s",
            actions.len(),
            lists + writes
        );
        delete_all_leftovers(&admin).await;
    }

    // 4. First start, against the floor at the operator's concurrency, `rounds` times, with a
    // floor before and after each (floor, first start, floor, first start, ..., floor), each
    // phase after the same deletion of every VolumeLeftover and the same pause. The API server's
    // CPU for the same work drifts from phase to phase within a run (at 25,000 PVs it rose by half
    // across the four phases of one round), so a first start is compared with the mean of the
    // floors on either side of it, not with the one before it alone (which the drift favours). A
    // last first start, not compared, converges the cluster for what follows.
    let rounds = args.num("rounds", 1).max(1);
    let settle = Duration::from_secs(args.num("settle", 20) as u64);
    // With alternate=1, each variant's first start too, in every round.
    let alternate = args.num("alternate", 0) > 0;
    let mut variant_runs: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut first_runs, mut ratios) = (Vec::new(), Vec::new());
    let floor_phase = |label: String| {
        let (cp, client, admin, paths, actions) = (&cp, &client, &admin, &paths, &actions);
        async move {
            tokio::time::sleep(settle).await;
            let counters = api_counters(cp).await;
            let before = cpu_now(cp, None);
            let t = Instant::now();
            let (lists, writes, requests) = floor(cp, client, paths, actions, c).await;
            let spent = cpu_spent(&before, &cpu_now(cp, None), t.elapsed().as_secs_f64());
            let spent = format!(
                "{spent}; {}",
                api_counters_spent(&counters, &api_counters(cp).await)
            );
            println!(
                "{label}, API floor, {c} writes in flight: lists {lists:.2} s + {} findings ({requests} requests) {writes:.2} s = {:.2} s; {spent}",
                actions.len(),
                lists + writes
            );
            delete_all_leftovers(admin).await;
            lists + writes
        }
    };
    let mut floor_before = floor_phase("round 1, before".to_string()).await;
    for round in 1..=rounds {
        let mut this_round = Vec::new();
        for v in variants.iter().filter(|_| alternate) {
            tokio::time::sleep(settle).await;
            let (op, ready, published, spent) =
                first_start(&cp, &format!("first-{}-{round}", v.label), run, v, target).await;
            op.stop();
            println!(
                "round {round}, variant {}, first start: ready in {:.2} s; published in {:.1} s; {spent}",
                v.label,
                ready.as_secs_f64(),
                published.as_secs_f64(),
            );
            this_round.push((v.label.clone(), published.as_secs_f64()));
            delete_all_leftovers(&admin).await;
        }
        tokio::time::sleep(settle).await;
        let (op, ready, published, spent) = first_start(
            &cp,
            &format!("first-{round}"),
            run,
            &Variant::default(),
            target,
        )
        .await;
        let requests = op.metric("volume_leftovers_write_requests_total");
        op.stop();
        println!(
            "round {round}, first start: ready in {:.2} s; {} findings published in {:.1} s ({requests:.0} write requests); {spent}",
            ready.as_secs_f64(),
            shape.leftovers,
            published.as_secs_f64(),
        );
        delete_all_leftovers(&admin).await;
        let floor_after = floor_phase(format!("round {round}, after")).await;
        let mean = (floor_before + floor_after) / 2.0;
        let ratio = published.as_secs_f64() / mean;
        println!(
            "round {round}: first start {:.1} s against the floors before and after it ({floor_before:.1} s, {floor_after:.1} s; mean {mean:.1} s) = {ratio:.2}x",
            published.as_secs_f64()
        );
        for (label, p) in this_round {
            println!(
                "round {round}, variant {label}: published in {p:.1} s = {:.2}x the mean of the floors",
                p / mean
            );
            variant_runs.entry(label).or_default().push((p, p / mean));
        }
        first_runs.push(published.as_secs_f64());
        ratios.push(ratio);
        floor_before = floor_after;
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    tokio::time::sleep(settle).await;
    let (op, ready, published, _) =
        first_start(&cp, "first", run, &Variant::default(), target).await;
    let idle = op.idle(Duration::from_secs(600)).await;
    tokio::time::sleep(SETTLED).await;
    let (rss, hwm) = (op.rss(), op.hwm());
    let requests = op.metric("volume_leftovers_write_requests_total");
    let timeline = op.timeline();
    let resident = resident_by_mapping(op.pid());
    let log = op.log.clone();
    op.stop();
    let heap = last_heap_line(&log);
    let cached = shape.cached_objects() + 2 * snapshots + disks;
    println!(
        "first start for what follows (not compared): ready in {:.2} s; {} findings published in {:.1} s ({requests:.0} write requests); idle at {:.1} s",
        ready.as_secs_f64(),
        shape.leftovers,
        published.as_secs_f64(),
        idle.as_secs_f64()
    );
    let listed = |v: &[f64]| {
        v.iter()
            .map(|r| format!("{r:.2}x"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "first start over {rounds} round(s): every finding published in {} s (median {:.1} s) = {} the mean of the floors before and after it; the highest {:.2}x, the median {:.2}x",
        first_runs
            .iter()
            .map(|p| format!("{p:.1}"))
            .collect::<Vec<_>>()
            .join(", "),
        median(&first_runs),
        listed(&ratios),
        ratios.iter().copied().fold(0.0, f64::max),
        median(&ratios)
    );
    for (label, runs) in &variant_runs {
        let r: Vec<f64> = runs.iter().map(|(_, r)| *r).collect();
        println!(
            "variant {label}, first start over {rounds} round(s): {} the mean of the floors; the median {:.2}x",
            listed(&r),
            median(&r)
        );
    }
    println!(
        "first start, stores synced at: {}",
        timeline_text(&timeline)
    );
    println!(
        "after convergence: RSS {:.1} MiB (peak {:.1} MiB); minus the empty cluster's {:.1} MiB over {cached} cached objects ({} PVs + {} claims + {} VolumeLeftovers + {snapshots} VolumeSnapshots + {snapshots} contents + {disks} censused disks) = {:.2} KiB per object",
        mib(rss),
        mib(hwm),
        mib(empty_rss),
        shape.pvs,
        shape.claims(),
        shape.leftovers,
        (rss as f64 - empty_rss as f64) / cached as f64
    );
    println!("after convergence, resident: {resident}; {heap}");

    // 5. Restart on the converged cluster.
    let before = statuses(&client).await;
    let op = Operator::start(&cp, "restart", run);
    let ready = op.ready(Duration::from_secs(600)).await;
    let idle = op.idle(Duration::from_secs(600)).await;
    tokio::time::sleep(SETTLED).await;
    let writes = op.metric("volume_leftovers_write_requests_total");
    if writes > 0.0 {
        let after = statuses(&client).await;
        println!("restart: what it wrote: {}", changed(&before, &after));
        // The last VolumeLeftover it patched, from the audit log.
        let audit = std::fs::read_to_string(cp.dir.join("audit.log")).unwrap_or_default();
        let last = audit
            .lines()
            .filter(|l| {
                l.contains("volumeleftovers")
                    && l.contains("\"patch\"")
                    && l.contains("volume-leftovers:volume-leftovers")
            })
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|e| e["objectRef"]["name"].as_str().map(str::to_string))
            .next_back();
        if let Some(n) = last {
            println!(
                "restart: last patched {n}: {}",
                after.get(&n).cloned().unwrap_or_default()
            );
        }
    }
    let (rss, hwm) = (op.rss(), op.hwm());
    let timeline = op.timeline();
    let resident = resident_by_mapping(op.pid());
    let log = op.log.clone();
    op.stop();
    let heap = last_heap_line(&log);
    println!(
        "restart on the converged cluster: ready in {:.2} s, every name re-evaluated (idle) at {:.1} s, {writes:.0} write requests; RSS {:.1} MiB (peak {:.1} MiB)",
        ready.as_secs_f64(),
        idle.as_secs_f64(),
        mib(rss),
        mib(hwm)
    );
    println!("restart, stores synced at: {}", timeline_text(&timeline));
    println!("restart, resident: {resident}; {heap}");

    // With restarts=N: N more rounds of the minimal client's lists and a restart (and, with
    // alternate=1, each variant's restart), the medians compared.
    let restarts = args.num("restarts", 0);
    let (mut lists_runs, mut restart_runs) = (Vec::new(), Vec::new());
    let mut variant_restarts: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for round in 1..=restarts {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let (lists, _) = the_lists(&client, &paths).await;
        lists_runs.push(lists);
        let mut line = format!("restart round {round}: the lists {lists:.2} s");
        let default = Variant::default();
        for v in variants
            .iter()
            .filter(|_| alternate)
            .chain(std::iter::once(&default))
        {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let before = cpu_now(&cp, None);
            let op = Operator::start_variant(&cp, &format!("restart-{}-{round}", v.label), run, v);
            let ready = op.ready(Duration::from_secs(600)).await.as_secs_f64();
            let spent = cpu_spent(&before, &cpu_now(&cp, Some(&op)), ready);
            op.stop();
            let label = if v.label.is_empty() {
                restart_runs.push(ready);
                "default"
            } else {
                variant_restarts
                    .entry(v.label.clone())
                    .or_default()
                    .push(ready);
                v.label.as_str()
            };
            line.push_str(&format!("; {label} ready in {ready:.2} s ({spent})"));
        }
        println!("{line}");
    }
    if restarts > 0 {
        let lists = median(&lists_runs);
        println!(
            "restart over {restarts} round(s), medians: ready in {:.2} s, the lists {lists:.2} s = {:.2}x its lists{}",
            median(&restart_runs),
            median(&restart_runs) / lists,
            variant_restarts
                .iter()
                .map(|(l, r)| format!(
                    "; variant {l} {:.2} s = {:.2}x",
                    median(r),
                    median(r) / lists
                ))
                .collect::<String>()
        );
    }

    // Why a restart is slower: each list alone, then all together, on the converged
    // cluster; and what a VolumeLeftover weighs on the wire.
    let mut alone = Vec::new();
    for path in [PV_PATH, PVC_PATH, VL_PATH]
        .into_iter()
        .chain(paths.iter().copied().filter(|p| p.contains("snapshot")))
    {
        let t = Instant::now();
        let (n, b) = list_raw(&client, path).await;
        alone.push(format!(
            "{} {n} objects {:.2} s ({:.0} µs, {:.0} B per object)",
            path.rsplit('/').next().unwrap_or(path),
            t.elapsed().as_secs_f64(),
            t.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64,
            b as f64 / n.max(1) as f64
        ));
    }
    let (together, _) = the_lists(&client, &paths).await;
    println!(
        "lists on the converged cluster, each alone: {}; the {} concurrently {together:.2} s",
        alone.join("; "),
        paths.len()
    );
    let page = client
        .request_text(
            kube::core::Request::new(VL_PATH)
                .list(&ListParams::default().limit(500))
                .expect("request"),
        )
        .await
        .expect("VolumeLeftover page");
    let v: serde_json::Value = serde_json::from_str(&page).expect("json");
    let items = v["items"].as_array().cloned().unwrap_or_default();
    let part = |f: &dyn Fn(&serde_json::Value) -> &serde_json::Value| {
        items
            .iter()
            .map(|o| serde_json::to_vec(f(o)).map_or(0, |b| b.len()))
            .sum::<usize>() as f64
            / items.len().max(1) as f64
    };
    println!(
        "a VolumeLeftover on the wire: {:.0} B, of which managedFields {:.0} B, status {:.0} B, labels {:.0} B",
        page.len() as f64 / items.len().max(1) as f64,
        part(&|o| &o["metadata"]["managedFields"]),
        part(&|o| &o["status"]),
        part(&|o| &o["metadata"]["labels"])
    );

    // 6. scan against kubectl.
    let mut scan_walls = Vec::new();
    for n in 0..args.num("scans", 2) {
        let (peak, wall, code) = measured(&mut scan_command(&cp));
        let (kpeak, kwall, kcode) = measured(
            Command::new(cp.bin.join("kubectl"))
                .args(["--kubeconfig"])
                .arg(cp.kubeconfig("admin"))
                .args(["get", "pv,pvc", "-A", "-o", "json"]),
        );
        println!(
            "scan run {}: peak RSS {:.1} MiB, wall {wall:.2} s (exit {code}); kubectl get pv,pvc -A -o json: peak RSS {:.1} MiB, wall {kwall:.2} s (exit {kcode}); scan/kubectl wall {:.2}",
            n + 1,
            mib(peak),
            mib(kpeak),
            wall / kwall
        );
        scan_walls.push(wall);
    }
    // The seed's original tool (Python, one claim read per PV), `original` times, each run
    // followed by a scan, when asked.
    let originals = args.num("original", 0);
    if originals > 0 {
        let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(repo.join("scripts/seed-python.sh"))
            .output()
            .expect("scripts/seed-python.sh");
        let python = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let mut walls = Vec::new();
        for n in 1..=originals {
            let (peak, wall, code) = measured(
                Command::new(&python)
                    .arg(repo.join("tests/seed/leftovers.py"))
                    .env("KUBECONFIG", cp.kubeconfig("operator")),
            );
            walls.push(wall);
            let (_, swall, _) = measured(&mut scan_command(&cp));
            scan_walls.push(swall);
            println!(
                "the original tool (tests/seed/leftovers.py), run {n}: peak RSS {:.1} MiB, wall {wall:.2} s (exit {code}); scan right after: wall {swall:.2} s, {:.1}x faster",
                mib(peak),
                wall / swall
            );
        }
        println!(
            "the original tool over {originals} run(s), median wall {:.2} s; scan over {} run(s), median wall {:.2} s: scan is {:.1}x faster",
            median(&walls),
            scan_walls.len(),
            median(&scan_walls),
            median(&walls) / median(&scan_walls)
        );
    }

    // 7. Variants: the first start and a restart again, with another build or environment.
    for v in &variants {
        delete_all_leftovers(&admin).await;
        let (op, ready, published, _) =
            first_start(&cp, &format!("first-{}", v.label), run, v, target).await;
        op.idle(Duration::from_secs(600)).await;
        tokio::time::sleep(SETTLED).await;
        let (rss, hwm) = (op.rss(), op.hwm());
        let resident = resident_by_mapping(op.pid());
        let log = op.log.clone();
        op.stop();
        let heap = last_heap_line(&log);
        let base = empty.get(&v.label).copied().unwrap_or(empty_rss);
        let op = Operator::start_variant(&cp, &format!("restart-{}", v.label), run, v);
        let again = op.ready(Duration::from_secs(600)).await;
        op.idle(Duration::from_secs(600)).await;
        tokio::time::sleep(SETTLED).await;
        let (rss2, hwm2) = (op.rss(), op.hwm());
        op.stop();
        println!(
            "variant {}: first start ready {:.2} s, published {:.1} s, RSS {:.1} MiB (peak {:.1}) = {:.2} KiB per object over its empty {:.1} MiB; restart ready {:.2} s, RSS {:.1} MiB (peak {:.1})",
            v.label,
            ready.as_secs_f64(),
            published.as_secs_f64(),
            mib(rss),
            mib(hwm),
            (rss as f64 - base as f64) / cached as f64,
            mib(base),
            again.as_secs_f64(),
            mib(rss2),
            mib(hwm2)
        );
        println!(
            "variant {}, after convergence, resident: {resident}; {heap}",
            v.label
        );
    }

    // 8. Soak.
    let soak = args.num("soak", 0);
    if soak > 0 {
        soak_run(
            &cp,
            &admin,
            &shape,
            run,
            soak,
            args.num("soak_changes", 1000),
        )
        .await;
    }
}

/// Finding changes spread over `secs` with the operator running; RSS every minute.
async fn soak_run(
    cp: &ControlPlane,
    admin: &Client,
    shape: &Shape,
    run: &[&str],
    secs: usize,
    changes: usize,
) {
    let op = Operator::start(cp, "soak", run);
    op.ready(Duration::from_secs(600)).await;
    op.idle(Duration::from_secs(600)).await;
    let start_rss = op.rss();
    let bound: Vec<usize> = (0..shape.pvs).filter(|i| !shape.is_leftover(*i)).collect();
    let every = Duration::from_secs_f64(secs as f64 / changes.max(1) as f64);
    let t = Instant::now();
    let mut samples = vec![(0.0, mib(start_rss))];
    let mut next_sample = Duration::from_secs(60);
    let mut released: Vec<usize> = Vec::new();
    for k in 0..changes {
        let due = every * k as u32;
        while t.elapsed() < due {
            if t.elapsed() >= next_sample {
                samples.push((t.elapsed().as_secs_f64() / 60.0, mib(op.rss())));
                next_sample += Duration::from_secs(60);
            }
            tokio::time::sleep(Duration::from_millis(100).min(due - t.elapsed())).await;
        }
        // Alternate: release a bound volume (a finding appears), bind a released one again
        // (it clears).
        if k % 2 == 0 || released.is_empty() {
            let i = bound[(k / 2) % bound.len()];
            release(admin, i).await;
            released.push(i);
        } else {
            let i = released.remove(0);
            rebind(admin, shape, i).await;
        }
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    samples.push((t.elapsed().as_secs_f64() / 60.0, mib(op.rss())));
    println!(
        "soak: {changes} finding changes over {:.0} s; RSS (minute, MiB): {}; growth {:+.1} MiB",
        t.elapsed().as_secs_f64(),
        samples
            .iter()
            .map(|(m, r)| format!("{m:.0}:{r:.1}"))
            .collect::<Vec<_>>()
            .join(" "),
        samples.last().map_or(0.0, |l| l.1) - samples.first().map_or(0.0, |f| f.1)
    );
    op.stop();
}

/// A claim deleted and its volume Released, as the PV controller leaves it. Returns when the
/// volume's patch returned.
async fn release(admin: &Client, i: usize) -> Instant {
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &objects::namespace(i));
    let name = objects::claim_name(i);
    // The pvc-protection finalizer is removed here, as its controller would: that controller
    // runs at kube-controller-manager's client rate (20 requests/s), which would cap the churn
    // below the rates measured.
    let unprotect = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    let kcm = patch_params("kube-controller-manager");
    let _ = claims.patch(&name, &kcm, &unprotect).await;
    delete(&claims, &name).await;
    // The PV controller releases a volume only once its claim is gone.
    while matches!(claims.get_metadata_opt(&name).await, Ok(Some(_))) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let status = Patch::Merge(serde_json::json!({"status": {"phase": "Released"}}));
    let pv = objects::pv_name(i);
    retry("release", || pvs.patch_status(&pv, &kcm, &status)).await;
    Instant::now()
}

/// Volume `i` bound to a new claim of the same name again.
async fn rebind(admin: &Client, shape: &Shape, i: usize) {
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &objects::namespace(i));
    let c = objects::claim(shape, i);
    let uid = loop {
        match claims.create(&pp("kube-controller-manager"), &c).await {
            Ok(made) => break made.metadata.uid.unwrap_or_default(),
            // The old claim is still terminating (pvc-protection): wait for it.
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let name = objects::pv_name(i);
    let spec = Patch::Merge(serde_json::json!({"spec": {"claimRef": {"uid": uid}}}));
    let kcm = patch_params("kube-controller-manager");
    retry("claimRef", || pvs.patch(&name, &kcm, &spec)).await;
    let status = Patch::Merge(serde_json::json!({"status": {"phase": "Bound"}}));
    retry("bind", || pvs.patch_status(&name, &kcm, &status)).await;
}

// --- latency --------------------------------------------------------------------------------------

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn latency(args: &Args) {
    let shape = Shape {
        pvs: args.num("pvs", 10_000),
        leftovers: 0,
    };
    let secs = args.num("secs", 30);
    let concurrencies = args.list("concurrency", &[4, 8, 16, 32]);
    let rates = args.list("rates", &[20, 100]);
    let cp = control_plane(&args.text("watch_cache", "true"));
    let admin = cp.admin().await;
    create_classes_and_namespaces(&admin).await;
    let took = build(&admin, &shape, 0, args.num("create_concurrency", 48)).await;
    println!(
        "latency: {} bound PVs (created in {:.0} s); finding changes for {secs} s per run: a claim deleted, then its volume patched Released",
        shape.pvs,
        took.as_secs_f64()
    );
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    // Retain volumes are used in order; when the rest would not cover a run, the used ones are
    // bound again (and their findings deleted) first.
    let retain = shape.pvs / 2;
    let mut cursor = 0;
    for &c in &concurrencies {
        for &rate in &rates {
            let n = rate * secs;
            assert!(n <= retain, "not enough Retain volumes for {n} changes");
            if cursor + n > retain {
                delete_all_leftovers(&admin).await;
                futures::stream::iter(0..cursor)
                    .map(|k| {
                        let admin = admin.clone();
                        async move { rebind(&admin, &shape, 2 * k).await }
                    })
                    .buffer_unordered(48)
                    .collect::<Vec<()>>()
                    .await;
                cursor = 0;
            }
            let first = cursor;
            cursor += n;
            let conc = c.to_string();
            let op = Operator::start(
                &cp,
                &format!("latency-{c}-{rate}"),
                &["--concurrency", &conc],
            );
            op.ready(Duration::from_secs(300)).await;
            op.idle(Duration::from_secs(300)).await;

            // Admin watch: when each VolumeLeftover first shows a status.
            let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let watch = {
                let seen = seen.clone();
                let api = leftovers.clone();
                tokio::spawn(async move {
                    let mut tx = Some(tx);
                    let mut s = watcher(api, watcher::Config::default()).boxed();
                    while let Some(ev) = s.next().await {
                        match ev {
                            Ok(watcher::Event::InitDone) => {
                                if let Some(tx) = tx.take() {
                                    let _ = tx.send(());
                                }
                            }
                            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o))
                                if o.status.is_some() =>
                            {
                                seen.lock()
                                    .unwrap()
                                    .entry(o.metadata.name.unwrap_or_default())
                                    .or_insert_with(Instant::now);
                            }
                            _ => {}
                        }
                    }
                })
            };
            let _ = rx.await;

            let tick = Duration::from_secs_f64(1.0 / rate as f64);
            let t = Instant::now();
            let events: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
            let mut tasks = Vec::new();
            for i in 0..n {
                let due = tick * i as u32;
                if let Some(wait) = due.checked_sub(t.elapsed()) {
                    tokio::time::sleep(wait).await;
                }
                let (admin, events) = (admin.clone(), events.clone());
                // Even volumes are Retain (published at once); odd ones are Delete-policy
                // volumes that stay bound around them.
                let i = 2 * (first + i);
                tasks.push(tokio::spawn(async move {
                    let at = release(&admin, i).await;
                    events.lock().unwrap().insert(objects::pv_name(i), at);
                }));
            }
            for task in tasks {
                let _ = task.await;
            }
            let churn = t.elapsed().as_secs_f64();
            wait_for("every finding published", Duration::from_secs(900), || {
                let seen = seen.lock().unwrap();
                let events = events.lock().unwrap();
                let done = events.len() == n && events.keys().all(|k| seen.contains_key(k));
                async move { done.then_some(()) }
            })
            .await;
            watch.abort();
            let requests = op.metric("volume_leftovers_write_requests_total");
            op.stop();
            let seen = seen.lock().unwrap().clone();
            let events = events.lock().unwrap().clone();
            let mut lat: Vec<f64> = events
                .iter()
                .filter_map(|(name, at)| {
                    Some(seen.get(name)?.saturating_duration_since(*at).as_secs_f64())
                })
                .collect();
            lat.sort_by(f64::total_cmp);
            println!(
                "--concurrency {c:>2}, {rate:>3} changes/s ({n} in {churn:.0} s): event -> VolumeLeftover p50 {:.2} s, p99 {:.2} s, max {:.2} s ({requests:.0} write requests)",
                percentile(&lat, 0.5),
                percentile(&lat, 0.99),
                lat.last().copied().unwrap_or(f64::NAN)
            );
        }
    }
    let _ = cp;
}

#[tokio::main]
async fn main() {
    let (mode, args) = Args::parse();
    match mode.as_str() {
        "converge" => converge(&args).await,
        "latency" => latency(&args).await,
        other => panic!("unknown mode {other}: converge or latency"),
    }
}
