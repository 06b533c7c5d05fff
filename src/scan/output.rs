//! What `scan` (and `kubectl leftovers`) prints: the report in the format asked for, and the
//! one summary line every run ends with. Pure: it writes to the writer it is given.
//!
//! Formats, as kubectl users expect them: `table` (the default on a terminal), `wide`, `json`
//! (one document: a `List` of the VolumeLeftovers the operator would write, built by the
//! operator's own [`crate::decide::plan::desired`]), `yaml` (the same document), `name`
//! (`volumeleftover.leftovers.dev/NAME` per line) and `jsonl`: the first seed's JSON lines, one per
//! finding, its seven keys first, byte-compatible with its output (the default when the output is
//! not a terminal, so that a pipe gets what it always got).

use std::collections::BTreeMap;
use std::io::Write;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{ScanResult, snapshots};
use crate::model::crd::VolumeLeftover;
use crate::model::finding::Finding;
use crate::model::price::PriceTable;

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for people (the default on a terminal).
    Table,
    /// The table with the hints, where the disk is, and the message.
    Wide,
    /// One JSON document: a `List` of the VolumeLeftovers the operator would write.
    Json,
    /// The same document as YAML.
    Yaml,
    /// `volumeleftover.leftovers.dev/NAME`, one per line.
    Name,
    /// One JSON object per finding, per line: the original tool's seven keys first, in its order
    /// and format (the default when the output is not a terminal).
    Jsonl,
}

impl Format {
    /// The format when none is asked for: a table for a person at a terminal, the JSON lines
    /// for a pipe.
    pub fn default_for(terminal: bool) -> Format {
        if terminal {
            Format::Table
        } else {
            Format::Jsonl
        }
    }
}

/// Every finding of a report as the VolumeLeftover the operator would write for it, sorted by
/// name: volume and disk findings, then snapshot findings.
pub(crate) fn objects(
    report: &ScanResult,
    prices: Option<&PriceTable>,
    now: &Time,
) -> Vec<VolumeLeftover> {
    let snapshot_findings: Vec<Finding> = report
        .snapshots
        .findings
        .iter()
        .map(|r| crate::decide::snapshot::as_finding(&r.finding, now))
        .collect();
    let mut out: Vec<VolumeLeftover> = report
        .findings
        .iter()
        .chain(&snapshot_findings)
        .map(|f| crate::decide::plan::desired(f, None, &f.status.first_seen, now, prices))
        .collect();
    out.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    out
}

/// Writes the report in `format`.
pub(crate) fn write(
    w: &mut impl Write,
    report: &ScanResult,
    format: Format,
    prices: Option<&PriceTable>,
    now: &Time,
) -> std::io::Result<()> {
    match format {
        Format::Jsonl | Format::Table | Format::Wide => {
            super::write_report_with(w, &report.findings, &report.disks, format)?;
            snapshots::write(w, &report.snapshots.findings, format)
        }
        Format::Json => {
            let list = list(objects(report, prices, now));
            serde_json::to_writer_pretty(&mut *w, &list).map_err(std::io::Error::other)?;
            w.write_all(b"\n")
        }
        Format::Yaml => {
            let list = list(objects(report, prices, now));
            let yaml = serde_saphyr::to_string(&list).map_err(std::io::Error::other)?;
            w.write_all(yaml.as_bytes())
        }
        Format::Name => {
            for o in objects(report, prices, now) {
                writeln!(
                    w,
                    "volumeleftover.leftovers.dev/{}",
                    o.metadata.name.as_deref().unwrap_or_default()
                )?;
            }
            Ok(())
        }
    }
}

/// kubectl's `List` of `items`.
fn list(items: Vec<VolumeLeftover>) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {},
        "items": items,
    })
}

/// The one line every run ends with (on stderr): the findings by reason, the capacity they hold,
/// their estimated monthly cost and how many no price row covered, what is not known (scopes,
/// permissions, claims) and what was held back in a grace.
pub fn summary(report: &ScanResult, prices: Option<&PriceTable>) -> String {
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    let mut bytes: i64 = 0;
    let mut monthly: i64 = 0;
    let mut unpriced = 0;
    let volumes = report.findings.iter().map(|f| {
        (
            f.status.reason.as_str(),
            f.status.capacity_bytes,
            f.status.cost.as_ref(),
        )
    });
    let snapshots = report.snapshots.findings.iter().map(|r| {
        (
            r.finding.reason.as_str(),
            r.finding.restore_size_bytes,
            r.cost.as_ref(),
        )
    });
    for (reason, size, cost) in volumes.chain(snapshots) {
        *by_reason.entry(reason).or_default() += 1;
        bytes = bytes.saturating_add(size.unwrap_or(0));
        match cost {
            Some(c) => monthly = monthly.saturating_add(c.monthly_minor_units),
            None => unpriced += 1,
        }
    }
    let total: usize = by_reason.values().sum();
    let mut parts = Vec::new();
    if total == 0 {
        parts.push("no findings".to_string());
    } else {
        let mut reasons: Vec<(&str, usize)> = by_reason.into_iter().collect();
        // Most frequent first; equal counts by name: the same line for the same report.
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let listed: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
        parts.push(format!("{total} finding(s): {}", listed.join(", ")));
        parts.push(format!("{} held", gib(bytes)));
        parts.push(match prices {
            None => "no price table (--price-table)".to_string(),
            Some(t) => {
                let money = crate::decide::cost::money(monthly, t.decimals, &t.currency);
                if unpriced == 0 {
                    format!("{money}/month estimated")
                } else {
                    format!("{money}/month estimated, {unpriced} finding(s) no price row covers")
                }
            }
        });
    }
    let mut unknown: Vec<String> = report
        .cloud_failed
        .iter()
        .map(|f| f.scope.clone())
        .chain(report.census_failed.iter().map(|g| g.scope.clone()))
        .collect();
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        parts.push(format!("Unknown: {}", unknown.join(", ")));
    }
    if !report.missing.is_empty() {
        parts.push(format!("not permitted: {}", report.missing.join(", ")));
    }
    let claims = report.unknown_claims.len() + report.snapshots.unknown.len();
    if claims > 0 {
        parts.push(format!("{claims} second look(s) failed"));
    }
    if !report.held.is_empty() {
        parts.push(format!("{} held back in their grace", report.held.len()));
    }
    parts.join("; ")
}

/// Bytes as GiB for people, one decimal (`0.2 GiB`, `1024.0 GiB`).
fn gib(bytes: i64) -> String {
    // Display only: the exact figure is in each finding's `capacityBytes`.
    #[allow(clippy::cast_precision_loss)]
    let g = bytes as f64 / f64::from(1u32 << 30);
    format!("{g:.1} GiB")
}
