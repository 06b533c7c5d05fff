//! The `VolumeLeftover` custom resource. Pure: types only, no client.
//!
//! Doc comments on these types become the CRD's `description`s (`kubectl explain volumeleftover`).
//! Every optional field is skipped when empty so that server-side apply never sends explicit
//! nulls and the same observation always serialises to the same bytes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Group of the VolumeLeftover API.
pub const GROUP: &str = "leftovers.dev";

/// A PersistentVolume that survived, lost or outlived its claim: one object per finding, named
/// after the PersistentVolume. Written by the volume-leftovers operator, which reports and never
/// decides. `spec.acknowledgement` belongs to people and ticketing controllers: the operator never
/// writes it.
// clippy reads the repeated `printcolumn(type_ = ...)` arguments as duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "leftovers.dev",
    version = "v1alpha1",
    kind = "VolumeLeftover",
    plural = "volumeleftovers",
    singular = "volumeleftover",
    shortname = "vl",
    category = "storage",
    status = "VolumeLeftoverStatus",
    doc = "A PersistentVolume that survived, lost or outlived its claim: one object per finding, named after the PersistentVolume. Written by the volume-leftovers operator, which reports and never decides: it does not patch, delete or create PersistentVolumes, claims or claimRefs. A human chooses whether to reuse the volume (clear its claimRef) or abandon it (delete the PV and the disk behind it), and may acknowledge the finding in spec.acknowledgement.",
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Reclaim",
        type_ = "string",
        json_path = ".status.reclaimPolicy"
    ),
    printcolumn(name = "Claim", type_ = "string", json_path = ".status.claim.ref"),
    printcolumn(
        name = "Claim-Missing",
        type_ = "string",
        json_path = ".status.claim.missing"
    ),
    printcolumn(
        name = "Class",
        type_ = "string",
        json_path = ".status.storageClass.name"
    ),
    printcolumn(name = "Capacity", type_ = "string", json_path = ".status.capacity"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Hints",
        type_ = "string",
        json_path = ".status.hints",
        priority = "1"
    ),
    printcolumn(
        name = "Ticket",
        type_ = "string",
        json_path = ".spec.acknowledgement.ticket",
        priority = "1"
    ),
    printcolumn(
        name = "Phase-Age",
        type_ = "date",
        json_path = ".status.phaseSince",
        priority = "1"
    ),
    printcolumn(
        name = "Handle",
        type_ = "string",
        json_path = ".status.source.volumeHandle",
        priority = "1"
    ),
    printcolumn(
        name = "Cost",
        type_ = "string",
        json_path = ".status.cost.display",
        priority = "1"
    ),
    printcolumn(
        name = "Message",
        type_ = "string",
        json_path = ".status.message",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeLeftoverSpec {
    /// Name of the PersistentVolume this finding is about (the same as this object's name).
    pub volume_name: String,
    /// UID of that PersistentVolume. A PV deleted and re-created under the same name is a
    /// different volume with a different UID.
    #[serde(rename = "volumeUID")]
    pub volume_uid: String,
    /// "Known, ticket OPS-123, keep it until March": written by a person or a ticketing
    /// controller (with its own field manager). The operator never writes, strips or changes it;
    /// `status.state` says whether it still covers the finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledgement: Option<Acknowledgement>,
}

/// An acknowledgement of a finding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Acknowledgement {
    /// Who acknowledged it (a person, a team, a controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why it is kept (for example "kept for the March migration").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The ticket that tracks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
    /// Until when the acknowledgement holds; after it, `status.state` is `Expired`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "until_any_date"
    )]
    pub until: Option<Time>,
}

/// Reads `until` as any date the API server accepts. The schema's `date-time` admits
/// `9999-12-31T23:59:59Z`, which a ticket bot writes to mean "keep it", but jiff (and so
/// k8s-openapi's `Time`) ends about a day earlier: decoding it failed, and one such object
/// failed the whole list of VolumeLeftovers, so the operator never synced. A date in year 9999
/// beyond that range reads as the latest instant there is, which never comes.
fn until_any_date<'de, D>(d: D) -> Result<Option<Time>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let Some(text) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    match text.parse::<jiff::Timestamp>() {
        Ok(t) => Ok(Some(Time(t))),
        Err(_) if text.starts_with("9999-") => Ok(Some(Time(jiff::Timestamp::MAX))),
        Err(e) => Err(serde::de::Error::custom(format!(
            "until {text:?} is not an RFC 3339 date-time: {e}"
        ))),
    }
}

/// Whether a finding is open or acknowledged.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum State {
    /// Not acknowledged.
    Open,
    /// Acknowledged (`spec.acknowledgement`), and the acknowledgement still covers it.
    Acknowledged,
    /// Acknowledged until a time that has passed.
    Expired,
    /// Acknowledged, but the finding changed since (another reason, or another volume of the
    /// same name): what was acknowledged is not what is reported now. Acknowledge it again to
    /// cover the new finding.
    Superseded,
}

impl State {
    /// Every state, in a fixed order.
    pub const ALL: [State; 4] = [
        State::Open,
        State::Acknowledged,
        State::Expired,
        State::Superseded,
    ];

    /// The state as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Open => "Open",
            State::Acknowledged => "Acknowledged",
            State::Expired => "Expired",
            State::Superseded => "Superseded",
        }
    }

    /// Whether the finding needs someone's attention.
    pub fn is_open(self) -> bool {
        self != State::Acknowledged
    }
}

/// A condition, as the Kubernetes API conventions define it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `Open` or `Acknowledged`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// A CamelCase word: the finding's reason for `Open`, the state for `Acknowledged`.
    pub reason: String,
    /// One sentence for people.
    pub message: String,
    /// When `status` last changed.
    pub last_transition_time: Time,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A condition's status, spelled as the Kubernetes API conventions spell it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// It does not.
    False,
    /// It cannot be determined.
    Unknown,
}

impl ConditionStatus {
    /// The status as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        }
    }
}

/// What an acknowledgement covered when the operator first saw it: the finding as it was then.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcknowledgedFinding {
    /// The acknowledgement, as it was read.
    pub acknowledgement: Acknowledgement,
    /// The reason the finding had then.
    pub reason: Reason,
    /// The volume the finding was about then.
    #[serde(rename = "volumeUID")]
    pub volume_uid: String,
}

/// What was observed about the PersistentVolume. Recomputed from the cluster's state on every
/// change; only `firstSeen` carries history.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeLeftoverStatus {
    /// Why this volume is reported (stable; safe to select on).
    pub reason: Reason,
    /// Open, Acknowledged, Expired or Superseded.
    #[serde(default = "open")]
    pub state: State,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The state as conditions, following the Kubernetes API conventions (for `kubectl wait`,
    /// kstatus and Argo CD): `Open` (True while the finding needs attention: Open, Expired,
    /// Superseded) and `Acknowledged` (True while an acknowledgement covers it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// What `spec.acknowledgement` covered when the operator first saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<AcknowledgedFinding>,
    /// One sentence for humans.
    pub message: String,
    /// Further facts that change what the finding means, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<Hint>,
    /// The PersistentVolume's `status.phase`.
    pub phase: String,
    /// When the PersistentVolume entered its phase (`status.lastPhaseTransitionTime`), when the
    /// API server recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_since: Option<Time>,
    /// The PersistentVolume's `status.message`, when it has one (set by the controller on a
    /// failed reclaim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase_message: Option<String>,
    /// The PersistentVolume's `spec.persistentVolumeReclaimPolicy` (Retain, Delete, Recycle).
    pub reclaim_policy: String,
    /// The StorageClass named by the PersistentVolume, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<StorageClassInfo>,
    /// The claim named by the PersistentVolume's `spec.claimRef`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimInfo>,
    /// The PersistentVolume's `spec.capacity.storage`, as written there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<String>,
    /// The same capacity in bytes (rounded up), for tools that add it up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<i64>,
    /// The provisioned size of the volume's disk in bytes, as the opt-in census last listed it
    /// (GCE and EBS list every disk's size): what the backend bills, and what the cost is
    /// estimated from when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_size_bytes: Option<i64>,
    /// The PersistentVolume's `spec.accessModes`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_modes: Vec<String>,
    /// The PersistentVolume's `spec.volumeMode` (Filesystem when unset).
    pub volume_mode: String,
    /// Where the data lives in the storage backend: the disk or image a human must find before
    /// deciding anything.
    pub source: VolumeSourceInfo,
    /// When the finding began: the PersistentVolume's phase transition time (plus the grace
    /// period) where the phase dates it, else when the operator first published it. Set once and
    /// kept while the finding lasts, across operator restarts.
    pub first_seen: Time,
    /// What the finding is about: the PersistentVolume, a backend image or disk without one, or
    /// both together.
    #[serde(default)]
    pub subject: Subject,
    /// When the PersistentVolume was deleted (for `VolumeDeleted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<Time>,
    /// What the storage backend's census saw of the image (census findings only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageInfo>,
    /// What the leftover costs, estimated from the operator's price table (`--price-table`):
    /// present only when its size is known and a row of the table prices it, never a guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostEstimate>,
    /// The CSI snapshot objects of a snapshot finding (`subject` SnapshotContent or Snapshot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotInfo>,
}

/// A snapshot finding's objects: the VolumeSnapshotContent, the VolumeSnapshot it is (or was)
/// bound to, and the backend snapshot. The keys `scan` prints for a snapshot finding say the
/// same.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotInfo {
    /// The VolumeSnapshotContent (cluster-scoped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The VolumeSnapshot, as `namespace/name`: the one the content names
    /// (`spec.volumeSnapshotRef`), or the finding's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// The uid of that VolumeSnapshot, as the content names it.
    #[serde(
        default,
        rename = "snapshotUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_uid: Option<String>,
    /// The uid of the VolumeSnapshot that has the name now (`SnapshotRecreated`).
    #[serde(
        default,
        rename = "currentUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub current_uid: Option<String>,
    /// The content's `spec.deletionPolicy` (Retain or Delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<String>,
    /// The backend snapshot (`status.snapshotHandle`, or a pre-provisioned content's
    /// `spec.source.snapshotHandle`): what a human must find before deciding anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_handle: Option<String>,
    /// The claim a VolumeSnapshot was taken of (`spec.source.persistentVolumeClaimName`, same
    /// namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_claim: Option<String>,
    /// The size a restore needs, in bytes (`status.restoreSize`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_size_bytes: Option<i64>,
    /// `spec.volumeSnapshotClassName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_class: Option<String>,
    /// `status.readyToUse`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,
    /// When the state began, where the objects date it (the content's or the snapshot's
    /// deletion, the content's creation); absent: since `firstSeen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
}

/// The estimated cost of a leftover, from the price table. The amounts are integers in the
/// currency's minor unit (cents for USD), so that they sort, add up and compare exactly.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CostEstimate {
    /// The currency, as an ISO 4217 code.
    pub currency: String,
    /// The estimated monthly cost (a month of 730 hours), in minor units.
    pub monthly_minor_units: i64,
    /// The estimated cost since `since`, counted in whole days up to `accruedThrough`, in minor
    /// units.
    pub accrued_minor_units: i64,
    /// When it began to cost as a leftover: the volume's phase transition, a tombstone's
    /// delete, a disk's last detach or creation (else `firstSeen`).
    pub since: Time,
    /// The end of the last whole day counted in `accruedMinorUnits` (it moves once a day).
    pub accrued_through: Time,
    /// The row of the price table that priced it (`storageClass premium-rwo`, `driver
    /// pd.csi.storage.gke.io type pd-ssd regional`).
    pub priced_by: String,
    /// Both amounts for people, as `kubectl get vl -o wide` shows them.
    pub display: String,
    /// Which size was priced: the disk's as the census listed it (what the backend bills), the
    /// PV's capacity (without the census), or a snapshot's restore size.
    #[serde(default)]
    pub size_basis: SizeBasis,
}

/// Which size a cost estimate priced.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SizeBasis {
    /// The PersistentVolume's capacity: the census does not list its disk.
    #[default]
    PvCapacity,
    /// The disk's provisioned size, as the census listed it: what the backend bills.
    DiskSize,
    /// A snapshot's restore size.
    RestoreSize,
}

impl SizeBasis {
    /// The basis as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            SizeBasis::PvCapacity => "PvCapacity",
            SizeBasis::DiskSize => "DiskSize",
            SizeBasis::RestoreSize => "RestoreSize",
        }
    }
}

/// The storage backend that holds a disk, by its short name: `ceph`, `gce`, `ebs`, `azure` (each
/// backend's own, [`crate::model::backend::Backend::name`]). Open: a backend added later writes
/// its own name, and an object naming a backend this version does not know still reads.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(transparent)]
pub struct DiskBackend(String);

impl DiskBackend {
    /// The backend named `name`.
    pub fn named(name: &str) -> DiskBackend {
        DiskBackend(name.to_string())
    }

    /// The backend as written in the object and in `scan`'s lines.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A disk (an RBD image, a GCE persistent disk, an EBS volume) or backend snapshot as the census
/// saw it, or, for a volume whose disk is gone, where the census looked for it. Where it lives is
/// said in the same fields for every backend (`backend`, `account`, `region`, `zone`); the Ceph
/// fields (`clusterID`, `pool`, `radosNamespace`) are filled only for Ceph. Objects written by
/// versions before 0.2 hold a cloud disk's project or account in `clusterID` and its zone or
/// region in `pool`; they are still read so.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    /// The backend that holds it (`ceph`, `gce`, `ebs`, `azure`). Absent on objects written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<DiskBackend>,
    /// The GCE project, the AWS account (as configured for the census; absent when the
    /// configuration names none) or the Azure subscription it lives in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Azure only: the resource group (lower-cased, as Azure compares it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_group: Option<String>,
    /// Its region: an EBS volume's or snapshot's, a regional GCE disk's, a zonal GCE disk's zone's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Its zone: a zonal GCE disk's, an EBS volume's availability zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The labels (GCE) or tags (EBS) that attribute it: the ones naming the cluster and the
    /// PersistentVolume, claim or snapshot it was created for, as the backend holds them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Ceph only: ceph-csi's cluster id of the Ceph cluster (as configured for the census).
    #[serde(default, rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Ceph only: the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The RADOS namespace, when not the default one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rados_namespace: Option<String>,
    /// Its name (an RBD image's, a GCE disk's or snapshot's; an EBS volume's or snapshot's id).
    pub name: String,
    /// Its id (an RBD image's id, a GCE disk's number; an EBS id again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Provisioned size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// When it was created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<Time>,
    /// Addresses of the clients that have it open or mapped (sorted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watchers: Vec<String>,
    /// The owner ceph-csi recorded in the image's metadata, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ImageOwner>,
    /// The disk's type, where the backend has one (GCE `pd-balanced`, EBS `gp3`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
    /// A regional disk's replica zones (GCE), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replica_zones: Vec<String>,
    /// When it was last detached from an instance, where the backend records it (GCE).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_detached: Option<Time>,
}

/// The PersistentVolume, claim and cluster ceph-csi recorded on an image it provisioned.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageOwner {
    /// `csi.storage.k8s.io/pv/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_name: Option<String>,
    /// `csi.storage.k8s.io/pvc/namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_namespace: Option<String>,
    /// `csi.storage.k8s.io/pvc/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    /// `csi.ceph.com/cluster/name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
}

/// What a finding is about.
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Subject {
    /// A PersistentVolume (and what it says about its claim and its disk).
    #[default]
    Volume,
    /// A disk in the storage backend (an RBD image, a GCE persistent disk, an EBS volume) whose
    /// PersistentVolume is gone, or that no PersistentVolume names.
    Disk,
    /// A PersistentVolume and its disk together (for example, the disk it names is gone).
    VolumeAndDisk,
    /// A CSI VolumeSnapshotContent (and the backend snapshot it names).
    SnapshotContent,
    /// A CSI VolumeSnapshot.
    Snapshot,
    /// A snapshot in the storage backend (a GCE snapshot, an EBS snapshot) that no
    /// VolumeSnapshotContent names.
    BackendSnapshot,
}

impl Subject {
    /// Every subject, in a fixed order.
    pub const ALL: [Subject; 6] = [
        Subject::Volume,
        Subject::Disk,
        Subject::VolumeAndDisk,
        Subject::SnapshotContent,
        Subject::Snapshot,
        Subject::BackendSnapshot,
    ];

    /// The subject as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            Subject::Volume => "Volume",
            Subject::Disk => "Disk",
            Subject::VolumeAndDisk => "VolumeAndDisk",
            Subject::SnapshotContent => "SnapshotContent",
            Subject::Snapshot => "Snapshot",
            Subject::BackendSnapshot => "BackendSnapshot",
        }
    }
}

impl Vocabulary for Subject {
    const WHAT: &'static str = "subject";
    const ALL: &'static [Self] = &Subject::ALL;
    const OLD: &'static [(&'static str, Self)] = &[
        ("Image", Subject::Disk),
        ("VolumeAndImage", Subject::VolumeAndDisk),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

fn open() -> State {
    State::Open
}

/// Why a volume is reported.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// Released; no claim of the claimRef's namespace and name exists. The volume that survived
    /// the claim: expected after deleting the claim of a Retain volume.
    ClaimDeleted,
    /// Released; a claim with the claimRef's namespace and name exists but has another UID (see
    /// `claim.currentUID`). Names are not identities: that new claim cannot bind this volume
    /// while the claimRef names the old UID.
    ClaimRecreated,
    /// Released, yet the claim with the claimRef's UID still exists (its deletion has not
    /// completed, for example it is terminating). Published only after the grace period: the PV
    /// controller releases a volume only once its claim is gone, so this is normally a moment
    /// between two watch streams.
    ClaimStillPresent,
    /// Released, but claims cannot be read (forbidden): whether its claim still exists is
    /// unknown. A 403 is not a 404.
    ClaimUnknown,
    /// Released or Failed with a claimRef that does not identify a claim: it lacks a namespace or
    /// a name, or names a kind other than PersistentVolumeClaim (see the hints).
    ClaimRefInvalid,
    /// Released with no claimRef at all: half-patched by hand. Published only after the grace
    /// period, because clearing the claimRef is also the documented way to reuse a volume, which
    /// makes it Released without a claimRef for the moment before it turns Available.
    ReleasedWithoutClaim,
    /// Bound, but the claim it names is gone or has another UID, for longer than the grace
    /// period (the delete grace when its reclaim policy is Delete). Should never last: a
    /// controller is stuck or the volume was tampered with.
    BoundClaimMissing,
    /// Available (or Pending, or in a phase Kubernetes does not define) with a claimRef naming a
    /// claim that does not exist, for longer than the grace period: typically pre-bound by the
    /// "reuse" patch for a claim that never came. The volume waits for it forever.
    PreboundClaimMissing,
    /// Phase Failed: the reclaim (recycle or delete) of the volume failed.
    ReclaimFailed,
    /// Bound, and its claim asks for more than it has (`spec.resources.requests.storage` above
    /// `status.capacity.storage`) for longer than the expansion grace period: the expansion
    /// stopped. `status.claim.expansion` says at which step (`stoppedAt`), with the claim's
    /// resize status and conditions. A claim whose request was lowered back to its capacity, or
    /// that got more than it asked (a backend rounding up), is not a finding.
    ExpansionStuck,
    /// The disk the PersistentVolume names (a GCE persistent disk or an EBS volume the opt-in
    /// census lists) has another size than the PV's capacity, compared at the backend's
    /// granularity, for longer than the expansion grace period: larger, it bills more than the
    /// cluster shows (grown in the backend's console, or an expansion that stopped before the
    /// PV); smaller, the PV says more than the disk has. Only for a volume that is otherwise no
    /// finding: on any other finding the same fact is the hint `DiskSizeDiffers`.
    DiskSizeMismatch,
    /// The PersistentVolume was deleted, but its reclaim policy was Retain (or its delete had
    /// failed), so the disk behind it was not: this object is the last record of which disk
    /// belonged to which claim. It stays until the storage backend's census shows the disk is
    /// gone, `--tombstone-ttl` passes, or a person acknowledges it (where the census covers the
    /// disk, an acknowledged tombstone stays until the disk is gone).
    VolumeDeleted,
    /// A disk in a censused scope (an RBD image in a Ceph pool, a GCE persistent disk in a
    /// project's zone or region, an EBS volume in an account's region; `status.source.type` says
    /// which) that no PersistentVolume or tombstone names, older than the census's image grace
    /// period and not in the RBD trash (opt-in census). Attached or mapped somewhere: hint
    /// `DiskInUse`; nothing attributing it to this cluster: hint `OwnerUnknown`. Earlier versions
    /// called it `ImageWithoutVolume`.
    DiskWithoutVolume,
    /// The disk the PersistentVolume names is gone from its backend (seen missing by two censuses
    /// in a row, the volume older than both). On a Bound volume: data loss. Earlier versions
    /// called it `VolumeWithoutImage`.
    VolumeWithoutDisk,
    /// A VolumeSnapshotContent with `deletionPolicy: Retain` whose VolumeSnapshot (by namespace,
    /// name and uid) no longer exists: the backend snapshot stays, billed, and nothing will
    /// delete it (see `status.snapshot`).
    SnapshotDeleted,
    /// A Retain VolumeSnapshotContent whose VolumeSnapshot's name now belongs to another snapshot
    /// (`status.snapshot.currentUID`): the controller never rebinds it, the new snapshot is
    /// refused, and the content is as orphaned as with `SnapshotDeleted`.
    SnapshotRecreated,
    /// A VolumeSnapshotContent with `deletionPolicy: Delete` whose VolumeSnapshot is deleted,
    /// still here after the delete grace period: the backend delete hung.
    SnapshotDeleteStuck,
    /// A pre-provisioned VolumeSnapshotContent (`spec.source.snapshotHandle`) that no
    /// VolumeSnapshot bound within the grace period of its creation, and that the VolumeSnapshot
    /// it names does not name back (`spec.source.volumeSnapshotContentName`): such a pair is
    /// being bound, however long the snapshot-controller takes.
    ContentNeverBound,
    /// A bound VolumeSnapshot whose VolumeSnapshotContent no longer exists: restores from it
    /// fail, and the backend snapshot may remain.
    SnapshotContentMissing,
    /// A Retain VolumeSnapshotContent was deleted: the backend snapshot was kept, and this object
    /// is its last record (a tombstone, like `VolumeDeleted`).
    ContentDeleted,
    /// A snapshot in a censused scope (a GCE project's snapshots that the PD CSI driver made, an
    /// EBS region's snapshots tagged `CSIVolumeSnapshotName`; opt-in per section with
    /// `snapshots: true`) that no VolumeSnapshotContent or `ContentDeleted` tombstone names,
    /// older than the census's image grace period. Nothing attributing it to this cluster: hint
    /// `OwnerUnknown`. The snapshot's counterpart of `DiskWithoutVolume`.
    SnapshotWithoutContent,
}

impl Reason {
    /// Every reason, in a fixed order (metrics, documentation).
    pub const ALL: [Reason; 21] = [
        Reason::ClaimDeleted,
        Reason::ClaimRecreated,
        Reason::ClaimStillPresent,
        Reason::ClaimUnknown,
        Reason::ClaimRefInvalid,
        Reason::ReleasedWithoutClaim,
        Reason::BoundClaimMissing,
        Reason::PreboundClaimMissing,
        Reason::ReclaimFailed,
        Reason::ExpansionStuck,
        Reason::DiskSizeMismatch,
        Reason::VolumeDeleted,
        Reason::DiskWithoutVolume,
        Reason::VolumeWithoutDisk,
        Reason::SnapshotDeleted,
        Reason::SnapshotRecreated,
        Reason::SnapshotDeleteStuck,
        Reason::ContentNeverBound,
        Reason::SnapshotContentMissing,
        Reason::ContentDeleted,
        Reason::SnapshotWithoutContent,
    ];

    /// The reason as written in the object and its labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::ClaimDeleted => "ClaimDeleted",
            Reason::ClaimRecreated => "ClaimRecreated",
            Reason::ClaimStillPresent => "ClaimStillPresent",
            Reason::ClaimUnknown => "ClaimUnknown",
            Reason::ClaimRefInvalid => "ClaimRefInvalid",
            Reason::ReleasedWithoutClaim => "ReleasedWithoutClaim",
            Reason::BoundClaimMissing => "BoundClaimMissing",
            Reason::PreboundClaimMissing => "PreboundClaimMissing",
            Reason::ReclaimFailed => "ReclaimFailed",
            Reason::ExpansionStuck => "ExpansionStuck",
            Reason::DiskSizeMismatch => "DiskSizeMismatch",
            Reason::VolumeDeleted => "VolumeDeleted",
            Reason::DiskWithoutVolume => "DiskWithoutVolume",
            Reason::VolumeWithoutDisk => "VolumeWithoutDisk",
            Reason::SnapshotDeleted => "SnapshotDeleted",
            Reason::SnapshotRecreated => "SnapshotRecreated",
            Reason::SnapshotDeleteStuck => "SnapshotDeleteStuck",
            Reason::ContentNeverBound => "ContentNeverBound",
            Reason::SnapshotContentMissing => "SnapshotContentMissing",
            Reason::ContentDeleted => "ContentDeleted",
            Reason::SnapshotWithoutContent => "SnapshotWithoutContent",
        }
    }

    /// Whether the finding is about a CSI snapshot object (a VolumeSnapshotContent or a
    /// VolumeSnapshot) rather than a volume or a disk.
    pub fn is_snapshot(self) -> bool {
        matches!(
            self,
            Reason::SnapshotDeleted
                | Reason::SnapshotRecreated
                | Reason::SnapshotDeleteStuck
                | Reason::ContentNeverBound
                | Reason::SnapshotContentMissing
                | Reason::ContentDeleted
        )
    }
}

/// A fact that changes what a finding means.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hint {
    /// The volume's reclaim policy is Delete, yet it has stayed Released or Failed for longer
    /// than the grace period: the provisioner's delete hung or failed. Not a Retain success; the
    /// backend disk may be half-deleted.
    ReclaimPolicyDelete,
    /// The volume's reclaim policy differs from its StorageClass's: one of them was changed
    /// after provisioning. Both are reported; neither is fixed.
    ReclaimPolicyMismatch,
    /// The StorageClass the volume names no longer exists.
    StorageClassMissing,
    /// StorageClasses could not be read (forbidden): the class's policy and existence are unknown.
    StorageClassUnknown,
    /// The PersistentVolume is being deleted (deletionTimestamp set) and is held by finalizers.
    VolumeTerminating,
    /// The claimRef names a kind other than PersistentVolumeClaim.
    ClaimRefNotAClaim,
    /// The claimRef lacks a namespace or a name, so no claim can be looked up.
    ClaimRefIncomplete,
    /// The volume's phase is missing or not one Kubernetes defines.
    PhaseUnknown,
    /// The disk is in use right now: an RBD image with watchers (open or mapped), a GCE disk
    /// with users, an attached EBS volume. Earlier versions called it `ImageInUse`.
    DiskInUse,
    /// Nothing on the disk attributes it to this cluster (ceph-csi's metadata, GCE labels or the
    /// CSI driver's description, EBS tags): it may belong to another Kubernetes cluster (or to
    /// none) sharing the pool, project or account. Check before deleting.
    OwnerUnknown,
    /// The RBD image is in the pool's trash: deleted, but restorable until it is purged. Earlier
    /// versions called it `ImageInTrash`.
    DiskInTrash,
    /// The disk's size (`diskSizeBytes`, as the census lists it) differs from the PV's capacity
    /// at the backend's granularity; the cost is estimated from the disk's size.
    DiskSizeDiffers,
}

impl Hint {
    /// Every hint, in a fixed order.
    pub const ALL: [Hint; 12] = [
        Hint::ReclaimPolicyDelete,
        Hint::ReclaimPolicyMismatch,
        Hint::StorageClassMissing,
        Hint::StorageClassUnknown,
        Hint::VolumeTerminating,
        Hint::ClaimRefNotAClaim,
        Hint::ClaimRefIncomplete,
        Hint::PhaseUnknown,
        Hint::DiskInUse,
        Hint::OwnerUnknown,
        Hint::DiskInTrash,
        Hint::DiskSizeDiffers,
    ];

    /// The hint as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            Hint::ReclaimPolicyDelete => "ReclaimPolicyDelete",
            Hint::ReclaimPolicyMismatch => "ReclaimPolicyMismatch",
            Hint::StorageClassMissing => "StorageClassMissing",
            Hint::StorageClassUnknown => "StorageClassUnknown",
            Hint::VolumeTerminating => "VolumeTerminating",
            Hint::ClaimRefNotAClaim => "ClaimRefNotAClaim",
            Hint::ClaimRefIncomplete => "ClaimRefIncomplete",
            Hint::PhaseUnknown => "PhaseUnknown",
            Hint::DiskInUse => "DiskInUse",
            Hint::OwnerUnknown => "OwnerUnknown",
            Hint::DiskInTrash => "DiskInTrash",
            Hint::DiskSizeDiffers => "DiskSizeDiffers",
        }
    }
}

impl Vocabulary for Reason {
    const WHAT: &'static str = "reason";
    const ALL: &'static [Self] = &Reason::ALL;
    const OLD: &'static [(&'static str, Self)] = &[
        ("ImageWithoutVolume", Reason::DiskWithoutVolume),
        ("VolumeWithoutImage", Reason::VolumeWithoutDisk),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

impl Vocabulary for Hint {
    const WHAT: &'static str = "hint";
    const ALL: &'static [Self] = &Hint::ALL;
    const OLD: &'static [(&'static str, Self)] = &[
        ("ImageInUse", Hint::DiskInUse),
        ("ImageInTrash", Hint::DiskInTrash),
    ];
    fn name(self) -> &'static str {
        self.as_str()
    }
}

/// The closed vocabularies of the status (reasons, hints, subjects): each is written under one
/// name, and read under it or under the name an earlier version wrote.
///
/// Until the cloud census, the disk reasons said "image" (`ImageWithoutVolume`), which is Ceph's
/// word; one vocabulary now says "disk" whichever backend found it. Objects written before keep
/// their old names until the operator rewrites them, so the old names still read (as the new
/// variant) and the CRD's schema still admits them; reading one is noted ([`noting_old_names`])
/// so that the operator rewrites that object once, in place (docs/reasons.md, "Names").
pub(crate) trait Vocabulary: Copy + Sized + 'static {
    /// What the names are of, for errors.
    const WHAT: &'static str;
    /// Every value.
    const ALL: &'static [Self];
    /// The names earlier versions wrote, and the value each now reads as.
    const OLD: &'static [(&'static str, Self)];
    /// The name written.
    fn name(self) -> &'static str;

    /// The value `text` names, noting an old name.
    fn read(text: &str) -> Option<Self> {
        if let Some(v) = Self::ALL.iter().find(|v| v.name() == text) {
            return Some(*v);
        }
        let (_, v) = Self::OLD.iter().find(|(old, _)| *old == text)?;
        OLD_NAME_READ.set(true);
        Some(*v)
    }

    /// Every name the schema admits: the current ones, then the old ones.
    fn admitted() -> Vec<&'static str> {
        let current = Self::ALL.iter().map(|v| v.name());
        current
            .chain(Self::OLD.iter().map(|(old, _)| *old))
            .collect()
    }
}

/// `Deserialize` (any admitted name) and `JsonSchema` (a string of the admitted names) for each
/// [`Vocabulary`]; `Serialize` is derived (the variant's name, which is its current name).
macro_rules! vocabulary_serde {
    ($($t:ty: $description:literal),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = std::borrow::Cow::<'de, str>::deserialize(d)?;
                <$t as Vocabulary>::read(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown {} {text:?}, expected one of {}",
                        <$t as Vocabulary>::WHAT,
                        <$t as Vocabulary>::admitted().join(", ")
                    ))
                })
            }
        }

        impl JsonSchema for $t {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($t).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "description": $description,
                    "type": "string",
                    "enum": <$t as Vocabulary>::admitted(),
                })
            }
        }
    )*};
}

// The descriptions are the types' first doc lines (a field's own doc replaces them).
vocabulary_serde!(
    Reason: "Why a volume is reported.",
    Hint: "A fact that changes what a finding means.",
    Subject: "What a finding is about."
);

thread_local! {
    /// Whether an old name was read since [`noting_old_names`] last began on this thread.
    static OLD_NAME_READ: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `read` (a deserialization, which runs on this thread from start to end) and says whether
/// it read an old name of a reason, hint or subject. serde gives a `Deserialize` impl nowhere to
/// put such a note but the value, which must not carry it (an old and a new name are the same
/// finding), hence the thread-local flag, set by [`Vocabulary::read`] and scoped here.
pub(crate) fn noting_old_names<T>(read: impl FnOnce() -> T) -> (T, bool) {
    let outer = OLD_NAME_READ.replace(false);
    let value = read();
    let seen = OLD_NAME_READ.replace(outer);
    if seen {
        OLD_NAME_READ.set(true);
    }
    (value, seen)
}

/// A three-valued answer: a 403 on claims makes "is the claim missing?" Unknown, never True.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum Tristate {
    /// Yes.
    True,
    /// No.
    False,
    /// Could not be determined (the objects could not be read, or the reference is incomplete).
    Unknown,
}

impl Tristate {
    /// `Some(bool)` when known.
    pub fn known(self) -> Option<bool> {
        match self {
            Tristate::True => Some(true),
            Tristate::False => Some(false),
            Tristate::Unknown => None,
        }
    }
}

impl From<bool> for Tristate {
    fn from(b: bool) -> Self {
        if b { Tristate::True } else { Tristate::False }
    }
}

/// The StorageClass a volume names.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageClassInfo {
    /// `spec.storageClassName` of the PersistentVolume.
    pub name: String,
    /// The class's `reclaimPolicy` (Delete when the class leaves it unset), when the class exists
    /// and could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reclaim_policy: Option<String>,
    /// Whether the class no longer exists.
    pub missing: Tristate,
    /// The class's `parameters.type`: the type of disk it provisions (`pd-balanced`, `gp3`),
    /// when the class exists, could be read and sets one.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
    /// The class's `parameters.replication-type` (GCE: `regional-pd` provisions regional disks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_type: Option<String>,
}

/// The claim named by the volume's `spec.claimRef`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimInfo {
    /// `namespace/name`, for display.
    #[serde(rename = "ref")]
    pub reference: String,
    /// `spec.claimRef.namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `spec.claimRef.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `spec.claimRef.uid`: the identity of the claim the volume was bound to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Whether no claim of the claimRef's namespace and name exists: the original tool's
    /// `claim_missing`, with the same meaning everywhere. False when one exists, even with
    /// another UID (then `reason` and `currentUID` say so), and when the claimRef lacks a
    /// namespace or name (nothing to look up). Unknown when claims could not be read: a 403 is
    /// not a 404.
    pub missing: Tristate,
    /// UID of the claim that now exists under the claimRef's namespace and name, when it is not
    /// the claim the volume names.
    #[serde(
        default,
        rename = "currentUID",
        skip_serializing_if = "Option::is_none"
    )]
    pub current_uid: Option<String>,
    /// The claim's expansion, when it asks for more than it has (`ExpansionStuck`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expansion: Option<ExpansionInfo>,
}

/// A claim's expansion that stopped: what it asks, has, and says about the resize.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpansionInfo {
    /// `spec.resources.requests.storage` of the claim, as written.
    pub requested: String,
    /// The same, in bytes.
    pub requested_bytes: i64,
    /// `status.capacity.storage` of the claim, as written.
    pub capacity: String,
    /// The same, in bytes.
    pub capacity_bytes: i64,
    /// `status.allocatedResources.storage`: the size the resizer set out to give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<String>,
    /// `status.allocatedResourceStatuses.storage` (`ControllerResizeInProgress`,
    /// `ControllerResizeInfeasible`, `NodeResizePending`, `NodeResizeInProgress`,
    /// `NodeResizeInfeasible`), as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize_status: Option<String>,
    /// Where the resize stopped, read from the resize status and the conditions.
    pub stopped_at: crate::model::expansion::ResizeStep,
    /// The claim's resize conditions that hold (`Resizing`, `FileSystemResizePending`,
    /// `ControllerResizeError`, `NodeResizeError`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ExpansionCondition>,
}

/// One of a claim's resize conditions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpansionCondition {
    /// The condition's type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Its message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Its `lastTransitionTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

impl ExpansionInfo {
    /// The published form of what a claim says about its expansion.
    pub fn of(e: &crate::model::expansion::Expansion) -> ExpansionInfo {
        ExpansionInfo {
            requested: e.requested.to_string(),
            requested_bytes: e.requested_bytes,
            capacity: e.capacity.to_string(),
            capacity_bytes: e.capacity_bytes,
            allocated: e.allocated.as_deref().map(str::to_string),
            resize_status: e.resize_status.as_deref().map(str::to_string),
            stopped_at: e.step,
            conditions: e
                .conditions
                .iter()
                .map(|c| ExpansionCondition {
                    type_: c.kind.to_string(),
                    message: c.message.as_deref().map(str::to_string),
                    last_transition_time: c.since.clone(),
                })
                .collect(),
        }
    }
}

/// Where the volume's data lives in the storage backend.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSourceInfo {
    /// The volume source type in the PersistentVolume spec: `csi`, `rbd`, `gcePersistentDisk`,
    /// `awsElasticBlockStore`, `azureDisk`, `cinder`, `nfs`, `hostPath`, `local`, ..., or `unknown`.
    #[serde(rename = "type")]
    pub kind: String,
    /// CSI driver name (`spec.csi.driver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// CSI volume handle (`spec.csi.volumeHandle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_handle: Option<String>,
    /// ceph-csi's cluster id (the CSI `clusterID` volume attribute).
    #[serde(default, rename = "clusterID", skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Ceph pool: the CSI `pool` volume attribute, or the in-tree RBD pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// RADOS namespace of the image (the CSI `radosNamespace` volume attribute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rados_namespace: Option<String>,
    /// Ceph RBD image: the CSI `imageName` volume attribute, or the in-tree RBD image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    /// Disk name or id of an in-tree cloud disk source (GCE PD name, AWS EBS volume id, Azure
    /// disk name, Cinder volume id, vSphere volume path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_name: Option<String>,
    /// An in-tree `azureDisk`'s `diskURI`: a managed disk's resource id
    /// (`/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/disks/NAME`).
    #[serde(default, rename = "diskURI", skip_serializing_if = "Option::is_none")]
    pub disk_uri: Option<String>,
    /// Path of an nfs (`server:path`), hostPath or local source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The zones the PersistentVolume's node affinity requires (`topology.kubernetes.io/zone`
    /// and the drivers' own zone keys), sorted: where a cloud disk lives (an in-tree GCE disk's
    /// zone or a regional disk's two, an EBS volume's availability zone). Set only for cloud
    /// disk sources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
}
