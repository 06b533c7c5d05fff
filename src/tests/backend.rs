//! The census contract (`crate::census::backend`): every configured scope is some lister's, one
//! lister per cluster, project and region, and a scope this build cannot list is failed with a
//! line saying so. No backend is reached: listers are made, not called.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::census::config::CensusConfig;
use crate::census::{CensusSettings, listers, unbuilt};
use crate::decide::census::Scope;

const CONFIG: &str = r#"
clusterName: e2e
clusters:
  - clusterID: 4a7d1c2e-0000-4000-8000-000000000001
    monitors: ["127.0.0.1:6789"]
    keyring: /etc/ceph/keyring
    pools: [{name: k8s-rbd}, {name: shared, radosNamespace: team-a}]
  - clusterID: 4a7d1c2e-0000-4000-8000-000000000002
    monitors: ["127.0.0.2:6789"]
    keyring: /etc/ceph/keyring
    pools: [{name: other}]
gce:
  - project: p1
    locations: [europe-west1, europe-west1-b]
    snapshots: true
  - project: p2
ebs:
  - region: eu-west-1
    snapshots: true
"#;

fn settings() -> CensusSettings {
    CensusSettings {
        config: CensusConfig::parse(CONFIG).expect("config parses"),
        interval: Duration::from_secs(300),
        image_grace: Duration::from_secs(3600),
        timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(300),
    }
}

#[test]
fn every_configured_scope_is_one_lister_s_and_each_lister_is_one_section_s() {
    let s = settings();
    let listers = listers(&s);
    // Two Ceph clusters, two GCE projects, one EBS region.
    assert_eq!(listers.len(), 5);
    let mut covered = Vec::new();
    for l in &listers {
        covered.extend(l.scopes());
    }
    let unique: BTreeSet<Scope> = covered.iter().cloned().collect();
    assert_eq!(unique.len(), covered.len(), "a scope two listers report");
    let configured: BTreeSet<Scope> = s.config.census(s.image_grace).pools.into_keys().collect();
    assert_eq!(unique, configured);
    assert!(unbuilt(&s, &listers).is_empty());
    // Only Ceph lists some disks' details apart (scan's third listing).
    let apart: Vec<bool> = listers.iter().map(|l| l.reads_details_apart()).collect();
    assert_eq!(apart, [true, true, false, false, false]);
}

#[test]
fn a_scope_no_lister_covers_is_failed_saying_why() {
    let s = settings();
    // As a build without the cloud features would have them: the Ceph listers alone.
    let ceph_only: Vec<_> = listers(&s)
        .into_iter()
        .filter(|l| l.reads_details_apart())
        .collect();
    let reports = unbuilt(&s, &ceph_only);
    // In the scopes' order: by backend name, then disks before snapshots.
    let keys: Vec<String> = reports.iter().map(|r| r.key.to_string()).collect();
    assert_eq!(
        keys,
        [
            "ebs:eu-west-1",
            "ebs:eu-west-1/snapshots",
            "gce:p1/europe-west1",
            "gce:p1/europe-west1-b",
            "gce:p2",
            "gce:p1/snapshots",
        ]
    );
    let lines: BTreeSet<String> = reports
        .iter()
        .map(|r| r.result.as_ref().unwrap_err().message.clone())
        .collect();
    assert_eq!(
        lines,
        [
            "this build has no EBS census (the ebs feature is off)".to_string(),
            "this build has no GCE census (the gce feature is off)".to_string(),
        ]
        .into()
    );
}

/// A lister that counts its listings and reports one empty scope each time.
struct Counting(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl crate::census::backend::Lister for Counting {
    fn scopes(&self) -> Vec<Scope> {
        vec![crate::census::ebs::vocabulary::region(None, "eu-west-1")]
    }

    fn list<'a>(
        &'a mut self,
        _reading: crate::census::backend::Reading<'a>,
    ) -> futures::future::BoxFuture<'a, Vec<crate::census::CensusReport>> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Vec::new() })
    }
}

#[tokio::test]
async fn the_loop_runs_every_lister_every_interval_once_the_pv_store_is_ready() {
    use kube::runtime::{reflector, watcher};
    let (store, mut writer) = reflector::store::<crate::model::volume::Volume>();
    let (tx, mut rx) = tokio::sync::mpsc::channel(8);
    let counts: Vec<_> = (0..3)
        .map(|_| std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0)))
        .collect();
    let listers: Vec<Box<dyn crate::census::backend::Lister>> = counts
        .iter()
        .map(|c| Box::new(Counting(c.clone())) as Box<dyn crate::census::backend::Lister>)
        .collect();
    let task = tokio::spawn(crate::census::backend::run(
        listers,
        Duration::from_millis(10),
        store,
        tx,
    ));
    let load = |c: &std::sync::Arc<std::sync::atomic::AtomicUsize>| {
        c.load(std::sync::atomic::Ordering::SeqCst)
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        counts.iter().all(|c| load(c) == 0),
        "listed before the PV store was ready"
    );
    writer.apply_watcher_event(&watcher::Event::Init);
    writer.apply_watcher_event(&watcher::Event::InitDone);
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (i, c) in counts.iter().enumerate() {
        let n = load(c);
        assert!(
            n >= 3,
            "lister {i} listed {n} times in 200 ms at a 10 ms interval"
        );
    }
    rx.close();
    task.await.unwrap();
}
