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

/// The release binary `make test` built (`VL_RELEASE_BINARY`) and its cargo target directory.
fn release_binary() -> (PathBuf, PathBuf) {
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
        })
        .to_path_buf();
    (binary, target)
}

/// `make demo` as from a shell, in `tmp` (its `TMPDIR`), its output to `stdout` and `stderr`,
/// without `KUBECONFIG`, in a process group of its own.
fn make_demo(tmp: &Path, target: &Path, stdout: &Path, stderr: &Path) -> Command {
    let mut cmd = Command::new("make");
    cmd.arg("demo")
        .current_dir(repo())
        .env_remove("KUBECONFIG")
        .env_remove("OPERATOR")
        // As from a shell, not from inside `make test`.
        .env_remove("MAKEFLAGS")
        .env_remove("MFLAGS")
        .env_remove("MAKELEVEL")
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(stdout).unwrap())
        .stderr(std::fs::File::create(stderr).unwrap())
        // Its own process group, so that a demo past the timeout is stopped as a whole.
        .process_group(0);
    // Without what `cargo test` adds to a test's environment (CARGO_PKG_NAME, CARGO_MANIFEST_DIR,
    // ..., OUT_DIR and VL_REVISION since this crate has a build script): cargo compares the variables a
    // build script watches (ring's watch these, OUT_DIR among them) with its own environment, so
    // the demo's `cargo build --release` would rebuild ring and everything above it, which it
    // does not do from a shell.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let cargo_added = key == "CARGO"
            || key == "LD_LIBRARY_PATH"
            || key == "OUT_DIR"
            || key == "VL_REVISION"
            // What cargo sets for a test, not the user's own settings (CARGO_HOME,
            // CARGO_TARGET_DIR, CARGO_INCREMENTAL, CARGO_BUILD_JOBS, ...: keeping a user's
            // CARGO_INCREMENTAL=0 matters, without it the release build starts over).
            || [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_BIN_",
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
                "CARGO_RUSTC_CURRENT_DIR",
            ]
            .iter()
            .any(|p| key.starts_with(p));
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
    cmd
}

/// Runs `cmd` (in a process group of its own) for at most [`DEMO_TIMEOUT`]: its exit status, or
/// `None` when it had to be stopped (SIGTERM to the group, which runs the demo's EXIT trap, then
/// SIGKILL if that does not end it).
fn bounded(cmd: &mut Command) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    let mut child = cmd.spawn().expect("running make demo");
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if started.elapsed() > DEMO_TIMEOUT {
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
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A fresh directory of this test's own under cargo's test tmpdir.
fn scratch(name: &str) -> PathBuf {
    let tmp =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// Issue 29: with `KUBECONFIG` set, `make demo` ran the operator with the caller's (usually
/// admin) credentials, writing VolumeLeftovers and Events into a production cluster as a demo.
/// It is read-only now unless asked (`OPERATOR=1`), and says so first; the audit log shows its
/// requests, and none of them writes.
#[test]
fn make_demo_against_a_kubeconfig_is_read_only_unless_asked() {
    let (binary, target) = release_binary();
    let cp = crate::support::cp();
    let tmp = scratch("demo-kubeconfig");
    let (out, err) = (tmp.join("demo.stdout"), tmp.join("demo.stderr"));
    // The identity in its requests' User-Agent: how the audit log tells its requests apart.
    let identity = crate::support::unique("demo-readonly");
    let mut cmd = make_demo(&tmp, &target, &out, &err);
    cmd.env("KUBECONFIG", cp.kubeconfig("admin"))
        .env("POD_NAME", &identity);
    let status = bounded(&mut cmd);
    let stdout = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    let output = format!("--- stdout\n{stdout}--- stderr\n{stderr}");
    let status = status.unwrap_or_else(|| {
        panic!(
            "`make demo` did not end on its own within {DEMO_TIMEOUT:?} (stopped): did it run the operator?\n{output}"
        )
    });
    assert!(status.success(), "`make demo` failed: {status}\n{output}");
    let says = stderr
        .lines()
        .find(|l| l.contains("KUBECONFIG is set"))
        .unwrap_or_else(|| panic!("no line about KUBECONFIG\n{output}"));
    assert!(
        says.contains("read-only") && says.contains("OPERATOR=1"),
        "the line says it is read-only and how to ask for the operator: {says}"
    );
    assert!(
        stderr.contains(&format!("== built {} in ", binary.display())),
        "the release binary of `make test` ran\n{output}"
    );
    assert!(
        // Its first columns, however wide other tests' findings on this shared plane make them.
        stdout
            .lines()
            .any(|l| { l.split_whitespace().take(2).eq(["NAME", "REASON"]) }),
        "scan's table is printed\n{output}"
    );
    let mine: Vec<serde_json::Value> = cp
        .audit()
        .into_iter()
        .filter(|e| {
            e["userAgent"]
                .as_str()
                .is_some_and(|ua| ua.contains(&format!("({identity})")))
        })
        .collect();
    assert!(
        mine.iter().any(|e| e["verb"] == "list"),
        "the demo's lists are in the audit log (so the check below can fail): {} requests",
        mine.len()
    );
    let writes: Vec<String> = mine
        .iter()
        .filter(|e| {
            matches!(
                e["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .map(|e| {
            format!(
                "{} {} {}",
                e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
            )
        })
        .collect();
    assert!(
        writes.is_empty(),
        "the read-only demo wrote: {writes:?}\n{output}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn make_demo_shows_the_mariadb_finding_and_the_scan_line_and_stops_everything() {
    let (binary, target) = release_binary();
    // The demo's run directory is `mktemp -d $TMPDIR/...`: in a directory of this test's own, so
    // that every process the demo started can be found by it (in its command line or, inherited
    // from the demo, in its environment).
    let tmp = scratch("demo");
    let stdout_path = tmp.join("demo.stdout");
    let stderr_path = tmp.join("demo.stderr");
    let mut cmd = make_demo(&tmp, &target, &stdout_path, &stderr_path);
    let started = Instant::now();
    let status = bounded(&mut cmd);
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
