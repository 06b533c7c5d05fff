//! The loop as a state machine: an [`Event`] (a feed's item, a census result, a role change, a
//! write's outcome, a timer) and the time go in through [`Loop::step`], [`Effects`] (writes to
//! start, the ClusterReport to apply, Events to publish, lines to log, metric changes, the next
//! wake-up, the end of the loop) come out. It starts no task, makes no request and reads no
//! clock: the [`shell`](super::shell) does, and feeds back what came of it. Wake-ups (grace, echo
//! wait, backoff) are kept by the scheduler, whose timers run on tokio's clock (tests drive them
//! with paused time); [`Effects::wake`] says when the earliest is due.
//!
//! Health (each store's state and trust, the leader's standing, whether writes are blocked)
//! stays the machine's own, in the shared [`Health`], rather than becoming an effect: the
//! decisions read it within the same step that changes it (a store turning Forbidden or stale
//! changes the next decision's trust), so a copy applied later by the shell would either lag
//! behind the decisions or have to be kept twice. `/readyz` only reads it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::decision::{CensusState, Ctx};
use super::effects::{Gauge, Log};
use super::{Ended, Told};
use crate::decide::name::Published;
use crate::decide::name::published;
use crate::decide::plan::Action;
use crate::decide::report::cluster_report;
use crate::engine::backoff::seed;
use crate::engine::schedule::Limits;
use crate::model::crd::{Reason, VolumeLeftover};
use crate::publish::leader::Role;
use crate::publish::report::Applied;
use crate::publish::writer::{Outcome, WriteError, Written};
use crate::run::scheduling::{Condition, Scheduler, WriteEnd};
use crate::run::settings::Settings;
use crate::run::wiring::{Input, Stores};
use crate::telemetry::Standing;
use crate::telemetry::{Health, Kind, Trust, WritesBlocked};
use crate::watch::index::RefIndex;
use crate::watch::snapshot_index::SnapshotIndex;
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
    /// Reads the monotonic clock to time each decision (the shell: the real clock).
    pub(super) stopwatch: fn() -> std::time::Instant,
    pub(super) index: RefIndex,
    /// The snapshot objects by the VolumeLeftover names of their findings.
    pub(super) snapshots: SnapshotIndex,
    pub(crate) scheduler: Scheduler,
    pub(super) report: Option<Report>,
    pub(super) census: Option<CensusState>,
    /// The first round of decisions after this replica started deciding.
    pub(super) convergence: Convergence,
    /// The effects of the step under way.
    pub(super) out: Effects,
}

/// The first round of decisions, from the moment this replica starts deciding until nothing is
/// queued or in flight: on a cluster with thousands of findings that round writes for a minute,
/// and it says how far it is instead of staying silent.
#[derive(Debug, Default)]
pub(crate) enum Convergence {
    /// Not deciding yet.
    #[default]
    NotStarted,
    /// Deciding since `since`; the last progress line at `said`; `written` writes landed.
    Running {
        since: Instant,
        said: Instant,
        written: usize,
    },
    /// Converged once: nothing more is said about it.
    Done,
}

/// How often a first convergence says how far it is.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The OpenReports mirror's books: whether the findings changed since it was last written, the
/// last content written, and whether a write is in flight.
pub(super) struct Report {
    pub(super) dirty: bool,
    pub(super) last: Option<serde_json::Value>,
    pub(super) in_flight: bool,
    pub(super) not_before: Instant,
    pub(super) missing_logged: bool,
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
    /// Lines to log, in order.
    pub(crate) logs: Vec<Log>,
    /// Metric changes, in order.
    pub(crate) gauges: Vec<Gauge>,
    /// When the machine must next be woken with [`Event::Woke`] (the scheduler's earliest
    /// timer: grace, echo wait, backoff, probe); `None`: only another event will do.
    pub(crate) wake: Option<Instant>,
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
        stopwatch: fn() -> std::time::Instant,
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
            stopwatch,
            index: RefIndex::default(),
            snapshots: SnapshotIndex::default(),
            scheduler: Scheduler::new(limits, seed("scheduler")),
            role,
            census: settings
                .census
                .as_ref()
                .map(|c| CensusState::new(c.config.census(c.image_grace))),
            settings,
            convergence: Convergence::NotStarted,
            out: Effects::default(),
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
        match event {
            Event::Role => {
                if self.on_role() == Some(Ended::LostLease) {
                    self.out.ended = Some(Ended::LostLease);
                    return self.take_effects();
                }
            }
            Event::Input(input) => {
                self.heap_used = true;
                self.on_input(input, now, wall);
            }
            Event::Woke => {}
            Event::Written { name, result, told } => {
                self.heap_used = true;
                self.on_written(&name, result, told, now);
            }
            Event::Reported { content, applied } => self.reported(content, applied, now),
            Event::Tick(Tick::Resync) => {
                if self.is_deciding() {
                    self.log(Log::Sweep);
                    self.sweep();
                }
            }
            Event::Tick(Tick::Reminder) => self.remind(now),
            Event::Tick(Tick::Ages) => {
                self.refresh_ages(wall);
                if std::mem::take(&mut self.heap_used) {
                    crate::engine::heap::release();
                }
            }
            Event::Tick(Tick::Report) => self.out.report = self.report(now),
        }
        let writes = self.dispatch(now, wall);
        self.out.writes = writes;
        self.converge(now);
        self.take_effects()
    }

    /// Says how far the first convergence is: a line every [`PROGRESS_EVERY`] while names are
    /// queued or writes are in flight, and one when none are (the findings published, those
    /// held in a grace, the writes it took).
    fn converge(&mut self, now: Instant) {
        if !self.scheduler.is_active() {
            return;
        }
        if matches!(self.convergence, Convergence::NotStarted) {
            self.convergence = Convergence::Running {
                since: now,
                said: now,
                written: 0,
            };
        }
        let Convergence::Running {
            since,
            said,
            written,
        } = self.convergence
        else {
            return;
        };
        let (queued, in_flight) = (self.scheduler.queued(), self.scheduler.in_flight());
        let millis =
            u64::try_from(now.saturating_duration_since(since).as_millis()).unwrap_or(u64::MAX);
        // Volumes whose verdict waits for the census's first answer are not decided yet: with
        // nothing queued before it answers, the round has not converged (at 100,000 PVs every
        // finding was still to be written when it said so).
        let census_pending = self
            .census
            .as_ref()
            .is_some_and(|c| !c.census.answered_everywhere());
        if queued == 0 && in_flight == 0 && !census_pending {
            self.convergence = Convergence::Done;
            let published = self
                .scheduler
                .names_where(|n| n.memo().is_some_and(|m| m.published.is_some()))
                .len();
            let held = self.held();
            self.log(Log::Converged {
                published,
                held,
                written,
                millis,
            });
            // Deciding every name and writing what changed left garbage all over the heap (a
            // restart's RSS stayed well above its live heap until the next `Tick::Ages`, up to
            // 15 s later): give it back now, when the process settles.
            crate::engine::heap::release();
            self.heap_used = false;
        } else if now.saturating_duration_since(said) >= PROGRESS_EVERY {
            self.convergence = Convergence::Running {
                since,
                said: now,
                written,
            };
            let held = self.held();
            self.log(Log::Converging {
                written,
                remaining: queued + in_flight,
                held,
                millis,
            });
        }
    }

    /// Names whose state is held in its grace.
    fn held(&self) -> usize {
        self.scheduler
            .names_where(|n| {
                n.memo()
                    .is_some_and(|m| matches!(m.held, Some(crate::decide::name::Held::Pending(_))))
            })
            .len()
    }

    /// A write ended at `now` while the loop shuts down: its books are kept and its Event
    /// published, but nothing new is decided.
    pub(crate) fn written_at_shutdown(
        &mut self,
        name: &str,
        result: Result<Written, WriteError>,
        told: Option<Told>,
        now: Instant,
    ) -> Effects {
        self.on_written(name, result, told, now);
        self.take_effects()
    }

    /// What the step so far asks for, with the next wake-up as it stands now.
    fn take_effects(&mut self) -> Effects {
        let mut fx = std::mem::take(&mut self.out);
        fx.wake = self.scheduler.next_wake_at();
        fx
    }

    /// Logs `line` (the shell does).
    pub(super) fn log(&mut self, line: impl Into<Log>) {
        self.out.logs.push(line.into());
    }

    /// Records a metric change (the shell does).
    pub(super) fn gauge(&mut self, change: Gauge) {
        self.out.gauges.push(change);
    }
}

impl Loop {
    /// This replica's role changed.
    pub(super) fn on_role(&mut self) -> Option<Ended> {
        let role = *self.role.borrow_and_update();
        match role {
            Role::Leading { .. } | Role::Unelected => {
                if !self.scheduler.is_active() {
                    self.gauge(Gauge::Leader(true));
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
                self.gauge(Gauge::Leader(false));
                self.health.set_leader(Standing::Lost);
                self.log(Log::LostLease);
                Some(Ended::LostLease)
            }
        }
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
        for name in self.snapshots.leftover_names() {
            self.scheduler.mark(name);
        }
    }

    pub(super) fn set_published(&mut self, name: &str, now: Option<Published>) {
        let memo = self.scheduler.memo(name);
        let before = std::mem::replace(&mut memo.published, now.clone());
        if before != now {
            if let Some(p) = before {
                self.gauge(Gauge::Finding {
                    published: p,
                    delta: -1,
                });
            }
            if let Some(p) = now {
                self.gauge(Gauge::Finding {
                    published: p,
                    delta: 1,
                });
            }
        }
        self.scheduler.settle(name);
    }

    /// After a relist of VolumeLeftovers: objects deleted during the gap get no Delete event.
    pub(super) fn recount_published(&mut self, wall: &Time) {
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
        self.refresh_ages(wall);
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
        if !leading || self.report.as_ref()?.in_flight {
            return None;
        }
        // Counted whether or not anything changed: a test (or a person) can tell that the
        // leader has looked since the findings settled, and that no write it started is still
        // on its way, instead of waiting a tick's worth of time.
        self.gauge(Gauge::ReportChecked);
        let r = self.report.as_mut()?;
        if !r.dirty || now < r.not_before {
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
        let line = match applied {
            Applied::Done | Applied::Unchanged => {
                let again = r.missing_logged.then_some(Log::ReportWrittenAgain);
                r.missing_logged = false;
                r.last = Some(content);
                again
            }
            Applied::NotInstalled => {
                let first = (!r.missing_logged).then_some(Log::ReportCrdMissing);
                r.missing_logged = true;
                r.dirty = true;
                r.not_before = now + self.settings.resync;
                first
            }
            Applied::Failed(error) => {
                r.dirty = true;
                r.not_before = now + Duration::from_secs(30);
                Some(Log::ReportFailed {
                    category: error.category(),
                    error: error.to_string(),
                })
            }
        };
        if let Some(line) = line {
            self.log(line);
        }
    }

    /// The age of the oldest open finding per reason at `wall` (it grows with the clock alone).
    pub(super) fn refresh_ages(&mut self, wall: &Time) {
        let now = wall.0.as_second();
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
        for reason in Reason::ALL {
            self.gauge(Gauge::OldestOpen {
                reason,
                seconds: oldest.get(&reason).copied().unwrap_or(0),
            });
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
            settings: &self.settings,
            census: self.census.as_ref(),
            snapshots: &self.snapshots,
        };
        let (out, stopwatch) = (&mut self.out, self.stopwatch);
        // One duration per decision (16 bytes: 800 KB for a sweep of 50,000 names, for the
        // length of this step) keeps the histogram's observations what they were.
        let mut took = Vec::new();
        let writes = self.scheduler.run(|name, memo| {
            let start = stopwatch();
            let d = ctx.decide(name, memo, now, wall, &mut out.gauges, &mut out.logs);
            took.push(stopwatch().saturating_duration_since(start));
            d.into()
        });
        if !took.is_empty() {
            self.gauge(Gauge::Decided(took));
        }
        // Every write returned is in flight until its outcome comes back (`on_written`).
        self.gauge(Gauge::Backlog {
            queued: self.scheduler.queued(),
            in_flight: self.scheduler.in_flight(),
        });
        writes
            .into_iter()
            .map(|(name, (action, told))| WriteStart { name, action, told })
            .collect()
    }

    /// A write ended at `now`; the Event about its PV is published if it landed.
    pub(super) fn on_written(
        &mut self,
        name: &str,
        result: Result<Written, WriteError>,
        told: Option<Told>,
        now: Instant,
    ) {
        let end = match result {
            Ok(w) => {
                if w.outcome == Outcome::Done {
                    self.out.events.extend(told);
                }
                if let Convergence::Running { written, .. } = &mut self.convergence {
                    *written += 1;
                }
                let (op, result) = (w.op.as_str(), w.outcome.as_str());
                self.gauge(Gauge::Write {
                    op,
                    result,
                    requests: w.requests,
                });
                if let Some(echo) = w.echo {
                    self.scheduler.memo(name).echo =
                        Some((echo, (now + self.settings.echo_wait).into_std()));
                }
                self.log(Log::Written {
                    name: name.to_string(),
                    op,
                    result,
                });
                w.outcome.into()
            }
            Err(e) => {
                self.gauge(Gauge::Write {
                    op: e.op().as_str(),
                    result: e.category().as_str(),
                    requests: 1,
                });
                let first = self.scheduler.get(name).is_none_or(|s| s.failures() == 0);
                let error = e.to_string();
                if first && self.scheduler.blocked().is_none() {
                    self.log(Log::WriteFailed { error });
                } else {
                    self.log(Log::WriteFailedAgain { error });
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
                self.log(Log::WritesBlocked {
                    category,
                    error: why.error().to_string(),
                    fix: why.fix(),
                });
                self.health.set_writes_blocked(Some(why));
                self.gauge(Gauge::WritesBlocked(true));
            }
            Some(Condition::Unblocked) => {
                self.log(Log::WritesUnblocked);
                self.health.set_writes_blocked(None);
                self.gauge(Gauge::WritesBlocked(false));
            }
            None => {}
        }
    }
}
