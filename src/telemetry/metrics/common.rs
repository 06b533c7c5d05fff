//! What the metric groups share: registering a metric where it is built, and the `reason` label.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::{Metric, Registry};

/// Registers `metric` as `name` with `help` and returns it, so that a group's constructor names
/// each metric once, in the order the exposition shows them.
pub(super) fn registered<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// The finding's reason (`Reason::as_str`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(super) struct ReasonLabel {
    pub(super) reason: &'static str,
}
