//! What the feeds' items do to the loop's state: each store's changes mark the names they
//! concern, a completed list may start the loop, a failing watch changes the store's health.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::Loop;
use super::decision::{StoreLookup, View};
use super::effects::{Gauge, Log, StoreLog, WatchLog};
use crate::decide::lookup::Claim;
use crate::decide::name::{is_tombstone_of, published};
use crate::model::leftover::Leftover;
use crate::model::snapshot::{Snapshot, SnapshotContent};
use crate::model::volume::Volume;
use crate::run::wiring::{Input, volume_present};
use crate::telemetry::{Kind, StoreHealth, StoreState};
use crate::watch::category::Category;
use crate::watch::feed::FeedItem;

/// The time a feed's item is taken at: tokio's clock (store health, trust) and the wall clock
/// (what a tombstone records, the findings' ages).
#[derive(Clone, Copy)]
struct At<'a> {
    now: Instant,
    wall: &'a Time,
}

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
    /// A feed's item or a census result, taken at `now` (`wall`: the wall clock then).
    pub(super) fn on_input(&mut self, input: Input, now: Instant, wall: &Time) {
        let at = At { now, wall };
        match input {
            Input::Census(reports) => self.census_done(reports, wall, now),
            Input::Pv(item) => self.on_feed(Kind::persistentvolumes, *item, Self::on_volume, at),
            Input::Pvc(item) => {
                self.on_feed(Kind::persistentvolumeclaims, *item, Self::on_claim, at)
            }
            Input::Sc(item) => self.on_feed(Kind::storageclasses, *item, Self::on_class, at),
            Input::Vl(item) => self.on_feed(Kind::volumeleftovers, *item, Self::on_leftover, at),
            Input::Vsc(item) => {
                self.on_feed(Kind::volumesnapshotcontents, *item, Self::on_content, at)
            }
            Input::Vs(item) => self.on_feed(Kind::volumesnapshots, *item, Self::on_snapshot, at),
        }
    }

    /// What every store's feed shares: a failure changes only the store's health, and a
    /// completed list, once the store's own handling (`on_change`) has taken it, makes the store
    /// synced.
    fn on_feed<K>(
        &mut self,
        kind: Kind,
        item: FeedItem<K>,
        on_change: fn(&mut Self, Changed<K>, At),
        at: At,
    ) {
        match item {
            FeedItem::Applied(o) => on_change(self, Changed::Applied(o), at),
            FeedItem::Deleted(o) => on_change(self, Changed::Deleted(o), at),
            FeedItem::Listed { gone } => {
                on_change(self, Changed::Listed { gone }, at);
                self.listed(kind, at.now);
            }
            FeedItem::NotServed { check_in } => self.not_served(kind, check_in, at.now),
            FeedItem::Failed { error, retry_in } => {
                self.failed(kind, error.category(), error.to_string(), retry_in, at.now)
            }
        }
    }

    /// A content's change concerns its own findings' name and its snapshot's; its delete may
    /// leave a backend snapshot that nothing names any more (a tombstone).
    fn on_content(&mut self, change: Changed<SnapshotContent>, at: At) {
        match change {
            Changed::Applied(c) => {
                self.content_names_snapshot(&c);
                for name in self.snapshots.apply_content(&c) {
                    self.scheduler.mark(&name);
                }
            }
            Changed::Deleted(c) => {
                self.content_gone(&c, at.wall);
                self.stash_content_tombstone(&c, at);
                for name in self.snapshots.delete_content(&c) {
                    self.scheduler.mark(&name);
                }
            }
            Changed::Listed { gone } => {
                let state = self.stores.vsc.state();
                self.snapshots
                    .reset_contents(state.iter().map(|c| c.as_ref()));
                drop(state);
                // Their delete was not watched: what the store last had says whether each left
                // its backend snapshot, as a watched delete's last object does.
                for c in &gone {
                    self.content_gone(c, at.wall);
                    self.stash_content_tombstone(c, at);
                    for name in self.snapshots.delete_content(c) {
                        self.scheduler.mark(&name);
                    }
                }
            }
        }
        let (contents, snapshots) = self.snapshots.excluded();
        self.gauge(Gauge::SnapshotsExcluded(contents, snapshots));
    }

    /// A snapshot's change concerns its own findings' name and the contents that name it or
    /// that it is bound to.
    fn on_snapshot(&mut self, change: Changed<Snapshot>, _: At) {
        let names = match change {
            Changed::Applied(s) => self.snapshots.snapshot_changed(&s, true),
            Changed::Deleted(s) => self.snapshots.snapshot_changed(&s, false),
            Changed::Listed { gone } => {
                let state = self.stores.vs.state();
                self.snapshots
                    .reset_snapshots(state.iter().map(|s| s.as_ref()));
                drop(state);
                gone.iter()
                    .flat_map(|s| self.snapshots.snapshot_changed(s, false))
                    .collect()
            }
        };
        for name in names {
            self.scheduler.mark(&name);
        }
        let (contents, snapshots) = self.snapshots.excluded();
        self.gauge(Gauge::SnapshotsExcluded(contents, snapshots));
    }

    /// Keeps the tombstone of a deleted content whose backend snapshot stays (a Retain content
    /// with a handle), unless it is already published.
    fn stash_content_tombstone(&mut self, c: &SnapshotContent, at: At) {
        let Some(f) = crate::decide::snapshot::tombstone(c, at.wall.clone()) else {
            return;
        };
        let name = crate::decide::snapshot::leftover_name(&f.subject);
        let published = self.stores.vl.get(&ObjectRef::new(&name)).is_some_and(|o| {
            o.managed
                && o.status
                    .as_ref()
                    .is_some_and(|s| s.reason == crate::model::crd::Reason::ContentDeleted)
        });
        if published {
            return;
        }
        self.log(StoreLog::ContentTombstone {
            content: c.metadata.name.to_string(),
            leftover: name.clone(),
        });
        let finding = crate::decide::snapshot::as_finding(&f, at.wall);
        self.scheduler.memo(&name).tombstone = Some(Box::new(finding));
        self.scheduler.mark(&name);
    }

    /// A snapshot kind is not served (its CRD is not installed): nothing to watch, no failure.
    fn not_served(&mut self, kind: Kind, check_in: Duration, now: Instant) {
        let before = self.health.store(kind);
        self.health.set_store(
            kind,
            StoreHealth {
                state: StoreState::NotServed,
                since: Some(
                    before
                        .since
                        .filter(|_| before.state == StoreState::NotServed)
                        .unwrap_or(now),
                ),
                error: None,
                category: None,
            },
        );
        self.gauge(Gauge::StoreState {
            kind,
            state: StoreState::NotServed,
        });
        if before.state != StoreState::NotServed {
            self.log(WatchLog::NotServed {
                kind,
                check_every_s: check_in.as_secs(),
            });
        }
    }

    /// A PV's change is its own name's, and the index's; a relist also finds the PVs deleted
    /// unwatched.
    fn on_volume(&mut self, change: Changed<Volume>, at: At) {
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
                self.volume_gone(&pv, at.wall);
                self.stash_tombstone(&name, &pv, true, at);
                self.scheduler.mark(&name);
            }
            Changed::Listed { gone } => {
                let state = self.stores.pv.state();
                self.index.reset(state.iter().map(|p| p.as_ref()));
                drop(state);
                if !gone.is_empty() {
                    self.log(StoreLog::PvsGoneUnwatched { count: gone.len() });
                }
                // Their delete was not watched: what the store last had of each says
                // whether it left its disk behind, as a watched delete's last object does.
                for pv in &gone {
                    self.volume_gone(pv, at.wall);
                    self.stash_tombstone(pv.name(), pv, false, at);
                    // Neither store names it any more: the sweep would not.
                    self.scheduler.mark(pv.name());
                }
                drop(gone);
                self.shed_records();
            }
        }
    }

    /// A claim's change is decided again for the PVs that name it (the index says which).
    fn on_claim(&mut self, change: Changed<Claim>, _: At) {
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
    fn on_class(&mut self, change: Changed<StorageClass>, _: At) {
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
    fn on_leftover(&mut self, change: Changed<Leftover>, at: At) {
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
                self.recount_published(at.wall);
            }
        }
    }

    /// A list completed (initial, or a relist after a 410 or a failure). The store has been
    /// swapped to the new list: objects that vanished in the gap are simply absent, so every PV
    /// and VolumeLeftover is re-evaluated.
    pub(super) fn listed(&mut self, kind: Kind, now: Instant) {
        let before = self.health.store(kind);
        self.health.set_store(
            kind,
            StoreHealth {
                state: StoreState::Synced,
                ..StoreHealth::default()
            },
        );
        self.gauge(Gauge::StoreState {
            kind,
            state: StoreState::Synced,
        });
        self.gauge(Gauge::Relisted(kind));
        match (before.state, before.since) {
            (StoreState::Synced, _) => {}
            (StoreState::Pending, None) => self.log(StoreLog::StoreSynced { kind }),
            (_, since) => self.log(StoreLog::StoreSyncedAgain {
                kind,
                after_s: since.map(|t| now.saturating_duration_since(t).as_secs()),
            }),
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
        self.gauge(Gauge::WatchError { kind, category });
        let before = self.health.store(kind);
        let snapshot_kind = matches!(kind, Kind::volumesnapshotcontents | Kind::volumesnapshots);
        let state = match (category, before.state) {
            (Category::Forbidden, _) => StoreState::Forbidden,
            // Its CRD was removed after it was served: nothing to watch until it is back.
            (Category::NotFound, _) if snapshot_kind => StoreState::NotServed,
            (_, StoreState::NotServed) => StoreState::NotServed,
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
        self.gauge(Gauge::StoreState { kind, state });
        let retry_in = format!("{:.1}s", retry_in.as_secs_f32());
        if !changed {
            self.log(WatchLog::StoreStillFailing {
                kind,
                error,
                retry_in,
            });
        } else if category == Category::Expired {
            self.log(WatchLog::WatchExpired { kind });
        } else if state == StoreState::NotServed {
            self.log(WatchLog::NotServed {
                kind,
                check_every_s: self.settings.feed.not_served_every.as_secs(),
            });
        } else if kind == Kind::volumeleftovers && category == Category::NotFound {
            self.log(WatchLog::CrdMissing {
                kind,
                error,
                retry_in,
            });
        } else if category == Category::Forbidden {
            self.log(WatchLog::StoreForbidden { kind, error });
            if kind == Kind::persistentvolumeclaims {
                self.log(WatchLog::ClaimsUnreadable);
            }
        } else {
            let stale_after_s = self.health.stale_after().as_secs();
            self.log(WatchLog::WatchFailing {
                kind,
                category,
                error,
                retry_in,
                stale_after_s,
            });
        }
        if state == StoreState::Forbidden && before.state != StoreState::Forbidden {
            // Answers from this store are now Unknown: every verdict may change.
            self.maybe_start();
            if self.scheduler.is_active() {
                self.sweep();
            }
        }
    }

    /// Logs again at `now` what still is wrong (a rate-limited reminder, not one line per
    /// attempt).
    pub(super) fn remind(&mut self, now: Instant) {
        let since = |t: Instant| now.saturating_duration_since(t).as_secs();
        for kind in Kind::ALL {
            let s = self.health.store(kind);
            if !matches!(s.state, StoreState::Synced | StoreState::NotServed) {
                self.log(StoreLog::StoreNotSynced {
                    kind,
                    state: s.state,
                    for_s: s.since.map(since),
                    error: s.error.unwrap_or_default(),
                });
            }
        }
        if let Some(b) = self.scheduler.blocked() {
            let line = Log::WritesStillBlocked {
                for_s: since(b.since),
                category: b.category,
                error: b.error.clone(),
            };
            self.log(line);
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
            let line = StoreLog::AllListed {
                pvs: self.stores.pv.len(),
                claims: self.stores.pvc.len(),
                classes: self.stores.sc.len(),
                leftovers: self.stores.vl.len(),
                claims_readable: h.get(Kind::persistentvolumeclaims) != StoreState::Forbidden,
            };
            self.scheduler.activate();
            self.log(line);
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
    pub(super) fn shed_records(&mut self) {
        let shed = self
            .stores
            .vl
            .state()
            .iter()
            .filter(|o| self.shed_if_seen(o))
            .count();
        if shed > 0 {
            self.log(StoreLog::TombstoneFactsShed { count: shed });
        }
    }

    /// Keeps the tombstone of a volume that was deleted, from its last object (`watched`: its
    /// delete event; else what the store had before a relist no longer found it), unless deleting
    /// it did not leave its disk or its tombstone is already published.
    fn stash_tombstone(&mut self, name: &str, pv: &Volume, watched: bool, at: At) {
        let lookup = StoreLookup {
            claims: View::new(
                &self.stores.pvc,
                self.health.trust(Kind::persistentvolumeclaims, at.now),
            ),
            classes: View::new(
                &self.stores.sc,
                self.health.trust(Kind::storageclasses, at.now),
            ),
            // Whether its image is gone is decided when the tombstone is.
            census: None,
        };
        let t = if watched {
            crate::decide::classify::tombstone(pv, &lookup, at.wall.clone())
        } else {
            crate::decide::classify::tombstone_unwatched(pv, &lookup, at.wall.clone())
        };
        let published = self.stores.vl.get(&ObjectRef::new(name));
        let t = t.filter(|t| {
            !published
                .as_deref()
                .is_some_and(|o| is_tombstone_of(o, Some(t)))
        });
        if let Some(t) = &t {
            let line = StoreLog::Tombstone {
                pv: name.to_string(),
                uid: t.volume_uid.to_string(),
            };
            self.log(line);
        }
        self.scheduler.memo(name).tombstone = t.map(Box::new);
    }
}
