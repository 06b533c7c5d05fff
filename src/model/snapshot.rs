//! The parts of CSI VolumeSnapshotContents and VolumeSnapshots (`snapshot.storage.k8s.io/v1`)
//! the operator reads. Pure: types only, no client.
//!
//! As for PVs ([`crate::model::volume`]), the API's JSON is read as a wire object
//! ([`VolumeSnapshotContentObject`], [`VolumeSnapshotObject`]: what a watcher or a list
//! deserializes, a `kube::Resource`) and kept as a lean one ([`SnapshotContent`], [`Snapshot`]):
//! the fields the snapshot findings read, the repeating strings shared through
//! [`crate::model::intern`], and whether the object is kept out of the report, decided from its
//! labels when it is read (the labels are not kept). Field names follow the CRDs of
//! external-snapshotter client/v8 v8.7.0 (`tools/snapshot-crds.sh`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::model::intern::intern;
use crate::model::selector::{Requirement, Selector};
use crate::model::uid::Uid;

/// The API group of the snapshot kinds.
pub const GROUP: &str = "snapshot.storage.k8s.io";
/// The served version read.
pub const VERSION: &str = "v1";
/// `GROUP/VERSION`.
pub const API_VERSION: &str = "snapshot.storage.k8s.io/v1";

/// Set to `yes` on a content by the common snapshot-controller once its VolumeSnapshot is being
/// deleted (external-snapshotter `utils.AnnVolumeSnapshotBeingDeleted`). It stays after the
/// snapshot is gone (docs/snapshot-controller-notes.md), so it proves that the snapshot the
/// content names was deleted, rather than not yet seen.
pub const ANN_SNAPSHOT_BEING_DELETED: &str =
    "snapshot.storage.kubernetes.io/volumesnapshot-being-deleted";

/// The label Velero's CSI support puts on every VolumeSnapshotContent (and VolumeSnapshot) of a
/// backup (vmware-tanzu/velero `pkg/backup/actions/csi/volumesnapshot_action.go`, which patches it
/// onto the content; `velerov1api.BackupNameLabel`). Velero sets Retain on purpose and deletes
/// the content with its backup.
pub const VELERO_BACKUP_NAME_LABEL: &str = "velero.io/backup-name";

/// The annotations read; every other one is skipped by the parser, unallocated.
const READ_ANNOTATIONS: [&str; 1] = [ANN_SNAPSHOT_BEING_DELETED];

/// `spec.deletionPolicy` of a content (the CRD allows exactly these two).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub enum DeletionPolicy {
    /// The backend snapshot and the content are deleted with the VolumeSnapshot.
    Delete,
    /// Both stay when the VolumeSnapshot is deleted.
    Retain,
    /// A value the CRD does not allow (an older or hand-edited schema): decided as neither.
    #[serde(other)]
    Other,
}

impl DeletionPolicy {
    /// The value as the API writes it (`Other` as `""`).
    pub fn as_str(self) -> &'static str {
        match self {
            DeletionPolicy::Delete => "Delete",
            DeletionPolicy::Retain => "Retain",
            DeletionPolicy::Other => "",
        }
    }
}

// ---- Wire objects ----

/// The fields of `ObjectMeta` that are read, with only [`READ_ANNOTATIONS`] of the annotations.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaWire {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    labels: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
    annotations: Option<ReadAnnotations>,
}

/// The annotations of [`READ_ANNOTATIONS`]; the values of the others are skipped unread.
struct ReadAnnotations(BTreeMap<String, String>);

impl<'de> Deserialize<'de> for ReadAnnotations {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ReadAnnotations;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of annotations")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(key) = map.next_key::<String>()? {
                    if READ_ANNOTATIONS.contains(&&*key) {
                        kept.insert(key, map.next_value::<String>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ReadAnnotations(kept))
            }
        }
        d.deserialize_map(V)
    }
}

/// Reads `metadata` without `managedFields` and with only the annotations the decisions read
/// (use with `#[serde(deserialize_with = ...)]`).
fn snapshot_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let w = Option::<MetaWire>::deserialize(d)?;
    Ok(w.map(|w| ObjectMeta {
        name: w.name,
        namespace: w.namespace,
        uid: w.uid,
        resource_version: w.resource_version,
        creation_timestamp: w.creation_timestamp,
        deletion_timestamp: w.deletion_timestamp,
        finalizers: w.finalizers,
        labels: w.labels,
        owner_references: w.owner_references,
        annotations: w.annotations.map(|a| a.0).filter(|a| !a.is_empty()),
        ..ObjectMeta::default()
    })
    .unwrap_or_default())
}

/// A VolumeSnapshotContent as the API server sends it, read through serde.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VolumeSnapshotContentObject {
    /// Object metadata, without `managedFields` and with only the annotations read.
    #[serde(default, deserialize_with = "snapshot_meta")]
    pub(crate) metadata: ObjectMeta,
    /// The parts of `spec` that are read.
    #[serde(default)]
    pub(crate) spec: ContentSpec,
    /// The parts of `status` that are read (none until the driver's csi-snapshotter sidecar
    /// fills it).
    #[serde(default)]
    pub(crate) status: Option<ContentStatus>,
}

/// A VolumeSnapshot as the API server sends it, read through serde.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VolumeSnapshotObject {
    /// Object metadata, without `managedFields` and with only the annotations read.
    #[serde(default, deserialize_with = "snapshot_meta")]
    pub(crate) metadata: ObjectMeta,
    /// The parts of `spec` that are read.
    #[serde(default)]
    pub(crate) spec: SnapshotSpec,
    /// The parts of `status` that are read.
    #[serde(default)]
    pub(crate) status: Option<SnapshotStatus>,
}

/// `VolumeSnapshotContent.spec`, the parts read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContentSpec {
    /// `deletionPolicy` (required by the CRD).
    pub deletion_policy: Option<DeletionPolicy>,
    /// `driver`: the CSI driver (shared).
    pub driver: Option<Arc<str>>,
    /// `source`: exactly one of its handles is set (a CRD rule).
    #[serde(default)]
    pub source: ContentSource,
    /// `volumeSnapshotRef`: the VolumeSnapshot the content is (or is to be) bound to.
    #[serde(default)]
    pub volume_snapshot_ref: SnapshotRef,
    /// `volumeSnapshotClassName` (shared).
    pub volume_snapshot_class_name: Option<Arc<str>>,
    /// `sourceVolumeMode` (shared).
    pub source_volume_mode: Option<Arc<str>>,
}

/// `VolumeSnapshotContent.spec.source`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContentSource {
    /// `volumeHandle`: a dynamically made snapshot, of this CSI volume.
    pub volume_handle: Option<Box<str>>,
    /// `snapshotHandle`: a pre-provisioned snapshot, this backend snapshot.
    pub snapshot_handle: Option<Box<str>>,
}

/// `VolumeSnapshotContent.spec.volumeSnapshotRef` (`kind`, `apiVersion`, `fieldPath` and
/// `resourceVersion` are not read).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotRef {
    /// `namespace` (shared).
    pub namespace: Option<Arc<str>>,
    /// `name`.
    pub name: Option<Box<str>>,
    /// `uid`: empty until the snapshot-controller binds the content (a pre-provisioned
    /// content names its snapshot without one).
    pub uid: Option<Uid>,
}

/// `VolumeSnapshotContent.status`, the parts read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContentStatus {
    /// `snapshotHandle`: the backend snapshot (set by the sidecar; cleared once it is deleted).
    pub snapshot_handle: Option<Box<str>>,
    /// `restoreSize`, in bytes (an integer in this CRD).
    pub restore_size: Option<i64>,
    /// `readyToUse`.
    pub ready_to_use: Option<bool>,
    /// `creationTime`: when the backend cut the snapshot, in nanoseconds since the Unix epoch.
    pub creation_time: Option<i64>,
}

/// `VolumeSnapshot.spec`, the parts read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSpec {
    /// `source`: exactly one of its names is set (a CRD rule).
    #[serde(default)]
    pub source: SnapshotSource,
    /// `volumeSnapshotClassName` (shared).
    pub volume_snapshot_class_name: Option<Arc<str>>,
}

/// `VolumeSnapshot.spec.source`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotSource {
    /// `persistentVolumeClaimName`: a dynamic snapshot of this claim (same namespace).
    pub persistent_volume_claim_name: Option<Box<str>>,
    /// `volumeSnapshotContentName`: a pre-provisioned snapshot, this content.
    pub volume_snapshot_content_name: Option<Box<str>>,
}

/// `VolumeSnapshot.status`, the parts read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SnapshotStatus {
    /// `boundVolumeSnapshotContentName`: set once the snapshot is bound.
    pub bound_volume_snapshot_content_name: Option<Box<str>>,
    /// `restoreSize`: a quantity (int-or-string in this CRD), kept as written.
    #[serde(default, deserialize_with = "int_or_string")]
    pub restore_size: Option<Box<str>>,
    /// `readyToUse`.
    pub ready_to_use: Option<bool>,
}

/// An int-or-string field, as text.
fn int_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<str>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IntOrString {
        Int(i64),
        String(String),
    }
    Ok(Option::<IntOrString>::deserialize(d)
        .map_err(|_| de::Error::custom("expected an integer or a string"))?
        .map(|v| match v {
            IntOrString::Int(i) => i.to_string().into(),
            IntOrString::String(s) => s.into(),
        }))
}

/// The `kube::Resource` of a snapshot kind read through serde (no k8s-openapi type exists).
macro_rules! snapshot_resource {
    ($object:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $object {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                VERSION.into()
            }
            fn api_version(_: &()) -> Cow<'_, str> {
                API_VERSION.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

snapshot_resource!(
    VolumeSnapshotContentObject,
    "VolumeSnapshotContent",
    "volumesnapshotcontents",
    kube::core::ClusterResourceScope
);
snapshot_resource!(
    VolumeSnapshotObject,
    "VolumeSnapshot",
    "volumesnapshots",
    kube::core::NamespaceResourceScope
);

// ---- Exclusions ----

/// Why a snapshot object is kept out of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SnapshotExclusion {
    /// It carries `leftovers.dev/ignore: "true"` ([`crate::model::exclude::IGNORE_LABEL`]).
    IgnoreLabel,
    /// Its labels match the backup-tool selector (by default Velero's).
    Selector,
}

/// Which snapshot objects are never reported: those a backup tool made, which keep their
/// contents on purpose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotExclusions {
    /// Objects whose labels match are excluded (`None`: no selector).
    pub selector: Option<Selector>,
}

impl Default for SnapshotExclusions {
    /// Velero's backups: the label [`VELERO_BACKUP_NAME_LABEL`] exists.
    fn default() -> Self {
        SnapshotExclusions {
            selector: Some(Selector(vec![Requirement::Exists(
                VELERO_BACKUP_NAME_LABEL.into(),
            )])),
        }
    }
}

impl SnapshotExclusions {
    /// Why an object with these labels is excluded, if it is.
    pub(crate) fn why(
        &self,
        labels: Option<&BTreeMap<String, String>>,
    ) -> Option<SnapshotExclusion> {
        if labels
            .and_then(|l| l.get(crate::model::exclude::IGNORE_LABEL))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Some(SnapshotExclusion::IgnoreLabel);
        }
        if self.selector.as_ref().is_some_and(|s| s.matches(labels)) {
            return Some(SnapshotExclusion::Selector);
        }
        None
    }
}

// ---- Lean forms kept in the stores ----

/// The metadata of a snapshot object that is read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotMeta {
    /// `name`.
    pub name: Box<str>,
    /// `namespace` (shared; `None` for a content, which is cluster-scoped).
    pub namespace: Option<Arc<str>>,
    /// `uid` (16 bytes when canonical).
    pub uid: Option<Uid>,
    /// `creationTimestamp`.
    pub creation_timestamp: Option<Time>,
    /// `deletionTimestamp` (boxed: rarely set).
    pub deletion_timestamp: Option<Box<Time>>,
    /// The annotation [`ANN_SNAPSHOT_BEING_DELETED`] is present (on a content).
    pub snapshot_being_deleted: bool,
}

impl SnapshotMeta {
    fn of(m: ObjectMeta) -> SnapshotMeta {
        SnapshotMeta {
            name: m.name.unwrap_or_default().into(),
            namespace: m.namespace.as_deref().map(intern),
            uid: m.uid.as_deref().map(Uid::new),
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp.map(Box::new),
            snapshot_being_deleted: m
                .annotations
                .is_some_and(|a| a.contains_key(ANN_SNAPSHOT_BEING_DELETED)),
        }
    }
}

/// A VolumeSnapshotContent, as the operator keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SnapshotContent {
    /// The metadata that is read.
    pub metadata: SnapshotMeta,
    /// The parts of `spec` that are read.
    pub spec: ContentSpec,
    /// The parts of `status` that are read.
    pub status: Option<ContentStatus>,
    /// Why it is kept out of the report, decided from its labels when it is read.
    pub excluded: Option<SnapshotExclusion>,
}

/// A VolumeSnapshot, as the operator keeps it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The metadata that is read.
    pub metadata: SnapshotMeta,
    /// The parts of `spec` that are read.
    pub spec: SnapshotSpec,
    /// The parts of `status` that are read.
    pub status: Option<SnapshotStatus>,
    /// Why it is kept out of the report, decided from its labels when it is read.
    pub excluded: Option<SnapshotExclusion>,
}

/// Shares an optional repeating string.
fn share(s: &mut Option<Arc<str>>) {
    if let Some(s) = s {
        *s = intern(s);
    }
}

impl SnapshotContent {
    /// The content the store keeps of what the API server sent, marked with whether it is kept
    /// out of the report.
    pub fn read(
        o: VolumeSnapshotContentObject,
        exclusions: &SnapshotExclusions,
    ) -> SnapshotContent {
        let excluded = exclusions.why(o.metadata.labels.as_ref());
        let VolumeSnapshotContentObject {
            metadata,
            mut spec,
            status,
        } = o;
        share(&mut spec.driver);
        share(&mut spec.volume_snapshot_class_name);
        share(&mut spec.source_volume_mode);
        share(&mut spec.volume_snapshot_ref.namespace);
        SnapshotContent {
            metadata: SnapshotMeta::of(metadata),
            spec,
            status,
            excluded,
        }
    }
}

impl Snapshot {
    /// The snapshot the store keeps of what the API server sent, marked with whether it is kept
    /// out of the report.
    pub fn read(o: VolumeSnapshotObject, exclusions: &SnapshotExclusions) -> Snapshot {
        let excluded = exclusions.why(o.metadata.labels.as_ref());
        let VolumeSnapshotObject {
            metadata,
            mut spec,
            status,
        } = o;
        share(&mut spec.volume_snapshot_class_name);
        Snapshot {
            metadata: SnapshotMeta::of(metadata),
            spec,
            status,
            excluded,
        }
    }
}

/// The reflector `Lookup` of a lean snapshot type: keyed by name (and namespace); neither the
/// resourceVersion nor the uid is copied into the store's keys.
macro_rules! snapshot_lookup {
    ($lean:ty, $kind:literal, $plural:literal) => {
        impl kube::runtime::reflector::Lookup for $lean {
            type DynamicType = ();

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                GROUP.into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                VERSION.into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn name(&self) -> Option<Cow<'_, str>> {
                Some(Cow::Borrowed(&self.metadata.name))
            }
            fn namespace(&self) -> Option<Cow<'_, str>> {
                self.metadata.namespace.as_deref().map(Cow::Borrowed)
            }
            fn resource_version(&self) -> Option<Cow<'_, str>> {
                None
            }
            fn uid(&self) -> Option<Cow<'_, str>> {
                None
            }
        }
    };
}

snapshot_lookup!(
    SnapshotContent,
    "VolumeSnapshotContent",
    "volumesnapshotcontents"
);
snapshot_lookup!(Snapshot, "VolumeSnapshot", "volumesnapshots");
