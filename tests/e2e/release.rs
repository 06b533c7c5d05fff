//! A release a cluster can pull (issue 29): `scripts/release.sh` (`make release`) with `REGISTRY`
//! set to a real OCI registry started here (Debian's docker-registry, the CNCF distribution
//! server, on 127.0.0.1 with its storage in a temporary directory), then the chart installed
//! **from that registry** (`helm install oci://…`) onto a real node whose containerd **pulls the
//! image from it** (a hosts.toml for the plain-HTTP registry in the node's containerd config_path;
//! no `ctr import`):
//!
//! - the artifacts are all there and SHA256SUMS verifies; the image's digest in the registry is
//!   the OCI layout's, the pods run it by that digest, and the registry's access log shows
//!   containerd fetching it; both pods Ready; the mariadb leftover reported;
//! - the plugin archive unpacks to an executable `kubectl-leftovers` whose `--version` names the
//!   revision, kubectl lists it as a plugin and `kubectl leftovers -o name` prints the finding;
//!   the krew manifest names the archive's sha256 and the download URL made from `RELEASE_URL`;
//! - a registry that is stopped, that refuses pushes (read-only) or that never answers a push
//!   ends the release with one error line and a non-zero exit, within a bound.
//!
//! Needs root, the release binary (`VL_RELEASE_BINARY`) and node/build.sh's components, as
//! node.rs; takes its turn with node.rs's tests. When the registry, the node or the release
//! cannot be built or started, the tests fail (never skip). Run alone:
//! `cargo test --test e2e release:: -- --nocapture --test-threads=1`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::Value;

use crate::node::{self, Cluster, NAME, NS};
use crate::support::*;

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// What RELEASE_URL the release is told: the krew manifest's uri must be this + the archive.
const RELEASE_URL: &str = "https://downloads.example.com/volume-leftovers/v0.1.0";

fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "release: {line}");
}

fn archive() -> String {
    format!("kubectl-leftovers-v{VERSION}-linux-amd64.tar.gz")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

// --- the registry ----------------------------------------------------------------------------

/// Debian's docker-registry (`docker-registry serve CONFIG`) on 127.0.0.1, storage and log in its
/// own directory, stopped when dropped (and by a watchdog when this process dies first); the
/// directory is removed then, unless the test is failing.
struct Registry {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Registry {
    fn start(read_only: bool) -> Result<Registry, String> {
        let ensure = Command::new(repo().join("scripts/ensure-tools.sh"))
            .arg("docker-registry")
            .output()
            .map_err(|e| format!("running scripts/ensure-tools.sh docker-registry: {e}"))?;
        if !ensure.status.success() {
            return Err(format!(
                "scripts/ensure-tools.sh docker-registry: {}",
                text(&ensure)
            ));
        }
        static N: AtomicU32 = AtomicU32::new(0);
        // Named so that scripts/test.sh's check for leftover processes finds it.
        let dir = node::tmp().join(format!(
            "registry-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("storage")).map_err(|e| e.to_string())?;
        let port = free_port();
        let config = dir.join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\n\
                 log:\n  level: info\n  accesslog:\n    disabled: false\n\
                 storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n  \
                 maintenance:\n    uploadpurging:\n      enabled: false\n    readonly:\n      enabled: {read_only}\n\
                 http:\n  addr: 127.0.0.1:{port}\n",
                dir.join("storage").display()
            ),
        )
        .map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("registry.log")).map_err(|e| e.to_string())?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("starting docker-registry serve: {e}"))?;
        // Stops it when this process dies without dropping it (a killed test run).
        let _ = Command::new("bash")
            .args([
                "-c",
                r#"while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done; kill "$2" 2>/dev/null"#,
                "registry-watchdog",
            ])
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut registry = Registry {
            child: Some(child),
            port,
            dir,
        };
        let t = Instant::now();
        loop {
            if let Some((200, _)) = http_get(&format!("http://{}/v2/", registry.addr())) {
                return Ok(registry);
            }
            let exited = registry
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || t.elapsed() > Duration::from_secs(20) {
                return Err(format!(
                    "docker-registry serve {} ({}) did not answer /v2/ within {:?}:\n{}",
                    config.display(),
                    exited.map_or("running".into(), |s| s.to_string()),
                    t.elapsed(),
                    registry.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn start_or_fail(read_only: bool) -> Registry {
        Self::start(read_only).unwrap_or_else(|e| {
            panic!("the registry could not be started (tests never skip):\n{e}")
        })
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The digest the registry serves for `repository:tag` (an OCI or Docker manifest).
    fn digest(&self, repository: &str, tag: &str) -> String {
        let out = Command::new("curl")
            .args(["-sS", "-I", "--max-time", "10", "-H"])
            .arg("Accept: application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
            .arg(format!(
                "http://{}/v2/{repository}/manifests/{tag}",
                self.addr()
            ))
            .output()
            .expect("curl");
        let head = String::from_utf8_lossy(&out.stdout);
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("docker-content-digest")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no digest for {repository}:{tag}: {head}"))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            note(&format!(
                "last lines of {}/registry.log:",
                self.dir.display()
            ));
            for l in tail.iter().rev() {
                note(&format!("  {l}"));
            }
            self.stop();
        } else {
            // What was pushed (tens of MB) goes with a passing test.
            self.stop();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

// --- the release script ------------------------------------------------------------------------

/// The release binary the tests ship (as node.rs and image.rs).
fn release_binary() -> PathBuf {
    match std::env::var_os("VL_RELEASE_BINARY") {
        Some(b) if Path::new(&b).is_file() => PathBuf::from(b),
        b => panic!(
            "VL_RELEASE_BINARY ({b:?}) is not the release binary: run `cargo build --release` and \
             set it to the binary it made (scripts/test.sh does both; tests never skip)"
        ),
    }
}

/// scripts/release.sh into `dir`, pushing to `registry` (plain HTTP), killed after `bound`:
/// (exit status or None when killed, stdout, stderr, how long it took).
fn release(
    dir: &Path,
    registry: &str,
    push_timeout: u32,
    bound: Duration,
) -> (Option<i32>, String, String, Duration) {
    let helm_home = dir.with_extension("helm-home");
    let t = Instant::now();
    let mut child = Command::new(repo().join("scripts/release.sh"))
        // A group of its own, so that a release that overruns its bound goes with its children.
        .process_group(0)
        .env("VL_BINARY", release_binary())
        .env("VL_RELEASE_DIR", dir)
        .env("REGISTRY", registry)
        .env("REGISTRY_PLAIN_HTTP", "1")
        .env("RELEASE_URL", RELEASE_URL)
        .env("VL_PUSH_TIMEOUT", push_timeout.to_string())
        // helm's registry configuration and caches: the test's own, not the user's.
        .env("HELM_CONFIG_HOME", helm_home.join("config"))
        .env("HELM_CACHE_HOME", helm_home.join("cache"))
        .env("HELM_DATA_HOME", helm_home.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running scripts/release.sh");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for release.sh") {
            break s.code();
        }
        if t.elapsed() > bound {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let took = t.elapsed();
    (
        status,
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
        took,
    )
}

/// A release into a registry that will not take it: a non-zero exit within `bound`, and exactly
/// one line of the script's own (`release.sh: …`) saying which registry and why. Returns it.
fn assert_refused(what: &str, registry: &str, push_timeout: u32, bound: Duration) -> String {
    let dir = node::tmp().join(format!("release-refused-{}-{what}", std::process::id()));
    let (status, _, stderr, took) = release(&dir, registry, push_timeout, bound);
    assert!(
        status.is_some(),
        "{what}: release.sh still ran after {bound:?} (killed); it said:\n{stderr}"
    );
    assert_ne!(status, Some(0), "{what}: release.sh succeeded:\n{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("release.sh:"))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "{what}: one error line, not {errors:?}; all it said:\n{stderr}"
    );
    assert!(
        errors[0].contains(registry),
        "{what}: the error names the registry {registry}: {}",
        errors[0]
    );
    note(&format!(
        "{what}: exit {} in {}: {}",
        status.unwrap(),
        node::secs(took),
        errors[0]
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("helm-home"));
    errors[0].to_string()
}

// --- the artifacts ---------------------------------------------------------------------------------

/// Every artifact is there, SHA256SUMS covers each file and verifies, the plugin archive and the
/// krew manifest are what a user installs. Returns the directory the plugin was unpacked into.
fn check_artifacts(dir: &Path, unpack: &Path) -> PathBuf {
    let names: std::collections::BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".lock")
        .collect();
    let archive = archive();
    for want in [
        "oci".to_string(),
        format!("volume-leftovers-{VERSION}.tar"),
        "image.json".to_string(),
        format!("volume-leftovers-{VERSION}.tgz"),
        archive.clone(),
        format!("{archive}.sha256"),
        "leftovers.yaml".to_string(),
        "SHA256SUMS".to_string(),
    ] {
        assert!(names.contains(&want), "{want} is not in {names:?}");
    }
    let check = Command::new("sha256sum")
        .args(["--check", "--strict", "SHA256SUMS"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(check.status.success(), "sha256sum -c: {}", text(&check));
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    let listed: std::collections::BTreeSet<&str> = sums
        .lines()
        .filter_map(|l| l.split_once("  ").map(|(_, f)| f))
        .collect();
    for n in names
        .iter()
        .filter(|n| *n != "SHA256SUMS" && !n.starts_with("push-"))
    {
        if n == "oci" {
            assert!(
                listed.contains("oci/index.json")
                    && listed.iter().any(|f| f.starts_with("oci/blobs/")),
                "the OCI layout's files are in SHA256SUMS: {listed:?}"
            );
        } else {
            assert!(listed.contains(n.as_str()), "{n} is not in SHA256SUMS");
        }
    }

    // The archive's checksum file, and the krew manifest.
    let sha = {
        let out = Command::new("sha256sum")
            .arg(dir.join(&archive))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        std::fs::read_to_string(dir.join(format!("{archive}.sha256"))).unwrap(),
        format!("{sha}  {archive}\n")
    );
    let manifest: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("leftovers.yaml")).unwrap())
            .expect("leftovers.yaml is YAML");
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "leftovers");
    assert_eq!(manifest["spec"]["version"], format!("v{VERSION}"));
    assert!(manifest["spec"]["shortDescription"].is_string());
    let platforms = manifest["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 1, "{platforms:?}");
    let p = &platforms[0];
    assert_eq!(
        p["selector"]["matchLabels"],
        serde_json::json!({"os": "linux", "arch": "amd64"})
    );
    assert_eq!(
        p["sha256"],
        sha.as_str(),
        "the manifest's sha256 is the archive's"
    );
    assert_eq!(p["uri"], format!("{RELEASE_URL}/{archive}"));
    assert_eq!(p["bin"], "kubectl-leftovers");

    // The archive unpacks to an executable kubectl-leftovers (and its licence).
    let _ = std::fs::remove_dir_all(unpack);
    std::fs::create_dir_all(unpack).unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(dir.join(&archive))
        .arg("-C")
        .arg(unpack)
        .output()
        .unwrap();
    assert!(untar.status.success(), "tar -xzf: {}", text(&untar));
    let mut files: Vec<String> = std::fs::read_dir(unpack)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["LICENSE", "kubectl-leftovers"]);
    let plugin = unpack.join("kubectl-leftovers");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&plugin).unwrap().permissions().mode() & 0o777,
        0o755
    );
    // The same version line as the binary it was made from, naming a revision.
    let version = |bin: &Path| {
        let out = Command::new(bin).arg("--version").output().unwrap();
        assert!(
            out.status.success(),
            "{} --version: {}",
            bin.display(),
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let shipped = version(&plugin);
    assert_eq!(shipped, version(&release_binary()));
    let revision = shipped
        .strip_suffix(')')
        .and_then(|s| s.rsplit_once("(revision "))
        .map(|(_, r)| r)
        .unwrap_or_else(|| panic!("no revision in {shipped:?}"));
    assert!(
        revision.len() == 12 && revision.bytes().all(|b| b.is_ascii_hexdigit()),
        "kubectl-leftovers --version names a git revision: {shipped:?}"
    );
    note(&format!(
        "artifacts: {names:?}; SHA256SUMS verifies; {archive} (sha256 {}…, as leftovers.yaml says) \
         unpacks to kubectl-leftovers: {shipped}",
        &sha[..12]
    ));
    unpack.to_path_buf()
}

// --- the tests -------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_published_to_a_registry_installs_and_pulls_on_a_real_node() {
    let _turn = node::node_turn().await;
    let started = Instant::now();
    let registry = Registry::start_or_fail(false);
    let addr = registry.addr();

    // --- make release REGISTRY=127.0.0.1:PORT -------------------------------------------------
    let dir = node::tmp().join(format!("release-{}", std::process::id()));
    let (status, stdout, stderr, took) = release(&dir, &addr, 120, Duration::from_secs(600));
    assert_eq!(
        status,
        Some(0),
        "scripts/release.sh REGISTRY={addr} failed:\n{stderr}"
    );
    assert_eq!(
        stdout.trim(),
        dir.to_str().unwrap(),
        "the last line is the directory"
    );
    note(&format!(
        "scripts/release.sh with REGISTRY={addr} in {}",
        node::secs(took)
    ));
    let unpacked = check_artifacts(&dir, &dir.with_extension("plugin"));
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("image.json")).unwrap()).unwrap();
    let built = summary["manifest_digest"].as_str().unwrap().to_string();
    let pushed = registry.digest("volume-leftovers", VERSION);
    assert_eq!(
        pushed, built,
        "the registry serves the image the OCI layout holds, unchanged"
    );

    // --- a node whose containerd knows the registry speaks plain HTTP ------------------------------
    let cluster = Cluster::start_or_fail();
    let hosts = PathBuf::from(
        node::env_of(&cluster.node_dir, "REGISTRY_CONFIG_PATH").expect("node/up.sh's env"),
    )
    .join(&addr);
    std::fs::create_dir_all(&hosts).unwrap();
    std::fs::write(
        hosts.join("hosts.toml"),
        format!(
            "server = \"http://{addr}\"\n\n[host.\"http://{addr}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
        ),
    )
    .unwrap();
    let image = format!("{addr}/volume-leftovers:{VERSION}");
    let listed = cluster.ctr(&["images", "list", "-q"]);
    assert!(
        !String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|l| l.contains("volume-leftovers")),
        "the node has no volume-leftovers image before the install: {}",
        text(&listed)
    );

    // --- helm install from the registry --------------------------------------------------------
    cluster.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("deploy/namespace.yaml").to_str().unwrap(),
    ]);
    let client = cluster.client().await;
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    let t = Instant::now();
    let chart = format!("oci://{addr}/charts/volume-leftovers");
    let repository = format!("image.repository={addr}/volume-leftovers");
    node::helm(
        &cluster,
        &[
            "install",
            NAME,
            &chart,
            "--version",
            VERSION,
            "--plain-http",
            "-n",
            NS,
            "--set",
            &repository,
        ],
    );
    let (ready, _) = node::wait_ready(&pods, 2, t, Duration::from_secs(180)).await;
    let to_ready = t.elapsed();
    for p in &ready {
        let cs = &p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0];
        assert_eq!(cs.image, image, "{}", node::pod_name(p));
        assert_eq!(
            cs.image_id,
            format!("{addr}/volume-leftovers@{pushed}"),
            "{} runs the pushed image, by its digest",
            node::pod_name(p)
        );
    }
    // containerd resolves the tag (HEAD of the manifest), then GETs the manifest by digest and
    // every blob: the config and the layers.
    let log = registry.log();
    let by_containerd = |what: &str| {
        log.lines()
            .filter(|l| {
                l.starts_with("127.0.0.1 - - ") && l.contains(what) && l.contains("\"containerd/")
            })
            .count()
    };
    let resolved = by_containerd(&format!(" /v2/volume-leftovers/manifests/{VERSION} "));
    let manifests = by_containerd(&format!("\"GET /v2/volume-leftovers/manifests/{pushed} "));
    let blobs = by_containerd("\"GET /v2/volume-leftovers/blobs/sha256:");
    assert!(
        resolved > 0 && manifests > 0 && blobs >= 3,
        "the registry's access log shows containerd resolving the tag ({resolved}), fetching the \
         manifest by digest ({manifests}) and the config and layers ({blobs}):\n{log}"
    );
    let chart_pulls = registry
        .log()
        .lines()
        .filter(|l| l.contains("\"GET /v2/charts/volume-leftovers/") && l.contains("Helm/"))
        .count();
    assert!(chart_pulls > 0, "helm fetched the chart from the registry");
    note(&format!(
        "helm install {chart} --version {VERSION} → 2 pods Ready in {}, running {image} by digest \
         {pushed}, pulled by containerd from the registry (its access log: the tag resolved, \
         the manifest and {blobs} blobs fetched)",
        node::secs(to_ready),
    ));

    // --- the operator at work: the mariadb leftover ------------------------------------------------
    node::mariadb_released(&cluster, &client).await;
    node::wait_claim_deleted(&client, "mariadb-pv").await;

    // --- the plugin, as kubectl finds it ---------------------------------------------------------
    let path = format!(
        "{}:{}",
        unpacked.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl = cluster.bin.join("kubectl");
    let list = Command::new(&kubectl)
        .args(["plugin", "list"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let want = unpacked.join("kubectl-leftovers");
    assert!(
        String::from_utf8_lossy(&list.stdout)
            .lines()
            .any(|l| l.trim() == want.to_str().unwrap()),
        "kubectl plugin list names {}: {}",
        want.display(),
        text(&list)
    );
    let scan = Command::new(&kubectl)
        .args(["leftovers", "-o", "name"])
        .env("PATH", &path)
        .env("KUBECONFIG", cluster.kubeconfig())
        .output()
        .unwrap();
    assert_eq!(
        scan.status.code(),
        Some(3),
        "kubectl leftovers exits 3 when there are leftovers: {}",
        text(&scan)
    );
    assert_eq!(
        String::from_utf8_lossy(&scan.stdout),
        "volumeleftover.leftovers.dev/mariadb-pv\n",
        "{}",
        text(&scan)
    );
    note(&format!(
        "mariadb-pv ClaimDeleted; kubectl plugin list finds {}; `kubectl leftovers -o name` \
         prints volumeleftover.leftovers.dev/mariadb-pv (exit 3); whole test {}",
        want.display(),
        node::secs(started.elapsed())
    ));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(dir.with_extension("plugin"));
    let _ = std::fs::remove_dir_all(dir.with_extension("helm-home"));
}

/// A registry that is not there, refuses the push, or never answers it: one error line, a
/// non-zero exit, no hang.
#[test]
fn release_to_a_registry_that_refuses_fails_with_one_line_and_never_hangs() {
    // Stopped: nothing listens on its port any more; refused before anything is built.
    let mut stopped = Registry::start_or_fail(false);
    let addr = stopped.addr();
    stopped.stop();
    let line = assert_refused("stopped", &addr, 30, Duration::from_secs(60));
    assert!(line.contains("does not answer"), "{line}");

    // Read-only (the registry's maintenance mode): it answers, then refuses the upload (405).
    let read_only = Registry::start_or_fail(true);
    let line = assert_refused("read-only", &read_only.addr(), 60, Duration::from_secs(600));
    assert!(line.contains("pushing the image"), "{line}");
    assert!(line.contains("405"), "{line}");

    // Answers /v2/ and then nothing: the push is abandoned after VL_PUSH_TIMEOUT.
    let silent = Silent::start();
    let line = assert_refused("silent", &silent.addr(), 5, Duration::from_secs(600));
    assert!(line.contains("no answer within 5 s"), "{line}");
}

/// An HTTP server on 127.0.0.1 that answers `GET /v2/` (a registry, as far as a ping can tell)
/// and holds every other request open without a word, until dropped.
struct Silent {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let flag = flag.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                    let mut buf = [0u8; 4096];
                    let mut seen = Vec::new();
                    // Requests on a kept-alive connection: /v2/ answered, anything else held.
                    while !flag.load(Ordering::SeqCst) {
                        match conn.read(&mut buf) {
                            Ok(0) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                            Err(_) => continue,
                        }
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&seen[..end]).into_owned();
                            seen.drain(..end + 4);
                            let line = head.lines().next().unwrap_or("");
                            if line.starts_with("GET /v2/ ") {
                                let _ = conn.write_all(
                                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                                      Docker-Distribution-Api-Version: registry/2.0\r\n\
                                      Content-Length: 2\r\n\r\n{}",
                                );
                            }
                        }
                    }
                });
            }
        });
        Silent { port, stop }
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = std::net::TcpStream::connect(self.addr());
    }
}
