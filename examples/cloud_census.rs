//! Cloud census benchmark: what the GCE and the EBS census cost for 10,000 disks, against the
//! project's own Compute Engine test server (tests/fake-gce-compute/server.py, every answer
//! validated against Google's discovery document; NOT Google's) and moto's EC2 (scripts/moto.sh).
//!
//!   cargo run --release --example cloud_census -- [--disks N] [--runs R]
//!
//! GCE: N disks (default 10,000) in one project over 20 scopes, 16 zones and 4 regions (the
//! regional disks with two replica zones), N/20 each; a tenth attached (`users`), two thirds with
//! the PD CSI driver's created-for description, four sevenths labelled with this cluster's name,
//! one seventh with another cluster's, the rest unlabelled. Listed as the operator lists: one
//! paginated `disks.aggregatedList` (no `locations`), or 20 paginated `disks.list` /
//! `regionDisks.list` (every location given), 500 per page, the real `google-cloud-compute-v1`
//! with a service-account key the server verifies.
//!
//! EBS: N volumes in one region (four zones) made in moto through the SDK's CreateVolume, with
//! the same mix of the CSI driver's tags and cluster tags (no attachments: moto would need an
//! instance per volume). moto ignores `MaxResults` and answers one page; the listing is also run
//! through a page-splitting proxy in this process that answers `MaxResults` volumes a page with
//! its own `NextToken`s, as EC2 does.
//!
//! Both then go through the operator's code: the listing, the mapping to census snapshots
//! (`reports_of`, `report_of`) and the decisions the loop makes for each scope's report
//! (`census_result` with 90% of the disks named by a PV), twice, so that a PV whose disk is
//! missing is concluded, then `Census::image` for every PV.
//!
//! Prints figures, asserts nothing about time. The servers listen on 127.0.0.1 only and are
//! stopped at the end, also on a panic (and exit with this process if it is killed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification, VolumeType};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use volume_leftovers::census::CensusReport;
use volume_leftovers::census::disk_ref;
use volume_leftovers::census::ebs::census::report_of;
use volume_leftovers::census::ebs::{self, Ebs, EbsConfig};
use volume_leftovers::census::gce::census::reports_of;
use volume_leftovers::census::gce::{CredentialSource, GceConfig, GceLister, Locations};
use volume_leftovers::decide::census::{Census, Scope};
use volume_leftovers::decide::census_result::{CensusState, Naming, census_result};
use volume_leftovers::engine::clock::wall_clock;
use volume_leftovers::model::backend::DiskRef;
use volume_leftovers::model::crd::VolumeSourceInfo;
use volume_leftovers::model::image::ImageFound;

/// The CSI drivers' names, as their PVs give them.
const GCE_PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";
const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

// ---- heap accounting (Rust allocations of this process, the proxy's thread left out) --------

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Set on the EBS proxy's thread: the proxy stands for EC2, its memory is not the census's.
    static UNCOUNTED: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    UNCOUNTED.try_with(|c| !c.get()).unwrap_or(true)
}

fn grew(by: usize) {
    let now = LIVE.fetch_add(by as isize, Ordering::Relaxed) + by as isize;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(by as isize, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counted() {
            grew(l.size());
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if counted() {
            shrank(l.size());
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if counted() {
            grew(new);
            shrank(l.size());
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// A field of /proc/self/status in KiB (`VmRSS:`); 0 when unreadable.
fn proc_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) from a `stat` file of /proc, in its 10 ms ticks.
fn cpu_of(path: &str) -> Duration {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // After the command: state is field 3; utime and stime are fields 14 and 15.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// CPU time of this process, every thread.
fn cpu() -> Duration {
    cpu_of("/proc/self/stat")
}

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn mib_kib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn arg<T: std::str::FromStr>(flag: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == flag) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{flag} needs a value")),
        None => default,
    }
}

fn median(mut v: Vec<Duration>) -> (Duration, Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The output of a script that prints a path.
fn script(name: &str) -> PathBuf {
    let out = Command::new(repo().join("scripts").join(name))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("scripts/{name}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{name} failed: {}",
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A ceph-csi-like uuid for disk `i` (deterministic, version 4 layout).
fn uuid(i: usize) -> String {
    let mut x = (i as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (next(), next());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

const CLUSTER: &str = "bench";
const OTHER: &str = "other-cluster";

/// Whose disk `i` is, by its labels or tags: this cluster's, another's, nobody's.
fn cluster_of(i: usize) -> Option<&'static str> {
    match i % 7 {
        0 => Some(OTHER),
        1..=4 => Some(CLUSTER),
        _ => None,
    }
}

/// Whether the CSI driver recorded its PV and claim on disk `i`.
fn csi_made(i: usize) -> bool {
    i % 3 != 2
}

/// Whether a PV names disk `i` (90%).
fn named(i: usize) -> bool {
    i % 10 != 3
}

// ---- GCE: the project's fake Compute server -------------------------------------------------

const PROJECT: &str = "p-bench";
const ZONES: [&str; 16] = [
    "us-central1-a",
    "us-central1-b",
    "us-central1-c",
    "us-central1-f",
    "us-east1-b",
    "us-east1-c",
    "us-east1-d",
    "europe-west1-b",
    "europe-west1-c",
    "europe-west1-d",
    "europe-west4-a",
    "europe-west4-b",
    "europe-west4-c",
    "asia-east1-a",
    "asia-east1-b",
    "asia-east1-c",
];
const REGIONS: [&str; 4] = ["us-central1", "europe-west1", "europe-west4", "asia-east1"];

/// Scope `s` of the 20: a zone (0..16) or a region (16..20).
fn location(s: usize) -> (&'static str, bool) {
    if s < ZONES.len() {
        (ZONES[s], false)
    } else {
        (REGIONS[s - ZONES.len()], true)
    }
}

fn gce_disk(i: usize) -> Value {
    let (loc, regional) = location(i % 20);
    let name = format!("pvc-{}", uuid(i));
    let disk_type = ["pd-balanced", "pd-ssd", "pd-standard"][i % 3];
    let mut d = json!({
        "name": name,
        "id": (1_000_000_000_000_000_000u64 + i as u64).to_string(),
        "sizeGb": (10 + i % 100).to_string(),
        "type": disk_type,
        "creationTimestamp": "2026-01-15T10:00:00.000-08:00",
        "status": "READY",
    });
    if regional {
        d["region"] = json!(loc);
        let zones: Vec<&str> = ZONES
            .iter()
            .filter(|z| z.starts_with(&format!("{loc}-")))
            .take(2)
            .copied()
            .collect();
        d["replicaZones"] = json!(zones);
    } else {
        d["zone"] = json!(loc);
    }
    if i.is_multiple_of(10) {
        let zone = if regional { ZONES[0] } else { loc };
        d["users"] = json!([format!(
            "https://www.googleapis.com/compute/v1/projects/{PROJECT}/zones/{zone}/instances/gke-node-{}",
            i % 50
        )]);
        d["lastAttachTimestamp"] = json!("2026-01-16T10:00:00.000-08:00");
    } else if i % 10 == 5 {
        d["lastDetachTimestamp"] = json!("2026-02-01T10:00:00.000-08:00");
    }
    if csi_made(i) {
        d["description"] = json!(
            json!({
                "kubernetes.io/created-for/pv/name": name,
                "kubernetes.io/created-for/pvc/name": format!("data-app-{i}"),
                "kubernetes.io/created-for/pvc/namespace": format!("team-{}", i % 50),
                "storage.gke.io/created-by": GCE_PD_CSI_DRIVER,
            })
            .to_string()
        );
    }
    if let Some(c) = cluster_of(i) {
        d["labels"] = json!({ "goog-k8s-cluster-name": c });
    }
    d
}

/// The fake Compute server; stopped on drop.
struct FakeGce {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for FakeGce {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl FakeGce {
    fn start(n: usize) -> FakeGce {
        let py = script("gce-python.sh");
        let doc = Command::new(&py)
            .args(["-c", "import googleapiclient, pathlib; print(pathlib.Path(googleapiclient.__file__).parent / 'discovery_cache/documents/compute.v1.json')"])
            .output()
            .expect("the discovery document");
        assert!(doc.status.success(), "cannot locate compute.v1.json");
        let doc = PathBuf::from(String::from_utf8_lossy(&doc.stdout).trim());
        let dir = repo()
            .join("target/tmp")
            .join(format!("cloud-census-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("target/tmp");
        let state = json!({
            "project": PROJECT,
            "zones": ZONES,
            "regions": REGIONS,
            "disks": (0..n).map(gce_disk).collect::<Vec<_>>(),
        });
        let state_file = dir.join("state.json");
        std::fs::write(&state_file, state.to_string()).expect("state.json");
        let mut child = Command::new(py)
            .arg(repo().join("tests/fake-gce-compute/server.py"))
            .arg("--discovery")
            .arg(doc)
            .arg("--state")
            .arg(&state_file)
            .arg("--write-keys")
            .arg(dir.join("keys"))
            .stdout(Stdio::piped())
            // One line per request on standard error: not this benchmark's output.
            .stderr(Stdio::null())
            .spawn()
            .expect("server.py");
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let Some(port) = line.trim().strip_prefix("listening ") else {
            let _ = child.kill();
            panic!("server.py did not start: {line:?}");
        };
        let port = port.parse().unwrap();
        FakeGce { child, port, dir }
    }

    fn config(&self, locations: Locations) -> GceConfig {
        GceConfig {
            locations,
            credentials: CredentialSource::KeyFile(self.dir.join("keys/key.json")),
            endpoint: Some(format!("http://127.0.0.1:{}", self.port)),
            cluster_label: None,
            ..GceConfig::new(PROJECT)
        }
    }

    /// Disk requests the server has had (retries included).
    fn requests(&self) -> u64 {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_fake/requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).unwrap();
        let map: BTreeMap<String, u64> =
            serde_json::from_str(body.split_once("\r\n\r\n").unwrap().1).unwrap();
        map.iter()
            .filter(|(p, _)| p.starts_with("/compute/"))
            .map(|(_, n)| n)
            .sum()
    }
}

// ---- EBS: moto, and a page-splitting proxy in front of it ----------------------------------

const REGION: &str = "us-east-1";

/// moto's standalone server; stopped on drop.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// moto's server with one change, a speed-up that answers the same: a resource's tags are read
/// by a dict lookup. moto 5.2.5 reads each volume's tags by scanning every tag of every
/// resource (`describe_tags` with a `resource-id` filter), so that one DescribeVolumes of N
/// tagged volumes costs N² steps (about 20 minutes for 10,000 volumes on this machine).
const MOTO: &str = r#"
import re, sys
from moto.ec2.models.tags import TagBackend
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
scan = TagBackend.describe_tags
def describe_tags(self, filters=None):
    ids = (filters or {}).get("resource-id")
    if filters and set(filters) == {"resource-id"} and len(ids) == 1 \
            and re.fullmatch(r"[a-z]+-[0-9a-f]+", ids[0]):
        rid = ids[0]
        kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(rid), "")
        return [{"resource_id": rid, "key": k, "value": v, "resource_type": kind}
                for k, v in self.tags.get(rid, {}).items()]
    return scan(self, filters)
TagBackend.describe_tags = describe_tags
# Exits with this benchmark, also when it is killed.
import os, threading, time
parent = os.getppid()
def watchdog():
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)
threading.Thread(target=watchdog, daemon=True).start()
from moto.server import main
main(sys.argv[1:])
"#;

impl Moto {
    fn start(dir: &Path) -> Moto {
        let server = script("moto.sh");
        let python = server.with_file_name("python");
        let wrapper = dir.join("moto_server.py");
        std::fs::write(&wrapper, MOTO).expect("moto_server.py");
        let port = free_port();
        let child = Command::new(&python)
            .arg(&wrapper)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
        let mut moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let until = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto exited: {status}");
            }
            assert!(Instant::now() < until, "moto did not listen in 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }
}

fn keys() -> ebs::CredentialSource {
    ebs::CredentialSource::Keys {
        access_key_id: "AKIATESTTESTTEST".into(),
        secret_access_key: "test-secret".into(),
        session_token: None,
    }
}

/// The operator's defaults, pointed at `url`.
fn ebs_config(url: &str) -> EbsConfig {
    EbsConfig {
        credentials: keys(),
        endpoint_url: Some(url.to_string()),
        ..EbsConfig::new(REGION)
    }
}

/// Makes the volumes through the SDK's CreateVolume, `concurrency` at a time; their ids, in
/// order.
async fn make_volumes(url: &str, n: usize, concurrency: usize) -> Vec<String> {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(url)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "AKIATESTTESTTEST",
            "test-secret",
            None,
            None,
            "bench",
        ))
        .load()
        .await;
    let ec2 = aws_sdk_ec2::Client::new(&sdk);
    futures::stream::iter(0..n)
        .map(|i| {
            let ec2 = ec2.clone();
            async move {
                let mut tags: Vec<(String, String)> = Vec::new();
                if csi_made(i) {
                    let pv = format!("pvc-{}", uuid(i));
                    tags.push(("CSIVolumeName".into(), pv.clone()));
                    tags.push(("kubernetes.io/created-for/pv/name".into(), pv));
                    tags.push((
                        "kubernetes.io/created-for/pvc/name".into(),
                        format!("data-app-{i}"),
                    ));
                    tags.push((
                        "kubernetes.io/created-for/pvc/namespace".into(),
                        format!("team-{}", i % 50),
                    ));
                    tags.push(("ebs.csi.aws.com/cluster".into(), "true".into()));
                }
                if let Some(c) = cluster_of(i) {
                    tags.push((format!("kubernetes.io/cluster/{c}"), "owned".into()));
                }
                let mut req = ec2
                    .create_volume()
                    .availability_zone(format!("{REGION}{}", ['a', 'b', 'c', 'd'][i % 4]))
                    .size(10 + (i % 100) as i32)
                    .volume_type(
                        [VolumeType::Gp3, VolumeType::Gp2, VolumeType::Io2][i % 3].clone(),
                    );
                if i % 3 == 2 {
                    req = req.iops(3000);
                }
                if !tags.is_empty() {
                    let mut spec = TagSpecification::builder().resource_type(ResourceType::Volume);
                    for (k, v) in tags {
                        spec = spec.tags(Tag::builder().key(k).value(v).build());
                    }
                    req = req.tag_specifications(spec.build());
                }
                let id = req
                    .send()
                    .await
                    .expect("CreateVolume")
                    .volume_id()
                    .expect("an id")
                    .to_string();
                (i, id)
            }
        })
        .buffer_unordered(concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<BTreeMap<_, _>>()
        .into_values()
        .collect()
}

/// moto's whole DescribeVolumes answer, cut into its top-level volume `<item>`s.
struct Whole {
    head: String,
    items: Vec<String>,
    tail: String,
}

fn split(whole: &str) -> Whole {
    let open = whole.find("<volumeSet>").expect("a volumeSet") + "<volumeSet>".len();
    let close = whole.rfind("</volumeSet>").expect("a volumeSet");
    let inner = &whole[open..close];
    let mut items = Vec::new();
    let (mut depth, mut at, mut begin) = (0usize, 0usize, 0usize);
    while let Some(lt) = inner[at..].find('<') {
        at += lt;
        let rest = &inner[at..];
        if rest.starts_with("<item>") {
            if depth == 0 {
                begin = at;
            }
            depth += 1;
            at += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth -= 1;
            at += "</item>".len();
            if depth == 0 {
                items.push(inner[begin..at].to_string());
            }
        } else {
            at += 1;
        }
    }
    Whole {
        head: whole[..open].to_string(),
        items,
        tail: whole[close..].to_string(),
    }
}

fn form_value<'a>(form: &'a str, key: &str) -> Option<&'a str> {
    form.split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// A proxy in front of moto that pages as EC2 does: a request without `NextToken` reads moto's
/// whole answer (kept until the next such request); each answer holds `MaxResults` volumes
/// and a `nextToken` when more follow. It runs on its own thread, its memory not counted.
struct Proxy {
    url: String,
    requests: Arc<Mutex<u64>>,
    /// The CPU time of the proxy's thread after its last answer (not the census's).
    cpu: Arc<Mutex<Duration>>,
}

fn proxy(upstream: &str) -> Proxy {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("proxy port");
    listener.set_nonblocking(true).unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let requests = Arc::new(Mutex::new(0u64));
    let upstream = upstream.trim_start_matches("http://").to_string();
    let count = requests.clone();
    let cpu = Arc::new(Mutex::new(Duration::ZERO));
    let own_cpu = cpu.clone();
    std::thread::spawn(move || {
        UNCOUNTED.with(|c| c.set(true));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let cache: Arc<Mutex<Option<Arc<Whole>>>> = Arc::default();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (upstream, cache, count, own_cpu) = (
                    upstream.clone(),
                    cache.clone(),
                    count.clone(),
                    own_cpu.clone(),
                );
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let (upstream, cache, count, own_cpu) = (
                            upstream.clone(),
                            cache.clone(),
                            count.clone(),
                            own_cpu.clone(),
                        );
                        async move {
                            *count.lock().unwrap() += 1;
                            let answer = page(req, &upstream, &cache).await;
                            // Every task of this runtime runs on this thread.
                            *own_cpu.lock().unwrap() = cpu_of("/proc/thread-self/stat");
                            Ok::<_, Infallible>(answer)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
    });
    Proxy {
        url: format!("http://{addr}"),
        requests,
        cpu,
    }
}

async fn page(
    req: Request<Incoming>,
    upstream: &str,
    cache: &Mutex<Option<Arc<Whole>>>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let form = String::from_utf8_lossy(&body).to_string();
    let start: usize = form_value(&form, "NextToken").map_or(0, |t| t.parse().unwrap());
    let size: usize = form_value(&form, "MaxResults").map_or(1000, |t| t.parse().unwrap());
    let cached = cache.lock().unwrap().clone().filter(|_| start > 0);
    let whole = match cached {
        Some(w) => w,
        None => {
            let stream = tokio::net::TcpStream::connect(upstream).await.unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let mut fwd = Request::builder().method(parts.method).uri(parts.uri);
            for (k, v) in &parts.headers {
                fwd = fwd.header(k, v);
            }
            let resp = send
                .send_request(fwd.body(Full::new(body)).unwrap())
                .await
                .unwrap();
            assert!(resp.status().is_success(), "moto: {}", resp.status());
            let text = resp.into_body().collect().await.unwrap().to_bytes();
            let w = Arc::new(split(&String::from_utf8_lossy(&text)));
            *cache.lock().unwrap() = Some(w.clone());
            w
        }
    };
    let end = (start + size).min(whole.items.len());
    let token = if end < whole.items.len() {
        format!("<nextToken>{end}</nextToken>")
    } else {
        String::new()
    };
    let tail = whole.tail.replace(
        "</DescribeVolumesResponse>",
        &format!("{token}</DescribeVolumesResponse>"),
    );
    let mut out = whole.head.clone();
    for item in &whole.items[start..end] {
        out.push_str(item);
    }
    out.push_str(&tail);
    Response::builder()
        .status(200)
        .header("content-type", "text/xml")
        .body(Full::new(Bytes::from(out)))
        .unwrap()
}

// ---- the operator's decisions --------------------------------------------------------------

/// The PVs: a CSI volume for 90% of the disks, and one for each of `missing` disks that do not
/// exist. `source(i)` is disk i's source and the zones its node affinity requires.
fn volumes(
    n: usize,
    missing: usize,
    source: impl Fn(usize) -> (VolumeSourceInfo, Vec<String>),
) -> Vec<(String, VolumeSourceInfo, Vec<String>)> {
    (0..n)
        .filter(|&i| named(i))
        .chain(n..n + missing)
        .map(|i| {
            let (s, zones) = source(i);
            (format!("pvc-{}", uuid(i)), s, zones)
        })
        .collect()
}

/// `s` with the zones its PV's node affinity requires, as `volume_source` records them.
fn located(s: &VolumeSourceInfo, zones: &[String]) -> VolumeSourceInfo {
    VolumeSourceInfo {
        zones: zones.to_vec(),
        ..s.clone()
    }
}

/// The loop's naming: each volume's disk (`disk_ref`), built once for the reports of one listing
/// as the loop builds it from its stores for the reports that arrive together.
fn naming(pvs: &[(String, VolumeSourceInfo, Vec<String>)]) -> Naming {
    Naming {
        volumes: pvs
            .iter()
            .map(|(name, s, zones)| (name.clone(), disk_ref(&located(s, zones))))
            .collect(),
        ..Naming::default()
    }
}

/// What a round of reports did: the time of `census_result` over them, the findings about
/// unreferenced disks after it, and their hints.
struct Decided {
    time: Duration,
    findings: usize,
    hints: BTreeMap<String, usize>,
}

fn decide(
    state: &mut CensusState,
    reports: Vec<CensusReport>,
    pvs: &[(String, VolumeSourceInfo, Vec<String>)],
) -> Decided {
    let now = Time(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2));
    let t = Instant::now();
    let mut named = None;
    for r in reports {
        let out = census_result(
            state,
            &r.key,
            r.result.map_err(|e| (e.kind, e.message)),
            &now,
            || &*named.get_or_insert_with(|| naming(pvs)),
        );
        assert!(
            !matches!(
                out.gauge,
                volume_leftovers::decide::census_result::Gauge::Failed
            ),
            "{} failed",
            r.key
        );
    }
    let time = t.elapsed();
    let mut hints = BTreeMap::new();
    for (_, f) in state.orphans.values() {
        for h in &f.status.hints {
            *hints.entry(format!("{h:?}")).or_default() += 1;
        }
    }
    Decided {
        time,
        findings: state.orphans.len(),
        hints,
    }
}

/// `Census::image` for every PV: how many answers of each kind, and the time.
fn images(
    census: &Census,
    pvs: &[(String, VolumeSourceInfo, Vec<String>)],
) -> (BTreeMap<&'static str, usize>, Duration) {
    let created = Time(jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * 365));
    let refs: Vec<DiskRef> = pvs
        .iter()
        .map(|(_, s, z)| disk_ref(&located(s, z)).expect("a disk"))
        .collect();
    let t = Instant::now();
    let mut answers = BTreeMap::new();
    for r in &refs {
        let a = match census.image(r, Some(&created)) {
            ImageFound::Present { watchers: 0 } => "present",
            ImageFound::Present { .. } => "present, in use",
            ImageFound::Missing { .. } => "missing",
            ImageFound::Unknown => "unknown",
            ImageFound::NotCensused => "not censused",
        };
        *answers.entry(a).or_default() += 1;
    }
    (answers, t.elapsed())
}

fn line(what: &str, times: Vec<Duration>, cpu: Duration, runs: usize, calls: &str) {
    let (m, lo, hi) = median(times);
    println!(
        "  {what:<46} {:>8.1} ms  ({:>6.1}-{:>6.1})  {:>6.1} ms  {calls}",
        ms(m),
        ms(lo),
        ms(hi),
        ms(cpu) / runs as f64,
    );
}

fn main() {
    let n: usize = arg("--disks", 10_000);
    let runs: usize = arg("--runs", 5);
    assert!(
        n >= 100 && n.is_multiple_of(20),
        "--disks: a multiple of 20, at least 100"
    );
    assert!(runs >= 1, "--runs: at least 1");
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let load_start = loadavg();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let grace = Duration::from_secs(3600);
    let missing = n / 100;

    // ---- GCE ------------------------------------------------------------------------------
    let t = Instant::now();
    let fake = FakeGce::start(n);
    let gce_setup = t.elapsed();
    eprintln!(
        "cloud_census: fake Compute server with {n} disks up in {:.1} s",
        gce_setup.as_secs_f64()
    );
    let gce_pvs = volumes(n, missing, |i| {
        let (loc, regional) = location(i % 20);
        let kind = if regional { "regions" } else { "zones" };
        let zones = if regional {
            Vec::new()
        } else {
            vec![loc.to_string()]
        };
        let s = VolumeSourceInfo {
            kind: "csi".into(),
            driver: Some(GCE_PD_CSI_DRIVER.into()),
            volume_handle: Some(format!(
                "projects/{PROJECT}/{kind}/{loc}/disks/pvc-{}",
                uuid(i)
            )),
            ..VolumeSourceInfo::default()
        };
        (s, zones)
    });
    let scopes: Vec<Scope> = (0..20)
        .map(|s| volume_leftovers::census::gce::vocabulary::location(PROJECT, location(s).0))
        .collect();
    let only = Locations::Only {
        zones: ZONES.iter().map(|z| z.to_string()).collect(),
        regions: REGIONS.iter().map(|r| r.to_string()).collect(),
    };

    // Once, as the operator starts: a new lister, the listing, the mapping, the decisions,
    // twice (a missing disk is concluded on the second listing).
    let heap0 = live();
    reset_peak();
    let t = Instant::now();
    let lister = rt
        .block_on(GceLister::new(fake.config(Locations::All)))
        .expect("lister");
    let new_lister = t.elapsed();
    let heap_lister = live() - heap0;
    let requests0 = fake.requests();
    let t = Instant::now();
    let listing = rt.block_on(lister.list());
    let first_list = t.elapsed();
    let first_requests = fake.requests() - requests0;
    let first_pages = listing.pages;
    let listed: usize = listing
        .scopes
        .iter()
        .map(|s| s.result.as_ref().expect("a scope listed").len())
        .sum();
    assert_eq!(listed, n, "disks listed");
    assert_eq!(listing.scopes.len(), 20, "scopes listed");
    let heap_listing = live() - heap0;
    let heap_listing_peak = peak() - heap0;
    let mut known = BTreeSet::new();
    let at = wall_clock();
    let t = Instant::now();
    let reports = reports_of(listing, PROJECT, &mut known, at, first_list);
    let map_time = t.elapsed();
    // The mapping consumes the listing: what is left besides the lister is the snapshots.
    let heap_snapshots = live() - heap0 - heap_lister;
    let mut gce_state = CensusState::new(Census::new(scopes.clone(), Some(CLUSTER), grace));
    let first_decided = decide(&mut gce_state, reports, &gce_pvs);
    let listing = rt.block_on(lister.list());
    let reports = reports_of(listing, PROJECT, &mut known, wall_clock(), first_list);
    let second_decided = decide(&mut gce_state, reports, &gce_pvs);
    // The listings are consumed: what stays is the lister, `known` and the state.
    let heap_state = live() - heap0 - heap_lister;
    let heap_gce_peak = peak() - heap0;
    let (gce_answers, gce_image_time) = images(&gce_state.census, &gce_pvs);

    // Several times: the listing alone, aggregated and per location.
    let timed = |locations: Locations| {
        let lister = rt
            .block_on(GceLister::new(fake.config(locations)))
            .expect("lister");
        // The first listing of a lister signs its token and connects: not counted.
        let _ = rt.block_on(lister.list());
        let (mut times, mut pages) = (Vec::new(), 0);
        let requests0 = fake.requests();
        let cpu0 = cpu();
        for _ in 0..runs {
            let t = Instant::now();
            let l = rt.block_on(lister.list());
            times.push(t.elapsed());
            pages = l.pages;
            assert!(l.scopes.iter().all(|s| s.result.is_ok()), "a scope failed");
        }
        let cpu = cpu() - cpu0;
        let requests = (fake.requests() - requests0) / runs as u64;
        (times, cpu, pages, requests)
    };
    let (agg_times, agg_cpu, agg_pages, agg_requests) = timed(Locations::All);
    let (loc_times, loc_cpu, loc_pages, loc_requests) = timed(only);
    drop(fake);

    // ---- EBS ------------------------------------------------------------------------------
    let dir = repo()
        .join("target/tmp")
        .join(format!("cloud-census-moto-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("target/tmp");
    let t = Instant::now();
    let moto = Moto::start(&dir);
    let moto_up = t.elapsed();
    let workers = 8;
    let t = Instant::now();
    let ids = rt.block_on(make_volumes(&moto.url, n, workers));
    let made = t.elapsed();
    eprintln!(
        "cloud_census: {n} volumes made in moto in {:.1} s",
        made.as_secs_f64()
    );
    let ebs_pvs = volumes(n, missing, |i| {
        let id = ids
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("vol-{:017x}", i));
        let s = VolumeSourceInfo {
            kind: "csi".into(),
            driver: Some(EBS_CSI_DRIVER.into()),
            volume_handle: Some(id),
            ..VolumeSourceInfo::default()
        };
        (s, vec![format!("{REGION}{}", ['a', 'b', 'c', 'd'][i % 4])])
    });
    let px = proxy(&moto.url);
    let direct = ebs_config(&moto.url);
    let paged = ebs_config(&px.url);
    let ebs_scope = volume_leftovers::census::ebs::vocabulary::region(None, REGION);

    // Once, as the operator starts, through the proxy (pages as EC2's).
    let heap0 = live();
    reset_peak();
    let t = Instant::now();
    let client = rt.block_on(Ebs::connect(paged.clone()));
    let ebs_connect = t.elapsed();
    let heap_client = live() - heap0;
    let r0 = *px.requests.lock().unwrap();
    let t = Instant::now();
    let result = rt.block_on(client.list());
    let ebs_first = t.elapsed();
    let ebs_first_requests = *px.requests.lock().unwrap() - r0;
    let ebs_first_pages = result.as_ref().expect("listing").pages;
    assert_eq!(result.as_ref().unwrap().volumes.len(), n, "volumes listed");
    let ebs_heap_listing = live() - heap0;
    let ebs_heap_listing_peak = peak() - heap0;
    let t = Instant::now();
    let report = report_of(result, &paged, Some(CLUSTER), None, wall_clock(), ebs_first);
    let ebs_map_time = t.elapsed();
    let ebs_heap_snapshot = live() - heap0 - heap_client;
    let mut ebs_state = CensusState::new(Census::new([ebs_scope], Some(CLUSTER), grace));
    let ebs_first_decided = decide(&mut ebs_state, vec![report], &ebs_pvs);
    let result = rt.block_on(client.list());
    let report = report_of(result, &paged, Some(CLUSTER), None, wall_clock(), ebs_first);
    let ebs_second_decided = decide(&mut ebs_state, vec![report], &ebs_pvs);
    let ebs_heap_state = live() - heap0 - heap_client;
    let ebs_heap_peak = peak() - heap0;
    let (ebs_answers, ebs_image_time) = images(&ebs_state.census, &ebs_pvs);

    let ebs_timed = |config: &EbsConfig, proxy: Option<&Proxy>| {
        let client = rt.block_on(Ebs::connect(config.clone()));
        let _ = rt.block_on(client.list()).expect("listing");
        let r0 = proxy.map(|p| *p.requests.lock().unwrap());
        let proxy_cpu0 = proxy.map_or(Duration::ZERO, |p| *p.cpu.lock().unwrap());
        let (mut times, mut pages) = (Vec::new(), 0);
        let cpu0 = cpu();
        for _ in 0..runs {
            let t = Instant::now();
            let l = rt.block_on(client.list()).expect("listing");
            times.push(t.elapsed());
            pages = l.pages;
        }
        // The proxy's thread stands for EC2: its CPU is not the census's.
        let proxy_cpu = proxy.map_or(Duration::ZERO, |p| *p.cpu.lock().unwrap()) - proxy_cpu0;
        let cpu = (cpu() - cpu0).saturating_sub(proxy_cpu);
        let requests = proxy.map(|p| (*p.requests.lock().unwrap() - r0.unwrap()) / runs as u64);
        (times, cpu, pages, requests)
    };
    let (moto_times, moto_cpu, moto_pages, _) = ebs_timed(&direct, None);
    let (px_times, px_cpu, px_pages, px_requests) = ebs_timed(&paged, Some(&px));
    drop(moto);
    let _ = std::fs::remove_dir_all(&dir);
    let load_end = loadavg();

    // ---- figures ---------------------------------------------------------------------------
    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let b = |x: isize| x as f64 / n as f64;
    println!(
        "cloud census: {n} GCE disks in 1 project over 20 scopes (16 zones, 4 regions; {} each), {n} EBS volumes in 1 region",
        n / 20
    );
    println!(
        "  disks: 10% attached, 2/3 with the CSI driver's created-for record, 4/7 this cluster's, 1/7 another cluster's, 2/7 unattributed; PVs name 90% of them, and {missing} disks that do not exist"
    );
    println!(
        "machine: {cores} cores, load average {load_start} at start, {load_end} at end; {} build; servers on 127.0.0.1: the project's fake Compute server (Python, every answer validated against the discovery document), moto (Python)",
        if cfg!(debug_assertions) {
            "dev-profile (unoptimized)"
        } else {
            "release"
        }
    );
    println!(
        "setup (not a figure): fake Compute server up in {:.1} s; moto up in {:.1} s, {n} volumes made in {:.1} s by CreateVolume, {workers} at a time",
        gce_setup.as_secs_f64(),
        moto_up.as_secs_f64(),
        made.as_secs_f64()
    );
    println!(
        "listing, the operator's defaults (500 a page)             median      (min-max)     CPU here  requests (pages)"
    );
    line(
        &format!("GCE aggregatedList (no locations) [{runs} runs]"),
        agg_times,
        agg_cpu,
        runs,
        &format!("{agg_requests} ({agg_pages} pages)"),
    );
    line(
        &format!("GCE 20 x disks.list/regionDisks.list [{runs} runs]"),
        loc_times,
        loc_cpu,
        runs,
        &format!("{loc_requests} ({loc_pages} pages)"),
    );
    line(
        &format!("EBS DescribeVolumes, moto's one page [{runs} runs]"),
        moto_times,
        moto_cpu,
        runs,
        &format!("{moto_pages} ({moto_pages} pages)"),
    );
    line(
        &format!("EBS DescribeVolumes, paged as EC2 [{runs} runs]"),
        px_times,
        px_cpu,
        runs,
        &format!("{} ({px_pages} pages)", px_requests.unwrap_or(0)),
    );
    println!(
        "  first GCE listing on a new lister (aggregated): {:.1} ms, {first_requests} requests ({first_pages} pages); GceLister::new (key file read) {:.1} ms",
        ms(first_list),
        ms(new_lister)
    );
    println!(
        "  first EBS listing on a new client (paged): {:.1} ms, {ebs_first_requests} requests ({ebs_first_pages} pages); Ebs::connect {:.1} ms",
        ms(ebs_first),
        ms(ebs_connect)
    );
    println!("operator's pure steps (GCE: 20 reports; EBS: 1)");
    for (what, pvs, map, first, second, image, answers) in [
        (
            "GCE",
            gce_pvs.len(),
            map_time,
            &first_decided,
            &second_decided,
            gce_image_time,
            &gce_answers,
        ),
        (
            "EBS",
            ebs_pvs.len(),
            ebs_map_time,
            &ebs_first_decided,
            &ebs_second_decided,
            ebs_image_time,
            &ebs_answers,
        ),
    ] {
        println!(
            "  {what}: mapping to snapshots {:.1} ms ({:.2} µs/disk); census_result, 1st listing {:.1} ms ({:.2} µs/disk), 2nd {:.1} ms ({:.2} µs/disk)",
            ms(map),
            per(map),
            ms(first.time),
            per(first.time),
            ms(second.time),
            per(second.time)
        );
        println!(
            "  {what}: {} findings about disks no PV names, hints {:?}; Census::image for {} PVs {:.1} ms: {answers:?}",
            second.findings,
            second.hints,
            pvs,
            ms(image)
        );
    }
    println!("memory of this process (Rust heap)");
    println!(
        "  GCE: the listing {:.2} MiB ({:.0} B/disk), peak while listing {:.2} MiB ({:.0} B/disk); its snapshots {:.2} MiB ({:.0} B/disk)",
        mib(heap_listing),
        b(heap_listing),
        mib(heap_listing_peak),
        b(heap_listing_peak),
        mib(heap_snapshots),
        b(heap_snapshots)
    );
    println!(
        "  GCE: the census state after two listings {:.2} MiB ({:.0} B/disk); the lister {:.2} MiB; peak from the lister's start {:.2} MiB",
        mib(heap_state),
        b(heap_state),
        mib(heap_lister),
        mib(heap_gce_peak)
    );
    println!(
        "  EBS: the listing {:.2} MiB ({:.0} B/volume), peak while listing {:.2} MiB ({:.0} B/volume); its snapshot {:.2} MiB ({:.0} B/volume)",
        mib(ebs_heap_listing),
        b(ebs_heap_listing),
        mib(ebs_heap_listing_peak),
        b(ebs_heap_listing_peak),
        mib(ebs_heap_snapshot),
        b(ebs_heap_snapshot)
    );
    println!(
        "  EBS: the census state after two listings {:.2} MiB ({:.0} B/volume); the client {:.2} MiB; peak from the client's start {:.2} MiB",
        mib(ebs_heap_state),
        b(ebs_heap_state),
        mib(heap_client),
        mib(ebs_heap_peak)
    );
    println!(
        "  VmHWM at the end {:.1} MiB, VmRSS {:.1} MiB (the proxy's thread included)",
        mib_kib(proc_kib("VmHWM:")),
        mib_kib(proc_kib("VmRSS:"))
    );
    drop(gce_state);
    drop(ebs_state);
}
