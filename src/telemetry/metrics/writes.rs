//! Metrics of the writes to VolumeLeftovers: outcomes, requests, durations, in flight, blocked.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::common::registered;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabel {
    op: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OpLabel {
    op: &'static str,
}

/// 12 buckets doubling from 5 ms (the last bound is 10.24 s).
fn write_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 12))
}

/// The operations a write performs.
const OPS: [&str; 3] = ["create", "apply", "delete"];

#[derive(Debug)]
pub(super) struct WriteMetrics {
    writes: Family<WriteLabel, Counter>,
    requests: Counter,
    blocked: Gauge,
    duration: Family<OpLabel, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
}

impl WriteMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        WriteMetrics {
            writes: registered(
                registry,
                "writes",
                "Writes to VolumeLeftovers by operation and result (ok, outdated, or the error category)",
                Family::default(),
            ),
            requests: registered(
                registry,
                "write_requests",
                "HTTP requests sent to write VolumeLeftovers",
                Counter::default(),
            ),
            blocked: registered(
                registry,
                "writes_blocked",
                "1 while writes fail as a whole (403 or missing CRD on VolumeLeftovers, or failures on several findings in a row)",
                Gauge::default(),
            ),
            duration: registered(
                registry,
                "write_duration_seconds",
                "Time a write to a VolumeLeftover took (all its requests), by operation",
                Family::new_with_constructor(write_buckets),
            ),
            in_flight: registered(
                registry,
                "writes_in_flight",
                "Writes to VolumeLeftovers in flight",
                Gauge::default(),
            ),
        }
    }

    /// Every operation with an `ok` count and a duration.
    pub(super) fn init(&self) {
        for op in OPS {
            let _ = self.writes.get_or_create(&WriteLabel { op, result: "ok" });
            let _ = self.duration.get_or_create(&OpLabel { op });
        }
    }

    pub(super) fn write(&self, op: &'static str, result: &'static str, requests: u32) {
        self.writes.get_or_create(&WriteLabel { op, result }).inc();
        self.requests.inc_by(u64::from(requests));
    }

    pub(super) fn blocked(&self, blocked: bool) {
        self.blocked.set(i64::from(blocked));
    }

    pub(super) fn duration(&self, op: &'static str, d: Duration) {
        self.duration
            .get_or_create(&OpLabel { op })
            .observe(d.as_secs_f64());
    }

    pub(super) fn in_flight(&self, in_flight: usize) {
        self.in_flight
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
    }
}
