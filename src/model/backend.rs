//! What the decisions know of a storage backend, and the keys of what it censuses.
//!
//! A [`Scope`] is one census listing (a Ceph pool, a GCE zone of a project, an AWS region, an
//! Azure resource group): the unit that is trusted or Unknown as a whole. It carries its
//! backend's [`Backend`] words, so that the decisions can name its disks, say where they are and
//! word a finding about them without knowing which backend it is. Each backend implements
//! [`Backend`] in its own folder under `src/census/` (`vocabulary.rs`) and makes its scopes
//! there; nothing here or in `decide/` names a backend.
//!
//! A [`DiskRef`] is the disk (or backend snapshot) a volume's source or a content's handle
//! names, made by its backend's words the same way. Its runbook, the commands `explain` prints
//! for one of its disks or snapshots, is the backend's too ([`crate::model::runbook`]).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

use crate::model::crd::{ImageInfo, VolumeSourceInfo};
use crate::model::listing::ScopeListing;
use crate::model::runbook::{DiskRunbook, SnapshotRunbook};

/// What a scope holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKind {
    /// Disks (or images), named by PersistentVolumes.
    Disks,
    /// A project or account listed as a whole (GCE's aggregated listing). It holds no disk
    /// itself: each is in the scope of its zone or region, which joins the census when a
    /// listing names it ([`Backend::unlisted_scope`]). Its census is the whole listing, complete
    /// or failed, so that one that never works has a series and a log line of its own.
    Whole,
    /// Backend snapshots, named by VolumeSnapshotContents.
    Snapshots,
}

/// Who records a disk's ownership, in a finding's words: `who` in "It carries no {who}
/// ownership metadata", `subject` at the start of a sentence, and `shared`, what several
/// clusters may share ("pool", "project", "account").
#[derive(Clone, Copy, Debug)]
pub struct Recorder {
    /// "ceph-csi", "GCE PD CSI driver".
    pub who: &'static str,
    /// "ceph-csi", "The GCE PD CSI driver".
    pub subject: &'static str,
    /// "pool", "project", "account", "resource group".
    pub shared: &'static str,
}

/// A storage backend's words and keys, as the decisions use them: pure, no I/O (its listing is
/// [`crate::census::backend::Lister`]). Implemented once per backend, in its folder.
pub trait Backend: Send + Sync + 'static {
    /// The stable short name: `ceph`, `gce`, `ebs`, `azure`. Series and labels carry it.
    fn name(&self) -> &'static str;

    /// Its name in a sentence: `Ceph`, `GCE`, `EBS`, `Azure`.
    fn title(&self) -> &'static str;

    /// The scope's label: the `census_*` series' key, the logs' `pool` field, `scan`'s line. By
    /// default `<name>:<part>/<part>` (empty parts left out), `/snapshots` after a snapshot
    /// scope's: no label of one backend can be another's.
    fn label(&self, scope: &Scope) -> String {
        let mut label = format!("{}:", self.name());
        let parts: Vec<&str> = scope
            .parts()
            .iter()
            .map(String::as_str)
            .filter(|p| !p.is_empty())
            .collect();
        label.push_str(&parts.join("/"));
        if scope.kind() == ScopeKind::Snapshots {
            label.push_str("/snapshots");
        }
        label
    }

    /// What its disks are called, plural: `disks`; `images` (RBD).
    fn disks_are_called(&self) -> &'static str {
        "disks"
    }

    /// Whether a listing reads some disks' details apart from listing them (an RBD image's are
    /// an open each), so that `scan` lists it a third time with the details of the disks
    /// nothing names; a cloud listing has every disk's details.
    fn lists_details_apart(&self) -> bool {
        false
    }

    /// Whether its series and log lines are keyed `pool` (`cluster/pool[/namespace]`), as Ceph's
    /// were before the other backends came, rather than `backend` and `scope`.
    fn labelled_as_pool(&self) -> bool {
        false
    }

    /// The prefix of the VolumeLeftover names of its disks ([`Backend::leftover_name`]).
    fn object_prefix(&self) -> &'static str {
        self.name()
    }

    /// The VolumeLeftover's name for the disk `name` of `scope`: `<prefix>-<hash>-<name>`, the
    /// hash over the scope's parts (and, for a snapshot scope, a part no zone, region or account
    /// can be, so that no snapshot's name is a disk's) and the name. It must never change.
    fn leftover_name(&self, scope: &Scope, name: &str) -> String {
        let mut parts: Vec<&[u8]> = scope.parts().iter().map(|p| p.as_bytes()).collect();
        if scope.kind() == ScopeKind::Snapshots {
            parts.push(b"snapshots");
        }
        hashed_name(self.object_prefix(), &parts, name)
    }

    /// Where a finding's `image` block places a disk of `scope`: `backend`, and `account`,
    /// `region`, `zone` (or the backend's own fields).
    fn location(&self, scope: &Scope) -> ImageInfo;

    /// The source a finding about an unreferenced disk records: the one a volume naming it
    /// would have.
    fn source(&self, scope: &Scope, name: &str) -> VolumeSourceInfo;

    /// The disk (or snapshot) in a finding's first sentence: "GCE persistent disk d (project
    /// p, us-central1-a)".
    fn describe(&self, scope: &Scope, name: &str) -> String;

    /// The CSI driver whose volumes and snapshots it holds.
    fn csi_driver(&self) -> &'static str;

    /// Who records its disks' ownership.
    fn recorder(&self) -> Recorder;

    /// Whether the disk `name` holds a backend snapshot (ceph-csi's `csi-snap-` images), which a
    /// VolumeSnapshotContent names and no PV ever does: never a disk without a volume.
    fn holds_a_snapshot(&self, _name: &str) -> bool {
        false
    }

    /// What it says of a disk in use: "attached to" (instances), "open or mapped by" (an RBD
    /// image's watchers).
    fn in_use(&self) -> &'static str {
        "attached to"
    }

    /// The handle a VolumeSnapshotContent would carry for the snapshot `name` of `scope`.
    fn snapshot_handle(&self, _scope: &Scope, name: &str) -> String {
        name.to_string()
    }

    /// The scope a published finding's `image` block names (the inverse of
    /// [`Backend::location`]). `legacy`: written before `image.backend` was recorded, when a
    /// cloud disk's project or account was in `clusterID` and its zone or region in `pool`.
    fn recorded_scope(&self, image: &ImageInfo, legacy: bool, snapshot: bool) -> Scope;

    /// Whether a volume source of this `kind` (`csi`, `gcePersistentDisk`, ...) and CSI
    /// `driver` names one of its disks: how an object written before `image.backend` is read.
    fn names_source(&self, kind: &str, driver: &str) -> bool;

    /// The disk a volume's source names, when it is one of this backend's (its CSI driver's
    /// handle, or its in-tree source). A handle that does not parse names nothing: the volume is
    /// not censused.
    fn disk_ref(&self, source: &VolumeSourceInfo) -> Option<DiskRef>;

    /// The backend snapshot a VolumeSnapshotContent's handle names, when it is one of this
    /// backend's snapshot handles.
    fn snapshot_ref(&self, _handle: &str) -> Option<SnapshotHandleRef> {
        None
    }

    /// Its allocation unit: a disk's size is rounded up to a whole number of these (GCE, EBS
    /// and Azure: 1 GiB; ceph-csi: 1 MiB).
    fn granularity(&self) -> u64;

    /// Whether `scope` (one of its own) holds the disk `r`; `None` when that cannot be told
    /// before the scope's first listing (`listing` is its last, if any).
    fn holds(&self, scope: &Scope, listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool>;

    /// For a scope listed [as a whole](ScopeKind::Whole): the scope within it that would hold
    /// `r`, when there is one (`None` for other backends' disks).
    fn unlisted_scope(&self, _whole: &Scope, _r: &DiskRef) -> Option<Scope> {
        None
    }

    /// For a scope of disks: the scope listed as a whole that it is part of, when there is one.
    fn whole_of(&self, _scope: &Scope) -> Option<Scope> {
        None
    }

    /// The snapshot's name in `scope` (one of its snapshot scopes), when `scope` can hold it.
    fn snapshot_name_in<'a>(&self, scope: &Scope, r: &'a SnapshotHandleRef) -> Option<&'a str>;

    /// The project and the account a `scan` line names for a disk of `scope`; `None` for a
    /// backend whose lines have neither (Ceph's).
    fn cloud_keys(&self, scope: &Scope) -> Option<(Option<String>, Option<String>)>;

    /// The commands `explain` prints for the disk a finding records: its CLI's, with where the
    /// disk is read from the record (the census's `image` before the source).
    fn disk_runbook(&self, disk: DiskRecord<'_>) -> Box<dyn DiskRunbook>;

    /// The commands `explain` prints for the backend snapshot a finding records (its handle
    /// read by [`Backend::snapshot_ref`], else the census's `image`).
    fn snapshot_runbook(&self, snapshot: SnapshotRecord<'_>) -> Box<dyn SnapshotRunbook>;
}

/// What a finding records of its disk: the PV's source (or, for a disk no PV names, the one a
/// PV naming it would have) and where the census found it (`image`; `None` for a finding about a
/// backend snapshot, whose `image` block is the snapshot's).
#[derive(Clone, Copy, Debug)]
pub struct DiskRecord<'a> {
    /// The source.
    pub source: &'a VolumeSourceInfo,
    /// The disk the source names, read by its backend ([`Backend::disk_ref`]).
    pub named: Option<&'a DiskRef>,
    /// The census's record of the disk.
    pub image: Option<&'a ImageInfo>,
}

/// What a finding records of its backend snapshot: the content's handle, the CSI driver, and
/// where the census found it (`image`), for a snapshot no content names.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotRecord<'a> {
    /// The VolumeSnapshotContent's `snapshotHandle`.
    pub handle: Option<&'a str>,
    /// The snapshot the handle names, read by its backend
    /// ([`Backend::snapshot_ref`]).
    pub named: Option<&'a SnapshotHandleRef>,
    /// The CSI driver.
    pub driver: Option<&'a str>,
    /// The census's record of the snapshot.
    pub image: Option<&'a ImageInfo>,
}

/// A disk (or image, or backend snapshot) as a volume's source or a content's handle names it,
/// for any backend: its name in its scope and the parts of where it is that the source says, in
/// the backend's order (`None` where the source does not say; the census then finds its scope
/// only when exactly one censused scope can hold it). Made only by its backend
/// ([`Backend::disk_ref`], [`Backend::snapshot_ref`]).
#[derive(Clone)]
pub struct DiskRef {
    backend: &'static dyn Backend,
    name: String,
    parts: Box<[Option<String>]>,
}

/// A backend snapshot, as a VolumeSnapshotContent's handle names it.
pub type SnapshotHandleRef = DiskRef;

impl DiskRef {
    /// A disk of `backend`.
    pub fn new(
        backend: &'static dyn Backend,
        name: impl Into<String>,
        parts: impl IntoIterator<Item = Option<String>>,
    ) -> DiskRef {
        DiskRef {
            backend,
            name: name.into(),
            parts: parts.into_iter().collect(),
        }
    }

    /// Its backend's words.
    pub fn backend(&self) -> &'static dyn Backend {
        self.backend
    }

    /// The name the census lists it by: the image's name, the disk's name, the volume id.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Part `i` of where it is, when the source says it.
    pub fn part(&self, i: usize) -> Option<&str> {
        self.parts.get(i).and_then(|p| p.as_deref())
    }

    /// Whether it is one of `backend`'s.
    pub fn is_of(&self, backend: &dyn Backend) -> bool {
        self.backend.name() == backend.name()
    }
}

impl PartialEq for DiskRef {
    fn eq(&self, other: &DiskRef) -> bool {
        (self.backend.name(), &self.name, &self.parts)
            == (other.backend.name(), &other.name, &other.parts)
    }
}

impl Eq for DiskRef {}

impl fmt::Debug for DiskRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DiskRef({}:{} at {:?})",
            self.backend.name(),
            self.name,
            self.parts
        )
    }
}

/// Backends are told apart by name.
impl PartialEq for dyn Backend {
    fn eq(&self, other: &dyn Backend) -> bool {
        self.name() == other.name()
    }
}

impl Eq for dyn Backend {}

impl fmt::Debug for dyn Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One census listing's key: its backend, what it holds, and its parts in the backend's own
/// order (a Ceph pool: cluster id, pool, namespace; a GCE zone: project, zone). Made only by
/// its backend. Compared, ordered and hashed by backend name, kind and parts.
#[derive(Clone)]
pub struct Scope {
    backend: &'static dyn Backend,
    kind: ScopeKind,
    parts: Box<[String]>,
}

impl Scope {
    /// A scope of `backend`.
    pub fn new<S: Into<String>>(
        backend: &'static dyn Backend,
        kind: ScopeKind,
        parts: impl IntoIterator<Item = S>,
    ) -> Scope {
        Scope {
            backend,
            kind,
            parts: parts.into_iter().map(Into::into).collect(),
        }
    }

    /// Its backend's words.
    pub fn backend(&self) -> &'static dyn Backend {
        self.backend
    }

    /// What it holds.
    pub fn kind(&self) -> ScopeKind {
        self.kind
    }

    /// Its parts, in its backend's order.
    pub fn parts(&self) -> &[String] {
        &self.parts
    }

    /// Part `i`, empty when it has none.
    pub fn part(&self, i: usize) -> &str {
        self.parts.get(i).map_or("", String::as_str)
    }

    /// Whether it holds backend snapshots (named by VolumeSnapshotContents), not disks (named
    /// by PersistentVolumes).
    pub fn holds_snapshots(&self) -> bool {
        self.kind == ScopeKind::Snapshots
    }

    fn key(&self) -> (&'static str, ScopeKind, &[String]) {
        (self.backend.name(), self.kind, &self.parts)
    }
}

impl PartialEq for Scope {
    fn eq(&self, other: &Scope) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Scope {}

impl PartialOrd for Scope {
    fn partial_cmp(&self, other: &Scope) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scope {
    fn cmp(&self, other: &Scope) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl Hash for Scope {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl SnapshotHandleRef {
    /// Its name in `scope`, when `scope` can hold it (its backend tells).
    pub(crate) fn name_in(&self, scope: &Scope) -> Option<&str> {
        scope.backend().snapshot_name_in(scope, self)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.backend.label(self))
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({self})")
    }
}

/// `<prefix>-<hash>-<name, lower-cased and cleaned>`: the hash is FNV-1a (64 bits) of `parts`
/// and `name`, each followed by a NUL but the last, stable across versions and platforms (the
/// name must never change). A valid object name for any parts and name (at most 253
/// characters), and unlike any PV name a provisioner makes.
pub fn hashed_name(prefix: &str, parts: &[&[u8]], image: &str) -> String {
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
