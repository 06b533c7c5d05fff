//! The findings as one OpenReports `ClusterReport` (`openreports.io/v1alpha1`), for
//! policy-reporter and the dashboards that read it. The report itself is pure ([`cluster_report`]:
//! the same findings give the same bytes, in the findings' name order); [`ReportWriter`] reads the one there once and
//! applies it when it changed (I/O, opt-in with `--openreports`, only when the OpenReports CRD is
//! installed).

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};

use crate::model::crd::{Reason, State, VolumeLeftover};
use crate::model::labels::{FIELD_MANAGER, is_managed};
use crate::watch::category::{Category, describe};

/// Name of the report.
pub const REPORT_NAME: &str = "volume-leftovers";

/// The severity of a finding's reason, for policy-reporter's views.
pub fn severity(r: Reason) -> &'static str {
    match r {
        // A Bound volume whose claim is gone, or a failed reclaim: data may be at risk now.
        Reason::BoundClaimMissing | Reason::ReclaimFailed => "high",
        // The disk may still bill and hold data, and the record is the last one of it.
        Reason::VolumeDeleted | Reason::ImageWithoutVolume => "medium",
        // The PV's data is gone (a Bound one: data loss).
        Reason::VolumeWithoutImage => "high",
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimRefInvalid
        | Reason::ReleasedWithoutClaim
        | Reason::PreboundClaimMissing => "medium",
        Reason::ClaimStillPresent | Reason::ClaimUnknown => "low",
    }
}

/// The ClusterReport for these VolumeLeftovers (the operator's own; others are left out),
/// deterministic: results in the order of the findings' names (a PV's finding is named after it;
/// an image finding has no PV), timestamps from `firstSeen`, summary counts exact.
pub fn cluster_report<'a>(leftovers: impl IntoIterator<Item = &'a VolumeLeftover>) -> Value {
    let mut items: Vec<&VolumeLeftover> = leftovers
        .into_iter()
        .filter(|o| is_managed(o) && o.status.is_some())
        .collect();
    items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let (mut fail, mut skip) = (0u64, 0u64);
    let results: Vec<Value> = items
        .iter()
        .filter_map(|o| {
            let s = o.status.as_ref()?;
            let acknowledged = s.state == State::Acknowledged;
            if acknowledged {
                skip += 1;
            } else {
                fail += 1;
            }
            let mut properties = serde_json::Map::new();
            let mut put = |k: &str, v: Option<String>| {
                if let Some(v) = v.filter(|v| !v.is_empty()) {
                    properties.insert(k.into(), Value::String(v));
                }
            };
            put("state", Some(s.state.as_str().into()));
            put(
                "storageClass",
                s.storage_class.as_ref().map(|c| c.name.clone()),
            );
            put("capacity", s.capacity.clone());
            put("claim", s.claim.as_ref().map(|c| c.reference.clone()));
            put(
                "firstSeen",
                Some(s.first_seen.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
            );
            put(
                "ticket",
                o.spec
                    .acknowledgement
                    .as_ref()
                    .and_then(|a| a.ticket.clone()),
            );
            put("volumeHandle", s.source.volume_handle.clone());
            put(
                "image",
                s.image
                    .as_ref()
                    .map(|i| format!("{}/{}", i.pool, i.name))
                    .or_else(|| {
                        let src = &s.source;
                        Some(format!(
                            "{}/{}",
                            src.pool.as_ref()?,
                            src.image_name.as_ref()?
                        ))
                    }),
            );
            // The resource a result is about: the PV (gone, for a tombstone: its name and uid
            // are what the ticket needs), or, for an image no PV names, the finding itself.
            let resource = if o.spec.volume_name.is_empty() {
                json!({
                    "apiVersion": "leftovers.dev/v1alpha1",
                    "kind": "VolumeLeftover",
                    "name": o.metadata.name,
                    "uid": o.metadata.uid,
                })
            } else {
                json!({
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "name": o.spec.volume_name,
                    "uid": o.spec.volume_uid,
                })
            };
            Some(json!({
                "policy": s.reason.as_str(),
                "result": if acknowledged { "skip" } else { "fail" },
                "severity": severity(s.reason),
                "category": "Storage",
                "source": "volume-leftovers",
                "message": s.message,
                "scored": true,
                "timestamp": {"seconds": s.first_seen.0.as_second(), "nanos": 0},
                "resources": [resource],
                "properties": properties,
            }))
        })
        .collect();
    json!({
        "apiVersion": "openreports.io/v1alpha1",
        "kind": "ClusterReport",
        "metadata": {
            "name": REPORT_NAME,
            "labels": {"app.kubernetes.io/managed-by": "volume-leftovers"},
        },
        "source": "volume-leftovers",
        "summary": {"pass": 0, "fail": fail, "warn": 0, "error": 0, "skip": skip},
        "results": results,
    })
}

/// What of a ClusterReport this operator owns and [`cluster_report`] sets: its label, source,
/// summary and results. The rest (metadata the API server keeps, managedFields, fields or labels
/// others set) is not compared.
pub fn owned(report: &Value) -> Value {
    json!({
        "managedBy": report["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "source": report["source"],
        "summary": report["summary"],
        "results": report["results"],
    })
}

/// How applying the report went.
#[derive(Debug, PartialEq, Eq)]
pub enum Applied {
    /// Written.
    Done,
    /// The report there already says the same: nothing was written.
    Unchanged,
    /// The OpenReports CRD is not installed.
    NotInstalled,
    /// It failed; try again later.
    Failed(Category, String),
}

/// Reads the report to compare (once, before the first write), and applies it when it changed.
#[derive(Clone)]
pub struct ReportWriter {
    api: Api<DynamicObject>,
    timeout: Duration,
}

impl ReportWriter {
    /// A writer for cluster-scoped `ClusterReport`s.
    pub fn new(client: Client, timeout: Duration) -> ReportWriter {
        let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "ClusterReport");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterreports");
        ReportWriter {
            api: Api::all_with(client, &ar),
            timeout,
        }
    }

    /// Writes `report` unless `compare` and the report there already says the same ([`owned`]).
    /// `compare` is for the first write of a process (or after a failed one): later ones compare
    /// with what this process last wrote, without a request. A report that cannot be read is
    /// written.
    pub async fn write(&self, report: &Value, compare: bool) -> Applied {
        if compare {
            match tokio::time::timeout(self.timeout, self.api.get_opt(REPORT_NAME)).await {
                Ok(Ok(Some(there))) => match serde_json::to_value(&there) {
                    Ok(there) if owned(&there) == owned(report) => return Applied::Unchanged,
                    _ => {}
                },
                // Not there yet (or no CRD: the apply tells which).
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    tracing::debug!(error = %describe(&e), "reading the OpenReports ClusterReport failed; writing it")
                }
                Err(_) => {
                    tracing::debug!("reading the OpenReports ClusterReport timed out; writing it")
                }
            }
        }
        self.apply(report).await
    }

    /// Server-side applies `report` (a create when there is none: the API server authorizes
    /// that as `create`).
    async fn apply(&self, report: &Value) -> Applied {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        match tokio::time::timeout(
            self.timeout,
            self.api.patch(REPORT_NAME, &pp, &Patch::Apply(report)),
        )
        .await
        {
            Ok(Ok(_)) => Applied::Done,
            Ok(Err(e)) if Category::of(&e) == Category::NotFound => Applied::NotInstalled,
            Ok(Err(e)) => Applied::Failed(Category::of(&e), describe(&e)),
            Err(_) => Applied::Failed(Category::Timeout, "no answer".into()),
        }
    }
}
