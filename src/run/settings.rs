//! The loop's settings and their one set of defaults: the command line shows and parses these
//! (`crate::run::cli`), `run` without flags runs with [`Settings::default`], and the e2e tests
//! start from it. Pure: values only.

use std::time::Duration;

use crate::decide::plan::Graces;
use crate::model::exclude::Exclusions;
use crate::publish::leader::LeaderSettings;
use crate::watch::feed::FeedTiming;

/// The default of `--concurrency` and [`Settings::concurrency`].
pub(crate) const DEFAULT_CONCURRENCY: u16 = 16;
/// The default of `--page-size` and [`Settings::page_size`].
pub(crate) const DEFAULT_PAGE_SIZE: u32 = 500;
/// The default of `--resync` and [`Settings::resync`].
pub(crate) const DEFAULT_RESYNC: Duration = Duration::from_secs(300);
/// The default of `--grace` and [`Graces::grace`].
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(120);
/// The default of `--delete-grace` and [`Graces::delete_grace`].
pub(crate) const DEFAULT_DELETE_GRACE: Duration = Duration::from_secs(600);
/// The default of `--expansion-grace` and [`Graces::expansion_grace`]: well above a resize
/// (seconds to minutes), so that only one that stopped is published.
pub(crate) const DEFAULT_EXPANSION_GRACE: Duration = Duration::from_secs(3600);
/// The default of `--watch-timeout` and [`Settings::watch_timeout`].
pub(crate) const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The default of `--request-timeout` (of `run` and of `scan`) and [`Settings::request_timeout`].
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Tuning of the loop.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Writes in flight at most.
    pub concurrency: usize,
    /// Period of the full sweep that re-evaluates every PV and VolumeLeftover.
    pub resync: Duration,
    /// Grace periods of states that are normally only passing through.
    pub graces: Graces,
    /// Page size of the lists.
    pub page_size: u32,
    /// Server-side timeout of each watch request, in seconds.
    pub watch_timeout: u32,
    /// Each write request is abandoned after this long.
    pub request_timeout: Duration,
    /// Retry and list-page bounds of the feeds.
    pub feed: FeedTiming,
    /// How long the operator's own write may take to come back through its watch before the
    /// name is decided on whatever the store shows.
    pub echo_wait: Duration,
    /// How long a shutdown waits for writes in flight before abandoning them.
    pub shutdown_grace: Duration,
    /// How often a problem that lasts (a store not synced, writes blocked) is logged again.
    pub reminder: Duration,
    /// Leader election: only the holder of the Lease decides and writes. `None`: this process
    /// is the only writer.
    pub leader: Option<LeaderSettings>,
    /// Volumes kept out of the report on purpose (besides the `leftovers.dev/ignore` label).
    pub exclusions: Exclusions,
    /// Publish Kubernetes Events on the PersistentVolumes, as this replica (identity).
    pub events: Option<String>,
    /// Mirror the findings into an OpenReports ClusterReport (when its CRD is installed).
    pub openreports: bool,
    /// How long a tombstone (`VolumeDeleted`) is kept after its volume's delete. `None`: until
    /// it is acknowledged or the storage backend's census shows its image gone.
    pub tombstone_ttl: Option<Duration>,
    /// The storage backend's census (opt-in).
    pub census: Option<crate::census::CensusSettings>,
    /// The price table (opt-in): findings then carry their estimated cost.
    pub prices: Option<std::sync::Arc<crate::model::price::PriceTable>>,
    /// Snapshot objects kept out of the report on purpose (a backup tool's; the
    /// `leftovers.dev/ignore` label besides).
    pub snapshot_exclusions: crate::model::snapshot::SnapshotExclusions,
}

/// The operator's defaults: what `run` without flags runs with (a cli test parses no flags and
/// compares), and what the e2e tests start from.
impl Default for Settings {
    fn default() -> Self {
        Settings {
            concurrency: usize::from(DEFAULT_CONCURRENCY),
            resync: DEFAULT_RESYNC,
            graces: Graces {
                grace: DEFAULT_GRACE,
                delete_grace: DEFAULT_DELETE_GRACE,
                expansion_grace: DEFAULT_EXPANSION_GRACE,
            },
            page_size: DEFAULT_PAGE_SIZE,
            watch_timeout: watch_timeout_secs(DEFAULT_WATCH_TIMEOUT),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            feed: FeedTiming::default(),
            echo_wait: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(5),
            reminder: Duration::from_secs(300),
            leader: None,
            exclusions: Exclusions::default(),
            events: None,
            openreports: false,
            tombstone_ttl: None,
            census: None,
            prices: None,
            snapshot_exclusions: crate::model::snapshot::SnapshotExclusions::default(),
        }
    }
}

/// A watch timeout as the API server takes it, in whole seconds (the command line bounds it to
/// an hour, so nothing is cut).
pub(crate) fn watch_timeout_secs(timeout: Duration) -> u32 {
    u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)
}
