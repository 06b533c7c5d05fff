//! Metrics of the published findings: how many, the capacity they hold, what they cost, the
//! oldest open one.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::common::{ReasonLabel, registered};
use crate::decide::name::Published;
use crate::model::crd::Reason;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct FindingLabels {
    reason: &'static str,
    storage_class: String,
    state: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CostLabels {
    reason: &'static str,
    storage_class: String,
    state: &'static str,
    currency: String,
}

#[derive(Debug)]
pub(super) struct FindingMetrics {
    findings: Family<FindingLabels, Gauge>,
    capacity: Family<FindingLabels, Gauge>,
    monthly_cost: Family<CostLabels, Gauge>,
    oldest_open: Family<ReasonLabel, Gauge>,
}

impl FindingMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        FindingMetrics {
            findings: registered(
                registry,
                "findings",
                "Published findings (VolumeLeftovers managed by the operator) by reason, StorageClass and state; every replica exports them from its cache (aggregate with max)",
                Family::default(),
            ),
            capacity: registered(
                registry,
                "findings_capacity_bytes",
                "Capacity held by published findings, in bytes, by reason, StorageClass and state",
                Family::default(),
            ),
            monthly_cost: registered(
                registry,
                "findings_monthly_cost_minor_units",
                "Estimated monthly cost of the published findings the price table prices (status.cost), in the minor unit of the currency (cents), by reason, StorageClass, state and currency",
                Family::default(),
            ),
            oldest_open: registered(
                registry,
                "oldest_open_finding_seconds",
                "Age since firstSeen of the oldest finding that needs attention (Open, Expired, Superseded), by reason; 0 when none",
                Family::default(),
            ),
        }
    }

    /// Every reason with no open finding.
    pub(super) fn init(&self) {
        for r in Reason::ALL {
            self.oldest_open(r, 0);
        }
    }

    pub(super) fn add(&self, p: &Published, delta: i64) {
        let labels = FindingLabels {
            reason: p.reason.as_str(),
            storage_class: p.storage_class.clone(),
            state: p.state.as_str(),
        };
        self.findings.get_or_create(&labels).inc_by(delta);
        self.capacity
            .get_or_create(&labels)
            .inc_by(delta.saturating_mul(p.capacity_bytes));
        if let Some((currency, monthly)) = &p.monthly_cost {
            self.monthly_cost
                .get_or_create(&CostLabels {
                    reason: labels.reason,
                    storage_class: labels.storage_class,
                    state: labels.state,
                    currency: currency.to_string(),
                })
                .inc_by(delta.saturating_mul(*monthly));
        }
    }

    pub(super) fn oldest_open(&self, reason: Reason, seconds: i64) {
        self.oldest_open
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .set(seconds);
    }
}
