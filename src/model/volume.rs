//! The parts of a PersistentVolume the operator reads. Pure: types only, no client.
//!
//! The reflector holds every PV of the cluster. k8s-openapi's `PersistentVolume` is about 3.5 KB
//! inline (its spec embeds every in-tree volume source), before any string is counted; at
//! 50,000 PVs that is most of the operator's memory. The API's JSON is read as a
//! [`VolumeObject`] (unknown fields are ignored) and turned into a [`Volume`], which keeps only
//! what classification and the VolumeLeftover need: a lean metadata, the in-tree sources boxed
//! (a PV has at most one), and the strings that repeat across volumes (class, driver, pool,
//! policy, phase, access modes, claim namespace) shared through [`crate::model::intern`].
//! `examples/memory.rs` measures it store by store.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::model::intern::{intern, intern_list};
use crate::model::uid::Uid;

/// A PersistentVolume as the API server sends it, read through serde: what the watcher and the
/// lists deserialize before the store keeps the [`Volume`] made of it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VolumeObject {
    /// Standard object metadata, without `managedFields` and `annotations` (see
    /// [`crate::model::meta`]).
    #[serde(default, deserialize_with = "crate::model::meta::lean")]
    pub(crate) metadata: ObjectMeta,
    /// The parts of `spec` that are read.
    #[serde(default)]
    pub(crate) spec: Option<VolumeSpec>,
    /// The parts of `status` that are read.
    #[serde(default)]
    pub(crate) status: Option<VolumeStatus>,
}

/// The metadata of a PersistentVolume that is read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMeta {
    /// `name`: shared with the reverse index.
    pub name: Option<Arc<str>>,
    /// `uid` (16 bytes when canonical, see [`crate::model::uid`]).
    pub uid: Option<Uid>,
    /// `creationTimestamp`.
    pub(crate) creation_timestamp: Option<Time>,
    /// `deletionTimestamp` (boxed: rarely set).
    pub deletion_timestamp: Option<Box<Time>>,
    /// `finalizers` (a terminating volume's message names what holds it): the list shared with
    /// every volume that has the same one.
    pub finalizers: Option<Arc<[Arc<str>]>>,
}

impl VolumeMeta {
    fn of(m: ObjectMeta) -> VolumeMeta {
        VolumeMeta {
            name: m.name.map(Arc::from),
            uid: m.uid.as_deref().map(Uid::new),
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp.map(Box::new),
            finalizers: m
                .finalizers
                .filter(|f| !f.is_empty())
                .map(|f| intern_list(&f)),
        }
    }
}

/// The parts of `PersistentVolumeStatus` that are read.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStatus {
    /// `phase`.
    pub phase: Option<Arc<str>>,
    /// `message`.
    pub message: Option<Box<str>>,
    /// `lastPhaseTransitionTime`.
    pub last_phase_transition_time: Option<Time>,
}

/// A PersistentVolume, as the operator keeps it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Volume {
    /// The metadata that is read.
    #[serde(default)]
    pub metadata: VolumeMeta,
    /// The parts of `spec` that are read.
    #[serde(default)]
    pub spec: Option<VolumeSpec>,
    /// The parts of `status` that are read.
    #[serde(default)]
    pub status: Option<VolumeStatus>,
    /// Why the volume is kept out of the report, decided from its labels when it is read (the
    /// labels themselves are not kept).
    #[serde(skip)]
    pub excluded: Option<crate::model::exclude::Exclusion>,
}

/// The parts of `PersistentVolumeSpec` that are read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(from = "SpecWire")]
pub struct VolumeSpec {
    /// `accessModes`: the list shared with every volume that has the same one.
    pub access_modes: Option<Arc<[Arc<str>]>>,
    /// `capacity` (only `storage` is read; a map per PV would cost half a kilobyte).
    pub capacity: Option<Capacity>,
    /// `claimRef`.
    pub claim_ref: Option<ClaimRef>,
    /// `persistentVolumeReclaimPolicy`.
    pub persistent_volume_reclaim_policy: Option<Arc<str>>,
    /// `storageClassName`.
    pub storage_class_name: Option<Arc<str>>,
    /// `volumeMode`.
    pub volume_mode: Option<Arc<str>>,
    /// `csi`.
    pub csi: Option<CsiSource>,
    /// The in-tree sources, boxed together (`None` when the volume has none, as CSI volumes
    /// do): a PV has one source at most, and eleven empty options inline would cost more than
    /// the rest of the spec.
    pub(crate) in_tree: Option<Box<InTree>>,
    /// The zones its node affinity requires (keys [`crate::model::csi::ZONE_KEYS`], operator
    /// `In`), which tell a cloud disk's location when its source does not: the list shared
    /// with every volume that has the same one (interned), so a zone costs nothing per volume.
    pub(crate) zones: Option<Arc<[Arc<str>]>>,
}

impl VolumeSpec {
    /// The zones its node affinity requires (empty when it says none).
    pub(crate) fn zones(&self) -> Vec<&str> {
        self.zones
            .iter()
            .flat_map(|z| z.iter().map(|z| &**z))
            .collect()
    }
}

/// `PersistentVolumeSpec` as the API's JSON is read, before the in-tree sources are boxed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecWire {
    access_modes: Option<Vec<Box<str>>>,
    capacity: Option<Capacity>,
    claim_ref: Option<ClaimRef>,
    persistent_volume_reclaim_policy: Option<Arc<str>>,
    storage_class_name: Option<Arc<str>>,
    volume_mode: Option<Arc<str>>,
    csi: Option<CsiSource>,
    node_affinity: Option<NodeAffinityWire>,
    #[serde(flatten)]
    in_tree: InTree,
}

/// `spec.nodeAffinity`, as far as zones are read.
#[derive(Deserialize)]
struct NodeAffinityWire {
    required: Option<NodeSelectorWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSelectorWire {
    #[serde(default)]
    node_selector_terms: Vec<NodeSelectorTermWire>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct NodeSelectorTermWire {
    #[serde(default)]
    match_expressions: Vec<NodeSelectorRequirementWire>,
}

#[derive(Deserialize)]
struct NodeSelectorRequirementWire {
    key: Box<str>,
    operator: Box<str>,
    #[serde(default)]
    values: Vec<Box<str>>,
}

impl SpecWire {
    /// The zones the node affinity requires, sorted, without repeats.
    fn zones(&self) -> Vec<&str> {
        let mut zones: Vec<&str> = self
            .node_affinity
            .iter()
            .flat_map(|a| a.required.iter())
            .flat_map(|r| r.node_selector_terms.iter())
            .flat_map(|t| t.match_expressions.iter())
            .filter(|e| &*e.operator == "In" && crate::model::csi::ZONE_KEYS.contains(&&*e.key))
            .flat_map(|e| e.values.iter().map(|v| &**v))
            .collect();
        zones.sort_unstable();
        zones.dedup();
        zones
    }
}

impl From<SpecWire> for VolumeSpec {
    fn from(w: SpecWire) -> Self {
        let zones = Some(w.zones())
            .filter(|z| !z.is_empty())
            .map(|z| intern_list(&z));
        VolumeSpec {
            access_modes: w.access_modes.map(|m| intern_list(&m)),
            capacity: w.capacity,
            claim_ref: w.claim_ref,
            persistent_volume_reclaim_policy: w.persistent_volume_reclaim_policy,
            storage_class_name: w.storage_class_name,
            volume_mode: w.volume_mode,
            csi: w.csi,
            in_tree: (!w.in_tree.is_empty()).then(|| Box::new(w.in_tree)),
            zones,
        }
    }
}

/// The in-tree volume sources that are read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InTree {
    /// `rbd` (in-tree Ceph RBD).
    pub(crate) rbd: Option<RbdSource>,
    /// `gcePersistentDisk`.
    pub(crate) gce_persistent_disk: Option<GcePersistentDisk>,
    /// `awsElasticBlockStore`.
    pub(crate) aws_elastic_block_store: Option<VolumeId>,
    /// `azureDisk`.
    pub(crate) azure_disk: Option<AzureDisk>,
    /// `cinder`.
    pub(crate) cinder: Option<VolumeId>,
    /// `vsphereVolume`.
    pub(crate) vsphere_volume: Option<VsphereVolume>,
    /// `nfs`.
    pub(crate) nfs: Option<NfsSource>,
    /// `hostPath`.
    pub(crate) host_path: Option<PathSource>,
    /// `local`.
    pub(crate) local: Option<PathSource>,
    /// Other in-tree sources: only their presence is read.
    #[serde(flatten)]
    pub(crate) other: OtherSources,
}

impl InTree {
    fn is_empty(&self) -> bool {
        let o = &self.other;
        self.rbd.is_none()
            && self.gce_persistent_disk.is_none()
            && self.aws_elastic_block_store.is_none()
            && self.azure_disk.is_none()
            && self.cinder.is_none()
            && self.vsphere_volume.is_none()
            && self.nfs.is_none()
            && self.host_path.is_none()
            && self.local.is_none()
            && [
                o.azure_file.is_none(),
                o.cephfs.is_none(),
                o.fc.is_none(),
                o.flex_volume.is_none(),
                o.flocker.is_none(),
                o.glusterfs.is_none(),
                o.iscsi.is_none(),
                o.photon_persistent_disk.is_none(),
                o.portworx_volume.is_none(),
                o.quobyte.is_none(),
                o.scale_io.is_none(),
                o.storageos.is_none(),
            ]
            .iter()
            .all(|none| *none)
    }
}

/// `spec.claimRef`: the reference to the claim (`fieldPath` and `resourceVersion` are not read).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    /// `kind`.
    pub kind: Option<Arc<str>>,
    /// `namespace`.
    pub namespace: Option<Arc<str>>,
    /// `name` (shared with the reverse index).
    pub name: Option<Arc<str>>,
    /// `uid` (16 bytes when canonical, see [`crate::model::uid`]).
    pub uid: Option<Uid>,
}

/// `spec.csi`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiSource {
    /// `driver`.
    #[serde(default)]
    pub driver: Arc<str>,
    /// `volumeHandle`.
    #[serde(default)]
    pub volume_handle: Box<str>,
    /// `volumeAttributes`: only the Ceph pool and image are read.
    pub volume_attributes: Option<Box<CsiAttributes>>,
}

/// `spec.capacity`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Capacity {
    /// `storage`, as written (a quantity).
    pub storage: Option<Arc<str>>,
}

/// The `volumeAttributes` of a Ceph CSI volume that name its image.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiAttributes {
    /// `pool`.
    pub pool: Option<Arc<str>>,
    /// `imageName`.
    pub image_name: Option<String>,
    /// `clusterID` (ceph-csi's id of the Ceph cluster).
    #[serde(rename = "clusterID")]
    pub(crate) cluster_id: Option<Arc<str>>,
    /// `radosNamespace`.
    pub(crate) rados_namespace: Option<Arc<str>>,
}

/// `spec.rbd`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct RbdSource {
    /// `image`.
    #[serde(default)]
    pub(crate) image: String,
    /// `pool` (the API's default is `rbd`).
    pub(crate) pool: Option<String>,
}

/// `spec.gcePersistentDisk`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GcePersistentDisk {
    /// `pdName`.
    #[serde(default)]
    pub(crate) pd_name: String,
}

/// `spec.awsElasticBlockStore` and `spec.cinder`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VolumeId {
    /// `volumeID`.
    #[serde(default, rename = "volumeID")]
    pub(crate) volume_id: String,
}

/// `spec.azureDisk`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AzureDisk {
    /// `diskName`.
    #[serde(default)]
    pub(crate) disk_name: String,
    /// `diskURI`: a managed disk's resource id.
    #[serde(default, rename = "diskURI")]
    pub(crate) disk_uri: String,
}

/// `spec.vsphereVolume`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VsphereVolume {
    /// `volumePath`.
    #[serde(default)]
    pub(crate) volume_path: String,
}

/// `spec.nfs`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct NfsSource {
    /// `server`.
    #[serde(default)]
    pub(crate) server: String,
    /// `path`.
    #[serde(default)]
    pub(crate) path: String,
}

/// `spec.hostPath` and `spec.local`.
#[derive(Clone, Debug, Default, Deserialize)]
pub(crate) struct PathSource {
    /// `path`.
    #[serde(default)]
    pub(crate) path: String,
}

/// In-tree sources whose contents are not reported; `Some` when present.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OtherSources {
    /// `azureFile`.
    pub(crate) azure_file: Option<IgnoredAny>,
    /// `cephfs`.
    pub(crate) cephfs: Option<IgnoredAny>,
    /// `fc`.
    pub(crate) fc: Option<IgnoredAny>,
    /// `flexVolume`.
    pub(crate) flex_volume: Option<IgnoredAny>,
    /// `flocker`.
    pub(crate) flocker: Option<IgnoredAny>,
    /// `glusterfs`.
    pub(crate) glusterfs: Option<IgnoredAny>,
    /// `iscsi`.
    pub(crate) iscsi: Option<IgnoredAny>,
    /// `photonPersistentDisk`.
    pub(crate) photon_persistent_disk: Option<IgnoredAny>,
    /// `portworxVolume`.
    pub(crate) portworx_volume: Option<IgnoredAny>,
    /// `quobyte`.
    pub(crate) quobyte: Option<IgnoredAny>,
    /// `scaleIO`.
    #[serde(rename = "scaleIO")]
    pub(crate) scale_io: Option<IgnoredAny>,
    /// `storageos`.
    pub(crate) storageos: Option<IgnoredAny>,
}

impl kube::Resource for VolumeObject {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PersistentVolume".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "persistentvolumes".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl kube::runtime::reflector::Lookup for Volume {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "PersistentVolume".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "persistentvolumes".into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        self.metadata.name.as_deref().map(Cow::Borrowed)
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }
    // Neither is needed to key the store, so neither is copied into its keys.
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

impl Volume {
    /// The volume the store keeps of what the API server sent, marked with whether it is kept
    /// out of the report (decided from its labels and class, which are not kept).
    pub fn read(o: VolumeObject, exclusions: &crate::model::exclude::Exclusions) -> Volume {
        let class = o
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref());
        let excluded = exclusions.why(o.metadata.labels.as_ref(), class);
        let mut v = Volume::from(o);
        v.excluded = excluded;
        v
    }

    /// `metadata.name` (empty when unset).
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The strings that repeat across volumes, shared (the lists of access modes and finalizers
    /// are shared as they are read: [`VolumeMeta::of`], `From<SpecWire>`).
    fn share(&mut self) {
        let share = |s: &mut Arc<str>| *s = intern(s);
        let share_opt = |s: &mut Option<Arc<str>>| {
            if let Some(s) = s {
                *s = intern(s);
            }
        };
        if let Some(spec) = self.spec.as_mut() {
            share_opt(&mut spec.persistent_volume_reclaim_policy);
            share_opt(&mut spec.storage_class_name);
            share_opt(&mut spec.volume_mode);
            if let Some(r) = spec.claim_ref.as_mut() {
                share_opt(&mut r.kind);
                share_opt(&mut r.namespace);
            }
            if let Some(csi) = spec.csi.as_mut() {
                share(&mut csi.driver);
                if let Some(a) = csi.volume_attributes.as_mut() {
                    share_opt(&mut a.pool);
                    share_opt(&mut a.cluster_id);
                    share_opt(&mut a.rados_namespace);
                }
            }
            if let Some(c) = spec.capacity.as_mut() {
                share_opt(&mut c.storage);
            }
        }
        if let Some(status) = self.status.as_mut() {
            share_opt(&mut status.phase);
        }
    }
}

/// The lean form of what the API server sent (its labels are read before: see
/// `controller::mark_and_strip`).
impl From<VolumeObject> for Volume {
    fn from(o: VolumeObject) -> Self {
        let mut v = Volume {
            metadata: VolumeMeta::of(o.metadata),
            spec: o.spec,
            status: o.status,
            excluded: None,
        };
        v.share();
        v
    }
}

/// Reads a k8s-openapi PersistentVolume the way the API's JSON is read: through serde, so both
/// paths agree on every field. (A PV always serializes, and its JSON always reads as a
/// `VolumeObject`, a subset of it; the default is unreachable.)
impl From<&PersistentVolume> for Volume {
    fn from(pv: &PersistentVolume) -> Self {
        serde_json::to_value(pv)
            .and_then(serde_json::from_value::<VolumeObject>)
            .unwrap_or_default()
            .into()
    }
}
