//! What the machine asks the shell to log and to record, as values: one [`Log`] per log line
//! of the loop (its fields, not its text), one [`Gauge`] per change of a metric. The shell
//! turns each into the `tracing` event or the [`Metrics`](crate::telemetry::Metrics) call it
//! stands for; tests read them. No I/O here.

use std::time::Duration;

use crate::decide::census_result::CensusLog;
use crate::decide::name::{Held, Published};
use crate::model::backend::Scope;
use crate::model::crd::Reason;
use crate::telemetry::{Kind, StoreState};
use crate::watch::category::Category;

/// A line the loop logs (each logged once per change, unless it says otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Log {
    /// This replica lost the Lease (error).
    LostLease,
    /// The ClusterReport was written after its CRD had been missing (info).
    ReportWrittenAgain,
    /// The OpenReports CRD is not installed (warning).
    ReportCrdMissing,
    /// Writing the ClusterReport failed (warning, at every failure).
    ReportFailed {
        /// The failure's category.
        category: Category,
        /// The error.
        error: String,
    },
    /// The periodic sweep starts (debug).
    Sweep,
    /// The first round of decisions is under way (info, every few seconds while it lasts).
    Converging {
        /// Writes landed so far.
        written: usize,
        /// Names queued or being written.
        remaining: usize,
        /// Names whose state is held in its grace.
        held: usize,
        /// Milliseconds since deciding began.
        millis: u64,
    },
    /// The first round of decisions is done: nothing queued, nothing in flight (info, once).
    Converged {
        /// Names with a published finding.
        published: usize,
        /// Names whose state is held in its grace (published when it lasts).
        held: usize,
        /// Writes it took.
        written: usize,
        /// Milliseconds since deciding began.
        millis: u64,
    },
    /// A write landed or was outdated (debug, at every write).
    Written {
        /// The name written.
        name: String,
        /// The operation.
        op: &'static str,
        /// How it ended.
        result: &'static str,
    },
    /// The first failure of a name's write while writes are not blocked (warning).
    WriteFailed {
        /// The error.
        error: String,
    },
    /// A write failed again, or while writes are blocked (debug).
    WriteFailedAgain {
        /// The error.
        error: String,
    },
    /// Writes started failing as a whole (error).
    WritesBlocked {
        /// The failure's category.
        category: Category,
        /// The error.
        error: String,
        /// What to do about it (empty, or `; ` and the fix).
        fix: String,
    },
    /// A write landed again after writes were blocked (info).
    WritesUnblocked,
    /// Writes are still blocked (warning, at each reminder).
    WritesStillBlocked {
        /// Seconds since they were blocked.
        for_s: u64,
        /// The last failure's category.
        category: Category,
        /// The last error.
        error: String,
    },
    /// A line about the stores and their feeds.
    Store(StoreLog),
    /// A line about a store's list or watch failing.
    Watch(WatchLog),
    /// A volume too odd to judge (warning, once per change of `why`).
    Skipped {
        /// The PV's name.
        pv: String,
        /// Why.
        why: String,
    },
    /// A VolumeLeftover of a finding's name the operator does not manage (warning, once per
    /// change).
    Foreign {
        /// Its name.
        pv: String,
    },
    /// A line about a census of `scope`.
    Census {
        /// The scope (a Ceph pool, a GCE zone or region, an EBS region).
        scope: Scope,
        /// The line.
        line: CensusLog,
    },
}

/// A line about the stores and their feeds (each logged once per change, unless it says
/// otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StoreLog {
    /// A relist found PVs deleted while the watch was down (info).
    PvsGoneUnwatched {
        /// How many.
        count: usize,
    },
    /// A store listed for the first time (info).
    StoreSynced {
        /// The store.
        kind: Kind,
    },
    /// A store listed again after failing (info).
    StoreSyncedAgain {
        /// The store.
        kind: Kind,
        /// Seconds it was failing, when known.
        after_s: Option<u64>,
    },
    /// A store is still not synced (warning, at each reminder).
    StoreNotSynced {
        /// The store.
        kind: Kind,
        /// Its state.
        state: StoreState,
        /// Seconds in that state, when known.
        for_s: Option<u64>,
        /// Its last error (empty when none).
        error: String,
    },
    /// Every store listed: the loop starts deciding (info).
    AllListed {
        /// PVs in the store.
        pvs: usize,
        /// Claims in the store.
        claims: usize,
        /// Classes in the store.
        classes: usize,
        /// VolumeLeftovers in the store.
        leftovers: usize,
        /// Whether claims may be read.
        claims_readable: bool,
    },
    /// Facts kept for tombstones were dropped (debug).
    TombstoneFactsShed {
        /// How many findings.
        count: usize,
    },
    /// A PV whose disk outlives it was deleted (info).
    Tombstone {
        /// The PV's name.
        pv: String,
        /// Its uid.
        uid: String,
    },
    /// A Retain VolumeSnapshotContent with a backend snapshot was deleted (info).
    ContentTombstone {
        /// The content's name.
        content: String,
        /// The VolumeLeftover that keeps its record.
        leftover: String,
    },
}

/// A line about a store's list or watch failing (each logged once per change, unless it says
/// otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum WatchLog {
    /// A store's watch fails again in the same state (debug).
    StoreStillFailing {
        /// The store.
        kind: Kind,
        /// The error.
        error: String,
        /// When it is retried, as `1.5s`.
        retry_in: String,
    },
    /// A store's watch expired (410 Gone) (info).
    WatchExpired {
        /// The store.
        kind: Kind,
    },
    /// A snapshot kind is not served: no snapshot findings until it is (info, once per change).
    NotServed {
        /// The store.
        kind: Kind,
        /// How often discovery is asked again, in seconds.
        check_every_s: u64,
    },
    /// The VolumeLeftover CRD is missing (error).
    CrdMissing {
        /// The store.
        kind: Kind,
        /// The error.
        error: String,
        /// When it is retried, as `1.5s`.
        retry_in: String,
    },
    /// The operator may not list or watch a store (error).
    StoreForbidden {
        /// The store.
        kind: Kind,
        /// The error.
        error: String,
    },
    /// Claims cannot be read: what that means for the findings (error, after
    /// [`WatchLog::StoreForbidden`] of the claims).
    ClaimsUnreadable,
    /// A store's list or watch fails (warning).
    WatchFailing {
        /// The store.
        kind: Kind,
        /// The failure's category.
        category: Category,
        /// The error.
        error: String,
        /// When it is retried, as `1.5s`.
        retry_in: String,
        /// After how many seconds of failing its answers are not used.
        stale_after_s: u64,
    },
}

impl From<WatchLog> for Log {
    fn from(line: WatchLog) -> Log {
        Log::Watch(line)
    }
}

impl From<StoreLog> for Log {
    fn from(line: StoreLog) -> Log {
        Log::Store(line)
    }
}

/// A change of a metric.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Gauge {
    /// Whether this replica leads.
    Leader(bool),
    /// The leader looked whether the ClusterReport needs writing.
    ReportChecked,
    /// A published finding appeared (`delta` 1) or went (-1).
    Finding {
        /// What it counts for.
        published: Published,
        /// 1 or -1.
        delta: i64,
    },
    /// The age of the oldest open finding of `reason`.
    OldestOpen {
        /// The reason.
        reason: Reason,
        /// Its age in seconds (0: none open).
        seconds: i64,
    },
    /// Names decided in one step, with how long each decision took (one count and one
    /// observation each).
    Decided(Vec<Duration>),
    /// A name held as `held` (`delta` 1) or no longer (-1).
    Held {
        /// How it is held.
        held: Held,
        /// 1 or -1.
        delta: i64,
    },
    /// The backlog after a step.
    Backlog {
        /// Names waiting to be decided.
        queued: usize,
        /// Writes in flight.
        in_flight: usize,
    },
    /// A write ended.
    Write {
        /// The operation.
        op: &'static str,
        /// `ok`, `outdated` or an error category.
        result: &'static str,
        /// Requests it took.
        requests: u32,
    },
    /// Writes are blocked as a whole, or no longer.
    WritesBlocked(bool),
    /// A store's state.
    StoreState {
        /// The store.
        kind: Kind,
        /// Its state.
        state: StoreState,
    },
    /// A store completed a list.
    Relisted(Kind),
    /// The snapshot objects kept out of the report: contents, snapshots.
    SnapshotsExcluded(usize, usize),
    /// A store's list or watch failed.
    WatchError {
        /// The store.
        kind: Kind,
        /// The failure's category.
        category: Category,
    },
    /// A census of `scope` completed.
    CensusDone {
        /// The scope.
        scope: Scope,
        /// Images listed.
        images: usize,
        /// Images whose details could not be read.
        unread: usize,
        /// How long it took.
        seconds: f64,
        /// Requests it took.
        requests: u64,
    },
    /// A census of `scope` failed.
    CensusFailed {
        /// The scope.
        scope: Scope,
        /// Requests it took.
        requests: u64,
    },
}
