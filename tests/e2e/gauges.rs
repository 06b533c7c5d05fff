//! The gauges that the alerts (prometheus/alerts.yaml) and the dashboard
//! (charts/volume-leftovers/files/dashboard.json) read, against what `kubectl get
//! volumeleftovers` shows: findings and their capacity by reason, StorageClass and state, the
//! age of the oldest open finding, findings held in their grace, undecided, skipped and ignored
//! volumes. On a control plane of its own, so that every count is exact.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use volume_leftovers::model::crd::{Reason, State, VolumeLeftover};
use volume_leftovers::model::labels::{MANAGED_BY, MANAGED_BY_VALUE};
use volume_leftovers::telemetry::Metrics;

use crate::support::*;

/// (reason, storage_class, state), as the gauges label a finding.
type Key = (String, String, String);

/// What the gauges must say, computed from the listed VolumeLeftovers.
#[derive(Debug, Default)]
struct Expected {
    findings: BTreeMap<Key, f64>,
    capacity: BTreeMap<Key, f64>,
    /// The oldest open finding's firstSeen, in seconds since the epoch, by reason.
    oldest_first_seen: BTreeMap<String, i64>,
}

/// The VolumeLeftovers as `kubectl get volumeleftovers -o json` shows them.
fn kubectl_leftovers(cp: &ControlPlane) -> Vec<VolumeLeftover> {
    let out = cp
        .kubectl_ok(&["get", "volumeleftovers", "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("kubectl's JSON");
    serde_json::from_value(v["items"].clone()).expect("VolumeLeftovers")
}

fn expected(list: &[VolumeLeftover]) -> Expected {
    let mut e = Expected::default();
    for o in list {
        let managed = o
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .is_some_and(|v| v == MANAGED_BY_VALUE);
        let Some(s) = o.status.as_ref().filter(|_| managed) else {
            continue;
        };
        let key = (
            s.reason.as_str().to_string(),
            s.storage_class
                .as_ref()
                .map(|c| c.name.clone())
                .unwrap_or_default(),
            s.state.as_str().to_string(),
        );
        *e.findings.entry(key.clone()).or_default() += 1.0;
        *e.capacity.entry(key).or_default() += s.capacity_bytes.unwrap_or(0) as f64;
        if s.state.is_open() {
            let first = s.first_seen.0.as_second();
            let oldest = e
                .oldest_first_seen
                .entry(s.reason.as_str().to_string())
                .or_insert(first);
            *oldest = (*oldest).min(first);
        }
    }
    e
}

/// A labelled family against its expected values: every series the operator exports equals
/// the list's count (0 where the list has none), and every group of the list has its series.
fn compare_family(metrics: &Metrics, name: &str, want: &BTreeMap<Key, f64>, out: &mut Vec<String>) {
    let series = samples(metrics, name);
    let mut seen = BTreeMap::new();
    for (labels, v) in series {
        let key = (
            labels.get("reason").cloned().unwrap_or_default(),
            labels.get("storage_class").cloned().unwrap_or_default(),
            labels.get("state").cloned().unwrap_or_default(),
        );
        seen.insert(key, v);
    }
    for (key, v) in &seen {
        let w = want.get(key).copied().unwrap_or(0.0);
        if *v != w {
            out.push(format!("{name}{key:?} = {v}, the list says {w}"));
        }
    }
    for (key, w) in want {
        if !seen.contains_key(key) {
            out.push(format!("{name}{key:?} missing, the list says {w}"));
        }
    }
}

/// Everything in which the gauges differ from the list; empty when they agree.
fn mismatches(metrics: &Metrics, list: &[VolumeLeftover]) -> Vec<String> {
    let want = expected(list);
    let mut out = Vec::new();
    compare_family(
        metrics,
        "volume_leftovers_findings",
        &want.findings,
        &mut out,
    );
    compare_family(
        metrics,
        "volume_leftovers_findings_capacity_bytes",
        &want.capacity,
        &mut out,
    );
    // The ages are refreshed every 15 s: a reading may be that much behind the clock.
    let now = jiff::Timestamp::now().as_second();
    for r in Reason::ALL {
        let sample = format!(
            r#"volume_leftovers_oldest_open_finding_seconds{{reason="{}"}}"#,
            r.as_str()
        );
        let v = metric(metrics, &sample);
        match want.oldest_first_seen.get(r.as_str()) {
            None if v != 0.0 => out.push(format!("{sample} = {v}, no open finding")),
            None => {}
            Some(first) => {
                let age = (now - first) as f64;
                if !(age - 17.0..=age + 1.0).contains(&v) {
                    out.push(format!("{sample} = {v}, the oldest is {age} s old"));
                }
            }
        }
    }
    out
}

/// Waits until the operator has decided everything (one finding may be held in its grace) and
/// its gauges agree with `kubectl get volumeleftovers`
/// (the age gauge lags the clock by up to 15 s); returns the list.
async fn converged(cp: &ControlPlane, operator: &Operator) -> Vec<VolumeLeftover> {
    let mut last = Vec::new();
    for _ in 0..40 {
        operator.wait_decided().await;
        let list = kubectl_leftovers(cp);
        last = mismatches(&operator.metrics, &list);
        if last.is_empty() {
            return list;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!(
        "the gauges do not say what kubectl get volumeleftovers shows:\n{}\n{}",
        last.join("\n"),
        operator.metrics.encode()
    );
}

fn count(metrics: &Metrics, reason: &str, class: &str, state: &str) -> f64 {
    metric_or_zero(
        metrics,
        &format!(
            r#"volume_leftovers_findings{{reason="{reason}",storage_class="{class}",state="{state}"}}"#
        ),
    )
}

fn capacity(metrics: &Metrics, reason: &str, class: &str, state: &str) -> f64 {
    metric_or_zero(
        metrics,
        &format!(
            r#"volume_leftovers_findings_capacity_bytes{{reason="{reason}",storage_class="{class}",state="{state}"}}"#
        ),
    )
}

const GI: f64 = 1024.0 * 1024.0 * 1024.0;

/// A volume of `class` bound to a claim `data` in a namespace of its own, then released: the
/// claim names its volume, so volumes of the same class never swap claims.
async fn released_in(client: &Client, class: &str, size: &str, reclaim: &str) -> (String, String) {
    let name = unique("gauge-pv");
    let ns = unique("gauge-ns");
    create_ns(client, &ns).await;
    let pvs = Api::<PersistentVolume>::all(client.clone());
    create(&pvs, &pv(&name, class, size, reclaim)).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let mut c = pvc(&ns, "data", class, size);
    c.spec.as_mut().unwrap().volume_name = Some(name.clone());
    create(&claims, &c).await;
    wait_pv_phase(&pvs, &name, "Bound").await;
    delete(&claims, "data").await;
    (name, ns)
}

/// An acknowledgement as a ticketing controller writes it: server-side apply of
/// `spec.acknowledgement` under its own field manager (docs/reasons.md, Acknowledging).
async fn acknowledge(api: &Api<VolumeLeftover>, name: &str, ticket: &str) {
    let body = json!({
        "apiVersion": "leftovers.dev/v1alpha1",
        "kind": "VolumeLeftover",
        "metadata": {"name": name},
        "spec": {"acknowledgement": {"by": "ticket-bot", "reason": "kept", "ticket": ticket}},
    });
    api.patch(
        name,
        &PatchParams::apply("ticket-bot").force(),
        &Patch::Apply(&body),
    )
    .await
    .unwrap_or_else(|e| panic!("acknowledging {name}: {e}"));
}

async fn wait_pending(operator: &Operator, n: f64) {
    let m = operator.metrics.clone();
    wait_for(
        &format!("{n} finding(s) held in the grace"),
        Duration::from_secs(60),
        || {
            let ok = pending_total(&m) == n;
            async move { ok.then_some(()) }
        },
    )
    .await;
}

fn state(o: &VolumeLeftover) -> Option<State> {
    o.status.as_ref().map(|s| s.state)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gauges_alerts_and_dashboard_read_say_what_kubectl_shows() {
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let classes = Api::<StorageClass>::all(admin.clone());
    let (sc_a, sc_b, sc_del) = (unique("gauge-a"), unique("gauge-b"), unique("gauge-del"));
    create(&classes, &class(&sc_a, "Retain")).await;
    create(&classes, &class(&sc_b, "Retain")).await;
    create(&classes, &class(&sc_del, "Delete")).await;

    // A Delete volume whose claim is gone is held for the delete grace, for the whole test.
    let mut settings = test_settings();
    settings.graces.delete_grace = Duration::from_secs(600);
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_synced().await;

    let (a1, _) = released_in(&admin, &sc_a, "1Gi", "Retain").await;
    let (a2, _) = released_in(&admin, &sc_a, "2Gi", "Retain").await;
    let (acked, _) = released_in(&admin, &sc_a, "4Gi", "Retain").await;
    let (b1, b1_ns) = released_in(&admin, &sc_b, "3Gi", "Retain").await;
    let (tomb, _) = released_in(&admin, &sc_b, "5Gi", "Retain").await;
    let (held, _) = released_in(&admin, &sc_del, "1Gi", "Delete").await;
    let (ignored, _) = released_in(&admin, &sc_a, "1Gi", "Retain").await;
    pvs.patch(
        &ignored,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"leftovers.dev/ignore": "true"}}})),
    )
    .await
    .unwrap();
    for n in [&a1, &a2, &acked, &b1, &tomb] {
        wait_leftover(&leftovers, n, "ClaimDeleted", |o| {
            reason(o) == Some(Reason::ClaimDeleted)
        })
        .await;
    }
    acknowledge(&leftovers, &acked, "OPS-1").await;
    wait_leftover(&leftovers, &acked, "Acknowledged", |o| {
        state(o) == Some(State::Acknowledged)
    })
    .await;
    // A Retain volume deleted with its finding: the tombstone stays.
    delete(&pvs, &tomb).await;
    wait_leftover(&leftovers, &tomb, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;

    // The held one is held (not published), the rest agree with the list.
    wait_pending(&operator, 1.0).await;
    let list = converged(&cp, &operator).await;
    let mut names: Vec<&str> = list
        .iter()
        .filter_map(|o| o.metadata.name.as_deref())
        .collect();
    names.sort_unstable();
    let mut want = vec![
        a1.as_str(),
        a2.as_str(),
        acked.as_str(),
        b1.as_str(),
        tomb.as_str(),
    ];
    want.sort_unstable();
    assert_eq!(names, want, "the findings, and nothing held or ignored");
    // A few exact figures, so that agreement cannot be two empty sets.
    let m = &operator.metrics;
    assert_eq!(count(m, "ClaimDeleted", &sc_a, "Open"), 2.0);
    assert_eq!(capacity(m, "ClaimDeleted", &sc_a, "Open"), 3.0 * GI);
    assert_eq!(count(m, "ClaimDeleted", &sc_a, "Acknowledged"), 1.0);
    assert_eq!(capacity(m, "ClaimDeleted", &sc_a, "Acknowledged"), 4.0 * GI);
    assert_eq!(count(m, "ClaimDeleted", &sc_b, "Open"), 1.0);
    assert_eq!(count(m, "VolumeDeleted", &sc_b, "Open"), 1.0);
    assert_eq!(capacity(m, "VolumeDeleted", &sc_b, "Open"), 5.0 * GI);
    assert_eq!(pending_total(m), 1.0, "the Delete volume, in its grace");
    assert_eq!(metric(m, "volume_leftovers_ignored_volumes"), 1.0);
    assert_eq!(metric(m, "volume_leftovers_undecided_volumes"), 0.0);
    assert_eq!(metric(m, "volume_leftovers_skipped_volumes"), 0.0);

    // Changes: a finding resolved (its volume reused: claimRef cleared), an acknowledged
    // finding whose reason changes (a claim of that name again: Superseded), the held volume
    // reused within its grace. (Deleting it instead would leave its disk, and a tombstone.)
    pvs.patch(
        &a1,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    wait_leftover_gone(&leftovers, &a1).await;
    acknowledge(&leftovers, &b1, "OPS-2").await;
    wait_leftover(&leftovers, &b1, "Acknowledged", |o| {
        state(o) == Some(State::Acknowledged)
    })
    .await;
    create(
        &Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &b1_ns),
        &pvc(&b1_ns, "data", &sc_b, "3Gi"),
    )
    .await;
    wait_leftover(&leftovers, &b1, "ClaimRecreated, Superseded", |o| {
        reason(o) == Some(Reason::ClaimRecreated) && state(o) == Some(State::Superseded)
    })
    .await;
    pvs.patch(
        &held,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    wait_pending(&operator, 0.0).await;

    let list = converged(&cp, &operator).await;
    assert_eq!(list.len(), 4, "a1 resolved, the held one never published");
    let m = &operator.metrics;
    assert_eq!(count(m, "ClaimDeleted", &sc_a, "Open"), 1.0);
    assert_eq!(capacity(m, "ClaimDeleted", &sc_a, "Open"), 2.0 * GI);
    assert_eq!(count(m, "ClaimDeleted", &sc_b, "Open"), 0.0);
    assert_eq!(count(m, "ClaimDeleted", &sc_b, "Acknowledged"), 0.0);
    assert_eq!(count(m, "ClaimRecreated", &sc_b, "Superseded"), 1.0);
    assert_eq!(capacity(m, "ClaimRecreated", &sc_b, "Superseded"), 3.0 * GI);
    assert_eq!(pending_total(m), 0.0);
    assert_eq!(metric(m, "volume_leftovers_ignored_volumes"), 1.0);
    assert_eq!(metric(m, "volume_leftovers_undecided_volumes"), 0.0);
    operator.stop().await;
}
