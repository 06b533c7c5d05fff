//! What the GCE census keeps of a Compute Engine disk, and why a listing failed.
//!
//! **Pure: no client, no clock.** Maps the Compute crate's `Disk` to [`GceDisk`] (the
//! integration maps those to the backend-neutral census types) and a client error to its
//! [`ErrorCategory`].

use std::collections::BTreeMap;
use std::fmt;

use google_cloud_compute_v1::model::{Disk, Snapshot};

/// The description key under which the GCE PD CSI driver records the PV it made the disk for.
pub(crate) const CREATED_FOR_PV_NAME: &str = "kubernetes.io/created-for/pv/name";
/// The description key of the claim's name.
pub(crate) const CREATED_FOR_PVC_NAME: &str = "kubernetes.io/created-for/pvc/name";
/// The description key of the claim's namespace.
pub(crate) const CREATED_FOR_PVC_NAMESPACE: &str = "kubernetes.io/created-for/pvc/namespace";
/// The description key under which the PD CSI driver records the VolumeSnapshotContent it cut
/// a snapshot for ...
pub(crate) const CREATED_FOR_CONTENT_NAME: &str =
    "kubernetes.io/created-for/volumesnapshotcontent/name";
/// ... the VolumeSnapshot's name ...
pub(crate) const CREATED_FOR_SNAPSHOT_NAME: &str = "kubernetes.io/created-for/volumesnapshot/name";
/// ... and its namespace.
pub(crate) const CREATED_FOR_SNAPSHOT_NAMESPACE: &str =
    "kubernetes.io/created-for/volumesnapshot/namespace";
/// The description key naming the driver that made a disk or snapshot.
pub(crate) const CREATED_BY: &str = "storage.gke.io/created-by";
/// The PD CSI driver's name, the value of [`CREATED_BY`].
pub(crate) const PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";
/// The label GKE puts on the disks a cluster's driver creates: the cluster's name.
pub const GKE_CLUSTER_LABEL: &str = "goog-k8s-cluster-name";

/// Where a disk lives, or what a listing covered.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// A zone (`us-central1-a`): zonal disks.
    Zone(String),
    /// A region (`us-central1`): regional (replicated) disks.
    Region(String),
    /// Every location of the project: only a failed aggregated listing names this, because it
    /// did not say which zones and regions exist.
    All,
}

impl Location {
    /// The key of the scope in an aggregated listing (`zones/us-central1-a`), as in the API.
    pub(crate) fn parse_scope(s: &str) -> Option<Location> {
        match s.split_once('/')? {
            ("zones", z) if !z.is_empty() => Some(Location::Zone(z.into())),
            ("regions", r) if !r.is_empty() => Some(Location::Region(r.into())),
            _ => None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Zone(z) => write!(f, "zones/{z}"),
            Location::Region(r) => write!(f, "regions/{r}"),
            Location::All => f.write_str("all locations"),
        }
    }
}

/// One censused scope: a project and a zone or region of it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GceScope {
    /// The project id.
    pub(crate) project: String,
    /// The zone or region.
    pub location: Location,
}

impl fmt::Display for GceScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "projects/{}/{}", self.project, self.location)
    }
}

/// What kind of problem stopped a listing: the census's own categories, which Compute's answers
/// map to one for one (401, 403, 429, 5xx, no answer in time, anything else).
pub use crate::model::listing::FailureCategory as ErrorCategory;

/// Why a scope's listing failed: the scope says nothing about which disks exist (Unknown),
/// never an empty or partial list.
///
/// Its [`Display`](fmt::Display) is the message alone: the category is a field, which whoever
/// prints the line prints beside it (the logs' `category`, `scan`'s `failed (forbidden)`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ListError {
    /// What kind of problem it is.
    pub category: ErrorCategory,
    /// What failed, in one line.
    pub message: String,
}

impl ListError {
    /// An error of `category`.
    pub(crate) fn new(category: ErrorCategory, message: impl Into<String>) -> ListError {
        ListError {
            category,
            message: message.into(),
        }
    }
}

/// The PV and claim the CSI driver recorded in the disk's description (a JSON object; GKE's PD
/// CSI driver writes it when it creates the disk for a claim).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GceCreatedFor {
    /// `kubernetes.io/created-for/pv/name`.
    pub pv_name: Option<String>,
    /// `kubernetes.io/created-for/pvc/name`.
    pub pvc_name: Option<String>,
    /// `kubernetes.io/created-for/pvc/namespace`.
    pub pvc_namespace: Option<String>,
}

impl GceCreatedFor {
    /// Reads the description; a description that is not such a JSON object (a disk made by
    /// hand, or by another tool) records nothing.
    pub(crate) fn parse(description: &str) -> GceCreatedFor {
        let m = description_object(description);
        let get = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        GceCreatedFor {
            pv_name: get(CREATED_FOR_PV_NAME),
            pvc_name: get(CREATED_FOR_PVC_NAME),
            pvc_namespace: get(CREATED_FOR_PVC_NAMESPACE),
        }
    }

    /// Reads a snapshot's description in the neutral names: the VolumeSnapshotContent as the
    /// `pv`, the VolumeSnapshot as the claim.
    pub(crate) fn parse_snapshot(description: &str) -> GceCreatedFor {
        let m = description_object(description);
        let get = |k: &str| m.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        GceCreatedFor {
            pv_name: get(CREATED_FOR_CONTENT_NAME),
            pvc_name: get(CREATED_FOR_SNAPSHOT_NAME),
            pvc_namespace: get(CREATED_FOR_SNAPSHOT_NAMESPACE),
        }
    }
}

/// A description as the JSON object the CSI driver writes; empty when it is not one.
fn description_object(description: &str) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::from_str(description) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// Whether a description says the PD CSI driver made the disk or snapshot.
pub(crate) fn made_by_csi_driver(description: &str) -> bool {
    description_object(description)
        .get(CREATED_BY)
        .and_then(|v| v.as_str())
        == Some(PD_CSI_DRIVER)
}

/// What the census keeps of one snapshot the PD CSI driver cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GceSnapshot {
    /// The snapshot's name (unique in the project: snapshots are global), what a
    /// VolumeSnapshotContent's `snapshotHandle` names (`projects/p/global/snapshots/<name>`).
    pub name: String,
    /// Its numeric id (a new snapshot of the same name has another).
    pub id: u64,
    /// The size of the disk it was cut from, in bytes (`diskSizeGb` × 2³⁰).
    pub size_bytes: u64,
    /// When it was created.
    pub(crate) created: Option<jiff::Timestamp>,
    /// The disk it was cut from, as a CSI volume handle names it
    /// (`projects/p/zones/z/disks/d`, `projects/p/regions/r/disks/d`), when its URL is one.
    pub source_disk: Option<String>,
    /// The VolumeSnapshotContent (as `pv_name`) and VolumeSnapshot (as the claim) recorded.
    pub created_for: GceCreatedFor,
    /// The cluster its labels name (as for a disk).
    pub cluster: Option<String>,
}

/// A `sourceDisk` URL (`https://www.googleapis.com/compute/v1/projects/p/zones/z/disks/d`, or
/// the same without the host) as a CSI volume handle names the disk; `None` for anything else.
pub(crate) fn disk_handle(url: &str) -> Option<String> {
    let path = url
        .find("projects/")
        .map(|i| &url[i..])
        .filter(|p| super::handle::parse_gce_handle(p).is_some())?;
    Some(path.to_string())
}

/// What the census keeps of one disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GceDisk {
    /// The disk's name (unique in its zone or region).
    pub name: String,
    /// Its numeric id (a new disk of the same name has another).
    pub id: u64,
    /// Where it lives.
    pub location: Location,
    /// Its size in bytes (`sizeGb` × 2³⁰: Compute's GB are GiB).
    pub size_bytes: u64,
    /// The disk type's name (`pd-balanced`, `pd-ssd`, `hyperdisk-balanced`, …).
    pub disk_type: String,
    /// When it was created.
    pub(crate) created: Option<jiff::Timestamp>,
    /// The instances it is attached to (`users`; their URLs). Attached means in use.
    pub users: Vec<String>,
    /// When it was last detached from an instance.
    pub last_detach: Option<jiff::Timestamp>,
    /// A regional disk's replica zones (names); empty for a zonal disk.
    pub replica_zones: Vec<String>,
    /// Its labels.
    pub(crate) labels: BTreeMap<String, String>,
    /// The PV and claim the CSI driver recorded.
    pub created_for: GceCreatedFor,
    /// The cluster its labels name (the configured label key, else `goog-k8s-cluster-name`):
    /// another cluster's disk is not this cluster's finding; `None` means nobody is named.
    pub cluster: Option<String>,
    /// `sourceSnapshot` or `sourceImage` when it was restored from one (still a disk).
    pub(crate) source: Option<String>,
}

/// The last segment of a Compute URL (`.../diskTypes/pd-ssd` → `pd-ssd`); a plain name stays.
pub(crate) fn last_segment(url: &str) -> &str {
    url.rsplit('/').next().unwrap_or(url)
}

/// A disk's facts, from the API's answer. `cluster_label` is the label naming the cluster
/// that owns a disk (`None`: GKE's `goog-k8s-cluster-name`). A disk without a name or id is not
/// a disk the API could list: an error, so that the scope is not taken as complete.
pub(crate) fn facts_of(
    d: Disk,
    location: &Location,
    cluster_label: Option<&str>,
) -> Result<GceDisk, ListError> {
    let name = d
        .name
        .ok_or_else(|| ListError::new(ErrorCategory::Other, "a disk without a name"))?;
    let id = d.id.ok_or_else(|| {
        ListError::new(ErrorCategory::Other, format!("disk {name} without an id"))
    })?;
    let size_gb = d.size_gb.unwrap_or(0);
    let size_bytes = u64::try_from(size_gb)
        .ok()
        .and_then(|g| g.checked_mul(1 << 30))
        .ok_or_else(|| {
            ListError::new(
                ErrorCategory::Other,
                format!("disk {name}: size {size_gb} GB out of range"),
            )
        })?;
    let time = |t: Option<String>, what: &str| -> Result<Option<jiff::Timestamp>, ListError> {
        t.map(|t| {
            t.parse::<jiff::Timestamp>().map_err(|e| {
                ListError::new(
                    ErrorCategory::Other,
                    format!("disk {name}: {what} {t:?}: {e}"),
                )
            })
        })
        .transpose()
    };
    let created = time(d.creation_timestamp, "creationTimestamp")?;
    let last_detach = time(d.last_detach_timestamp, "lastDetachTimestamp")?;
    let labels: BTreeMap<String, String> = d.labels.into_iter().collect();
    let cluster = labels
        .get(cluster_label.unwrap_or(GKE_CLUSTER_LABEL))
        .cloned();
    Ok(GceDisk {
        id,
        location: location.clone(),
        size_bytes,
        disk_type: d
            .r#type
            .as_deref()
            .map(last_segment)
            .unwrap_or_default()
            .to_owned(),
        created,
        users: d.users,
        last_detach,
        replica_zones: d
            .replica_zones
            .iter()
            .map(|z| last_segment(z).to_owned())
            .collect(),
        labels,
        created_for: d
            .description
            .as_deref()
            .map(GceCreatedFor::parse)
            .unwrap_or_default(),
        cluster,
        source: d.source_snapshot.or(d.source_image),
        name,
    })
}

/// A snapshot's facts, from the API's answer; `None` for a snapshot the PD CSI driver did not
/// cut (made by hand, by a schedule, by another tool: no VolumeSnapshotContent can name it as
/// the driver's). `cluster_label` as for [`facts_of`]. A snapshot without a name or id is an
/// error, so that the listing is not taken as complete.
pub(crate) fn snapshot_facts_of(
    s: Snapshot,
    cluster_label: Option<&str>,
) -> Result<Option<GceSnapshot>, ListError> {
    let description = s.description.as_deref().unwrap_or_default();
    if !made_by_csi_driver(description) {
        return Ok(None);
    }
    let name = s
        .name
        .ok_or_else(|| ListError::new(ErrorCategory::Other, "a snapshot without a name"))?;
    let bad =
        |what: String| ListError::new(ErrorCategory::Other, format!("snapshot {name}: {what}"));
    let id = s.id.ok_or_else(|| bad("no id".into()))?;
    let size_gb = s.disk_size_gb.unwrap_or(0);
    let size_bytes = u64::try_from(size_gb)
        .ok()
        .and_then(|g| g.checked_mul(1 << 30))
        .ok_or_else(|| bad(format!("diskSizeGb {size_gb} out of range")))?;
    let created = s
        .creation_timestamp
        .map(|t| {
            t.parse::<jiff::Timestamp>()
                .map_err(|e| bad(format!("creationTimestamp {t:?}: {e}")))
        })
        .transpose()?;
    Ok(Some(GceSnapshot {
        id,
        size_bytes,
        created,
        source_disk: s.source_disk.as_deref().and_then(disk_handle),
        created_for: GceCreatedFor::parse_snapshot(description),
        cluster: s
            .labels
            .get(cluster_label.unwrap_or(GKE_CLUSTER_LABEL))
            .cloned(),
        name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(json: serde_json::Value) -> Disk {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_regional_csi_disk() {
        let d = disk(serde_json::json!({
            "name": "pvc-0f3c", "id": "8812345678901234567", "sizeGb": "20",
            "type": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/diskTypes/pd-ssd",
            "creationTimestamp": "2026-03-01T10:00:00.123-08:00",
            "lastDetachTimestamp": "2026-03-02T10:00:00.000-08:00",
            "replicaZones": ["https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-a",
                             "https://www.googleapis.com/compute/v1/projects/p/zones/us-central1-b"],
            "labels": {"goog-k8s-cluster-name": "prod", "team": "a"},
            "description": "{\"kubernetes.io/created-for/pv/name\":\"pvc-0f3c\",\"kubernetes.io/created-for/pvc/name\":\"pvc2\",\"kubernetes.io/created-for/pvc/namespace\":\"default\",\"storage.gke.io/created-by\":\"pd.csi.storage.gke.io\"}",
        }));
        let f = facts_of(d, &Location::Region("us-central1".into()), None).unwrap();
        assert_eq!(f.id, 8812345678901234567);
        assert_eq!(f.size_bytes, 20 << 30);
        assert_eq!(f.disk_type, "pd-ssd");
        assert_eq!(f.replica_zones, ["us-central1-a", "us-central1-b"]);
        assert_eq!(f.cluster.as_deref(), Some("prod"));
        assert_eq!(
            f.created.unwrap().to_string(),
            "2026-03-01T18:00:00.123Z",
            "the offset is honoured"
        );
        assert!(f.last_detach.is_some());
        assert_eq!(
            f.created_for,
            GceCreatedFor {
                pv_name: Some("pvc-0f3c".into()),
                pvc_name: Some("pvc2".into()),
                pvc_namespace: Some("default".into()),
            }
        );
        let own = facts_of(
            disk(serde_json::json!({"name": "x", "id": "1", "labels": {"owner": "c2", "goog-k8s-cluster-name": "prod"}})),
            &Location::Zone("z".into()),
            Some("owner"),
        )
        .unwrap();
        assert_eq!(
            own.cluster.as_deref(),
            Some("c2"),
            "the configured label wins"
        );
    }

    #[test]
    fn a_hand_made_disk_records_nothing_and_a_nameless_one_is_an_error() {
        let f = facts_of(
            disk(serde_json::json!({"name": "boot", "id": "2", "description": "my boot disk", "users": ["https://x/instances/vm"]})),
            &Location::Zone("z".into()),
            None,
        )
        .unwrap();
        assert_eq!(f.created_for, GceCreatedFor::default());
        assert_eq!(f.cluster, None);
        assert_eq!(f.users.len(), 1);
        let e = facts_of(
            disk(serde_json::json!({"id": "3"})),
            &Location::Zone("z".into()),
            None,
        )
        .unwrap_err();
        assert_eq!(e.category, ErrorCategory::Other);
    }

    #[test]
    fn scopes_and_statuses() {
        assert_eq!(
            Location::parse_scope("regions/europe-west1"),
            Some(Location::Region("europe-west1".into()))
        );
        assert_eq!(Location::parse_scope("global"), None);
        assert_eq!(ErrorCategory::of_status(429), Some(ErrorCategory::Quota));
        assert_eq!(ErrorCategory::of_status(503), Some(ErrorCategory::Server));
        assert_eq!(ErrorCategory::of_status(404), None);
    }

    fn snapshot(json: serde_json::Value) -> Snapshot {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn a_csi_snapshot_and_a_hand_made_one() {
        let s = snapshot(serde_json::json!({
            "name": "snapshot-7a1c", "id": "9912345678901234567", "diskSizeGb": "20",
            "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
            "sourceDisk": "https://www.googleapis.com/compute/v1/projects/p/regions/us-central1/disks/pvc-0f3c",
            "labels": {"goog-k8s-cluster-name": "prod"},
            "description": "{\"kubernetes.io/created-for/volumesnapshot/name\":\"nightly\",\"kubernetes.io/created-for/volumesnapshot/namespace\":\"shop\",\"kubernetes.io/created-for/volumesnapshotcontent/name\":\"snapcontent-1\",\"storage.gke.io/created-by\":\"pd.csi.storage.gke.io\"}",
        }));
        let f = snapshot_facts_of(s, None).unwrap().expect("the driver's");
        assert_eq!(f.name, "snapshot-7a1c");
        assert_eq!(f.id, 9912345678901234567);
        assert_eq!(f.size_bytes, 20 << 30);
        assert_eq!(f.created.unwrap().to_string(), "2026-03-01T18:00:00Z");
        assert_eq!(
            f.source_disk.as_deref(),
            Some("projects/p/regions/us-central1/disks/pvc-0f3c")
        );
        assert_eq!(f.cluster.as_deref(), Some("prod"));
        assert_eq!(
            f.created_for,
            GceCreatedFor {
                pv_name: Some("snapcontent-1".into()),
                pvc_name: Some("nightly".into()),
                pvc_namespace: Some("shop".into()),
            }
        );
        for description in [
            None,
            Some("my backup"),
            Some("{\"storage.gke.io/created-by\":\"other\"}"),
        ] {
            let s = snapshot(
                serde_json::json!({"name": "by-hand", "id": "1", "description": description}),
            );
            assert_eq!(snapshot_facts_of(s, None).unwrap(), None, "{description:?}");
        }
        let nameless = snapshot(
            serde_json::json!({"id": "2", "description": "{\"storage.gke.io/created-by\":\"pd.csi.storage.gke.io\"}"}),
        );
        assert_eq!(
            snapshot_facts_of(nameless, None).unwrap_err().category,
            ErrorCategory::Other
        );
    }

    #[test]
    fn source_disk_urls_become_handles() {
        assert_eq!(
            disk_handle("https://www.googleapis.com/compute/v1/projects/p/zones/z-a/disks/d")
                .as_deref(),
            Some("projects/p/zones/z-a/disks/d")
        );
        assert_eq!(
            disk_handle("projects/p/zones/z/disks/d").as_deref(),
            Some("projects/p/zones/z/disks/d")
        );
        assert_eq!(
            disk_handle("https://x/compute/v1/projects/p/global/images/i"),
            None
        );
        assert_eq!(disk_handle("d"), None);
    }
}
