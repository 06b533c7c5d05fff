//! Stamps the binary with the source revision it was built from, for `--version`:
//! `VL_REVISION` is the commit checked out (12 hex digits), taken from git when the sources are a
//! git checkout, else from the `VL_REVISION` environment variable (a build from an unpacked source
//! archive), else `unknown`. Uncommitted changes are not marked: reading them would mean reading
//! the index, whose every refresh would rebuild the crate.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let revision = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) if !rev.is_empty() => {
            // Run again when HEAD moves (a commit, a checkout).
            if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
                println!("cargo:rerun-if-changed={dir}/HEAD");
                // The branch's ref moves with a commit; a missing file would make cargo run
                // this again on every build (and rebuild the crate), so only one that exists
                // is named (a packed ref lives in packed-refs).
                let common = git(&["rev-parse", "--git-common-dir"]);
                let reference = git(&["symbolic-ref", "-q", "HEAD"]);
                for path in [
                    common
                        .as_ref()
                        .zip(reference)
                        .map(|(c, r)| format!("{c}/{r}")),
                    common.map(|c| format!("{c}/packed-refs")),
                ]
                .into_iter()
                .flatten()
                {
                    if std::path::Path::new(&path).is_file() {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
            rev
        }
        // Watched only here: a checkout ignores the variable, and `cargo test` hands the
        // `rustc-env` below to every test process, whose children (`make demo`) would otherwise
        // see it changed and rebuild the crate.
        _ => {
            println!("cargo:rerun-if-env-changed=VL_REVISION");
            std::env::var("VL_REVISION")
                .ok()
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo:rustc-env=VL_REVISION={revision}");
}
