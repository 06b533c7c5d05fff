//! The Azure census's Resource Manager client against the project's own ARM test server
//! (tests/fake-azure-arm/server.py: not Microsoft's; no emulator of Resource Manager exists).
//!
//! The real crates (`azure_identity`'s credentials, `azure_core`'s pipeline) talk to it over
//! TLS on 127.0.0.1 (they refuse plain HTTP), trusting the CA the server made: the token
//! endpoint checks what each credential sends; every list answer is validated against the
//! `azure-mgmt-compute` wheel's models before it is sent. The server's Python comes from
//! scripts/azure-python.sh, cached by its pins.
//!
//! The server cannot be started (no python3, no PyPI) → with `CI=true` every test fails with
//! the reason; elsewhere it says so and passes without checking anything.

#![cfg(feature = "azure")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use volume_leftovers::census::CensusFailure;
use volume_leftovers::census::azure::arm::{ArmClient, ArmConfig, Credential, GroupListing, Kind};
use volume_leftovers::model::listing::FailureCategory;

const TENANT: &str = "72f988bf-0000-0000-0000-00000000feed";
const CLIENT: &str = "11111111-2222-3333-4444-555555555555";
const FEDERATED_CLIENT: &str = "66666666-7777-8888-9999-000000000000";
const FEDERATED_TOKEN: &str = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln";
const SUB: &str = "00000000-0000-0000-0000-00000000a0b1";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The server's interpreter, or why there is none.
fn python() -> Result<&'static PathBuf, String> {
    static PY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new(repo().join("scripts/azure-python.sh"))
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("scripts/azure-python.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!("scripts/azure-python.sh failed: {}", out.status));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A real part that cannot be had: a failure in CI, a loud pass elsewhere.
fn unavailable(why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("the ARM test server cannot be started (CI=true, so this fails): {why}");
    }
    eprintln!("SKIPPED: the ARM test server cannot be started: {why}");
}

/// A running ARM test server; stopped on drop.
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
        let py = match python() {
            Ok(p) => p,
            Err(e) => {
                unavailable(&e);
                return None;
            }
        };
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "fake-azure-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
        std::fs::write(dir.join("secret"), "s3cret\n").unwrap();
        std::fs::write(dir.join("federated-token"), FEDERATED_TOKEN).unwrap();
        let mut child = match Command::new(py)
            .arg(repo().join("tests/fake-azure-arm/server.py"))
            .arg("--state")
            .arg(dir.join("state.json"))
            .arg("--tls-dir")
            .arg(dir.join("tls"))
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

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A configuration for this server: the client secret, its CA, short bounds.
    fn config(&self) -> ArmConfig {
        ArmConfig {
            subscription: SUB.into(),
            credential: Credential::ClientSecret {
                tenant_id: TENANT.into(),
                client_id: CLIENT.into(),
                secret_file: self.dir.join("secret"),
            },
            authority_host: Some(self.url()),
            endpoint: self.url(),
            ca_file: Some(self.dir.join("tls/ca.pem")),
            attempt_timeout: Duration::from_secs(2),
            retries: 2,
            backoff: Duration::from_millis(50),
            deadline: Duration::from_secs(6),
        }
    }

    /// Requests per path the server has had (`/token` for the token endpoint's).
    fn requests(&self) -> BTreeMap<String, u64> {
        let rt = runtime();
        let pem = std::fs::read(self.dir.join("tls/ca.pem")).unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
            .build()
            .unwrap();
        rt.block_on(async {
            let body = client
                .get(format!("{}/_fake/requests", self.url()))
                .send()
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap();
            serde_json::from_slice(&body).unwrap()
        })
    }

    /// The requests to the list of `kind` of `rg`.
    fn requests_to(&self, rg: &str, kind: &str) -> u64 {
        let path = format!(
            "/subscriptions/{SUB}/resourcegroups/{}/providers/microsoft.compute/{kind}",
            rg.to_ascii_lowercase()
        );
        self.requests().get(&path).copied().unwrap_or(0)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn list(config: ArmConfig, rg: &str, kind: Kind) -> GroupListing {
    runtime().block_on(async {
        let client = ArmClient::new(config).expect("a client");
        client.list(rg, kind).await
    })
}

/// A disk as the Azure Disk CSI driver makes it.
fn disk(name: &str, state: &str) -> Value {
    json!({
        "name": name, "location": "westeurope", "zones": ["1"],
        "sku": {"name": "StandardSSD_LRS", "tier": "Standard"},
        "tags": {
            "k8s-azure-created-by": "kubernetes-azure-dd",
            "kubernetes.io-created-for-pv-name": name,
            "kubernetes.io-created-for-pvc-name": "data",
            "kubernetes.io-created-for-pvc-namespace": "shop",
        },
        "properties": {
            "creationData": {"createOption": "Empty"},
            "diskSizeGB": 10, "diskSizeBytes": 10737418240u64, "diskState": state,
            "timeCreated": "2026-03-01T10:00:00.1234567+00:00",
            "provisioningState": "Succeeded",
            "uniqueId": format!("uid-{name}"),
        },
    })
}

/// A snapshot; the driver's when `by_driver`.
fn snapshot(name: &str, by_driver: bool) -> Value {
    let mut tags = json!({"owner": "someone"});
    if by_driver {
        tags = json!({
            "k8s-azure-created-by": "kubernetes-azure-dd",
            "source_volume_id": format!("/subscriptions/{SUB}/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-1"),
            "kubernetes.io-created-for-snapshot-name": "nightly",
            "kubernetes.io-created-for-snapshot-namespace": "shop",
        });
    }
    json!({
        "name": name, "location": "westeurope",
        "sku": {"name": "Standard_ZRS", "tier": "Standard"}, "tags": tags,
        "properties": {
            "creationData": {"createOption": "Copy"},
            "diskSizeGB": 10, "timeCreated": "2026-03-01T10:00:00+00:00",
            "provisioningState": "Succeeded", "incremental": true,
        },
    })
}

fn world(groups: Value, errors: Value) -> Value {
    json!({
        "tenant": TENANT,
        "clients": {CLIENT: {"secret": "s3cret"}, FEDERATED_CLIENT: {"federatedToken": FEDERATED_TOKEN}},
        "pageSize": 2,
        "subscriptions": {SUB: groups},
        "errors": errors,
    })
}

fn names(l: &GroupListing) -> Vec<String> {
    let mut n: Vec<String> = l
        .result
        .as_ref()
        .expect("a complete listing")
        .iter()
        .map(|d| d.key.clone())
        .collect();
    n.sort();
    n
}

/// The failure of a listing that must have failed: its category and line, checked for what
/// every failure line is (one line, bounded, not the answer's body).
fn failure(l: &GroupListing) -> (FailureCategory, String) {
    let f: &CensusFailure = l.result.as_ref().expect_err("a failed listing");
    let line = f.to_string();
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.chars().count() <= 300, "bounded: {line}");
    assert!(!line.contains("\"error\""), "not the body: {line}");
    eprintln!("failure line: {line}");
    (f.kind.category(), line)
}

#[test]
fn disks_and_snapshots_are_listed_across_pages_with_a_client_secret() {
    let groups = json!({
        "MC_prod_aks_westeurope": {
            "disks": [disk("PVC-A", "Unattached"), disk("pvc-b", "Attached"), disk("pvc-c", "Reserved"),
                      disk("pvc-d", "Unattached"), disk("pvc-e", "Unattached")],
            "snapshots": [snapshot("snapshot-1", true), snapshot("snapshot-2", true), snapshot("by-hand", false)],
        },
    });
    let Some(fake) = Fake::start(world(groups, json!({}))) else {
        return;
    };
    // The resource group in another case than the state's: ARM's names are case-insensitive.
    let l = list(fake.config(), "mc_PROD_aks_westeurope", Kind::Disks);
    assert_eq!(names(&l), ["pvc-a", "pvc-b", "pvc-c", "pvc-d", "pvc-e"]);
    assert_eq!(l.pages, 3, "five disks, two a page");
    let a = &l.result.as_ref().unwrap()[0];
    assert_eq!(
        a.name, "PVC-A",
        "spelled as ARM spells it, keyed lower-cased"
    );
    assert_eq!(a.size_bytes, 10 << 30);
    assert_eq!(a.location, "westeurope");
    assert_eq!(a.state.as_deref(), Some("Unattached"));
    assert_eq!(a.id, "uid-PVC-A");
    assert_eq!(fake.requests_to("mc_prod_aks_westeurope", "disks"), 3);

    let s = list(fake.config(), "MC_prod_aks_westeurope", Kind::Snapshots);
    assert_eq!(
        names(&s),
        ["by-hand", "snapshot-1", "snapshot-2"],
        "the client lists all; the lister keeps the driver's"
    );
    assert_eq!(s.pages, 2);
    assert_eq!(
        fake.requests().get("/token").copied(),
        Some(2),
        "one token per client: the token endpoint saw the secret"
    );
}

#[test]
fn workload_identity_signs_in_with_the_federated_token() {
    let groups = json!({"rg": {"disks": [disk("pvc-a", "Unattached")]}});
    let Some(fake) = Fake::start(world(groups, json!({}))) else {
        return;
    };
    let mut config = fake.config();
    config.credential = Credential::Workload {
        tenant_id: Some(TENANT.into()),
        client_id: Some(FEDERATED_CLIENT.into()),
        token_file: Some(fake.dir.join("federated-token")),
    };
    assert_eq!(names(&list(config.clone(), "rg", Kind::Disks)), ["pvc-a"]);

    std::fs::write(fake.dir.join("federated-token"), "not.the.token").unwrap();
    let (category, line) = failure(&list(config, "rg", Kind::Disks));
    assert_eq!(category, FailureCategory::Auth, "{line}");
    assert!(line.contains("AADSTS700213"), "Entra's own words: {line}");
}

#[test]
fn refusals_and_outages_fail_their_group_with_their_category() {
    let groups = json!({
        "forbidden": {"disks": [disk("pvc-a", "Unattached")]},
        "throttled": {"disks": [disk("pvc-a", "Unattached")]},
        "broken": {"disks": [disk("pvc-a", "Unattached")]},
        "hanging": {"disks": [disk("pvc-a", "Unattached")]},
    });
    let errors = json!({
        format!("{SUB}/forbidden/disks"): {"status": 403},
        format!("{SUB}/throttled/disks"): {"status": 429, "retryAfter": 1, "times": 2},
        format!("{SUB}/broken/disks"): {"status": 500},
        format!("{SUB}/hanging/disks"): {"hang": 30},
    });
    let Some(fake) = Fake::start(world(groups, errors)) else {
        return;
    };
    let (category, line) = failure(&list(fake.config(), "forbidden", Kind::Disks));
    assert_eq!(category, FailureCategory::Forbidden, "{line}");
    assert!(
        line.contains("AuthorizationFailed (HTTP 403)")
            && line.contains("Microsoft.Compute/disks/read"),
        "ARM's code and message, naming the action: {line}"
    );
    assert_eq!(
        fake.requests_to("forbidden", "disks"),
        1,
        "a 403 is not retried"
    );

    let started = Instant::now();
    let l = list(fake.config(), "throttled", Kind::Disks);
    assert_eq!(names(&l), ["pvc-a"], "two 429s, then the answer");
    assert_eq!(fake.requests_to("throttled", "disks"), 3);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "Retry-After honoured: {:?}",
        started.elapsed()
    );

    let (category, line) = failure(&list(fake.config(), "broken", Kind::Disks));
    assert_eq!(category, FailureCategory::Server, "{line}");
    assert_eq!(fake.requests_to("broken", "disks"), 3, "retried twice");

    let started = Instant::now();
    let (category, line) = failure(&list(fake.config(), "hanging", Kind::Disks));
    assert_eq!(category, FailureCategory::Timeout, "{line}");
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "bounded by the deadline (6 s): {:?}",
        started.elapsed()
    );

    let (category, line) = failure(&list(fake.config(), "no-such-group", Kind::Disks));
    assert_eq!(category, FailureCategory::Other, "{line}");
    assert!(line.contains("ResourceGroupNotFound (HTTP 404)"), "{line}");

    let mut wrong = fake.config();
    std::fs::write(fake.dir.join("secret"), "wrong").unwrap();
    wrong.deadline = Duration::from_secs(4);
    let (category, line) = failure(&list(wrong, "forbidden", Kind::Disks));
    assert_eq!(category, FailureCategory::Auth, "{line}");
    assert!(line.contains("AADSTS7000215"), "Entra's own words: {line}");
}

#[test]
fn a_slow_token_endpoint_leaves_the_group_unknown_within_the_deadline() {
    let groups = json!({"rg": {"disks": [disk("pvc-a", "Unattached")]}});
    let mut state = world(groups, json!({}));
    state["tokenDelay"] = json!(30);
    let Some(fake) = Fake::start(state) else {
        return;
    };
    let mut config = fake.config();
    config.attempt_timeout = Duration::from_secs(1);
    config.deadline = Duration::from_secs(4);
    let started = Instant::now();
    let (category, line) = failure(&list(config, "rg", Kind::Disks));
    assert!(
        matches!(category, FailureCategory::Timeout),
        "{category:?}: {line}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn bad_answers_fail_their_group_saying_why() {
    let mut no_location = disk("pvc-x", "Unattached");
    no_location.as_object_mut().unwrap().remove("location");
    let mut no_size = disk("pvc-y", "Unattached");
    no_size["properties"] = json!({"diskState": "Unattached"});
    let groups = json!({
        "looping": {"disks": [disk("pvc-a", "Unattached"), disk("pvc-b", "Unattached"), disk("pvc-c", "Unattached")]},
        "nolocation": {"disks": [no_location]},
        "nosize": {"disks": [no_size]},
        "shape": {"disks": [{"name": "pvc-z", "location": "westeurope", "properties": {"diskSizeGB": "ten"}}]},
        "rejected": {"disks": [{"name": "pvc-z", "location": "westeurope", "properties": {"diskSizeGB": "10"}}]},
    });
    let errors = json!({
        format!("{SUB}/looping/disks"): {"repeatNextLink": true},
        format!("{SUB}/nolocation/disks"): {"unvalidated": true},
        format!("{SUB}/nosize/disks"): {"unvalidated": true},
        format!("{SUB}/shape/disks"): {"unvalidated": true},
    });
    let Some(fake) = Fake::start(world(groups, errors)) else {
        return;
    };
    for (rg, why) in [
        ("looping", "nextLink repeats a page already read"),
        ("nolocation", "disk pvc-x has no location"),
        ("nosize", "disk pvc-y has no size"),
        ("shape", "a bad answer: not a page of disks"),
        // What the models reject, the server refuses to send (500, naming the violation).
        ("rejected", "diskSizeGB: expected int"),
    ] {
        let (category, line) = failure(&list(fake.config(), rg, Kind::Disks));
        assert!(line.contains(why), "{rg}: {line}");
        assert!(
            matches!(category, FailureCategory::Other | FailureCategory::Server),
            "{rg}: {category:?}"
        );
    }
    assert_eq!(
        fake.requests_to("looping", "disks"),
        2,
        "the repeated link is not followed"
    );
}

#[test]
fn the_servers_validator_rejects_what_the_models_do_not_allow() {
    let py = match python() {
        Ok(p) => p,
        Err(e) => return unavailable(&e),
    };
    let validate = |body: &Value| {
        let mut child = Command::new(py)
            .arg(repo().join("tests/fake-azure-arm/server.py"))
            .args(["--validate", "DiskList"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(body.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let mut good = disk("pvc-a", "Unattached");
    good["id"] =
        json!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/disks/pvc-a");
    assert!(validate(&json!({"value": [good]})).0);
    for (bad, why) in [
        (
            json!({"value": [{"name": "d", "location": "x", "properties": {"diskSizeGB": "10"}}]}),
            "expected int",
        ),
        (
            json!({"value": [{"name": "d", "location": "x", "properties": {"sizeGb": 10}}]}),
            "sizeGb",
        ),
        (json!({"value": [{"name": "d"}]}), "location"),
        (
            json!({"value": [{"name": "d", "location": "x", "properties": {"diskState": "unattached"}}]}),
            "unattached",
        ),
        (json!({"items": []}), "value"),
    ] {
        let (ok, stderr) = validate(&bad);
        assert!(!ok, "accepted: {bad}");
        assert!(stderr.contains(why), "{why}: {stderr}");
    }
}
