//! Metrics of the decisions: how many and how long, the queue of names waiting for one, and the
//! volumes held back (waiting for grace, undecided, skipped, ignored).

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::common::{ReasonLabel, registered};
use crate::model::crd::Reason;

#[derive(Debug)]
pub(super) struct DecisionMetrics {
    duration: Histogram,
    pending: Family<ReasonLabel, Gauge>,
    undecided: Gauge,
    skipped: Gauge,
    ignored: Gauge,
    decisions: Counter,
    queued: Gauge,
}

impl DecisionMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        DecisionMetrics {
            duration: registered(
                registry,
                "decision_duration_seconds",
                "Time one decision (classification and planning of a PV name) took",
                Histogram::new(exponential_buckets(0.000_01, 4.0, 10)),
            ),
            pending: registered(
                registry,
                "pending_findings",
                "Findings waiting for their grace period, by reason",
                Family::default(),
            ),
            undecided: registered(
                registry,
                "undecided_volumes",
                "PersistentVolumes that cannot be decided now (a store they depend on is stale, or claims are forbidden)",
                Gauge::default(),
            ),
            skipped: registered(
                registry,
                "skipped_volumes",
                "PersistentVolumes too odd to classify (each logged once)",
                Gauge::default(),
            ),
            ignored: registered(
                registry,
                "ignored_volumes",
                "PersistentVolumes kept out of the report on purpose (leftovers.dev/ignore, excluded classes or selector)",
                Gauge::default(),
            ),
            decisions: registered(
                registry,
                "decisions",
                "Evaluations of a PersistentVolume name",
                Counter::default(),
            ),
            queued: registered(
                registry,
                "queued_volumes",
                "PersistentVolume names waiting to be decided",
                Gauge::default(),
            ),
        }
    }

    /// Every reason with nothing pending.
    pub(super) fn init(&self) {
        for r in Reason::ALL {
            self.pending(r, 0);
        }
    }

    pub(super) fn duration(&self, took: Duration) {
        self.duration.observe(took.as_secs_f64());
    }

    pub(super) fn decided(&self) {
        self.decisions.inc();
    }

    pub(super) fn pending(&self, reason: Reason, delta: i64) {
        self.pending
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .inc_by(delta);
    }

    pub(super) fn undecided(&self, delta: i64) {
        self.undecided.inc_by(delta);
    }

    pub(super) fn skipped(&self, delta: i64) {
        self.skipped.inc_by(delta);
    }

    pub(super) fn ignored(&self, delta: i64) {
        self.ignored.inc_by(delta);
    }

    pub(super) fn queued(&self, queued: usize) {
        self.queued.set(i64::try_from(queued).unwrap_or(i64::MAX));
    }
}
