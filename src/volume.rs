//! The parts of a PersistentVolume the operator reads. Pure: types only, no client.
//!
//! The reflector holds every PV of the cluster. k8s-openapi's `PersistentVolume` is about 3.5 KB
//! inline (its spec embeds every in-tree volume source), before any string is counted; at
//! 50,000 PVs that is most of the operator's memory. `Volume` is deserialized straight from the
//! API server's JSON — unknown fields are ignored — and keeps only what classification and the
//! VolumeLeftover need. `examples/scale.rs` prints the difference.

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// A PersistentVolume, as the operator reads it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Volume {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The parts of `spec` that are read.
    #[serde(default)]
    pub spec: Option<VolumeSpec>,
    /// `status`, whole (it is small).
    #[serde(default)]
    pub status: Option<PersistentVolumeStatus>,
    /// Why the volume is kept out of the report, decided from its labels when it is read (the
    /// labels themselves are not kept).
    #[serde(skip)]
    pub excluded: Option<crate::exclude::Exclusion>,
}

/// The parts of `PersistentVolumeSpec` that are read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSpec {
    /// `accessModes`.
    pub access_modes: Option<Vec<String>>,
    /// `capacity` (only `storage` is read; a map per PV would cost half a kilobyte).
    pub capacity: Option<Capacity>,
    /// `claimRef`.
    pub claim_ref: Option<ObjectReference>,
    /// `persistentVolumeReclaimPolicy`.
    pub persistent_volume_reclaim_policy: Option<String>,
    /// `storageClassName`.
    pub storage_class_name: Option<String>,
    /// `volumeMode`.
    pub volume_mode: Option<String>,
    /// `csi`.
    pub csi: Option<CsiSource>,
    /// `rbd` (in-tree Ceph RBD).
    pub rbd: Option<RbdSource>,
    /// `gcePersistentDisk`.
    pub gce_persistent_disk: Option<GcePersistentDisk>,
    /// `awsElasticBlockStore`.
    pub aws_elastic_block_store: Option<VolumeId>,
    /// `azureDisk`.
    pub azure_disk: Option<AzureDisk>,
    /// `cinder`.
    pub cinder: Option<VolumeId>,
    /// `vsphereVolume`.
    pub vsphere_volume: Option<VsphereVolume>,
    /// `nfs`.
    pub nfs: Option<NfsSource>,
    /// `hostPath`.
    pub host_path: Option<PathSource>,
    /// `local`.
    pub local: Option<PathSource>,
    /// Other in-tree sources: only their presence is read.
    #[serde(flatten)]
    pub other: OtherSources,
}

/// `spec.csi`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiSource {
    /// `driver`.
    #[serde(default)]
    pub driver: String,
    /// `volumeHandle`.
    #[serde(default)]
    pub volume_handle: String,
    /// `volumeAttributes`: only the Ceph pool and image are read.
    pub volume_attributes: Option<CsiAttributes>,
}

/// `spec.capacity`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Capacity {
    /// `storage`.
    pub storage: Option<Quantity>,
}

/// The `volumeAttributes` of a Ceph CSI volume that name its image.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CsiAttributes {
    /// `pool`.
    pub pool: Option<String>,
    /// `imageName`.
    pub image_name: Option<String>,
    /// `clusterID` (ceph-csi's id of the Ceph cluster).
    #[serde(rename = "clusterID")]
    pub cluster_id: Option<String>,
    /// `radosNamespace`.
    pub rados_namespace: Option<String>,
}

/// `spec.rbd`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RbdSource {
    /// `image`.
    #[serde(default)]
    pub image: String,
    /// `pool` (the API's default is `rbd`).
    pub pool: Option<String>,
}

/// `spec.gcePersistentDisk`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GcePersistentDisk {
    /// `pdName`.
    #[serde(default)]
    pub pd_name: String,
}

/// `spec.awsElasticBlockStore` and `spec.cinder`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeId {
    /// `volumeID`.
    #[serde(default, rename = "volumeID")]
    pub volume_id: String,
}

/// `spec.azureDisk`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AzureDisk {
    /// `diskName`.
    #[serde(default)]
    pub disk_name: String,
}

/// `spec.vsphereVolume`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VsphereVolume {
    /// `volumePath`.
    #[serde(default)]
    pub volume_path: String,
}

/// `spec.nfs`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NfsSource {
    /// `server`.
    #[serde(default)]
    pub server: String,
    /// `path`.
    #[serde(default)]
    pub path: String,
}

/// `spec.hostPath` and `spec.local`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PathSource {
    /// `path`.
    #[serde(default)]
    pub path: String,
}

/// In-tree sources whose contents are not reported; `Some` when present.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherSources {
    /// `azureFile`.
    pub azure_file: Option<IgnoredAny>,
    /// `cephfs`.
    pub cephfs: Option<IgnoredAny>,
    /// `fc`.
    pub fc: Option<IgnoredAny>,
    /// `flexVolume`.
    pub flex_volume: Option<IgnoredAny>,
    /// `flocker`.
    pub flocker: Option<IgnoredAny>,
    /// `glusterfs`.
    pub glusterfs: Option<IgnoredAny>,
    /// `iscsi`.
    pub iscsi: Option<IgnoredAny>,
    /// `photonPersistentDisk`.
    pub photon_persistent_disk: Option<IgnoredAny>,
    /// `portworxVolume`.
    pub portworx_volume: Option<IgnoredAny>,
    /// `quobyte`.
    pub quobyte: Option<IgnoredAny>,
    /// `scaleIO`.
    #[serde(rename = "scaleIO")]
    pub scale_io: Option<IgnoredAny>,
    /// `storageos`.
    pub storageos: Option<IgnoredAny>,
}

impl kube::Resource for Volume {
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

/// Reads a k8s-openapi PersistentVolume the way the API's JSON is read: through serde, so both
/// paths agree on every field. (A PV always serializes, and its JSON always reads as a `Volume`,
/// a subset of it; the default is unreachable.)
impl From<&PersistentVolume> for Volume {
    fn from(pv: &PersistentVolume) -> Self {
        serde_json::to_value(pv)
            .and_then(serde_json::from_value)
            .unwrap_or_default()
    }
}
