//! Metrics of the storage censuses, one series per censused scope: a Ceph pool
//! (`{pool="cluster/pool[/namespace]"}`), a GCE zone or region or an EBS region
//! (`{backend, scope}`).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::common::registered;
use crate::model::backend::Scope;

/// The labels of a censused scope's series: `{pool}` for a Ceph pool (`cluster/pool[/namespace]`,
/// as the alerts and the dashboard read them), `{backend, scope}` for a cloud scope (`gce`,
/// `project/location`; `ebs`, `[account/]region`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CensusLabels(Vec<(&'static str, String)>);

impl EncodeLabelSet for CensusLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.0.as_slice().encode(encoder)
    }
}

impl From<&str> for CensusLabels {
    /// A Ceph pool, by its `cluster/pool[/namespace]` label.
    fn from(pool: &str) -> CensusLabels {
        CensusLabels(vec![("pool", pool.to_string())])
    }
}

impl From<&Scope> for CensusLabels {
    fn from(scope: &Scope) -> CensusLabels {
        let backend = scope.backend();
        let full = scope.to_string();
        if backend.labelled_as_pool() {
            return CensusLabels::from(full.as_str());
        }
        let name = full
            .strip_prefix(backend.name())
            .and_then(|s| s.strip_prefix(':'))
            .unwrap_or(&full);
        CensusLabels(vec![
            ("backend", backend.name().into()),
            ("scope", name.into()),
        ])
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[derive(Debug)]
pub(super) struct CensusMetrics {
    up: Family<CensusLabels, Gauge>,
    images: Family<CensusLabels, Gauge>,
    images_unread: Family<CensusLabels, Gauge>,
    duration: Family<CensusLabels, Gauge<f64, AtomicU64>>,
    requests: Family<CensusLabels, Counter>,
    runs: Family<CensusLabels, Counter>,
    failures: Family<CensusLabels, Counter>,
}

impl CensusMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        CensusMetrics {
            up: registered(
                registry,
                "census_up",
                "1 when the last census of the scope (a Ceph pool cluster/pool[/namespace]; a GCE zone, region or project listed as a whole; an EBS region) completed, 0 when it failed or has not run (its answers are Unknown)",
                Family::default(),
            ),
            images: registered(
                registry,
                "census_images",
                "Images listed by the last complete census of the pool",
                Family::default(),
            ),
            images_unread: registered(
                registry,
                "census_images_unread",
                "Images of the pool whose details the last complete census asked for and could not read (what is published about them stays)",
                Family::default(),
            ),
            duration: registered(
                registry,
                "census_duration_seconds",
                "How long the last census of the pool took",
                Family::default(),
            ),
            requests: registered(
                registry,
                "census_requests",
                "librados/librbd calls made by censuses of the pool",
                Family::default(),
            ),
            runs: registered(
                registry,
                "census_runs",
                "Censuses of the pool that completed",
                Family::default(),
            ),
            failures: registered(
                registry,
                "census_failures",
                "Censuses of the pool that failed (connection, timeout, refusal)",
                Family::default(),
            ),
        }
    }

    pub(super) fn done(
        &self,
        l: CensusLabels,
        images: usize,
        unread: usize,
        seconds: f64,
        requests: u64,
    ) {
        self.up.get_or_create(&l).set(1);
        self.images.get_or_create(&l).set(count(images));
        self.images_unread.get_or_create(&l).set(count(unread));
        self.duration.get_or_create(&l).set(seconds);
        self.requests.get_or_create(&l).inc_by(requests);
        self.runs.get_or_create(&l).inc();
    }

    pub(super) fn failed(&self, l: CensusLabels, requests: u64) {
        self.up.get_or_create(&l).set(0);
        self.requests.get_or_create(&l).inc_by(requests);
        self.failures.get_or_create(&l).inc();
    }

    pub(super) fn pending(&self, l: CensusLabels) {
        self.up.get_or_create(&l).set(0);
    }
}
