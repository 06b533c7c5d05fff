//! What the census can say about the image (or disk) a volume names, and the keys of what it
//! censuses: a [`Scope`] per listing (a Ceph pool, a GCE zone or region of a project, an AWS
//! region of an account) and a [`DiskRef`] per volume.

use std::fmt;

/// What the census says about a volume's image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageFound {
    /// The volume's image is not in a censused pool (or the volume names no RBD image).
    NotCensused,
    /// Cannot be said now: the pool's census failed or has not run, or the image was missed
    /// once and awaits the next census.
    Unknown,
    /// The image exists; this many watchers have it open.
    Present {
        /// Number of watchers.
        watchers: usize,
    },
    /// Two censuses in a row did not list it, and the volume is older than both.
    Missing {
        /// It is in the pool's trash (deleted, restorable until purged).
        in_trash: bool,
    },
}

/// One censused pool (one namespace of it) of one Ceph cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    /// ceph-csi's cluster id.
    pub(crate) cluster_id: String,
    /// The pool.
    pub(crate) pool: String,
    /// The RADOS namespace (empty: the default one).
    pub(crate) namespace: String,
}

impl PoolKey {
    /// A key.
    pub fn new(cluster_id: &str, pool: &str, namespace: Option<&str>) -> PoolKey {
        PoolKey {
            cluster_id: cluster_id.to_string(),
            pool: pool.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
        }
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.cluster_id, self.pool)
        } else {
            write!(f, "{}/{}/{}", self.cluster_id, self.pool, self.namespace)
        }
    }
}

/// What one census listing covers, for any backend: the unit that is trusted or Unknown as a
/// whole, and the key of the `census_*` series.
///
/// Its [`Display`](fmt::Display) is the series' label and the logs' `pool` field: a Ceph pool
/// keeps the `cluster/pool[/namespace]` it always had; a cloud scope says its backend first
/// (`gce:project/location`, `ebs:account/region` or `ebs:region`), so no cloud label can equal
/// a Ceph one.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// A pool (one namespace of it) of a Ceph cluster.
    Ceph(PoolKey),
    /// The disks of one zone (zonal disks) or one region (regional disks) of a GCE project: a
    /// disk's name is unique within its zone or region, not within the project.
    Gce {
        /// The project id.
        project: String,
        /// A zone (`us-central1-a`) or a region (`us-central1`).
        location: String,
    },
    /// A GCE project listed as a whole (an aggregated listing). It holds no disk itself: each
    /// disk is in its zone's or region's scope, admitted when a listing names it. Its census is
    /// the aggregated listing, complete or failed, so that a project whose listing never works
    /// (no credentials, a 403 on the project) has a `census_up` series and a log line before any
    /// of its zones is known.
    GceProject {
        /// The project id.
        project: String,
    },
    /// The snapshots of a GCE project that the PD CSI driver made (snapshots are global: one
    /// scope per project), censused when its section says `snapshots: true`.
    GceSnapshots {
        /// The project id.
        project: String,
    },
    /// The EBS volumes of one AWS region, of one account when several are censused.
    Ebs {
        /// The account id, when the configuration names one.
        account: Option<String>,
        /// The region (`eu-west-1`).
        region: String,
    },
    /// The EBS snapshots of one AWS region (of one account) that the EBS CSI driver made (tag
    /// `CSIVolumeSnapshotName`), censused when its section says `snapshots: true`.
    EbsSnapshots {
        /// The account id, when the configuration names one.
        account: Option<String>,
        /// The region (`eu-west-1`).
        region: String,
    },
    /// The managed disks of one resource group of an Azure subscription (AKS keeps a cluster's
    /// disks in its node resource group). Both are case-insensitive in Azure and kept
    /// lower-cased here, so that a volume handle naming them in any case finds its scope.
    Azure {
        /// The subscription id (a GUID), lower-cased.
        subscription: String,
        /// The resource group, lower-cased.
        resource_group: String,
    },
    /// The snapshots of one resource group of an Azure subscription that the Azure Disk CSI
    /// driver made, censused when its section says `snapshots: true`.
    AzureSnapshots {
        /// The subscription id, lower-cased.
        subscription: String,
        /// The resource group, lower-cased.
        resource_group: String,
    },
}

impl Scope {
    /// The backend's stable short name (`ceph`, `gce`, `ebs`).
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Scope::Ceph(_) => "ceph",
            Scope::Gce { .. } | Scope::GceProject { .. } | Scope::GceSnapshots { .. } => "gce",
            Scope::Ebs { .. } | Scope::EbsSnapshots { .. } => "ebs",
            Scope::Azure { .. } | Scope::AzureSnapshots { .. } => "azure",
        }
    }

    /// Whether it holds backend snapshots (named by VolumeSnapshotContents), not disks (named
    /// by PersistentVolumes).
    pub(crate) fn holds_snapshots(&self) -> bool {
        matches!(
            self,
            Scope::GceSnapshots { .. } | Scope::EbsSnapshots { .. } | Scope::AzureSnapshots { .. }
        )
    }
}

impl From<PoolKey> for Scope {
    fn from(k: PoolKey) -> Scope {
        Scope::Ceph(k)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Ceph(k) => k.fmt(f),
            Scope::Gce { project, location } => write!(f, "gce:{project}/{location}"),
            Scope::GceProject { project } => write!(f, "gce:{project}"),
            Scope::GceSnapshots { project } => write!(f, "gce:{project}/snapshots"),
            Scope::EbsSnapshots {
                account: Some(a),
                region,
            } => write!(f, "ebs:{a}/{region}/snapshots"),
            Scope::EbsSnapshots {
                account: None,
                region,
            } => write!(f, "ebs:{region}/snapshots"),
            Scope::Ebs {
                account: Some(a),
                region,
            } => write!(f, "ebs:{a}/{region}"),
            Scope::Ebs {
                account: None,
                region,
            } => write!(f, "ebs:{region}"),
            Scope::Azure {
                subscription,
                resource_group,
            } => write!(f, "azure:{subscription}/{resource_group}"),
            Scope::AzureSnapshots {
                subscription,
                resource_group,
            } => write!(f, "azure:{subscription}/{resource_group}/snapshots"),
        }
    }
}

/// The RBD image a volume names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// ceph-csi's cluster id (`None`: an in-tree volume, which does not say).
    pub(crate) cluster_id: Option<String>,
    /// The pool's name, when the volume says it.
    pub(crate) pool: Option<String>,
    /// The pool's id, from a ceph-csi volume handle.
    pub(crate) pool_id: Option<i64>,
    /// The RADOS namespace (empty: the default one).
    pub(crate) namespace: String,
    /// The image's name.
    pub name: String,
}

/// The disk (or image) a volume names, for any backend. What the volume does not say is `None`:
/// the census then finds its scope only when exactly one censused scope can hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiskRef {
    /// A Ceph RBD image.
    Ceph(ImageRef),
    /// A GCE persistent disk.
    Gce {
        /// The project (`None`: an in-tree volume, or a migrated one whose handle says
        /// `UNSPECIFIED`).
        project: Option<String>,
        /// Its zone (a zonal disk) or region (a regional disk); `None` when the volume does not
        /// tell it (an in-tree volume without zone labels in its node affinity).
        location: Option<String>,
        /// The disk's name.
        name: String,
    },
    /// An AWS EBS volume.
    Ebs {
        /// `vol-…`.
        volume_id: String,
        /// Its region, when the volume tells its zone.
        region: Option<String>,
    },
    /// An Azure managed disk: its resource id says everything, in any case (all three are
    /// lower-cased here, as the census keys them).
    Azure {
        /// The subscription id.
        subscription: String,
        /// The resource group.
        resource_group: String,
        /// The disk's name.
        name: String,
    },
}

impl DiskRef {
    /// The name the census lists it by: the image's name, the disk's name, the volume id.
    pub(crate) fn name(&self) -> &str {
        match self {
            DiskRef::Ceph(r) => &r.name,
            DiskRef::Gce { name, .. } => name,
            DiskRef::Ebs { volume_id, .. } => volume_id,
            DiskRef::Azure { name, .. } => name,
        }
    }
}

impl From<ImageRef> for DiskRef {
    fn from(r: ImageRef) -> DiskRef {
        DiskRef::Ceph(r)
    }
}
