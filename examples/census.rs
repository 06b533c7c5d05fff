//! Census benchmark against a real Ceph (ceph/up.sh: one monitor, one memstore OSD on
//! 127.0.0.1): how long the census of a pool of N images takes and how many requests it makes,
//! what the operator's pure census steps cost, and the memory the census adds to the process.
//!
//!   cargo run --release --example census -- [--images N] [--features LIST] [--workers W]
//!
//! Defaults: 10,000 images of 1 GiB (thin) with ceph-csi's usual `imageFeatures: layering`;
//! 10% carry ceph-csi's ownership metadata, 5% are moved to the trash. They are made as
//! client.admin by W python3-rbd processes (Debian's python3-rbd, as `/usr/bin/python3`; the
//! `rbd` CLI costs ~50 ms a call). The census runs as the read-only user, monitors and keyring
//! given, no ceph.conf, the way the operator connects.
//!
//! Prints figures, asserts nothing about time. Ceph is stopped at the end, also on a panic (and
//! by up.sh's watchdog if this process is killed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volume_leftovers::census::CensusSettings;
use volume_leftovers::census::backend::Reading;
use volume_leftovers::census::ceph::handle::image_ref;
use volume_leftovers::census::ceph::rbd::{self, CephConfig, Cluster, PoolCensus};
use volume_leftovers::census::ceph::snapshot_of;
use volume_leftovers::census::config::CensusConfig;
use volume_leftovers::decide::census::{Scope, Seen};
use volume_leftovers::engine::clock::wall_clock;
use volume_leftovers::model::crd::VolumeSourceInfo;

use volume_leftovers::census::ceph::handle::PoolKey;
use volume_leftovers::model::csi::RBD_CSI_DRIVER;
use volume_leftovers::model::image::ImageFound;

// ---- heap accounting (Rust allocations only; librados/librbd use malloc directly) ----------

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator and only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        grew(new);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// A field of /proc/PID/status in KiB (`VmRSS:`, `VmHWM:`); 0 when unreadable.
fn proc_kib(pid: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn rss() -> u64 {
    proc_kib("self", "VmRSS:")
}

fn hwm() -> u64 {
    proc_kib("self", "VmHWM:")
}

fn mib_kib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

// ---- the cluster ---------------------------------------------------------------------------

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A Ceph started by ceph/up.sh; stopped (ceph/down.sh) on drop, also on a panic.
struct Ceph {
    dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl Ceph {
    fn start(memstore_bytes: u64) -> Ceph {
        let dir = repo()
            .join("target/tmp")
            .join(format!("census-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.parent().unwrap()).expect("target/tmp");
        let out = Command::new(repo().join("ceph/up.sh"))
            .arg(&dir)
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            .env("CEPH_MEMSTORE_BYTES", memstore_bytes.to_string())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("running ceph/up.sh: {e}"));
        assert!(
            out.status.success(),
            "ceph/up.sh failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(dir.join("env")).expect("ceph/up.sh wrote no env file");
        let env = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ceph { dir, env }
    }

    fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("{key} missing from {}/env", self.dir.display()))
    }
}

impl Drop for Ceph {
    fn drop(&mut self) {
        let ok = Command::new(repo().join("ceph/down.sh"))
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        // Kept after a failure: its logs say why.
        if ok && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Makes the images as client.admin: reads "name<TAB>action<TAB>key=value..." lines on stdin,
/// action `-` (create), `m` (create, then set the metadata given), `t` (create, then move to
/// the trash).
const MAKE_IMAGES: &str = r#"
import sys, rados, rbd
conf, pool, size, features = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
bits = {"layering": rbd.RBD_FEATURE_LAYERING, "exclusive-lock": rbd.RBD_FEATURE_EXCLUSIVE_LOCK,
        "object-map": rbd.RBD_FEATURE_OBJECT_MAP, "fast-diff": rbd.RBD_FEATURE_FAST_DIFF,
        "deep-flatten": rbd.RBD_FEATURE_DEEP_FLATTEN, "journaling": rbd.RBD_FEATURE_JOURNALING}
feat = 0
for f in features.split(","):
    feat |= bits[f]
cluster = rados.Rados(conffile=conf, name="client.admin")
cluster.connect(timeout=30)
io = cluster.open_ioctx(pool)
r = rbd.RBD()
n = 0
for line in sys.stdin:
    parts = line.rstrip("\n").split("\t")
    name, action = parts[0], parts[1]
    r.create(io, name, size, old_format=False, features=feat)
    if action == "m":
        with rbd.Image(io, name) as img:
            for kv in parts[2:]:
                k, v = kv.split("=", 1)
                img.metadata_set(k, v)
    elif action == "t":
        r.trash_move(io, name, 0)
    n += 1
io.close()
cluster.shutdown()
print(n)
"#;

/// A ceph-csi-like uuid for image `i` (deterministic, version 4 layout).
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

/// A deterministic shuffle (xorshift, Fisher-Yates).
fn shuffle<T>(v: &mut [T]) {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Owned,
    Trashed,
}

fn kind(i: usize) -> Kind {
    if i.is_multiple_of(10) {
        Kind::Owned
    } else if i % 20 == 7 {
        Kind::Trashed
    } else {
        Kind::Plain
    }
}

fn make_images(
    ceph: &Ceph,
    names: &[String],
    features: &str,
    workers: usize,
    cluster_name: &str,
) -> Duration {
    let python = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .args(["-c", "import rados, rbd"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .unwrap_or_else(|| {
            panic!("no python3 with the rados and rbd modules: apt-get install python3-rbd")
        });
    let script = ceph.dir.join("make_images.py");
    std::fs::write(&script, MAKE_IMAGES).expect("writing make_images.py");
    let t = Instant::now();
    let children: Vec<_> = (0..workers)
        .map(|w| {
            let mut input = String::new();
            for (i, name) in names.iter().enumerate().skip(w).step_by(workers) {
                match kind(i) {
                    Kind::Plain => input.push_str(&format!("{name}\t-\n")),
                    Kind::Trashed => input.push_str(&format!("{name}\tt\n")),
                    Kind::Owned => input.push_str(&format!(
                        "{name}\tm\t{}=pvc-{}\t{}=data-app-{i}\t{}=team-{}\t{}={cluster_name}\n",
                        rbd::META_PV_NAME,
                        uuid(i + 1_000_000),
                        rbd::META_PVC_NAME,
                        rbd::META_PVC_NAMESPACE,
                        i % 50,
                        rbd::META_CLUSTER_NAME,
                    )),
                }
            }
            let mut child = Command::new(python)
                .arg(&script)
                .arg(ceph.var("CEPH_CONF"))
                .arg(ceph.var("CEPH_POOL"))
                .arg((1u64 << 30).to_string())
                .arg(features)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("python3");
            let mut stdin = child.stdin.take().unwrap();
            std::thread::spawn(move || stdin.write_all(input.as_bytes()));
            child
        })
        .collect();
    let mut made = 0usize;
    for child in children {
        let out = child.wait_with_output().expect("python3");
        assert!(
            out.status.success(),
            "make_images.py failed: {}",
            out.status
        );
        made += String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<usize>()
            .unwrap_or(0);
    }
    assert_eq!(made, names.len(), "images made");
    t.elapsed()
}

// ---- measuring -----------------------------------------------------------------------------

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

/// `reps` censuses reading the details of the images not in `referenced`; the last one's
/// census, and the times.
/// What the operator reads of an image: the size of one a volume names, the details of any other
/// (`sizes: false`: the name alone of one a volume names, as before sizes were compared).
fn ask_with(referenced: &HashSet<String>, name: &str, sizes: bool) -> rbd::Ask {
    match (referenced.contains(name), sizes) {
        (false, _) => rbd::Ask::Detail,
        (true, true) => rbd::Ask::Size,
        (true, false) => rbd::Ask::Name,
    }
}

fn ask(referenced: &HashSet<String>, name: &str) -> rbd::Ask {
    ask_with(referenced, name, true)
}

fn censuses(
    cluster: &Cluster,
    pool: &str,
    referenced: &HashSet<String>,
    reps: usize,
    sizes: bool,
) -> (PoolCensus, Vec<Duration>) {
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let c = cluster
            .census(pool, None, |n| ask_with(referenced, &n.name, sizes))
            .expect("census");
        times.push(t.elapsed());
        last = Some(c);
    }
    (last.unwrap(), times)
}

fn calls(c: &PoolCensus) -> String {
    let q = c.requests;
    format!(
        "{:>5} ({:>5})  list {} trash {} get_size {} open {}",
        q.total(),
        q.to_cluster(),
        q.list,
        q.trash_list,
        q.get_size,
        q.open
    )
}

fn main() {
    let n: usize = arg("--images", 10_000);
    let features: String = arg("--features", "layering".to_string());
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let workers: usize = arg("--workers", cores.clamp(2, 8));
    assert!(n >= 100, "--images must be at least 100");
    let load_start = loadavg();
    let cluster_name = "bench-cluster";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rss_start = rss();

    // ---- Ceph and the images --------------------------------------------------------------
    // ~80 KiB per layering image and ~180 KiB with rbd's default features, in the OSD's memory.
    let memstore = (1u64 << 30).max(n as u64 * 400 * 1024);
    let t = Instant::now();
    let ceph = Ceph::start(memstore);
    let up = t.elapsed();
    let pool = ceph.var("CEPH_POOL").to_string();
    let fsid = ceph.var("CEPH_FSID").to_string();
    eprintln!("census: ceph up in {:.1} s", up.as_secs_f64());
    let names: Vec<String> = (0..n)
        .map(|i| format!("{}{}", rbd::CSI_VOLUME_PREFIX, uuid(i)))
        .collect();
    let made = make_images(&ceph, &names, &features, workers, cluster_name);
    eprintln!(
        "census: {n} images made in {:.1} s ({workers} python3-rbd workers, {:.1} ms/image)",
        made.as_secs_f64(),
        ms(made) / n as f64
    );
    let live_idx: Vec<usize> = (0..n).filter(|&i| kind(i) != Kind::Trashed).collect();
    let n_live = live_idx.len();
    let n_trash = n - n_live;
    let n_owned = (0..n).filter(|&i| kind(i) == Kind::Owned).count();
    let all_live: HashSet<String> = live_idx.iter().map(|&i| names[i].clone()).collect();
    // The unreferenced images: 1% and 10% of N, picked at random among the live ones.
    let mut shuffled = live_idx.clone();
    shuffle(&mut shuffled);
    let unreferenced = |pct: usize| -> HashSet<String> {
        shuffled[..n * pct / 100]
            .iter()
            .map(|&i| names[i].clone())
            .collect()
    };
    let (unref1, unref10) = (unreferenced(1), unreferenced(10));
    let referenced_but =
        |u: &HashSet<String>| -> HashSet<String> { all_live.difference(u).cloned().collect() };
    let (ref1, ref10) = (referenced_but(&unref1), referenced_but(&unref10));

    // ---- the library and the connection ---------------------------------------------------
    let rss_before_dlopen = rss();
    let version = rbd::library_version().expect("librbd");
    let rss_after_dlopen = rss();
    let config = CephConfig {
        mon_host: ceph.var("CEPH_MON_HOST").to_string(),
        user: ceph.var("CEPH_RO_USER").to_string(),
        keyring: Some(ceph.var("CEPH_RO_KEYRING").into()),
        key: None,
        conf_file: None,
        timeout: Duration::from_secs(10),
    };
    let t = Instant::now();
    let cluster = Cluster::connect(&config).expect("connect as the read-only user");
    let connect_time = t.elapsed();
    let rss_after_connect = rss();

    // ---- the operator's path: a Census holding two snapshots ------------------------------
    let yaml = format!(
        "clusterName: {cluster_name}\nclusters:\n  - clusterID: {fsid}\n    monitors: [\"{}\"]\n    user: {}\n    keyring: {}\n    pools: [{{name: {pool}}}]\n",
        config.mon_host,
        config.user,
        ceph.var("CEPH_RO_KEYRING")
    );
    let heap0 = live();
    let rss0 = rss();
    let t = Instant::now();
    let census_config = CensusConfig::parse(&yaml).expect("census config");
    let image_grace = Duration::from_secs(3600);
    let mut census = census_config.census(image_grace);
    let setup_time = t.elapsed();
    let key = Scope::from(PoolKey::new(&fsid, &pool, None));
    let mut of_time = Duration::ZERO;
    let mut record_time = Duration::ZERO;
    let mut first = None;
    reset_peak();
    for _ in 0..2 {
        let at = wall_clock();
        let c = cluster
            .census(&pool, None, |n| ask(&ref1, &n.name))
            .expect("census");
        if first.is_none() {
            first = Some((c.requests, c.timings.total));
        }
        let t = Instant::now();
        let s = snapshot_of(c, at);
        of_time += t.elapsed();
        let t = Instant::now();
        census.record(&key, Ok(s));
        record_time += t.elapsed();
    }
    let heap_peak_census = peak() - heap0;
    let heap_two = live() - heap0;
    let rss_two = rss();
    let (first_requests, first_time) = first.unwrap();

    // image() for every PV source: the referenced images (present or in the trash) and 1% of
    // N naming images that never existed.
    let pool_id = census
        .scope_state(&key)
        .expect("the pool is censused")
        .current
        .as_ref()
        .unwrap()
        .scope_id
        .unwrap();
    let source = |name: &str, uuid: &str| VolumeSourceInfo {
        kind: "csi".into(),
        driver: Some(RBD_CSI_DRIVER.into()),
        volume_handle: Some(format!(
            "0001-{:04x}-{fsid}-{pool_id:016x}-{uuid}",
            fsid.len()
        )),
        cluster_id: Some(fsid.clone()),
        pool: Some(pool.clone()),
        image_name: Some(name.to_string()),
        ..VolumeSourceInfo::default()
    };
    let mut sources: Vec<VolumeSourceInfo> = (0..n)
        .filter(|&i| !unref1.contains(&names[i]))
        .map(|i| source(&names[i], &uuid(i)))
        .collect();
    for i in n..n + n / 100 {
        sources.push(source(
            &format!("{}{}", rbd::CSI_VOLUME_PREFIX, uuid(i)),
            &uuid(i),
        ));
    }
    let volume_created = Time(jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1));
    let t = Instant::now();
    let mut answers: BTreeMap<&str, usize> = BTreeMap::new();
    let mut referenced: HashSet<String> = HashSet::new();
    for s in &sources {
        let r = image_ref(s).expect("an RBD image");
        let a = match census.image(&r.clone().into(), Some(&volume_created)) {
            ImageFound::Present { .. } => "present",
            ImageFound::Missing { in_trash: true } => "missing, in the trash",
            ImageFound::Missing { in_trash: false } => "missing",
            ImageFound::Unknown => "unknown",
            ImageFound::NotCensused => "not censused",
        };
        *answers.entry(a).or_default() += 1;
        referenced.insert(r.name);
    }
    let image_time = t.elapsed();
    let now = Time(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2));
    let t = Instant::now();
    let findings = census.orphans(&key, &referenced, &now);
    let orphans_time = t.elapsed();
    let n_findings = findings.len();
    let with_owner = findings
        .iter()
        .filter(|f| f.status.image.as_ref().is_some_and(|i| i.owner.is_some()))
        .count();
    drop(findings);

    // ---- census timings --------------------------------------------------------------------
    let (a, a_times) = censuses(&cluster, &pool, &all_live, 9, false);
    let rss_a = rss();
    let (sized, sized_times) = censuses(&cluster, &pool, &all_live, 3, true);
    assert_eq!(sized.requests.get_size as usize, n_live, "a size per image");
    let (b1, b1_times) = censuses(&cluster, &pool, &ref1, 3, true);
    let rss_b1 = rss();
    let (b10, b10_times) = censuses(&cluster, &pool, &ref10, 3, true);
    let rss_b10 = rss();
    let threads = proc_kib("self", "Threads:");
    assert_eq!(a.images.len(), n_live, "images listed");
    assert_eq!(a.trash.len(), n_trash, "trash entries listed");
    assert_eq!(b1.requests.open as usize, unref1.len());
    assert_eq!(b10.requests.open as usize, unref10.len());
    let b10_owned = b10
        .images
        .iter()
        .filter(|i| matches!(&i.detail, rbd::Detail::Read(d) if d.csi_owner().is_some()))
        .count();

    // scan's path: connect, census (1% details), record; a new connection each time.
    let settings = CensusSettings {
        config: census_config.clone(),
        interval: Duration::from_secs(600),
        image_grace,
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(600),
    };
    let details: HashMap<Scope, HashSet<String>> = [(key.clone(), unref1.clone())].into();
    let mut scan_census = census_config.census(image_grace);
    let t = Instant::now();
    let mut listers = volume_leftovers::census::listers(&settings);
    let reports = rt.block_on(listers[0].list(Reading::Details(&details)));
    for r in &reports {
        scan_census.record(&r.key, r.result.clone().map_err(|f| f.message));
    }
    drop(listers);
    let scan_time = t.elapsed();
    assert!(
        reports.iter().all(|r| r.result.is_ok()),
        "scan's third listing"
    );
    let scan_requests: u64 = reports.iter().map(|r| r.requests).sum();
    drop(scan_census);

    let osd_pid = ceph.var("CEPH_OSD_PID").to_string();
    let mon_pid = ceph.var("CEPH_MON_PID").to_string();
    let (osd_rss, mon_rss) = (proc_kib(&osd_pid, "VmRSS:"), proc_kib(&mon_pid, "VmRSS:"));
    let load_end = loadavg();
    let hwm_end = hwm();

    // ---- figures ---------------------------------------------------------------------------
    let line = |what: &str, times: Vec<Duration>, c: &PoolCensus| {
        let (m, lo, hi) = median(times);
        println!(
            "  {what:<44} {:>8.1} ms  ({:>6.1}-{:>6.1})  {}",
            ms(m),
            ms(lo),
            ms(hi),
            calls(c)
        );
    };
    println!(
        "census: {n} images in pool {pool}: {n_live} listed ({n_owned} with ceph-csi metadata), {n_trash} in the trash; features {features}; 1 mon + 1 memstore OSD on 127.0.0.1"
    );
    println!(
        "machine: {cores} cores, load average {load_start} at start, {load_end} at end; librbd {version}"
    );
    println!(
        "setup (not a figure): up.sh {:.1} s, images made in {:.1} s by {workers} python3-rbd processes",
        up.as_secs_f64(),
        made.as_secs_f64()
    );
    println!(
        "census as the read-only user (timeout 10 s)         median      (min-max)      calls (to the cluster)"
    );
    line("names only: every image referenced [9 runs]", a_times, &a);
    line(
        "sizes: every image referenced [3 runs]",
        sized_times,
        &sized,
    );
    line(
        &format!("details of 1% ({} unreferenced) [3 runs]", unref1.len()),
        b1_times,
        &b1,
    );
    line(
        &format!("details of 10% ({} unreferenced) [3 runs]", unref10.len()),
        b10_times,
        &b10,
    );
    println!(
        "  per image: listing {:.2} µs; size {:.0} µs per image (one rbd.get_size); detail {:.2} ms per opened image (10%: {b10_owned} of them with ceph-csi metadata)",
        a.timings.total.as_secs_f64() * 1e6 / n_live as f64,
        sized.timings.detail.as_secs_f64() * 1e6 / n_live as f64,
        // The sizes of the referenced images read in the same pass, taken out at their own rate.
        (b10.timings.detail.as_secs_f64()
            - sized.timings.detail.as_secs_f64() * (n_live - unref10.len()) as f64 / n_live as f64)
            * 1e3
            / unref10.len() as f64
    );
    println!(
        "  parts of the last names-only census: list {:.1} ms, trash {:.1} ms",
        ms(a.timings.list),
        ms(a.timings.trash)
    );
    println!(
        "  first census on a new connection (1%): {:.1} ms, {} calls ({} to the cluster; rbd_list2 {}x, trash {}x)",
        ms(first_time),
        first_requests.total(),
        first_requests.to_cluster(),
        first_requests.list,
        first_requests.trash_list
    );
    println!(
        "  connect (rados_connect as client.{}): {:.1} ms; scan's third listing (connect + census 1% + record): {:.1} ms, {scan_requests} calls",
        config.user,
        ms(connect_time),
        ms(scan_time)
    );
    println!("operator's pure steps");
    println!(
        "  CensusConfig::parse + CensusConfig::census: {:.1} µs; snapshot_of x2: {:.1} ms; Census::record x2: {:.1} ms",
        setup_time.as_secs_f64() * 1e6,
        ms(of_time),
        ms(record_time)
    );
    println!(
        "  image() for {} PV sources (image_ref + answer): {:.1} ms ({:.2} µs/PV): {answers:?}",
        sources.len(),
        ms(image_time),
        image_time.as_secs_f64() * 1e6 / sources.len() as f64
    );
    println!(
        "  orphans() with {} referenced: {:.1} ms, {} findings ({with_owner} with ceph-csi metadata)",
        referenced.len(),
        ms(orphans_time),
        n_findings
    );
    println!("memory of this process");
    println!(
        "  RSS: at start {:.1} MiB, before dlopen {:.1} MiB, after dlopen {:.1} MiB (+{:.1}), after connect {:.1} MiB (+{:.1})",
        mib_kib(rss_start),
        mib_kib(rss_before_dlopen),
        mib_kib(rss_after_dlopen),
        mib_kib(rss_after_dlopen.saturating_sub(rss_before_dlopen)),
        mib_kib(rss_after_connect),
        mib_kib(rss_after_connect.saturating_sub(rss_after_dlopen))
    );
    println!(
        "  Census with two snapshots of {n_live} images + {n_trash} trash entries: heap +{:.2} MiB ({:.0} B/image, {:.0} B/image/snapshot), RSS {:.1} -> {:.1} MiB (+{:.1})",
        mib(heap_two),
        heap_two as f64 / n_live as f64,
        heap_two as f64 / n_live as f64 / 2.0,
        mib_kib(rss0),
        mib_kib(rss_two),
        mib_kib(rss_two.saturating_sub(rss0))
    );
    println!(
        "  heap peak while censusing into it: +{:.2} MiB ({:.0} B/image); size_of::<Seen>() {} B; VmHWM at the end {:.1} MiB, VmRSS {:.1} MiB",
        mib(heap_peak_census),
        heap_peak_census as f64 / n_live as f64,
        std::mem::size_of::<Seen>(),
        mib_kib(hwm_end),
        mib_kib(rss())
    );
    println!(
        "  RSS after the censuses: names only {:.1} MiB, 1% details {:.1} MiB, 10% details {:.1} MiB (Rust heap live at the end {:.1} MiB, {threads} threads)",
        mib_kib(rss_a),
        mib_kib(rss_b1),
        mib_kib(rss_b10),
        mib(live())
    );
    println!(
        "ceph daemons: OSD RSS {:.0} MiB ({:.0} KiB per image beyond an idle 43 MiB), mon RSS {:.0} MiB",
        mib_kib(osd_rss),
        osd_rss.saturating_sub(43 * 1024) as f64 / n as f64,
        mib_kib(mon_rss)
    );
    drop(census);
    drop(cluster);
    drop(ceph);
}
