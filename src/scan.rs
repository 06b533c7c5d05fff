//! `volume-leftovers scan`: one read of the cluster, the same classification, a report.
//! I/O: paginated lists only (never one unbounded list, never one GET per PV); writes nothing.

use std::collections::HashMap;
use std::io::Write;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use crate::classify::{ClaimFacts, ClassFacts, Finding, Found, Lookup, Verdict, classify};
use crate::controller::{class_facts, wall_clock};
use crate::crd::Hint;
use crate::volume::Volume;

/// Errors of a scan, by step.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// Listing a kind failed for another reason than 403 on claims or classes.
    #[error("listing {resource}: {source}")]
    List {
        /// The resource.
        resource: &'static str,
        /// Cause.
        source: kube::Error,
    },
    /// Writing the report failed.
    #[error("writing the report: {0}")]
    Output(#[from] std::io::Error),
}

/// Output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One JSON object per line (keys of the original Python tool first).
    Json,
    /// Aligned columns for people.
    Table,
}

/// Everything a scan read.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// PersistentVolumes.
    pub pvs: Vec<Volume>,
    /// Claims by (namespace, name); `None` when claims could not be read (403).
    pub claims: Option<HashMap<(String, String), ClaimFacts>>,
    /// StorageClasses by name; `None` when classes could not be read (403).
    pub classes: Option<HashMap<String, ClassFacts>>,
}

impl Lookup for Snapshot {
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts> {
        match &self.claims {
            None => Found::Unknown,
            Some(m) => m
                .get(&(namespace.to_string(), name.to_string()))
                .cloned()
                .map_or(Found::Absent, Found::Yes),
        }
    }

    fn class(&self, name: &str) -> Found<ClassFacts> {
        match &self.classes {
            None => Found::Unknown,
            Some(m) => m.get(name).cloned().map_or(Found::Absent, Found::Yes),
        }
    }
}

async fn list_all<K, F, Fut>(resource: &'static str, mut page: F) -> Result<Vec<K>, ScanError>
where
    F: FnMut(ListParams) -> Fut,
    Fut: std::future::Future<Output = kube::Result<ObjectList<K>>>,
    K: Clone,
{
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(t) = token.take() {
            lp = lp.continue_token(&t);
        }
        let list = page(lp)
            .await
            .map_err(|source| ScanError::List { resource, source })?;
        out.extend(list.items);
        match list.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return Ok(out),
        }
    }
}

const PAGE: u32 = 500;

fn forbidden(e: &ScanError) -> bool {
    matches!(e, ScanError::List { source: kube::Error::Api(s), .. } if s.code == 403)
}

/// Reads PVs, claim metadata and StorageClasses, page by page.
pub async fn read(client: Client) -> Result<Snapshot, ScanError> {
    let pv_api: Api<Volume> = Api::all(client.clone());
    let pvs = list_all("persistentvolumes", |lp| {
        let api = pv_api.clone();
        async move { api.list(&lp).await }
    })
    .await?;

    let pvc_api: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let claims = match list_all("persistentvolumeclaims", |lp| {
        let api = pvc_api.clone();
        async move { api.list_metadata(&lp).await }
    })
    .await
    {
        Ok(items) => Some(
            items
                .into_iter()
                .map(|c| {
                    let key = (c.namespace().unwrap_or_default(), c.name_any());
                    let facts = ClaimFacts {
                        uid: c.metadata.uid.clone().unwrap_or_default(),
                        terminating: c.metadata.deletion_timestamp.is_some(),
                    };
                    (key, facts)
                })
                .collect(),
        ),
        Err(e) if forbidden(&e) => {
            tracing::error!(error = %e, "claims cannot be read: claim_missing is reported as null (unknown), never true");
            None
        }
        Err(e) => return Err(e),
    };

    let sc_api: Api<StorageClass> = Api::all(client);
    let classes = match list_all("storageclasses", |lp| {
        let api = sc_api.clone();
        async move { api.list(&lp).await }
    })
    .await
    {
        Ok(items) => Some(
            items
                .iter()
                .map(|c| (c.name_any(), class_facts(c)))
                .collect(),
        ),
        Err(e) if forbidden(&e) => {
            tracing::error!(error = %e, "StorageClasses cannot be read: their policies are reported as unknown");
            None
        }
        Err(e) => return Err(e),
    };
    Ok(Snapshot {
        pvs,
        claims,
        classes,
    })
}

/// Classifies every PV of the snapshot; findings sorted by PV name. Skipped PVs are logged.
pub fn findings(snapshot: &Snapshot) -> Vec<Finding> {
    let now = wall_clock();
    let mut out: Vec<Finding> = snapshot
        .pvs
        .iter()
        .filter_map(|pv| match classify(pv, snapshot, now.clone()) {
            Verdict::Leftover(f) => Some(*f),
            Verdict::Healthy => None,
            Verdict::Skip(why) => {
                tracing::warn!("skipped: {why}");
                None
            }
        })
        .collect();
    out.sort_by(|a, b| a.volume_name.cmp(&b.volume_name));
    out
}

/// One line of the JSON report. The first seven keys are those of the original tool, in its
/// order; the rest follow.
#[derive(Serialize)]
struct Line<'a> {
    name: &'a str,
    phase: &'a str,
    reclaim: &'a str,
    claim: Option<&'a str>,
    claim_missing: Option<bool>,
    storage_class: Option<&'a str>,
    capacity: Option<&'a str>,
    reason: &'static str,
    claim_uid: Option<&'a str>,
    claim_current_uid: Option<&'a str>,
    storage_class_reclaim: Option<&'a str>,
    hints: Vec<Hint>,
    phase_since: Option<String>,
    access_modes: &'a [String],
    volume_mode: &'a str,
    source_type: &'a str,
    driver: Option<&'a str>,
    volume_handle: Option<&'a str>,
    pool: Option<&'a str>,
    image_name: Option<&'a str>,
    disk_name: Option<&'a str>,
    path: Option<&'a str>,
    message: &'a str,
}

fn line(f: &Finding) -> Line<'_> {
    let s = &f.status;
    let claim = s.claim.as_ref();
    let class = s.storage_class.as_ref();
    Line {
        name: &f.volume_name,
        phase: &s.phase,
        reclaim: &s.reclaim_policy,
        // As the original tool: no claim string unless both parts are there, and a PV without
        // a claimRef has no missing claim.
        claim: claim
            .filter(|c| c.namespace.is_some() && c.name.is_some())
            .map(|c| c.reference.as_str()),
        claim_missing: claim.map_or(Some(false), |c| c.missing.known()),
        storage_class: class.map(|c| c.name.as_str()),
        capacity: s.capacity.as_deref(),
        reason: s.reason.as_str(),
        claim_uid: claim.and_then(|c| c.uid.as_deref()),
        claim_current_uid: claim.and_then(|c| c.current_uid.as_deref()),
        storage_class_reclaim: class.and_then(|c| c.reclaim_policy.as_deref()),
        hints: s.hints.clone(),
        phase_since: s.phase_since.as_ref().map(|t| {
            serde_json::to_value(t)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        }),
        access_modes: &s.access_modes,
        volume_mode: &s.volume_mode,
        source_type: &s.source.kind,
        driver: s.source.driver.as_deref(),
        volume_handle: s.source.volume_handle.as_deref(),
        pool: s.source.pool.as_deref(),
        image_name: s.source.image_name.as_deref(),
        disk_name: s.source.disk_name.as_deref(),
        path: s.source.path.as_deref(),
        message: &s.message,
    }
}

/// serde_json formatter with Python's `json.dumps` separators (`", "` and `": "`), so lines
/// compare equal to the original tool's output.
struct PythonStyle;

impl serde_json::ser::Formatter for PythonStyle {
    fn begin_array_value<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// Writes one JSON line for a finding.
pub fn write_json_line(w: &mut impl Write, f: &Finding) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *w, PythonStyle);
    line(f).serialize(&mut ser).map_err(std::io::Error::other)?;
    w.write_all(b"\n")
}

/// Writes the report.
pub fn write_report(
    w: &mut impl Write,
    findings: &[Finding],
    format: Format,
) -> std::io::Result<()> {
    match format {
        Format::Json => {
            for f in findings {
                write_json_line(w, f)?;
            }
        }
        Format::Table => {
            let header = [
                "NAME",
                "REASON",
                "PHASE",
                "RECLAIM",
                "CLAIM",
                "CLAIM-MISSING",
                "CLASS",
                "CAPACITY",
            ];
            let rows: Vec<[String; 8]> = findings
                .iter()
                .map(|f| {
                    let l = line(f);
                    [
                        l.name.to_string(),
                        l.reason.to_string(),
                        l.phase.to_string(),
                        l.reclaim.to_string(),
                        l.claim.unwrap_or("<none>").to_string(),
                        l.claim_missing.map_or("unknown".into(), |b| b.to_string()),
                        l.storage_class.unwrap_or("<none>").to_string(),
                        l.capacity.unwrap_or("<none>").to_string(),
                    ]
                })
                .collect();
            let mut width = header.map(str::len);
            for r in &rows {
                for (i, c) in r.iter().enumerate() {
                    width[i] = width[i].max(c.len());
                }
            }
            let mut put = |cells: &[&str]| -> std::io::Result<()> {
                let mut s = String::new();
                for (i, c) in cells.iter().enumerate() {
                    if i + 1 == cells.len() {
                        s.push_str(c);
                    } else {
                        s.push_str(&format!("{c:<w$}   ", w = width[i]));
                    }
                }
                writeln!(w, "{}", s.trim_end())
            };
            put(&header)?;
            for r in &rows {
                let cells: Vec<&str> = r.iter().map(String::as_str).collect();
                put(&cells)?;
            }
        }
    }
    Ok(())
}

/// Reads the cluster and writes the report; returns the number of findings.
pub async fn run(client: Client, format: Format, out: &mut impl Write) -> Result<usize, ScanError> {
    let snapshot = read(client).await?;
    let found = findings(&snapshot);
    write_report(out, &found, format)?;
    out.flush()?;
    Ok(found.len())
}
