//! Churn benchmark on a real control plane with the controller-manager's PV binder: ordinary
//! dynamic deletes (Delete policy, the volume deleted by a "provisioner" 1–60 s after it turns
//! Released) mixed with Retain deletes, and what the operator writes for them.
//!
//!   cargo build --release && cargo run --release --example churn -- [DELETE] [RETAIN] [RATE]
//!
//! Defaults: 1000 Delete-policy claims, 100 Retain claims, deleted at 20 per second in a mixed
//! order. Prints: write requests per Retain leftover (target: exactly 2) and for the Delete ones
//! (target: 0), false findings (a VolumeLeftover ever seen for a Delete-policy volume the
//! provisioner deleted in time; target: 0), and the latency from the volume turning Released to
//! its VolumeLeftover being created (server clock on both sides). The operator is the release
//! binary with its default grace periods, as the deploy/ identity. Stops everything it started.

#[path = "../tests/e2e/support.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use support::*;
use volume_leftovers::model::crd::VolumeLeftover;

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

#[tokio::main]
async fn main() {
    let n_delete = arg(1, 1000);
    let n_retain = arg(2, 100);
    let rate = arg(3, 20).max(1);
    // The PV controller as clusters run it (a 15 s resync; the tests use 2 s), unless asked.
    let sync = std::env::var("PV_SYNC_PERIOD").unwrap_or_else(|_| "15s".into());
    let cp = ControlPlane::start_with(Flavor::Full, true, &[("PV_SYNC_PERIOD", sync.as_str())])
        .unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;
    let ns = "churn";
    create_ns(&admin, ns).await;
    for (name, policy) in [("churn-delete", "Delete"), ("churn-retain", "Retain")] {
        let mut sc = class(name, policy);
        sc.provisioner = "churn.csi.leftovers.dev".into();
        create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    }
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), ns);

    // Volumes and claims, bound by the controller-manager.
    let total = n_delete + n_retain;
    let plan: Vec<(String, bool)> = (0..total)
        .map(|i| {
            // Mixed: one Retain every total/n_retain.
            let retain = n_retain > 0 && i % (total / n_retain.max(1)).max(1) == 0 && {
                let k = i / (total / n_retain.max(1)).max(1);
                k < n_retain
            };
            (format!("churn-{i:05}"), retain)
        })
        .collect();
    let n_retain = plan.iter().filter(|(_, r)| *r).count();
    let n_delete = total - n_retain;
    let t = Instant::now();
    futures::stream::iter(plan.clone())
        .map(|(name, retain)| {
            let (pvs, claims) = (pvs.clone(), claims.clone());
            async move {
                let (sc, policy) = if retain {
                    ("churn-retain", "Retain")
                } else {
                    ("churn-delete", "Delete")
                };
                let mut p = pv(&name, sc, "1Gi", policy);
                p.metadata.annotations = Some(
                    [(
                        "pv.kubernetes.io/provisioned-by".to_string(),
                        "churn.csi.leftovers.dev".to_string(),
                    )]
                    .into(),
                );
                let spec = p.spec.as_mut().unwrap();
                spec.host_path = None;
                spec.csi = Some(CSIPersistentVolumeSource {
                    driver: "churn.csi.leftovers.dev".into(),
                    volume_handle: format!("h-{name}"),
                    ..Default::default()
                });
                // Pre-bound to its claim, so binding is one step per pair.
                spec.claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(ns.into()),
                    name: Some(name.clone()),
                    ..Default::default()
                });
                create(&pvs, &p).await;
                let mut c = pvc(ns, &name, sc, "1Gi");
                c.spec.as_mut().unwrap().volume_name = Some(name.clone());
                create(&claims, &c).await;
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    wait_for(
        "every volume to be Bound",
        Duration::from_secs(900),
        || async {
            let list = pvs.list(&Default::default()).await.ok()?;
            let bound = list
                .items
                .iter()
                .filter(|p| {
                    phase(p) == "Bound"
                        && p.metadata
                            .name
                            .as_deref()
                            .is_some_and(|n| n.starts_with("churn-"))
                })
                .count();
            (bound == total).then_some(())
        },
    )
    .await;
    eprintln!("{total} volumes bound in {:.1}s", t.elapsed().as_secs_f64());

    // The operator: the release binary, defaults, the deploy/ identity.
    let bin = repo().join("target/release/volume-leftovers");
    assert!(bin.exists(), "build it first: cargo build --release");
    let port = free_port();
    let mut operator = Running(
        Command::new(&bin)
            .args(["run", "--listen", &format!("127.0.0.1:{port}")])
            .env("KUBECONFIG", cp.kubeconfig("operator"))
            .stderr(std::fs::File::create(cp.dir.join("churn-operator.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_for("/readyz", Duration::from_secs(120), || async {
        http_get(&format!("http://127.0.0.1:{port}/readyz")).filter(|(c, _)| *c == 200)
    })
    .await;

    // Every VolumeLeftover that ever appears, and when.
    let seen: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let watch = {
        let seen = seen.clone();
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut s = watcher(
                Api::<VolumeLeftover>::all(admin),
                watcher::Config::default(),
            )
            .applied_objects()
            .boxed();
            while let Some(Ok(o)) = s.next().await {
                *seen
                    .lock()
                    .unwrap()
                    .entry(o.metadata.name.unwrap_or_default())
                    .or_default() += 1;
            }
        })
    };

    // The "provisioner": deletes each Delete-policy volume 1–60 s after it turns Released.
    let provisioner = {
        let pvs = pvs.clone();
        tokio::spawn(async move {
            let mut s = watcher(pvs.clone(), watcher::Config::default())
                .applied_objects()
                .boxed();
            let mut scheduled = std::collections::HashSet::new();
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            while let Some(Ok(p)) = s.next().await {
                let name = p.metadata.name.clone().unwrap_or_default();
                let delete_policy = p
                    .spec
                    .as_ref()
                    .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                    == Some("Delete");
                if delete_policy && phase(&p) == "Released" && scheduled.insert(name.clone()) {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let after = Duration::from_millis(1000 + rng % 59_000);
                    let pvs = pvs.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        delete(&pvs, &name).await;
                    });
                }
            }
        })
    };

    // The churn: claims deleted at RATE per second, mixed.
    let t = Instant::now();
    let tick = Duration::from_secs_f64(1.0 / rate as f64);
    for (i, (name, _)) in plan.iter().enumerate() {
        let due = tick * i as u32;
        if let Some(wait) = due.checked_sub(t.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let claims = claims.clone();
        let name = name.clone();
        tokio::spawn(async move { delete(&claims, &name).await });
    }
    let churn_s = t.elapsed().as_secs_f64();

    // Every Retain leftover published; every Delete volume gone.
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let retain_names: Vec<String> = plan
        .iter()
        .filter(|(_, r)| *r)
        .map(|(n, _)| n.clone())
        .collect();
    wait_for(
        "every Retain leftover",
        Duration::from_secs(900),
        || async {
            let list = leftovers.list_metadata(&Default::default()).await.ok()?;
            let have: std::collections::HashSet<String> = list
                .items
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .collect();
            retain_names.iter().all(|n| have.contains(n)).then_some(())
        },
    )
    .await;
    wait_for(
        "every Delete volume gone",
        Duration::from_secs(900),
        || async {
            let list = pvs.list_metadata(&Default::default()).await.ok()?;
            let left = list
                .items
                .iter()
                .filter(|p| {
                    p.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("churn-"))
                })
                .count();
            (left == n_retain).then_some(())
        },
    )
    .await;
    // A quiet moment, so late writes would show.
    tokio::time::sleep(Duration::from_secs(10)).await;
    operator.stop();
    watch.abort();
    provisioner.abort();

    // Figures.
    let audit = cp.audit();
    let mut writes: BTreeMap<String, usize> = BTreeMap::new();
    for e in &audit {
        if e["user"]["username"] == OPERATOR_USER
            && e["objectRef"]["resource"] == "volumeleftovers"
            && matches!(
                e["verb"].as_str(),
                Some("create" | "patch" | "update" | "delete")
            )
        {
            *writes
                .entry(e["objectRef"]["name"].as_str().unwrap_or("").to_string())
                .or_default() += 1;
        }
    }
    let retain_writes: Vec<usize> = retain_names
        .iter()
        .map(|n| writes.get(n).copied().unwrap_or(0))
        .collect();
    let delete_writes: usize = plan
        .iter()
        .filter(|(_, r)| !r)
        .map(|(n, _)| writes.get(n).copied().unwrap_or(0))
        .sum();
    let seen = seen.lock().unwrap().clone();
    let false_findings = plan
        .iter()
        .filter(|(n, r)| !r && seen.contains_key(n))
        .count();
    let mut latency = Vec::new();
    for n in &retain_names {
        let vl = leftovers.get(n).await.unwrap();
        let since = vl
            .status
            .as_ref()
            .and_then(|s| s.phase_since.clone())
            .expect("phaseSince");
        let created = vl.metadata.creation_timestamp.clone().unwrap();
        latency.push(created.0.duration_since(since.0).as_secs_f64());
    }
    latency.sort_by(f64::total_cmp);
    let exact = retain_writes.iter().filter(|w| **w == 2).count();
    println!(
        "churn: {n_delete} Delete-policy and {n_retain} Retain claims deleted at {rate}/s ({churn_s:.0} s); provisioner deletes 1-60 s after Released; PV controller resync {sync}"
    );
    println!(
        "writes: Retain leftovers {exact}/{n_retain} with exactly 2 requests (min {}, max {}); Delete-policy volumes {delete_writes} requests in all",
        retain_writes.iter().min().unwrap_or(&0),
        retain_writes.iter().max().unwrap_or(&0)
    );
    println!(
        "false findings: {false_findings} (a VolumeLeftover seen for a Delete-policy volume deleted in time)"
    );
    println!(
        "Released -> VolumeLeftover created (server clock, whole seconds): p50 {:.0} s, p99 {:.0} s, max {:.0} s",
        percentile(&latency, 0.5),
        percentile(&latency, 0.99),
        latency.last().copied().unwrap_or(f64::NAN)
    );
}
