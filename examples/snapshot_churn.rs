//! Snapshot churn on a real control plane: dynamic snapshots cut and deleted for real by the
//! snapshot-controller and the csi-snapshotter sidecar (external-snapshotter v8.7.0) through the
//! project's test CSI driver, while the operator watches, and what the operator writes for them.
//!
//!   cargo run --release --no-default-features --example snapshot_churn -- [SNAPSHOTS] [RETAINED] [CLAIMS]
//!
//! Defaults: 120 snapshots with a Delete class over 12 claims (rounds of one snapshot per claim,
//! each round deleted as soon as it is ready, overlapping the next), and 12 with a Retain class,
//! deleted in the middle of the churn. The operator runs in this process as the operator's
//! identity with the default graces; the run ends once nothing is held in its grace (every state
//! the churn passed through resolved). With the e2e graces (delete 6 s) a loaded machine gives
//! SnapshotDeleteStuck for contents whose normal delete took longer than that. Prints: how long it took, the operator's writes (target: 2
//! per retained leftover, none for the others), false findings (a VolumeLeftover ever seen for a
//! Delete-class snapshot or its content; target: 0), and the time from a retained snapshot's
//! delete to its content's SnapshotDeleted finding. Stops everything it started.

#[path = "../tests/e2e/support.rs"]
mod support;

#[path = "../tests/e2e/csi.rs"]
mod csi;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use support::*;
use volume_leftovers::decide::snapshot::content_leftover_name;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};

/// Every VolumeLeftover seen: its reason then, and when it was first seen.
type Seen = BTreeMap<String, (Option<Reason>, Instant)>;

fn arg(i: usize, default: usize) -> usize {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The snapshots of `ns`, by name, and whether each is ready to use.
fn readiness(cp: &ControlPlane, ns: &str) -> BTreeMap<String, bool> {
    let out = cp
        .kubectl_ok(&[
            "get",
            "volumesnapshot",
            "-n",
            ns,
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name}={.status.readyToUse}{"\n"}{end}"#,
        ])
        .unwrap_or_default();
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(n, r)| (n.to_string(), r == "true"))
        .collect()
}

/// The operator's write requests by operation (`create`, `apply`, `delete`).
fn writes(m: &volume_leftovers::telemetry::Metrics) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for l in m.encode().lines() {
        let Some(rest) = l.strip_prefix("volume_leftovers_writes_total{") else {
            continue;
        };
        let op = rest
            .split("op=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?");
        let n: f64 = l
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(op.to_string()).or_default() += n;
    }
    out
}

fn main() {
    // Before any thread: the operator's log lines stay out of the figures.
    if std::env::var_os("VL_TEST_LOG").is_none() {
        // SAFETY: no other thread runs yet.
        unsafe { std::env::set_var("VL_TEST_LOG", "error") };
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(run());
}

async fn run() {
    let total = arg(1, 120);
    let retained = arg(2, 12);
    let claims = arg(3, 12).max(1);
    let rounds = total.div_ceil(claims);
    let controller = csi::snapshot_controller();
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let _controller = csi::install_snapshots(&cp, &controller);
    let stack = csi::Csi::start(&cp).await;
    let ns = "churn";
    cp.kubectl_ok(&["create", "namespace", ns])
        .unwrap_or_else(|e| panic!("{e}"));
    let file = cp.dir.join("volumes.yaml");
    std::fs::write(&file, csi::lifecycle_objects(ns, claims)).unwrap();
    cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
        .unwrap_or_else(|e| panic!("{e}"));
    wait_for(
        "every claim to be Bound",
        Duration::from_secs(300),
        || async {
            let out = cp
                .kubectl_ok(&[
                    "get",
                    "pvc",
                    "-n",
                    ns,
                    "-o",
                    "jsonpath={.items[*].status.phase}",
                ])
                .unwrap_or_default();
            (out.split_whitespace().filter(|p| *p == "Bound").count() == claims).then_some(())
        },
    )
    .await;

    // The default graces (what the chart runs), the tests' feed timings.
    let settings = volume_leftovers::run::settings::Settings {
        graces: volume_leftovers::run::settings::Settings::default().graces,
        ..test_settings()
    };
    let operator = Operator::start(cp.operator_client().await, settings);
    // The most names held in their grace at once (a state passing through), sampled.
    let held_max = Arc::new(Mutex::new(0.0f64));
    let sampling = {
        let (m, held_max) = (operator.metrics.clone(), held_max.clone());
        tokio::spawn(async move {
            loop {
                let held: f64 = m
                    .encode()
                    .lines()
                    .filter(|l| l.starts_with("volume_leftovers_pending_findings{"))
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum();
                {
                    let mut max = held_max.lock().unwrap();
                    *max = max.max(held);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    operator.wait_idle().await;
    let admin = cp.admin().await;
    // Every VolumeLeftover ever seen, and when it first was.
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let watching = {
        let seen = seen.clone();
        let api = Api::<VolumeLeftover>::all(admin.clone());
        tokio::spawn(async move {
            let mut s = watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(o) = s.next().await {
                // A watch error is retried (with backoff); every object is still seen.
                let Ok(o) = o else { continue };
                let name = o.metadata.name.clone().unwrap_or_default();
                // First seen with its status (a new finding is a create, then its status).
                let reason = o.status.as_ref().map(|s| s.reason);
                let mut seen = seen.lock().unwrap();
                let e = seen.entry(name).or_insert((None, Instant::now()));
                if e.0.is_none() && reason.is_some() {
                    *e = (reason, Instant::now());
                }
            }
        })
    };

    let started = Instant::now();
    let mut deleted_at: BTreeMap<String, Instant> = BTreeMap::new();
    let mut cut = 0;
    for round in 0..rounds {
        let n = claims.min(total - cut);
        let mut yaml: String = (0..n)
            .map(|i| {
                csi::snapshot_of_claim(
                    ns,
                    &format!("d{round:04}-{i}"),
                    &format!("data-{i}"),
                    "life-delete",
                )
            })
            .collect();
        let retain_now = round == rounds / 2;
        if retain_now {
            yaml.extend((0..retained).map(|i| {
                csi::snapshot_of_claim(
                    ns,
                    &format!("kept-{i}"),
                    &format!("data-{}", i % claims),
                    "life-retain",
                )
            }));
        }
        let file = cp.dir.join("round.yaml");
        std::fs::write(&file, yaml).unwrap();
        cp.kubectl_ok(&["apply", "-f", file.to_str().unwrap()])
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = (0..n).map(|i| format!("d{round:04}-{i}")).collect();
        wait_for(
            &format!("round {round} ready"),
            Duration::from_secs(300),
            || {
                let ready = readiness(&cp, ns);
                let all = names.iter().all(|s| ready.get(s) == Some(&true))
                    && (!retain_now
                        || (0..retained).all(|i| ready.get(&format!("kept-{i}")) == Some(&true)));
                async move { all.then_some(()) }
            },
        )
        .await;
        cut += n;
        let mut args = vec!["delete", "volumesnapshot", "-n", ns, "--wait=false"];
        args.extend(names.iter().map(String::as_str));
        cp.kubectl_ok(&args).unwrap_or_else(|e| panic!("{e}"));
        if retain_now {
            for i in 0..retained {
                let snap = format!("kept-{i}");
                let content = cp
                    .kubectl_ok(&[
                        "get",
                        "volumesnapshot",
                        "-n",
                        ns,
                        &snap,
                        "-o",
                        "jsonpath={.status.boundVolumeSnapshotContentName}",
                    ])
                    .unwrap_or_default();
                let at = Instant::now();
                cp.kubectl_ok(&["delete", "volumesnapshot", "-n", ns, &snap, "--wait=false"])
                    .unwrap_or_else(|e| panic!("{e}"));
                deleted_at.insert(content_leftover_name(&content), at);
            }
        }
    }
    wait_for(
        "every Delete-class snapshot, content and backend snapshot gone",
        Duration::from_secs(600),
        || async {
            let snaps = readiness(&cp, ns).len();
            let backend = csi::backend(&stack.state).len();
            (snaps == 0 && backend == retained).then_some(())
        },
    )
    .await;
    let took = started.elapsed().as_secs_f64();
    // Decided, and nothing held in its grace: every state the churn passed through resolved.
    operator.wait_idle().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    watching.abort();
    sampling.abort();
    let held_max = *held_max.lock().unwrap();

    let seen = seen.lock().unwrap().clone();
    let expected: Vec<&String> = deleted_at.keys().collect();
    let false_findings: Vec<&String> = seen
        .keys()
        .filter(|n| !deleted_at.contains_key(*n))
        .collect();
    let published = expected
        .iter()
        .filter(|n| {
            seen.get(**n)
                .is_some_and(|(r, _)| *r == Some(Reason::SnapshotDeleted))
        })
        .count();
    let mut latency: Vec<f64> = deleted_at
        .iter()
        .filter_map(|(n, at)| {
            let (_, first) = seen.get(n)?;
            Some(first.saturating_duration_since(*at).as_secs_f64())
        })
        .collect();
    latency.sort_by(f64::total_cmp);
    let w = writes(&operator.metrics);
    let requests: f64 = operator
        .metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("volume_leftovers_write_requests_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    println!(
        "snapshot churn: {cut} snapshots with a Delete class over {claims} claims, cut and deleted through the csi-snapshotter sidecar in {rounds} overlapping rounds, and {retained} with a Retain class; the default graces (2 m, delete 10 m)"
    );
    println!(
        "  took {took:.1} s for the churn ({:.1} snapshots/s), the operator deciding throughout",
        (cut + retained) as f64 / took
    );
    println!(
        "  operator writes: {} ({requests} requests, {:.2} per retained leftover)",
        w.iter()
            .map(|(op, n)| format!("{op} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        requests / retained.max(1) as f64
    );
    println!(
        "  false findings: {} (VolumeLeftovers ever seen for a Delete-class snapshot or its content); states held in their grace at most at once: {held_max}, all resolved",
        false_findings.len()
    );
    println!(
        "  retained: {published} of {retained} SnapshotDeleted, from the snapshot's delete: p50 {:.2} s, p90 {:.2} s, max {:.2} s",
        percentile(&latency, 0.5),
        percentile(&latency, 0.9),
        percentile(&latency, 1.0)
    );
    if !false_findings.is_empty() || published != retained {
        eprintln!("false findings: {false_findings:?}");
        for (n, (r, _)) in &seen {
            eprintln!("seen {n}: first reason {r:?}");
        }
        eprintln!("expected: {expected:?}");
    }
    operator.stop().await;
    assert!(false_findings.is_empty() && published == retained);
}
