//! Command line. Pure: parsing only. Every flag has a default and an environment variable.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::scan::Format;

/// Reports PersistentVolumes that survived, lost or outlived their claims, as VolumeLeftover
/// objects. Reports, never decides: it never writes to PVs, claims or StorageClasses.
#[derive(Debug, Parser)]
#[command(name = "volume-leftovers", version, about, long_about = None)]
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
    /// found; 3: leftovers found; 1: error.
    Scan(ScanArgs),
    /// Print the VolumeLeftover CustomResourceDefinition as YAML.
    Crd,
}

/// Flags of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Address of the /healthz, /readyz and /metrics endpoints.
    #[arg(long, env = "VL_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// VolumeLeftover writes in flight at most (kube-rs has no client-side rate limit).
    #[arg(long, env = "VL_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
    /// Period of the full re-evaluation of every PV and VolumeLeftover (e.g. 5m, 30s).
    #[arg(long, env = "VL_RESYNC", default_value = "5m", value_parser = parse_duration)]
    pub resync: Duration,
    /// How long a Bound PV's claim must stay missing before BoundClaimMissing is published.
    #[arg(long, env = "VL_BOUND_GRACE", default_value = "2m", value_parser = parse_duration)]
    pub bound_grace: Duration,
    /// Page size of the initial lists.
    #[arg(long, env = "VL_PAGE_SIZE", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub page_size: u32,
}

/// Flags of `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Output format.
    #[arg(short = 'o', long, env = "VL_OUTPUT", value_enum, default_value_t = Format::Json)]
    pub output: Format,
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
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|e| format!("not a duration ({e}); examples: 30s, 5m, 1h"))?;
    Duration::try_from(d).map_err(|_| "durations must not be negative".to_string())
}
