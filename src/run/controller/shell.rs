//! The async shell around the [`Loop`]: it selects over the feeds, the role, the timers and the
//! writes in flight, hands each to [`Loop::step`] with the time, and performs what comes back
//! (starts the writes, publishes the Events, writes the ClusterReport). Only I/O.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{FuturesUnordered, SelectAll};
use tokio::time::{Instant, Interval};

use super::{Effects, Ended, Event, Loop, Tick, Told};
use crate::engine::clock::wall_clock;
use crate::publish::events::Events;
use crate::publish::report::{Applied, ReportWriter};
use crate::publish::writer::{WriteError, Writer, Written};
use crate::run::settings::Settings;
use crate::run::wiring::{InputStream, Parts};
use crate::telemetry::{Health, Metrics};

/// A write in flight: the name, what it did, and the change to tell people about once it landed.
type WriteFuture =
    Pin<Box<dyn Future<Output = (Arc<str>, Result<Written, WriteError>, Option<Told>)> + Send>>;

/// A ClusterReport write in flight: the content, and how it went.
type ReportFuture = Pin<Box<dyn Future<Output = (serde_json::Value, Applied)> + Send>>;

/// The loop and what it performs its effects with.
pub(super) struct Shell {
    pub(super) machine: Loop,
    writer: Writer,
    writes: FuturesUnordered<WriteFuture>,
    events: Option<Events>,
    report: Option<ReportWriter>,
    reporting: FuturesUnordered<ReportFuture>,
}

/// The periodic timers, each ticking after its first period.
struct Timers {
    resync: Interval,
    report: Interval,
    ages: Interval,
    reminder: Interval,
}

impl Timers {
    async fn new(settings: &Settings) -> Timers {
        let every = |period| {
            let mut i = tokio::time::interval(period);
            i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            i
        };
        let mut t = Timers {
            resync: every(settings.resync),
            report: every(Duration::from_secs(5)),
            ages: every(Duration::from_secs(15)),
            reminder: every(settings.reminder),
        };
        t.resync.tick().await;
        t.reminder.tick().await;
        t
    }
}

impl Shell {
    /// The loop over what [`wiring::wire`](crate::run::wiring::wire) built.
    pub(super) fn new(
        parts: Parts,
        settings: Settings,
        health: Arc<Health>,
        metrics: Arc<Metrics>,
    ) -> Shell {
        let Parts {
            stores,
            role,
            writer,
            events,
            report,
        } = parts;
        let machine = Loop::new(
            stores,
            role,
            report.is_some(),
            settings,
            health,
            metrics,
            Instant::now(),
        );
        Shell {
            machine,
            writer,
            writes: FuturesUnordered::new(),
            events,
            report,
            reporting: FuturesUnordered::new(),
        }
    }

    /// Reads the inputs, the role, the written and the timers until `shutdown` resolves or this
    /// replica loses the Lease.
    pub(super) async fn serve(
        &mut self,
        inputs: &mut SelectAll<InputStream>,
        shutdown: impl Future<Output = ()>,
    ) -> Ended {
        let mut t = Timers::new(&self.machine.settings).await;
        tokio::pin!(shutdown);
        let l = self;
        loop {
            let event = tokio::select! {
                () = &mut shutdown => return Ended::Stopped,
                Ok(()) = l.machine.role.changed() => Event::Role,
                Some(input) = inputs.next() => Event::Input(input),
                _ = l.machine.scheduler.next_wake() => Event::Woke,
                Some((name, result, told)) = l.writes.next(), if !l.writes.is_empty() => {
                    Event::Written { name, result, told }
                }
                _ = t.resync.tick() => Event::Tick(Tick::Resync),
                _ = t.reminder.tick() => Event::Tick(Tick::Reminder),
                _ = t.ages.tick() => {
                    if let Some(e) = &l.events {
                        e.tidy();
                    }
                    Event::Tick(Tick::Ages)
                }
                _ = t.report.tick() => Event::Tick(Tick::Report),
                Some((content, applied)) = l.reporting.next(), if !l.reporting.is_empty() => {
                    Event::Reported { content, applied }
                }
            };
            let effects = l.machine.step(event, Instant::now(), &wall_clock());
            if let Some(ended) = l.perform(effects) {
                return ended;
            }
        }
    }

    /// Starts the writes the machine asked for and publishes its Events.
    fn perform(&mut self, effects: Effects) -> Option<Ended> {
        let Effects {
            writes,
            report,
            events,
            ended,
        } = effects;
        for told in events {
            self.tell(&told);
        }
        for w in writes {
            let writer = self.writer.clone();
            let metrics = self.machine.metrics.clone();
            self.writes.push(Box::pin(async move {
                let start = Instant::now();
                let r = writer.execute(w.action).await;
                let op = match &r {
                    Ok(w) => w.op,
                    Err(e) => e.op(),
                };
                metrics.write_duration(op.as_str(), start.elapsed());
                (w.name, r, w.told)
            }));
        }
        if let (Some(r), Some(writer)) = (report, &self.report) {
            let writer = writer.clone();
            self.reporting.push(Box::pin(async move {
                let applied = writer.write(&r.content, r.compare).await;
                (r.content, applied)
            }));
        }
        ended
    }

    fn tell(&self, told: &Told) {
        if let Some(events) = &self.events {
            events.emit(&told.pv, &told.uid, &told.change);
        }
    }

    /// Lets writes in flight finish, within a bound; new ones are not started. What is still
    /// in flight then is abandoned.
    pub(super) async fn drain(&mut self) {
        let pending = self.writes.len();
        let drained = tokio::time::timeout(self.machine.settings.shutdown_grace, async {
            while let Some((name, result, told)) = self.writes.next().await {
                if let Some(t) = self.machine.on_written(&name, result, told, Instant::now()) {
                    self.tell(&t);
                }
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
