//! The container image, run the way a pod of deploy/ runs it: scripts/image.sh builds it from the
//! release binary, scripts/run-image.sh runs it with runc as uid 65532 on a read-only root with no
//! capabilities, with the files a pod finds in its service-account volume (a token the API server
//! minted for the ServiceAccount, the cluster's CA, the namespace) and KUBERNETES_SERVICE_HOST/PORT:
//! the in-cluster configuration, no kubeconfig anywhere. The audit log shows it was that token.
//!
//! Needs the release binary: `cargo build --release` and `VL_RELEASE_BINARY=<it>` (scripts/test.sh
//! sets it). Without it, or when the image cannot be built or run (buildah, skopeo, umoci, runc,
//! root), the test fails; it never skips.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use volume_leftovers::model::crd::{Reason, Tristate, VolumeLeftover};

use crate::support::*;

/// The container's user, the image's USER and the Deployment's runAsUser.
const UID: &str = "65532";
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A line in the test log, also when the test passes (libtest captures `print!` and `eprint!`,
/// not a direct write to stderr).
fn note(line: &str) {
    let _ = writeln!(std::io::stderr(), "image: {line}");
}

fn run_script(cmd: &mut Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run it: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The container of one run directory; `run-image.sh down` when dropped, with the end of the
/// container's log in the test output when the test is failing.
struct Container {
    run: PathBuf,
}

impl Container {
    fn down(&self) -> Output {
        Command::new(repo().join("scripts/run-image.sh"))
            .arg("down")
            .arg(&self.run)
            .output()
            .expect("running scripts/run-image.sh down")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.run.join("container.log")).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.run.join("pid"))
            .unwrap_or_else(|e| panic!("{}/pid (runc's pid file): {e}", self.run.display()));
        text.trim().parse().expect("a pid")
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            note(&format!(
                "last lines of {}/container.log:",
                self.run.display()
            ));
            for l in tail.iter().rev() {
                note(&format!("  {l}"));
            }
        }
        let _ = self.down();
    }
}

/// Alive and not a zombie (the container's init is reparented when runc detaches; a zombie holds
/// nothing but still answers `kill -0`).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        !s.lines()
            .any(|l| l.starts_with("State:") && l.contains('Z'))
    })
}

/// `Key:\tvalue` of /proc/PID/status.
fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key} in /proc/PID/status:\n{status}"))
        .trim()
        .to_string()
}

/// The mount options of the mount at `point` in a mountinfo text (the last one wins: mounts over
/// mounts), e.g. `ro,nosuid,relatime`.
fn mount_options<'a>(mountinfo: &'a str, point: &str) -> Option<&'a str> {
    mountinfo.lines().rev().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f.len() > 5 && f[4] == point).then_some(f[5])
    })
}

/// The claims of a JWT (its middle part, base64url without padding), unverified: the test only
/// reads the `jti` the API server put in the token it minted.
fn jwt_claims(token: &str) -> serde_json::Value {
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

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1_048_576.0)
}

fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_as_a_pod_with_the_in_cluster_configuration_and_reports_the_mariadb_volume()
{
    let started = Instant::now();
    let binary = match std::env::var_os("VL_RELEASE_BINARY") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => panic!(
            "VL_RELEASE_BINARY is not set: this test builds the container image from the release \
             binary. Run `cargo build --release` and set VL_RELEASE_BINARY to the binary it made \
             (e.g. VL_RELEASE_BINARY=$PWD/target/release/volume-leftovers; scripts/test.sh does \
             both)"
        ),
    };
    assert!(
        binary.is_file(),
        "VL_RELEASE_BINARY={} is not a file: run `cargo build --release`",
        binary.display()
    );

    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;

    // --- the image: built from that binary into this run's own directory -----------------------
    let image_dir = cp.dir.join("image");
    let t = Instant::now();
    let out = run_script(
        Command::new(repo().join("scripts/image.sh"))
            .env("VL_BINARY", &binary)
            .env("VL_IMAGE_DIR", &image_dir),
        "scripts/image.sh",
    );
    let build_time = t.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let tarball = PathBuf::from(stdout.lines().last().expect("image.sh prints the tarball"));
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(image_dir.join("summary.json")).expect("image.sh's summary.json"),
    )
    .expect("summary.json");
    let tar_bytes = std::fs::metadata(&tarball)
        .unwrap_or_else(|e| panic!("{}: {e}", tarball.display()))
        .len();
    assert_eq!(summary["tarball_bytes"].as_u64(), Some(tar_bytes));
    assert_eq!(summary["user"], "65532:65532");
    let oci = summary["oci"].as_str().expect("oci").to_string();
    let uncompressed = summary["uncompressed_bytes"].as_u64().expect("sizes");
    let compressed = summary["compressed_bytes"].as_u64().expect("sizes");
    note(&format!(
        "{} ({} layers): {} uncompressed, {} gzip-compressed layers (a registry's size), \
         docker-archive {} = {}; built in {:.1} s",
        summary["ref"].as_str().unwrap_or("?"),
        summary["layers"],
        mib(uncompressed),
        mib(compressed),
        tarball.display(),
        mib(tar_bytes),
        build_time.as_secs_f64()
    ));

    // --- the mariadb scenario: a Retain volume whose claim is deleted -------------------------
    cp.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("scripts/demo-scenario.yaml").to_str().unwrap(),
    ])
    .unwrap();
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "mariadb");
    let claim = wait_for(
        "PVC mariadb/mariadb to be Bound",
        Duration::from_secs(60),
        || async {
            let c = claims.get_opt("mariadb").await.ok().flatten()?;
            (c.status.as_ref()?.phase.as_deref() == Some("Bound")).then_some(c)
        },
    )
    .await;
    let claim_uid = claim.metadata.uid.clone().expect("claim uid");
    delete(&claims, "mariadb").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    wait_pv_phase(&pvs, "mariadb-pv", "Released").await;

    // --- the token a pod gets: minted by the API server for the ServiceAccount ----------------
    let token = cp
        .kubectl_ok(&[
            "create",
            "token",
            "volume-leftovers",
            "-n",
            "volume-leftovers",
        ])
        .unwrap()
        .trim()
        .to_string();
    let claims_of_token = jwt_claims(&token);
    assert_eq!(claims_of_token["sub"], OPERATOR_USER, "{claims_of_token}");
    let jti = claims_of_token["jti"]
        .as_str()
        .unwrap_or_else(|| panic!("a minted token carries a jti: {claims_of_token}"))
        .to_string();
    let sa_uid = claims_of_token["kubernetes.io"]["serviceaccount"]["uid"]
        .as_str()
        .expect("the ServiceAccount's uid in the token")
        .to_string();
    let token_file = cp.dir.join("image-sa-token");
    write_private(&token_file, &token);

    // --- the container ----------------------------------------------------------------------
    let api_url = cp.env_value("APISERVER_URL");
    let api_port = api_url.rsplit(':').next().unwrap().to_string();
    let port = free_port();
    let container = Container {
        run: cp.dir.join("container"),
    };
    let t = Instant::now();
    run_script(
        Command::new(repo().join("scripts/run-image.sh"))
            .arg("up")
            .arg(&container.run)
            .arg("--image")
            .arg(&oci)
            .arg("--token-file")
            .arg(&token_file)
            .arg("--ca-file")
            .arg(cp.dir.join("pki/ca.crt"))
            .args(["--namespace", "volume-leftovers"])
            .args([
                "--apiserver-host",
                "127.0.0.1",
                "--apiserver-port",
                &api_port,
            ])
            .arg("--owner-pid")
            .arg(std::process::id().to_string())
            // The Deployment's args, listening on 127.0.0.1 only.
            .args(["--", "run", "--log-format=json", "--listen"])
            .arg(format!("127.0.0.1:{port}")),
        "scripts/run-image.sh up",
    );
    let pid = container.pid();
    let ready_url = format!("http://127.0.0.1:{port}/readyz");
    let (code, body) = wait_for("/readyz to turn 200", Duration::from_secs(60), || async {
        assert!(
            alive(pid),
            "the container's process {pid} exited before /readyz turned 200"
        );
        http_get(&ready_url).filter(|(c, _)| *c == 200)
    })
    .await;
    assert_eq!(code, 200, "{body}");
    let ready_time = t.elapsed();

    // --- what the kernel says about the process --------------------------------------------
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    for key in ["Uid", "Gid"] {
        let ids: Vec<String> = status_field(&status, key)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        assert_eq!(ids, [UID; 4], "{key} (real, effective, saved, fs)");
    }
    assert_eq!(
        status_field(&status, "Groups"),
        "",
        "no supplementary groups"
    );
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert_eq!(
            u64::from_str_radix(&status_field(&status, cap), 16).unwrap(),
            0,
            "{cap}: no capabilities at all"
        );
    }
    assert_eq!(status_field(&status, "NoNewPrivs"), "1");
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe, Path::new("/usr/local/bin/volume-leftovers"));
    let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
    for point in ["/", SA_DIR] {
        let opts = mount_options(&mountinfo, point)
            .unwrap_or_else(|| panic!("no mount at {point} in the container:\n{mountinfo}"));
        assert!(
            opts.split(',').any(|o| o == "ro"),
            "{point} is mounted {opts}, not read-only"
        );
    }
    // Read-only for real: not even root on the host can write into the container's root.
    let probe = format!("/proc/{pid}/root/write-probe");
    let err = std::fs::write(&probe, "x").expect_err("the container's root must be read-only");
    assert_eq!(err.raw_os_error(), Some(30), "EROFS, not {err}");
    // In-cluster configuration: the service account's files and the service's address, and no
    // kubeconfig to take instead.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ: Vec<String> = environ
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| String::from_utf8_lossy(v).into_owned())
        .collect();
    for want in [
        "KUBERNETES_SERVICE_HOST=127.0.0.1".to_string(),
        format!("KUBERNETES_SERVICE_PORT={api_port}"),
    ] {
        assert!(environ.contains(&want), "{want} not in {environ:?}");
    }
    assert!(
        !environ.iter().any(|v| v.starts_with("KUBECONFIG=")),
        "{environ:?}"
    );
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    let home = environ
        .iter()
        .find_map(|v| v.strip_prefix("HOME="))
        .unwrap_or("/");
    for path in [format!("{home}/.kube/config"), "/root/.kube/config".into()] {
        assert!(
            !root.join(path.trim_start_matches('/')).exists(),
            "{path} exists in the container"
        );
    }
    for file in ["token", "ca.crt", "namespace"] {
        assert!(
            root.join(&SA_DIR[1..]).join(file).is_file(),
            "{SA_DIR}/{file}"
        );
    }
    assert!(
        !root.join("bin/sh").exists() && !root.join("usr/bin/sh").exists(),
        "the image has no shell"
    );
    // Like a pod's name: the container id (run-image.sh), which the operator puts in its
    // User-Agent.
    let hostname = std::fs::read_to_string(container.run.join("id"))
        .unwrap()
        .trim()
        .to_string();
    assert!(
        environ.contains(&format!("HOSTNAME={hostname}")),
        "{environ:?}"
    );
    note(&format!(
        "container pid {pid} (hostname {hostname}): uid/gid {UID}, no capabilities, \
         NoNewPrivs 1, root and {SA_DIR} read-only"
    ));

    // --- what it did: the finding, written with the minted token ---------------------------
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, "mariadb-pv", "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let found_time = t.elapsed();
    let claim_info = vl.status.as_ref().and_then(|s| s.claim.as_ref()).unwrap();
    assert_eq!(claim_info.uid.as_deref(), Some(claim_uid.as_str()));
    assert_eq!(claim_info.missing, Tristate::True);

    let credential = format!("JTI={jti}");
    let user_agent = format!(
        "volume-leftovers/{} ({hostname})",
        env!("CARGO_PKG_VERSION")
    );
    let events = wait_for(
        "the audit log to show the create and the status patch of mariadb-pv",
        Duration::from_secs(15),
        || {
            let events: Vec<serde_json::Value> = cp
                .audit()
                .into_iter()
                .filter(|e| e["user"]["username"] == OPERATOR_USER)
                .collect();
            let wrote = |verb: &str, sub: Option<&str>| {
                events.iter().any(|e| {
                    e["verb"] == verb
                        && e["objectRef"]["resource"] == "volumeleftovers"
                        && e["objectRef"]["name"] == "mariadb-pv"
                        && e["objectRef"]["subresource"].as_str() == sub
                        && e["responseStatus"]["code"]
                            .as_u64()
                            .is_some_and(|c| c < 300)
                })
            };
            let done = wrote("create", None) && wrote("patch", Some("status"));
            async move { done.then_some(events) }
        },
    )
    .await;
    // Every request of the ServiceAccount came from the container, with the minted token.
    for e in &events {
        let extra = &e["user"]["extra"]["authentication.kubernetes.io/credential-id"];
        assert_eq!(
            extra,
            &serde_json::json!([credential]),
            "a request as {OPERATOR_USER} without the minted token's credential id: {e}"
        );
        assert_eq!(e["user"]["uid"].as_str(), Some(sa_uid.as_str()), "{e}");
        assert_eq!(e["userAgent"].as_str(), Some(user_agent.as_str()), "{e}");
    }
    let writes = events
        .iter()
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete")
            )
        })
        .count();
    note(&format!(
        "audit: {} requests as {OPERATOR_USER}, {writes} writes, every one with credential-id \
         JTI=<the minted token's jti> and User-Agent {user_agent:?}",
        events.len()
    ));

    // --- stop ---------------------------------------------------------------------------
    let t = Instant::now();
    let out = container.down();
    assert!(
        out.status.success(),
        "run-image.sh down: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let down_time = t.elapsed();
    assert!(!alive(pid), "process {pid} outlived run-image.sh down");
    assert!(
        !container.run.join("id").exists() && !container.run.join("bundle").exists(),
        "run-image.sh down leaves no container state behind"
    );
    let log = container.log();
    assert!(
        log.contains("controller stopped"),
        "SIGTERM stops the operator gracefully:\n{log}"
    );
    assert!(
        http_get(&ready_url).is_none_or(|(c, _)| c != 200),
        "nothing answers on {ready_url} any more"
    );

    // The image and the unpacked bundle are tens of MB per run; the logs stay.
    let _ = std::fs::remove_dir_all(&image_dir);
    note(&format!(
        "timings: image built in {:.1} s, up to /readyz 200 in {:.1} s, up to the VolumeLeftover \
         in {:.1} s, down in {:.1} s; the whole test {:.1} s",
        build_time.as_secs_f64(),
        ready_time.as_secs_f64(),
        found_time.as_secs_f64(),
        down_time.as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
}
