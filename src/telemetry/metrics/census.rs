//! Metrics of the storage censuses, one series per censused pool (`cluster/pool[/namespace]`).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::common::registered;

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct PoolLabel {
    pool: String,
}

fn pool(pool: &str) -> PoolLabel {
    PoolLabel { pool: pool.into() }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[derive(Debug)]
pub(super) struct CensusMetrics {
    up: Family<PoolLabel, Gauge>,
    images: Family<PoolLabel, Gauge>,
    images_unread: Family<PoolLabel, Gauge>,
    duration: Family<PoolLabel, Gauge<f64, AtomicU64>>,
    requests: Family<PoolLabel, Counter>,
    runs: Family<PoolLabel, Counter>,
    failures: Family<PoolLabel, Counter>,
}

impl CensusMetrics {
    pub(super) fn new(registry: &mut Registry) -> Self {
        CensusMetrics {
            up: registered(
                registry,
                "census_up",
                "1 when the last census of the pool (cluster/pool[/namespace]) completed, 0 when it failed or has not run (its answers are Unknown)",
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
        name: &str,
        images: usize,
        unread: usize,
        seconds: f64,
        requests: u64,
    ) {
        let l = pool(name);
        self.up.get_or_create(&l).set(1);
        self.images.get_or_create(&l).set(count(images));
        self.images_unread.get_or_create(&l).set(count(unread));
        self.duration.get_or_create(&l).set(seconds);
        self.requests.get_or_create(&l).inc_by(requests);
        self.runs.get_or_create(&l).inc();
    }

    pub(super) fn failed(&self, name: &str, requests: u64) {
        let l = pool(name);
        self.up.get_or_create(&l).set(0);
        self.requests.get_or_create(&l).inc_by(requests);
        self.failures.get_or_create(&l).inc();
    }

    pub(super) fn pending(&self, name: &str) {
        self.up.get_or_create(&pool(name)).set(0);
    }
}
