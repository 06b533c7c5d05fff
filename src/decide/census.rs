//! The storage backend's census (opt-in), pure: its configuration, which image a volume names,
//! what the census of a pool says about an image, and the findings about images that no volume
//! references. No client, no clock (times are arguments); the I/O is in [`crate::census::ceph`].
//!
//! **Ceph RBD.** ceph-csi volumes name their image by `volumeAttributes` (`clusterID`, `pool`,
//! `imageName`, `radosNamespace`) and by their volume handle (cluster id, pool id, image uuid);
//! in-tree `rbd` volumes by pool and image. A census of a pool is a complete listing of its
//! images and trash; the details (size, creation time, watchers, ceph-csi's ownership metadata)
//! are read only for images no volume references.
//!
//! **What may be concluded.** A census that failed, or has not run yet, answers
//! [`ImageFound::Unknown`] for every image of its pool: never "missing". An image is missing only
//! when two censuses in a row did not list it and the volume existed before the first of them
//! (the provisioner creates the image before the PV; a deletion in progress is not a loss). An
//! image is an orphan only when the census read its details, no volume and no tombstone names
//! it, it is older than the image grace period, and its metadata does not name another
//! Kubernetes cluster. An image whose details were asked for and could not be read is in
//! [`Snapshot::unread`]: nothing is concluded about it either way.
//!
//! **A second backend** (cloud disks, say) is one more module producing [`Snapshot`]s for its own
//! [`PoolKey`]s (a project and zone instead of a cluster and pool) and one more arm in
//! [`image_ref`]; the answers, the confirmation rule and the findings stay as they are.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::crd::{
    Hint, ImageInfo, ImageOwner, Reason, State, Subject, VolumeLeftoverStatus, VolumeSourceInfo,
};
use crate::model::finding::Finding;
pub use crate::model::image::ImageFound;

/// One censused pool (one namespace of it) of one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    /// ceph-csi's cluster id.
    pub cluster_id: String,
    /// The pool.
    pub pool: String,
    /// The RADOS namespace (empty: the default one).
    pub namespace: String,
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

impl std::fmt::Display for PoolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.cluster_id, self.pool)
        } else {
            write!(f, "{}/{}/{}", self.cluster_id, self.pool, self.namespace)
        }
    }
}

/// The image a volume names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// ceph-csi's cluster id (`None`: an in-tree volume, which does not say).
    pub cluster_id: Option<String>,
    /// The pool's name, when the volume says it.
    pub pool: Option<String>,
    /// The pool's id, from a ceph-csi volume handle.
    pub pool_id: Option<i64>,
    /// The RADOS namespace (empty: the default one).
    pub namespace: String,
    /// The image's name.
    pub name: String,
}

/// The ceph-csi RBD driver's name (also the suffix of a renamed one, `<prefix>.rbd.csi.ceph.com`).
pub const RBD_CSI_DRIVER: &str = "rbd.csi.ceph.com";

/// The RBD image a volume's source names, if it names one.
pub fn image_ref(s: &VolumeSourceInfo) -> Option<ImageRef> {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    match s.kind.as_str() {
        "csi"
            if s.driver
                .as_deref()
                .is_some_and(|d| d.ends_with(RBD_CSI_DRIVER)) =>
        {
            let handle = s
                .volume_handle
                .as_deref()
                .and_then(|h| crate::model::csi::parse_volume_handle(h).ok());
            let name =
                nonempty(&s.image_name).or_else(|| handle.as_ref().map(|h| h.image_name()))?;
            let pool = nonempty(&s.pool);
            let pool_id = handle.as_ref().map(|h| h.pool_id);
            if pool.is_none() && pool_id.is_none() {
                return None;
            }
            Some(ImageRef {
                cluster_id: nonempty(&s.cluster_id).or_else(|| handle.map(|h| h.cluster_id)),
                pool,
                pool_id,
                namespace: nonempty(&s.rados_namespace).unwrap_or_default(),
                name,
            })
        }
        "rbd" => Some(ImageRef {
            cluster_id: None,
            pool: nonempty(&s.pool),
            pool_id: None,
            namespace: String::new(),
            name: nonempty(&s.image_name)?,
        }),
        _ => None,
    }
}

/// What the census learned of one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its id.
    pub id: String,
    /// Its details, when they were read (boxed: most images' are not, and a snapshot holds one
    /// entry per image).
    pub detail: Option<Box<SeenDetail>>,
}

/// The details of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenDetail {
    /// Provisioned size in bytes.
    pub size: u64,
    /// When it was created (not recorded by images older than Mimic).
    pub created: Option<jiff::Timestamp>,
    /// Addresses of its watchers, sorted.
    pub watchers: Vec<String>,
    /// ceph-csi's ownership metadata.
    pub owner: Option<ImageOwner>,
}

/// One complete census of one pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// When its listing began.
    pub started: Time,
    /// The pool's id.
    pub pool_id: i64,
    /// Every image, by name.
    pub images: HashMap<String, Seen>,
    /// The names in the trash.
    pub trash: HashSet<String>,
    /// The images whose details were asked for and could not be read, with why: what is
    /// published about them stays as it is (nothing made, nothing cleared).
    pub unread: BTreeMap<String, String>,
}

/// Which censused pool an image is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolved<'a> {
    /// This one.
    Pool(&'a PoolKey),
    /// None (another cluster or pool; or two clusters have a pool of that name and the volume
    /// does not say which).
    NotCensused,
    /// The image is in a configured cluster whose pool cannot be told yet (a volume handle names
    /// the pool by id, and the pool has not been listed yet).
    NotYet,
}

/// The census's state of one pool.
#[derive(Clone, Debug, Default)]
pub struct PoolState {
    /// The last complete census.
    pub current: Option<Arc<Snapshot>>,
    /// The one before it.
    pub previous: Option<Arc<Snapshot>>,
    /// Why the last attempt failed, when it did (then nothing is concluded).
    pub error: Option<String>,
    /// When each listed image was first listed by this process (images without a creation
    /// time are dated by it).
    first_listed: HashMap<String, Time>,
}

impl PoolState {
    /// The census that answers now, if it may.
    fn trusted(&self) -> Option<&Snapshot> {
        if self.error.is_some() {
            return None;
        }
        self.current.as_deref()
    }
}

/// The census of every configured pool.
#[derive(Clone, Debug, Default)]
pub struct Census {
    /// Each pool's state.
    pub pools: BTreeMap<PoolKey, PoolState>,
    /// This Kubernetes cluster's name in ceph-csi's metadata.
    pub cluster_name: Option<String>,
    /// How old an unreferenced image must be before it is a finding.
    pub image_grace: Duration,
}

impl Census {
    /// No census yet: every pool answers Unknown. `cluster_name` is this Kubernetes cluster's
    /// name in the backend's ownership metadata.
    pub fn new(
        pools: impl IntoIterator<Item = PoolKey>,
        cluster_name: Option<&str>,
        image_grace: Duration,
    ) -> Census {
        Census {
            pools: pools
                .into_iter()
                .map(|k| (k, PoolState::default()))
                .collect(),
            cluster_name: cluster_name.filter(|n| !n.is_empty()).map(str::to_string),
            image_grace,
        }
    }

    /// Records a pool's census (or why it failed).
    pub fn record(&mut self, key: &PoolKey, result: Result<Snapshot, String>) {
        let Some(st) = self.pools.get_mut(key) else {
            return;
        };
        match result {
            Ok(s) => {
                st.first_listed
                    .retain(|name, _| s.images.contains_key(name));
                for name in s.images.keys() {
                    st.first_listed
                        .entry(name.clone())
                        .or_insert_with(|| s.started.clone());
                }
                st.previous = st.current.take();
                st.current = Some(Arc::new(s));
                st.error = None;
            }
            Err(e) => st.error = Some(e),
        }
    }

    /// Whether the pool's census may be trusted now.
    pub fn is_trusted(&self, key: &PoolKey) -> bool {
        self.pools.get(key).is_some_and(|s| s.trusted().is_some())
    }

    /// The censused pool an image is in.
    pub fn resolve(&self, r: &ImageRef) -> Resolved<'_> {
        let mut found = None;
        let mut unresolved = false;
        for (k, st) in &self.pools {
            if r.cluster_id.as_ref().is_some_and(|c| *c != k.cluster_id)
                || r.namespace != k.namespace
            {
                continue;
            }
            let matches = match (&r.pool, r.pool_id) {
                (Some(p), _) => *p == k.pool,
                (None, Some(id)) => match st.current.as_ref().or(st.previous.as_ref()) {
                    Some(s) => s.pool_id == id,
                    None => {
                        unresolved = true;
                        false
                    }
                },
                (None, None) => false,
            };
            if matches {
                if found.is_some() {
                    // Two clusters with a pool of that name, and the volume does not say which.
                    return Resolved::NotCensused;
                }
                found = Some(k);
            }
        }
        match found {
            Some(k) => Resolved::Pool(k),
            None if unresolved => Resolved::NotYet,
            None => Resolved::NotCensused,
        }
    }

    /// What the census says about the image `r`, named by a volume created at `volume_created`.
    pub fn image(&self, r: &ImageRef, volume_created: Option<&Time>) -> ImageFound {
        let key = match self.resolve(r) {
            Resolved::Pool(k) => k,
            Resolved::NotCensused => return ImageFound::NotCensused,
            Resolved::NotYet => return ImageFound::Unknown,
        };
        let st = &self.pools[key];
        let Some(cur) = st.trusted() else {
            return ImageFound::Unknown;
        };
        if let Some(seen) = cur.images.get(&r.name) {
            return ImageFound::Present {
                watchers: seen.detail.as_ref().map_or(0, |d| d.watchers.len()),
            };
        }
        let Some(prev) = st.previous.as_deref() else {
            return ImageFound::Unknown;
        };
        if prev.images.contains_key(&r.name) {
            return ImageFound::Unknown;
        }
        // The volume must have existed before the first of the two listings (a volume with no
        // creation time is not trusted to have).
        if volume_created.is_none_or(|c| c.0 >= prev.started.0) {
            return ImageFound::Unknown;
        }
        ImageFound::Missing {
            in_trash: cur.trash.contains(&r.name),
        }
    }

    /// The findings about the images of `key` that nothing references, at `now`. `referenced`
    /// holds the names of the images of that pool that a volume or a tombstone names.
    pub fn orphans(&self, key: &PoolKey, referenced: &HashSet<String>, now: &Time) -> Vec<Finding> {
        let Some(st) = self.pools.get(key) else {
            return Vec::new();
        };
        let Some(cur) = st.trusted() else {
            return Vec::new();
        };
        let mut names: Vec<&String> = cur.images.keys().collect();
        names.sort();
        names
            .into_iter()
            .filter(|n| !referenced.contains(*n))
            // Snapshots' images belong to VolumeSnapshotContents, which are not watched.
            .filter(|n| !n.starts_with(crate::model::csi::CSI_SNAPSHOT_PREFIX))
            .filter_map(|n| {
                let seen = &cur.images[n];
                // Without its details (not read, or gone since the listing), its owner is
                // unknown: nothing is asserted.
                let d = seen.detail.as_ref()?;
                let owner_cluster = d.owner.as_ref().and_then(|o| o.cluster_name.as_deref());
                if let (Some(theirs), Some(ours)) = (owner_cluster, self.cluster_name.as_deref())
                    && theirs != ours
                {
                    return None;
                }
                let born = d
                    .created
                    .map(Time)
                    .or_else(|| st.first_listed.get(n).cloned())?;
                let age = Duration::try_from(now.0.duration_since(born.0)).unwrap_or_default();
                if age < self.image_grace {
                    return None;
                }
                Some(orphan(key, n, seen, d, self.cluster_name.as_deref(), now))
            })
            .collect()
    }
}

/// The VolumeLeftover's name for an image: deterministic, a valid object name for any cluster
/// id, pool, namespace and image (`rbd-<hash>-<image, lower-cased and cleaned>`, at most 253
/// characters), and unlike any PV name a provisioner makes.
pub fn leftover_name(key: &PoolKey, image: &str) -> String {
    // FNV-1a, 64 bits: stable across versions and platforms (the name must never change).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in [
        key.cluster_id.as_bytes(),
        b"\0",
        key.pool.as_bytes(),
        b"\0",
        key.namespace.as_bytes(),
        b"\0",
        image.as_bytes(),
    ]
    .concat()
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut clean: String = image
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(200)
        .collect();
    while clean.ends_with('-') {
        clean.pop();
    }
    let clean = clean.trim_start_matches('-');
    if clean.is_empty() {
        format!("rbd-{h:016x}")
    } else {
        format!("rbd-{h:016x}-{clean}")
    }
}

/// The finding about an image nothing references.
fn orphan(
    key: &PoolKey,
    name: &str,
    seen: &Seen,
    d: &SeenDetail,
    cluster_name: Option<&str>,
    now: &Time,
) -> Finding {
    let size = i64::try_from(d.size).ok();
    Finding {
        volume_name: String::new(),
        volume_uid: String::new(),
        storage_class_name: None,
        object_name: Some(leftover_name(key, name)),
        status: VolumeLeftoverStatus {
            reason: Reason::ImageWithoutVolume,
            state: State::Open,
            observed_generation: None,
            conditions: Vec::new(),
            acknowledged: None,
            message: orphan_message(key, name, d, cluster_name),
            hints: orphan_hints(d, cluster_name),
            phase: String::new(),
            phase_since: None,
            phase_message: None,
            reclaim_policy: String::new(),
            storage_class: None,
            claim: None,
            capacity: size.map(crate::model::quantity::format_bytes),
            capacity_bytes: size,
            access_modes: Vec::new(),
            volume_mode: String::new(),
            source: VolumeSourceInfo {
                kind: "rbd".into(),
                cluster_id: Some(key.cluster_id.clone()),
                pool: Some(key.pool.clone()),
                rados_namespace: (!key.namespace.is_empty()).then(|| key.namespace.clone()),
                image_name: Some(name.to_string()),
                ..VolumeSourceInfo::default()
            },
            first_seen: now.clone(),
            subject: Subject::Image,
            deleted_at: None,
            image: Some(ImageInfo {
                cluster_id: key.cluster_id.clone(),
                pool: key.pool.clone(),
                rados_namespace: (!key.namespace.is_empty()).then(|| key.namespace.clone()),
                name: name.to_string(),
                id: Some(seen.id.clone()),
                size_bytes: size,
                created: d.created.map(Time),
                watchers: d.watchers.clone(),
                owner: d.owner.clone(),
            }),
        },
    }
}

/// An orphan's hints, sorted: in use (it has watchers), and whose it is cannot be told (no
/// ownership metadata, or only one side of the comparison names a cluster).
fn orphan_hints(d: &SeenDetail, cluster_name: Option<&str>) -> Vec<Hint> {
    let mut hints = Vec::new();
    if !d.watchers.is_empty() {
        hints.push(Hint::ImageInUse);
    }
    let owner = d.owner.as_ref();
    let owner_cluster = owner.and_then(|o| o.cluster_name.as_deref());
    if owner.is_none()
        || (owner_cluster.is_none() && cluster_name.is_some())
        || (owner_cluster.is_some() && cluster_name.is_none())
    {
        hints.push(Hint::OwnerUnknown);
    }
    hints.sort();
    hints
}

/// An orphan's message: where the image is, whose ceph-csi says it was, and whether it is in
/// use.
fn orphan_message(key: &PoolKey, name: &str, d: &SeenDetail, cluster_name: Option<&str>) -> String {
    let where_ = if key.namespace.is_empty() {
        format!("{}/{}", key.pool, name)
    } else {
        format!("{}/{}/{}", key.pool, key.namespace, name)
    };
    let mut m = format!(
        "RBD image {where_} (cluster {}) is not referenced by any PersistentVolume or tombstone.",
        key.cluster_id
    );
    m.push_str(&ownership_sentence(d.owner.as_ref(), cluster_name));
    if !d.watchers.is_empty() {
        m.push_str(&format!(
            " It is open or mapped by {}: in use, not a plain orphan.",
            d.watchers.join(", ")
        ));
    }
    m
}

/// What ceph-csi's ownership metadata says of the image (with its leading space), and how far
/// it can be trusted to be this cluster's: the pool may be shared with other clusters.
fn ownership_sentence(owner: Option<&ImageOwner>, cluster_name: Option<&str>) -> String {
    let Some(o) = owner else {
        return " It carries no ceph-csi ownership metadata: it may belong to another cluster sharing the pool, or to none.".to_string();
    };
    let pv = o.volume_name.as_deref().unwrap_or("?");
    let claim = match (&o.claim_namespace, &o.claim_name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        _ => "?".into(),
    };
    let recorded = format!(" ceph-csi recorded it as PersistentVolume {pv} for claim {claim}");
    match (o.cluster_name.as_deref(), cluster_name) {
        (Some(c), Some(_)) => format!("{recorded} in this cluster ({c})."),
        (Some(c), None) => format!(
            "{recorded} in cluster {c}; this operator's clusterName is not configured, so it cannot tell whether that is this cluster."
        ),
        (None, _) => format!(
            "{recorded} without naming a cluster: it may belong to another cluster sharing the pool."
        ),
    }
}

/// What the log has said about each failing pool: one line when a pool starts failing or fails
/// in another way (another kind `K`, the backend's error category), one when it works again.
/// The same problem in other words (an outage that times out in `rbd_list2`, then in
/// `rados_connect`) is not news.
#[derive(Debug)]
pub struct Failing<K> {
    by_pool: BTreeMap<PoolKey, (K, String)>,
}

impl<K> Default for Failing<K> {
    fn default() -> Self {
        Failing {
            by_pool: BTreeMap::new(),
        }
    }
}

impl<K: Copy + PartialEq> Failing<K> {
    /// Records a failure of `key`; true when it is news to log.
    pub fn failed(&mut self, key: &PoolKey, category: K, message: &str) -> bool {
        let news = self.by_pool.get(key).is_none_or(|(c, _)| *c != category);
        if news {
            self.by_pool
                .insert(key.clone(), (category, message.to_string()));
        }
        news
    }

    /// Records a census of `key` that worked; the failure it ends, when the pool was failing.
    pub fn recovered(&mut self, key: &PoolKey) -> Option<String> {
        self.by_pool.remove(key).map(|(_, message)| message)
    }
}
