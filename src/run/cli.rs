//! Command line. Pure: parsing only. Every flag has a default and an environment variable, and
//! every duration is checked against bounds (a zero resync, or a wait so long that a timer would
//! overflow, is a usage error with a clear message, never a panic).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::run::settings::{
    DEFAULT_CONCURRENCY, DEFAULT_DELETE_GRACE, DEFAULT_EXPANSION_GRACE, DEFAULT_GRACE,
    DEFAULT_PAGE_SIZE, DEFAULT_REQUEST_TIMEOUT, DEFAULT_RESYNC, DEFAULT_WATCH_TIMEOUT,
};
use crate::scan::Format;

/// A default duration as the help shows it and clap parses it (`5m`, from
/// [`crate::run::settings`]). Clap keeps defaults as `&'static str`; like its own
/// `default_value_t`, each is written once, on first use.
macro_rules! shown {
    ($default:expr) => {{
        static SHOWN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        SHOWN.get_or_init(|| human($default)).as_str()
    }};
}

/// Reports PersistentVolumes that survived, lost or outlived their claims, as VolumeLeftover
/// objects. Reports, never decides: it never writes to PVs, claims or StorageClasses.
#[derive(Debug, Parser)]
#[command(name = "volume-leftovers", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log format.
    #[arg(long, env = "VL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Log filter, in tracing's EnvFilter syntax.
    #[arg(long, env = "VL_LOG", default_value = "info", global = true)]
    pub log: String,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator: watch PVs, claims and StorageClasses and keep one VolumeLeftover per
    /// finding (needs the CRD).
    Run(RunArgs),
    /// Read the cluster once and print the leftovers (read-only; no CRD needed). Exit code 0: none
    /// found; 3: leftovers found; 4: the report is incomplete: something it needs could not be
    /// read (claims or classes, a claim's second look, a census scope, snapshots), named on
    /// stderr, and its silence proves nothing; 1: error; 2: usage.
    Scan(ScanArgs),
    /// Print the VolumeLeftover CustomResourceDefinition as YAML.
    Crd,
    /// Print the shell completion script for this command (as `volume-leftovers`, or as the
    /// kubectl plugin `kubectl-leftovers`): `source <(volume-leftovers completion bash)`.
    Completion(CompletionArgs),
    /// Print the commands a person can review and run to reuse, abandon or keep one finding
    /// (printed, never run): the VolumeLeftover NAME, else the finding NAME of one scan (read-only,
    /// with the flags of `scan`). Exit code 0: explained; 1: NAME is not a finding, or the cluster
    /// refused a read (one line on stderr says which); 2: usage.
    Explain(ExplainArgs),
}

/// Flags of `completion`.
#[derive(Debug, Args)]
pub struct CompletionArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
    /// Complete the kubectl plugin's name (`kubectl-leftovers`) instead of `volume-leftovers`.
    #[arg(long)]
    pub plugin: bool,
}

/// The file name kubectl finds a plugin by: `kubectl leftovers ...` runs `kubectl-leftovers`.
pub const PLUGIN_NAME: &str = "kubectl-leftovers";

/// The arguments as `Cli` parses them. Run as the kubectl plugin (the binary's file name is
/// [`PLUGIN_NAME`]), `scan` is the command unless another is named: `kubectl leftovers -o wide`
/// is `volume-leftovers scan -o wide`, `kubectl leftovers explain NAME` is `volume-leftovers
/// explain NAME`.
pub fn plugin_args(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    use clap::CommandFactory;
    let invoked = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == PLUGIN_NAME);
    if !invoked {
        return args;
    }
    let named = args.get(1).and_then(|a| a.to_str()).is_some_and(|a| {
        matches!(a, "-h" | "--help" | "-V" | "--version" | "help")
            || Cli::command().get_subcommands().any(|c| c.get_name() == a)
    });
    let mut args = args;
    if !named {
        args.insert(1, "scan".into());
    }
    args
}

/// `--version`: the crate's version and the commit it was built from (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("VL_REVISION"),
    ")"
);

/// The longest wait any flag may ask for (timers overflow somewhere past two years).
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(366 * 24 * 3600);

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Address of the /healthz, /readyz and /metrics endpoints.
    #[arg(long, env = "VL_LISTEN", default_value = "0.0.0.0:8080")]
    pub(crate) listen: SocketAddr,
    /// VolumeLeftover writes in flight at most (kube-rs has no client-side rate limit). A new
    /// finding is two requests in sequence; what each setting gives, from event to
    /// VolumeLeftover at 20 and 100 finding changes/s, is measured by the project's benchmark
    /// (docs/benchmarks.md, the latency block).
    #[arg(long, env = "VL_CONCURRENCY", default_value_t = DEFAULT_CONCURRENCY, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(crate) concurrency: u16,
    /// Period of the full re-evaluation of every PV and VolumeLeftover (1s to 24h).
    #[arg(long, env = "VL_RESYNC", default_value = shown!(DEFAULT_RESYNC), value_parser = resync)]
    pub(crate) resync: Duration,
    /// How long states that are normally only passing through must last.
    #[command(flatten)]
    pub(crate) graces: GraceArgs,
    /// A store whose watch has been failing for longer than this is stale: nothing is concluded
    /// from it, and /readyz turns 503.
    #[arg(long, env = "VL_STALE_AFTER", default_value = "15s", value_parser = wait)]
    pub(crate) stale_after: Duration,
    /// Each write request is abandoned (and retried with backoff) after this long (1s to 10m).
    #[arg(long, env = "VL_REQUEST_TIMEOUT", default_value = shown!(DEFAULT_REQUEST_TIMEOUT), value_parser = request_timeout)]
    pub(crate) request_timeout: Duration,
    /// Server-side timeout of each watch request (10s to 1h). A watch silent for this long plus
    /// 5 s is taken as dead and resumed (kube-runtime's idle bound): a watch that hangs without
    /// an error is noticed that late, so it must be shorter than `--grace`.
    #[arg(long, env = "VL_WATCH_TIMEOUT", default_value = shown!(DEFAULT_WATCH_TIMEOUT), value_parser = watch_timeout)]
    pub(crate) watch_timeout: Duration,
    /// Page size of the lists.
    #[arg(long, env = "VL_PAGE_SIZE", default_value_t = DEFAULT_PAGE_SIZE, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub(crate) page_size: u32,
    /// Run with several replicas: only the holder of a Lease decides and writes; the others keep
    /// their caches warm and take over at once when it releases the Lease on shutdown.
    #[arg(long, env = "VL_LEADER_ELECT", default_value_t = false)]
    pub(crate) leader_elect: bool,
    /// Name of the Lease.
    #[arg(long, env = "VL_LEASE_NAME", default_value = "volume-leftovers")]
    pub(crate) lease_name: String,
    /// Namespace of the Lease (default: POD_NAMESPACE, else the service account's namespace).
    #[arg(long, env = "VL_LEASE_NAMESPACE")]
    pub(crate) lease_namespace: Option<String>,
    /// How long the Lease lasts without renewal (renewed every third of it; 3s to 10m).
    #[arg(long, env = "VL_LEASE_DURATION", default_value = "15s", value_parser = lease_duration)]
    pub(crate) lease_duration: Duration,
    /// Publish Kubernetes Events on a PersistentVolume when its finding appears, changes reason
    /// or clears (`kubectl describe pv` shows them); `--events=false` turns them off.
    #[arg(long, env = "VL_EVENTS", default_value_t = true, action = clap::ArgAction::Set)]
    pub events: bool,
    /// Delete a tombstone (`VolumeDeleted`: a Retain volume was deleted, its disk was not) this
    /// long after the volume's delete. Unset: it stays until acknowledged or until the storage
    /// backend's census shows the image gone.
    #[arg(long, env = "VL_TOMBSTONE_TTL", value_parser = wait)]
    pub(crate) tombstone_ttl: Option<Duration>,
    /// Mirror the findings into one OpenReports ClusterReport (`volume-leftovers`), for
    /// policy-reporter; only when its CRD is installed.
    #[arg(long, env = "VL_OPENREPORTS", default_value_t = false)]
    pub openreports: bool,
    /// What is kept out of the report.
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// The storage backend's census.
    #[command(flatten)]
    pub(crate) census: CensusArgs,
    /// What the findings cost.
    #[command(flatten)]
    pub(crate) pricing: PricingArgs,
    /// Which snapshot objects are kept out.
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
}

/// How long a state that is normally only passing through must last before it is a finding:
/// one set of flags and defaults for `run` and `scan`, so that both hold back the same states
/// (`scan`, with one look, names what it held back and until when).
#[derive(Debug, Args, Clone)]
pub struct GraceArgs {
    /// How long a state that is normally only passing through must last before it is published:
    /// ClaimStillPresent, ReleasedWithoutClaim, BoundClaimMissing, PreboundClaimMissing, a
    /// VolumeSnapshotContent never bound. A state the objects do not date (a claim that vanished)
    /// is timed from its first observation: `scan`, which looks once, holds it back.
    #[arg(long, alias = "bound-grace", env = "VL_GRACE", default_value = shown!(DEFAULT_GRACE), value_parser = wait)]
    pub(crate) grace: Duration,
    /// How long a volume with reclaim policy Delete whose claim is gone (Released, Failed, or
    /// still Bound), or a Delete-policy snapshot content whose delete has not completed, must
    /// stay so before it is published (the PV controller and the provisioner, or the snapshot
    /// controller and the CSI driver, are normally deleting it).
    #[arg(long, env = "VL_DELETE_GRACE", default_value = shown!(DEFAULT_DELETE_GRACE), value_parser = wait)]
    pub(crate) delete_grace: Duration,
    /// How long a Bound claim must ask for more than it has (its request above its capacity)
    /// before it is published as ExpansionStuck, timed from the start of the resize step its
    /// conditions date, else from its first observation.
    #[arg(long, env = "VL_EXPANSION_GRACE", default_value = shown!(DEFAULT_EXPANSION_GRACE), value_parser = wait)]
    pub(crate) expansion_grace: Duration,
}

impl GraceArgs {
    /// The graces these flags set.
    pub fn graces(&self) -> crate::decide::plan::Graces {
        crate::decide::plan::Graces {
            grace: self.grace,
            delete_grace: self.delete_grace,
            expansion_grace: self.expansion_grace,
        }
    }
}

/// The opt-in price table.
#[derive(Debug, Args, Clone, Default)]
pub struct PricingArgs {
    /// A price table (YAML): what a GiB-month costs by StorageClass, or by CSI driver and disk
    /// type, in one currency (docs/cost.md). Each finding it prices carries its estimated
    /// monthly cost and what it cost since it became a leftover. Unset: no cost is estimated.
    #[arg(long, env = "VL_PRICE_TABLE")]
    pub(crate) price_table: Option<std::path::PathBuf>,
}

impl PricingArgs {
    /// The price table, read and checked; `None` without one.
    pub fn prices(
        &self,
    ) -> Result<Option<std::sync::Arc<crate::model::price::PriceTable>>, String> {
        let Some(path) = &self.price_table else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the price table {}: {e}", path.display()))?;
        crate::model::price::PriceTable::parse(&text)
            .map(|t| Some(std::sync::Arc::new(t)))
            .map_err(|e| format!("the price table {}: {e}", path.display()))
    }
}

/// The opt-in census: Ceph RBD, GCE persistent disks, EBS volumes.
#[derive(Debug, Args, Clone)]
pub struct CensusArgs {
    /// The census configuration: a YAML file naming the Ceph clusters (ceph-csi's clusterID,
    /// monitors, a read-only user and its keyring or key file) and the pools to census, the GCE
    /// projects and the EBS regions. Unset: no census, no Ceph library is needed and no cloud
    /// API is called; a backend without its section is not censused.
    #[arg(long, env = "VL_CENSUS_CONFIG")]
    pub(crate) census_config: Option<std::path::PathBuf>,
    /// How often each pool, GCE project and EBS region is censused (1s to 24h).
    #[arg(long, env = "VL_CENSUS_INTERVAL", default_value = "10m", value_parser = resync)]
    pub(crate) census_interval: Duration,
    /// How old an image that no PersistentVolume references must be before it is reported (the
    /// provisioner creates the image before the PV).
    #[arg(long, env = "VL_CENSUS_IMAGE_GRACE", default_value = "1h", value_parser = wait)]
    pub(crate) census_image_grace: Duration,
    /// The bound of each Ceph request (connecting, each monitor and OSD operation) and of each
    /// attempt of a GCE or EC2 request (1s to 10m).
    #[arg(long, env = "VL_CENSUS_TIMEOUT", default_value = "10s", value_parser = request_timeout)]
    pub(crate) census_timeout: Duration,
}

impl CensusArgs {
    /// The census settings, from the configuration file; `None` without one.
    pub fn settings(&self) -> Result<Option<crate::census::CensusSettings>, String> {
        let Some(path) = &self.census_config else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading the census configuration {}: {e}", path.display()))?;
        let config = crate::census::config::CensusConfig::parse(&text)
            .map_err(|e| format!("the census configuration {}: {e}", path.display()))?;
        Ok(Some(crate::census::CensusSettings {
            config,
            interval: self.census_interval,
            image_grace: self.census_image_grace,
            timeout: self.census_timeout,
            deadline: self.census_interval.max(Duration::from_secs(300)),
        }))
    }
}

/// Volumes kept out of the report on purpose (a PV labelled `leftovers.dev/ignore=true` always
/// is).
#[derive(Debug, Args, Clone, Default)]
pub struct ExcludeArgs {
    /// StorageClasses whose volumes are never reported (comma-separated, repeatable).
    #[arg(
        long = "exclude-storage-class",
        env = "VL_EXCLUDE_STORAGE_CLASSES",
        value_delimiter = ','
    )]
    pub(crate) storage_classes: Vec<String>,
    /// PVs whose labels match this selector are never reported (`team=db,env!=prod`,
    /// `keep`, `tier in (a,b)`).
    #[arg(long = "exclude-selector", env = "VL_EXCLUDE_SELECTOR", value_parser = selector)]
    pub(crate) selector: Option<crate::model::selector::Selector>,
}

impl ExcludeArgs {
    /// The exclusions these flags configure.
    pub fn exclusions(&self) -> crate::model::exclude::Exclusions {
        crate::model::exclude::Exclusions {
            classes: self
                .storage_classes
                .iter()
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect(),
            selector: self.selector.clone(),
        }
    }
}

fn selector(s: &str) -> Result<crate::model::selector::Selector, String> {
    crate::model::selector::Selector::parse(s)
}

/// Flags of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Output format: `table` and `wide` for people; `json` and `yaml`, one document (a List of
    /// the VolumeLeftovers the operator would write); `name`; `jsonl`, one line per finding in
    /// the original tool's format. Default: `table` on a terminal, `jsonl` otherwise.
    #[arg(short = 'o', long, env = "VL_OUTPUT", value_enum)]
    pub output: Option<Format>,
    /// Each list request is abandoned after this long (1s to 10m).
    #[arg(long, env = "VL_REQUEST_TIMEOUT", default_value = shown!(DEFAULT_REQUEST_TIMEOUT), value_parser = request_timeout)]
    pub request_timeout: Duration,
    /// The operator's graces: a state that has not lasted its grace is held back, not reported.
    #[command(flatten)]
    pub graces: GraceArgs,
    /// What is kept out of the report.
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// The storage backend's census (two listings of each pool, a moment apart).
    #[command(flatten)]
    pub census: CensusArgs,
    /// What the findings cost.
    #[command(flatten)]
    pub pricing: PricingArgs,
    /// Which snapshot objects are kept out.
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
}

/// Flags of `explain`: the finding's name, and those of `scan` for when no VolumeLeftover of
/// that name exists.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The finding: a VolumeLeftover's name (`kubectl get vl`), or a name `scan` reports.
    pub name: String,
    /// Each request is abandoned after this long (1s to 10m).
    #[arg(long, env = "VL_REQUEST_TIMEOUT", default_value = shown!(DEFAULT_REQUEST_TIMEOUT), value_parser = request_timeout)]
    pub request_timeout: Duration,
    /// The operator's graces, for the scan.
    #[command(flatten)]
    pub graces: GraceArgs,
    /// What the scan keeps out.
    #[command(flatten)]
    pub exclude: ExcludeArgs,
    /// The storage backend's census, for the scan (disk findings are the census's).
    #[command(flatten)]
    pub census: CensusArgs,
    /// Which snapshot objects the scan keeps out.
    #[command(flatten)]
    pub snapshots: SnapshotArgs,
}

/// How VolumeSnapshotContents and VolumeSnapshots are read (when the API server serves them).
#[derive(Debug, Args, Clone)]
pub struct SnapshotArgs {
    /// Snapshot objects whose labels match this selector are never reported: a backup tool's,
    /// which keeps its contents on purpose (default: Velero's). An empty value excludes none
    /// (the label `leftovers.dev/ignore=true` still does).
    #[arg(
        long = "exclude-snapshot-selector",
        env = "VL_EXCLUDE_SNAPSHOT_SELECTOR",
        default_value = crate::model::snapshot::VELERO_BACKUP_NAME_LABEL,
        value_parser = optional_selector
    )]
    pub(crate) snapshot_selector: OptionalSelector,
}

/// A selector flag that may be set empty (no selector).
#[derive(Clone, Debug)]
pub(crate) struct OptionalSelector(Option<crate::model::selector::Selector>);

fn optional_selector(s: &str) -> Result<OptionalSelector, String> {
    if s.trim().is_empty() {
        return Ok(OptionalSelector(None));
    }
    selector(s).map(|s| OptionalSelector(Some(s)))
}

impl SnapshotArgs {
    /// The snapshot objects kept out of the report.
    pub fn exclusions(&self) -> crate::model::snapshot::SnapshotExclusions {
        crate::model::snapshot::SnapshotExclusions {
            selector: self.snapshot_selector.0.clone(),
        }
    }

    /// How a scan reads snapshot objects: these exclusions, and the graces of `--grace` and
    /// `--delete-grace`.
    pub fn asked(&self, graces: &GraceArgs) -> crate::scan::snapshots::SnapshotsAsked {
        crate::scan::snapshots::SnapshotsAsked {
            exclusions: self.exclusions(),
            graces: graces.graces(),
        }
    }
}

/// Log format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Parses `90s`, `5m`, `1h30m` or an ISO 8601 duration.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("not a duration ({e}); examples: 30s, 5m, 1h"))?;
    Duration::try_from(d).map_err(|_| "durations must not be negative".to_string())
}

/// Parses a duration and checks it lies within `[min, max]`.
pub(crate) fn parse_duration_within(
    s: &str,
    min: Duration,
    max: Duration,
) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < min {
        return Err(format!("must be at least {}", human(min)));
    }
    if d > max {
        return Err(format!("must be at most {}", human(max)));
    }
    Ok(d)
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => "0s".into(),
        s if s % 86400 == 0 => format!("{}d", s / 86400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

fn resync(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::from_secs(1), Duration::from_secs(24 * 3600))
}

fn wait(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::ZERO, MAX_WAIT)
}

/// How long a watch that hangs without an error (the connection open, nothing arriving) can
/// go unnoticed: kube-runtime's watcher takes a watch silent for its server-side timeout plus
/// 5 s as dead, and resumes it.
pub fn silent_watch_bound(watch_timeout: Duration) -> Duration {
    watch_timeout + Duration::from_secs(5)
}

impl RunArgs {
    /// Why these settings could publish a finding from a cache that silently stopped: the grace
    /// is what holds back a state decided on a missing claim, so it must outlast the time a
    /// silent watch goes unnoticed. `None` when they cannot.
    pub(crate) fn silent_watch_risk(&self) -> Option<String> {
        let bound = silent_watch_bound(self.watch_timeout);
        let grace = self.graces.grace;
        (grace <= bound).then(|| {
            format!(
                "--grace {}s is not longer than a watch that hangs silently can go unnoticed \
                 (--watch-timeout {}s + 5 s): a claim missing from such a cache could be \
                 published as BoundClaimMissing; lower --watch-timeout or raise --grace",
                grace.as_secs(),
                self.watch_timeout.as_secs()
            )
        })
    }
}

fn request_timeout(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::from_secs(1), Duration::from_secs(600))
}

fn lease_duration(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::from_secs(3), Duration::from_secs(600))
}

fn watch_timeout(s: &str) -> Result<Duration, String> {
    parse_duration_within(s, Duration::from_secs(10), Duration::from_secs(3600))
}
