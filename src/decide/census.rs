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
//! [`ScopeListing::unread`]: nothing is concluded about it either way.
//!
//! **Other backends** (GCE persistent disks, EBS volumes) produce [`ScopeListing`]s for their own
//! [`Scope`]s (a project and zone or region; an account and region) and [`disk_ref`] names their
//! disks; the answers, the confirmation rule and the findings are the same for every backend.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::crd::{
    Hint, ImageInfo, ImageOwner, Reason, State, Subject, VolumeLeftoverStatus, VolumeSourceInfo,
};
use crate::model::finding::Finding;
pub use crate::model::image::ImageFound;

pub use crate::model::csi::{
    RBD_CSI_DRIVER, SnapshotHandleRef, disk_ref, image_ref, snapshot_handle_ref,
};
pub use crate::model::image::{DiskRef, ImageRef, PoolKey, Scope};
pub(crate) use crate::model::listing::{CreatedFor, DiskFacts, FailureCategory, Owner};
pub use crate::model::listing::{FailureKind, ScopeListing, Seen};

/// Which censused scope a disk is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resolved<'a> {
    /// This one.
    In(&'a Scope),
    /// None (another cluster, pool, project, zone, region or account; or two scopes could hold
    /// it and the volume does not say which).
    NotCensused,
    /// The image is in a configured cluster whose pool cannot be told yet (a volume handle names
    /// the pool by id, and the pool has not been listed yet), or the disk in a zone or region
    /// of a GCE project listed as a whole that no listing has named yet.
    NotYet,
}

/// The census's state of one scope: its listings, and what the log has said about it.
#[derive(Clone, Debug, Default)]
pub struct ScopeState {
    /// The last complete census.
    pub current: Option<Arc<ScopeListing>>,
    /// The one before it.
    pub(crate) previous: Option<Arc<ScopeListing>>,
    /// Why the last attempt failed, when it did (then nothing is concluded).
    pub(crate) error: Option<String>,
    /// When each listed image was first listed by this process (images without a creation
    /// time are dated by it).
    first_listed: HashMap<String, Time>,
    /// The failure the log last said the scope has, with its first message: one line when a
    /// scope starts failing or fails in another way (another kind), one when it works again.
    /// The same problem in other words (an outage that times out in `rbd_list2`, then in
    /// `rados_connect`) is not news.
    failing: Option<(FailureKind, String)>,
    /// The images whose details the log last said could not be read (`None`: it said none).
    unread_said: Option<Vec<String>>,
    /// This Kubernetes cluster's name in the scope's ownership metadata, when its section
    /// names its own (else [`Census::cluster_name`]).
    cluster_name: Option<String>,
}

impl ScopeState {
    /// Records a failure; true when it is news to log.
    pub(crate) fn failed(&mut self, kind: FailureKind, message: &str) -> bool {
        let news = self.failing.as_ref().is_none_or(|(k, _)| *k != kind);
        if news {
            self.failing = Some((kind, message.to_string()));
        }
        news
    }

    /// Records a census that worked; the failure it ends, when the scope was failing.
    pub(crate) fn recovered(&mut self) -> Option<String> {
        self.failing.take().map(|(_, message)| message)
    }

    /// Records the images whose details a census could not read; true when that is news to
    /// log (the set changed, and it or the last one said is not empty).
    pub(crate) fn unread_now(&mut self, unread: Vec<String>) -> bool {
        let news = self
            .unread_said
            .as_ref()
            .map_or(!unread.is_empty(), |u| *u != unread);
        if news {
            self.unread_said = Some(unread);
        }
        news
    }

    /// The census that answers now, if it may.
    fn trusted(&self) -> Option<&ScopeListing> {
        if self.error.is_some() {
            return None;
        }
        self.current.as_deref()
    }
}

/// The census of every configured pool.
#[derive(Clone, Debug, Default)]
pub struct Census {
    /// Each scope's state.
    pub pools: BTreeMap<Scope, ScopeState>,
    /// This Kubernetes cluster's name in ceph-csi's metadata.
    pub(crate) cluster_name: Option<String>,
    /// How old an unreferenced image must be before it is a finding.
    pub(crate) image_grace: Duration,
    /// The GCE projects listed as a whole (an aggregated listing), with their own cluster name
    /// when their section names one: their zones and regions are known only once a listing
    /// names them, and are [admitted](Census::admit) then.
    pub(crate) open_projects: BTreeMap<String, Option<String>>,
}

impl Census {
    /// No census yet: every pool answers Unknown. `cluster_name` is this Kubernetes cluster's
    /// name in the backend's ownership metadata.
    pub fn new(
        pools: impl IntoIterator<Item = impl Into<Scope>>,
        cluster_name: Option<&str>,
        image_grace: Duration,
    ) -> Census {
        Census {
            pools: pools
                .into_iter()
                .map(|k| (k.into(), ScopeState::default()))
                .collect(),
            cluster_name: cluster_name.filter(|n| !n.is_empty()).map(str::to_string),
            image_grace,
            open_projects: BTreeMap::new(),
        }
    }

    /// Names this cluster as `scope`'s section does (`None`: as the file does).
    pub fn name_cluster(&mut self, scope: &Scope, cluster_name: Option<&str>) {
        if let Some(st) = self.pools.get_mut(scope) {
            st.cluster_name = cluster_name.filter(|n| !n.is_empty()).map(str::to_string);
        }
    }

    /// A GCE project listed as a whole: its zones and regions join as listings name them,
    /// with `cluster_name` (its section's, `None`: the file's).
    pub fn open_project(&mut self, project: &str, cluster_name: Option<&str>) {
        self.open_projects.insert(
            project.to_string(),
            cluster_name.filter(|n| !n.is_empty()).map(str::to_string),
        );
    }

    /// Admits a scope a listing names: a zone or region of an [open
    /// project](Census::open_project), Unknown until its census is recorded. True when the
    /// scope is censused (admitted now or before); a scope of nothing configured is not.
    pub fn admit(&mut self, scope: &Scope) -> bool {
        if self.pools.contains_key(scope) {
            return true;
        }
        let Scope::Gce { project, .. } = scope else {
            return false;
        };
        let Some(name) = self.open_projects.get(project) else {
            return false;
        };
        let st = ScopeState {
            cluster_name: name.clone(),
            ..ScopeState::default()
        };
        self.pools.insert(scope.clone(), st);
        true
    }

    /// Whether a census may ever answer for `scope`: it is censused, or a zone or region of an
    /// open project not listed yet.
    pub fn covers(&self, scope: &Scope) -> bool {
        self.pools.contains_key(scope)
            || matches!(scope, Scope::Gce { project, .. } if self.open_projects.contains_key(project))
    }

    /// This cluster's name in `scope`'s ownership metadata.
    pub fn cluster_name_of(&self, scope: &Scope) -> Option<&str> {
        self.pools
            .get(scope)
            .and_then(|st| st.cluster_name.as_deref())
            .or(self.cluster_name.as_deref())
    }

    /// Records a pool's census (or why it failed).
    pub fn record(&mut self, key: &Scope, result: Result<ScopeListing, String>) {
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
    pub(crate) fn is_trusted(&self, key: &Scope) -> bool {
        self.pools.get(key).is_some_and(|s| s.trusted().is_some())
    }

    /// The censused scope a disk is in.
    pub(crate) fn resolve(&self, r: &DiskRef) -> Resolved<'_> {
        let DiskRef::Ceph(r) = r else {
            return self.resolve_cloud(r);
        };
        let mut found = None;
        let mut unresolved = false;
        for (scope, st) in &self.pools {
            let Scope::Ceph(k) = scope else {
                continue;
            };
            if r.cluster_id.as_ref().is_some_and(|c| *c != k.cluster_id)
                || r.namespace != k.namespace
            {
                continue;
            }
            let matches = match (&r.pool, r.pool_id) {
                (Some(p), _) => *p == k.pool,
                (None, Some(id)) => match st.current.as_ref().or(st.previous.as_ref()) {
                    Some(s) => s.scope_id == Some(id),
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
                found = Some(scope);
            }
        }
        match found {
            Some(k) => Resolved::In(k),
            None if unresolved => Resolved::NotYet,
            None => Resolved::NotCensused,
        }
    }

    /// The censused scope of a cloud disk: the one scope that can hold it. What the volume does
    /// not say (an in-tree disk's project, an EBS volume's account or region) matches any
    /// scope, so a disk that two scopes could hold is not censused rather than guessed. A zone
    /// or region of an [open project](Census::open_project) that no listing has named yet can
    /// hold it too: when it is the only one, the disk is [`Resolved::NotYet`] (Unknown).
    fn resolve_cloud(&self, r: &DiskRef) -> Resolved<'_> {
        let fits = |scope: &Scope| match (r, scope) {
            (
                DiskRef::Gce {
                    project,
                    location: Some(location),
                    ..
                },
                Scope::Gce {
                    project: p,
                    location: l,
                },
            ) => l == location && project.as_ref().is_none_or(|project| project == p),
            (DiskRef::Ebs { region, .. }, Scope::Ebs { region: g, .. }) => {
                region.as_ref().is_none_or(|r| r == g)
            }
            (
                DiskRef::Azure {
                    subscription,
                    resource_group,
                    ..
                },
                Scope::Azure {
                    subscription: s,
                    resource_group: g,
                },
            ) => s == subscription && g == resource_group,
            _ => false,
        };
        // The open projects' scopes that could hold it and are not listed yet.
        let unlisted = match r {
            DiskRef::Gce {
                project,
                location: Some(location),
                ..
            } => self
                .open_projects
                .keys()
                .filter(|p| project.as_ref().is_none_or(|project| project == *p))
                .filter(|p| {
                    !self.pools.contains_key(&Scope::Gce {
                        project: (*p).clone(),
                        location: location.clone(),
                    })
                })
                .count(),
            _ => 0,
        };
        let mut candidates = self.pools.keys().filter(|s| fits(s));
        match (candidates.next(), candidates.next(), unlisted) {
            (Some(one), None, 0) => Resolved::In(one),
            (None, None, 1) => Resolved::NotYet,
            _ => Resolved::NotCensused,
        }
    }

    /// What the census says about the image `r`, named by a volume created at `volume_created`.
    pub fn image(&self, r: &DiskRef, volume_created: Option<&Time>) -> ImageFound {
        let key = match self.resolve(r) {
            Resolved::In(k) => k,
            Resolved::NotCensused => return ImageFound::NotCensused,
            Resolved::NotYet => return ImageFound::Unknown,
        };
        let st = &self.pools[key];
        let Some(cur) = st.trusted() else {
            return ImageFound::Unknown;
        };
        if let Some(seen) = cur.images.get(r.name()) {
            return ImageFound::Present {
                watchers: seen.detail.as_ref().map_or(0, |d| d.in_use.len()),
            };
        }
        let Some(prev) = st.previous.as_deref() else {
            return ImageFound::Unknown;
        };
        if prev.images.contains_key(r.name()) {
            return ImageFound::Unknown;
        }
        // The volume must have existed before the first of the two listings (a volume with no
        // creation time is not trusted to have).
        if volume_created.is_none_or(|c| c.0 >= prev.started.0) {
            return ImageFound::Unknown;
        }
        ImageFound::Missing {
            in_trash: cur.recoverable.contains(r.name()),
        }
    }

    /// The provisioned size, in bytes, of the disk `r` names, as the last complete listing of
    /// its scope read it: GCE and EBS listings carry every disk's size; the Ceph census reads
    /// every image's (a named one's alone, from its header). When that listing could not read
    /// it (the image is among its unread), the listing before says, so that a finding about
    /// its size is not dropped for one unanswered request.
    pub fn disk_size(&self, r: &DiskRef) -> Option<u64> {
        let Resolved::In(key) = self.resolve(r) else {
            return None;
        };
        // The last complete listing, even when a later one failed: a size is a fact of when it
        // was listed (and the operator, which is not asked again when a listing fails, keeps
        // deciding on it as `scan` does).
        let scope = self.pools.get(key)?;
        let current = scope.current.as_deref()?;
        let seen = current.images.get(r.name())?;
        seen.size().or_else(|| {
            if !current.unread.contains_key(r.name()) {
                return None;
            }
            let before = scope.previous.as_deref()?.images.get(r.name())?;
            (before.id == seen.id).then(|| before.size()).flatten()
        })
    }

    /// What the census says about the backend snapshot `r` names, for a `ContentDeleted`
    /// tombstone: the rule of [`Census::image`] (gone only when two trusted listings in a row
    /// lack it; the content existed before either). A GCE handle names its project's one scope;
    /// an EBS id names a snapshot of whichever censused region holds it, so with several
    /// regions it is found in any of them, unknown while one of them cannot say, and otherwise
    /// not censused (it may be in a region nobody lists): never gone on a guess.
    pub fn backend_snapshot(&self, r: &SnapshotHandleRef) -> ImageFound {
        let scopes: Vec<(&str, &ScopeState)> = self
            .pools
            .iter()
            .filter_map(|(scope, st)| Some((r.name_in(scope)?, st)))
            .collect();
        let present = scopes
            .iter()
            .any(|(n, st)| st.trusted().is_some_and(|c| c.images.contains_key(*n)));
        if present {
            return ImageFound::Present { watchers: 0 };
        }
        let [(name, st)] = scopes.as_slice() else {
            return if scopes.iter().any(|(_, st)| st.trusted().is_none()) {
                ImageFound::Unknown
            } else {
                ImageFound::NotCensused
            };
        };
        if st.trusted().is_none() {
            return ImageFound::Unknown;
        }
        match st.previous.as_deref() {
            Some(prev) if !prev.images.contains_key(*name) => {
                ImageFound::Missing { in_trash: false }
            }
            _ => ImageFound::Unknown,
        }
    }

    /// The findings about the images of `key` that nothing references, at `now`. `referenced`
    /// holds the names of the images of that pool that a volume or a tombstone names.
    pub fn orphans(&self, key: &Scope, referenced: &HashSet<String>, now: &Time) -> Vec<Finding> {
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
                let ours = self.cluster_name_of(key);
                let owner = d.owner(ours);
                if let Owner::OtherCluster(_) = owner {
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
                Some(if key.holds_snapshots() {
                    snapshot_orphan(key, n, seen, d, &owner, ours, now)
                } else {
                    orphan(key, n, seen, d, &owner, ours, now)
                })
            })
            .collect()
    }
}

/// The VolumeLeftover's name for a disk nothing references: [`leftover_name`] for an RBD
/// image; `gce-<hash>-<name>` and `ebs-<hash>-<volume id>` by the same scheme for a cloud disk,
/// the hash over the scope's parts and the name.
pub fn disk_leftover_name(scope: &Scope, name: &str) -> String {
    match scope {
        Scope::Ceph(k) => leftover_name(k, name),
        Scope::Gce { project, location } => {
            hashed_name("gce", &[project.as_bytes(), location.as_bytes()], name)
        }
        // Holds no disk (its disks are in their zones' and regions' scopes); named all the same.
        Scope::GceProject { project } => hashed_name("gce", &[project.as_bytes()], name),
        Scope::Ebs { account, region } => hashed_name(
            "ebs",
            &[
                account.as_deref().unwrap_or_default().as_bytes(),
                region.as_bytes(),
            ],
            name,
        ),
        // A snapshot's scope adds a part no zone, region or account can be, so that no
        // snapshot's name can be a disk's.
        Scope::GceSnapshots { project } => {
            hashed_name("gce", &[project.as_bytes(), b"snapshots"], name)
        }
        Scope::EbsSnapshots { account, region } => hashed_name(
            "ebs",
            &[
                account.as_deref().unwrap_or_default().as_bytes(),
                region.as_bytes(),
                b"snapshots",
            ],
            name,
        ),
        Scope::Azure {
            subscription,
            resource_group,
        } => hashed_name(
            "azure",
            &[subscription.as_bytes(), resource_group.as_bytes()],
            name,
        ),
        Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => hashed_name(
            "azure",
            &[
                subscription.as_bytes(),
                resource_group.as_bytes(),
                b"snapshots",
            ],
            name,
        ),
    }
}

/// The handle a VolumeSnapshotContent would carry for the snapshot `name` of `scope`.
fn snapshot_handle_of(scope: &Scope, name: &str) -> String {
    match scope {
        Scope::GceSnapshots { project } => format!("projects/{project}/global/snapshots/{name}"),
        Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => azure_id(subscription, resource_group, "snapshots", name),
        _ => name.to_string(),
    }
}

/// An Azure resource id, as the Azure Disk CSI driver's handles carry it (lower-cased: the
/// census keys every part so).
fn azure_id(subscription: &str, resource_group: &str, kind: &str, name: &str) -> String {
    format!(
        "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/{kind}/{name}"
    )
}

/// The VolumeLeftover's name for an image: deterministic, a valid object name for any cluster
/// id, pool, namespace and image (`rbd-<hash>-<image, lower-cased and cleaned>`, at most 253
/// characters), and unlike any PV name a provisioner makes.
pub fn leftover_name(key: &PoolKey, image: &str) -> String {
    let parts = [
        key.cluster_id.as_bytes(),
        key.pool.as_bytes(),
        key.namespace.as_bytes(),
    ];
    hashed_name("rbd", &parts, image)
}

/// `<prefix>-<hash>-<name, lower-cased and cleaned>`: the hash is FNV-1a (64 bits) of `parts`
/// and `name`, each followed by a NUL but the last, stable across versions and platforms (the
/// name must never change).
pub(crate) fn hashed_name(prefix: &str, parts: &[&[u8]], image: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.iter().chain(b"\0") {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    for b in image.bytes() {
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
        format!("{prefix}-{h:016x}")
    } else {
        format!("{prefix}-{h:016x}-{clean}")
    }
}

/// The finding about an image nothing references.
fn orphan(
    key: &Scope,
    name: &str,
    seen: &Seen,
    d: &DiskFacts,
    owner: &Owner,
    cluster_name: Option<&str>,
    now: &Time,
) -> Finding {
    let size = i64::try_from(d.size).ok();
    Finding {
        volume_name: String::new(),
        volume_uid: String::new(),
        storage_class_name: None,
        object_name: Some(disk_leftover_name(key, name)),
        status: VolumeLeftoverStatus {
            reason: Reason::DiskWithoutVolume,
            state: State::Open,
            observed_generation: None,
            conditions: Vec::new(),
            acknowledged: None,
            message: orphan_message(key, name, d, cluster_name),
            hints: orphan_hints(d, owner),
            phase: String::new(),
            phase_since: None,
            phase_message: None,
            reclaim_policy: String::new(),
            storage_class: None,
            claim: None,
            capacity: size.map(crate::model::quantity::format_bytes),
            capacity_bytes: size,
            disk_size_bytes: None,
            access_modes: Vec::new(),
            volume_mode: String::new(),
            source: orphan_source(key, name),
            first_seen: now.clone(),
            subject: Subject::Disk,
            deleted_at: None,
            image: Some(ImageInfo {
                name: name.to_string(),
                id: Some(seen.id.clone()),
                size_bytes: size,
                created: d.created.map(Time),
                watchers: d.in_use.clone(),
                owner: d.image_owner(),
                disk_type: d.kind.clone(),
                replica_zones: sorted(d.replica_zones.clone()),
                last_detached: d.last_detached.map(Time),
                ..located(key, d)
            }),
            cost: None,
            snapshot: None,
        },
    }
}

/// The finding about a backend snapshot no VolumeSnapshotContent names: what the listing read
/// of it, in `status.image` (where it is, its id, size, creation, the cluster it names) and
/// `status.snapshot` (the handle a content would carry, the content and snapshot the driver
/// recorded it for, its size).
fn snapshot_orphan(
    key: &Scope,
    name: &str,
    seen: &Seen,
    d: &DiskFacts,
    owner: &Owner,
    cluster_name: Option<&str>,
    now: &Time,
) -> Finding {
    use crate::model::crd::SnapshotInfo;
    use crate::model::csi::{AZURE_DISK_CSI_DRIVER, EBS_CSI_DRIVER, GCE_PD_CSI_DRIVER};
    let size = i64::try_from(d.size).ok();
    let (driver, what) = match key {
        Scope::GceSnapshots { project } => (
            GCE_PD_CSI_DRIVER,
            format!("GCE snapshot {name} (project {project})"),
        ),
        Scope::EbsSnapshots { region, .. } => {
            (EBS_CSI_DRIVER, format!("EBS snapshot {name} ({region})"))
        }
        Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => (
            AZURE_DISK_CSI_DRIVER,
            format!(
                "Azure snapshot {name} (subscription {subscription}, resource group {resource_group})"
            ),
        ),
        _ => ("", name.to_string()),
    };
    let recorded = d.created_for.as_ref();
    let mut message =
        format!("{what} is not named by any VolumeSnapshotContent or ContentDeleted tombstone.");
    message.push_str(&snapshot_ownership_sentence(d, cluster_name));
    let mut hints = orphan_hints(d, owner);
    hints.retain(|h| *h != Hint::DiskInUse);
    Finding {
        volume_name: String::new(),
        volume_uid: String::new(),
        storage_class_name: None,
        object_name: Some(disk_leftover_name(key, name)),
        status: VolumeLeftoverStatus {
            reason: Reason::SnapshotWithoutContent,
            state: State::Open,
            observed_generation: None,
            conditions: Vec::new(),
            acknowledged: None,
            message,
            hints,
            phase: String::new(),
            phase_since: None,
            phase_message: None,
            reclaim_policy: String::new(),
            storage_class: None,
            claim: None,
            capacity: size.map(crate::model::quantity::format_bytes),
            capacity_bytes: size,
            disk_size_bytes: None,
            access_modes: Vec::new(),
            volume_mode: String::new(),
            source: VolumeSourceInfo {
                kind: "csi".into(),
                driver: Some(driver.to_string()),
                volume_handle: d.source_disk.clone(),
                ..VolumeSourceInfo::default()
            },
            first_seen: now.clone(),
            subject: Subject::BackendSnapshot,
            deleted_at: None,
            image: Some(ImageInfo {
                name: name.to_string(),
                id: Some(seen.id.clone()),
                size_bytes: size,
                created: d.created.map(Time),
                owner: d.cluster.as_ref().map(|c| ImageOwner {
                    cluster_name: Some(c.clone()),
                    ..ImageOwner::default()
                }),
                ..located(key, d)
            }),
            cost: None,
            snapshot: Some(SnapshotInfo {
                content: recorded.and_then(|c| c.pv.clone()),
                snapshot: recorded.and_then(|c| match (&c.pvc_namespace, &c.pvc) {
                    (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
                    _ => None,
                }),
                snapshot_handle: Some(snapshot_handle_of(key, name)),
                restore_size_bytes: size,
                since: d.created.map(Time),
                ..SnapshotInfo::default()
            }),
        },
    }
}

/// What the CSI driver recorded of a backend snapshot (with its leading space): the content
/// and snapshot it was cut for, and whether the cluster it names is this one.
fn snapshot_ownership_sentence(d: &DiskFacts, cluster_name: Option<&str>) -> String {
    let Some(c) = &d.created_for else {
        return " The CSI driver recorded no VolumeSnapshot for it: it may belong to another cluster sharing the account or project, or to none.".into();
    };
    let snapshot = match (&c.pvc_namespace, &c.pvc) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        _ => "?".into(),
    };
    let content = c.pv.as_deref().unwrap_or("?");
    let recorded = format!(
        " The CSI driver cut it for VolumeSnapshot {snapshot} (VolumeSnapshotContent {content})"
    );
    match (d.cluster.as_deref(), cluster_name) {
        (Some(c), Some(_)) => format!("{recorded} in this cluster ({c})."),
        (Some(c), None) => format!(
            "{recorded} in cluster {c}; this operator's clusterName is not configured, so it cannot tell whether that is this cluster."
        ),
        (None, _) => format!(
            "{recorded} without naming a cluster: it may belong to another cluster sharing the account or project."
        ),
    }
}

/// [`image_location`] of `key`, with what the listing adds: the disk's own zone (an EBS
/// volume's) and its attributing labels or tags.
fn located(key: &Scope, d: &DiskFacts) -> ImageInfo {
    let mut i = image_location(key);
    if i.zone.is_none() {
        i.zone = d.zone.clone();
    }
    if i.region.is_none() {
        i.region = d.region.clone();
    }
    i.tags = d.tags.iter().cloned().collect();
    i
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The source a finding about an unreferenced disk records: the one a volume naming it would
/// have (an RBD image by cluster, pool and name; a cloud disk as its in-tree source).
fn orphan_source(key: &Scope, name: &str) -> VolumeSourceInfo {
    let (kind, disk) = match key {
        Scope::Ceph(k) => {
            return VolumeSourceInfo {
                kind: "rbd".into(),
                cluster_id: Some(k.cluster_id.clone()),
                pool: Some(k.pool.clone()),
                rados_namespace: (!k.namespace.is_empty()).then(|| k.namespace.clone()),
                image_name: Some(name.to_string()),
                ..VolumeSourceInfo::default()
            };
        }
        Scope::Gce { .. } | Scope::GceProject { .. } | Scope::GceSnapshots { .. } => {
            ("gcePersistentDisk", name)
        }
        Scope::Ebs { .. } | Scope::EbsSnapshots { .. } => ("awsElasticBlockStore", name),
        // The in-tree source's `diskURI` is what names the disk (and where it is).
        Scope::Azure {
            subscription,
            resource_group,
        }
        | Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => {
            return VolumeSourceInfo {
                kind: "azureDisk".into(),
                disk_name: Some(name.to_string()),
                disk_uri: Some(azure_id(subscription, resource_group, "disks", name)),
                ..VolumeSourceInfo::default()
            };
        }
    };
    VolumeSourceInfo {
        kind: kind.into(),
        disk_name: Some(disk.to_string()),
        ..VolumeSourceInfo::default()
    }
}

/// Where the `image` block of a finding places a disk of `key`: the same fields for every
/// backend (`backend`, `account`, `region`, `zone`), and Ceph's own (`clusterID`, `pool`,
/// `radosNamespace`) only for Ceph.
pub(crate) fn image_location(key: &Scope) -> ImageInfo {
    use crate::model::crd::DiskBackend;
    use crate::model::csi::GceLocation;
    match key {
        Scope::Ceph(k) => ImageInfo {
            backend: Some(DiskBackend::Ceph),
            cluster_id: Some(k.cluster_id.clone()),
            pool: Some(k.pool.clone()),
            rados_namespace: (!k.namespace.is_empty()).then(|| k.namespace.clone()),
            ..ImageInfo::default()
        },
        Scope::Gce { project, location } => {
            let (zone, region) = GceLocation::parse(location)
                .map(|l| l.zone_and_region())
                .unwrap_or((None, Some(location.clone())));
            ImageInfo {
                backend: Some(DiskBackend::Gce),
                account: Some(project.clone()),
                zone,
                region,
                ..ImageInfo::default()
            }
        }
        Scope::GceProject { project } | Scope::GceSnapshots { project } => ImageInfo {
            backend: Some(DiskBackend::Gce),
            account: Some(project.clone()),
            ..ImageInfo::default()
        },
        Scope::Ebs { account, region } | Scope::EbsSnapshots { account, region } => ImageInfo {
            backend: Some(DiskBackend::Ebs),
            account: account.clone(),
            region: Some(region.clone()),
            ..ImageInfo::default()
        },
        Scope::Azure {
            subscription,
            resource_group,
        }
        | Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => ImageInfo {
            backend: Some(DiskBackend::Azure),
            account: Some(subscription.clone()),
            resource_group: Some(resource_group.clone()),
            ..ImageInfo::default()
        },
    }
}

/// Where the census looks for the disk `source` names: its scope's location and the disk's
/// name (the `image` block of a `VolumeWithoutDisk` finding, which says where it was not found).
/// `None` for a disk no censused scope covers.
pub(crate) fn looked_in(census: &Census, source: &VolumeSourceInfo) -> Option<ImageInfo> {
    let r = disk_ref(source)?;
    match census.resolve(&r) {
        Resolved::In(key) => Some(ImageInfo {
            name: r.name().to_string(),
            ..image_location(key)
        }),
        Resolved::NotCensused | Resolved::NotYet => None,
    }
}

/// The scope a published finding's `image` block names: the inverse of [`image_location`], a
/// backend snapshot (`SnapshotWithoutContent`) told from a disk by its reason. `None` without an
/// `image` block.
/// An object written before `backend` was recorded holds a cloud disk's project or account in
/// `clusterID` and its zone or region in `pool`, and is read so.
pub(crate) fn recorded_scope(s: &VolumeLeftoverStatus) -> Option<Scope> {
    use crate::model::crd::DiskBackend;
    use crate::model::csi::{AZURE_DISK_CSI_DRIVER, EBS_CSI_DRIVER, GCE_PD_CSI_DRIVER};
    let (source, i) = (&s.source, s.image.as_ref()?);
    let snapshot = s.reason == Reason::SnapshotWithoutContent;
    let backend = i
        .backend
        .or(match (source.kind.as_str(), source.driver.as_deref()) {
            ("gcePersistentDisk", _) | ("csi", Some(GCE_PD_CSI_DRIVER)) => Some(DiskBackend::Gce),
            ("awsElasticBlockStore", _) | ("csi", Some(EBS_CSI_DRIVER)) => Some(DiskBackend::Ebs),
            ("azureDisk", _) | ("csi", Some(AZURE_DISK_CSI_DRIVER)) => Some(DiskBackend::Azure),
            _ => None,
        });
    // Before `backend`: the project or account in `clusterID`, the zone or region in `pool`.
    let legacy = i.backend.is_none();
    let or_legacy = |new: &Option<String>, old: &Option<String>| {
        new.clone()
            .or_else(|| legacy.then(|| old.clone()).flatten())
            .filter(|v| !v.is_empty())
    };
    let account = or_legacy(&i.account, &i.cluster_id);
    let location = or_legacy(&i.zone.clone().or_else(|| i.region.clone()), &i.pool);
    let text = |v: Option<String>| v.unwrap_or_default();
    Some(match backend {
        Some(DiskBackend::Gce) if snapshot => Scope::GceSnapshots {
            project: text(account),
        },
        Some(DiskBackend::Gce) => Scope::Gce {
            project: text(account),
            location: text(location),
        },
        Some(DiskBackend::Ebs) => {
            let region = text(or_legacy(&i.region, &i.pool));
            if snapshot {
                Scope::EbsSnapshots { account, region }
            } else {
                Scope::Ebs { account, region }
            }
        }
        Some(DiskBackend::Azure) => {
            let subscription = text(i.account.clone()).to_ascii_lowercase();
            let resource_group = text(i.resource_group.clone()).to_ascii_lowercase();
            if snapshot {
                Scope::AzureSnapshots {
                    subscription,
                    resource_group,
                }
            } else {
                Scope::Azure {
                    subscription,
                    resource_group,
                }
            }
        }
        Some(DiskBackend::Ceph) | None => Scope::Ceph(PoolKey::new(
            i.cluster_id.as_deref().unwrap_or_default(),
            i.pool.as_deref().unwrap_or_default(),
            i.rados_namespace.as_deref(),
        )),
    })
}

/// An orphan's hints, sorted: in use (something uses it), and whose it is cannot be told (no
/// ownership recorded, or only one side of the comparison names a cluster).
fn orphan_hints(d: &DiskFacts, owner: &Owner) -> Vec<Hint> {
    let mut hints = Vec::new();
    if !d.in_use.is_empty() {
        hints.push(Hint::DiskInUse);
    }
    if *owner == Owner::Unknown {
        hints.push(Hint::OwnerUnknown);
    }
    hints.sort();
    hints
}

/// An orphan's message: where the image is, whose ceph-csi says it was, and whether it is in
/// use.
fn orphan_message(key: &Scope, name: &str, d: &DiskFacts, cluster_name: Option<&str>) -> String {
    let what = match key {
        Scope::Ceph(key) => {
            let where_ = if key.namespace.is_empty() {
                format!("{}/{}", key.pool, name)
            } else {
                format!("{}/{}/{}", key.pool, key.namespace, name)
            };
            format!("RBD image {where_} (cluster {})", key.cluster_id)
        }
        Scope::Gce { project, location } => {
            format!("GCE persistent disk {name} (project {project}, {location})")
        }
        Scope::GceProject { project } | Scope::GceSnapshots { project } => {
            format!("GCE persistent disk {name} (project {project})")
        }
        Scope::Ebs { region, .. } | Scope::EbsSnapshots { region, .. } => {
            format!("EBS volume {name} ({region})")
        }
        Scope::Azure {
            subscription,
            resource_group,
        }
        | Scope::AzureSnapshots {
            subscription,
            resource_group,
        } => format!(
            "Azure managed disk {name} (subscription {subscription}, resource group {resource_group})"
        ),
    };
    let mut m = format!("{what} is not referenced by any PersistentVolume or tombstone.");
    m.push_str(&ownership_sentence(
        key,
        d.image_owner().as_ref(),
        cluster_name,
    ));
    if !d.in_use.is_empty() {
        let used = match key {
            Scope::Ceph(_) => "open or mapped by",
            _ => "attached to",
        };
        m.push_str(&format!(
            " It is {used} {}: in use, not a plain orphan.",
            d.in_use.join(", ")
        ));
    }
    m
}

/// What ceph-csi's ownership metadata says of the image (with its leading space), and how far
/// it can be trusted to be this cluster's: the pool may be shared with other clusters.
fn ownership_sentence(
    key: &Scope,
    owner: Option<&ImageOwner>,
    cluster_name: Option<&str>,
) -> String {
    // Who records the ownership (as a sentence's subject too), and what several clusters share.
    let (who, subject, shared) = match key {
        Scope::Ceph(_) => ("ceph-csi", "ceph-csi", "pool"),
        Scope::Gce { .. } | Scope::GceProject { .. } | Scope::GceSnapshots { .. } => {
            ("GCE PD CSI driver", "The GCE PD CSI driver", "project")
        }
        Scope::Ebs { .. } | Scope::EbsSnapshots { .. } => {
            ("EBS CSI driver", "The EBS CSI driver", "account")
        }
        Scope::Azure { .. } | Scope::AzureSnapshots { .. } => (
            "Azure Disk CSI driver",
            "The Azure Disk CSI driver",
            "resource group",
        ),
    };
    let Some(o) = owner else {
        return format!(
            " It carries no {who} ownership metadata: it may belong to another cluster sharing the {shared}, or to none."
        );
    };
    let pv = o.volume_name.as_deref().unwrap_or("?");
    let claim = match (&o.claim_namespace, &o.claim_name) {
        (Some(ns), Some(n)) => format!("{ns}/{n}"),
        _ => "?".into(),
    };
    let recorded = format!(" {subject} recorded it as PersistentVolume {pv} for claim {claim}");
    match (o.cluster_name.as_deref(), cluster_name) {
        (Some(c), Some(_)) => format!("{recorded} in this cluster ({c})."),
        (Some(c), None) => format!(
            "{recorded} in cluster {c}; this operator's clusterName is not configured, so it cannot tell whether that is this cluster."
        ),
        (None, _) => format!(
            "{recorded} without naming a cluster: it may belong to another cluster sharing the {shared}."
        ),
    }
}
