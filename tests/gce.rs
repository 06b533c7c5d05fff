//! The GCE census against the project's own Compute Engine test server
//! (tests/fake-gce-compute/server.py: not Google's; no emulator of the Compute API exists).
//!
//! The real clients (`google-cloud-compute-v1`, `google-cloud-auth`) talk to it over HTTP on
//! 127.0.0.1: a service-account key the server generated signs each request's JWT, which the
//! server verifies; every answer it gives is validated against Google's discovery document for
//! compute v1 before it is sent. The server's Python (with `cryptography` and the discovery
//! document) comes from scripts/gce-python.sh, cached by its pins.
//!
//! The server cannot be started (no python3, no PyPI) → with `CI=true` every test fails with
//! the reason; elsewhere it says so and passes without checking anything.

#![cfg(feature = "gce")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use volume_leftovers::census::CensusReport;
use volume_leftovers::census::gce::census::{reports_of, snapshots_report_of};
use volume_leftovers::census::gce::{
    CredentialSource, ErrorCategory, GceConfig, GceLister, Location, Locations, ProjectListing,
};

const PROJECT: &str = "p-shared";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The server's interpreter and the discovery document, or why there are none.
fn python() -> Result<&'static (PathBuf, PathBuf), String> {
    static PY: OnceLock<Result<(PathBuf, PathBuf), String>> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new(repo().join("scripts/gce-python.sh"))
            .stderr(Stdio::inherit())
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
        Ok((py, PathBuf::from(String::from_utf8_lossy(&doc.stdout).trim())))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A real part that cannot be had: a failure in CI, a loud pass elsewhere.
fn unavailable(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the fake Compute server cannot be started (CI=true, so this fails): {why}");
    }
    eprintln!("SKIPPED: the fake Compute server cannot be started: {why}");
}

/// A running fake Compute server; stopped on drop.
struct Fake {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fake {
    /// Starts a server holding `state`; `None` when it cannot (see [`unavailable`]).
    fn start(state: Value) -> Option<Fake> {
        let (py, doc) = match python() {
            Ok(p) => p,
            Err(e) => {
                unavailable(&e);
                return None;
            }
        };
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "fake-gce-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let state_file = dir.join("state.json");
        std::fs::File::create(&state_file)
            .unwrap()
            .write_all(state.to_string().as_bytes())
            .unwrap();
        let mut child = match Command::new(py)
            .arg(repo().join("tests/fake-gce-compute/server.py"))
            .arg("--discovery")
            .arg(doc)
            .arg("--state")
            .arg(&state_file)
            .arg("--write-keys")
            .arg(dir.join("keys"))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        {
            Ok(c) => c,
            Err(e) => {
                unavailable(&format!("spawning server.py: {e}"));
                return None;
            }
        };
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        let port = match (read, line.trim().strip_prefix("listening ")) {
            (Ok(_), Some(p)) => p.parse().unwrap(),
            _ => {
                let _ = child.kill();
                unavailable(&format!("server.py did not start: {line:?}"));
                return None;
            }
        };
        Some(Fake { child, port, dir })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// A configuration for this server with the trusted key and short bounds.
    fn config(&self, locations: Locations) -> GceConfig {
        GceConfig {
            locations,
            credentials: CredentialSource::KeyFile(self.dir.join("keys/key.json")),
            endpoint: Some(self.endpoint()),
            attempt_timeout: Duration::from_secs(2),
            attempts: 3,
            backoff: Duration::from_millis(50),
            deadline: Duration::from_secs(8),
            page_size: 500,
            ..GceConfig::new(PROJECT)
        }
    }

    /// Requests per path the server has had.
    fn requests(&self) -> BTreeMap<String, u64> {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET /_fake/requests HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        std::io::Read::read_to_string(&mut s, &mut body).unwrap();
        let json = body.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(json).unwrap()
    }

    /// Replaces the state the running server answers from (written beside, renamed over).
    fn set_state(&self, state: &Value) {
        let tmp = self.dir.join("state.json.tmp");
        std::fs::write(&tmp, state.to_string()).unwrap();
        std::fs::rename(&tmp, self.dir.join("state.json")).unwrap();
    }

    fn requests_to(&self, suffix: &str) -> u64 {
        let path = format!("/compute/v1/projects/{PROJECT}/{suffix}");
        self.requests().get(&path).copied().unwrap_or(0)
    }
}

fn zonal(zone: &str, name: &str, id: u64) -> Value {
    json!({
        "zone": zone, "name": name, "id": id.to_string(), "sizeGb": "10", "type": "pd-balanced",
        "creationTimestamp": "2026-03-01T10:00:00.000-08:00", "status": "READY",
        "labels": {"goog-k8s-cluster-name": "prod"},
    })
}

/// The seed's disk: a regional PD the CSI driver made for default/pvc2, its PV gone.
fn regional(region: &str, name: &str, id: u64) -> Value {
    json!({
        "region": region, "name": name, "id": id.to_string(), "sizeGb": "20", "type": "pd-ssd",
        "replicaZones": [format!("{region}-a"), format!("{region}-b")],
        "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
        "lastDetachTimestamp": "2026-03-02T09:30:00.000-08:00", "status": "READY",
        "description": json!({
            "kubernetes.io/created-for/pv/name": name,
            "kubernetes.io/created-for/pvc/name": "pvc2",
            "kubernetes.io/created-for/pvc/namespace": "default",
            "storage.gke.io/created-by": "pd.csi.storage.gke.io",
        }).to_string(),
    })
}

/// Names of each scope's disks; an error as `Err(category)`.
fn names(l: &ProjectListing) -> BTreeMap<String, Result<Vec<String>, ErrorCategory>> {
    l.scopes
        .iter()
        .map(|s| {
            (
                s.scope.location.to_string(),
                s.result
                    .as_ref()
                    .map(|d| {
                        let mut n: Vec<String> = d.iter().map(|d| d.name.clone()).collect();
                        n.sort();
                        n
                    })
                    .map_err(|e| e.category),
            )
        })
        .collect()
}

/// The longest failure line the operator logs and `scan` prints (`census::LINE_BOUND`).
const LINE_BOUND: usize = 300;

/// The failures' lines of `reports`, by scope, as the operator logs them and `scan` prints
/// them, checked for what every failure line is: one line, bounded, neither the client's own
/// wording ("the service reports an error with code … described as") nor the answer's body.
fn failure_lines(reports: Vec<CensusReport>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in reports {
        let Err(f) = r.result else { continue };
        let line = f.to_string();
        assert!(!line.contains('\n'), "one line: {line}");
        assert!(line.chars().count() <= LINE_BOUND, "bounded: {line}");
        for raw in ["described as", "\"error\"", "Status {", "Error {"] {
            assert!(!line.contains(raw), "{raw:?} in {line}");
        }
        out.insert(r.key.to_string(), line);
    }
    out
}

/// A listing's failure lines by scope (see [`failure_lines`]).
fn listing_lines(l: &ProjectListing) -> BTreeMap<String, String> {
    let at = Time(jiff::Timestamp::UNIX_EPOCH);
    let mut known = Default::default();
    failure_lines(reports_of(
        l.clone(),
        PROJECT,
        &mut known,
        at,
        Duration::ZERO,
    ))
}

fn ok(names: &[&str]) -> Result<Vec<String>, ErrorCategory> {
    Ok(names.iter().map(|s| s.to_string()).collect())
}

fn world() -> Value {
    json!({
        "project": PROJECT,
        "zones": ["us-central1-a", "us-central1-b", "europe-west1-b"],
        "regions": ["us-central1", "europe-west1"],
        "disks": [
            zonal("us-central1-a", "pvc-a1", 11),
            zonal("us-central1-a", "pvc-a2", 12),
            zonal("us-central1-a", "pvc-a3", 13),
            zonal("us-central1-b", "pvc-b1", 21),
            regional("us-central1", "pvc-r1", 31),
            regional("us-central1", "pvc-r2", 32),
            {"zone": "us-central1-b", "name": "attached-boot", "id": "41", "sizeGb": "50",
             "type": "pd-standard", "creationTimestamp": "2025-01-01T00:00:00.000+00:00",
             "users": ["https://www.googleapis.com/compute/v1/projects/p-shared/zones/us-central1-b/instances/vm-1"],
             "labels": {"goog-k8s-cluster-name": "other-cluster"}},
        ],
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn aggregated_sees_zonal_and_regional_disks_across_pages() {
    let Some(fake) = Fake::start(world()) else {
        return;
    };
    let mut config = fake.config(Locations::All);
    config.page_size = 2;
    let listing =
        runtime().block_on(async { GceLister::new(config).await.expect("client").list().await });
    assert_eq!(
        names(&listing),
        BTreeMap::from([
            ("regions/europe-west1".into(), ok(&[])),
            ("regions/us-central1".into(), ok(&["pvc-r1", "pvc-r2"])),
            ("zones/europe-west1-b".into(), ok(&[])),
            (
                "zones/us-central1-a".into(),
                ok(&["pvc-a1", "pvc-a2", "pvc-a3"])
            ),
            (
                "zones/us-central1-b".into(),
                ok(&["attached-boot", "pvc-b1"])
            ),
        ])
    );
    // 7 disks, 2 a page: 4 pages, each one request.
    assert_eq!(listing.pages, 4);
    assert_eq!(fake.requests_to("aggregated/disks"), 4);
    let disks: Vec<_> = listing
        .scopes
        .iter()
        .flat_map(|s| s.result.clone().unwrap())
        .collect();
    let r1 = disks.iter().find(|d| d.name == "pvc-r1").unwrap();
    assert_eq!(r1.location, Location::Region("us-central1".into()));
    assert_eq!(r1.replica_zones, ["us-central1-a", "us-central1-b"]);
    assert_eq!(r1.size_bytes, 20 << 30);
    assert_eq!(r1.disk_type, "pd-ssd");
    assert_eq!(r1.id, 31);
    assert_eq!(r1.created_for.pv_name.as_deref(), Some("pvc-r1"));
    assert_eq!(r1.created_for.pvc_name.as_deref(), Some("pvc2"));
    assert_eq!(r1.created_for.pvc_namespace.as_deref(), Some("default"));
    assert_eq!(r1.cluster, None, "no cluster label: nobody is named");
    assert!(r1.last_detach.is_some() && r1.users.is_empty());
    let boot = disks.iter().find(|d| d.name == "attached-boot").unwrap();
    assert_eq!(boot.users.len(), 1, "attached");
    assert_eq!(boot.cluster.as_deref(), Some("other-cluster"));
}

#[test]
fn per_location_lists_see_their_own_disks_across_pages() {
    let Some(fake) = Fake::start(world()) else {
        return;
    };
    let mut config = fake.config(Locations::Only {
        zones: vec!["us-central1-a".into(), "europe-west1-b".into()],
        regions: vec!["us-central1".into()],
    });
    config.page_size = 1;
    let listing = runtime().block_on(async { GceLister::new(config).await.unwrap().list().await });
    assert_eq!(
        names(&listing),
        BTreeMap::from([
            ("regions/us-central1".into(), ok(&["pvc-r1", "pvc-r2"])),
            ("zones/europe-west1-b".into(), ok(&[])),
            (
                "zones/us-central1-a".into(),
                ok(&["pvc-a1", "pvc-a2", "pvc-a3"])
            ),
        ]),
        "the zone's list has no regional disk; the region's has them"
    );
    // us-central1-a: 3 pages of one; the region 2; the empty zone 1.
    assert_eq!(fake.requests_to("zones/us-central1-a/disks"), 3);
    assert_eq!(fake.requests_to("regions/us-central1/disks"), 2);
    assert_eq!(fake.requests_to("zones/europe-west1-b/disks"), 1);
    assert_eq!(listing.pages, 6);
}

#[test]
fn a_failing_scope_is_unknown_with_its_category_and_the_others_are_complete() {
    let mut state = world();
    state["zones"] = json!([
        "us-central1-a",
        "us-central1-b",
        "europe-west1-b",
        "asia-east1-a"
    ]);
    state["errors"] = json!({
        "zones/us-central1-b": {"status": 403, "message": "Required 'compute.disks.list' permission for 'projects/p-shared'"},
        "zones/europe-west1-b": {"status": 429},
        "zones/asia-east1-a": {"status": 500},
        "regions/europe-west1": {"hang": 60},
    });
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let mut config = fake.config(Locations::Only {
        zones: vec![
            "us-central1-a".into(),
            "us-central1-b".into(),
            "europe-west1-b".into(),
            "asia-east1-a".into(),
        ],
        regions: vec!["us-central1".into(), "europe-west1".into()],
    });
    config.page_size = 2;
    config.attempt_timeout = Duration::from_secs(1);
    config.attempts = 2;
    config.deadline = Duration::from_secs(5);
    let started = Instant::now();
    let listing = runtime().block_on(async { GceLister::new(config).await.unwrap().list().await });
    let took = started.elapsed();
    assert_eq!(
        names(&listing),
        BTreeMap::from([
            ("regions/europe-west1".into(), Err(ErrorCategory::Timeout)),
            ("regions/us-central1".into(), ok(&["pvc-r1", "pvc-r2"])),
            ("zones/asia-east1-a".into(), Err(ErrorCategory::Server)),
            ("zones/europe-west1-b".into(), Err(ErrorCategory::Quota)),
            (
                "zones/us-central1-a".into(),
                ok(&["pvc-a1", "pvc-a2", "pvc-a3"])
            ),
            ("zones/us-central1-b".into(), Err(ErrorCategory::Forbidden)),
        ])
    );
    let forbidden = listing
        .scopes
        .iter()
        .find(|s| s.scope.location == Location::Zone("us-central1-b".into()))
        .unwrap();
    assert!(
        forbidden
            .result
            .as_ref()
            .unwrap_err()
            .message
            .contains("compute.disks.list"),
        "the service's message: {forbidden:?}"
    );
    // What a person reads of each: Compute's status name, the HTTP status and Compute's own
    // message (naming the missing permission), each once; without an answer, what failed.
    let lines = listing_lines(&listing);
    assert_eq!(
        lines["gce:p-shared/us-central1-b"],
        "listing the disks of projects/p-shared/zones/us-central1-b: PERMISSION_DENIED \
         (HTTP 403): Required 'compute.disks.list' permission for 'projects/p-shared'"
    );
    assert_eq!(
        lines["gce:p-shared/europe-west1-b"],
        "listing the disks of projects/p-shared/zones/europe-west1-b: RESOURCE_EXHAUSTED \
         (HTTP 429): injected 429 for zones/europe-west1-b"
    );
    assert_eq!(
        lines["gce:p-shared/asia-east1-a"],
        "listing the disks of projects/p-shared/zones/asia-east1-a: INTERNAL (HTTP 500): \
         injected 500 for zones/asia-east1-a"
    );
    assert!(
        lines["gce:p-shared/europe-west1"].starts_with(
            "listing the disks of projects/p-shared/regions/europe-west1: timed out: "
        ),
        "{lines:?}"
    );
    assert_eq!(lines.len(), 4, "{lines:?}");
    // Retried with backoff where it may pass, not where it cannot; bounded.
    assert_eq!(fake.requests_to("zones/us-central1-b/disks"), 1, "403");
    assert_eq!(fake.requests_to("zones/europe-west1-b/disks"), 2, "429");
    assert_eq!(fake.requests_to("zones/asia-east1-a/disks"), 2, "500");
    assert_eq!(fake.requests_to("regions/europe-west1/disks"), 2, "hang");
    // The hanging region costs its two attempts of 1 s, not the server's 60 s.
    assert!(took < Duration::from_secs(6), "took {took:?}");
}

#[test]
fn the_aggregated_listing_fails_as_a_whole_or_per_unreachable_scope() {
    let mut state = world();
    state["unreachable"] = json!(["zones/europe-west1-b"]);
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let mut config = fake.config(Locations::All);
    config.page_size = 3;
    let listing = runtime().block_on(async { GceLister::new(config).await.unwrap().list().await });
    let n = names(&listing);
    assert_eq!(n["zones/europe-west1-b"], Err(ErrorCategory::Server));
    assert_eq!(n["regions/us-central1"], ok(&["pvc-r1", "pvc-r2"]));
    assert_eq!(n.len(), 5);

    let mut state = world();
    state["errors"] = json!({"aggregated": {"status": 500}});
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let listing = runtime().block_on(async {
        GceLister::new(fake.config(Locations::All))
            .await
            .unwrap()
            .list()
            .await
    });
    assert_eq!(
        names(&listing),
        BTreeMap::from([("all locations".into(), Err(ErrorCategory::Server))]),
        "nothing is known of any scope"
    );
}

/// The tests change a running server's world by rewriting its state file: the next request
/// answers from the new one; a file that is no state is a 500 (Server), until it is one again.
#[test]
fn the_server_answers_from_its_state_file_as_it_is_now() {
    let Some(fake) = Fake::start(world()) else {
        return;
    };
    let rt = runtime();
    let lister = rt
        .block_on(GceLister::new(fake.config(Locations::All)))
        .unwrap();
    let region = |l: &ProjectListing| names(l)["regions/us-central1"].clone();
    assert_eq!(
        region(&rt.block_on(lister.list())),
        ok(&["pvc-r1", "pvc-r2"])
    );

    let mut state = world();
    state["disks"]
        .as_array_mut()
        .unwrap()
        .retain(|d| d["name"] != "pvc-r2");
    fake.set_state(&state);
    assert_eq!(region(&rt.block_on(lister.list())), ok(&["pvc-r1"]));

    std::fs::write(fake.dir.join("state.json"), "{\"project\": ").unwrap();
    assert_eq!(
        names(&rt.block_on(lister.list())),
        BTreeMap::from([("all locations".into(), Err(ErrorCategory::Server))])
    );
    fake.set_state(&world());
    assert_eq!(
        region(&rt.block_on(lister.list())),
        ok(&["pvc-r1", "pvc-r2"])
    );
}

#[test]
fn a_jwt_the_server_does_not_trust_is_an_auth_error() {
    let Some(fake) = Fake::start(world()) else {
        return;
    };
    // The same account and key id, signed with another key.
    let mut config = fake.config(Locations::Only {
        zones: vec!["us-central1-a".into()],
        regions: vec!["us-central1".into()],
    });
    config.credentials = CredentialSource::KeyFile(fake.dir.join("keys/foreign-key.json"));
    let listing = runtime().block_on(async { GceLister::new(config).await.unwrap().list().await });
    assert_eq!(
        names(&listing),
        BTreeMap::from([
            ("regions/us-central1".into(), Err(ErrorCategory::Auth)),
            ("zones/us-central1-a".into(), Err(ErrorCategory::Auth)),
        ])
    );
    let lines = listing_lines(&listing);
    assert!(
        lines["gce:p-shared/us-central1-a"].starts_with(
            "listing the disks of projects/p-shared/zones/us-central1-a: UNAUTHENTICATED \
             (HTTP 401): Invalid Credentials: "
        ),
        "{lines:?}"
    );
    // Not retried: a refused key stays refused.
    assert_eq!(fake.requests_to("zones/us-central1-a/disks"), 1);
}

#[test]
fn the_servers_validator_rejects_what_the_discovery_document_does_not_allow() {
    let (py, doc) = match python() {
        Ok(p) => p,
        Err(e) => return unavailable(&e),
    };
    let validate = |schema: &str, body: Value| -> bool {
        let mut c = Command::new(py)
            .arg(repo().join("tests/fake-gce-compute/server.py"))
            .arg("--discovery")
            .arg(doc)
            .args(["--validate", schema])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(body.to_string().as_bytes())
            .unwrap();
        c.wait().unwrap().success()
    };
    let good = json!({"kind": "compute#diskAggregatedList", "items": {
        "zones/z": {"disks": [{"name": "d", "id": "1", "sizeGb": "10", "labels": {"a": "b"}}]},
        "regions/r": {"warning": {"code": "NO_RESULTS_ON_PAGE", "message": "none",
                                  "data": [{"key": "scope", "value": "regions/r"}]}}}});
    assert!(validate("DiskAggregatedList", good));
    for (why, bad) in [
        (
            "int64 as a number",
            json!({"items": {"zones/z": {"disks": [{"name": "d", "sizeGb": 10}]}}}),
        ),
        (
            "an unknown field",
            json!({"items": {"zones/z": {"disks": [{"name": "d", "sizeGB": "10"}]}}}),
        ),
        (
            "items as a list",
            json!({"items": [{"disks": [{"name": "d"}]}]}),
        ),
        (
            "an unknown warning code",
            json!({"items": {"zones/z": {"warning": {"code": "EMPTY"}}}}),
        ),
        (
            "labels not strings",
            json!({"items": {"zones/z": {"disks": [{"labels": {"a": 1}}]}}}),
        ),
    ] {
        assert!(!validate("DiskAggregatedList", bad), "{why} was accepted");
    }
    assert!(!validate("DiskList", json!({"items": {"zones/z": {}}})));
}

/// A snapshot the PD CSI driver cut of `disk` for the VolumeSnapshot `shop/<name>`.
fn csi_snapshot(name: &str, id: u64, disk: &str) -> Value {
    json!({
        "name": name, "id": id.to_string(), "diskSizeGb": "20", "status": "READY",
        "storageBytes": "1048576", "creationTimestamp": "2026-03-03T10:00:00.000-08:00",
        "sourceDisk": disk, "labels": {"goog-k8s-cluster-name": "prod"},
        "description": json!({
            "kubernetes.io/created-for/volumesnapshot/name": format!("vs-{name}"),
            "kubernetes.io/created-for/volumesnapshot/namespace": "shop",
            "kubernetes.io/created-for/volumesnapshotcontent/name": format!("snapcontent-{id}"),
            "storage.gke.io/created-by": "pd.csi.storage.gke.io",
        }).to_string(),
    })
}

#[test]
fn only_the_csi_drivers_snapshots_are_listed_across_pages() {
    let mut state = world();
    state["snapshots"] = json!([
        csi_snapshot("snapshot-1", 51, "regions/us-central1/disks/pvc-r1"),
        {"name": "nightly-by-hand", "id": "52", "diskSizeGb": "10", "status": "READY",
         "description": "a backup made by hand", "sourceDisk": "zones/us-central1-a/disks/pvc-a1"},
        csi_snapshot("snapshot-2", 53, "zones/us-central1-a/disks/pvc-a1"),
        {"name": "scheduled", "id": "54", "diskSizeGb": "10", "status": "READY"},
        csi_snapshot("snapshot-3", 55, "zones/us-central1-b/disks/pvc-b1"),
    ]);
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let mut config = fake.config(Locations::All);
    config.page_size = 2;
    let listing =
        runtime().block_on(async { GceLister::new(config).await.unwrap().list_snapshots().await });
    let snapshots = listing.result.expect("a listing");
    let names: Vec<&str> = snapshots.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["snapshot-1", "snapshot-2", "snapshot-3"]);
    assert_eq!(listing.pages, 3, "five snapshots, two a page");
    assert_eq!(fake.requests_to("global/snapshots"), 3);
    let s = &snapshots[0];
    assert_eq!(s.id, 51);
    assert_eq!(s.size_bytes, 20 << 30);
    assert_eq!(
        s.source_disk.as_deref(),
        Some("projects/p-shared/regions/us-central1/disks/pvc-r1")
    );
    assert_eq!(s.cluster.as_deref(), Some("prod"));
    assert_eq!(s.created_for.pv_name.as_deref(), Some("snapcontent-51"));
    assert_eq!(s.created_for.pvc_name.as_deref(), Some("vs-snapshot-1"));
    assert_eq!(s.created_for.pvc_namespace.as_deref(), Some("shop"));
    assert_eq!(
        snapshots[1].source_disk.as_deref(),
        Some("projects/p-shared/zones/us-central1-a/disks/pvc-a1")
    );
}

#[test]
fn a_403_on_the_snapshots_is_forbidden_and_the_disks_still_list() {
    let mut state = world();
    state["snapshots"] = json!([csi_snapshot(
        "snapshot-1",
        51,
        "zones/us-central1-a/disks/pvc-a1"
    )]);
    state["errors"] = json!({
        "global/snapshots": {"status": 403, "message": "Required 'compute.snapshots.list' permission for 'projects/p-shared'"},
    });
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let (snapshots, disks) = runtime().block_on(async {
        let lister = GceLister::new(fake.config(Locations::All)).await.unwrap();
        (lister.list_snapshots().await, lister.list().await)
    });
    let err = snapshots.result.clone().expect_err("forbidden");
    assert_eq!(err.category, ErrorCategory::Forbidden, "{err}");
    assert!(err.message.contains("compute.snapshots.list"), "{err}");
    let at = Time(jiff::Timestamp::UNIX_EPOCH);
    let report = snapshots_report_of(snapshots, PROJECT, at, Duration::ZERO);
    assert_eq!(
        failure_lines(vec![report]),
        BTreeMap::from([(
            "gce:p-shared/snapshots".to_string(),
            "listing the snapshots of projects/p-shared: PERMISSION_DENIED (HTTP 403): \
             Required 'compute.snapshots.list' permission for 'projects/p-shared'"
                .to_string()
        )])
    );
    assert_eq!(
        fake.requests_to("global/snapshots"),
        1,
        "a 403 is not retried"
    );
    assert!(disks.scopes.iter().all(|s| s.result.is_ok()), "{disks:?}");
}
