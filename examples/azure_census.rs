//! Azure census benchmark: what the census costs for 10,000 managed disks in one resource group,
//! against the project's own ARM test server (tests/fake-azure-arm/server.py, every answer
//! validated against `azure-mgmt-compute`'s models; NOT Microsoft's), over TLS.
//!
//!   cargo run --release --example azure_census -- [--disks N] [--runs R] [--page P]
//!
//! N disks (default 10,000) as the Azure Disk CSI driver makes them, P a page (default 1,000:
//! what Resource Manager returns of disks), a tenth attached, two thirds with the driver's
//! created-for tags, a seventh tagged with another cluster. Each run lists them twice:
//!
//! - raw: the paged GETs alone (a bearer token fetched once, each page's body read and
//!   dropped): what the listing costs on the wire and on the server (which validates each page);
//! - census: the operator's code: `ArmClient::list` (azure_identity's token, azure_core's
//!   pipeline, every page parsed and checked), the report (`disks_report_of`) and the decisions
//!   the loop makes for it (`census_result`, 90% of the disks named by a PV), twice, then
//!   `Census::image` for every PV.
//!
//! Prints figures (wall, requests, this process's CPU and Rust heap), asserts nothing about time.
//! The server listens on 127.0.0.1 only and is stopped at the end.

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use volume_leftovers::census::azure::arm::{ArmClient, ArmConfig, Credential, Kind};
use volume_leftovers::census::azure::census::disks_report_of;
use volume_leftovers::census::azure::facts::Attribution;
use volume_leftovers::census::config::CensusConfig;
use volume_leftovers::census::disk_ref;
use volume_leftovers::decide::census_result::{CensusState, Naming, census_result};
use volume_leftovers::engine::clock::wall_clock;
use volume_leftovers::model::crd::VolumeSourceInfo;

const TENANT: &str = "72f988bf-0000-0000-0000-00000000feed";
const CLIENT: &str = "11111111-2222-3333-4444-555555555555";
const SECRET: &str = "s3cret";
const SUB: &str = "00000000-0000-0000-0000-0000000bench";
const RG: &str = "MC_bench_aks_westeurope";

// ---- heap accounting (Rust allocations of this process) ----------------------------------

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by as isize, Ordering::Relaxed) + by as isize;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        // SAFETY: the caller's contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        grew(new);
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn mib(bytes: isize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// CPU time (user + system) of this process, in /proc's 10 ms ticks.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    Duration::from_millis((f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) * 10)
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

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The ARM test server, stopped on drop.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn disk(i: usize) -> Value {
    let name = format!("pvc-{i:08}-0000-4000-8000-000000000000");
    let mut tags = json!({"k8s-azure-created-by": "kubernetes-azure-dd"});
    if !i.is_multiple_of(3) {
        tags["kubernetes.io-created-for-pv-name"] = json!(name);
        tags["kubernetes.io-created-for-pvc-name"] = json!(format!("data-{i}"));
        tags["kubernetes.io-created-for-pvc-namespace"] = json!(format!("team-{}", i % 50));
    }
    if i.is_multiple_of(7) {
        tags["cluster"] = json!("another-cluster");
    }
    let mut d = json!({
        "name": name, "location": "westeurope", "zones": [((i % 3) + 1).to_string()],
        "sku": {"name": if i.is_multiple_of(2) { "Premium_LRS" } else { "StandardSSD_LRS" }, "tier": "Standard"},
        "tags": tags,
        "properties": {
            "creationData": {"createOption": "Empty"},
            "diskSizeGB": 10, "diskSizeBytes": 10737418240u64,
            "diskState": if i.is_multiple_of(10) { "Attached" } else { "Unattached" },
            "timeCreated": "2026-03-01T10:00:00.1234567+00:00",
            "provisioningState": "Succeeded",
            "uniqueId": format!("{i:08}-aaaa-4bbb-8ccc-dddddddddddd"),
        },
    });
    if i.is_multiple_of(10) {
        d["managedBy"] = json!(format!(
            "/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachines/node-{}",
            i % 40
        ));
    }
    d
}

fn start(n: usize, page: usize) -> Server {
    let out = Command::new(repo().join("scripts/azure-python.sh"))
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/azure-python.sh");
    assert!(out.status.success(), "scripts/azure-python.sh failed");
    let py = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let dir = std::env::temp_dir().join(format!("azure-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let state = json!({
        "tenant": TENANT,
        "clients": {CLIENT: {"secret": SECRET}},
        "pageSize": page,
        "subscriptions": {SUB: {RG: {"disks": (0..n).map(disk).collect::<Vec<_>>()}}},
    });
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    std::fs::write(dir.join("secret"), SECRET).unwrap();
    let mut child = Command::new(py)
        .arg(repo().join("tests/fake-azure-arm/server.py"))
        .arg("--state")
        .arg(dir.join("state.json"))
        .arg("--tls-dir")
        .arg(dir.join("tls"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("server.py");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("server.py did not start: {line:?}"))
        .parse()
        .unwrap();
    Server { child, port, dir }
}

fn config(s: &Server) -> ArmConfig {
    let url = format!("https://127.0.0.1:{}", s.port);
    ArmConfig {
        subscription: SUB.into(),
        credential: Credential::ClientSecret {
            tenant_id: TENANT.into(),
            client_id: CLIENT.into(),
            secret_file: s.dir.join("secret"),
        },
        authority_host: Some(url.clone()),
        endpoint: url,
        ca_file: Some(s.dir.join("tls/ca.pem")),
        attempt_timeout: Duration::from_secs(60),
        retries: 0,
        backoff: Duration::from_secs(1),
        deadline: Duration::from_secs(600),
    }
}

/// A page's link alone.
#[derive(serde::Deserialize)]
struct Link {
    #[serde(rename = "nextLink", default)]
    next_link: Option<String>,
}

/// The paged GETs alone: pages read and dropped.
async fn raw(s: &Server) -> (Duration, u64) {
    let url = format!("https://127.0.0.1:{}", s.port);
    let pem = std::fs::read(s.dir.join("tls/ca.pem")).unwrap();
    let http = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap();
    let token: Value = serde_json::from_slice(
        &http
            .post(format!("{url}/{TENANT}/oauth2/v2.0/token"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "client_id={CLIENT}&client_secret={SECRET}&grant_type=client_credentials&scope=https%3A%2F%2Fmanagement.azure.com%2F.default"
            ))
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap(),
    )
    .unwrap();
    let bearer = format!("Bearer {}", token["access_token"].as_str().unwrap());
    let t = Instant::now();
    let mut next = Some(format!(
        "{url}/subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/disks?api-version=2024-03-02"
    ));
    let mut pages = 0;
    while let Some(link) = next.take() {
        let body = http
            .get(&link)
            .header("authorization", &bearer)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        pages += 1;
        // Only the link: the items are skipped, not read.
        let l: Link = serde_json::from_slice(&body).unwrap();
        next = l.next_link;
    }
    (t.elapsed(), pages)
}

fn main() {
    let n: usize = arg("--disks", 10_000);
    let runs: usize = arg("--runs", 3);
    let page: usize = arg("--page", 1_000);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    eprintln!("azure_census: starting the ARM test server with {n} disks");
    let server = start(n, page);
    let key = volume_leftovers::census::azure::vocabulary::resource_group(SUB, RG);
    let attribution = Attribution {
        cluster_tag: Some("cluster".into()),
        node_resource_group: true,
        ours: Some("bench".into()),
    };
    // 90% of the disks named by a PV (by its CSI handle), and a PV per 100 whose disk is gone.
    let pvs: Vec<(String, VolumeSourceInfo)> = (0..n)
        .filter(|i| i % 10 != 9)
        .map(|i| format!("pvc-{i:08}-0000-4000-8000-000000000000"))
        .chain((0..n / 100).map(|i| format!("gone-{i}")))
        .map(|name| {
            let s = VolumeSourceInfo {
                kind: "csi".into(),
                driver: Some("disk.csi.azure.com".into()),
                volume_handle: Some(format!(
                    "/subscriptions/{SUB}/resourceGroups/{}/providers/Microsoft.Compute/disks/{name}",
                    RG.to_ascii_lowercase()
                )),
                ..VolumeSourceInfo::default()
            };
            (name, s)
        })
        .collect();
    let census_config = CensusConfig::parse(&format!(
        "clusterName: bench\nazure:\n  - subscription: {SUB}\n    resourceGroups: [{RG}]\n    nodeResourceGroup: true\n    clusterTag: cluster\n"
    ))
    .unwrap();
    println!(
        "azure census of {n} disks in one resource group, {page} a page, {runs} runs (load before: {})",
        loadavg()
    );
    for run in 1..=runs {
        let (raw_wall, raw_pages) = rt.block_on(raw(&server));
        let mut state = CensusState::new(census_config.census(Duration::from_secs(3600)));
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let (cpu0, t) = (cpu(), Instant::now());
        let client = ArmClient::new(config(&server)).expect("client");
        let mut pages = 0;
        let mut findings = 0;
        let mut listing_wall = Duration::ZERO;
        for _ in 0..2 {
            let (started, at) = (Instant::now(), wall_clock());
            let listing = rt.block_on(client.list(RG, Kind::Disks));
            listing_wall += started.elapsed();
            pages += listing.pages;
            let report = disks_report_of(key.clone(), listing, &attribution, at, started.elapsed());
            let now = Time(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2));
            let naming = Naming {
                volumes: pvs
                    .iter()
                    .map(|(name, s)| (name.clone(), disk_ref(s)))
                    .collect(),
                ..Naming::default()
            };
            census_result(
                &mut state,
                &report.key,
                report.result.map_err(|e| (e.kind, e.message)),
                &now,
                || &naming,
            );
            findings = state.orphans.len();
        }
        let created = Time(jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24));
        let missing = pvs
            .iter()
            .filter(|(_, s)| {
                matches!(
                    state.census.image(&disk_ref(s).unwrap(), Some(&created)),
                    volume_leftovers::model::image::ImageFound::Missing { .. }
                )
            })
            .count();
        let wall = t.elapsed();
        let cpu = cpu() - cpu0;
        let peak = PEAK.load(Ordering::Relaxed) - before;
        drop(client);
        println!(
            "run {run}: raw paged GETs {:.0} ms ({raw_pages} pages); census {:.0} ms for two listings and their decisions (a listing {:.0} ms, {:.2}x raw; {pages} pages), CPU here {:.0} ms ({:.1} µs a disk a listing), heap peak +{:.1} MiB; {findings} DiskWithoutVolume, {missing} VolumeWithoutDisk",
            raw_wall.as_secs_f64() * 1e3,
            wall.as_secs_f64() * 1e3,
            listing_wall.as_secs_f64() * 1e3 / 2.0,
            listing_wall.as_secs_f64() / 2.0 / raw_wall.as_secs_f64(),
            cpu.as_secs_f64() * 1e3,
            cpu.as_secs_f64() * 1e6 / (2 * n) as f64,
            mib(peak),
        );
        drop(state);
    }
    println!("load after: {}", loadavg());
}
