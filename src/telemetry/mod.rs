//! Readiness, metrics and the HTTP endpoints that show them (`/healthz`, `/readyz`, `/metrics`).
//! I/O: only `server` does any (it serves HTTP); nothing here talks to the API server.
//!
//! - `health`: each store's state, the writes-blocked reason, and what `/readyz` says.
//! - `server`: the endpoints.

mod health;
mod server;

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

pub use health::{CRD_FIX, Health, Kind, StoreHealth, StoreState, Trust};
pub use server::serve;

use crate::model::crd::Reason;
use crate::watch::category::Category;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    resource: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindCategoryLabel {
    resource: Kind,
    category: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabel {
    op: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FindingLabels {
    reason: &'static str,
    storage_class: String,
    state: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OpLabel {
    op: &'static str,
}

fn write_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// Prometheus metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    watch_errors: Family<KindCategoryLabel, Counter>,
    relists: Family<KindLabel, Counter>,
    store_state: Family<KindLabel, Gauge>,
    writes: Family<WriteLabel, Counter>,
    write_requests: Counter,
    writes_blocked: Gauge,
    findings: Family<FindingLabels, Gauge>,
    capacity: Family<FindingLabels, Gauge>,
    oldest_open: Family<ReasonLabel, Gauge>,
    pending: Family<ReasonLabel, Gauge>,
    ready: Gauge,
    write_duration: Family<OpLabel, Histogram, fn() -> Histogram>,
    decision_duration: Histogram,
    undecided: Gauge,
    skipped: Gauge,
    ignored: Gauge,
    decisions: Counter,
    queued: Gauge,
    in_flight: Gauge,
    leader: Gauge,
    leader_transitions: Counter,
    census_up: Family<PoolLabel, Gauge>,
    census_images: Family<PoolLabel, Gauge>,
    census_images_unread: Family<PoolLabel, Gauge>,
    census_duration: Family<PoolLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    census_requests: Family<PoolLabel, Counter>,
    census_runs: Family<PoolLabel, Counter>,
    census_failures: Family<PoolLabel, Counter>,
    events: Family<ResultLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("volume_leftovers");
        let watch_errors = Family::<KindCategoryLabel, Counter>::default();
        registry.register(
            "watch_errors",
            "Failed lists and watches, by resource and category (each is retried with backoff)",
            watch_errors.clone(),
        );
        let relists = Family::<KindLabel, Counter>::default();
        registry.register(
            "relists",
            "Completed lists (initial, and after a 410 or a failure)",
            relists.clone(),
        );
        let store_state = Family::<KindLabel, Gauge>::default();
        registry.register(
            "store_state",
            "0 pending, 1 synced, 2 forbidden (403), 3 degraded (watch failing)",
            store_state.clone(),
        );
        let writes = Family::<WriteLabel, Counter>::default();
        registry.register(
            "writes",
            "Writes to VolumeLeftovers by operation and result (ok, outdated, or the error category)",
            writes.clone(),
        );
        let events = Family::<ResultLabel, Counter>::default();
        registry.register(
            "events",
            "Kubernetes Events about findings on their PersistentVolumes, by result: published, failed (refused or not answered in time), dropped (4 in flight, or over 10/s after a burst of 100)",
            events.clone(),
        );
        let write_requests = Counter::default();
        registry.register(
            "write_requests",
            "HTTP requests sent to write VolumeLeftovers",
            write_requests.clone(),
        );
        let writes_blocked = Gauge::default();
        registry.register(
            "writes_blocked",
            "1 while writes fail as a whole (403 or missing CRD on VolumeLeftovers, or failures on several findings in a row)",
            writes_blocked.clone(),
        );
        let findings = Family::<FindingLabels, Gauge>::default();
        registry.register(
            "findings",
            "Published findings (VolumeLeftovers managed by the operator) by reason, StorageClass and state; every replica exports them from its cache (aggregate with max)",
            findings.clone(),
        );
        let capacity = Family::<FindingLabels, Gauge>::default();
        registry.register(
            "findings_capacity_bytes",
            "Capacity held by published findings, in bytes, by reason, StorageClass and state",
            capacity.clone(),
        );
        let oldest_open = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "oldest_open_finding_seconds",
            "Age since firstSeen of the oldest finding that needs attention (Open, Expired, Superseded), by reason; 0 when none",
            oldest_open.clone(),
        );
        let ready = Gauge::default();
        registry.register("ready", "1 when /readyz answers 200", ready.clone());
        let write_duration =
            Family::<OpLabel, Histogram, fn() -> Histogram>::new_with_constructor(write_buckets);
        registry.register(
            "write_duration_seconds",
            "Time a write to a VolumeLeftover took (all its requests), by operation",
            write_duration.clone(),
        );
        let decision_duration = Histogram::new(exponential_buckets(0.000_01, 4.0, 10));
        registry.register(
            "decision_duration_seconds",
            "Time one decision (classification and planning of a PV name) took",
            decision_duration.clone(),
        );
        let pending = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "pending_findings",
            "Findings waiting for their grace period, by reason",
            pending.clone(),
        );
        let undecided = Gauge::default();
        registry.register(
            "undecided_volumes",
            "PersistentVolumes that cannot be decided now (a store they depend on is stale, or claims are forbidden)",
            undecided.clone(),
        );
        let skipped = Gauge::default();
        registry.register(
            "skipped_volumes",
            "PersistentVolumes too odd to classify (each logged once)",
            skipped.clone(),
        );
        let ignored = Gauge::default();
        registry.register(
            "ignored_volumes",
            "PersistentVolumes kept out of the report on purpose (leftovers.dev/ignore, excluded classes or selector)",
            ignored.clone(),
        );
        let decisions = Counter::default();
        registry.register(
            "decisions",
            "Evaluations of a PersistentVolume name",
            decisions.clone(),
        );
        let queued = Gauge::default();
        registry.register(
            "queued_volumes",
            "PersistentVolume names waiting to be decided",
            queued.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "writes_in_flight",
            "Writes to VolumeLeftovers in flight",
            in_flight.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the Lease and decides (always 1 without leader election)",
            leader.clone(),
        );
        let leader_transitions = Counter::default();
        registry.register(
            "leader_transitions",
            "Times this replica became the leader",
            leader_transitions.clone(),
        );
        let census_up = Family::<PoolLabel, Gauge>::default();
        registry.register(
            "census_up",
            "1 when the last census of the pool (cluster/pool[/namespace]) completed, 0 when it failed or has not run (its answers are Unknown)",
            census_up.clone(),
        );
        let census_images = Family::<PoolLabel, Gauge>::default();
        registry.register(
            "census_images",
            "Images listed by the last complete census of the pool",
            census_images.clone(),
        );
        let census_images_unread = Family::<PoolLabel, Gauge>::default();
        registry.register(
            "census_images_unread",
            "Images of the pool whose details the last complete census asked for and could not read (what is published about them stays)",
            census_images_unread.clone(),
        );
        let census_duration =
            Family::<PoolLabel, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "census_duration_seconds",
            "How long the last census of the pool took",
            census_duration.clone(),
        );
        let census_requests = Family::<PoolLabel, Counter>::default();
        registry.register(
            "census_requests",
            "librados/librbd calls made by censuses of the pool",
            census_requests.clone(),
        );
        let census_runs = Family::<PoolLabel, Counter>::default();
        registry.register(
            "census_runs",
            "Censuses of the pool that completed",
            census_runs.clone(),
        );
        let census_failures = Family::<PoolLabel, Counter>::default();
        registry.register(
            "census_failures",
            "Censuses of the pool that failed (connection, timeout, refusal)",
            census_failures.clone(),
        );
        Metrics {
            census_up,
            census_images,
            census_images_unread,
            census_duration,
            census_requests,
            census_runs,
            census_failures,
            events,
            registry,
            watch_errors,
            relists,
            store_state,
            writes,
            write_requests,
            writes_blocked,
            findings,
            capacity,
            oldest_open,
            pending,
            ready,
            write_duration,
            decision_duration,
            undecided,
            skipped,
            ignored,
            decisions,
            queued,
            in_flight,
            leader,
            leader_transitions,
        }
    }
}

impl Metrics {
    /// Records a completed census of `pool`.
    pub fn census_done(
        &self,
        pool: &str,
        images: usize,
        unread: usize,
        seconds: f64,
        requests: u64,
    ) {
        let l = PoolLabel { pool: pool.into() };
        self.census_up.get_or_create(&l).set(1);
        self.census_images
            .get_or_create(&l)
            .set(i64::try_from(images).unwrap_or(i64::MAX));
        self.census_images_unread
            .get_or_create(&l)
            .set(i64::try_from(unread).unwrap_or(i64::MAX));
        self.census_duration.get_or_create(&l).set(seconds);
        self.census_requests.get_or_create(&l).inc_by(requests);
        self.census_runs.get_or_create(&l).inc();
    }

    /// Records a failed census of `pool`.
    pub fn census_failed(&self, pool: &str, requests: u64) {
        let l = PoolLabel { pool: pool.into() };
        self.census_up.get_or_create(&l).set(0);
        self.census_requests.get_or_create(&l).inc_by(requests);
        self.census_failures.get_or_create(&l).inc();
    }

    /// Exposes a pool that has not been censused yet.
    pub fn census_pending(&self, pool: &str) {
        self.census_up
            .get_or_create(&PoolLabel { pool: pool.into() })
            .set(0);
    }

    /// Counts a failed list or watch.
    pub fn watch_error(&self, kind: Kind, category: Category) {
        self.watch_errors
            .get_or_create(&KindCategoryLabel {
                resource: kind,
                category: category.as_str(),
            })
            .inc();
    }

    /// Counts a completed list.
    pub fn relisted(&self, kind: Kind) {
        self.relists
            .get_or_create(&KindLabel { resource: kind })
            .inc();
    }

    /// Exposes a store state.
    pub fn store_state(&self, kind: Kind, state: StoreState) {
        self.store_state
            .get_or_create(&KindLabel { resource: kind })
            .set(state as i64);
    }

    /// Counts a write: `result` is `ok`, `outdated` or an error category.
    pub fn write(&self, op: &'static str, result: &'static str, requests: u32) {
        self.writes.get_or_create(&WriteLabel { op, result }).inc();
        self.write_requests.inc_by(u64::from(requests));
    }

    /// Exposes the write-wide condition.
    pub fn writes_blocked(&self, blocked: bool) {
        self.writes_blocked.set(i64::from(blocked));
    }

    /// Adds `delta` to the published findings of `p`'s labels and its capacity.
    pub fn finding(&self, p: &crate::engine::schedule::Published, delta: i64) {
        let labels = FindingLabels {
            reason: p.reason.as_str(),
            storage_class: p.storage_class.clone(),
            state: p.state.as_str(),
        };
        self.findings.get_or_create(&labels).inc_by(delta);
        self.capacity
            .get_or_create(&labels)
            .inc_by(delta.saturating_mul(p.capacity_bytes));
    }

    /// Sets the age of the oldest open finding of `reason`.
    pub fn oldest_open(&self, reason: Reason, seconds: i64) {
        self.oldest_open
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .set(seconds);
    }

    /// Records how long a write took.
    pub fn write_duration(&self, op: &'static str, d: Duration) {
        self.write_duration
            .get_or_create(&OpLabel { op })
            .observe(d.as_secs_f64());
    }

    /// Records how long a decision took.
    pub fn decision_duration(&self, d: Duration) {
        self.decision_duration.observe(d.as_secs_f64());
    }

    /// Whether /readyz answers 200.
    pub fn ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    /// Adds `delta` to the findings of `reason` waiting for their grace period.
    pub fn pending(&self, reason: Reason, delta: i64) {
        self.pending
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc_by(delta);
    }

    /// Adds `delta` to the undecided volumes.
    pub fn undecided(&self, delta: i64) {
        self.undecided.inc_by(delta);
    }

    /// Adds `delta` to the volumes kept out of the report on purpose.
    pub fn ignored(&self, delta: i64) {
        self.ignored.inc_by(delta);
    }

    /// Adds `delta` to the skipped volumes.
    pub fn skipped(&self, delta: i64) {
        self.skipped.inc_by(delta);
    }

    /// Counts an evaluation.
    pub fn decided(&self) {
        self.decisions.inc();
    }

    /// Exposes the backlog: names waiting to be decided and writes in flight.
    pub fn backlog(&self, queued: usize, in_flight: usize) {
        self.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
    }

    /// Counts an Event about a finding: `published`, `failed` or `dropped`.
    pub fn event(&self, result: &'static str) {
        self.events.get_or_create(&ResultLabel { result }).inc();
    }

    /// Exposes whether this replica leads; counts each time it starts leading.
    pub fn leader(&self, leading: bool) {
        if leading && self.leader.get() == 0 {
            self.leader_transitions.inc();
        }
        self.leader.set(i64::from(leading));
    }

    /// Makes every family appear in the exposition (labelled families at their known label
    /// values, at 0), so dashboards and alerts see series before anything happens.
    pub fn init_reasons(&self) {
        for result in ["published", "failed", "dropped"] {
            let _ = self.events.get_or_create(&ResultLabel { result });
        }
        for r in Reason::ALL {
            self.pending(r, 0);
            self.oldest_open(r, 0);
        }
        for k in Kind::ALL {
            let _ = self.relists.get_or_create(&KindLabel { resource: k });
            self.store_state(k, StoreState::Pending);
        }
        for op in ["create", "apply", "delete"] {
            let _ = self.writes.get_or_create(&WriteLabel { op, result: "ok" });
            let _ = self.write_duration.get_or_create(&OpLabel { op });
        }
    }

    /// The metrics in the text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
