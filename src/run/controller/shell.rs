//! The async shell around the [`Loop`]: it selects over the feeds, the role, the timers and the
//! writes in flight, hands each to [`Loop::step`] with the time, and performs what comes back
//! (starts the writes, publishes the Events, writes the ClusterReport, logs the lines, records
//! the metrics). Only I/O, and the only reader of the clocks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{FuturesUnordered, SelectAll};
use tokio::time::{Instant, Interval};

use super::{Effects, Ended, Event, Gauge, Log, Loop, StoreLog, Tick, Told, WatchLog};
use crate::decide::census_result::CensusLog;
use crate::decide::name::{FOREIGN, Held};
use crate::engine::clock::wall_clock;
use crate::publish::events::Events;
use crate::publish::report::{Applied, ReportWriter};
use crate::publish::writer::{WriteError, Writer, Written};
use crate::run::settings::Settings;
use crate::run::wiring::{InputStream, Parts};
use crate::telemetry::{CRD_FIX, Health, Metrics};

/// A write in flight: the name, what it did, and the change to tell people about once it landed.
type WriteFuture =
    Pin<Box<dyn Future<Output = (Arc<str>, Result<Written, WriteError>, Option<Told>)> + Send>>;

/// A ClusterReport write in flight: the content, and how it went.
type ReportFuture = Pin<Box<dyn Future<Output = (serde_json::Value, Applied)> + Send>>;

/// The loop and what it performs its effects with.
pub(super) struct Shell {
    pub(super) machine: Loop,
    metrics: Arc<Metrics>,
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
            std::time::Instant::now,
            Instant::now(),
        );
        Shell {
            machine,
            metrics,
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
            // The scheduler's own timers wake the loop at `effects.wake` (`next_wake` above).
            if let Some(ended) = l.perform(effects) {
                return ended;
            }
        }
    }

    /// Logs the lines, records the metrics, starts the writes the machine asked for and
    /// publishes its Events.
    fn perform(&mut self, effects: Effects) -> Option<Ended> {
        let Effects {
            writes,
            report,
            events,
            logs,
            gauges,
            wake: _,
            ended,
        } = effects;
        logs.into_iter().for_each(emit);
        for g in gauges {
            record(&self.metrics, g);
        }
        for told in events {
            self.tell(&told);
        }
        for w in writes {
            let writer = self.writer.clone();
            let metrics = self.metrics.clone();
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
                let effects = self
                    .machine
                    .written_at_shutdown(&name, result, told, Instant::now());
                self.perform(effects);
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

/// The targets the lines had when the machine's modules logged them, so that filters and
/// readers of the logs see them where they were.
const MACHINE: &str = "volume_leftovers::run::controller::machine";
const FEEDS: &str = "volume_leftovers::run::controller::feeds";
const CENSUS: &str = "volume_leftovers::run::controller::census";
const DECISION: &str = "volume_leftovers::run::controller::decision";

/// Logs `line` as the `tracing` event it stands for.
fn emit(line: Log) {
    match line {
        Log::LostLease => tracing::error!(
            target: MACHINE,
            "this replica lost the lease: it stops writing and exits so that a fresh process starts as standby"
        ),
        Log::ReportWrittenAgain => tracing::info!(
            target: MACHINE,
            "OpenReports ClusterReport written again (its CRD is installed)"
        ),
        Log::ReportCrdMissing => tracing::warn!(
            target: MACHINE,
            "the OpenReports CRD (clusterreports.openreports.io) is not installed: the findings are not mirrored; trying again at the next resync"
        ),
        Log::ReportFailed { category, error } => {
            tracing::warn!(target: MACHINE, category = category.as_str(), %error, "writing the OpenReports ClusterReport failed; trying again")
        }
        Log::Sweep => tracing::debug!(target: MACHINE, "periodic sweep"),
        Log::Converging {
            written,
            remaining,
            held,
            millis,
        } => tracing::info!(
            target: MACHINE,
            written,
            remaining,
            held,
            "publishing: {written} write(s) done, {remaining} name(s) to go, {held} held in a grace ({} s)",
            millis / 1000
        ),
        Log::Converged {
            published,
            held,
            written,
            millis,
        } => tracing::info!(
            target: MACHINE,
            published,
            held,
            written,
            "converged in {:.1} s: {published} finding(s) published, {held} held in a grace, {written} write(s)",
            millis as f64 / 1000.0
        ),
        Log::Written { name, op, result } => {
            tracing::debug!(target: MACHINE, %name, op, result, "written")
        }
        Log::WriteFailed { error } => {
            tracing::warn!(target: MACHINE, %error, "write failed; retrying with backoff")
        }
        Log::WriteFailedAgain { error } => {
            tracing::debug!(target: MACHINE, %error, "write failed again")
        }
        Log::WritesBlocked {
            category,
            error,
            fix,
        } => tracing::error!(
            target: MACHINE,
            category = category.as_str(),
            %error,
            "writes to VolumeLeftovers are failing as a whole; pausing them and probing with one write at a time{fix}",
        ),
        Log::WritesUnblocked => {
            tracing::info!(target: MACHINE, "writes to VolumeLeftovers work again")
        }
        Log::WritesStillBlocked {
            for_s,
            category,
            error,
        } => tracing::warn!(
            target: FEEDS,
            for_s,
            category = category.as_str(),
            %error,
            "writes to VolumeLeftovers still failing"
        ),
        Log::Store(line) => emit_store(line),
        Log::Watch(line) => emit_watch(line),
        Log::Skipped { pv, why } => tracing::warn!(target: DECISION, %pv, "{why}"),
        Log::Foreign { pv } => tracing::warn!(target: DECISION, %pv, "{}", FOREIGN),
        Log::Census { scope, line } => match scope.backend() {
            b if b.labelled_as_pool() => emit_census(&scope.to_string(), line),
            b => emit_cloud_census(b.name(), &scope.to_string(), line),
        },
    }
}

/// Logs a line about the stores and their feeds.
fn emit_store(line: StoreLog) {
    match line {
        StoreLog::PvsGoneUnwatched { count } => tracing::info!(
            target: FEEDS,
            count,
            "PersistentVolumes deleted while the watch was down; their findings are re-evaluated"
        ),
        StoreLog::StoreSynced { kind } => {
            tracing::info!(target: FEEDS, resource = kind.as_str(), "store synced")
        }
        StoreLog::StoreSyncedAgain { kind, after_s } => tracing::info!(
            target: FEEDS,
            resource = kind.as_str(),
            after_s,
            "store synced again"
        ),
        StoreLog::StoreNotSynced {
            kind,
            state,
            for_s,
            error,
        } => tracing::warn!(
            target: FEEDS,
            resource = kind.as_str(),
            ?state,
            for_s,
            error = error.as_str(),
            "store still not synced"
        ),
        StoreLog::AllListed {
            pvs,
            claims,
            classes,
            leftovers,
            claims_readable,
        } => tracing::info!(
            target: FEEDS,
            pvs,
            claims,
            classes,
            leftovers,
            claims_readable,
            "all stores listed; evaluating every PersistentVolume"
        ),
        StoreLog::TombstoneFactsShed { count } => tracing::debug!(
            target: FEEDS,
            count,
            "facts kept for tombstones dropped: their volumes are in the store"
        ),
        StoreLog::Tombstone { pv, uid } => {
            tracing::info!(target: FEEDS, %pv, %uid, "a PersistentVolume whose disk outlives it was deleted; its finding becomes the last record of the disk")
        }
        StoreLog::ContentTombstone { content, leftover } => {
            tracing::info!(target: FEEDS, %content, %leftover, "a Retain VolumeSnapshotContent was deleted and its backend snapshot was not; its finding becomes the last record of the snapshot")
        }
    }
}

/// Logs a line about a store's list or watch failing.
fn emit_watch(line: WatchLog) {
    match line {
        WatchLog::StoreStillFailing {
            kind,
            error,
            retry_in,
        } => {
            tracing::debug!(target: FEEDS, resource = kind.as_str(), %error, %retry_in, "still failing")
        }
        WatchLog::WatchExpired { kind } => tracing::info!(
            target: FEEDS,
            resource = kind.as_str(),
            "watch expired (410 Gone); relisting"
        ),
        WatchLog::NotServed {
            kind,
            check_every_s,
        } => tracing::info!(
            target: FEEDS,
            resource = kind.as_str(),
            check_every_s,
            "snapshot.storage.k8s.io/v1 is not served (the snapshot CRDs are not installed): nothing to report about snapshots until it is; discovery is asked again"
        ),
        WatchLog::CrdMissing {
            kind,
            error,
            retry_in,
        } => {
            tracing::error!(target: FEEDS, resource = kind.as_str(), %error, %retry_in, "{CRD_FIX}; retrying")
        }
        WatchLog::StoreForbidden { kind, error } => tracing::error!(
            target: FEEDS,
            resource = kind.as_str(),
            %error,
            "the operator's identity may not list/watch {}: check its ClusterRole (deploy/ or the chart); retrying",
            kind.as_str()
        ),
        WatchLog::ClaimsUnreadable => tracing::error!(
            target: FEEDS,
            "claims cannot be read: findings report claim.missing Unknown, never True"
        ),
        WatchLog::WatchFailing {
            kind,
            category,
            error,
            retry_in,
            stale_after_s,
        } => tracing::warn!(
            target: FEEDS,
            resource = kind.as_str(),
            category = category.as_str(),
            %error,
            %retry_in,
            "list/watch failing; retrying with backoff (its answers are not used after {stale_after_s}s)",
        ),
    }
}

/// Logs a line of a census outcome of the scope labelled `label`.
fn emit_census(label: &str, line: CensusLog) {
    match line {
        CensusLog::Recovered { after } => {
            tracing::info!(target: CENSUS, pool = %label, after = %after, "the census of the pool works again")
        }
        CensusLog::Done { images } => {
            tracing::debug!(target: CENSUS, pool = %label, images = images, "census done")
        }
        CensusLog::Unread {
            images,
            first,
            error,
        } => {
            tracing::warn!(target: CENSUS, pool = %label, images = images, first = %first, error = %error, "the details of some images could not be read: what is published about them stays (nothing made, nothing cleared) until they can be")
        }
        CensusLog::ReadAgain => {
            tracing::info!(target: CENSUS, pool = %label, "the details of every image can be read again")
        }
        CensusLog::Failed { category, message } => {
            tracing::warn!(target: CENSUS, pool = %label, error = %message, category = %category, "the census of the pool failed: its images are Unknown (no finding about them is made or cleared) until it works again")
        }
        // A Ceph pool is no snapshot scope.
        CensusLog::NotCompared | CensusLog::ComparedAgain => {}
    }
}

/// Logs a line of a cloud scope's census outcome (a GCE zone or region, an EBS region): one
/// when it starts failing (or fails in another way), one when it works again.
fn emit_cloud_census(backend: &str, scope: &str, line: CensusLog) {
    match line {
        CensusLog::Recovered { after } => {
            tracing::info!(target: CENSUS, backend, %scope, after = %after, "the census of the scope works again")
        }
        CensusLog::Done { images } => {
            tracing::debug!(target: CENSUS, backend, %scope, disks = images, "census done")
        }
        // A cloud listing reads every disk's details with it: none is ever unread.
        CensusLog::Unread { .. } | CensusLog::ReadAgain => {}
        CensusLog::Failed { category, message } => {
            tracing::warn!(target: CENSUS, backend, %scope, error = %message, category = %category, "the census of the scope failed: its disks are Unknown (no finding about them is made, changed or cleared) until it works again")
        }
        CensusLog::NotCompared => {
            tracing::warn!(target: CENSUS, backend, %scope, "the scope's snapshots are listed but not compared: which ones the VolumeSnapshotContents name is not known (not served, forbidden, not listed yet or their watch failing); no finding about them is made, changed or cleared until it is")
        }
        CensusLog::ComparedAgain => {
            tracing::info!(target: CENSUS, backend, %scope, "the scope's snapshots are compared with the VolumeSnapshotContents again")
        }
    }
}

/// Applies a metric change.
fn record(metrics: &Metrics, change: Gauge) {
    match change {
        Gauge::Leader(leading) => metrics.leader(leading),
        Gauge::ReportChecked => metrics.report_checked(),
        Gauge::Finding { published, delta } => metrics.finding(&published, delta),
        Gauge::OldestOpen { reason, seconds } => metrics.oldest_open(reason, seconds),
        Gauge::Decided(took) => {
            for d in took {
                metrics.decided();
                metrics.decision_duration(d);
            }
        }
        Gauge::Held { held, delta } => match held {
            Held::Pending(r) => metrics.pending(r, delta),
            Held::Undecided => metrics.undecided(delta),
            Held::Skipped => metrics.skipped(delta),
            Held::Ignored => metrics.ignored(delta),
        },
        Gauge::Backlog { queued, in_flight } => metrics.backlog(queued, in_flight),
        Gauge::Write {
            op,
            result,
            requests,
        } => metrics.write(op, result, requests),
        Gauge::WritesBlocked(blocked) => metrics.writes_blocked(blocked),
        Gauge::StoreState { kind, state } => metrics.store_state(kind, state),
        Gauge::Relisted(kind) => metrics.relisted(kind),
        Gauge::SnapshotsExcluded(contents, snapshots) => {
            metrics.snapshots_excluded(contents, snapshots)
        }
        Gauge::WatchError { kind, category } => metrics.watch_error(kind, category),
        Gauge::CensusDone {
            scope,
            images,
            unread,
            seconds,
            requests,
        } => metrics.census_done(&scope, images, unread, seconds, requests),
        Gauge::CensusFailed { scope, requests } => metrics.census_failed(&scope, requests),
    }
}
