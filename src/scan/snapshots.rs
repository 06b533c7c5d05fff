//! `scan`'s snapshot part: the VolumeSnapshotContents and VolumeSnapshots
//! (`snapshot.storage.k8s.io/v1`), when the API server serves them, classified by
//! [`crate::decide::snapshot`] as the operator will classify them.
//!
//! I/O: one discovery request, two paginated lists, and one GET of each object a finding rests
//! on when the finding could be a moment between two lists; writes nothing.
//!
//! A scan has no memory, so a grace the objects do not date (a state the operator times from its
//! first observation) starts at the scan's own look. A finding of that kind could also be the
//! moment between the scan's two lists: it is re-read (the content and the snapshot, one GET
//! each) and, when the second look still finds it, held back as the operator would hold it
//! (named with the time from which it would be reported). States the objects date (a content's
//! creation or deletion) wait out their grace from that date, as in the operator.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use serde::Serialize;

use super::{Reader, ScanError, unless_forbidden};
use crate::decide::lookup::Found;
use crate::decide::plan::Graces;
use crate::decide::snapshot::{
    ContentFacts, ContentLookup, SnapshotClock, SnapshotFacts, SnapshotFinding, SnapshotLookup,
    SnapshotSubject, SnapshotVerdict, classify_content, classify_snapshot, content_facts, grace_of,
    snapshot_facts,
};
use crate::model::crd::CostEstimate;
use crate::model::price::PriceTable;
use crate::model::snapshot::{
    API_VERSION, Snapshot, SnapshotContent, SnapshotExclusions, VolumeSnapshotContentObject,
    VolumeSnapshotObject,
};
use crate::watch::category::{Category, RequestError};

use crate::watch::served::{CONTENTS, SNAPSHOTS};

/// How a scan reads snapshot objects.
#[derive(Clone, Debug)]
pub struct SnapshotsAsked {
    /// Which objects are kept out of the report (by default, Velero's).
    pub exclusions: SnapshotExclusions,
    /// The graces of the states the objects date (the operator's defaults).
    pub graces: Graces,
}

/// A snapshot finding as a scan reports it.
#[derive(Clone, Debug)]
pub struct SnapshotRow {
    /// The finding.
    pub finding: SnapshotFinding,
    /// Its estimated cost, with a price table that prices it.
    pub cost: Option<CostEstimate>,
}

/// What the snapshot part of a scan found.
#[derive(Clone, Debug, Default)]
pub struct SnapshotScan {
    /// Whether the API server serves both snapshot kinds (`snapshot.storage.k8s.io/v1`). When it
    /// does not, there is nothing to check, and that is no error.
    pub served: bool,
    /// Findings, sorted: contents by name, then snapshots by namespace and name.
    pub findings: Vec<SnapshotRow>,
    /// Objects kept out of the report (a backup tool's, or the ignore label).
    pub excluded: usize,
    /// Objects whose second look (a 403, a timeout) could not tell whether the finding stands,
    /// each with the error: the report is incomplete.
    pub unknown: Vec<String>,
    /// The backend snapshots the contents name (their handles, excluded contents' too), when
    /// the contents were listed.
    pub handles: Option<Vec<String>>,
    /// The states held back until their grace has passed (`SnapshotVerdict::Waiting`).
    pub held: Vec<super::Held>,
}

/// What one lookup answers: the listed objects, or `None` when their list was forbidden
/// (every answer Unknown).
struct Listed<'a> {
    snapshots: Option<&'a HashMap<(String, String), SnapshotFacts>>,
    contents: Option<&'a HashMap<String, ContentFacts>>,
}

impl SnapshotLookup for Listed<'_> {
    fn snapshot(&self, namespace: &str, name: &str) -> Found<SnapshotFacts> {
        match self.snapshots {
            Some(m) => match m.get(&(namespace.to_string(), name.to_string())) {
                Some(f) => Found::Yes(f.clone()),
                None => Found::Absent,
            },
            None => Found::Unknown,
        }
    }
}

impl ContentLookup for Listed<'_> {
    fn content(&self, name: &str) -> Found<ContentFacts> {
        match self.contents {
            Some(m) => match m.get(name) {
                Some(f) => Found::Yes(f.clone()),
                None => Found::Absent,
            },
            None => Found::Unknown,
        }
    }
}

/// One object's second look: its answer, or `Unknown` (a 403, a timeout).
enum Looked<T> {
    Answered(Option<T>),
    Unknown(RequestError),
}

/// Whether a finding can be a moment between the scan's two lists: its grace is timed from its
/// first observation, which the objects do not date.
pub(crate) fn needs_second_look(f: &SnapshotFinding, graces: Graces) -> bool {
    let (grace, clock) = grace_of(f, graces);
    !grace.is_zero() && clock == SnapshotClock::Observed
}

impl Reader {
    /// Whether the API server serves VolumeSnapshotContents and VolumeSnapshots (one discovery
    /// request: [`crate::watch::served`]).
    async fn snapshots_served(&self) -> Result<bool, ScanError> {
        crate::watch::served::snapshots_served(&self.client, self.timeout)
            .await
            .map_err(|e| self.error("discover", "snapshot.storage.k8s.io/v1", e))
    }

    /// The backend snapshots every VolumeSnapshotContent names; `None` when the kind is not
    /// served or may not be listed (the snapshot part says which).
    pub(super) async fn content_handles(
        &self,
        exclusions: &SnapshotExclusions,
    ) -> Result<Option<Vec<String>>, ScanError> {
        if !self.snapshots_served().await? {
            return Ok(None);
        }
        let mut ignored = Vec::new();
        let contents = unless_forbidden(self.contents(exclusions).await, "", &mut ignored)?;
        Ok(contents.map(|c| handles_of(&c)))
    }

    /// Every VolumeSnapshotContent, as the lean form the operator keeps.
    async fn contents(
        &self,
        exclusions: &SnapshotExclusions,
    ) -> Result<Vec<SnapshotContent>, ScanError> {
        let api: Api<VolumeSnapshotContentObject> = Api::all(self.client.clone());
        let mut out = Vec::new();
        self.pages(
            CONTENTS,
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| {
                out.extend(
                    items
                        .into_iter()
                        .map(|o| SnapshotContent::read(o, exclusions)),
                )
            },
        )
        .await?;
        Ok(out)
    }

    /// Every VolumeSnapshot, as the lean form the operator keeps.
    async fn snapshots(&self, exclusions: &SnapshotExclusions) -> Result<Vec<Snapshot>, ScanError> {
        let api: Api<VolumeSnapshotObject> = Api::all(self.client.clone());
        let mut out = Vec::new();
        self.pages(
            SNAPSHOTS,
            |lp| {
                let api = api.clone();
                async move { api.list(&lp).await }
            },
            |items| out.extend(items.into_iter().map(|o| Snapshot::read(o, exclusions))),
        )
        .await?;
        Ok(out)
    }

    /// One GET of a content; errors other than a 403 or a timeout end the scan.
    async fn content_again(
        &self,
        name: &str,
        exclusions: &SnapshotExclusions,
    ) -> Result<Looked<SnapshotContent>, ScanError> {
        let api: Api<VolumeSnapshotContentObject> = Api::all(self.client.clone());
        let got = tokio::time::timeout(self.timeout, api.get_opt(name)).await;
        self.looked(got, CONTENTS, |o| SnapshotContent::read(o, exclusions))
    }

    /// One GET of a snapshot; errors other than a 403 or a timeout end the scan.
    async fn snapshot_again(
        &self,
        namespace: &str,
        name: &str,
        exclusions: &SnapshotExclusions,
    ) -> Result<Looked<Snapshot>, ScanError> {
        let api: Api<VolumeSnapshotObject> = Api::namespaced(self.client.clone(), namespace);
        let got = tokio::time::timeout(self.timeout, api.get_opt(name)).await;
        self.looked(got, SNAPSHOTS, |o| Snapshot::read(o, exclusions))
    }

    fn looked<O, T>(
        &self,
        got: Result<kube::Result<Option<O>>, tokio::time::error::Elapsed>,
        resource: &'static str,
        read: impl FnOnce(O) -> T,
    ) -> Result<Looked<T>, ScanError> {
        let failed = match got {
            Ok(Ok(o)) => return Ok(Looked::Answered(o.map(read))),
            Ok(Err(e)) => RequestError::Client(e),
            Err(_) => RequestError::Timeout(self.timeout),
        };
        if !matches!(failed.category(), Category::Forbidden | Category::Timeout) {
            return Err(self.error("get", resource, failed));
        }
        Ok(Looked::Unknown(failed))
    }

    /// The snapshot part of a scan at `now`: nothing when the kinds are not served; a forbidden
    /// list is named in `missing` (the report is incomplete) and makes every answer that
    /// depends on it Unknown.
    pub(super) async fn snapshot_part(
        &self,
        asked: &SnapshotsAsked,
        now: &Time,
        missing: &mut Vec<String>,
    ) -> Result<SnapshotScan, ScanError> {
        let SnapshotsAsked { exclusions, graces } = asked;
        let graces = *graces;
        self.progress
            .step("snapshots: is snapshot.storage.k8s.io/v1 served?");
        if !self.snapshots_served().await? {
            tracing::debug!(
                "{API_VERSION} VolumeSnapshotContents and VolumeSnapshots are not served: no snapshot to check"
            );
            return Ok(SnapshotScan::default());
        }
        // Snapshots first, then contents. A snapshot deleted after its list is still in it, so
        // its content is not misread as orphaned; a content bound after the snapshots' list names
        // a snapshot the list lacks, and that finding (not dated: no being-deleted mark) gets its
        // second look.
        let snapshots = unless_forbidden(
            self.snapshots(exclusions).await,
            "list volumesnapshots.snapshot.storage.k8s.io",
            missing,
        )?;
        let contents = unless_forbidden(
            self.contents(exclusions).await,
            "list volumesnapshotcontents.snapshot.storage.k8s.io",
            missing,
        )?;
        let snapshot_map = snapshots.as_ref().map(|v| {
            v.iter()
                .map(|s| (key_of(s), snapshot_facts(s)))
                .collect::<HashMap<_, _>>()
        });
        let content_map = contents.as_ref().map(|v| {
            v.iter()
                .map(|c| (c.metadata.name.to_string(), content_facts(c)))
                .collect::<HashMap<_, _>>()
        });
        let listed = Listed {
            snapshots: snapshot_map.as_ref(),
            contents: content_map.as_ref(),
        };
        let mut out = SnapshotScan {
            served: true,
            handles: contents.as_deref().map(handles_of),
            ..SnapshotScan::default()
        };
        let mut found = Vec::new();
        let mut again = Vec::new();
        let verdicts = contents
            .iter()
            .flatten()
            .map(|c| {
                let v = classify_content(c, &listed, now.clone(), graces);
                ("VolumeSnapshotContent", c.metadata.name.to_string(), v)
            })
            .chain(snapshots.iter().flatten().map(|s| {
                let (ns, name) = key_of(s);
                let v = classify_snapshot(s, &listed, now.clone());
                ("VolumeSnapshot", format!("{ns}/{name}"), v)
            }));
        for (kind, name, v) in verdicts {
            match v {
                SnapshotVerdict::Waiting { reason, until } => out.held.push(super::Held {
                    kind,
                    name,
                    reason: reason.as_str(),
                    until,
                }),
                SnapshotVerdict::Leftover(f) if needs_second_look(&f, graces) => again.push(*f),
                SnapshotVerdict::Leftover(f) => found.push(*f),
                SnapshotVerdict::Excluded(_) => out.excluded += 1,
                SnapshotVerdict::Skip(why) => tracing::warn!("skipped: {why}"),
                SnapshotVerdict::Healthy | SnapshotVerdict::Undecided(_) => {}
            }
        }
        if !again.is_empty() {
            self.progress.step(format!(
                "second looks: {} snapshot finding(s) that could be a moment between two lists",
                again.len()
            ));
        }
        for f in again {
            match self.second_look(&f, exclusions, graces, now).await? {
                // It stands, but the operator would hold it for its grace from its first
                // observation, which a scan cannot date: held back from this look.
                Ok(Some(f)) => {
                    let (grace, _) = grace_of(&f, graces);
                    out.held.push(super::Held {
                        kind: subject_kind(&f),
                        name: subject_name(&f),
                        reason: f.reason.as_str(),
                        until: super::plus(now, grace),
                    });
                }
                Ok(None) => {}
                Err(why) => out.unknown.push(why),
            }
        }
        if out.excluded > 0 {
            tracing::info!(
                excluded = out.excluded,
                "snapshot objects kept out of the report (the backup-tool selector or the ignore label)"
            );
        }
        found.sort_by_key(order);
        out.findings = found
            .into_iter()
            .map(|finding| SnapshotRow {
                finding,
                cost: None,
            })
            .collect();
        Ok(out)
    }

    /// The finding `f` classified again from one GET of each object it rests on: `Ok(None)`
    /// when it no longer stands, `Err` (the line the report prints) when a GET could not say.
    async fn second_look(
        &self,
        f: &SnapshotFinding,
        exclusions: &SnapshotExclusions,
        graces: Graces,
        now: &Time,
    ) -> Result<Result<Option<SnapshotFinding>, String>, ScanError> {
        let unknown = |what: String, e: RequestError| {
            Err(format!(
                "second look at {what} failed ({e}); whether its {} finding stands is unknown",
                f.reason
            ))
        };
        let (content_name, snapshot) = match &f.subject {
            SnapshotSubject::Content { name, .. } => (Some(name.clone()), f.snapshot_ref.clone()),
            SnapshotSubject::Snapshot {
                namespace, name, ..
            } => (f.content_name.clone(), Some(format!("{namespace}/{name}"))),
        };
        let content = match &content_name {
            Some(n) => match self.content_again(n, exclusions).await? {
                Looked::Answered(c) => c,
                Looked::Unknown(e) => {
                    return Ok(unknown(format!("VolumeSnapshotContent {n}"), e));
                }
            },
            None => None,
        };
        let snap = match snapshot.as_deref().and_then(|s| s.split_once('/')) {
            Some((ns, name)) => match self.snapshot_again(ns, name, exclusions).await? {
                Looked::Answered(s) => s,
                Looked::Unknown(e) => return Ok(unknown(format!("VolumeSnapshot {ns}/{name}"), e)),
            },
            None => None,
        };
        let snapshots: HashMap<_, _> = snap
            .iter()
            .map(|s| (key_of(s), snapshot_facts(s)))
            .collect();
        let contents: HashMap<_, _> = content
            .iter()
            .map(|c| (c.metadata.name.to_string(), content_facts(c)))
            .collect();
        let fresh = Listed {
            snapshots: Some(&snapshots),
            contents: Some(&contents),
        };
        let verdict = match &f.subject {
            SnapshotSubject::Content { .. } => match &content {
                Some(c) => classify_content(c, &fresh, now.clone(), graces),
                None => return Ok(Ok(None)),
            },
            SnapshotSubject::Snapshot { .. } => match &snap {
                Some(s) => classify_snapshot(s, &fresh, now.clone()),
                None => return Ok(Ok(None)),
            },
        };
        Ok(Ok(match verdict {
            SnapshotVerdict::Leftover(f) => Some(*f),
            _ => None,
        }))
    }
}

/// The kind of the object a finding is about.
fn subject_kind(f: &SnapshotFinding) -> &'static str {
    match &f.subject {
        SnapshotSubject::Content { .. } => "VolumeSnapshotContent",
        SnapshotSubject::Snapshot { .. } => "VolumeSnapshot",
    }
}

/// The name of the object a finding is about (`namespace/name` for a VolumeSnapshot).
fn subject_name(f: &SnapshotFinding) -> String {
    match &f.subject {
        SnapshotSubject::Content { name, .. } => name.clone(),
        SnapshotSubject::Snapshot {
            namespace, name, ..
        } => format!("{namespace}/{name}"),
    }
}

fn key_of(s: &Snapshot) -> (String, String) {
    (
        s.metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .to_string(),
        s.metadata.name.to_string(),
    )
}

/// Contents by name, then snapshots by namespace and name.
fn order(f: &SnapshotFinding) -> (u8, String, String) {
    match &f.subject {
        SnapshotSubject::Content { name, .. } => (0, String::new(), name.clone()),
        SnapshotSubject::Snapshot {
            namespace, name, ..
        } => (1, namespace.clone(), name.clone()),
    }
}

/// One JSON line about a snapshot finding. The keys a volume's line has mean the same here
/// (`name`, `reason`, `driver`, `volume_handle`, `message`, the cost keys); `snapshot_uid` and
/// `snapshot_current_uid` read as `claim_uid` and `claim_current_uid` do.
#[derive(Serialize)]
pub(crate) struct SnapshotLine<'a> {
    name: String,
    kind: &'static str,
    reason: &'static str,
    uid: &'a str,
    content: Option<&'a str>,
    snapshot: Option<&'a str>,
    snapshot_uid: Option<&'a str>,
    snapshot_current_uid: Option<&'a str>,
    deletion_policy: Option<&'static str>,
    driver: Option<&'a str>,
    snapshot_handle: Option<&'a str>,
    volume_handle: Option<&'a str>,
    source_claim: Option<&'a str>,
    restore_size_bytes: Option<i64>,
    snapshot_class: Option<&'a str>,
    ready_to_use: Option<bool>,
    since: Option<String>,
    message: &'a str,
    #[serde(flatten)]
    cost: Option<SnapshotCostKeys<'a>>,
}

/// The cost keys of a snapshot line: those of a volume's line; the accrued amount and its start
/// only when the objects date the state (a scan has no first observation to count from).
#[derive(Serialize)]
struct SnapshotCostKeys<'a> {
    currency: &'a str,
    monthly_cost_minor_units: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    accrued_cost_minor_units: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cost_since: Option<String>,
    priced_by: &'a str,
}

/// The name a line and a table row give a finding: the content's, or `namespace/name` of a
/// snapshot.
pub(crate) fn display_name(f: &SnapshotFinding) -> String {
    match &f.subject {
        SnapshotSubject::Content { name, .. } => name.clone(),
        SnapshotSubject::Snapshot {
            namespace, name, ..
        } => format!("{namespace}/{name}"),
    }
}

fn stamp(t: &Time) -> String {
    t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The line of `f`, with its estimate when it has one.
pub(crate) fn snapshot_line<'a>(
    f: &'a SnapshotFinding,
    cost: Option<&'a CostEstimate>,
) -> SnapshotLine<'a> {
    let (kind, uid) = match &f.subject {
        SnapshotSubject::Content { uid, .. } => ("VolumeSnapshotContent", uid.as_str()),
        SnapshotSubject::Snapshot { uid, .. } => ("VolumeSnapshot", uid.as_str()),
    };
    SnapshotLine {
        name: display_name(f),
        kind,
        reason: f.reason.as_str(),
        uid,
        content: f.content_name.as_deref(),
        snapshot: f.snapshot_ref.as_deref(),
        snapshot_uid: f.snapshot_uid.as_deref(),
        snapshot_current_uid: f.snapshot_uid_now.as_deref(),
        deletion_policy: f.deletion_policy.map(|p| p.as_str()),
        driver: f.driver.as_deref(),
        snapshot_handle: f.snapshot_handle.as_deref(),
        volume_handle: f.source_volume_handle.as_deref(),
        source_claim: f.source_claim.as_deref(),
        restore_size_bytes: f.restore_size_bytes,
        snapshot_class: f.class.as_deref(),
        ready_to_use: f.ready_to_use,
        since: f.since.as_ref().map(stamp),
        message: &f.message,
        cost: cost.map(|c| {
            let dated = f.since.is_some();
            SnapshotCostKeys {
                currency: &c.currency,
                monthly_cost_minor_units: c.monthly_minor_units,
                accrued_cost_minor_units: dated.then_some(c.accrued_minor_units),
                cost_since: dated.then(|| stamp(&c.since)),
                priced_by: &c.priced_by,
            }
        }),
    }
}

/// The estimate of a snapshot finding at `now`, if the table prices it: its restore size at the
/// price of the table's `snapshots` row for its driver. A finding the objects do not date counts
/// from `now` (nothing accrued; the line then leaves the accrued keys out).
pub(crate) fn snapshot_cost(
    f: &SnapshotFinding,
    table: &PriceTable,
    now: &Time,
) -> Option<CostEstimate> {
    let since = f.since.clone().unwrap_or_else(|| now.clone());
    let mut c = crate::decide::cost::estimate_snapshot(
        f.restore_size_bytes?,
        f.driver.as_deref()?,
        &since,
        table,
        now,
    )?;
    if f.since.is_none() {
        // Nothing dates it: only the monthly amount means anything.
        c.display = format!(
            "{}/month",
            crate::decide::cost::money(c.monthly_minor_units, table.decimals, &table.currency)
        );
    }
    Some(c)
}

/// Writes the snapshot findings after the volumes': a JSON line each, or a second table (only
/// when there is a finding).
pub(crate) fn write(
    w: &mut impl std::io::Write,
    rows: &[SnapshotRow],
    format: super::Format,
) -> std::io::Result<()> {
    match format {
        // Written whole, with the volume findings, by `output::write`.
        super::Format::Json | super::Format::Yaml | super::Format::Name => Ok(()),
        super::Format::Jsonl => {
            for r in rows {
                let mut ser = serde_json::Serializer::with_formatter(&mut *w, super::PythonStyle);
                snapshot_line(&r.finding, r.cost.as_ref())
                    .serialize(&mut ser)
                    .map_err(std::io::Error::other)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        }
        super::Format::Table | super::Format::Wide if rows.is_empty() => Ok(()),
        super::Format::Table | super::Format::Wide => {
            let costed = rows.iter().any(|r| r.cost.is_some());
            let mut header = vec![
                "SNAPSHOT-OBJECT",
                "KIND",
                "REASON",
                "POLICY",
                "SNAPSHOT",
                "DRIVER",
                "RESTORE-SIZE",
            ];
            if costed {
                header.push("COST");
            }
            let wide = format == super::Format::Wide;
            if wide {
                header.push("MESSAGE");
            }
            let none = || "<none>".to_string();
            let table: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    let f = &r.finding;
                    let l = snapshot_line(f, r.cost.as_ref());
                    let mut row = vec![
                        l.name,
                        l.kind.to_string(),
                        l.reason.to_string(),
                        l.deletion_policy.map_or_else(none, str::to_string),
                        l.snapshot.map_or_else(none, str::to_string),
                        l.driver.map_or_else(none, str::to_string),
                        l.restore_size_bytes.map_or_else(none, |b| b.to_string()),
                    ];
                    if costed {
                        row.push(r.cost.as_ref().map_or_else(none, |c| c.display.clone()));
                    }
                    if wide {
                        row.push(f.message.clone());
                    }
                    row
                })
                .collect();
            writeln!(w)?;
            super::write_table(w, &header, &table)
        }
    }
}

/// The backend snapshots the contents name: each one's `status.snapshotHandle` and
/// `spec.source.snapshotHandle`.
fn handles_of(contents: &[SnapshotContent]) -> Vec<String> {
    contents
        .iter()
        .flat_map(|c| {
            let status = c.status.as_ref().and_then(|s| s.snapshot_handle.as_deref());
            status
                .into_iter()
                .chain(c.spec.source.snapshot_handle.as_deref())
                .map(str::to_string)
        })
        .collect()
}
