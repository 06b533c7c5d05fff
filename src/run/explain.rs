//! `volume-leftovers explain NAME`: reads one finding and prints what a person can do about it
//! ([`crate::decide::explain`]: the commands are printed, never run). I/O: one list of
//! VolumeLeftovers by name (a field selector: the ClusterRole grants no `get`, and this needs
//! none), else one scan; writes nothing to the cluster.

use std::io::Write;
use std::time::Duration;

use kube::Api;
use kube::api::ListParams;

use crate::decide::explain::{Origin, explain};
use crate::model::crd::VolumeLeftover;
use crate::run::cli::ExplainArgs;
use crate::scan::{Asked, Format, Outcome, ScanError, ScanResult};
use crate::watch::category::{Category, RequestError};

/// Why `explain` printed nothing: each is one line on stderr, and exit code 1.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// No client: no configuration, or one it cannot be built from.
    #[error(transparent)]
    Client(#[from] crate::watch::client::ClientError),
    /// The cluster refused a read (the VolumeLeftover, or what the scan lists): the line names
    /// the server and the cause.
    #[error(transparent)]
    Read(#[from] ScanError),
    /// The census configuration is unusable.
    #[error("{0}")]
    Census(String),
    /// NAME is not a finding: neither a VolumeLeftover nor a finding of a scan.
    #[error("{0}")]
    NotAFinding(String),
    /// Writing the explanation failed.
    #[error("writing the explanation: {0}")]
    Output(#[from] std::io::Error),
}

/// Explains the finding `args.name` on `out`; notes on what it rests on go to `err`. The
/// VolumeLeftover of that name when the cluster has one (the operator's), else the finding of
/// that name of one scan, with the flags `scan` takes.
pub async fn run(
    args: ExplainArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<(), ExplainError> {
    let name = args.name.as_str();
    if !is_object_name(name) {
        return Err(ExplainError::NotAFinding(format!(
            "{name:?} is not a finding: not a valid object name (lower-case letters, digits, '-' \
             and '.', at most 253)"
        )));
    }
    let census = args.census.settings().map_err(ExplainError::Census)?;
    let (client, server) = crate::watch::client::client(args.request_timeout).await?;
    let (leftover, origin) = match published(&client, &server, name, args.request_timeout).await? {
        Some(o) => (o, Origin::Operator),
        None => {
            let exclusions = args.exclude.exclusions();
            let snapshots = args.snapshots.asked(&args.graces);
            let asked = Asked {
                exclusions: &exclusions,
                census: census.as_ref(),
                prices: None,
                snapshots: &snapshots,
                graces: args.graces.graces(),
                progress: &crate::scan::progress::Progress::on_terminal(),
            };
            let (report, outcome) = crate::scan::run(
                client,
                &server,
                args.request_timeout,
                asked,
                // Written nowhere: only the report is read.
                Format::Jsonl,
                &mut std::io::sink(),
            )
            .await?;
            let Some(o) = scanned(&report, name) else {
                return Err(ExplainError::NotAFinding(not_found(
                    &report,
                    outcome,
                    name,
                    census.is_some(),
                )));
            };
            if outcome == Outcome::Incomplete {
                writeln!(
                    err,
                    "volume-leftovers explain: the scan could not read everything it needs (run \
                     `volume-leftovers scan` to see what); {name} is explained from what it read"
                )?;
            }
            (o, Origin::Scan)
        }
    };
    write!(
        out,
        "{}",
        explain(&leftover, origin, &crate::census::vocabularies())
    )?;
    out.flush()?;
    Ok(())
}

/// The VolumeLeftover `name`, read with one list by field selector; `None` when there is none,
/// or the CRD is not installed.
async fn published(
    client: &kube::Client,
    server: &str,
    name: &str,
    timeout: Duration,
) -> Result<Option<VolumeLeftover>, ScanError> {
    let api: Api<VolumeLeftover> = Api::all(client.clone());
    let lp = ListParams::default().fields(&format!("metadata.name={name}"));
    let failed = match tokio::time::timeout(timeout, api.list(&lp)).await {
        Ok(Ok(list)) => {
            return Ok(list
                .items
                .into_iter()
                .find(|o| o.metadata.name.as_deref() == Some(name)));
        }
        Ok(Err(e)) => RequestError::Client(e),
        Err(_) => RequestError::Timeout(timeout),
    };
    // No CRD: no operator, and nothing published.
    if failed.category() == Category::NotFound {
        return Ok(None);
    }
    Err(ScanError::read("list", "volumeleftovers", server, failed))
}

/// The finding `name` of a scan, as the VolumeLeftover the operator would write for it.
fn scanned(report: &ScanResult, name: &str) -> Option<VolumeLeftover> {
    let now = crate::engine::clock::wall_clock();
    let finding = report
        .findings
        .iter()
        .find(|f| f.name() == name)
        .cloned()
        .or_else(|| {
            report
                .snapshots
                .findings
                .iter()
                .map(|r| crate::decide::snapshot::as_finding(&r.finding, &now))
                .find(|f| f.name() == name)
        })?;
    let first_seen = finding.status.first_seen.clone();
    Some(crate::decide::plan::desired(
        &finding,
        None,
        &first_seen,
        &now,
        None,
    ))
}

/// The one line that says why `name` is not a finding.
fn not_found(report: &ScanResult, outcome: Outcome, name: &str, census: bool) -> String {
    use crate::decide::snapshot::{content_leftover_name, snapshot_leftover_name};
    let held = report.held.iter().find(|h| {
        let leftover = match (h.kind, h.name.split_once('/')) {
            ("VolumeSnapshotContent", _) => content_leftover_name(&h.name),
            ("VolumeSnapshot", Some((ns, n))) => snapshot_leftover_name(ns, n),
            _ => h.name.clone(),
        };
        leftover == name
    });
    if let Some(h) = held {
        return format!(
            "{name} is not a finding yet: {h} has not lasted its grace (--grace, --delete-grace), \
             and is not reported before"
        );
    }
    let mut line = format!(
        "{name} is not a finding: there is no VolumeLeftover of that name, and a scan of the \
         cluster finds nothing of that name"
    );
    if !census && ["rbd-", "gce-", "ebs-"].iter().any(|p| name.starts_with(p)) {
        line.push_str(
            " (a disk or backend snapshot finding is the census's: pass --census-config as to \
             scan)",
        );
    }
    if outcome == Outcome::Incomplete {
        line.push_str(
            "; the scan could not read everything it needs (run `volume-leftovers scan` to see \
             what)",
        );
    }
    line
}

/// A DNS subdomain, as every VolumeLeftover's name is (so that it is safe in a field selector).
fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}
