//! Readiness: what the operator knows about each watched store, whether writes are blocked, and
//! what `/readyz` says about it. Written by the controller loop; no I/O.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelValue;
use tokio::time::Instant;

use crate::watch::category::Category;

/// The watched kinds: the four every decision may read, and the two snapshot kinds, watched
/// only while their API group is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Kind {
    /// PersistentVolumes.
    persistentvolumes,
    /// PersistentVolumeClaims (only their metadata is kept).
    persistentvolumeclaims,
    /// StorageClasses.
    storageclasses,
    /// VolumeLeftovers.
    volumeleftovers,
    /// VolumeSnapshotContents (snapshot.storage.k8s.io/v1).
    volumesnapshotcontents,
    /// VolumeSnapshots (snapshot.storage.k8s.io/v1).
    volumesnapshots,
}

impl Kind {
    /// All kinds, in display order.
    pub const ALL: [Kind; 6] = [
        Kind::persistentvolumes,
        Kind::persistentvolumeclaims,
        Kind::storageclasses,
        Kind::volumeleftovers,
        Kind::volumesnapshotcontents,
        Kind::volumesnapshots,
    ];

    /// Resource name, as RBAC and the API spell it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::persistentvolumes => "persistentvolumes",
            Kind::persistentvolumeclaims => "persistentvolumeclaims",
            Kind::storageclasses => "storageclasses",
            Kind::volumeleftovers => "volumeleftovers",
            Kind::volumesnapshotcontents => "volumesnapshotcontents",
            Kind::volumesnapshots => "volumesnapshots",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// What the operator knows about one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StoreState {
    /// The first list has not completed.
    Pending = 0,
    /// Listed, and the watch is healthy.
    Synced = 1,
    /// The API answered 403: objects of this kind cannot be read.
    Forbidden = 2,
    /// Listed once, but the watch or a relist is failing: the store may be out of date.
    Degraded = 3,
    /// The API server does not serve the kind (a snapshot CRD not installed): there is nothing
    /// to watch, which is no failure. Checked again from time to time.
    NotServed = 4,
}

impl StoreState {
    /// Every state, in the order of its value (`volume_leftovers_store_state`).
    pub const ALL: [StoreState; 5] = [
        StoreState::Pending,
        StoreState::Synced,
        StoreState::Forbidden,
        StoreState::Degraded,
        StoreState::NotServed,
    ];

    /// Its name, as `/readyz` and the StoreDegraded alert and runbook spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreState::Pending => "Pending",
            StoreState::Synced => "Synced",
            StoreState::Forbidden => "Forbidden",
            StoreState::Degraded => "Degraded",
            StoreState::NotServed => "NotServed",
        }
    }
}

/// How far a store's answers may be trusted now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Current (synced, or degraded for less than the bound).
    Current,
    /// Never listed yet.
    Pending,
    /// Forbidden: answers are Unknown.
    Forbidden,
    /// Degraded for longer than the bound: nothing may be concluded from it.
    Stale,
    /// The kind is not served: there are no objects of it to read, and nothing published
    /// about one is concluded from that.
    NotServed,
}

/// The health of one store.
#[derive(Clone, Debug)]
pub struct StoreHealth {
    /// State.
    pub(crate) state: StoreState,
    /// Since when it has been degraded (or pending with errors, or forbidden).
    pub(crate) since: Option<Instant>,
    /// The last error, while not synced.
    pub error: Option<String>,
    /// Its category.
    pub(crate) category: Option<Category>,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            state: StoreState::Pending,
            since: None,
            error: None,
            category: None,
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    stores: [StoreHealth; 6],
    writes_blocked: Option<WritesBlocked>,
    shutting_down: bool,
    leader: Option<Standing>,
}

/// Shared readiness state, written by the controller loop, read by `/readyz` and `/metrics`.
#[derive(Debug)]
pub struct Health {
    inner: Mutex<Inner>,
    stale_after: Duration,
}

impl Default for Health {
    fn default() -> Self {
        Health::new(Duration::from_secs(15))
    }
}

/// The fix for the most common start-up problem.
pub const CRD_FIX: &str = "the VolumeLeftover CRD is not installed: kubectl apply -f crds/volumeleftovers.yaml (or install the chart)";

/// Why writes to VolumeLeftovers are blocked as a whole; `/readyz` says `writes: blocked (…)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WritesBlocked {
    /// Writes answer 404: the CRD is not installed (its fix goes with every mention).
    CrdMissing {
        /// The last error.
        error: String,
    },
    /// Writes fail as a whole for another reason (a 403 on VolumeLeftovers, most often).
    Failing {
        /// Its category.
        category: Category,
        /// The last error.
        error: String,
    },
}

impl WritesBlocked {
    /// The reason for writes failing with `category`.
    pub(crate) fn new(category: Category, error: String) -> WritesBlocked {
        match category {
            Category::NotFound => WritesBlocked::CrdMissing { error },
            category => WritesBlocked::Failing { category, error },
        }
    }

    /// The category of the failures.
    pub(crate) fn category(&self) -> Category {
        match self {
            WritesBlocked::CrdMissing { .. } => Category::NotFound,
            WritesBlocked::Failing { category, .. } => *category,
        }
    }

    /// The last error.
    pub(crate) fn error(&self) -> &str {
        match self {
            WritesBlocked::CrdMissing { error } | WritesBlocked::Failing { error, .. } => error,
        }
    }

    /// What to do about it, for the end of a log line: `; <fix>`, or nothing.
    pub(crate) fn fix(&self) -> String {
        match self {
            WritesBlocked::CrdMissing { .. } => format!("; {CRD_FIX}"),
            WritesBlocked::Failing { .. } => String::new(),
        }
    }
}

impl std::fmt::Display for WritesBlocked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (category, error, fix) = (self.category(), self.error(), self.fix());
        write!(f, "{}: {error}{fix}", category.as_str())
    }
}

impl Health {
    /// A store degraded for longer than `stale_after` is stale: its answers are not used.
    pub fn new(stale_after: Duration) -> Health {
        Health {
            inner: Mutex::new(Inner::default()),
            stale_after,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave it inconsistent (plain assignments).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The health of a store.
    pub fn store(&self, kind: Kind) -> StoreHealth {
        self.lock().stores[kind.idx()].clone()
    }

    /// The state of a store.
    pub fn get(&self, kind: Kind) -> StoreState {
        self.lock().stores[kind.idx()].state
    }

    /// Records a store's health.
    pub(crate) fn set_store(&self, kind: Kind, health: StoreHealth) {
        self.lock().stores[kind.idx()] = health;
    }

    /// How far the answers of a store may be trusted at `now`.
    pub(crate) fn trust(&self, kind: Kind, now: Instant) -> Trust {
        let s = &self.lock().stores[kind.idx()];
        match s.state {
            StoreState::Synced => Trust::Current,
            StoreState::Pending => Trust::Pending,
            StoreState::Forbidden => Trust::Forbidden,
            StoreState::NotServed => Trust::NotServed,
            StoreState::Degraded => {
                let since = s.since.unwrap_or(now);
                if now.saturating_duration_since(since) > self.stale_after {
                    Trust::Stale
                } else {
                    Trust::Current
                }
            }
        }
    }

    /// The bound after which a degraded store is stale.
    pub(crate) fn stale_after(&self) -> Duration {
        self.stale_after
    }

    /// Records whether writes are blocked as a whole, and why.
    pub(crate) fn set_writes_blocked(&self, why: Option<WritesBlocked>) {
        self.lock().writes_blocked = why;
    }

    /// Records this replica's part in the election (never called without an election).
    pub(crate) fn set_leader(&self, standing: Standing) {
        self.lock().leader = Some(standing);
    }

    /// Marks the process as stopping (readiness goes false).
    pub(crate) fn shutting_down(&self) {
        self.lock().shutting_down = true;
    }

    /// Ready when every store is synced (or degraded for less than the bound, or of a kind the
    /// API server does not serve) and writes are not blocked. A forbidden claim or class store keeps the operator unready on purpose: findings
    /// are still published, with `claim.missing: Unknown`, but the Deployment shows that
    /// something is wrong.
    pub fn report(&self) -> (bool, String) {
        let now = Instant::now();
        let inner = self.lock();
        let mut ok = !inner.shutting_down;
        let mut body = String::new();
        if inner.shutting_down {
            body.push_str("shutting down\n");
        }
        for k in Kind::ALL {
            let (store_ok, line) = self.store_line(k, &inner.stores[k.idx()], now);
            ok &= store_ok;
            body.push_str(&line);
        }
        if let Some(role) = &inner.leader {
            // A standby with synced caches is ready: a rolling update must not stall on it.
            let _ = writeln!(body, "leader: {role}");
        }
        match &inner.writes_blocked {
            Some(why) => {
                ok = false;
                let _ = writeln!(body, "writes: blocked ({why})");
            }
            None => body.push_str("writes: ok\n"),
        }
        (ok, body)
    }

    /// One store's line of the report, and whether it lets the operator be ready.
    fn store_line(&self, k: Kind, s: &StoreHealth, now: Instant) -> (bool, String) {
        let age = |since: Option<Instant>| {
            since.map_or(String::new(), |t| {
                format!(" for {}s", now.saturating_duration_since(t).as_secs())
            })
        };
        let mut ok = matches!(
            s.state,
            StoreState::Synced | StoreState::Degraded | StoreState::NotServed
        );
        let name = s.state.as_str();
        let state = match s.state {
            StoreState::Synced | StoreState::NotServed => name.to_string(),
            StoreState::Pending | StoreState::Forbidden => format!("{name}{}", age(s.since)),
            StoreState::Degraded => {
                let stale = s
                    .since
                    .is_some_and(|t| now.saturating_duration_since(t) > self.stale_after);
                if stale {
                    ok = false;
                    format!("{name}{} (stale: its answers are not used)", age(s.since))
                } else {
                    format!("{name}{}", age(s.since))
                }
            }
        };
        let mut line = format!("{}: {state}", k.as_str());
        if s.state != StoreState::Synced
            && let Some(e) = s.error.as_deref()
        {
            let _ = write!(line, " ({e})");
        }
        if k == Kind::volumeleftovers
            && s.state != StoreState::Synced
            && s.category == Some(Category::NotFound)
        {
            let _ = write!(line, "; {CRD_FIX}");
        }
        line.push('\n');
        (ok, line)
    }
}

/// This replica's part in the election as `/readyz` says it (`leader: …`); no line without an
/// election. Set by the election (`crate::publish::leader`), read here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Waiting to lead: keeping the caches warm.
    Standby {
        /// The Lease, `namespace/name`.
        lease: String,
    },
    /// Holding the lease.
    Leading,
    /// Lost the lease: the process exits.
    Lost,
}

impl std::fmt::Display for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Standing::Standby { lease } => write!(f, "standby (lease {lease})"),
            Standing::Leading => f.write_str("leading"),
            Standing::Lost => f.write_str("lost the lease"),
        }
    }
}
