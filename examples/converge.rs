//! Benchmark against a real control plane: how long the operator takes to converge on a cluster
//! with many leftovers, and that a restart on the converged cluster writes nothing.
//!
//! Default 2000 PVs, half of them leftovers:
//!
//!   cargo build --release && cargo run --release --example converge -- [PVS]
//!
//! Starts its own quiet control plane (controlplane/up.sh, no PV binder, so admin-written phases
//! stay), creates the PVs, runs the release binary as the deploy/ identity, and prints figures:
//! time to ready, time to write every finding, the operator's RSS, and the writes after a restart
//! (from the audit log). It stops everything it started.

#[path = "../tests/e2e/support.rs"]
mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::ListParams;
use support::*;
use volume_leftovers::model::crd::VolumeLeftover;

async fn count_leftovers(api: &Api<VolumeLeftover>) -> usize {
    let mut n = 0;
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let page = api.list_metadata(&lp).await.expect("list");
        n += page.items.len();
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return n,
        }
    }
}

fn operator_writes(cp: &ControlPlane) -> usize {
    cp.audit()
        .iter()
        .filter(|e| {
            e["user"]["username"] == OPERATOR_USER
                && e["objectRef"]["resource"] == "volumeleftovers"
                && matches!(
                    e["verb"].as_str(),
                    Some("create" | "patch" | "update" | "delete")
                )
        })
        .count()
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let cp = ControlPlane::start(Flavor::Quiet, true).unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());

    let t = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let pvs = pvs.clone();
            async move {
                let name = format!("bench-{i:06}");
                let mut p = pv(&name, "", "10Gi", "Retain");
                let spec = p.spec.as_mut().unwrap();
                spec.storage_class_name = None;
                if i % 2 == 0 {
                    spec.claim_ref =
                        Some(claim_ref("apps", &format!("data-{i}"), &format!("uid-{i}")));
                }
                create(&pvs, &p).await;
                let phase = if i % 2 == 0 { "Released" } else { "Available" };
                set_pv_phase(&pvs, &name, phase).await;
                Ok::<_, ()>(())
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await
        .unwrap();
    println!(
        "created {n} PVs ({} leftovers) in {:.1} s",
        n / 2,
        t.elapsed().as_secs_f64()
    );

    // The operator as people run it: the release binary, as the deploy/ identity.
    let bin = repo().join("target/release/volume-leftovers");
    assert!(
        bin.exists(),
        "build the operator first: cargo build --release (looked for {})",
        bin.display()
    );
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let mut run = 0;
    let mut start_operator = || {
        run += 1;
        let port = free_port();
        let child = Command::new(&bin)
            .args([
                "run",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--page-size",
                "500",
            ])
            .env("KUBECONFIG", cp.kubeconfig("operator"))
            .stderr(
                std::fs::File::create(cp.dir.join(format!("bench-operator-{run}.log"))).unwrap(),
            )
            .spawn()
            .expect("start the operator");
        (child, port)
    };

    let t = Instant::now();
    let (mut child, port) = start_operator();
    wait_for("/readyz", Duration::from_secs(120), || async {
        http_get(&format!("http://127.0.0.1:{port}/readyz")).filter(|(c, _)| *c == 200)
    })
    .await;
    let synced = t.elapsed();
    let applied = || {
        let (_, m) = http_get(&format!("http://127.0.0.1:{port}/metrics")).unwrap_or_default();
        m.lines()
            .find(|l| l.starts_with(r#"volume_leftovers_writes_total{op="create",result="ok"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<usize>().ok())
            .unwrap_or(0)
    };
    wait_for("every leftover written", Duration::from_secs(900), || {
        let done = applied() >= n / 2;
        async move { done.then_some(()) }
    })
    .await;
    let converged = t.elapsed();
    let hwm = proc_kib(child.id(), "VmHWM:");
    let rss = proc_kib(child.id(), "VmRSS:");
    let writes = operator_writes(&cp);
    assert_eq!(count_leftovers(&leftovers).await, n / 2);
    stop(&mut child);
    println!(
        "operator: ready (stores synced) in {:.2} s; {} VolumeLeftovers written in {:.1} s ({:.0}/s, {writes} write requests)",
        synced.as_secs_f64(),
        n / 2,
        converged.as_secs_f64(),
        (n / 2) as f64 / converged.as_secs_f64()
    );
    println!(
        "operator process with {n} PVs and {} VolumeLeftovers: RSS {:.1} MiB, peak {:.1} MiB",
        n / 2,
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0
    );

    let t = Instant::now();
    let (mut child, port) = start_operator();
    wait_for(
        "/readyz after restart",
        Duration::from_secs(120),
        || async {
            http_get(&format!("http://127.0.0.1:{port}/readyz")).filter(|(c, _)| *c == 200)
        },
    )
    .await;
    let resynced = t.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = operator_writes(&cp);
    stop(&mut child);
    println!(
        "restart on the converged cluster: ready in {:.2} s, {} write requests in the 5 s after",
        resynced.as_secs_f64(),
        after - writes
    );
}

fn proc_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn stop(child: &mut std::process::Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
}
