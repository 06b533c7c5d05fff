//! Prometheus metrics, grouped by the subsystem that records them; each group registers its own
//! metrics. `Metrics` holds the registry and the groups, and is what the rest of the operator
//! records through.

mod census;
mod common;
mod decisions;
mod events;
mod feeds;
mod findings;
mod replica;
mod writes;

use std::time::Duration;

use prometheus_client::registry::Registry;

pub use self::census::CensusLabels;
use self::census::CensusMetrics;
use self::decisions::DecisionMetrics;
use self::events::EventMetrics;
use self::feeds::FeedMetrics;
use self::findings::FindingMetrics;
use self::replica::ReplicaMetrics;
use self::writes::WriteMetrics;
use crate::decide::name::Published;
use crate::model::crd::Reason;
use crate::telemetry::health::{Kind, StoreState};
use crate::watch::category::Category;

/// Prometheus metrics, all named `volume_leftovers_*`.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    feeds: FeedMetrics,
    writes: WriteMetrics,
    events: EventMetrics,
    findings: FindingMetrics,
    replica: ReplicaMetrics,
    decisions: DecisionMetrics,
    census: CensusMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("volume_leftovers");
        // Fields are initialised in the order written: the exposition lists the groups so.
        Metrics {
            feeds: FeedMetrics::new(&mut registry),
            writes: WriteMetrics::new(&mut registry),
            events: EventMetrics::new(&mut registry),
            findings: FindingMetrics::new(&mut registry),
            replica: ReplicaMetrics::new(&mut registry),
            decisions: DecisionMetrics::new(&mut registry),
            census: CensusMetrics::new(&mut registry),
            registry,
        }
    }
}

impl Metrics {
    /// Makes every family appear in the exposition (labelled families at their known label
    /// values, at 0), so dashboards and alerts see series before anything happens.
    pub fn init_reasons(&self) {
        self.events.init();
        self.decisions.init();
        self.findings.init();
        self.feeds.init();
        self.writes.init();
    }

    /// The metrics in the text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts a failed list or watch.
    pub fn watch_error(&self, kind: Kind, category: Category) {
        self.feeds.watch_error(kind, category);
    }

    /// Counts a completed list.
    pub fn relisted(&self, kind: Kind) {
        self.feeds.relisted(kind);
    }

    /// Counts a look at whether the ClusterReport needs writing.
    pub fn report_checked(&self) {
        self.replica.report_checked();
    }

    /// How many snapshot objects are kept out of the report.
    pub fn snapshots_excluded(&self, contents: usize, snapshots: usize) {
        self.feeds.snapshots_excluded(contents, snapshots);
    }

    /// Exposes a store state.
    pub fn store_state(&self, kind: Kind, state: StoreState) {
        self.feeds.store_state(kind, state);
    }

    /// Counts a write: `result` is `ok`, `outdated` or an error category.
    pub fn write(&self, op: &'static str, result: &'static str, requests: u32) {
        self.writes.write(op, result, requests);
    }

    /// Exposes the write-wide condition.
    pub fn writes_blocked(&self, blocked: bool) {
        self.writes.blocked(blocked);
    }

    /// Records how long a write took.
    pub fn write_duration(&self, op: &'static str, d: Duration) {
        self.writes.duration(op, d);
    }

    /// Exposes the backlog: names waiting to be decided and writes in flight.
    pub(crate) fn backlog(&self, queued: usize, in_flight: usize) {
        self.decisions.queued(queued);
        self.writes.in_flight(in_flight);
    }

    /// Counts an Event about a finding: `published`, `failed` or `dropped`.
    pub(crate) fn event(&self, result: &'static str) {
        self.events.event(result);
    }

    /// Adds `delta` to the published findings of `p`'s labels and its capacity.
    pub fn finding(&self, p: &Published, delta: i64) {
        self.findings.add(p, delta);
    }

    /// Sets the age of the oldest open finding of `reason`.
    pub fn oldest_open(&self, reason: Reason, seconds: i64) {
        self.findings.oldest_open(reason, seconds);
    }

    /// Whether /readyz answers 200.
    pub fn ready(&self, ready: bool) {
        self.replica.ready(ready);
    }

    /// Exposes whether this replica leads; counts each time it starts leading.
    pub fn leader(&self, leading: bool) {
        self.replica.leader(leading);
    }

    /// Counts an evaluation.
    pub(crate) fn decided(&self) {
        self.decisions.decided();
    }

    /// Records how long a decision took.
    pub fn decision_duration(&self, d: Duration) {
        self.decisions.duration(d);
    }

    /// Adds `delta` to the findings of `reason` waiting for their grace period.
    pub fn pending(&self, reason: Reason, delta: i64) {
        self.decisions.pending(reason, delta);
    }

    /// Adds `delta` to the undecided volumes.
    pub fn undecided(&self, delta: i64) {
        self.decisions.undecided(delta);
    }

    /// Adds `delta` to the skipped volumes.
    pub fn skipped(&self, delta: i64) {
        self.decisions.skipped(delta);
    }

    /// Adds `delta` to the volumes kept out of the report on purpose.
    pub fn ignored(&self, delta: i64) {
        self.decisions.ignored(delta);
    }

    /// Records a completed census of a scope: a Ceph pool by its label
    /// (`cluster/pool[/namespace]`), or any [`Scope`](crate::model::backend::Scope).
    pub fn census_done(
        &self,
        scope: impl Into<CensusLabels>,
        images: usize,
        unread: usize,
        seconds: f64,
        requests: u64,
    ) {
        self.census
            .done(scope.into(), images, unread, seconds, requests);
    }

    /// Records a failed census of a scope.
    pub(crate) fn census_failed(&self, scope: impl Into<CensusLabels>, requests: u64) {
        self.census.failed(scope.into(), requests);
    }

    /// Exposes a scope that has not been censused yet (its answers are Unknown).
    pub(crate) fn census_pending(&self, scope: impl Into<CensusLabels>) {
        self.census.pending(scope.into());
    }
}
