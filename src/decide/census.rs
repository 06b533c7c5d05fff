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
//! **Every backend** (Ceph RBD, GCE persistent disks, EBS volumes, Azure managed disks) produces
//! [`ScopeListing`]s for its own [`Scope`]s, and [`Census::disk_ref`] names its disks; the answers, the
//! confirmation rule and the findings are the same for every backend. What differs (which scope
//! holds a disk, a finding's words, where its `image` block places it) is asked of the scope's
//! [`Backend`], implemented in the backend's folder: nothing here names one.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::crd::{
    Hint, ImageInfo, ImageOwner, Reason, State, Subject, VolumeLeftoverStatus, VolumeSourceInfo,
};
use crate::model::finding::Finding;
pub use crate::model::image::ImageFound;

pub use crate::model::backend::Backend;
use crate::model::backend::Recorder;
pub use crate::model::backend::{DiskRef, Scope, SnapshotHandleRef};
// What the GCE and EBS listers build (unused by a build without them).
#[cfg_attr(not(any(feature = "gce", feature = "ebs")), allow(unused_imports))]
pub(crate) use crate::model::listing::CreatedFor;
pub(crate) use crate::model::listing::{DiskFacts, FailureCategory, Owner};
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
    /// Each scope's state (a scope joins through [`Census::new`] or [`Census::admit`] only:
    /// the backends' list below follows them).
    pub(crate) pools: BTreeMap<Scope, ScopeState>,
    /// This Kubernetes cluster's name in ceph-csi's metadata.
    pub(crate) cluster_name: Option<String>,
    /// How old an unreferenced image must be before it is a finding.
    pub(crate) image_grace: Duration,
    /// The scopes listed as a whole (a GCE project's aggregated listing), with their own
    /// cluster name when their section names one: the scopes within them (zones and regions)
    /// are known only once a listing names them, and are [admitted](Census::admit) then.
    pub(crate) open: BTreeMap<Scope, Option<String>>,
    /// The backends of its scopes and open scopes, each once: which backends' words name a
    /// volume's disk, asked for every PV of every report (scopes are only ever added, so the
    /// list is kept as they are, not found again each time).
    backends: Vec<&'static dyn Backend>,
    /// The scopes and open scopes a result was recorded for, a listing or a failure: a disk of
    /// a scope not in it is one the census has not answered about yet ([`Census::has_answered`]).
    answered: BTreeSet<Scope>,
}

impl Census {
    /// No census yet: every pool answers Unknown. `cluster_name` is this Kubernetes cluster's
    /// name in the backend's ownership metadata.
    pub fn new(
        pools: impl IntoIterator<Item = impl Into<Scope>>,
        cluster_name: Option<&str>,
        image_grace: Duration,
    ) -> Census {
        let pools: BTreeMap<Scope, ScopeState> = pools
            .into_iter()
            .map(|k| (k.into(), ScopeState::default()))
            .collect();
        let mut c = Census {
            cluster_name: cluster_name.filter(|n| !n.is_empty()).map(str::to_string),
            image_grace,
            open: BTreeMap::new(),
            backends: Vec::new(),
            pools: BTreeMap::new(),
            answered: BTreeSet::new(),
        };
        for scope in pools.keys() {
            c.note_backend(scope.backend());
        }
        c.pools = pools;
        c
    }

    /// The state of `scope`, when it is censused.
    pub fn scope_state(&self, scope: &Scope) -> Option<&ScopeState> {
        self.pools.get(scope)
    }

    /// Keeps `backend` among the census's backends.
    fn note_backend(&mut self, backend: &'static dyn Backend) {
        if !self.backends.contains(&backend) {
            self.backends.push(backend);
        }
    }

    /// Names this cluster as `scope`'s section does (`None`: as the file does).
    pub fn name_cluster(&mut self, scope: &Scope, cluster_name: Option<&str>) {
        if let Some(st) = self.pools.get_mut(scope) {
            st.cluster_name = cluster_name.filter(|n| !n.is_empty()).map(str::to_string);
        }
    }

    /// A scope listed as a whole (a GCE project's aggregated listing): the scopes within it
    /// join as listings name them, with `cluster_name` (its section's, `None`: the file's).
    pub fn open_whole(&mut self, whole: Scope, cluster_name: Option<&str>) {
        self.note_backend(whole.backend());
        self.open.insert(
            whole,
            cluster_name.filter(|n| !n.is_empty()).map(str::to_string),
        );
    }

    /// Admits a scope a listing names: one within a scope [listed as a
    /// whole](Census::open_whole), Unknown until its census is recorded. True when the scope
    /// is censused (admitted now or before); a scope of nothing configured is not.
    pub fn admit(&mut self, scope: &Scope) -> bool {
        if self.pools.contains_key(scope) {
            return true;
        }
        let Some(name) = self.whole_of(scope).map(|(_, name)| name.clone()) else {
            return false;
        };
        let st = ScopeState {
            cluster_name: name,
            ..ScopeState::default()
        };
        self.note_backend(scope.backend());
        self.pools.insert(scope.clone(), st);
        true
    }

    /// The open scope `scope` is within, with its cluster name.
    fn whole_of(&self, scope: &Scope) -> Option<(&Scope, &Option<String>)> {
        let whole = scope.backend().whole_of(scope)?;
        self.open.get_key_value(&whole)
    }

    /// Whether a census may ever answer for `scope`: it is censused, or within an open scope
    /// and not listed yet.
    pub fn covers(&self, scope: &Scope) -> bool {
        self.pools.contains_key(scope) || self.whole_of(scope).is_some()
    }

    /// The backends of the censused scopes, each once.
    fn backends(&self) -> &[&'static dyn Backend] {
        &self.backends
    }

    /// The disk a volume's source names, when it is a disk of a censused backend (a disk of
    /// another backend is not censused, whatever it is).
    pub fn disk_ref(&self, source: &VolumeSourceInfo) -> Option<DiskRef> {
        self.backends().iter().find_map(|b| b.disk_ref(source))
    }

    /// The backend snapshot a VolumeSnapshotContent's handle names, when it is one of a
    /// censused backend's.
    pub fn snapshot_ref(&self, handle: &str) -> Option<SnapshotHandleRef> {
        self.backends().iter().find_map(|b| b.snapshot_ref(handle))
    }

    /// The scope a published finding's `image` block names, when its backend is censused: the
    /// inverse of [`Backend::location`], a backend snapshot (`SnapshotWithoutContent`) told
    /// from a disk by its reason. `None` without an `image` block.
    ///
    /// An object written before `image.backend` was recorded is read by its source's kind and
    /// driver (and a cloud disk's project or account from `clusterID`, its zone or region from
    /// `pool`, where that version wrote them).
    pub(crate) fn recorded_scope(&self, s: &VolumeLeftoverStatus) -> Option<Scope> {
        let i = s.image.as_ref()?;
        let snapshot = s.reason == Reason::SnapshotWithoutContent;
        let mut backends = self.backends().iter().copied();
        let backend = match &i.backend {
            Some(b) => backends.find(|x| x.name() == b.as_str())?,
            None => {
                let (kind, driver) = (&s.source.kind, s.source.driver.as_deref());
                backends.find(|x| x.names_source(kind, driver.unwrap_or_default()))?
            }
        };
        Some(backend.recorded_scope(i, i.backend.is_none(), snapshot))
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
        // An open scope answers with its own report, the last of its listing's (after those of
        // the scopes within it), not with theirs.
        self.answered.insert(key.clone());
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

    /// Forgets the details of the disks of `key`'s listing that `referenced` holds, but their
    /// size and how many use them ([`Seen::forget_details`]). The rest is what a finding about a
    /// disk nothing names shows a person looking for its owner, and nothing else reads it. A
    /// disk named when its listing was compared is no such finding from that listing (its
    /// orphans are found only then), and the next listing reads it whole again. Most disks are
    /// named, and their details were most of what a cloud census kept per disk (twice: the
    /// listing before is kept too).
    pub(crate) fn forget_details(&mut self, key: &Scope, referenced: &HashSet<String>) {
        let Some(listing) = self
            .pools
            .get_mut(key)
            .and_then(|st| st.current.as_mut())
            .and_then(Arc::get_mut)
        else {
            return;
        };
        for name in referenced {
            if let Some(seen) = listing.images.get_mut(name) {
                seen.forget_details();
            }
        }
    }

    /// Whether the pool's census may be trusted now.
    pub(crate) fn is_trusted(&self, key: &Scope) -> bool {
        self.pools.get(key).is_some_and(|s| s.trusted().is_some())
    }

    /// The censused scope a disk is in: the one scope that holds it, as its backend tells.
    ///
    /// What the volume does not say (an in-tree disk's project, an EBS volume's region) matches
    /// any scope, so a disk that two scopes could hold is not censused rather than guessed. A
    /// scope that cannot tell before its first listing (a Ceph pool a handle names by id) makes
    /// the disk [`Resolved::NotYet`] while no other holds it; so does the one scope within an
    /// [open scope](Census::open_whole) that could hold it and that no listing has named yet.
    pub(crate) fn resolve(&self, r: &DiskRef) -> Resolved<'_> {
        let mut holding = None;
        let (mut several, mut cannot_tell) = (false, false);
        for (scope, st) in &self.pools {
            let last = st.current.as_deref().or(st.previous.as_deref());
            match scope.backend().holds(scope, last, r) {
                Some(true) if holding.is_some() => several = true,
                Some(true) => holding = Some(scope),
                Some(false) => {}
                None => cannot_tell = true,
            }
        }
        let unlisted = self
            .open
            .keys()
            .filter_map(|whole| whole.backend().unlisted_scope(whole, r))
            .filter(|s| !self.pools.contains_key(s))
            .count();
        match (holding, several, unlisted) {
            (Some(one), false, 0) => Resolved::In(one),
            (None, _, 0) if cannot_tell => Resolved::NotYet,
            (None, _, 1) => Resolved::NotYet,
            _ => Resolved::NotCensused,
        }
    }

    /// Whether the census has answered about the disk `r`: a result, listing or failure, was
    /// recorded for the scope that holds it (for a disk no scope can place yet, for every scope
    /// and open scope of its backend). Until then what it will say is not known, and a verdict
    /// that would carry it waits: written before, it would be written again once the census
    /// answers (at every restart, a published size removed, then put back).
    pub fn has_answered(&self, r: &DiskRef) -> bool {
        match self.resolve(r) {
            Resolved::In(key) => self.answered.contains(key),
            Resolved::NotCensused => true,
            Resolved::NotYet => self
                .pools
                .keys()
                .chain(self.open.keys())
                .filter(|s| r.is_of(s.backend()) && !s.holds_snapshots())
                .all(|s| self.answered.contains(s)),
        }
    }

    /// Whether a result was recorded for `scope`.
    pub(crate) fn answered(&self, scope: &Scope) -> bool {
        self.answered.contains(scope)
    }

    /// Whether every scope of disks (and every scope listed as a whole) has answered once, a
    /// listing or a failure: until then some verdicts may wait for it ([`Census::has_answered`]).
    /// Snapshot scopes are not counted: no volume's verdict waits for them.
    pub(crate) fn answered_everywhere(&self) -> bool {
        self.pools
            .keys()
            .chain(self.open.keys())
            .filter(|s| !s.holds_snapshots())
            .all(|s| self.answered.contains(s))
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
                watchers: seen.users(),
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
            .filter_map(|(scope, st)| Some((scope.backend().snapshot_name_in(scope, r)?, st)))
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
            // A disk that holds a snapshot belongs to its VolumeSnapshotContent, not to a PV.
            .filter(|n| !key.backend().holds_a_snapshot(n))
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

/// The VolumeLeftover's name for a disk nothing references ([`Backend::leftover_name`]):
/// `rbd-<hash>-<image>` for an RBD image, `gce-<hash>-<name>`, `ebs-<hash>-<volume id>`, ...,
/// the hash over the scope's parts and the name.
pub fn disk_leftover_name(scope: &Scope, name: &str) -> String {
    scope.backend().leftover_name(scope, name)
}

pub(crate) use crate::model::backend::hashed_name;

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
            source: key.backend().source(key, name),
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
    let size = i64::try_from(d.size).ok();
    let (driver, what) = (
        key.backend().csi_driver(),
        key.backend().describe(key, name),
    );
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
                snapshot_handle: Some(key.backend().snapshot_handle(key, name)),
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
    let mut i = key.backend().location(key);
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

/// Where the census looks for the disk `source` names: its scope's location and the disk's
/// name (the `image` block of a `VolumeWithoutDisk` finding, which says where it was not found).
/// `None` for a disk no censused scope covers.
pub(crate) fn looked_in(census: &Census, source: &VolumeSourceInfo) -> Option<ImageInfo> {
    let r = census.disk_ref(source)?;
    match census.resolve(&r) {
        Resolved::In(key) => Some(ImageInfo {
            name: r.name().to_string(),
            ..key.backend().location(key)
        }),
        Resolved::NotCensused | Resolved::NotYet => None,
    }
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
    let what = key.backend().describe(key, name);
    let mut m = format!("{what} is not referenced by any PersistentVolume or tombstone.");
    m.push_str(&ownership_sentence(
        key,
        d.image_owner().as_ref(),
        cluster_name,
    ));
    if !d.in_use.is_empty() {
        m.push_str(&format!(
            " It is {} {}: in use, not a plain orphan.",
            key.backend().in_use(),
            d.in_use.join(", ")
        ));
    }
    m
}

/// What the backend's ownership metadata (ceph-csi's, the CSI driver's tags) says of the disk
/// (with its leading space), and how far it can be trusted to be this cluster's: the pool,
/// project or account may be shared with other clusters.
fn ownership_sentence(
    key: &Scope,
    owner: Option<&ImageOwner>,
    cluster_name: Option<&str>,
) -> String {
    // Who records the ownership (as a sentence's subject too), and what several clusters share.
    let Recorder {
        who,
        subject,
        shared,
    } = key.backend().recorder();
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
