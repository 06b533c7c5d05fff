//! The decision about one name (a PV's, or an unreferenced image's VolumeLeftover): whether it
//! may be decided now, what to write, what to tell, and when to look again. Pure: the stores are
//! read through [`Stores`] and a [`Lookup`], the monotonic and the wall time are arguments, and
//! the effects (the write, the Event, the held state for the gauges, the lines to log, the next
//! wake-up) are returned as an [`Outcome`] for `run/` to perform.
//!
//! What [`Inputs::decide`] guarantees, in order:
//! - **Stale gating.** With the PV store or the VolumeLeftover store not current, nothing is
//!   decided (the name is held as undecided); the sweep after their next list brings it back.
//! - **Echo wait.** After a write, the name waits until the VolumeLeftover store shows what it
//!   left (or the wait ends): a decision on the older view would write again.
//! - **Nothing concluded from an outage.** A published `VolumeWithoutDisk` stays while the census
//!   answers Unknown; a finding about an unreferenced image stays while its pool's census is not
//!   trusted or its details could not be read.
//! - **Tombstones.** A watched delete of a volume that leaves its disk, or of a content that
//!   leaves its backend snapshot, keeps its finding ([`Memo::tombstone`]) until it is published;
//!   an acknowledgement, the TTL and the census end both kinds alike ([`plan::tombstone_plan`]).
//! - **Grace.** A state normally passing through is published only once it lasted its grace
//!   ([`plan::gate`]); one already published stays so across a restart.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::census::{Census, Scope};
use crate::decide::classify::{classify, volume_source};
use crate::decide::lookup::{Lookup, disk_found};
use crate::decide::plan::{self, Action, Gated, Graces, Observed};
use crate::decide::snapshot::{
    self as snap, ContentFacts, ContentLookup, Found, SnapshotFacts, SnapshotGate, SnapshotKey,
    SnapshotLookup, SnapshotVerdict, content_facts, snapshot_facts,
};
use crate::model::crd::Subject;
use crate::model::crd::{Reason, State};
use crate::model::finding::{Change, Finding, Verdict};
use crate::model::image::ImageFound;
use crate::model::leftover::Leftover;
use crate::model::price::PriceTable;
use crate::model::snapshot::{Snapshot, SnapshotContent};
use crate::model::volume::Volume;

/// What the operator's own VolumeLeftover store will show once the watch delivers a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Echo {
    /// The object at this resourceVersion (or a later one).
    Version(String),
    /// No object.
    Gone,
    /// Some object of this name (a create answered "already exists": the store has not shown
    /// it yet, and it may be someone else's).
    Exists,
}

/// Why a name is not published although its volume was evaluated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Held {
    /// A finding waiting for its grace period.
    Pending(Reason),
    /// A store the decision depends on is stale or forbidden.
    Undecided,
    /// The volume is too odd to judge.
    Skipped,
    /// The volume is kept out of the report on purpose.
    Ignored,
}

/// What a published finding counts for in the metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// Its reason.
    pub reason: Reason,
    /// Its StorageClass (empty when none).
    pub storage_class: String,
    /// Its state.
    pub state: State,
    /// Its capacity in bytes (0 when unknown).
    pub capacity_bytes: i64,
    /// Its firstSeen, in seconds since the epoch.
    pub first_seen: i64,
    /// Its estimated monthly cost: the currency and the amount in its minor unit.
    pub monthly_cost: Option<(Arc<str>, i64)>,
}

/// What the controller remembers about a name between decisions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Memo {
    /// A write whose watch event has not arrived yet, and until when (monotonic) to wait for it.
    pub(crate) echo: Option<(Echo, Instant)>,
    /// The grace clock of a held state.
    pub(crate) observed: Option<Observed>,
    /// What the managed VolumeLeftover the store shows for this name publishes.
    pub published: Option<Published>,
    /// Why the volume is not published, when it is held.
    pub(crate) held: Option<Held>,
    /// The last line logged about this name (a skip or a foreign object), to log once per change.
    pub(crate) logged: Option<String>,
    /// The tombstone of a volume whose delete was watched (built from its last object), until it
    /// is published or given up.
    pub(crate) tombstone: Option<Box<Finding>>,
}

impl Memo {
    /// Whether nothing is remembered (the scheduler then drops it).
    pub(crate) fn is_empty(&self) -> bool {
        *self == Memo::default()
    }
}

/// What the caller decided for a name.
#[derive(Debug)]
pub(crate) enum Decision<W> {
    /// Nothing to write; decide again when something changes.
    Idle,
    /// Nothing to write now; decide again after this long (grace period, echo wait).
    WaitFor(Duration),
    /// Start this write.
    Write(W),
}

/// An Event to publish about a PV once the write that made its change landed.
#[derive(Clone, Debug)]
pub(crate) struct Told {
    /// The PV's name.
    pub(crate) pv: String,
    /// The PV's uid.
    pub(crate) uid: String,
    /// What changed.
    pub(crate) change: Change,
}

/// What a decision reads of the operator's stores (the controller implements it over its
/// reflector stores).
pub(crate) trait Stores {
    /// Whether the PersistentVolume store and the VolumeLeftover store are both current.
    fn current(&self) -> bool;
    /// The PersistentVolume of this name.
    fn volume(&self, name: &str) -> Option<Arc<Volume>>;
    /// The VolumeLeftover of this name.
    fn leftover(&self, name: &str) -> Option<Arc<Leftover>>;
    /// Whether the VolumeSnapshotContent and VolumeSnapshot stores are both current (never
    /// while their kinds are not served).
    fn snapshots_current(&self) -> bool {
        false
    }
    /// The snapshot object in the stores whose findings have this VolumeLeftover name.
    fn snapshot_key(&self, name: &str) -> Option<SnapshotKey> {
        let _ = name;
        None
    }
    /// The VolumeSnapshotContent of this name.
    fn content(&self, name: &str) -> Option<Arc<SnapshotContent>> {
        let _ = name;
        None
    }
    /// The VolumeSnapshot of this namespace and name.
    fn snapshot(&self, namespace: &str, name: &str) -> Option<Arc<Snapshot>> {
        let _ = (namespace, name);
        None
    }
}

/// The snapshot stores as the snapshot classifiers read them: only ever asked while both are
/// current, so an object is there or absent.
struct SnapshotObjects<'a, S: Stores>(&'a S);

impl<S: Stores> SnapshotLookup for SnapshotObjects<'_, S> {
    fn snapshot(&self, namespace: &str, name: &str) -> Found<SnapshotFacts> {
        match self.0.snapshot(namespace, name) {
            Some(s) => Found::Yes(snapshot_facts(&s)),
            None => Found::Absent,
        }
    }
}

impl<S: Stores> ContentLookup for SnapshotObjects<'_, S> {
    fn content(&self, name: &str) -> Found<ContentFacts> {
        match self.0.content(name) {
            Some(c) => Found::Yes(content_facts(&c)),
            None => Found::Absent,
        }
    }
}

/// The census as the decisions read it: each pool's state, the findings about images nothing
/// references by VolumeLeftover name, and those whose details the last census could not read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Images<'a> {
    /// Each pool's state.
    pub(crate) census: &'a Census,
    /// Findings about unreferenced images, by VolumeLeftover name.
    pub(crate) orphans: &'a BTreeMap<String, (Scope, Finding)>,
    /// Unreferenced images whose details could not be read: what is published about them stays.
    pub(crate) held: &'a BTreeMap<String, Scope>,
    /// Snapshot scopes whose last listing could not be compared with the contents: what is
    /// published about their snapshots stays.
    pub(crate) unconcluded: &'a std::collections::BTreeSet<Scope>,
}

/// The settings a decision follows.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rules<'a> {
    /// Grace periods of states normally passing through.
    pub(crate) graces: Graces,
    /// How long a tombstone stays after its delete (`None`: until acknowledged or gone).
    pub(crate) tombstone_ttl: Option<Duration>,
    /// The price table, when one is configured: findings then carry their estimated cost.
    pub(crate) prices: Option<&'a PriceTable>,
}

/// A line to log about a name, for the shell to turn into a `tracing` event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Log {
    /// The volume is too odd to judge (a warning, logged once per change of `why`).
    Skipped {
        /// The PV's name.
        pv: String,
        /// Why.
        why: String,
    },
    /// The verdict depends on a store that is stale or forbidden (debug).
    Undecided {
        /// The PV's name.
        pv: String,
        /// Why.
        why: crate::model::finding::Undecided,
    },
    /// A state normally passing through is held until its grace ends (debug).
    Holding {
        /// The PV's name.
        pv: String,
        /// The finding's reason, when it is one.
        reason: Option<Reason>,
        /// How long until its grace ends.
        wait: Duration,
    },
    /// A VolumeLeftover of the finding's name exists that the operator does not manage (a
    /// warning, logged once per change): [`FOREIGN`].
    Foreign {
        /// The VolumeLeftover's name.
        name: String,
    },
}

/// What is logged about a VolumeLeftover of a finding's name the operator does not manage.
pub(crate) const FOREIGN: &str = "a VolumeLeftover of this name exists without the label app.kubernetes.io/managed-by=volume-leftovers; it is left alone and this finding is not published";

/// A change of a name's held state, for the gauges: one less `from`, one more `to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeldChange {
    /// What it was held as.
    pub(crate) from: Option<Held>,
    /// What it is held as now.
    pub(crate) to: Option<Held>,
}

/// The effects of one decision.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// What to do: nothing, look again later, or write (with the Event to tell once it landed).
    pub(crate) decision: Decision<(Action, Option<Told>)>,
    /// The held state changed.
    pub(crate) held: Option<HeldChange>,
    /// Lines to log, de-duplicated where the warning would repeat.
    pub(crate) logs: Vec<Log>,
}

/// Everything a decision reads besides the name's memo and the time.
pub(crate) struct Inputs<'a, S: Stores, L: Lookup> {
    /// The PV and VolumeLeftover stores.
    pub(crate) stores: &'a S,
    /// Claims, classes and the census as the classifier reads them.
    pub(crate) lookup: &'a L,
    /// The census's images, when the census is on.
    pub(crate) images: Option<Images<'a>>,
    /// The settings.
    pub(crate) rules: Rules<'a>,
}

/// An [`Outcome`] being built.
struct Effects {
    held: Option<HeldChange>,
    logs: Vec<Log>,
}

impl Effects {
    /// Records why a name is held; a change is reported for the gauges.
    fn hold(&mut self, memo: &mut Memo, held: Option<Held>) {
        let before = std::mem::replace(&mut memo.held, held);
        if before != held {
            self.held = Some(HeldChange {
                from: before,
                to: held,
            });
        }
    }

    /// Logs `log` unless `line` is what was last logged about this name.
    fn log_once(&mut self, memo: &mut Memo, line: &str, log: Log) {
        if memo.logged.as_deref() == Some(line) {
            return;
        }
        self.logs.push(log);
        memo.logged = Some(line.to_string());
    }
}

impl<S: Stores, L: Lookup> Inputs<'_, S, L> {
    /// Decides `name` at the monotonic time `now_i` and the wall time `now`, reading and updating
    /// its `memo`.
    pub(crate) fn decide(
        &self,
        name: &str,
        memo: &mut Memo,
        now_i: Instant,
        now: &Time,
    ) -> Outcome {
        let mut fx = Effects {
            held: None,
            logs: Vec::new(),
        };
        let decision = self.decide_with(name, memo, now_i, now, &mut fx);
        Outcome {
            decision,
            held: fx.held,
            logs: fx.logs,
        }
    }

    fn decide_with(
        &self,
        name: &str,
        memo: &mut Memo,
        now_i: Instant,
        now: &Time,
        fx: &mut Effects,
    ) -> Decision<(Action, Option<Told>)> {
        // The subject and the operator's own objects must be current, or nothing is decided;
        // the sweep after their next list brings every name back.
        if !self.stores.current() {
            fx.hold(memo, Some(Held::Undecided));
            return Decision::Idle;
        }
        let existing = self.stores.leftover(name);
        let existing = existing.as_deref();
        if let Some(wait) = echo_wait(memo, existing, now_i) {
            return Decision::WaitFor(wait);
        }
        let pv = self.stores.volume(name);
        let pv = pv.as_deref();
        if self.census_cannot_say(pv, existing) {
            // The census cannot say now (Ceph is down): a missing image is not found again by
            // an outage, nor is its finding cleared.
            fx.hold(memo, Some(Held::Undecided));
            return Decision::Idle;
        }
        if pv.is_none()
            && let Some(action) = self.decide_image(name, existing, now)
        {
            fx.hold(memo, None);
            return match action {
                // Its accrued cost moves by the clock alone.
                Action::Nothing => match plan::next_change(existing, now) {
                    Some(wait) => Decision::WaitFor(wait.saturating_add(Duration::from_secs(1))),
                    None => Decision::Idle,
                },
                Action::Foreign { .. } => Decision::Idle,
                write => {
                    let told = told(&write, existing);
                    Decision::Write((write, told))
                }
            };
        }
        if pv.is_none()
            && let Some(decision) = self.decide_snapshot(name, memo, existing, now, fx)
        {
            return decision;
        }
        let (action, held) = match pv {
            None => (self.gone(name, memo, existing, now), None),
            Some(pv) => match self.evaluate(name, pv, memo, existing, now, fx) {
                Ok(planned) => planned,
                Err(wait) => return Decision::WaitFor(wait),
            },
        };
        fx.hold(memo, held);
        match action {
            Action::Nothing => {
                if held != Some(Held::Skipped) {
                    memo.logged = None;
                }
                // An acknowledgement that expires, or a tombstone's TTL, changes the state by
                // the clock alone.
                let ttl = self.rules.tombstone_ttl;
                match [
                    plan::next_change(existing, now),
                    plan::tombstone_expires(existing, now, ttl),
                ]
                .into_iter()
                .flatten()
                .min()
                {
                    Some(wait) => Decision::WaitFor(wait.saturating_add(Duration::from_secs(1))),
                    None => Decision::Idle,
                }
            }
            Action::Foreign { name: n } => {
                fx.log_once(memo, FOREIGN, Log::Foreign { name: n });
                Decision::Idle
            }
            write => {
                let told = told(&write, existing);
                Decision::Write((write, told))
            }
        }
    }

    /// Whether the volume's published `VolumeWithoutDisk` finding waits because the census
    /// answers Unknown for its image.
    fn census_cannot_say(&self, pv: Option<&Volume>, existing: Option<&Leftover>) -> bool {
        let (Some(pv), Some(e)) = (pv, existing) else {
            return false;
        };
        published_reason(e) == Some(Reason::VolumeWithoutDisk)
            && pv.spec.as_ref().is_some_and(|spec| {
                disk_found(
                    self.lookup,
                    &volume_source(spec),
                    pv.metadata.creation_timestamp.as_ref(),
                ) == ImageFound::Unknown
            })
    }

    /// What to write for a name whose PV is gone: its tombstone (from the memo, or made of the
    /// published finding) while it lasts, else nothing of it.
    fn gone(&self, name: &str, memo: &mut Memo, existing: Option<&Leftover>, now: &Time) -> Action {
        memo.observed = None;
        if is_tombstone_of_any(existing, memo.tombstone.as_deref()) {
            memo.tombstone = None;
        }
        let image = self.tombstone_backend(memo.tombstone.as_deref(), existing);
        let action = plan::gone(
            name,
            memo.tombstone.as_deref(),
            existing,
            now,
            self.rules.tombstone_ttl,
            &image,
            self.rules.prices,
        );
        if matches!(
            action,
            Action::Nothing | Action::Delete { .. } | Action::Foreign { .. }
        ) {
            memo.tombstone = None;
        }
        action
    }

    /// What to write for a volume, and why it is held (`Err`: not yet, a state passing through
    /// waits this long for its grace).
    fn evaluate(
        &self,
        name: &str,
        pv: &Volume,
        memo: &mut Memo,
        existing: Option<&Leftover>,
        now: &Time,
        fx: &mut Effects,
    ) -> Result<(Action, Option<Held>), Duration> {
        let v = classify(pv, self.lookup, now.clone());
        let held = match &v {
            Verdict::Skip(why) => {
                let log = Log::Skipped {
                    pv: name.to_string(),
                    why: why.clone(),
                };
                fx.log_once(memo, why, log);
                Some(Held::Skipped)
            }
            Verdict::Undecided(why) => {
                fx.logs.push(Log::Undecided {
                    pv: name.to_string(),
                    why: why.clone(),
                });
                Some(Held::Undecided)
            }
            Verdict::Ignored(_) => Some(Held::Ignored),
            Verdict::Healthy | Verdict::Leftover(_) => None,
        };
        let reason = match &v {
            Verdict::Leftover(f) => Some(f.status.reason),
            _ => None,
        };
        match plan::gate(v, existing, &mut memo.observed, now, self.rules.graces) {
            Gated::Later(wait) => {
                fx.hold(memo, reason.map(Held::Pending));
                fx.logs.push(Log::Holding {
                    pv: name.to_string(),
                    reason,
                    wait,
                });
                Err(wait)
            }
            Gated::Now {
                verdict,
                first_seen,
            } => Ok((
                plan::plan(
                    name,
                    Some(&verdict),
                    existing,
                    &first_seen,
                    now,
                    self.rules.prices,
                ),
                held,
            )),
        }
    }

    /// For a name that is no PV's: the finding about an image nothing references, while the
    /// census says so (`None`: not an image's name).
    fn decide_image(&self, name: &str, existing: Option<&Leftover>, now: &Time) -> Option<Action> {
        let managed = existing.filter(|o| o.managed);
        let published_image = managed.and_then(|o| o.status.as_ref()).filter(|s| {
            matches!(
                s.reason,
                Reason::DiskWithoutVolume | Reason::SnapshotWithoutContent
            )
        });
        let cs = match &self.images {
            Some(cs) => cs,
            // The census was turned off: nobody vouches for these any more.
            None => {
                return published_image
                    .map(|_| plan::plan(name, None, existing, now, now, self.rules.prices));
            }
        };
        if let Some((_, f)) = cs.orphans.get(name) {
            return Some(plan::plan(
                name,
                Some(&Verdict::Leftover(Box::new(f.clone()))),
                existing,
                now,
                now,
                self.rules.prices,
            ));
        }
        let s = published_image?;
        if cs.held.contains_key(name) {
            // Its details could not be read: whether it is still nobody's is not known.
            return Some(Action::Nothing);
        }
        // Images without a volume keep their facts (`leftover::needs_record`).
        let key = s.record().and_then(|r| cs.census.recorded_scope(&r));
        let vouched = key.as_ref().is_none_or(|k| {
            !cs.census.covers(k) || (cs.census.is_trusted(k) && !cs.unconcluded.contains(k))
        });
        Some(if vouched {
            // The pool's census no longer finds it unreferenced (or the pool is no longer
            // censused; a zone or region of a project listed as a whole is, before its first
            // listing names it).
            plan::plan(name, None, existing, now, now, self.rules.prices)
        } else {
            // The census cannot say now: what is published stays.
            Action::Nothing
        })
    }

    /// For a name that is no PV's: the finding about a snapshot object (`None`: not a snapshot
    /// object's name). Both snapshot stores must be current, or what is published stays.
    fn decide_snapshot(
        &self,
        name: &str,
        memo: &mut Memo,
        existing: Option<&Leftover>,
        now: &Time,
        fx: &mut Effects,
    ) -> Option<Decision<(Action, Option<Told>)>> {
        let key = self.stores.snapshot_key(name);
        let published_subject = existing
            .filter(|o| o.managed)
            .and_then(|o| o.status.as_ref())
            .map(|s| s.subject);
        let about_snapshot = matches!(
            published_subject,
            Some(Subject::SnapshotContent | Subject::Snapshot)
        );
        let tombstone = memo
            .tombstone
            .as_deref()
            .filter(|t| t.status.reason == Reason::ContentDeleted);
        if key.is_none() && !about_snapshot && tombstone.is_none() {
            return None;
        }
        if !self.stores.snapshots_current() {
            // Not served, forbidden, stale or not listed yet: nothing is concluded.
            fx.hold(memo, Some(Held::Undecided));
            return Some(Decision::Idle);
        }
        let objects = SnapshotObjects(self.stores);
        let graces = self.rules.graces;
        let verdict = match &key {
            Some(SnapshotKey::Content(c)) => self
                .stores
                .content(c)
                .map(|c| snap::classify_content(&c, &objects, now.clone(), graces)),
            Some(SnapshotKey::Snapshot { namespace, name }) => self
                .stores
                .snapshot(namespace, name)
                .map(|s| snap::classify_snapshot(&s, &objects, now.clone())),
            None => None,
        };
        let action = match verdict {
            Some(v) => {
                // A live object of that name again: a tombstone not yet written is superseded.
                memo.tombstone = None;
                match self.snapshot_verdict(name, v, memo, existing, now, fx) {
                    Ok(action) => action,
                    Err(wait) => return Some(Decision::WaitFor(wait)),
                }
            }
            None => {
                fx.hold(memo, None);
                memo.observed = None;
                self.snapshot_gone(name, memo, existing, now)
            }
        };
        Some(match action {
            Action::Nothing => {
                let ttl = self.rules.tombstone_ttl;
                match [
                    plan::next_change(existing, now),
                    plan::tombstone_expires(existing, now, ttl),
                ]
                .into_iter()
                .flatten()
                .min()
                {
                    Some(wait) => Decision::WaitFor(wait.saturating_add(Duration::from_secs(1))),
                    None => Decision::Idle,
                }
            }
            Action::Foreign { name: n } => {
                fx.log_once(memo, FOREIGN, Log::Foreign { name: n });
                Decision::Idle
            }
            // No Event: there is no PersistentVolume to attach it to.
            write => Decision::Write((write, None)),
        })
    }

    /// What to write for a snapshot object in the stores, from its verdict (`Err`: not yet, a
    /// state passing through waits this long for its grace).
    fn snapshot_verdict(
        &self,
        name: &str,
        verdict: SnapshotVerdict,
        memo: &mut Memo,
        existing: Option<&Leftover>,
        now: &Time,
        fx: &mut Effects,
    ) -> Result<Action, Duration> {
        let prices = self.rules.prices;
        let published = existing
            .filter(|o| o.managed)
            .and_then(|o| o.status.as_ref())
            .map(|s| s.reason);
        match verdict {
            // Kept out on purpose: counted by the feeds (`snapshots_excluded`), not as a volume.
            SnapshotVerdict::Healthy | SnapshotVerdict::Excluded(_) => {
                fx.hold(memo, None);
                memo.observed = None;
                Ok(plan::plan(name, None, existing, now, now, prices))
            }
            SnapshotVerdict::Undecided(why) => {
                // What is published stays; `why` is the store's state, which its health says.
                let _ = why;
                fx.hold(memo, Some(Held::Undecided));
                Ok(Action::Nothing)
            }
            SnapshotVerdict::Skip(why) => {
                let log = Log::Skipped {
                    pv: name.to_string(),
                    why: why.clone(),
                };
                fx.log_once(memo, &why, log);
                fx.hold(memo, Some(Held::Skipped));
                Ok(Action::Nothing)
            }
            SnapshotVerdict::Waiting { reason, until } => {
                let reason: Reason = reason.into();
                if published == Some(reason) {
                    // Published before (a restart, or a longer grace now): it stays.
                    fx.hold(memo, None);
                    return Ok(Action::Nothing);
                }
                fx.hold(memo, Some(Held::Pending(reason)));
                let wait = Duration::try_from(until.0.duration_since(now.0))
                    .unwrap_or(Duration::ZERO)
                    .saturating_add(Duration::from_secs(1));
                fx.logs.push(Log::Holding {
                    pv: name.to_string(),
                    reason: Some(reason),
                    wait,
                });
                Err(wait)
            }
            SnapshotVerdict::Leftover(f) => {
                let reason: Reason = f.reason.into();
                let same = published == Some(reason);
                match snap::gate(&f, &mut memo.observed, same, now, self.rules.graces) {
                    SnapshotGate::Later(wait) => {
                        fx.hold(memo, Some(Held::Pending(reason)));
                        fx.logs.push(Log::Holding {
                            pv: name.to_string(),
                            reason: Some(reason),
                            wait,
                        });
                        Err(wait)
                    }
                    SnapshotGate::Now { first_seen } => {
                        fx.hold(memo, None);
                        let finding = snap::as_finding(&f, &first_seen);
                        Ok(plan::plan(
                            name,
                            Some(&Verdict::Leftover(Box::new(finding))),
                            existing,
                            &first_seen,
                            now,
                            prices,
                        ))
                    }
                }
            }
        }
    }

    /// What to write for a snapshot name whose object is gone: the tombstone of a deleted Retain
    /// content (from the memo, or as published) while it lasts, else nothing of it.
    fn snapshot_gone(
        &self,
        name: &str,
        memo: &mut Memo,
        existing: Option<&Leftover>,
        now: &Time,
    ) -> Action {
        let prices = self.rules.prices;
        let published = existing
            .filter(|o| o.managed)
            .and_then(|o| o.status.as_ref())
            .filter(|s| s.reason == Reason::ContentDeleted);
        let tombstone = match (memo.tombstone.take(), published) {
            (Some(t), None) => Some(*t),
            // Published: its own record is the tombstone now (the memo's is the same finding).
            (_, Some(s)) => match s.record() {
                Some(status) => Some(Finding {
                    volume_name: String::new(),
                    volume_uid: String::new(),
                    storage_class_name: None,
                    object_name: Some(name.to_string()),
                    status,
                }),
                // Cannot happen (a tombstone keeps its facts); if it did, it stays as it is.
                None => return Action::Nothing,
            },
            (None, None) => None,
        };
        let Some(t) = tombstone else {
            return plan::plan(name, None, existing, now, now, prices);
        };
        // It ends as a volume's tombstone does: the same function decides both.
        let backend = self.tombstone_backend(Some(&t), None);
        let ttl = self.rules.tombstone_ttl;
        let action = plan::tombstone_plan(name, t.clone(), existing, now, ttl, &backend, prices);
        if matches!(action, Action::Create { .. } | Action::Apply { .. }) && published.is_none() {
            // Kept until its write shows in the store (the write may fail and be retried).
            memo.tombstone = Some(Box::new(t));
        }
        action
    }

    /// What the census says of the backend object a tombstone names: a deleted volume's disk,
    /// a deleted content's backend snapshot (`NotCensused` without the census, or for a name
    /// that is no tombstone).
    fn tombstone_backend(
        &self,
        fresh: Option<&Finding>,
        existing: Option<&Leftover>,
    ) -> ImageFound {
        let Some(cs) = &self.images else {
            return ImageFound::NotCensused;
        };
        // Tombstones keep their facts (`leftover::needs_record`).
        let record;
        let status = match (fresh, existing.and_then(|e| e.status.as_ref())) {
            (Some(f), _) => &f.status,
            (None, Some(s)) if s.reason == Reason::VolumeDeleted => match s.record() {
                Some(r) => {
                    record = r;
                    &record
                }
                None => return ImageFound::NotCensused,
            },
            _ => return ImageFound::NotCensused,
        };
        if status.reason == Reason::ContentDeleted {
            // The handle its content named (`status.snapshot.snapshotHandle`).
            return match status
                .snapshot
                .as_ref()
                .and_then(|s| s.snapshot_handle.as_deref())
                .and_then(|h| cs.census.snapshot_ref(h))
            {
                Some(r) => cs.census.backend_snapshot(&r),
                None => ImageFound::NotCensused,
            };
        }
        // A tombstone keeps its source with its zones (one written before they were recorded
        // has none: its in-tree GCE disk is not located, and not censused).
        let Some(r) = cs.census.disk_ref(&status.source) else {
            return ImageFound::NotCensused;
        };
        // The volume existed before any census of this process.
        let long_ago = Time(jiff::Timestamp::UNIX_EPOCH);
        cs.census.image(&r, Some(&long_ago))
    }
}

/// The change a write makes, for the Event on the PV. A finding that names no PV (an image
/// no volume references) has no Event: there is no object to attach it to.
pub(crate) fn told(action: &Action, existing: Option<&Leftover>) -> Option<Told> {
    let before = existing.and_then(published_reason);
    let (pv, uid, change) = match action {
        Action::Create { object } | Action::Apply { object, .. } => {
            let s = object.status.as_ref()?;
            let change = match before {
                None => Change::Found {
                    reason: s.reason,
                    message: s.message.clone(),
                },
                Some(from) if from != s.reason => Change::ReasonChanged {
                    from,
                    to: s.reason,
                    message: s.message.clone(),
                },
                Some(_) => return None,
            };
            (
                object.spec.volume_name.clone(),
                object.spec.volume_uid.clone(),
                change,
            )
        }
        Action::Delete { .. } => {
            let e = existing?;
            (
                e.volume_name().to_string(),
                e.volume_uid.to_string(),
                Change::Cleared { reason: before? },
            )
        }
        Action::Nothing | Action::Foreign { .. } => return None,
    };
    if pv.is_empty() {
        return None;
    }
    Some(Told { pv, uid, change })
}

/// Whether `o` is the operator's published tombstone of the volume `t` is about.
pub(crate) fn is_tombstone_of(o: &Leftover, t: Option<&Finding>) -> bool {
    t.is_some_and(|t| {
        o.managed
            && *o.volume_uid == *t.volume_uid
            && o.status
                .as_ref()
                .is_some_and(|s| s.reason == Reason::VolumeDeleted)
    })
}

fn is_tombstone_of_any(o: Option<&Leftover>, t: Option<&Finding>) -> bool {
    o.is_some_and(|o| is_tombstone_of(o, t))
}

/// What a managed VolumeLeftover publishes, for the metrics.
pub(crate) fn published(o: &Leftover) -> Option<Published> {
    if !o.managed {
        return None;
    }
    let s = o.status.as_ref()?;
    Some(Published {
        reason: s.reason,
        storage_class: s
            .storage_class
            .as_deref()
            .map(String::from)
            .unwrap_or_default(),
        state: s.state,
        capacity_bytes: s.capacity_bytes.unwrap_or(0),
        first_seen: s.first_seen.0.as_second(),
        monthly_cost: s
            .cost
            .as_ref()
            .map(|c| (Arc::from(&*c.currency), c.monthly_minor_units)),
    })
}

/// The reason a managed VolumeLeftover publishes.
fn published_reason(o: &Leftover) -> Option<Reason> {
    o.managed
        .then_some(o.status.as_ref().map(|s| s.reason))
        .flatten()
}

/// How long the name still waits for the echo of its last write (`None`: it arrived, or the
/// wait is over). The watch event of that write marks the name again; the wake-up covers an
/// echo that never comes.
fn echo_wait(memo: &mut Memo, existing: Option<&Leftover>, now_i: Instant) -> Option<Duration> {
    let (echo, deadline) = memo.echo.as_ref()?;
    if caught_up(echo, existing) || now_i >= *deadline {
        memo.echo = None;
        return None;
    }
    Some(deadline.saturating_duration_since(now_i))
}

/// Whether the store shows what the operator's write left behind.
fn caught_up(echo: &Echo, existing: Option<&Leftover>) -> bool {
    match echo {
        Echo::Version(rv) => existing
            .and_then(|o| o.resource_version.as_deref())
            .is_some_and(|have| at_least(have, rv)),
        Echo::Gone => existing.is_none(),
        Echo::Exists => existing.is_some(),
    }
}

/// `have` is `want` or later. resourceVersions are etcd revisions in practice; when they do not
/// parse as numbers, only equality counts.
fn at_least(have: &str, want: &str) -> bool {
    match (have.parse::<u64>(), want.parse::<u64>()) {
        (Ok(h), Ok(w)) => h >= w,
        _ => have == want,
    }
}
