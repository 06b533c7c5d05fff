//! The findings as one OpenReports `ClusterReport` (`openreports.io/v1alpha1`), for
//! policy-reporter and the dashboards that read it. Pure: the same findings give the same bytes,
//! in the findings' name order; [`crate::publish::report`] writes it.

use serde_json::{Value, json};

use crate::model::crd::{Reason, State, VolumeLeftover, VolumeLeftoverStatus};
use crate::model::labels::is_managed;

/// Name of the report.
pub(crate) const REPORT_NAME: &str = "volume-leftovers";

/// The severity of a finding's reason, for policy-reporter's views.
pub(crate) fn severity(r: Reason) -> &'static str {
    match r {
        // A Bound volume whose claim is gone, or a failed reclaim: data may be at risk now.
        Reason::BoundClaimMissing | Reason::ReclaimFailed => "high",
        // The disk may still bill and hold data, and the record is the last one of it.
        Reason::VolumeDeleted | Reason::DiskWithoutVolume | Reason::SnapshotWithoutContent => {
            "medium"
        }
        // The PV's data is gone (a Bound one: data loss).
        Reason::VolumeWithoutDisk => "high",
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimRefInvalid
        | Reason::ReleasedWithoutClaim
        | Reason::PreboundClaimMissing => "medium",
        Reason::ClaimStillPresent | Reason::ClaimUnknown => "low",
        // A claim that asks for more than it has: the application may run out of space.
        Reason::ExpansionStuck => "medium",
        // A disk billed larger than the cluster shows, or a PV that says more than its disk has.
        Reason::DiskSizeMismatch => "low",
        // Restores from the snapshot fail now.
        Reason::SnapshotContentMissing => "high",
        // A backend snapshot that still bills, and may be the last copy of its data.
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentDeleted => "medium",
        Reason::ContentNeverBound => "low",
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
            // An acknowledged finding is someone's known decision: policy-reporter shows it as
            // skipped, not as a failure to act on.
            let acknowledged = s.state == State::Acknowledged;
            if acknowledged {
                skip += 1;
            } else {
                fail += 1;
            }
            Some(result(o, s, acknowledged))
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

/// One finding as one report result. The timestamp is `firstSeen`, not now, so that the same
/// findings give the same bytes and a rewrite of the report is not a change.
fn result(o: &VolumeLeftover, s: &VolumeLeftoverStatus, acknowledged: bool) -> Value {
    json!({
        "policy": s.reason.as_str(),
        "result": if acknowledged { "skip" } else { "fail" },
        "severity": severity(s.reason),
        "category": "Storage",
        "source": "volume-leftovers",
        "message": s.message,
        "scored": true,
        "timestamp": {"seconds": s.first_seen.0.as_second(), "nanos": 0},
        "resources": [resource(o)],
        "properties": properties(o, s),
    })
}

/// The details a dashboard filters and a ticket needs, as strings. Empty or absent values are
/// left out rather than written as `""`, so a column that does not apply stays empty.
fn properties(o: &VolumeLeftover, s: &VolumeLeftoverStatus) -> serde_json::Map<String, Value> {
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
    put("image", image(s));
    // The estimate, when the price table priced it: for people, and the monthly amount in
    // minor units for a policy or dashboard that sums or compares.
    put("cost", s.cost.as_ref().map(|c| c.display.clone()));
    put(
        "monthlyCostMinorUnits",
        s.cost.as_ref().map(|c| c.monthly_minor_units.to_string()),
    );
    put("currency", s.cost.as_ref().map(|c| c.currency.clone()));
    properties
}

/// `pool/name` of the backend image (a cloud disk's `zone/name`, or `region/name`): what the
/// census saw when the finding is a census one, else what the PV's source names (absent when it
/// names no pool or image: not an RBD volume).
fn image(s: &VolumeLeftoverStatus) -> Option<String> {
    s.image
        .as_ref()
        .map(
            |i| match i.pool.as_ref().or(i.zone.as_ref()).or(i.region.as_ref()) {
                Some(at) => format!("{at}/{}", i.name),
                None => i.name.clone(),
            },
        )
        .or_else(|| {
            let src = &s.source;
            Some(format!(
                "{}/{}",
                src.pool.as_ref()?,
                src.image_name.as_ref()?
            ))
        })
}

/// The resource a result is about: the PV (gone, for a tombstone: its name and uid are what the
/// ticket needs), or, for an image no PV names, the finding itself.
fn resource(o: &VolumeLeftover) -> Value {
    if o.spec.volume_name.is_empty() {
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
    }
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
