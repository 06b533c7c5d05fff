//! The first command of the README, `make demo`, as a newcomer runs it (no `KUBECONFIG`): it
//! shows the mariadb finding and the `scan` line, builds nothing `make test` already built (one
//! cargo target directory, scripts/cache.sh), and leaves no process running.
//!
//! Needs the release binary (`VL_RELEASE_BINARY`, as tests/e2e/image.rs; scripts/test.sh builds
//! it before `cargo test`): the demo must find it where it is, up to date.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::repo;

/// The whole demo on the cached control plane takes well under a minute; a cold release build
/// alone takes about four (so a demo that rebuilds in a directory of its own fails here too).
const DEMO_TIMEOUT: Duration = Duration::from_secs(180);

#[test]
fn make_demo_shows_the_mariadb_finding_and_the_scan_line_and_stops_everything() {
    let binary = std::env::var_os("VL_RELEASE_BINARY")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .expect(
            "VL_RELEASE_BINARY is not set: `make demo` must reuse the release binary `make test` \
             built. Run `cargo build --release` and set VL_RELEASE_BINARY to the binary it made \
             (scripts/test.sh does both)",
        );
    assert!(
        binary.is_file(),
        "VL_RELEASE_BINARY={} is not a file: run `cargo build --release`",
        binary.display()
    );
    let target = binary
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "release"))
        .and_then(Path::parent)
        .unwrap_or_else(|| {
            panic!(
                "VL_RELEASE_BINARY={} is not <cargo target dir>/release/volume-leftovers",
                binary.display()
            )
        });

    // The demo's run directory is `mktemp -d $TMPDIR/...`: in a directory of this test's own, so
    // that every process the demo started can be found by it (in its command line or, inherited
    // from the demo, in its environment).
    let tmp =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let stdout_path = tmp.join("demo.stdout");
    let stderr_path = tmp.join("demo.stderr");

    let mut cmd = Command::new("make");
    cmd.arg("demo")
        .current_dir(repo())
        .env_remove("KUBECONFIG")
        // As from a shell, not from inside `make test`.
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        // Its own process group, so that a demo past the timeout is stopped as a whole.
        .process_group(0);
    // Without what `cargo test` adds to a test's environment (CARGO_PKG_NAME, CARGO_MANIFEST_DIR,
    // ...): cargo compares the variables a build script watches (ring's watch these) with its
    // own environment, so the demo's `cargo build --release` would rebuild ring and everything
    // above it, which it does not do from a shell.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let cargo_added = key == "CARGO"
            || key == "LD_LIBRARY_PATH"
            || (key.starts_with("CARGO_") && key != "CARGO_HOME" && key != "CARGO_TARGET_DIR");
        if cargo_added {
            cmd.env_remove(&*key);
        }
    }
    // When the release binary is where the default puts it, the default is what runs (as for
    // a user who sets nothing); otherwise the demo is told where it is.
    if target == default_target_dir() {
        cmd.env_remove("CARGO_TARGET_DIR");
    } else {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("running make demo");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > DEMO_TIMEOUT {
            // SIGTERM runs the demo's EXIT trap (down.sh); SIGKILL if that does not end it.
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(30) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let took = started.elapsed();
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let output = format!("--- stdout\n{stdout}--- stderr\n{stderr}");

    // Nothing it started outlives it: checked first, also when the demo failed or timed out.
    let left = processes_naming(&tmp, Duration::from_secs(10));
    for (pid, _) in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "processes of the demo outlived it (killed now):\n{}\n{output}",
        left.iter()
            .map(|(pid, cmd)| format!("{pid} {cmd}"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    let status = status.unwrap_or_else(|| {
        panic!("`make demo` did not finish within {DEMO_TIMEOUT:?} (stopped)\n{output}")
    });
    assert!(status.success(), "`make demo` failed: {status}\n{output}");
    eprintln!("make demo took {took:.1?}");

    // The run directory was where the check above looked (so the check could fail).
    let runs: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("volume-leftovers-demo."))
        })
        .collect();
    assert_eq!(runs.len(), 1, "one run directory in {}", tmp.display());
    assert!(
        runs[0].join("operator.log").is_file() && runs[0].join("kube-apiserver.log").is_file(),
        "the demo's control plane and operator ran in {}\n{output}",
        runs[0].display()
    );

    // The release binary of `make test`, reused as it was: nothing recompiled.
    assert!(
        stderr.contains(&format!("== built {} in ", binary.display())),
        "the demo ran another binary than VL_RELEASE_BINARY={}\n{output}",
        binary.display()
    );
    assert!(
        !stderr.contains("Compiling volume-leftovers"),
        "the demo recompiled the release binary `make test` had built (other flags, or \
         VL_RELEASE_BINARY is older than the sources)\n{output}"
    );

    // `kubectl get volumeleftovers`: the finding, with its reason.
    assert!(
        stdout.lines().any(|l| {
            l.split_whitespace().take(9).eq([
                "mariadb-pv",
                "ClaimDeleted",
                "Open",
                "Released",
                "Retain",
                "mariadb/mariadb",
                "True",
                "standard",
                "250Mi",
            ])
        }),
        "no mariadb-pv ClaimDeleted row from `kubectl get volumeleftovers`\n{output}"
    );
    // `scan`: the original tool's line.
    assert!(
        stdout.lines().any(|l| l.starts_with(
            r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": true, "storage_class": "standard", "capacity": "250Mi", "reason": "ClaimDeleted""#
        )),
        "no mariadb-pv line from `scan`\n{output}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// scripts/cache.sh's default target directory, written out again as the expectation:
/// `${VOLUME_LEFTOVERS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/volume-leftovers}/cargo-target`.
fn default_target_dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("VOLUME_LEFTOVERS_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|c| c.join("volume-leftovers")))
        .unwrap_or_else(|| var("HOME").expect("HOME").join(".cache/volume-leftovers"))
        .join("cargo-target")
}

/// Live processes (pid, command line) whose command line or environment names `dir`, after
/// waiting up to `grace` for them to end (up.sh's watchdog notices its owner's exit within a
/// second).
fn processes_naming(dir: &Path, grace: Duration) -> Vec<(u32, String)> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let start = Instant::now();
    loop {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == std::process::id() {
                continue;
            }
            // A zombie has an empty command line and environment: it holds nothing any more.
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let names = |b: &[u8]| b.windows(needle.len()).any(|w| w == needle);
            if names(&cmdline) || names(&environ) {
                let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                found.push((pid, cmd));
            }
        }
        if found.is_empty() || start.elapsed() > grace {
            return found;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
