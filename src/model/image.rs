//! What the census can say about the image (or disk) a volume names, and the disk a volume
//! names ([`DiskRef`]). The key of a listing, [`Scope`], is in [`crate::model::backend`].

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
