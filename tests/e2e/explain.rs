//! `volume-leftovers explain` on the real control plane, with the release binary
//! (`VL_RELEASE_BINARY`, as tests/e2e/image.rs) as the identity deploy/ grants: it explains the
//! operator's ClaimDeleted finding about a Released Retain volume, and the reuse command it
//! prints, run as admin, clears the finding; the finding of a scan (no VolumeLeftover) says to
//! delete the disk first; a name that is no finding is one line on stderr and exit code 1. The
//! audit log shows that explain only read.

use std::path::PathBuf;
use std::process::{Command, Output};

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};

use crate::support::*;

fn release_binary() -> PathBuf {
    let binary = std::env::var_os("VL_RELEASE_BINARY")
        .filter(|b| !b.is_empty())
        .map(PathBuf::from)
        .expect(
            "VL_RELEASE_BINARY is not set: this test runs the release binary's `explain`. Run \
             `cargo build --release` and set VL_RELEASE_BINARY to the binary it made \
             (scripts/test.sh does both)",
        );
    assert!(
        binary.is_file(),
        "VL_RELEASE_BINARY={} is not a file: run `cargo build --release`",
        binary.display()
    );
    binary
}

/// `explain NAME` as the operator's identity, its requests named `identity` in the audit log.
fn explain(cp: &ControlPlane, name: &str, identity: &str) -> Output {
    Command::new(release_binary())
        .args(["explain", name])
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env("POD_NAME", identity)
        .output()
        .expect("running volume-leftovers explain")
}

fn shown(out: &Output) -> String {
    format!(
        "exit {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The first command of the printed reuse choice, as a shell splits it (explain quotes with
/// single quotes only).
fn reuse_command(text: &str) -> Vec<String> {
    let reuse = text
        .split("\n# Reuse")
        .nth(1)
        .unwrap_or_else(|| panic!("no reuse choice in\n{text}"));
    let line = reuse
        .lines()
        .find_map(|l| l.strip_prefix("$ "))
        .unwrap_or_else(|| panic!("no reuse command in\n{text}"));
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "an unbalanced quote in {line:?}");
    if any {
        words.push(word);
    }
    words
}

/// `text` with every run of whitespace one space.
fn flat(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_prints_the_reuse_command_that_clears_the_finding_and_runs_none() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let identity = unique("explain");

    // The operator's finding: a Released Retain volume whose claim is gone.
    let operator = Operator::start(cp.operator_client().await, test_settings());
    let released = released_volume(&admin, "explain", "Retain").await;
    wait_pv_phase(&pvs, &released.pv, "Released").await;
    wait_leftover(&leftovers, &released.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;

    let out = explain(cp, &released.pv, &identity);
    assert!(out.status.success(), "{}", shown(&out));
    // Compared as words: the text is wrapped at 100 columns, and where a line breaks depends on
    // the length of the names (a counter and the pid in them).
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = flat(&raw);
    assert!(
        text.starts_with(&format!(
            "{}: ClaimDeleted (Open), from the VolumeLeftover the operator publishes.",
            released.pv
        )),
        "{}",
        shown(&out)
    );
    assert!(
        text.contains(&format!("Its claim {}/data", released.ns)),
        "{}",
        shown(&out)
    );
    assert!(text.contains("either order is safe"), "{}", shown(&out));
    assert!(
        text.contains(&format!("kubectl delete pv {}", released.pv)),
        "{}",
        shown(&out)
    );
    let command = reuse_command(&raw);
    assert_eq!(
        command,
        [
            "kubectl",
            "patch",
            "pv",
            &released.pv,
            "-p",
            r#"{"spec":{"claimRef":null}}"#
        ],
        "{}",
        shown(&out)
    );
    // Printed, never run: the volume is as it was.
    let pv = pvs.get(&released.pv).await.unwrap();
    assert_eq!(phase(&pv), "Released");

    // A person runs it: the volume turns Available, and the finding clears.
    let args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    cp.kubectl_ok(&args).unwrap_or_else(|e| panic!("{e}"));
    wait_pv_phase(&pvs, &released.pv, "Available").await;
    wait_leftover_gone(&leftovers, &released.pv).await;

    // Without the operator, no VolumeLeftover: the finding of a scan, whose PV is the only
    // record of the disk, so the disk goes first.
    operator.stop().await;
    let scanned = released_volume(&admin, "explain-scan", "Retain").await;
    wait_pv_phase(&pvs, &scanned.pv, "Released").await;
    let out = explain(cp, &scanned.pv, &identity);
    assert!(out.status.success(), "{}", shown(&out));
    // Compared as words: the text is wrapped at 100 columns, and where a line breaks depends on
    // the length of the names (a counter and the pid in them).
    let raw = String::from_utf8_lossy(&out.stdout).into_owned();
    let text = flat(&raw);
    assert!(
        text.starts_with(&format!(
            "{}: ClaimDeleted (Open), from a scan: no VolumeLeftover object holds it.",
            scanned.pv
        )),
        "{}",
        shown(&out)
    );
    assert!(
        text.contains("Delete the disk first, then the PV"),
        "{}",
        shown(&out)
    );
    assert!(
        !text.contains("kubectl patch vl"),
        "no acknowledgement without an object\n{}",
        shown(&out)
    );
    assert!(leftovers.get_opt(&scanned.pv).await.unwrap().is_none());

    // A name that is no finding: one line, exit 1.
    let out = explain(cp, "no-such-finding", &identity);
    assert_eq!(out.status.code(), Some(1), "{}", shown(&out));
    // (The scan's log lines, about other tests' odd volumes, may come before it.)
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("volume-leftovers explain:"))
        .collect();
    assert_eq!(said.len(), 1, "{}", shown(&out));
    assert!(
        said[0].starts_with("volume-leftovers explain: no-such-finding is not a finding")
            && stderr.trim_end().ends_with(said[0]),
        "{}",
        shown(&out)
    );
    assert!(out.stdout.is_empty(), "{}", shown(&out));

    // The audit log: explain listed the VolumeLeftover by name, and wrote nothing.
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
        mine.iter().any(|e| e["verb"] == "list"
            && e["objectRef"]["resource"] == "volumeleftovers"
            && e["requestURI"]
                .as_str()
                .is_some_and(|u| u.contains("fieldSelector=metadata.name"))),
        "explain's list of the VolumeLeftover by name is in the audit log ({} requests)",
        mine.len()
    );
    let not_reads: Vec<String> = mine
        .iter()
        .filter(|e| !matches!(e["verb"].as_str(), Some("get" | "list" | "watch")))
        .map(|e| {
            format!(
                "{} {} {}",
                e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"]
            )
        })
        .collect();
    assert!(not_reads.is_empty(), "explain wrote: {not_reads:?}");

    released.cleanup(&admin).await;
    scanned.cleanup(&admin).await;
}
