//! The controller loop: reflectors in, decisions out, one writer. I/O.
//!
//! One task owns all state. It reads four reflected watch streams (PVs, claim metadata,
//! StorageClasses and its own VolumeLeftovers), keeps the reverse index, and queues PV names to
//! re-evaluate. Nothing is decided before every store it depends on has synced: an empty claim
//! cache at start-up would otherwise turn every Released PV into "claim deleted". Decisions are
//! pure ([`crate::classify`], [`crate::plan`]); this module only schedules them and performs the
//! writes, with bounded concurrency and at most one write in flight per name.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, SelectAll};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource, ResourceExt};
use tokio_util::time::DelayQueue;

use crate::classify::{ClaimFacts, ClassFacts, Found, Lookup, Verdict, classify};
use crate::crd::{Reason, VolumeLeftover};
use crate::index::RefIndex;
use crate::plan::{self, Action, BoundGrace, FIELD_MANAGER, Gated};
use crate::telemetry::{Health, Kind, Metrics, StoreState};
use crate::volume::Volume;

/// Tuning of the loop.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Writes in flight at most.
    pub concurrency: usize,
    /// Period of the full sweep that re-evaluates every PV and VolumeLeftover.
    pub resync: Duration,
    /// How long `BoundClaimMissing` must persist before it is published.
    pub bound_grace: Duration,
    /// Page size of the initial lists.
    pub page_size: u32,
}

/// What the operator keeps of a claim: its metadata (a metadata-only list and watch).
pub type ClaimMeta = PartialObjectMeta<PersistentVolumeClaim>;

/// One item of the merged watch streams (boxed: a PV event is kilobytes, a claim's a few hundred
/// bytes).
enum Input {
    Pv(Box<watcher::Result<Event<Volume>>>),
    Pvc(Box<watcher::Result<Event<ClaimMeta>>>),
    Sc(Box<watcher::Result<Event<StorageClass>>>),
    Vl(Box<watcher::Result<Event<VolumeLeftover>>>),
}

struct Stores {
    pv: Store<Volume>,
    pvc: Store<ClaimMeta>,
    sc: Store<StorageClass>,
    vl: Store<VolumeLeftover>,
}

/// Claims and classes as the controller sees them, from the reflector stores. A store that is
/// forbidden (or not given) answers Unknown, never Absent.
pub struct StoreLookup<'a> {
    /// Claim metadata, when claims can be read.
    pub claims: Option<&'a Store<ClaimMeta>>,
    /// StorageClasses, when they can be read.
    pub classes: Option<&'a Store<StorageClass>>,
}

impl Lookup for StoreLookup<'_> {
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts> {
        let Some(claims) = self.claims else {
            return Found::Unknown;
        };
        match claims.get(&ObjectRef::new(name).within(namespace)) {
            Some(c) => Found::Yes(ClaimFacts {
                uid: c.metadata.uid.clone().unwrap_or_default(),
                terminating: c.metadata.deletion_timestamp.is_some(),
            }),
            None => Found::Absent,
        }
    }

    fn class(&self, name: &str) -> Found<ClassFacts> {
        let Some(classes) = self.classes else {
            return Found::Unknown;
        };
        match classes.get(&ObjectRef::new(name)) {
            Some(c) => Found::Yes(class_facts(&c)),
            None => Found::Absent,
        }
    }
}

/// The facts classification needs from a StorageClass.
pub fn class_facts(c: &StorageClass) -> ClassFacts {
    ClassFacts {
        // The API server defaults an unset reclaimPolicy to Delete.
        reclaim_policy: c.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
    }
}

/// The wall clock, to the second: `Time` serialises to seconds, and a finer `firstSeen` would
/// never compare equal to what the API server gives back.
pub fn wall_clock() -> Time {
    let s = jiff::Timestamp::now().as_second();
    Time(jiff::Timestamp::from_second(s).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

/// Errors of one write, with the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Applying labels, ownerReferences and spec failed.
    #[error("applying VolumeLeftover {name}: {source}")]
    Apply {
        /// Object name.
        name: String,
        /// Cause.
        source: kube::Error,
    },
    /// Applying the status failed.
    #[error("applying status of VolumeLeftover {name}: {source}")]
    ApplyStatus {
        /// Object name.
        name: String,
        /// Cause.
        source: kube::Error,
    },
    /// Deleting failed.
    #[error("deleting VolumeLeftover {name}: {source}")]
    Delete {
        /// Object name.
        name: String,
        /// Cause.
        source: kube::Error,
    },
}

impl WriteError {
    /// Stable short name, for metrics.
    pub fn op(&self) -> &'static str {
        match self {
            WriteError::Apply { .. } => "apply",
            WriteError::ApplyStatus { .. } => "apply_status",
            WriteError::Delete { .. } => "delete",
        }
    }
}

/// What the operator's own VolumeLeftover store will show once the watch delivers a write.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Echo {
    /// The object at this resourceVersion.
    Version(String),
    /// No object.
    Gone,
}

/// How long a name waits for the watch to deliver the operator's own write before it is
/// evaluated against whatever the store shows (the echo can be skipped by a relist).
const ECHO_WAIT: Duration = Duration::from_secs(5);

/// The only code that writes to the API server, and it writes only VolumeLeftovers.
#[derive(Clone)]
struct Writer {
    api: Api<VolumeLeftover>,
}

impl Writer {
    /// Performs one action; returns the operation's name and what the VolumeLeftover watch will
    /// show once it has caught up with this write.
    async fn execute(&self, action: Action) -> Result<(&'static str, Option<Echo>), WriteError> {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        match action {
            Action::Nothing | Action::Foreign { .. } => Ok(("none", None)),
            Action::Apply {
                object,
                meta,
                status,
            } => {
                let name = object.name_any();
                let mut written = None;
                if meta {
                    let mut main = (*object).clone();
                    main.status = None;
                    written = self
                        .api
                        .patch(&name, &pp, &Patch::Apply(&main))
                        .await
                        .map_err(|source| WriteError::Apply {
                            name: name.clone(),
                            source,
                        })
                        .map(Some)?;
                }
                if status {
                    let body = serde_json::json!({
                        "apiVersion": VolumeLeftover::api_version(&()),
                        "kind": VolumeLeftover::kind(&()),
                        "metadata": { "name": name },
                        "status": object.status,
                    });
                    written = self
                        .api
                        .patch_status(&name, &pp, &Patch::Apply(&body))
                        .await
                        .map_err(|source| WriteError::ApplyStatus {
                            name: name.clone(),
                            source,
                        })
                        .map(Some)?;
                }
                let echo = written
                    .and_then(|o| o.metadata.resource_version)
                    .map(Echo::Version);
                Ok(("apply", echo))
            }
            Action::Delete { name, uid } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid,
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match self.api.delete(&name, &dp).await {
                    Ok(_) => Ok(("delete", Some(Echo::Gone))),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(("delete", Some(Echo::Gone))),
                    // Replaced by a newer object (uid precondition): the watch event for that
                    // object will bring it back here.
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(("delete", None)),
                    Err(source) => Err(WriteError::Delete { name, source }),
                }
            }
        }
    }
}

type InputStream = Pin<Box<dyn Stream<Item = Input> + Send>>;

/// One reflected watch: paginated list then watch, relisting after a 410; the default backoff on
/// every error (one failing watch must not pause the others); unused fields stripped before the
/// store sees them.
fn reflected<K>(
    api: Api<K>,
    cfg: &watcher::Config,
    strip: fn(&mut K),
    writer: reflector::store::Writer<K>,
    wrap: fn(Box<watcher::Result<Event<K>>>) -> Input,
) -> InputStream
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Box::pin(
        watcher::watcher(api, cfg.clone())
            .default_backoff()
            .modify(strip)
            .reflect(writer)
            .map(move |r| wrap(Box::new(r))),
    )
}

type WriteResult = Result<(&'static str, Option<Echo>), WriteError>;
type WriteFuture = Pin<Box<dyn Future<Output = (Arc<str>, WriteResult)> + Send>>;

struct Loop {
    settings: Settings,
    stores: Stores,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    writer: Writer,
    index: RefIndex,
    /// All stores synced once: from then on events are acted upon.
    started: bool,
    queue: VecDeque<Arc<str>>,
    queued: HashSet<Arc<str>>,
    in_flight: HashSet<Arc<str>>,
    /// Marked again while a write was in flight: re-evaluate when it completes.
    again: HashSet<Arc<str>>,
    writes: FuturesUnordered<WriteFuture>,
    delays: DelayQueue<Arc<str>>,
    /// The pending re-check of each name in `delays` (one per name; the latest wait wins).
    delayed: HashMap<Arc<str>, tokio_util::time::delay_queue::Key>,
    /// When this process first saw each PV in the `BoundClaimMissing` state.
    suspects: HashMap<Arc<str>, Time>,
    failures: HashMap<Arc<str>, u32>,
    /// Writes whose watch event has not arrived yet: deciding on the stale store would send the
    /// same write again.
    echoes: HashMap<Arc<str>, (Echo, tokio::time::Instant)>,
    foreign_logged: HashSet<Arc<str>>,
}

/// Runs the controller until `shutdown` resolves. Returns only then: every error on the way
/// (API outage, missing CRD, 403) is logged, counted and retried.
pub async fn run(
    client: Client,
    settings: Settings,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    let cfg = watcher::Config::default().page_size(settings.page_size);
    let (pv_store, pv_w) = reflector::store();
    let (pvc_store, pvc_w) = reflector::store();
    let (sc_store, sc_w) = reflector::store();
    let (vl_store, vl_w) = reflector::store();

    let mut inputs: SelectAll<InputStream> = SelectAll::new();
    inputs.push(reflected(
        Api::all(client.clone()),
        &cfg,
        strip_pv,
        pv_w,
        Input::Pv,
    ));
    inputs.push(reflected(
        Api::all(client.clone()),
        &cfg,
        strip_claim,
        pvc_w,
        Input::Pvc,
    ));
    inputs.push(reflected(
        Api::all(client.clone()),
        &cfg,
        strip_class,
        sc_w,
        Input::Sc,
    ));
    inputs.push(reflected(
        Api::all(client.clone()),
        &cfg,
        strip_leftover,
        vl_w,
        Input::Vl,
    ));

    let mut l = Loop {
        stores: Stores {
            pv: pv_store,
            pvc: pvc_store,
            sc: sc_store,
            vl: vl_store,
        },
        writer: Writer {
            api: Api::all(client),
        },
        health,
        metrics,
        index: RefIndex::default(),
        started: false,
        queue: VecDeque::new(),
        queued: HashSet::new(),
        in_flight: HashSet::new(),
        again: HashSet::new(),
        writes: FuturesUnordered::new(),
        delays: DelayQueue::new(),
        delayed: HashMap::new(),
        suspects: HashMap::new(),
        failures: HashMap::new(),
        echoes: HashMap::new(),
        foreign_logged: HashSet::new(),
        settings,
    };
    let mut resync = tokio::time::interval(l.settings.resync);
    resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    resync.tick().await;
    tokio::pin!(shutdown);

    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(input) = inputs.next() => l.on_input(input),
            Some(expired) = l.delays.next(), if !l.delays.is_empty() => {
                let name = expired.into_inner();
                l.delayed.remove(&name);
                l.mark(name);
            }
            Some((name, result)) = l.writes.next(), if !l.writes.is_empty() => {
                l.on_written(name, result);
            }
            _ = resync.tick() => {
                if l.started {
                    tracing::debug!("periodic sweep");
                    l.sweep();
                }
            }
        }
        l.dispatch();
    }
    l.health.shutting_down();
    // Let writes in flight finish (they are short); new ones are not started.
    while let Some((name, result)) = l.writes.next().await {
        l.on_written(name, result);
    }
    tracing::info!("controller stopped");
}

impl Loop {
    fn on_input(&mut self, input: Input) {
        match input {
            Input::Pv(r) => match *r {
                Ok(ev) => self.on_pv(ev),
                Err(e) => self.watch_error(Kind::persistentvolumes, &e),
            },
            Input::Pvc(r) => match *r {
                Ok(ev) => self.on_claim(ev),
                Err(e) => self.watch_error(Kind::persistentvolumeclaims, &e),
            },
            Input::Sc(r) => match *r {
                Ok(ev) => self.on_class(ev),
                Err(e) => self.watch_error(Kind::storageclasses, &e),
            },
            Input::Vl(r) => match *r {
                Ok(ev) => self.on_leftover(ev),
                Err(e) => self.watch_error(Kind::volumeleftovers, &e),
            },
        }
    }

    fn on_pv(&mut self, ev: Event<Volume>) {
        match ev {
            Event::Apply(pv) => {
                self.index.apply(&pv);
                self.mark(Arc::from(pv.name_any()));
            }
            Event::Delete(pv) => {
                let name = pv.name_any();
                self.index.delete(&name);
                self.suspects.remove(name.as_str());
                self.mark(Arc::from(name));
            }
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => {
                let state = self.stores.pv.state();
                let gone = self.index.reset(state.iter().map(|p| p.as_ref()));
                if !gone.is_empty() {
                    tracing::info!(
                        count = gone.len(),
                        "PersistentVolumes deleted while the watch was down; their findings are re-evaluated"
                    );
                }
                self.synced(Kind::persistentvolumes);
            }
        }
    }

    fn on_claim(&mut self, ev: Event<ClaimMeta>) {
        match ev {
            Event::Apply(c) | Event::Delete(c) => {
                let (ns, name) = (c.namespace().unwrap_or_default(), c.name_any());
                let pvs: Vec<Arc<str>> = self
                    .index
                    .pvs_for_claim(&ns, &name)
                    .map(Arc::from)
                    .collect();
                pvs.into_iter().for_each(|n| self.mark(n));
            }
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => self.synced(Kind::persistentvolumeclaims),
        }
    }

    fn on_class(&mut self, ev: Event<StorageClass>) {
        match ev {
            Event::Apply(c) | Event::Delete(c) => {
                let pvs: Vec<Arc<str>> = self
                    .index
                    .pvs_for_class(&c.name_any())
                    .map(Arc::from)
                    .collect();
                pvs.into_iter().for_each(|n| self.mark(n));
            }
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => self.synced(Kind::storageclasses),
        }
    }

    fn on_leftover(&mut self, ev: Event<VolumeLeftover>) {
        match ev {
            // Our own writes come back here and compare equal; hand edits do not.
            Event::Apply(o) | Event::Delete(o) => self.mark(Arc::from(o.name_any())),
            Event::Init | Event::InitApply(_) => {}
            Event::InitDone => self.synced(Kind::volumeleftovers),
        }
    }

    /// A list completed (initial, or a relist after a 410 or an outage). The store has been
    /// swapped to the new list: objects that vanished in the gap are simply absent, so every
    /// PV and VolumeLeftover is re-evaluated.
    fn synced(&mut self, kind: Kind) {
        let before = self.health.get(kind);
        self.health.set(kind, StoreState::Synced);
        self.metrics.store_state(kind, StoreState::Synced);
        self.metrics.relisted(kind);
        if before != StoreState::Synced {
            tracing::info!(resource = kind.as_str(), "store synced");
        }
        if !self.started && self.all_synced() {
            self.started = true;
            tracing::info!(
                pvs = self.stores.pv.len(),
                claims = self.stores.pvc.len(),
                classes = self.stores.sc.len(),
                leftovers = self.stores.vl.len(),
                claims_readable =
                    self.health.get(Kind::persistentvolumeclaims) == StoreState::Synced,
                "all stores synced; evaluating every PersistentVolume"
            );
        }
        if self.started {
            self.sweep();
        }
    }

    /// PVs and VolumeLeftovers must be listed; claims and classes listed or forbidden (then
    /// their answers are Unknown, never Absent).
    fn all_synced(&self) -> bool {
        let h = &self.health;
        let usable = |k| matches!(h.get(k), StoreState::Synced | StoreState::Forbidden);
        h.get(Kind::persistentvolumes) == StoreState::Synced
            && h.get(Kind::volumeleftovers) == StoreState::Synced
            && usable(Kind::persistentvolumeclaims)
            && usable(Kind::storageclasses)
    }

    fn watch_error(&mut self, kind: Kind, e: &watcher::Error) {
        self.metrics.watch_error(kind);
        let code = error_code(e);
        let msg = e.to_string();
        match code {
            Some(410) => {
                tracing::info!(
                    resource = kind.as_str(),
                    "watch expired (410 Gone); relisting"
                );
                return;
            }
            Some(403) => {
                let fix = format!(
                    "the operator's identity may not list/watch {}: check the ClusterRole in deploy/",
                    kind.as_str()
                );
                tracing::error!(resource = kind.as_str(), error = %msg, "{fix}");
                if kind == Kind::persistentvolumeclaims {
                    tracing::error!(
                        "claims cannot be read: findings report claimMissing Unknown, never True"
                    );
                }
                let before = self.health.get(kind);
                self.health.set(kind, StoreState::Forbidden);
                self.metrics.store_state(kind, StoreState::Forbidden);
                if before != StoreState::Forbidden {
                    if !self.started && self.all_synced() {
                        self.started = true;
                    }
                    if self.started {
                        self.sweep();
                    }
                }
            }
            Some(404) if kind == Kind::volumeleftovers => {
                tracing::error!(
                    error = %msg,
                    "the VolumeLeftover CRD is not installed: kubectl apply -f crds/volumeleftovers.yaml (retrying)"
                );
            }
            _ => {
                tracing::warn!(resource = kind.as_str(), error = %msg, "watch failed; retrying with backoff")
            }
        }
        self.health.set_error(kind, Some(msg));
    }

    /// Queues every PV and every VolumeLeftover.
    fn sweep(&mut self) {
        let mut counts: HashMap<Reason, i64> = HashMap::new();
        for o in self.stores.vl.state() {
            if plan::is_managed(&o)
                && let Some(s) = &o.status
            {
                *counts.entry(s.reason).or_default() += 1;
            }
            self.mark(Arc::from(o.name_any()));
        }
        for pv in self.stores.pv.state() {
            self.mark(Arc::from(pv.name_any()));
        }
        let counts: Vec<(Reason, i64)> = Reason::ALL
            .iter()
            .map(|r| (*r, counts.get(r).copied().unwrap_or(0)))
            .collect();
        self.metrics.findings(&counts);
    }

    fn mark(&mut self, name: Arc<str>) {
        if !self.started {
            // The first sweep, when every store has synced, covers it.
            return;
        }
        if self.in_flight.contains(&name) {
            self.again.insert(name);
        } else if self.queued.insert(name.clone()) {
            self.queue.push_back(name);
        }
    }

    /// Decides queued names and starts writes, up to the concurrency bound.
    fn dispatch(&mut self) {
        while self.writes.len() < self.settings.concurrency {
            let Some(name) = self.queue.pop_front() else {
                break;
            };
            self.queued.remove(&name);
            let action = self.decide(&name);
            match action {
                Action::Nothing => {
                    self.failures.remove(&name);
                }
                Action::Foreign { name: n } => {
                    if self.foreign_logged.insert(name.clone()) {
                        tracing::warn!(
                            name = %n,
                            "a VolumeLeftover of this name exists without the label app.kubernetes.io/managed-by=volume-leftovers; it is left alone and this finding is not published"
                        );
                    }
                }
                action => {
                    self.in_flight.insert(name.clone());
                    let writer = self.writer.clone();
                    self.writes.push(Box::pin(async move {
                        let r = writer.execute(action).await;
                        (name, r)
                    }));
                }
            }
        }
    }

    fn decide(&mut self, name: &Arc<str>) -> Action {
        let now = wall_clock();
        let synced = |k| self.health.get(k) == StoreState::Synced;
        let lookup = StoreLookup {
            claims: synced(Kind::persistentvolumeclaims).then_some(&self.stores.pvc),
            classes: synced(Kind::storageclasses).then_some(&self.stores.sc),
        };
        let pv = self.stores.pv.get(&ObjectRef::new(name));
        let existing = self.stores.vl.get(&ObjectRef::new(name));
        if let Some((echo, at)) = self.echoes.get(name) {
            let caught_up = match echo {
                Echo::Version(rv) => existing
                    .as_ref()
                    .is_some_and(|o| o.metadata.resource_version.as_ref() == Some(rv)),
                Echo::Gone => existing.is_none(),
            };
            let waited = at.elapsed();
            if caught_up || waited >= ECHO_WAIT {
                self.echoes.remove(name);
            } else {
                // The watch event of our own write will mark the name again; the re-check
                // covers an echo that never comes.
                self.recheck_after(name, ECHO_WAIT - waited);
                return Action::Nothing;
            }
        }
        let verdict = match pv.as_deref().map(|pv| classify(pv, &lookup, now.clone())) {
            None => None,
            Some(Verdict::Skip(why)) => {
                self.metrics.skipped();
                tracing::warn!(pv = %name, "skipped: {why}");
                Some(Verdict::Skip(why))
            }
            Some(v) => {
                let suspect = matches!(&v, Verdict::Leftover(f) if f.status.reason == Reason::BoundClaimMissing);
                let since = if suspect {
                    Some(
                        self.suspects
                            .entry(name.clone())
                            .or_insert_with(|| now.clone())
                            .clone(),
                    )
                } else {
                    self.suspects.remove(name);
                    None
                };
                let grace = BoundGrace {
                    grace: self.settings.bound_grace,
                };
                match plan::gate(v, existing.as_deref(), since, &now, grace) {
                    Gated::Now(v) => {
                        if suspect {
                            tracing::warn!(pv = %name, "Bound PersistentVolume's claim is missing beyond the grace period");
                        }
                        Some(v)
                    }
                    Gated::Later(wait) => {
                        tracing::info!(pv = %name, ?wait, "Bound PersistentVolume's claim looks missing; checking again after the grace period");
                        self.recheck_after(name, wait);
                        return Action::Nothing;
                    }
                }
            }
        };
        plan::plan(name, verdict.as_ref(), existing.as_deref())
    }

    /// Evaluates `name` again after `wait`, replacing any re-check already pending for it.
    fn recheck_after(&mut self, name: &Arc<str>, wait: Duration) {
        match self.delayed.get(name) {
            Some(key) => self.delays.reset(key, wait),
            None => {
                let key = self.delays.insert(name.clone(), wait);
                self.delayed.insert(name.clone(), key);
            }
        }
    }

    fn on_written(&mut self, name: Arc<str>, result: WriteResult) {
        self.in_flight.remove(&name);
        match result {
            Ok((op, echo)) => {
                self.metrics.write(op, true);
                self.failures.remove(&name);
                if let Some(echo) = echo {
                    self.echoes
                        .insert(name.clone(), (echo, tokio::time::Instant::now()));
                }
                tracing::debug!(%name, op, "written");
            }
            Err(e) => {
                self.metrics.write(e.op(), false);
                let n = self.failures.entry(name.clone()).or_default();
                *n = n.saturating_add(1);
                let wait = Duration::from_secs(1u64 << (*n).min(8)).min(Duration::from_secs(300));
                tracing::warn!(error = %e, retry_in = ?wait, "write failed");
                self.recheck_after(&name, wait);
            }
        }
        if self.again.remove(&name) {
            self.mark(name);
        }
    }
}

fn error_code(e: &watcher::Error) -> Option<u16> {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s.code),
        watcher::Error::WatchError(s) => Some(s.code),
        _ => None,
    }
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what [`Volume`] still reads but nothing uses: labels, annotations, managedFields,
/// finalizers.
pub fn strip_pv(pv: &mut Volume) {
    let m = &mut pv.metadata;
    m.managed_fields = None;
    m.annotations = None;
    m.labels = None;
    m.finalizers = None;
}

/// Keeps a claim's identity (namespace, name, uid, deletionTimestamp).
pub fn strip_claim(c: &mut ClaimMeta) {
    let m = &mut c.metadata;
    m.managed_fields = None;
    m.annotations = None;
    m.labels = None;
    m.finalizers = None;
    m.owner_references = None;
}

/// Keeps a class's name and reclaim policy.
pub fn strip_class(c: &mut StorageClass) {
    c.metadata.managed_fields = None;
    c.metadata.annotations = None;
    c.metadata.labels = None;
    c.parameters = None;
    c.allowed_topologies = None;
    c.mount_options = None;
}

/// Drops managedFields and the last-applied annotation; labels are compared, so they stay.
pub fn strip_leftover(o: &mut VolumeLeftover) {
    o.metadata.managed_fields = None;
    if let Some(a) = o.metadata.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}
