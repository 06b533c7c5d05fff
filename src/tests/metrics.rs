//! The exposition: every family, help text, label and series stays what the dashboard, the
//! alerts, the chart and the runbooks know. `metrics.exposition` is the text expected after
//! every recording function ran once; families and series are compared sorted, because the
//! order of series within a family is a hash map's and carries no meaning.

use std::time::Duration;

use crate::decide::name::Published;
use crate::model::crd::{Reason, State};
use crate::telemetry::{Kind, Metrics, StoreState};
use crate::watch::category::Category;

/// Families in name order, each with its `# HELP` and `# TYPE` lines first and its series sorted.
fn normalised(text: &str) -> String {
    let mut families: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("# HELP") || line.starts_with("# EOF") || families.is_empty() {
            families.push(Vec::new());
        }
        families.last_mut().expect("pushed above").push(line);
    }
    let mut blocks: Vec<String> = families
        .into_iter()
        .map(|lines| {
            let (mut head, mut series): (Vec<&str>, Vec<&str>) =
                lines.into_iter().partition(|l| l.starts_with('#'));
            series.sort_unstable();
            head.append(&mut series);
            head.join("\n")
        })
        .collect();
    blocks.sort();
    blocks.join("\n") + "\n"
}

/// Every recording function, with values that show in the exposition.
fn record_everything(m: &Metrics) {
    m.census_pending("fsid/pending");
    m.init_reasons();
    m.watch_error(Kind::persistentvolumes, Category::Unavailable);
    m.relisted(Kind::persistentvolumes);
    m.store_state(Kind::persistentvolumes, StoreState::Synced);
    m.write("create", "ok", 2);
    m.write("apply", "outdated", 1);
    m.writes_blocked(true);
    m.write_duration("create", Duration::from_millis(20));
    m.decision_duration(Duration::from_micros(30));
    let p = Published {
        reason: Reason::ClaimDeleted,
        storage_class: "standard".into(),
        state: State::Open,
        capacity_bytes: 1 << 30,
        first_seen: 0,
        monthly_cost: Some(("USD".into(), 1700)),
    };
    m.finding(&p, 1);
    m.finding(&p, 1);
    m.oldest_open(Reason::ClaimDeleted, 60);
    m.pending(Reason::BoundClaimMissing, 1);
    m.undecided(2);
    m.skipped(3);
    m.ignored(4);
    m.decided();
    m.decided();
    m.backlog(5, 6);
    m.event("published");
    m.event("dropped");
    m.leader(true);
    m.leader(false);
    m.leader(true);
    m.ready(true);
    m.report_checked();
    m.census_done("fsid/k8s-rbd", 3, 1, 0.1, 2);
    m.census_failed("fsid/other", 4);
}

#[test]
fn the_exposition_is_the_one_dashboards_and_alerts_know() {
    let m = Metrics::default();
    record_everything(&m);
    let got = normalised(&m.encode());
    let want = include_str!("metrics.exposition");
    assert!(
        got == want,
        "the exposition changed; if on purpose, update src/tests/metrics.exposition (and the \
         dashboard, alerts and docs that name it) to:\n{got}"
    );
}
