//! Metrics of the watched stores: failed lists and watches, completed lists, each store's state.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::common::registered;
use crate::telemetry::health::{Kind, StoreState};
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

#[derive(Debug)]
pub(super) struct FeedMetrics {
    watch_errors: Family<KindCategoryLabel, Counter>,
    relists: Family<KindLabel, Counter>,
    store_state: Family<KindLabel, Gauge>,
    snapshots_excluded: Family<KindLabel, Gauge>,
}

impl FeedMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        FeedMetrics {
            watch_errors: registered(
                registry,
                "watch_errors",
                "Failed lists and watches, by resource and category (each is retried with backoff)",
                Family::default(),
            ),
            relists: registered(
                registry,
                "relists",
                "Completed lists (initial, and after a 410 or a failure)",
                Family::default(),
            ),
            store_state: registered(
                registry,
                "store_state",
                "0 pending, 1 synced, 2 forbidden (403), 3 degraded (watch failing), 4 not served (a snapshot CRD not installed)",
                Family::default(),
            ),
            snapshots_excluded: registered(
                registry,
                "snapshots_excluded",
                "VolumeSnapshotContents and VolumeSnapshots kept out of the report on purpose (a backup tool's, by --exclude-snapshot-selector, or the ignore label), by resource",
                Family::default(),
            ),
        }
    }

    /// Every kind at 0 lists, and pending.
    pub(super) fn init(&self) {
        for k in Kind::ALL {
            let _ = self.relists.get_or_create(&KindLabel { resource: k });
            self.store_state(k, StoreState::Pending);
        }
        self.snapshots_excluded(0, 0);
    }

    pub(super) fn watch_error(&self, kind: Kind, category: Category) {
        self.watch_errors
            .get_or_create(&KindCategoryLabel {
                resource: kind,
                category: category.as_str(),
            })
            .inc();
    }

    pub(super) fn relisted(&self, kind: Kind) {
        self.relists
            .get_or_create(&KindLabel { resource: kind })
            .inc();
    }

    pub(super) fn snapshots_excluded(&self, contents: usize, snapshots: usize) {
        for (resource, n) in [
            (Kind::volumesnapshotcontents, contents),
            (Kind::volumesnapshots, snapshots),
        ] {
            self.snapshots_excluded
                .get_or_create(&KindLabel { resource })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    pub(super) fn store_state(&self, kind: Kind, state: StoreState) {
        self.store_state
            .get_or_create(&KindLabel { resource: kind })
            .set(state as i64);
    }
}
