//! Ceph RBD's words for the decisions ([`Backend`]): a scope is one pool (one RADOS namespace
//! of it) of one Ceph cluster, its parts ceph-csi's cluster id, the pool and the namespace.
//! Pure; compiled in every build.

use super::handle::image_ref;
use crate::model::backend::{
    Backend, DiskRecord, DiskRef, Recorder, Scope, ScopeKind, SnapshotHandleRef, SnapshotRecord,
};
use crate::model::crd::{DiskBackend, ImageInfo, VolumeSourceInfo};

use super::handle::{CSI_SNAPSHOT_PREFIX, ImageRef, PoolKey};
use crate::model::csi::RBD_CSI_DRIVER;
use crate::model::listing::ScopeListing;
use crate::model::runbook::{DiskRunbook, SnapshotRunbook};
use crate::model::size::MIB;

/// Ceph RBD.
pub struct Ceph;

/// Ceph's words.
pub static CEPH: Ceph = Ceph;

/// The scope of a pool.
pub fn pool(key: &PoolKey) -> Scope {
    Scope::new(
        &CEPH,
        ScopeKind::Disks,
        [&key.cluster_id, &key.pool, &key.namespace],
    )
}

/// The pool a scope of Ceph's is.
pub fn pool_key(scope: &Scope) -> Option<PoolKey> {
    (scope.backend().name() == CEPH.name()).then(|| PoolKey {
        cluster_id: scope.part(0).to_string(),
        pool: scope.part(1).to_string(),
        namespace: scope.part(2).to_string(),
    })
}

/// The disk an [`ImageRef`] names: its parts are the cluster id, the pool, the RADOS namespace
/// and the pool's id (a ceph-csi handle names the pool by id alone).
impl From<ImageRef> for DiskRef {
    fn from(r: ImageRef) -> DiskRef {
        DiskRef::new(
            &CEPH,
            r.name,
            [
                r.cluster_id,
                r.pool,
                Some(r.namespace),
                r.pool_id.map(|id| id.to_string()),
            ],
        )
    }
}

impl From<PoolKey> for Scope {
    fn from(k: PoolKey) -> Scope {
        pool(&k)
    }
}

fn nonempty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

impl Backend for Ceph {
    fn name(&self) -> &'static str {
        "ceph"
    }

    fn title(&self) -> &'static str {
        "Ceph"
    }

    /// `cluster/pool[/namespace]`, as it always was (no backend prefix: no other backend's
    /// label lacks one).
    fn label(&self, scope: &Scope) -> String {
        match scope.part(2) {
            "" => format!("{}/{}", scope.part(0), scope.part(1)),
            ns => format!("{}/{}/{ns}", scope.part(0), scope.part(1)),
        }
    }

    fn disks_are_called(&self) -> &'static str {
        "images"
    }

    fn lists_details_apart(&self) -> bool {
        true
    }

    fn labelled_as_pool(&self) -> bool {
        true
    }

    fn object_prefix(&self) -> &'static str {
        "rbd"
    }

    fn location(&self, scope: &Scope) -> ImageInfo {
        ImageInfo {
            backend: Some(DiskBackend::named(self.name())),
            cluster_id: Some(scope.part(0).to_string()),
            pool: Some(scope.part(1).to_string()),
            rados_namespace: nonempty(scope.part(2)),
            ..ImageInfo::default()
        }
    }

    fn source(&self, scope: &Scope, name: &str) -> VolumeSourceInfo {
        VolumeSourceInfo {
            kind: "rbd".into(),
            cluster_id: Some(scope.part(0).to_string()),
            pool: Some(scope.part(1).to_string()),
            rados_namespace: nonempty(scope.part(2)),
            image_name: Some(name.to_string()),
            ..VolumeSourceInfo::default()
        }
    }

    fn describe(&self, scope: &Scope, name: &str) -> String {
        let where_ = match scope.part(2) {
            "" => format!("{}/{name}", scope.part(1)),
            ns => format!("{}/{ns}/{name}", scope.part(1)),
        };
        format!("RBD image {where_} (cluster {})", scope.part(0))
    }

    fn csi_driver(&self) -> &'static str {
        RBD_CSI_DRIVER
    }

    fn recorder(&self) -> Recorder {
        Recorder {
            who: "ceph-csi",
            subject: "ceph-csi",
            shared: "pool",
        }
    }

    fn in_use(&self) -> &'static str {
        "open or mapped by"
    }

    fn recorded_scope(&self, i: &ImageInfo, _legacy: bool, _snapshot: bool) -> Scope {
        pool(&PoolKey::new(
            i.cluster_id.as_deref().unwrap_or_default(),
            i.pool.as_deref().unwrap_or_default(),
            i.rados_namespace.as_deref(),
        ))
    }

    fn names_source(&self, kind: &str, driver: &str) -> bool {
        kind == "rbd" || (kind == "csi" && driver.ends_with(RBD_CSI_DRIVER))
    }

    /// The RBD image a ceph-csi volume (its attributes, else its handle) or an in-tree `rbd`
    /// volume names.
    fn disk_ref(&self, source: &VolumeSourceInfo) -> Option<DiskRef> {
        image_ref(source).map(DiskRef::from)
    }

    fn granularity(&self) -> u64 {
        MIB
    }

    /// A volume that names the pool by name is in it; one that names it by id (a ceph-csi
    /// handle) is in the pool whose listing has that id, which cannot be told before the pool
    /// is listed. Pool ids are unique within a cluster.
    fn holds(&self, scope: &Scope, listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool> {
        if !r.is_of(self)
            || r.part(0).is_some_and(|c| c != scope.part(0))
            || r.part(2).unwrap_or_default() != scope.part(2)
        {
            return Some(false);
        }
        let pool_id = r.part(3).and_then(|id| id.parse::<i64>().ok());
        match (r.part(1), pool_id) {
            (Some(p), _) => Some(p == scope.part(1)),
            (None, Some(id)) => listing.map(|l| l.scope_id == Some(id)),
            (None, None) => Some(false),
        }
    }

    fn snapshot_name_in<'a>(&self, _scope: &Scope, _r: &'a SnapshotHandleRef) -> Option<&'a str> {
        None
    }

    fn cloud_keys(&self, _scope: &Scope) -> Option<(Option<String>, Option<String>)> {
        None
    }

    fn holds_a_snapshot(&self, name: &str) -> bool {
        name.starts_with(CSI_SNAPSHOT_PREFIX)
    }

    fn disk_runbook(&self, disk: DiskRecord<'_>) -> Box<dyn DiskRunbook> {
        Box::new(super::runbook::Image::of(disk))
    }

    fn snapshot_runbook(&self, snapshot: SnapshotRecord<'_>) -> Box<dyn SnapshotRunbook> {
        Box::new(super::runbook::Snapshot::of(snapshot))
    }
}

/// The VolumeLeftover's name for an image of a pool: `rbd-<hash>-<image, lower-cased and
/// cleaned>` ([`Backend::leftover_name`]).
pub fn leftover_name(key: &PoolKey, image: &str) -> String {
    CEPH.leftover_name(&pool(key), image)
}
