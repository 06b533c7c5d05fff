//! What one name's decision reads (the stores as views that follow their health, the census)
//! and the decision itself, its gauges and logs handed on as effects.

use std::sync::Arc;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use tokio::time::Instant;

use super::Told;
use super::effects::{Gauge, Log};
use crate::decide::census::Census;
use crate::decide::lookup::{Claim, ClaimFacts, ClassFacts, Found, Lookup, class_facts};
use crate::decide::name::{self};
use crate::decide::name::{Decision, Memo};
use crate::decide::plan::Action;
use crate::decide::snapshot::SnapshotKey;
use crate::model::leftover::Leftover;
use crate::model::snapshot::{Snapshot, SnapshotContent};
use crate::model::volume::Volume;
use crate::run::settings::Settings;
use crate::run::wiring::Stores;
use crate::telemetry::{Health, Kind, Trust};
use crate::watch::feed::Stored;
use crate::watch::snapshot_index::SnapshotIndex;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A store as a lookup sees it.
pub enum View<'a, K: Stored> {
    /// Trusted.
    Current(&'a Store<K>),
    /// Forbidden: answers are Unknown.
    Forbidden,
    /// Stale or not listed: nothing may be concluded.
    Stale,
}

impl<'a, K: Stored> View<'a, K> {
    /// The view of `store` given its trust.
    pub(crate) fn new(store: &'a Store<K>, trust: Trust) -> Self {
        match trust {
            Trust::Current => View::Current(store),
            // Nothing to read (a snapshot CRD not installed): answers are Unknown, so nothing
            // published about such an object is cleared on that account.
            Trust::Forbidden | Trust::NotServed => View::Forbidden,
            Trust::Stale | Trust::Pending => View::Stale,
        }
    }
}

/// Claims and classes as the operator sees them, from the reflector stores, and the census.
pub struct StoreLookup<'a> {
    /// Claim metadata.
    pub claims: View<'a, Claim>,
    /// StorageClasses.
    pub classes: View<'a, StorageClass>,
    /// The storage backend's census, when it is on.
    pub census: Option<&'a Census>,
}

impl Lookup for StoreLookup<'_> {
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts> {
        match &self.claims {
            View::Current(s) => match s.get(&ObjectRef::new(name).within(namespace)) {
                Some(c) => Found::Yes(c.facts()),
                None => Found::Absent,
            },
            View::Forbidden => Found::Unknown,
            View::Stale => Found::Stale,
        }
    }

    fn class(&self, name: &str) -> Found<ClassFacts> {
        match &self.classes {
            View::Current(s) => match s.get(&ObjectRef::new(name)) {
                Some(c) => Found::Yes(class_facts(&c)),
                None => Found::Absent,
            },
            View::Forbidden => Found::Unknown,
            View::Stale => Found::Stale,
        }
    }

    fn census(&self) -> Option<&Census> {
        self.census
    }
}

/// The census as the loop keeps it: each pool's state and the findings about images nothing
/// references, by VolumeLeftover name.
pub(super) type CensusState = crate::decide::census_result::CensusState;

/// What a decision may read.
pub(super) struct Ctx<'a> {
    pub(super) stores: &'a Stores,
    pub(super) health: &'a Health,
    pub(super) settings: &'a Settings,
    pub(super) census: Option<&'a CensusState>,
    pub(super) snapshots: &'a SnapshotIndex,
}

/// The stores as [`name::Stores`] reads them, with the trust of the PV and VolumeLeftover
/// stores read once per decision.
struct Reading<'a> {
    stores: &'a Stores,
    current: bool,
    snapshots: &'a SnapshotIndex,
    snapshots_current: bool,
}

impl name::Stores for Reading<'_> {
    fn current(&self) -> bool {
        self.current
    }
    fn volume(&self, name: &str) -> Option<Arc<Volume>> {
        self.stores.pv.get(&ObjectRef::new(name))
    }
    fn leftover(&self, name: &str) -> Option<Arc<Leftover>> {
        self.stores.vl.get(&ObjectRef::new(name))
    }
    fn snapshots_current(&self) -> bool {
        self.snapshots_current
    }
    fn snapshot_key(&self, name: &str) -> Option<SnapshotKey> {
        self.snapshots.get(name).cloned()
    }
    fn content(&self, name: &str) -> Option<Arc<SnapshotContent>> {
        self.stores.vsc.get(&ObjectRef::new(name))
    }
    fn snapshot(&self, namespace: &str, name: &str) -> Option<Arc<Snapshot>> {
        self.stores.vs.get(&ObjectRef::new(name).within(namespace))
    }
}

impl Ctx<'_> {
    /// Gathers what [`name::Inputs::decide`] reads, and adds its metric changes to `gauges` and
    /// its lines to `logs`.
    pub(super) fn decide(
        &self,
        name: &str,
        memo: &mut Memo,
        now_i: Instant,
        now: &Time,
        gauges: &mut Vec<Gauge>,
        logs: &mut Vec<Log>,
    ) -> Decision<(Action, Option<Told>)> {
        let trust = |kind| self.health.trust(kind, now_i);
        let reading = Reading {
            stores: self.stores,
            current: [Kind::persistentvolumes, Kind::volumeleftovers]
                .into_iter()
                .all(|k| trust(k) == Trust::Current),
            snapshots: self.snapshots,
            snapshots_current: [Kind::volumesnapshotcontents, Kind::volumesnapshots]
                .into_iter()
                .all(|k| trust(k) == Trust::Current),
        };
        let lookup = StoreLookup {
            claims: View::new(&self.stores.pvc, trust(Kind::persistentvolumeclaims)),
            classes: View::new(&self.stores.sc, trust(Kind::storageclasses)),
            census: self.census.map(|c| &c.census),
        };
        let inputs = name::Inputs {
            stores: &reading,
            lookup: &lookup,
            images: self.census.map(|c| name::Images {
                census: &c.census,
                orphans: &c.orphans,
                held: &c.held,
                unconcluded: &c.unconcluded,
            }),
            rules: name::Rules {
                graces: self.settings.graces,
                tombstone_ttl: self.settings.tombstone_ttl,
                prices: self.settings.prices.as_deref(),
            },
        };
        let out = inputs.decide(name, memo, now_i.into_std(), now);
        if let Some(change) = out.held {
            for (held, delta) in [(change.from, -1), (change.to, 1)] {
                if let Some(held) = held {
                    gauges.push(Gauge::Held { held, delta });
                }
            }
        }
        for log in out.logs {
            match log {
                name::Log::Skipped { pv, why } => logs.push(Log::Skipped { pv, why }),
                name::Log::Foreign { name: pv } => logs.push(Log::Foreign { pv }),
                // These two come at every decision of a name held so, not once per change
                // (a sweep while claims are forbidden brings one per Released PV: 50,000 at the
                // issue-10 size). As effects each would be kept, with its name, until the step
                // ends, for a debug line that is normally filtered out: they stay here.
                name::Log::Undecided { pv, why } => tracing::debug!(%pv, "undecided: {why}"),
                name::Log::Holding { pv, reason, wait } => {
                    tracing::debug!(%pv, ?reason, ?wait, "holding a state that is normally passing through until its grace period ends")
                }
            }
        }
        out.decision
    }
}
