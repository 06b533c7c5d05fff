//! Metrics of the Kubernetes Events published about findings.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use super::common::registered;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// What can become of an Event.
const RESULTS: [&str; 3] = ["published", "failed", "dropped"];

#[derive(Debug)]
pub(super) struct EventMetrics {
    events: Family<ResultLabel, Counter>,
}

impl EventMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        EventMetrics {
            events: registered(
                registry,
                "events",
                "Kubernetes Events about findings on their PersistentVolumes, by result: published, failed (refused or not answered in time), dropped (4 in flight, or over 10/s after a burst of 100)",
                Family::default(),
            ),
        }
    }

    /// Every result at 0.
    pub(super) fn init(&self) {
        for result in RESULTS {
            let _ = self.events.get_or_create(&ResultLabel { result });
        }
    }

    pub(super) fn event(&self, result: &'static str) {
        self.events.get_or_create(&ResultLabel { result }).inc();
    }
}
