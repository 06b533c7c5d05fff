//! What the census can say about the image (or disk) a volume names, and ceph-csi's words for
//! an RBD image ([`PoolKey`], [`ImageRef`]). The disk a volume names, [`DiskRef`], and the key
//! of a listing, [`Scope`], are in [`crate::model::backend`].
//!
//! [`DiskRef`]: crate::model::backend::DiskRef
//! [`Scope`]: crate::model::backend::Scope

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
