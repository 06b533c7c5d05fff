//! The contract every storage backend implements, and the one loop that drives them all in the
//! operator.
//!
//! A backend is one folder under `src/census/` with a function that makes its [`Lister`]s from
//! the census settings (one per Ceph cluster, GCE project, EBS region, ...), registered by one
//! line in [`super::BACKENDS`]. A lister lists every scope it covers and reports each one, whole
//! or failed with a category ([`CensusReport`]): never a partial list. The operator runs each
//! lister every `interval` ([`run`]); `scan` runs each of them twice, then a third time with
//! the details of the disks nothing names where a backend reads them apart (`crate::scan`).
//!
//! **I/O: whatever the backends do (read-only); this module only schedules them.**

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::runtime::reflector::Store;
use tokio::sync::mpsc;

use crate::census::CensusReport;
use crate::decide::census::Scope;
use crate::model::volume::Volume;

/// What a listing is to read of each disk, where reading a disk costs more than listing it (a
/// Ceph image's size is one more request, its details an open; a cloud listing carries
/// everything at no extra cost, and its backend reads everything whatever is reading).
#[derive(Clone, Copy)]
pub enum Reading<'a> {
    /// The operator's turn: of the disks the volumes in the PV store name, their sizes (compared
    /// with the volumes' capacities); of any other, everything (whose it is, its age, who uses it).
    Operator(&'a Store<Volume>),
    /// The names alone (`scan`'s first listing: only existence is compared).
    Names,
    /// Every disk's size (`scan`'s second listing, on which the volumes are classified).
    Sizes,
    /// The details of these disks, by scope, and every other disk's size (`scan`'s third
    /// listing, of the disks nothing names).
    Details(&'a HashMap<Scope, HashSet<String>>),
}

/// One backend's census of some of its scopes (a Ceph cluster's pools, a GCE project's zones
/// and regions and its snapshots, an EBS region's volumes and snapshots).
pub trait Lister: Send {
    /// The scopes it reports, as far as they are known before it has listed (a GCE project
    /// listed as a whole names its zones and regions only once it has answered).
    fn scopes(&self) -> Vec<Scope>;

    /// Lists every scope once and reports each: its listing, or why there is none. A lister
    /// that cannot reach its backend at all (a connection, credentials) reports each of its
    /// scopes failed, and tries again at the next call.
    fn list<'a>(&'a mut self, reading: Reading<'a>) -> BoxFuture<'a, Vec<CensusReport>>;

    /// Whether it reads some disks' details apart from listing them, so that `scan` lists it
    /// once more with the details of the disks nothing names (Ceph); a cloud listing has every
    /// disk's details.
    fn reads_details_apart(&self) -> bool {
        false
    }
}

/// Runs every lister until `tx` is closed, each listing every `interval` and sending each
/// report, all in this one task (the listers wait on their backends, not on the CPU; Ceph's
/// calls run on blocking threads). Waits first for the PV store, once: which disks the volumes
/// name decides what is read of each. (One waiter on purpose: with several tasks waiting on the
/// same store's readiness, some were seen never to wake.)
pub(crate) async fn run(
    listers: Vec<Box<dyn Lister>>,
    interval: Duration,
    pvs: Store<Volume>,
    tx: mpsc::Sender<CensusReport>,
) {
    let _ = pvs.wait_until_ready().await;
    let each = listers
        .into_iter()
        .map(|lister| drive(lister, interval, &pvs, &tx));
    futures::future::join_all(each).await;
}

/// Runs `lister` every `interval` until `tx` is closed, sending each report.
async fn drive(
    mut lister: Box<dyn Lister>,
    interval: Duration,
    pvs: &Store<Volume>,
    tx: &mpsc::Sender<CensusReport>,
) {
    loop {
        if tx.is_closed() {
            return;
        }
        for report in lister.list(Reading::Operator(pvs)).await {
            if tx.send(report).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tx.closed() => return,
        }
    }
}
