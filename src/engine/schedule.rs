//! The decision loop's state machine: which PV names to decide, when, and which writes may start.
//! No I/O: it reads tokio's clock (so tests drive it with paused time) and never talks to the API.
//!
//! Everything the loop remembers about one name lives in one [`NameState`]: its queue entry,
//! in-flight write, pending wake-up, failure count and backoff, and the caller's memory of the
//! name (`M`, a [`Memory`]: for the operator, the echo wait, grace clock, what is published,
//! what was logged). The scheduler knows nothing of the domain: the memory and the category of
//! a failed write (`C`) are type parameters. The value is
//! removed in one place, [`Scheduler::settle`], as soon as nothing about the name is pending, so
//! nothing leaks when a PV is deleted during a watch gap or skipped.
//!
//! Rules it enforces:
//! - a name is queued at most once and decided by one caller at a time;
//! - at most `concurrency` writes are in flight, at most one per name; a name marked while its
//!   write is in flight is decided again when the write ends;
//! - a name whose write failed backs off (exponential, with jitter); events and sweeps do not
//!   re-send its write before the backoff ends;
//! - failures that are not about one object (403 or a missing resource type on the operator's own
//!   objects, or failures on several different names in a row with no success in between) are one
//!   condition, [`Blocked`]: writes pause, one probe write is tried per backoff period, and the
//!   first success releases every parked name.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use tokio_util::time::{DelayQueue, delay_queue};

use crate::engine::backoff::Backoff;

/// What the caller remembers about one name between decisions.
pub trait Memory: Default {
    /// Whether nothing is remembered: the scheduler then drops the memory, and the name's state
    /// once nothing else about it is pending.
    fn is_empty(&self) -> bool;
}

/// What the caller decided for a name.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<W> {
    /// Nothing to write; decide again when something changes.
    Idle,
    /// Nothing to write now; decide again after this long.
    WaitFor(Duration),
    /// Start this write.
    Write(W),
}

/// The farthest ahead a wake-up is set. Wake-ups come from data the operator does not control
/// (an acknowledgement's `until` a ticket bot wrote as 2099 or 9999, transition times, tombstone
/// TTLs, a skewed clock), while tokio-util's `DelayQueue` holds deadlines only up to about 2^36 ms
/// (795 days) ahead and panics beyond: one such field made every restart panic. A wake-up
/// farther away than this is set here instead; the name is then decided again, finds its change
/// still ahead, and waits another horizon.
pub(crate) const HORIZON: Duration = Duration::from_secs(30 * 24 * 3600);

/// Everything about one name.
#[derive(Debug)]
pub struct NameState<M> {
    queued: bool,
    in_flight: bool,
    /// Marked while it could not be decided (write in flight, backing off, parked).
    dirty: bool,
    timer: Option<(delay_queue::Key, Instant)>,
    backing_off: bool,
    parked: bool,
    failures: u32,
    backoff: Option<Backoff>,
    /// The controller's memory, when it holds anything: boxed, so that the state of each of the
    /// tens of thousands of names a sweep queues stays small.
    memo: Option<Box<M>>,
}

impl<M> Default for NameState<M> {
    fn default() -> Self {
        NameState {
            queued: false,
            in_flight: false,
            dirty: false,
            timer: None,
            backing_off: false,
            parked: false,
            failures: 0,
            backoff: None,
            memo: None,
        }
    }
}

impl<M: Memory> NameState<M> {
    fn is_idle(&self) -> bool {
        !self.queued
            && !self.in_flight
            && !self.dirty
            && self.timer.is_none()
            && !self.parked
            && self.failures == 0
            && self.memo.as_deref().is_none_or(M::is_empty)
    }

    /// The controller's memory of this name (`None`: nothing remembered).
    pub(crate) fn memo(&self) -> Option<&M> {
        self.memo.as_deref()
    }

    /// Consecutive failed writes of this name.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }
}

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteEnd<C> {
    /// It landed.
    Done,
    /// It was refused because the decision was made on an outdated view (already exists,
    /// precondition failed): not a failure; decide again once the store has caught up.
    Outdated,
    /// It failed.
    Failed {
        /// Why.
        category: C,
        /// The failure is about the resource type, not this object (403 on the operator's own
        /// objects, 404 on a create: the CRD is missing).
        write_wide: bool,
        /// The error, for the condition's message.
        error: String,
    },
}

/// Writes are failing for a reason that is not about one object.
#[derive(Clone, Debug)]
pub struct Blocked<C> {
    /// Since when.
    pub(crate) since: Instant,
    /// The category of the last failure.
    pub(crate) category: C,
    /// The last error.
    pub(crate) error: String,
    backoff: Backoff,
    probe_at: Instant,
    probing: bool,
}

/// A change of the write-wide condition, for the caller to log once and expose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Condition<C> {
    /// Writes started failing as a whole.
    Blocked {
        /// Why.
        category: C,
        /// The last error.
        error: String,
    },
    /// A write landed again.
    Unblocked,
}

/// Tuning of the scheduler.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Writes in flight at most.
    pub(crate) concurrency: usize,
    /// First per-name retry delay after a failed write.
    pub(crate) retry_initial: Duration,
    /// Longest per-name retry delay.
    pub(crate) retry_max: Duration,
    /// Consecutive failures on this many different names make a write-wide condition.
    pub(crate) blocked_after: usize,
    /// Longest delay between probe writes while blocked.
    pub(crate) probe_max: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            concurrency: 4,
            retry_initial: Duration::from_secs(1),
            retry_max: Duration::from_secs(300),
            blocked_after: 3,
            probe_max: Duration::from_secs(60),
        }
    }
}

/// The state machine, over the caller's memory of a name (`M`) and the category of a failed
/// write (`C`). See the module documentation.
pub struct Scheduler<M, C> {
    limits: Limits,
    names: HashMap<Arc<str>, NameState<M>>,
    queue: VecDeque<Arc<str>>,
    timers: DelayQueue<Arc<str>>,
    in_flight: usize,
    active: bool,
    blocked: Option<Blocked<C>>,
    parked: VecDeque<Arc<str>>,
    /// Distinct names that failed in a row, since the last successful write.
    streak: HashSet<Arc<str>>,
    seed: u64,
}

impl<M: Memory, C: Copy> Scheduler<M, C> {
    /// A scheduler that drops marks until [`Scheduler::activate`] (the first sweep covers them).
    pub fn new(limits: Limits, seed: u64) -> Self {
        Scheduler {
            limits: Limits {
                concurrency: limits.concurrency.max(1),
                ..limits
            },
            names: HashMap::new(),
            queue: VecDeque::new(),
            timers: DelayQueue::new(),
            in_flight: 0,
            active: false,
            blocked: None,
            parked: VecDeque::new(),
            streak: HashSet::new(),
            seed,
        }
    }

    /// From now on marks are acted upon.
    pub fn activate(&mut self) {
        self.active = true;
    }

    /// Whether marks are acted upon.
    pub(crate) fn is_active(&self) -> bool {
        self.active
    }

    /// The write-wide condition, if writes are blocked.
    pub(crate) fn blocked(&self) -> Option<&Blocked<C>> {
        self.blocked.as_ref()
    }

    /// Writes in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    #[cfg(test)]
    /// Names with state (for tests and leak checks).
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    #[cfg(test)]
    /// Whether no name has state.
    pub(crate) fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    #[cfg(test)]
    /// Whether `name` has state.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// The state of `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<&NameState<M>> {
        self.names.get(name)
    }

    /// The memo of `name`, created if needed. Call [`Scheduler::settle`] after changing it.
    pub fn memo(&mut self, name: &str) -> &mut M {
        self.entry(name).memo.get_or_insert_with(Box::default)
    }

    fn entry(&mut self, name: &str) -> &mut NameState<M> {
        if !self.names.contains_key(name) {
            self.names.insert(Arc::from(name), NameState::default());
        }
        self.names.get_mut(name).expect("inserted above")
    }

    fn key(&self, name: &str) -> Arc<str> {
        self.names
            .get_key_value(name)
            .map_or_else(|| Arc::from(name), |(k, _)| k.clone())
    }

    /// Something about `name` changed (an event, a sweep, an expired wait): decide it again.
    pub fn mark(&mut self, name: &str) {
        if !self.active {
            return;
        }
        let key = self.key(name);
        let s = self.entry(name);
        if s.in_flight || s.backing_off || s.parked {
            s.dirty = true;
        } else if !s.queued {
            s.queued = true;
            s.dirty = false;
            self.queue.push_back(key);
        }
    }

    /// Queued names.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Decides queued names with `decide` while write slots are free, and returns the writes to
    /// start. `decide` may read and change the name's memory.
    pub fn run<W>(
        &mut self,
        mut decide: impl FnMut(&str, &mut M) -> Next<W>,
    ) -> Vec<(Arc<str>, W)> {
        let mut writes = Vec::new();
        while self.in_flight < self.limits.concurrency {
            let Some(name) = self.queue.pop_front() else {
                break;
            };
            let Some(s) = self.names.get_mut(&name) else {
                continue;
            };
            s.queued = false;
            let memo = s.memo.get_or_insert_with(Box::default);
            let decision = decide(&name, memo);
            if memo.is_empty() {
                s.memo = None;
            }
            match decision {
                Next::Idle => {
                    s.failures = 0;
                    s.backoff = None;
                }
                Next::WaitFor(d) => self.wake_after(&name, d),
                Next::Write(w) => {
                    if self.begin_write(&name) {
                        writes.push((name.clone(), w));
                    }
                }
            }
            self.settle(&name);
        }
        writes
    }

    /// Decide `name` again after `d` (at most [`HORIZON`] ahead); an earlier pending wake-up
    /// stays.
    pub(crate) fn wake_after(&mut self, name: &str, d: Duration) {
        let at = Instant::now() + d.min(HORIZON);
        let key = self.key(name);
        let pending = self.entry(name).timer;
        match pending {
            Some((_, when)) if when <= at => {}
            Some((k, _)) => {
                self.timers.reset_at(&k, at);
                self.entry(name).timer = Some((k, at));
            }
            None => {
                let k = self.timers.insert_at(key, at);
                self.entry(name).timer = Some((k, at));
            }
        }
    }

    fn begin_write(&mut self, name: &Arc<str>) -> bool {
        let now = Instant::now();
        if let Some(b) = &mut self.blocked {
            if b.probing || now < b.probe_at {
                let s = self.names.get_mut(name).expect("decided names have state");
                if !s.parked {
                    s.parked = true;
                    self.parked.push_back(name.clone());
                }
                return false;
            }
            b.probing = true;
        }
        let s = self.names.get_mut(name).expect("decided names have state");
        s.in_flight = true;
        self.in_flight += 1;
        true
    }

    /// A write of `name` ended. Returns a change of the write-wide condition, if any.
    pub(crate) fn end_write(&mut self, name: &str, end: WriteEnd<C>) -> Option<Condition<C>> {
        let key = self.key(name);
        let s = self.names.get_mut(name)?;
        if s.in_flight {
            s.in_flight = false;
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let change = match end {
            WriteEnd::Done | WriteEnd::Outdated => {
                s.failures = 0;
                s.backoff = None;
                let again = std::mem::take(&mut s.dirty);
                if again {
                    self.mark(name);
                }
                if matches!(end, WriteEnd::Done) {
                    self.succeeded()
                } else {
                    if let Some(b) = &mut self.blocked {
                        b.probing = false;
                    }
                    None
                }
            }
            WriteEnd::Failed {
                category,
                write_wide,
                error,
            } => {
                s.failures = s.failures.saturating_add(1);
                s.backing_off = true;
                s.dirty = false;
                let seed = self.seed ^ hash(name);
                let limits = self.limits;
                let delay = s
                    .backoff
                    .get_or_insert_with(|| {
                        Backoff::new(limits.retry_initial, limits.retry_max, seed)
                    })
                    .next_delay();
                self.wake_after(name, delay);
                self.streak.insert(key);
                let wide = write_wide || self.streak.len() >= self.limits.blocked_after;
                self.failed(category, error, wide, seed)
            }
        };
        self.settle(name);
        change
    }

    fn succeeded(&mut self) -> Option<Condition<C>> {
        self.streak.clear();
        self.blocked.take()?;
        while let Some(n) = self.parked.pop_front() {
            if let Some(p) = self.names.get_mut(&n) {
                p.parked = false;
                p.dirty = false;
            }
            self.mark(&n);
        }
        Some(Condition::Unblocked)
    }

    fn failed(
        &mut self,
        category: C,
        error: String,
        wide: bool,
        seed: u64,
    ) -> Option<Condition<C>> {
        let now = Instant::now();
        match &mut self.blocked {
            Some(b) => {
                b.probing = false;
                b.category = category;
                b.error = error;
                b.probe_at = now + b.backoff.next_delay();
                None
            }
            None if wide => {
                let mut backoff =
                    Backoff::new(self.limits.retry_initial, self.limits.probe_max, seed);
                let probe_at = now + backoff.next_delay();
                self.blocked = Some(Blocked {
                    since: now,
                    category,
                    error: error.clone(),
                    backoff,
                    probe_at,
                    probing: false,
                });
                Some(Condition::Blocked { category, error })
            }
            None => None,
        }
    }

    /// When [`Scheduler::next_wake`] resolves next, if nothing else changes: the earliest timer
    /// (grace, echo, backoff; to the millisecond, as the timer wheel keeps it) or the next probe
    /// while writes are blocked. `None`: nothing is pending.
    pub fn next_wake_at(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|k| self.timers.deadline(&k));
        let probe = self
            .blocked
            .as_ref()
            .filter(|b| !b.probing && !self.parked.is_empty())
            .map(|b| b.probe_at);
        match (timer, probe) {
            (Some(t), Some(p)) => Some(t.min(p)),
            (t, p) => t.or(p),
        }
    }

    /// Waits for the next wake-up (grace, echo, backoff, probe) and marks its name. Never
    /// resolves while nothing is pending.
    pub(crate) async fn next_wake(&mut self) -> Arc<str> {
        enum Wake {
            Timer(Option<delay_queue::Expired<Arc<str>>>),
            Probe,
        }
        loop {
            let probe_at = self
                .blocked
                .as_ref()
                .filter(|b| !b.probing && !self.parked.is_empty())
                .map(|b| b.probe_at);
            let wake = {
                let timers = &mut self.timers;
                let timer = async move {
                    if timers.is_empty() {
                        std::future::pending::<()>().await;
                    }
                    timers.next().await
                };
                let probe = async move {
                    match probe_at {
                        Some(at) => tokio::time::sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    expired = timer => Wake::Timer(expired),
                    () = probe => Wake::Probe,
                }
            };
            match wake {
                Wake::Timer(None) => {}
                Wake::Timer(Some(expired)) => {
                    let name = expired.into_inner();
                    if let Some(s) = self.names.get_mut(&name) {
                        s.timer = None;
                        s.backing_off = false;
                        s.dirty = false;
                    }
                    self.mark(&name);
                    return name;
                }
                Wake::Probe => {
                    // One parked name becomes the probe.
                    if let Some(name) = self.parked.pop_front() {
                        if let Some(s) = self.names.get_mut(&name) {
                            s.parked = false;
                            s.dirty = false;
                        }
                        self.mark(&name);
                        return name;
                    }
                }
            }
        }
    }

    /// Drops the state of `name` when nothing about it is pending.
    pub fn settle(&mut self, name: &str) {
        match self.names.get_mut(name) {
            Some(s) if s.is_idle() => {
                self.names.remove(name);
                self.shrink_if_sparse();
            }
            Some(s) if s.memo.as_deref().is_some_and(M::is_empty) => s.memo = None,
            _ => {}
        }
    }

    /// Gives back what the map and the queues of names hold beyond four times what they need.
    /// A sweep queues every PV and VolumeLeftover (60,000 names at the issue-10 size): hashbrown
    /// and `VecDeque` keep their largest capacity, which was 36 MiB resident for the map alone
    /// once the sweep had settled. Halving as they empty costs O(n) in all.
    fn shrink_if_sparse(&mut self) {
        fn sparse(len: usize, capacity: usize) -> bool {
            capacity > 1024 && len.saturating_mul(4) < capacity
        }
        if sparse(self.names.len(), self.names.capacity()) {
            self.names.shrink_to(self.names.len() * 2);
        }
        if sparse(self.queue.len(), self.queue.capacity()) {
            self.queue.shrink_to(self.queue.len() * 2);
        }
        if sparse(self.parked.len(), self.parked.capacity()) {
            self.parked.shrink_to(self.parked.len() * 2);
        }
        if sparse(self.streak.len(), self.streak.capacity()) {
            self.streak.shrink_to(self.streak.len() * 2);
        }
        if sparse(self.timers.len(), self.timers.capacity()) {
            // Timers cannot move (their keys are held), so only the free tail goes.
            self.timers.shrink_to_fit();
        }
    }

    /// The capacity of the map of names (tests: that it shrinks once a sweep has settled).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.names.capacity()
    }

    /// Names whose state holds `pred` (for sweeps over the memo).
    pub(crate) fn names_where(&self, pred: impl Fn(&NameState<M>) -> bool) -> Vec<Arc<str>> {
        self.names
            .iter()
            .filter(|(_, s)| pred(s))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

fn hash(s: &str) -> u64 {
    // FNV-1a: only spreads jitter between names.
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
