//! The loop as a state machine: an [`Event`] (a feed's item, a census result, a role change, a
//! write's outcome, a timer) and the time go in through [`Loop::step`], [`Effects`] (writes to
//! start, the ClusterReport to apply, Events to publish, the end of the loop) come out. It
//! starts no task and makes no request: the [`shell`](super::shell) does, and feeds back what
//! came of it. Wake-ups (grace, echo wait, backoff) stay in the scheduler, whose timers run on
//! tokio's clock, so tests drive them with paused time.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use super::decision::{CensusState, Ctx, StoreLookup, View};
use super::{Ended, Told};
use crate::decide::lookup::Claim;
use crate::decide::name::Published;
use crate::decide::name::{is_tombstone_of, published};
use crate::decide::plan::Action;
use crate::decide::report::cluster_report;
use crate::engine::backoff::seed;
use crate::engine::clock::wall_clock;
use crate::engine::schedule::Limits;
use crate::model::crd::{Reason, VolumeLeftover};
use crate::model::leftover::Leftover;
use crate::model::volume::Volume;
use crate::publish::leader::{Role, Standing};
use crate::publish::report::Applied;
use crate::publish::writer::{Outcome, WriteError, Written};
use crate::run::scheduling::{Condition, Scheduler, WriteEnd};
use crate::run::settings::Settings;
use crate::run::wiring::{Input, Stores, volume_present};
use crate::telemetry::{
    CRD_FIX, Health, Kind, Metrics, StoreHealth, StoreState, Trust, WritesBlocked,
};
use crate::watch::category::Category;
use crate::watch::feed::FeedItem;
use crate::watch::index::RefIndex;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The loop's state: the stores it decides from, their health, the scheduler and what it
/// remembers per name, the census, the mirror's bookkeeping.
pub(crate) struct Loop {
    /// Something was read or written since the heap was last trimmed (see [`crate::engine::heap`]).
    pub(super) heap_used: bool,
    pub(super) settings: Settings,
    pub(super) role: tokio::sync::watch::Receiver<Role>,
    pub(super) stores: Stores,
    pub(super) health: Arc<Health>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) index: RefIndex,
    pub(super) scheduler: Scheduler,
    pub(super) report: Option<Report>,
    pub(super) census: Option<CensusState>,
}

/// The OpenReports mirror's books: whether the findings changed since it was last written, the
/// last content written, and whether a write is in flight.
pub(super) struct Report {
    pub(super) dirty: bool,
    pub(super) last: Option<serde_json::Value>,
    pub(super) in_flight: bool,
    pub(super) not_before: Instant,
    pub(super) missing_logged: bool,
}

/// What a feed says about its store, its failures set apart (see `Loop::on_feed`).
pub(super) enum Changed<K> {
    /// An object was added or changed (already in the store).
    Applied(K),
    /// An object was deleted (already gone from the store).
    Deleted(K),
    /// A list completed; `gone`: what the store held that the list did not return.
    Listed { gone: Vec<Arc<K>> },
}

/// What happened, as the shell hands it to the machine.
pub(crate) enum Event {
    /// A feed's item or a census result.
    Input(Input),
    /// This replica's role changed (read it from the role's receiver).
    Role,
    /// A scheduler's timer fired (its name is marked already).
    Woke,
    /// A write the machine asked for ended.
    Written {
        /// The name it was for.
        name: Arc<str>,
        /// How it went.
        result: Result<Written, WriteError>,
        /// The Event to publish about its PV once it landed.
        told: Option<Told>,
    },
    /// A ClusterReport write the machine asked for ended.
    Reported {
        /// What was written.
        content: serde_json::Value,
        /// How it went.
        applied: Applied,
    },
    /// A periodic timer.
    Tick(Tick),
}

/// The loop's periodic timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tick {
    /// Decide every name again.
    Resync,
    /// Log again what still is wrong.
    Reminder,
    /// Refresh the age gauges (and release the heap after work).
    Ages,
    /// Write the ClusterReport if the findings changed.
    Report,
}

/// A VolumeLeftover write to start.
#[derive(Debug)]
pub(crate) struct WriteStart {
    /// The name it is for.
    pub(crate) name: Arc<str>,
    /// What to do.
    pub(crate) action: Action,
    /// The Event to publish once it landed.
    pub(crate) told: Option<Told>,
}

/// A ClusterReport write to start.
#[derive(Debug)]
pub(crate) struct ReportWrite {
    /// The content.
    pub(crate) content: serde_json::Value,
    /// Nothing was written by this process yet: read what is there first, and write only if
    /// it differs.
    pub(crate) compare: bool,
}

/// What the machine asks the shell to do after one event.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    /// Writes to start, each to be fed back as [`Event::Written`].
    pub(crate) writes: Vec<WriteStart>,
    /// A ClusterReport write to start, to be fed back as [`Event::Reported`].
    pub(crate) report: Option<ReportWrite>,
    /// Events to publish on PVs (writes that landed).
    pub(crate) events: Vec<Told>,
    /// The loop must end.
    pub(crate) ended: Option<Ended>,
}

impl Loop {
    /// The loop over the stores the feeds fill (`report`: whether the OpenReports mirror is on);
    /// it decides nothing before the stores list.
    pub(crate) fn new(
        stores: Stores,
        role: tokio::sync::watch::Receiver<Role>,
        report: bool,
        settings: Settings,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
        now: Instant,
    ) -> Loop {
        let limits = Limits {
            concurrency: settings.concurrency,
            ..Limits::default()
        };
        Loop {
            heap_used: false,
            stores,
            report: report.then_some(Report {
                dirty: true,
                last: None,
                in_flight: false,
                not_before: now,
                missing_logged: false,
            }),
            health,
            metrics,
            index: RefIndex::default(),
            scheduler: Scheduler::new(limits, seed("scheduler")),
            role,
            census: settings
                .census
                .as_ref()
                .map(|c| CensusState::new(c.config.census(c.image_grace))),
            settings,
        }
    }

    /// Whether names are decided: every store has listed (or is forbidden) and this replica
    /// leads.
    pub(crate) fn is_deciding(&self) -> bool {
        self.scheduler.is_active()
    }

    /// Takes one event at `now` (`wall`: the wall clock then) and says what to do: after any
    /// event but the loss of the Lease, the names ready are decided and their writes returned.
    pub(crate) fn step(&mut self, event: Event, now: Instant, wall: &Time) -> Effects {
        let mut fx = Effects::default();
        match event {
            Event::Role => {
                if self.on_role() == Some(Ended::LostLease) {
                    fx.ended = Some(Ended::LostLease);
                    return fx;
                }
            }
            Event::Input(input) => {
                self.heap_used = true;
                self.on_input(input, now);
            }
            Event::Woke => {}
            Event::Written { name, result, told } => {
                self.heap_used = true;
                fx.events.extend(self.on_written(&name, result, told, now));
            }
            Event::Reported { content, applied } => self.reported(content, applied, now),
            Event::Tick(Tick::Resync) => {
                if self.scheduler.is_active() {
                    tracing::debug!("periodic sweep");
                    self.sweep();
                }
            }
            Event::Tick(Tick::Reminder) => self.remind(),
            Event::Tick(Tick::Ages) => {
                self.refresh_ages();
                if std::mem::take(&mut self.heap_used) {
                    crate::engine::heap::release();
                }
            }
            Event::Tick(Tick::Report) => fx.report = self.report(now),
        }
        fx.writes = self.dispatch(now, wall);
        fx
    }
}

impl Loop {
    /// This replica's role changed.
    pub(super) fn on_role(&mut self) -> Option<Ended> {
        let role = *self.role.borrow_and_update();
        match role {
            Role::Leading { .. } | Role::Unelected => {
                if !self.scheduler.is_active() {
                    self.metrics.leader(true);
                    self.health.set_leader(Standing::Leading);
                    self.maybe_start();
                    if self.scheduler.is_active() {
                        self.sweep();
                    }
                }
                None
            }
            Role::Standby => None,
            Role::Lost => {
                self.metrics.leader(false);
                self.health.set_leader(Standing::Lost);
                tracing::error!(
                    "this replica lost the lease: it stops writing and exits so that a fresh process starts as standby"
                );
                Some(Ended::LostLease)
            }
        }
    }

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
    pub(super) fn on_feed<K>(
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
            FeedItem::Failed {
                category,
                error,
                retry_in,
            } => self.failed(kind, category, error, retry_in, now),
        }
    }

    /// A PV's change is its own name's, and the index's; a relist also finds the PVs deleted
    /// unwatched.
    pub(super) fn on_volume(&mut self, change: Changed<Volume>) {
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
    pub(super) fn on_claim(&mut self, change: Changed<Claim>) {
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
    pub(super) fn on_class(&mut self, change: Changed<StorageClass>) {
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
    pub(super) fn on_leftover(&mut self, change: Changed<Leftover>) {
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

    /// Queues every PV and every VolumeLeftover.
    pub(super) fn sweep(&mut self) {
        // Deciding them all builds and drops state for every name: worth a release after.
        self.heap_used = true;
        for o in self.stores.vl.state() {
            self.scheduler.mark(&o.name);
        }
        for pv in self.stores.pv.state() {
            self.scheduler.mark(pv.name());
        }
    }

    pub(super) fn set_published(&mut self, name: &str, now: Option<Published>) {
        let memo = self.scheduler.memo(name);
        let before = std::mem::replace(&mut memo.published, now.clone());
        if before != now {
            if let Some(p) = &before {
                self.metrics.finding(p, -1);
            }
            if let Some(p) = &now {
                self.metrics.finding(p, 1);
            }
        }
        self.scheduler.settle(name);
    }

    /// After a relist of VolumeLeftovers: objects deleted during the gap get no Delete event.
    pub(super) fn recount_published(&mut self) {
        let state = self.stores.vl.state();
        let now: std::collections::HashMap<String, Published> = state
            .iter()
            .filter_map(|o| Some((o.name.to_string(), published(o)?)))
            .collect();
        let stale = self
            .scheduler
            .names_where(|s| s.memo().is_some_and(|m| m.published.is_some()));
        for name in stale {
            if !now.contains_key(name.as_ref()) {
                self.set_published(&name, None);
            }
        }
        for (name, p) in now {
            self.set_published(&name, Some(p));
        }
        self.refresh_ages();
    }

    pub(super) fn report_changed(&mut self) {
        if let Some(r) = self.report.as_mut() {
            r.dirty = true;
        }
    }

    /// Writes the OpenReports ClusterReport when the findings changed (the leader only; one
    /// write at a time; nothing when the content is what was last written, or, before the
    /// first write, what the report there already says).
    pub(super) fn report(&mut self, now: Instant) -> Option<ReportWrite> {
        let leading = self.role.borrow().may_write(now)
            && self.scheduler.is_active()
            && self.health.trust(Kind::volumeleftovers, now) == Trust::Current;
        let r = self.report.as_mut()?;
        if !leading || !r.dirty || r.in_flight || now < r.not_before {
            return None;
        }
        // The store keeps every finding's facts and message for it (`Keep::report`).
        let objects: Vec<VolumeLeftover> = self
            .stores
            .vl
            .state()
            .iter()
            .filter(|o| o.managed && o.status.is_some())
            .map(|o| o.to_object())
            .collect();
        let content = cluster_report(&objects);
        r.dirty = false;
        if r.last.as_ref() == Some(&content) {
            return None;
        }
        // Nothing written by this process yet (a start, a new leader, a failed write): what is
        // there may already say the same. Read it once rather than write it again.
        let compare = r.last.is_none();
        r.in_flight = true;
        Some(ReportWrite { content, compare })
    }

    pub(super) fn reported(&mut self, content: serde_json::Value, applied: Applied, now: Instant) {
        let Some(r) = self.report.as_mut() else {
            return;
        };
        r.in_flight = false;
        match applied {
            Applied::Done | Applied::Unchanged => {
                if r.missing_logged {
                    tracing::info!(
                        "OpenReports ClusterReport written again (its CRD is installed)"
                    );
                }
                r.missing_logged = false;
                r.last = Some(content);
            }
            Applied::NotInstalled => {
                if !r.missing_logged {
                    tracing::warn!(
                        "the OpenReports CRD (clusterreports.openreports.io) is not installed: the findings are not mirrored; trying again at the next resync"
                    );
                }
                r.missing_logged = true;
                r.dirty = true;
                r.not_before = now + self.settings.resync;
            }
            Applied::Failed(category, error) => {
                tracing::warn!(category = category.as_str(), %error, "writing the OpenReports ClusterReport failed; trying again");
                r.dirty = true;
                r.not_before = now + Duration::from_secs(30);
            }
        }
    }

    /// The age of the oldest open finding per reason (it grows with the clock alone).
    pub(super) fn refresh_ages(&self) {
        let now = jiff::Timestamp::now().as_second();
        let mut oldest: std::collections::HashMap<Reason, i64> = std::collections::HashMap::new();
        for name in self.scheduler.names_where(|s| {
            s.memo()
                .and_then(|m| m.published.as_ref())
                .is_some_and(|p| p.state.is_open())
        }) {
            if let Some(p) = self
                .scheduler
                .get(&name)
                .and_then(|s| s.memo()?.published.as_ref())
            {
                let age = (now - p.first_seen).max(0);
                let e = oldest.entry(p.reason).or_default();
                *e = (*e).max(age);
            }
        }
        for r in Reason::ALL {
            self.metrics
                .oldest_open(r, oldest.get(&r).copied().unwrap_or(0));
        }
    }

    /// Decides the names ready at `now` and returns the writes to start.
    pub(super) fn dispatch(&mut self, now: Instant, wall: &Time) -> Vec<WriteStart> {
        // Only a leader whose lease is current decides: a holder that cannot renew stops
        // starting writes before the other replicas would consider its lease expired.
        if !self.scheduler.is_active() || !self.role.borrow().may_write(now) {
            return Vec::new();
        }
        let ctx = Ctx {
            stores: &self.stores,
            health: &self.health,
            metrics: &self.metrics,
            settings: &self.settings,
            census: self.census.as_ref(),
        };
        let writes = self.scheduler.run(|name, memo| {
            let start = Instant::now();
            let d = ctx.decide(name, memo, now, wall);
            ctx.metrics.decision_duration(start.elapsed());
            d.into()
        });
        // Every write returned is in flight until its outcome comes back (`on_written`).
        self.metrics
            .backlog(self.scheduler.queued(), self.scheduler.in_flight());
        writes
            .into_iter()
            .map(|(name, (action, told))| WriteStart { name, action, told })
            .collect()
    }

    /// A write ended at `now`; returns the Event to publish about its PV, if it landed.
    pub(super) fn on_written(
        &mut self,
        name: &str,
        result: Result<Written, WriteError>,
        told: Option<Told>,
        now: Instant,
    ) -> Option<Told> {
        let mut tell = None;
        let end = match result {
            Ok(w) => {
                if w.outcome == Outcome::Done {
                    tell = told;
                }
                let result = w.outcome.as_str();
                self.metrics.write(w.op.as_str(), result, w.requests);
                if let Some(echo) = w.echo {
                    self.scheduler.memo(name).echo =
                        Some((echo, (now + self.settings.echo_wait).into_std()));
                }
                tracing::debug!(%name, op = w.op.as_str(), result, "written");
                w.outcome.into()
            }
            Err(e) => {
                self.metrics
                    .write(e.op().as_str(), e.category().as_str(), 1);
                let first = self.scheduler.get(name).is_none_or(|s| s.failures() == 0);
                if first && self.scheduler.blocked().is_none() {
                    tracing::warn!(error = %e, "write failed; retrying with backoff");
                } else {
                    tracing::debug!(error = %e, "write failed again");
                }
                WriteEnd::Failed {
                    category: e.category(),
                    write_wide: e.write_wide(),
                    error: e.to_string(),
                }
            }
        };
        match self.scheduler.end_write(name, end) {
            Some(Condition::Blocked { category, error }) => {
                let why = WritesBlocked::new(category, error);
                tracing::error!(
                    category = category.as_str(),
                    error = %why.error(),
                    "writes to VolumeLeftovers are failing as a whole; pausing them and probing with one write at a time{}",
                    why.fix()
                );
                self.health.set_writes_blocked(Some(why));
                self.metrics.writes_blocked(true);
            }
            Some(Condition::Unblocked) => {
                tracing::info!("writes to VolumeLeftovers work again");
                self.health.set_writes_blocked(None);
                self.metrics.writes_blocked(false);
            }
            None => {}
        }
        tell
    }
}
