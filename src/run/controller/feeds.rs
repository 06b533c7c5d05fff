//! What the feeds' items do to the loop's state: each store's changes mark the names they
//! concern, a completed list may start the loop, a failing watch changes the store's health.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::Loop;
use super::decision::{StoreLookup, View};
use crate::decide::lookup::Claim;
use crate::decide::name::{is_tombstone_of, published};
use crate::engine::clock::wall_clock;
use crate::model::leftover::Leftover;
use crate::model::volume::Volume;
use crate::run::wiring::{Input, volume_present};
use crate::telemetry::{CRD_FIX, Kind, StoreHealth, StoreState};
use crate::watch::category::Category;
use crate::watch::feed::FeedItem;

/// What a feed says about its store, its failures set apart (see `Loop::on_feed`).
enum Changed<K> {
    /// An object was added or changed (already in the store).
    Applied(K),
    /// An object was deleted (already gone from the store).
    Deleted(K),
    /// A list completed; `gone`: what the store held that the list did not return.
    Listed { gone: Vec<Arc<K>> },
}

impl Loop {
    pub(super) fn on_input(&mut self, input: Input, now: Instant) {
        match input {
            Input::Census(report) => self.census_done(*report),
            Input::Pv(item) => self.on_feed(Kind::persistentvolumes, *item, Self::on_volume, now),
            Input::Pvc(item) => {
                self.on_feed(Kind::persistentvolumeclaims, *item, Self::on_claim, now)
            }
            Input::Sc(item) => self.on_feed(Kind::storageclasses, *item, Self::on_class, now),
            Input::Vl(item) => self.on_feed(Kind::volumeleftovers, *item, Self::on_leftover, now),
        }
    }

    /// What every store's feed shares: a failure changes only the store's health, and a
    /// completed list, once the store's own handling (`on_change`) has taken it, makes the store
    /// synced.
    fn on_feed<K>(
        &mut self,
        kind: Kind,
        item: FeedItem<K>,
        on_change: fn(&mut Self, Changed<K>),
        now: Instant,
    ) {
        match item {
            FeedItem::Applied(o) => on_change(self, Changed::Applied(o)),
            FeedItem::Deleted(o) => on_change(self, Changed::Deleted(o)),
            FeedItem::Listed { gone } => {
                on_change(self, Changed::Listed { gone });
                self.listed(kind);
            }
            FeedItem::Failed { error, retry_in } => {
                self.failed(kind, error.category(), error.to_string(), retry_in, now)
            }
        }
    }

    /// A PV's change is its own name's, and the index's; a relist also finds the PVs deleted
    /// unwatched.
    fn on_volume(&mut self, change: Changed<Volume>) {
        match change {
            Changed::Applied(pv) => {
                self.index.apply(&pv);
                let name = pv.name().to_string();
                self.shed_record(&name);
                self.volume_names_image(&pv);
                // The name is a live volume's again (a tombstone not yet written is
                // superseded by it).
                self.scheduler.memo(&name).tombstone = None;
                self.scheduler.mark(&name);
            }
            Changed::Deleted(pv) => {
                let name = pv.name().to_string();
                self.index.delete(&name);
                self.stash_tombstone(&name, &pv, true);
                self.scheduler.mark(&name);
            }
            Changed::Listed { gone } => {
                let state = self.stores.pv.state();
                self.index.reset(state.iter().map(|p| p.as_ref()));
                drop(state);
                if !gone.is_empty() {
                    tracing::info!(
                        count = gone.len(),
                        "PersistentVolumes deleted while the watch was down; their findings are re-evaluated"
                    );
                }
                // Their delete was not watched: what the store last had of each says
                // whether it left its disk behind, as a watched delete's last object does.
                for pv in &gone {
                    self.stash_tombstone(pv.name(), pv, false);
                    // Neither store names it any more: the sweep would not.
                    self.scheduler.mark(pv.name());
                }
                drop(gone);
                self.shed_records();
            }
        }
    }

    /// A claim's change is decided again for the PVs that name it (the index says which).
    fn on_claim(&mut self, change: Changed<Claim>) {
        match change {
            Changed::Applied(c) | Changed::Deleted(c) => {
                let pvs: Vec<Arc<str>> = self
                    .index
                    .pvs_for_claim(&c.namespace, &c.name)
                    .map(Arc::from)
                    .collect();
                pvs.iter().for_each(|n| self.scheduler.mark(n));
            }
            Changed::Listed { .. } => {}
        }
    }

    /// A class's change is decided again for the PVs of that class.
    fn on_class(&mut self, change: Changed<StorageClass>) {
        match change {
            Changed::Applied(c) | Changed::Deleted(c) => {
                // Rare: the store is scanned rather than indexed (`crate::watch::index`).
                let class = c.name_any();
                for pv in self.stores.pv.state() {
                    let names = pv
                        .spec
                        .as_ref()
                        .and_then(|s| s.storage_class_name.as_deref())
                        .is_some_and(|n| n == class);
                    if names {
                        self.scheduler.mark(pv.name());
                    }
                }
            }
            Changed::Listed { .. } => {}
        }
    }

    /// A VolumeLeftover's change is what is published: its name is decided again, and the
    /// gauges and the mirror follow.
    fn on_leftover(&mut self, change: Changed<Leftover>) {
        match change {
            // Our own writes come back here and compare equal; hand edits do not.
            Changed::Applied(o) => {
                let name = o.name.to_string();
                if is_tombstone_of(&o, self.scheduler.memo(&name).tombstone.as_deref()) {
                    // Published (by this replica or the leader before it).
                    self.scheduler.memo(&name).tombstone = None;
                }
                self.set_published(&name, published(&o));
                self.scheduler.mark(&name);
                self.report_changed();
            }
            Changed::Deleted(o) => {
                let name = o.name.to_string();
                self.set_published(&name, None);
                self.scheduler.mark(&name);
                self.report_changed();
            }
            Changed::Listed { .. } => {
                self.shed_records();
                self.report_changed();
                self.recount_published();
            }
        }
    }

    /// A list completed (initial, or a relist after a 410 or a failure). The store has been
    /// swapped to the new list: objects that vanished in the gap are simply absent, so every PV
    /// and VolumeLeftover is re-evaluated.
    pub(super) fn listed(&mut self, kind: Kind) {
        let before = self.health.store(kind);
        self.health.set_store(
            kind,
            StoreHealth {
                state: StoreState::Synced,
                ..StoreHealth::default()
            },
        );
        self.metrics.store_state(kind, StoreState::Synced);
        self.metrics.relisted(kind);
        match (before.state, before.since) {
            (StoreState::Synced, _) => {}
            (StoreState::Pending, None) => {
                tracing::info!(resource = kind.as_str(), "store synced")
            }
            (_, since) => tracing::info!(
                resource = kind.as_str(),
                after_s = since.map(|t| t.elapsed().as_secs()),
                "store synced again"
            ),
        }
        self.maybe_start();
        if self.scheduler.is_active() {
            self.sweep();
        }
        // The list's pages and full objects are garbage now.
        crate::engine::heap::release();
    }

    pub(super) fn failed(
        &mut self,
        kind: Kind,
        category: Category,
        error: String,
        retry_in: Duration,
        now: Instant,
    ) {
        self.metrics.watch_error(kind, category);
        let before = self.health.store(kind);
        let state = match (category, before.state) {
            (Category::Forbidden, _) => StoreState::Forbidden,
            (_, StoreState::Pending) => StoreState::Pending,
            (_, StoreState::Forbidden) => StoreState::Forbidden,
            (_, StoreState::Synced | StoreState::Degraded) => StoreState::Degraded,
        };
        let since = if before.state == state && before.since.is_some() {
            before.since
        } else {
            Some(now)
        };
        // One line per change of the store's state; a different error in the same state is a
        // debug line (a cut connection alternates between "reset" and "handshake eof").
        let changed = before.state != state || before.error.is_none();
        self.health.set_store(
            kind,
            StoreHealth {
                state,
                since,
                error: Some(error.clone()),
                category: Some(category),
            },
        );
        self.metrics.store_state(kind, state);
        let retry = format!("{:.1}s", retry_in.as_secs_f32());
        if !changed {
            tracing::debug!(resource = kind.as_str(), %error, retry_in = %retry, "still failing");
        } else if category == Category::Expired {
            tracing::info!(
                resource = kind.as_str(),
                "watch expired (410 Gone); relisting"
            );
        } else if kind == Kind::volumeleftovers && category == Category::NotFound {
            tracing::error!(resource = kind.as_str(), %error, retry_in = %retry, "{CRD_FIX}; retrying");
        } else if category == Category::Forbidden {
            tracing::error!(
                resource = kind.as_str(),
                %error,
                "the operator's identity may not list/watch {}: check its ClusterRole (deploy/ or the chart); retrying",
                kind.as_str()
            );
            if kind == Kind::persistentvolumeclaims {
                tracing::error!(
                    "claims cannot be read: findings report claim.missing Unknown, never True"
                );
            }
        } else {
            tracing::warn!(
                resource = kind.as_str(),
                category = category.as_str(),
                %error,
                retry_in = %retry,
                "list/watch failing; retrying with backoff (its answers are not used after {}s)",
                self.health.stale_after().as_secs()
            );
        }
        if state == StoreState::Forbidden && before.state != StoreState::Forbidden {
            // Answers from this store are now Unknown: every verdict may change.
            self.maybe_start();
            if self.scheduler.is_active() {
                self.sweep();
            }
        }
    }

    /// Logs again what still is wrong (a rate-limited reminder, not one line per attempt).
    pub(super) fn remind(&self) {
        for kind in Kind::ALL {
            let s = self.health.store(kind);
            if s.state != StoreState::Synced {
                tracing::warn!(
                    resource = kind.as_str(),
                    state = ?s.state,
                    for_s = s.since.map(|t| t.elapsed().as_secs()),
                    error = s.error.as_deref().unwrap_or(""),
                    "store still not synced"
                );
            }
        }
        if let Some(b) = self.scheduler.blocked() {
            tracing::warn!(
                for_s = b.since.elapsed().as_secs(),
                category = b.category.as_str(),
                error = %b.error,
                "writes to VolumeLeftovers still failing"
            );
        }
    }

    /// PVs and VolumeLeftovers must have listed; claims and classes listed or be forbidden
    /// (then their answers are Unknown, never Absent).
    pub(super) fn maybe_start(&mut self) {
        if self.scheduler.is_active() || !self.role.borrow().leads() {
            return;
        }
        let h = &self.health;
        let listed = |k| matches!(h.get(k), StoreState::Synced | StoreState::Degraded);
        let usable = |k| listed(k) || h.get(k) == StoreState::Forbidden;
        if listed(Kind::persistentvolumes)
            && listed(Kind::volumeleftovers)
            && usable(Kind::persistentvolumeclaims)
            && usable(Kind::storageclasses)
        {
            self.scheduler.activate();
            tracing::info!(
                pvs = self.stores.pv.len(),
                claims = self.stores.pvc.len(),
                classes = self.stores.sc.len(),
                leftovers = self.stores.vl.len(),
                claims_readable = h.get(Kind::persistentvolumeclaims) != StoreState::Forbidden,
                "all stores listed; evaluating every PersistentVolume"
            );
        }
    }

    /// Drops the facts a finding keeps for a tombstone once its volume (same name and uid) is in
    /// the PV store (`Leftover` keeps them only until then: see `leftover::Status::shed`).
    /// Returns whether any were dropped.
    pub(super) fn shed_if_seen(&self, o: &Leftover) -> bool {
        o.status.as_ref().is_some_and(|s| {
            volume_present(&self.stores.pv, o.volume_name(), &o.volume_uid) && s.shed()
        })
    }

    /// [`Self::shed_if_seen`] for the finding of the volume `name`.
    pub(super) fn shed_record(&self, name: &str) {
        if let Some(o) = self.stores.vl.get(&ObjectRef::new(name)) {
            self.shed_if_seen(&o);
        }
    }

    /// [`Self::shed_if_seen`] for every finding (after a list of PVs or of findings).
    pub(super) fn shed_records(&self) {
        let shed = self
            .stores
            .vl
            .state()
            .iter()
            .filter(|o| self.shed_if_seen(o))
            .count();
        if shed > 0 {
            tracing::debug!(
                count = shed,
                "facts kept for tombstones dropped: their volumes are in the store"
            );
        }
    }

    /// Keeps the tombstone of a volume that was deleted, from its last object (`watched`: its
    /// delete event; else what the store had before a relist no longer found it), unless deleting
    /// it did not leave its disk or its tombstone is already published.
    pub(super) fn stash_tombstone(&mut self, name: &str, pv: &Volume, watched: bool) {
        let now_i = Instant::now();
        let lookup = StoreLookup {
            claims: View::new(
                &self.stores.pvc,
                self.health.trust(Kind::persistentvolumeclaims, now_i),
            ),
            classes: View::new(
                &self.stores.sc,
                self.health.trust(Kind::storageclasses, now_i),
            ),
            // Whether its image is gone is decided when the tombstone is.
            census: None,
        };
        let t = if watched {
            crate::decide::classify::tombstone(pv, &lookup, wall_clock())
        } else {
            crate::decide::classify::tombstone_unwatched(pv, &lookup, wall_clock())
        };
        let published = self.stores.vl.get(&ObjectRef::new(name));
        let t = t.filter(|t| {
            !published
                .as_deref()
                .is_some_and(|o| is_tombstone_of(o, Some(t)))
        });
        if let Some(t) = &t {
            tracing::info!(pv = %name, uid = %t.volume_uid, "a PersistentVolume whose disk outlives it was deleted; its finding becomes the last record of the disk");
        }
        self.scheduler.memo(name).tombstone = t.map(Box::new);
    }
}
