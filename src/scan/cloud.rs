//! `scan`'s census reports, recorded as it lists (`crate::scan::census_twice` drives every
//! backend's listers, the operator's, twice), and what a JSON line says of a cloud disk. Pure.
//!
//! Every scope is listed twice before anything is classified: a disk counts as missing only
//! when two listings in a row lack it ([`Census::image`]). A scope whose listing failed either
//! time is reported ([`ScopeFailure`]: the scan exits 4); one that failed the second time is
//! Unknown, so nothing about its disks is concluded (no PV of it missing, no disk of it
//! orphaned).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::census::CensusReport;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::census::{Backend, Census, FailureKind};
use crate::model::crd::{Hint, Reason, Subject};
use crate::model::finding::Finding;

/// A scope (a Ceph pool, a zone, a region, or a project listed as a whole) whose listing failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeFailure {
    /// The backend.
    pub(crate) backend: &'static dyn Backend,
    /// The scope (`gce:p/europe-west1-b`, `ebs:123456789012/eu-west-1`, or `gce:p` for the
    /// aggregated listing of a whole project).
    pub(crate) scope: String,
    /// What kind of problem it is.
    pub(crate) kind: FailureKind,
    /// What failed, in one line.
    pub(crate) message: String,
    /// What the scope holds, of which nothing is said: `disks` or `snapshots`.
    pub(crate) holds: &'static str,
}

impl std::fmt::Display for ScopeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = self.backend.title();
        // A Ceph scope is a pool (`fsid/pool`), and says so.
        let pool = if self.backend.labelled_as_pool() {
            "pool "
        } else {
            ""
        };
        write!(
            f,
            "the {backend} census of {pool}{} failed ({}): {}; nothing is said about its {}",
            self.scope,
            self.kind.category.as_str(),
            self.message,
            self.holds
        )
    }
}

/// The failures of the scans' listings, by scope (the last one of each).
pub(crate) type Failures = BTreeMap<String, ScopeFailure>;

/// Records one listing's reports into `census` (admitting the zones and regions an aggregated
/// listing names, as the operator admits them), and each failure into `failed`. A failure is
/// kept even when the other listing of the scope worked: one listing is not two, and the scan is
/// incomplete. A section's own `clusterName` is the census's name for its scopes
/// ([`Census::cluster_name_of`]), so a disk naming it is this cluster's, as in the operator:
/// what a listing read is recorded as read.
pub(crate) fn record(census: &mut Census, reports: Vec<CensusReport>, failed: &mut Failures) {
    for r in reports {
        let key = r.key;
        census.admit(&key);
        let result = match r.result {
            Ok(snap) => Ok(snap),
            Err(f) => {
                failed.insert(
                    key.to_string(),
                    ScopeFailure {
                        backend: key.backend(),
                        scope: key.to_string(),
                        kind: f.kind,
                        message: f.message.clone(),
                        holds: if key.holds_snapshots() {
                            "snapshots"
                        } else {
                            key.backend().disks_are_called()
                        },
                    },
                );
                Err(f.message)
            }
        };
        census.record(&key, result);
    }
}

/// What a JSON line says of a cloud disk, after the keys every line has: which backend and
/// scope, and (for a disk no PV names) what the listing read of it. Absent from Ceph's and
/// other lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct DiskKeys {
    /// `gce` or `ebs`.
    pub(crate) backend: &'static str,
    /// The scope, as the stderr lines name it (`gce:p/europe-west1-b`, `ebs:eu-west-1`).
    pub(crate) scope: String,
    /// The GCE project.
    pub(crate) project: Option<String>,
    /// The zone of a zonal GCE disk, or the EBS volume's availability zone.
    pub(crate) zone: Option<String>,
    /// The region: a GCE disk's (a zonal disk's zone's), or the EBS volume's.
    pub(crate) region: Option<String>,
    /// The AWS account, as configured.
    pub(crate) account: Option<String>,
    /// The disk's id (GCE's number; the EBS volume id). `disk_name` is the disk's name (GCE)
    /// or volume id (EBS).
    pub(crate) disk_id: Option<String>,
    /// Its size in bytes.
    pub(crate) size_bytes: Option<u64>,
    /// Its type (`pd-balanced`, `gp3`).
    pub(crate) disk_type: Option<String>,
    /// When it was created.
    pub(crate) created: Option<String>,
    /// The instances it is attached to (GCE `users`, EBS attachments): in use, never a plain
    /// orphan.
    pub(crate) attached_to: Vec<String>,
    /// When it was last detached (GCE).
    pub(crate) last_detached: Option<String>,
    /// A regional GCE disk's replica zones.
    pub(crate) replica_zones: Vec<String>,
    /// Whose it is: `ours` or `unknown` (another cluster's disk is never reported).
    pub(crate) owner: Option<&'static str>,
    /// The cluster it names.
    pub(crate) owner_cluster: Option<String>,
    /// The PV the CSI driver recorded it was created for.
    pub(crate) created_for_pv: Option<String>,
    /// The claim (`namespace/name`) it was created for.
    pub(crate) created_for_claim: Option<String>,
    /// A backend snapshot's: the handle a VolumeSnapshotContent would carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot_handle: Option<String>,
    /// A backend snapshot's: the VolumeSnapshotContent the CSI driver recorded it was cut for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_for_content: Option<String>,
    /// A backend snapshot's: the VolumeSnapshot (`namespace/name`) it was cut for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_for_snapshot: Option<String>,
    /// The labels (GCE) or tags (EBS) that attribute it (`status.image.tags`).
    pub(crate) tags: BTreeMap<String, String>,
}

fn time(t: Option<&Time>) -> Option<String> {
    t.map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The cloud keys of a finding's line, read from the finding alone (what the operator publishes
/// in `status.image` is what `scan` prints): a disk or backend snapshot no PV or content names
/// (where it is and what the listing read of it), or a PV whose disk the listings did not find
/// (where they looked), in a scope of `census`. `None` for a Ceph pool's finding and every other
/// line.
pub(crate) fn disk_keys(f: &Finding, census: &Census) -> Option<DiskKeys> {
    let s = &f.status;
    let about_disk = matches!(
        s.reason,
        Reason::DiskWithoutVolume | Reason::SnapshotWithoutContent | Reason::VolumeWithoutDisk
    );
    let i = s.image.as_ref().filter(|_| about_disk)?;
    let scope = census.recorded_scope(s)?;
    let (project, account) = scope.backend().cloud_keys(&scope)?;
    let mut keys = DiskKeys {
        backend: scope.backend().name(),
        scope: scope.to_string(),
        project,
        zone: i.zone.clone(),
        region: i.region.clone(),
        account,
        replica_zones: i.replica_zones.clone(),
        tags: i.tags.clone(),
        ..DiskKeys::default()
    };
    if s.reason == Reason::VolumeWithoutDisk {
        // Where the listings looked: nothing was read of a disk they did not find.
        return Some(keys);
    }
    let owner = i.owner.as_ref();
    keys.disk_id = i.id.clone();
    keys.size_bytes = i.size_bytes.and_then(|b| u64::try_from(b).ok());
    keys.disk_type = i.disk_type.clone();
    keys.created = time(i.created.as_ref());
    keys.attached_to = i.watchers.clone();
    keys.last_detached = time(i.last_detached.as_ref());
    keys.owner = Some(if s.hints.contains(&Hint::OwnerUnknown) {
        "unknown"
    } else {
        "ours"
    });
    keys.owner_cluster = owner.and_then(|o| o.cluster_name.clone());
    if s.subject == Subject::BackendSnapshot {
        // What the driver recorded of it as a content and a snapshot (not as a PV and a claim).
        let snap = s.snapshot.as_ref();
        keys.snapshot_handle = snap.and_then(|i| i.snapshot_handle.clone());
        keys.created_for_content = snap.and_then(|i| i.content.clone());
        keys.created_for_snapshot = snap.and_then(|i| i.snapshot.clone());
        return Some(keys);
    }
    keys.created_for_pv = owner.and_then(|o| o.volume_name.clone());
    keys.created_for_claim = owner.and_then(|o| match (&o.claim_namespace, &o.claim_name) {
        (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
        (None, Some(n)) => Some(n.clone()),
        _ => None,
    });
    Some(keys)
}
