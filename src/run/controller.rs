//! The operator's loop: four feeds in, decisions out, one writer. I/O.
//!
//! One task owns all state. It reads four feeds (PVs, claim metadata, StorageClasses and its own
//! VolumeLeftovers; see [`crate::watch::feed`]), keeps the reverse index and the health of each store,
//! and hands PV names to the [`Scheduler`], which says when each may be decided and which writes
//! may start. Decisions are pure ([`crate::decide::classify`], [`crate::decide::plan`]); this module only gathers
//! their inputs, keeps the books (metrics, logs once per change) and runs the writes
//! ([`crate::publish::writer`]).
//!
//! Nothing is decided before every store it depends on has listed: an empty claim cache at
//! start-up would otherwise turn every Released PV into "claim deleted". A store whose watch has
//! been failing for longer than `stale_after` answers nothing: decisions that need it wait, and
//! nothing published is changed or deleted on its account.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{FuturesUnordered, SelectAll};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio::time::Instant;

use crate::census::CensusReport;
use crate::decide::census::{Census, Resolved, disk_ref};
use crate::decide::classify::volume_source;
use crate::decide::lookup::{Claim, ClaimFacts, ClassFacts, Found, Lookup, class_facts};
use crate::decide::name::{self, is_tombstone_of, published};
use crate::decide::plan::Action;
use crate::decide::report::cluster_report;
use crate::engine::backoff::seed;
use crate::engine::clock::wall_clock;
use crate::engine::schedule::{
    Condition, Decision, Held, Limits, Memo, Published, Scheduler, WriteEnd,
};
use crate::model::crd::VolumeSourceInfo;
use crate::model::crd::{Reason, VolumeLeftover};
use crate::model::image::ImageFound;
use crate::model::leftover::Leftover;
use crate::model::volume::Volume;
use crate::publish::events::Events;
use crate::publish::leader::{Role, Standing};
use crate::publish::report::{Applied, ReportWriter};
use crate::publish::writer::{Outcome, WriteError, Writer, Written};
use crate::run::settings::Settings;
use crate::run::wiring::{self, Input, InputStream, Parts, Stores, Wired, volume_present};
use crate::telemetry::{
    CRD_FIX, Health, Kind, Metrics, StoreHealth, StoreState, Trust, WritesBlocked,
};
use crate::watch::category::Category;
use crate::watch::feed::{FeedItem, Stored};
use crate::watch::index::RefIndex;
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
    pub fn new(store: &'a Store<K>, trust: Trust) -> Self {
        match trust {
            Trust::Current => View::Current(store),
            Trust::Forbidden => View::Forbidden,
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

    fn image(&self, source: &VolumeSourceInfo, created: Option<&Time>) -> ImageFound {
        // A PV's zones are not at hand here: an in-tree disk that only they locate is not
        // censused.
        match (self.census, disk_ref(source, &[])) {
            (Some(c), Some(r)) => c.image(&r, created),
            _ => ImageFound::NotCensused,
        }
    }
}

/// A write in flight: the name, what it did, and the change to tell people about once it landed.
type WriteFuture =
    Pin<Box<dyn Future<Output = (Arc<str>, Result<Written, WriteError>, Option<Told>)> + Send>>;

pub use crate::decide::name::Told;

/// How the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Shut down as asked.
    Stopped,
    /// This replica led and lost the Lease: it must not write again. The process exits so that
    /// a fresh one starts as a standby.
    LostLease,
}

struct Loop {
    /// Something was read or written since the heap was last trimmed (see [`crate::engine::heap`]).
    heap_used: bool,
    settings: Settings,
    role: tokio::sync::watch::Receiver<Role>,
    stores: Stores,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    writer: Writer,
    index: RefIndex,
    scheduler: Scheduler,
    writes: FuturesUnordered<WriteFuture>,
    events: Option<Events>,
    report: Option<Report>,
    census: Option<CensusState>,
}

/// The census as the loop keeps it: each pool's state and the findings about images nothing
/// references, by VolumeLeftover name.
type CensusState = crate::decide::census_result::CensusState;

/// A ClusterReport write in flight: the content, and how it went.
type ReportFuture = Pin<Box<dyn Future<Output = (serde_json::Value, Applied)> + Send>>;

/// The OpenReports mirror: its writer, whether the findings changed since it was last written,
/// the last content written, and the write in flight.
struct Report {
    writer: ReportWriter,
    dirty: bool,
    last: Option<serde_json::Value>,
    in_flight: FuturesUnordered<ReportFuture>,
    not_before: Instant,
    missing_logged: bool,
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

/// Runs the controller until `shutdown` resolves. Returns only then: every error on the way
/// (API outage, missing CRD, 403) is logged once per change, counted and retried with backoff.
pub async fn run(
    client: Client,
    settings: Settings,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) -> Ended {
    let Wired {
        mut inputs,
        parts,
        mut tasks,
    } = wiring::wire(client, &settings, &health, &metrics);
    let mut l = Loop::new(parts, settings, health, metrics);
    let ended = l.serve(&mut inputs, shutdown).await;
    l.health.shutting_down();
    drop(inputs);
    tasks.stop_census(l.settings.shutdown_grace).await;
    l.drain().await;
    // Only now, with no write of ours in flight, may another replica take over.
    tasks.stop_election().await;
    tracing::info!("controller stopped");
    ended
}

impl Loop {
    /// The loop over what [`wiring::wire`] built; it decides nothing before the stores list.
    fn new(parts: Parts, settings: Settings, health: Arc<Health>, metrics: Arc<Metrics>) -> Loop {
        let Parts {
            stores,
            role,
            writer,
            events,
            report,
        } = parts;
        let limits = Limits {
            concurrency: settings.concurrency,
            ..Limits::default()
        };
        Loop {
            heap_used: false,
            stores,
            events,
            report: report.map(|writer| Report {
                writer,
                dirty: true,
                last: None,
                in_flight: FuturesUnordered::new(),
                not_before: Instant::now(),
                missing_logged: false,
            }),
            writer,
            health,
            metrics,
            index: RefIndex::default(),
            scheduler: Scheduler::new(limits, seed("scheduler")),
            writes: FuturesUnordered::new(),
            role,
            census: settings
                .census
                .as_ref()
                .map(|c| CensusState::new(c.config.census(c.image_grace))),
            settings,
        }
    }

    /// Reads the inputs, the role, the written and the timers until `shutdown` resolves or this
    /// replica loses the Lease.
    async fn serve(
        &mut self,
        inputs: &mut SelectAll<InputStream>,
        shutdown: impl Future<Output = ()>,
    ) -> Ended {
        let mut resync = tokio::time::interval(self.settings.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        let mut report_tick = tokio::time::interval(Duration::from_secs(5));
        report_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ages = tokio::time::interval(Duration::from_secs(15));
        ages.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut reminder = tokio::time::interval(self.settings.reminder);
        reminder.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        reminder.tick().await;
        tokio::pin!(shutdown);

        let l = self;
        loop {
            tokio::select! {
                () = &mut shutdown => return Ended::Stopped,
                Ok(()) = l.role.changed() => {
                    if l.on_role() == Some(Ended::LostLease) {
                        return Ended::LostLease;
                    }
                }
                Some(input) = inputs.next() => {
                    l.heap_used = true;
                    l.on_input(input);
                }
                _ = l.scheduler.next_wake() => {}
                Some((name, result, told)) = l.writes.next(), if !l.writes.is_empty() => {
                    l.heap_used = true;
                    l.on_written(&name, result, told);
                }
                _ = resync.tick() => {
                    if l.scheduler.is_active() {
                        tracing::debug!("periodic sweep");
                        l.sweep();
                    }
                }
                _ = reminder.tick() => l.remind(),
                _ = ages.tick() => {
                    l.refresh_ages();
                    if let Some(e) = &l.events {
                        e.tidy();
                    }
                    if std::mem::take(&mut l.heap_used) {
                        crate::engine::heap::release();
                    }
                }
                _ = report_tick.tick() => l.report(),
                Some((content, applied)) = async {
                    match l.report.as_mut() {
                        Some(r) if !r.in_flight.is_empty() => r.in_flight.next().await,
                        _ => std::future::pending().await,
                    }
                } => l.reported(content, applied),
            }
            l.dispatch();
        }
    }

    /// Lets writes in flight finish, within a bound; new ones are not started. What is still
    /// in flight then is abandoned.
    async fn drain(&mut self) {
        let pending = self.writes.len();
        let drained = tokio::time::timeout(self.settings.shutdown_grace, async {
            while let Some((name, result, told)) = self.writes.next().await {
                self.on_written(&name, result, told);
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                abandoned = self.writes.len(),
                of = pending,
                "writes still in flight after the shutdown grace period were abandoned"
            );
        }
        drop(std::mem::take(&mut self.writes));
    }
}

impl Loop {
    /// This replica's role changed.
    fn on_role(&mut self) -> Option<Ended> {
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

    fn on_input(&mut self, input: Input) {
        match input {
            Input::Census(report) => self.on_census(*report),
            Input::Pv(item) => self.on_feed(Kind::persistentvolumes, *item, Self::on_volume),
            Input::Pvc(item) => self.on_feed(Kind::persistentvolumeclaims, *item, Self::on_claim),
            Input::Sc(item) => self.on_feed(Kind::storageclasses, *item, Self::on_class),
            Input::Vl(item) => self.on_feed(Kind::volumeleftovers, *item, Self::on_leftover),
        }
    }

    /// What every store's feed shares: a failure changes only the store's health, and a
    /// completed list, once the store's own handling (`on_change`) has taken it, makes the store
    /// synced.
    fn on_feed<K>(&mut self, kind: Kind, item: FeedItem<K>, on_change: fn(&mut Self, Changed<K>)) {
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
            } => self.failed(kind, category, error, retry_in),
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
                self.image_referenced(&pv);
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
    fn listed(&mut self, kind: Kind) {
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

    fn failed(&mut self, kind: Kind, category: Category, error: String, retry_in: Duration) {
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
            Some(Instant::now())
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
    fn remind(&self) {
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
    fn maybe_start(&mut self) {
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
    fn shed_if_seen(&self, o: &Leftover) -> bool {
        o.status.as_ref().is_some_and(|s| {
            volume_present(&self.stores.pv, o.volume_name(), &o.volume_uid) && s.shed()
        })
    }

    /// [`Self::shed_if_seen`] for the finding of the volume `name`.
    fn shed_record(&self, name: &str) {
        if let Some(o) = self.stores.vl.get(&ObjectRef::new(name)) {
            self.shed_if_seen(&o);
        }
    }

    /// [`Self::shed_if_seen`] for every finding (after a list of PVs or of findings).
    fn shed_records(&self) {
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
    fn stash_tombstone(&mut self, name: &str, pv: &Volume, watched: bool) {
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

    /// A scope's census completed (or failed): what it means is decided by
    /// [`census_result`](crate::decide::census_result::census_result); here it is logged,
    /// measured and the names it concerns are decided again.
    fn on_census(&mut self, report: CensusReport) {
        use crate::decide::census_result::{Gauge, census_result};
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let CensusReport {
            key,
            result,
            requests,
            elapsed,
        } = report;
        let label = key.to_string();
        let (stores, scheduler) = (&self.stores, &mut self.scheduler);
        let out = census_result(
            cs,
            &key,
            result.map_err(|e| (e.kind, e.message)),
            &wall_clock(),
            || Self::census_naming(stores, scheduler),
        );
        match out.gauge {
            Gauge::Done { images, unread } => {
                self.metrics
                    .census_done(&label, images, unread, elapsed.as_secs_f64(), requests)
            }
            Gauge::Failed => self.metrics.census_failed(&label, requests),
        }
        for line in out.logs {
            Self::log_census(&label, line);
        }
        for n in out.mark {
            self.scheduler.mark(&n);
        }
    }

    /// What names disks now, as the stores and the tombstones not written yet say.
    fn census_naming(
        stores: &Stores,
        scheduler: &mut Scheduler,
    ) -> crate::decide::census_result::Naming {
        crate::decide::census_result::Naming {
            volumes: stores
                .pv
                .state()
                .iter()
                .filter_map(|pv| {
                    let spec = pv.spec.as_ref()?;
                    let disk = disk_ref(&volume_source(spec), &spec.zones());
                    Some((pv.name().to_string(), disk))
                })
                .collect(),
            leftovers: stores
                .vl
                .state()
                .iter()
                .filter_map(|o| {
                    let s = o.status.as_ref().filter(|_| o.managed)?;
                    let source = (s.reason == Reason::VolumeDeleted)
                        .then(|| s.record().map(|r| r.source))
                        .flatten();
                    Some((o.name.to_string(), s.reason, source))
                })
                .collect(),
            // Tombstones not written yet (a delete just watched) name their image too.
            tombstones: scheduler
                .names_where(|st| st.memo().is_some_and(|m| m.tombstone.is_some()))
                .into_iter()
                .filter_map(|n| {
                    let t = scheduler.memo(&n).tombstone.as_deref()?;
                    Some(t.status.source.clone())
                })
                .collect(),
        }
    }

    /// Logs a line of a census outcome of the scope labelled `label`.
    fn log_census(label: &str, line: crate::decide::census_result::CensusLog) {
        use crate::decide::census_result::CensusLog;
        match line {
            CensusLog::Recovered { after } => {
                tracing::info!(pool = %label, after = %after, "the census of the pool works again")
            }
            CensusLog::Done { images } => {
                tracing::debug!(pool = %label, images = images, "census done")
            }
            CensusLog::Unread {
                images,
                first,
                error,
            } => {
                tracing::warn!(pool = %label, images = images, first = %first, error = %error, "the details of some images could not be read: what is published about them stays (nothing made, nothing cleared) until they can be")
            }
            CensusLog::ReadAgain => {
                tracing::info!(pool = %label, "the details of every image can be read again")
            }
            CensusLog::Failed { category, message } => {
                tracing::warn!(pool = %label, error = %message, category = %category, "the census of the pool failed: its images are Unknown (no finding about them is made or cleared) until it works again")
            }
        }
    }

    /// A volume names an image that was reported as referenced by nothing: that finding goes.
    fn image_referenced(&mut self, pv: &Volume) {
        let Some(cs) = self.census.as_mut() else {
            return;
        };
        let Some(r) = pv
            .spec
            .as_ref()
            .and_then(|s| disk_ref(&volume_source(s), &s.zones()))
        else {
            return;
        };
        let Resolved::In(key) = cs.census.resolve(&r) else {
            return;
        };
        let name = crate::decide::census::disk_leftover_name(key, r.name());
        let held = cs.held.remove(&name).is_some();
        if cs.orphans.remove(&name).is_some() || held {
            self.scheduler.mark(&name);
        }
    }

    /// Queues every PV and every VolumeLeftover.
    fn sweep(&mut self) {
        // Deciding them all builds and drops state for every name: worth a release after.
        self.heap_used = true;
        for o in self.stores.vl.state() {
            self.scheduler.mark(&o.name);
        }
        for pv in self.stores.pv.state() {
            self.scheduler.mark(pv.name());
        }
    }

    fn set_published(&mut self, name: &str, now: Option<Published>) {
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
    fn recount_published(&mut self) {
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

    fn report_changed(&mut self) {
        if let Some(r) = self.report.as_mut() {
            r.dirty = true;
        }
    }

    /// Writes the OpenReports ClusterReport when the findings changed (the leader only; one
    /// write at a time; nothing when the content is what was last written, or, before the
    /// first write, what the report there already says).
    fn report(&mut self) {
        let leading = self.role.borrow().may_write(Instant::now())
            && self.scheduler.is_active()
            && self.health.trust(Kind::volumeleftovers, Instant::now()) == Trust::Current;
        let Some(r) = self.report.as_mut() else {
            return;
        };
        if !leading || !r.dirty || !r.in_flight.is_empty() || Instant::now() < r.not_before {
            return;
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
            return;
        }
        let writer = r.writer.clone();
        // Nothing written by this process yet (a start, a new leader, a failed write): what is
        // there may already say the same. Read it once rather than write it again.
        let compare = r.last.is_none();
        r.in_flight.push(Box::pin(async move {
            let applied = writer.write(&content, compare).await;
            (content, applied)
        }));
    }

    fn reported(&mut self, content: serde_json::Value, applied: Applied) {
        let Some(r) = self.report.as_mut() else {
            return;
        };
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
                r.not_before = Instant::now() + self.settings.resync;
            }
            Applied::Failed(category, error) => {
                tracing::warn!(category = category.as_str(), %error, "writing the OpenReports ClusterReport failed; trying again");
                r.dirty = true;
                r.not_before = Instant::now() + Duration::from_secs(30);
            }
        }
    }

    /// The age of the oldest open finding per reason (it grows with the clock alone).
    fn refresh_ages(&self) {
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

    fn dispatch(&mut self) {
        // Only a leader whose lease is current decides: a holder that cannot renew stops
        // starting writes before the other replicas would consider its lease expired.
        if !self.scheduler.is_active() || !self.role.borrow().may_write(Instant::now()) {
            return;
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
            let d = ctx.decide(name, memo);
            ctx.metrics.decision_duration(start.elapsed());
            d
        });
        for (name, (action, told)) in writes {
            let writer = self.writer.clone();
            let metrics = self.metrics.clone();
            self.writes.push(Box::pin(async move {
                let start = Instant::now();
                let r = writer.execute(action).await;
                let op = match &r {
                    Ok(w) => w.op,
                    Err(e) => e.op(),
                };
                metrics.write_duration(op.as_str(), start.elapsed());
                (name, r, told)
            }));
        }
        self.metrics
            .backlog(self.scheduler.queued(), self.writes.len());
    }

    fn on_written(&mut self, name: &str, result: Result<Written, WriteError>, told: Option<Told>) {
        let end = match result {
            Ok(w) => {
                if let (Outcome::Done, Some(t), Some(events)) = (w.outcome, &told, &self.events) {
                    events.emit(&t.pv, &t.uid, &t.change);
                }
                let result = w.outcome.as_str();
                self.metrics.write(w.op.as_str(), result, w.requests);
                if let Some(echo) = w.echo {
                    self.scheduler.memo(name).echo =
                        Some((echo, (Instant::now() + self.settings.echo_wait).into_std()));
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
    }
}

/// What a decision may read.
struct Ctx<'a> {
    stores: &'a Stores,
    health: &'a Health,
    metrics: &'a Metrics,
    settings: &'a Settings,
    census: Option<&'a CensusState>,
}

/// The stores as [`name::Stores`] reads them, with the trust of the PV and VolumeLeftover
/// stores read once per decision.
struct Reading<'a> {
    stores: &'a Stores,
    current: bool,
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
}

impl Ctx<'_> {
    /// Gathers what [`name::Inputs::decide`] reads, and performs its effects: gauges and logs.
    fn decide(&self, name: &str, memo: &mut Memo) -> Decision<(Action, Option<Told>)> {
        self.metrics.decided();
        let now_i = Instant::now();
        let trust = |kind| self.health.trust(kind, now_i);
        let reading = Reading {
            stores: self.stores,
            current: [Kind::persistentvolumes, Kind::volumeleftovers]
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
            }),
            rules: name::Rules {
                graces: self.settings.graces,
                tombstone_ttl: self.settings.tombstone_ttl,
            },
        };
        let out = inputs.decide(name, memo, now_i.into_std(), &wall_clock());
        if let Some(change) = out.held {
            for (h, delta) in [(change.from, -1), (change.to, 1)] {
                match h {
                    Some(Held::Pending(r)) => self.metrics.pending(r, delta),
                    Some(Held::Undecided) => self.metrics.undecided(delta),
                    Some(Held::Skipped) => self.metrics.skipped(delta),
                    Some(Held::Ignored) => self.metrics.ignored(delta),
                    None => {}
                }
            }
        }
        for log in out.logs {
            match log {
                name::Log::Skipped { pv, why } => tracing::warn!(%pv, "{why}"),
                name::Log::Undecided { pv, why } => tracing::debug!(%pv, "undecided: {why}"),
                name::Log::Holding { pv, reason, wait } => {
                    tracing::debug!(%pv, ?reason, ?wait, "holding a state that is normally passing through until its grace period ends")
                }
                name::Log::Foreign { name: pv } => tracing::warn!(%pv, "{}", name::FOREIGN),
            }
        }
        out.decision
    }
}
