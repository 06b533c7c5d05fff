//! Metrics of this replica: whether it is ready, whether it leads, and what the leader does with
//! the ClusterReport.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::common::registered;

#[derive(Debug)]
pub(super) struct ReplicaMetrics {
    ready: Gauge,
    leader: Gauge,
    leader_transitions: Counter,
    report_checks: Counter,
}

impl ReplicaMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        ReplicaMetrics {
            ready: registered(
                registry,
                "ready",
                "1 when /readyz answers 200",
                Gauge::default(),
            ),
            leader: registered(
                registry,
                "leader",
                "1 while this replica holds the Lease and decides (always 1 without leader election)",
                Gauge::default(),
            ),
            leader_transitions: registered(
                registry,
                "leader_transitions",
                "Times this replica became the leader",
                Counter::default(),
            ),
            report_checks: registered(
                registry,
                "report_checks",
                "Times the leader looked whether the ClusterReport needs writing (each report tick with no report write in flight; written only when its findings changed)",
                Counter::default(),
            ),
        }
    }

    pub(super) fn ready(&self, ready: bool) {
        self.ready.set(i64::from(ready));
    }

    pub(super) fn leader(&self, leading: bool) {
        if leading && self.leader.get() == 0 {
            self.leader_transitions.inc();
        }
        self.leader.set(i64::from(leading));
    }

    pub(super) fn report_checked(&self) {
        self.report_checks.inc();
    }
}
