//! Classification of CSI snapshot objects: VolumeSnapshotContents that outlived their
//! VolumeSnapshots, and VolumeSnapshots whose content is gone. Pure: no client, no clock (the
//! time is an argument).
//!
//! The rules follow what external-snapshotter's snapshot-controller v8.7.0 does
//! (docs/snapshot-controller-notes.md, `pkg/common-controller/snapshot_controller.go`):
//!
//! - a VolumeSnapshot being deleted gets its content annotated
//!   [`crate::model::snapshot::ANN_SNAPSHOT_BEING_DELETED`]; a Retain content then stays, still
//!   naming the gone snapshot's name and uid; a Delete content is deleted by the controller, and
//!   the snapshot keeps its bound-protection finalizer until the driver's sidecar has deleted the
//!   backend snapshot and the content. So in a normal delete the content goes *before* the
//!   snapshot, and a Delete content whose snapshot is gone was left behind, unless the two stores
//!   are only out of step (the delete grace covers that);
//! - the controller never deletes a content whose snapshot is gone ("to avoid data loss"), and
//!   never lets a new snapshot of the same name take over a content bound to an old uid;
//! - it binds a pre-provisioned content and the snapshot that name each other, one pair at a
//!   time: behind a backlog that takes longer than any grace ([`binding`]).
//!
//! As for volumes, "don't know" never becomes "missing": a forbidden or stale store makes the
//! verdict [`SnapshotVerdict::Undecided`], never a finding.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub(crate) use crate::decide::lookup::Found;
use crate::decide::plan::Graces;
use crate::model::snapshot::{DeletionPolicy, Snapshot, SnapshotContent, SnapshotExclusion};
use crate::model::uid::Uid;

/// What is known about a VolumeSnapshot, looked up by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFacts {
    /// `metadata.uid`.
    pub(crate) uid: String,
    /// `metadata.deletionTimestamp`: set while its delete waits on finalizers.
    pub(crate) deleting_since: Option<Time>,
    /// `spec.source.volumeSnapshotContentName`: the pre-provisioned content it is to bind.
    pub(crate) source_content: Option<String>,
}

/// What is known about a VolumeSnapshotContent, looked up by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContentFacts {
    /// `metadata.uid`.
    pub(crate) uid: String,
}

/// Read access to VolumeSnapshots (for classifying contents).
pub trait SnapshotLookup {
    /// The VolumeSnapshot `namespace/name`.
    fn snapshot(&self, namespace: &str, name: &str) -> Found<SnapshotFacts>;
}

/// Read access to VolumeSnapshotContents (for classifying snapshots).
pub trait ContentLookup {
    /// The VolumeSnapshotContent `name`.
    fn content(&self, name: &str) -> Found<ContentFacts>;
}

/// The facts a lookup answers about a stored snapshot (the operator's store and `scan` both
/// build them here).
pub fn snapshot_facts(s: &Snapshot) -> SnapshotFacts {
    SnapshotFacts {
        uid: s
            .metadata
            .uid
            .as_ref()
            .map(Uid::to_string)
            .unwrap_or_default(),
        deleting_since: s.metadata.deletion_timestamp.as_deref().cloned(),
        source_content: s
            .spec
            .source
            .volume_snapshot_content_name
            .as_deref()
            .map(str::to_string),
    }
}

/// The facts a lookup answers about a stored content.
pub fn content_facts(c: &SnapshotContent) -> ContentFacts {
    ContentFacts {
        uid: c
            .metadata
            .uid
            .as_ref()
            .map(Uid::to_string)
            .unwrap_or_default(),
    }
}

/// Why a snapshot object is a leftover. The names read like the volume reasons
/// (`ClaimDeleted`, `ClaimRecreated`, `BoundClaimMissing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SnapshotReason {
    /// A Retain content whose VolumeSnapshot (by namespace, name and uid) no longer exists: the
    /// backend snapshot stays and is billed, and nothing will ever delete it.
    SnapshotDeleted,
    /// A Retain content whose VolumeSnapshot's name now belongs to another snapshot (another
    /// uid). The controller never rebinds it: the new snapshot is refused
    /// (`SnapshotContentMisbound`) and the content is as orphaned as with `SnapshotDeleted`.
    SnapshotRecreated,
    /// A Delete content whose VolumeSnapshot is deleted (gone, recreated under another uid, or
    /// terminating after the controller started the content's delete: annotated or deleted),
    /// still here past `--delete-grace`: the backend delete hung, or the snapshot's finalizers
    /// were removed by hand and nothing deletes the content any more.
    SnapshotDeleteStuck,
    /// A pre-provisioned content (`spec.source.snapshotHandle`) that no VolumeSnapshot ever
    /// bound (`spec.volumeSnapshotRef.uid` empty) past `--grace` after its creation, and that
    /// the VolumeSnapshot it names does not name back (a pair naming each other is being bound,
    /// however long the controller's backlog: [`binding`]).
    ContentNeverBound,
    /// A Bound VolumeSnapshot (`status.boundVolumeSnapshotContentName`) whose content no longer
    /// exists: restores from it fail, and the backend snapshot may or may not remain.
    SnapshotContentMissing,
    /// The tombstone of a Retain content that was deleted: the driver's sidecar removes its
    /// finalizer without deleting the backend snapshot, which stays, billed, with no object left
    /// that names it (the finding keeps its handle, driver, size, class and source volume).
    ContentDeleted,
}

impl SnapshotReason {
    /// The name, as a label value and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotReason::SnapshotDeleted => "SnapshotDeleted",
            SnapshotReason::SnapshotRecreated => "SnapshotRecreated",
            SnapshotReason::SnapshotDeleteStuck => "SnapshotDeleteStuck",
            SnapshotReason::ContentNeverBound => "ContentNeverBound",
            SnapshotReason::SnapshotContentMissing => "SnapshotContentMissing",
            SnapshotReason::ContentDeleted => "ContentDeleted",
        }
    }
}

impl std::fmt::Display for SnapshotReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The object a finding is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotSubject {
    /// A VolumeSnapshotContent (cluster-scoped).
    Content {
        /// `metadata.name`.
        name: String,
        /// `metadata.uid`.
        uid: String,
    },
    /// A VolumeSnapshot.
    Snapshot {
        /// `metadata.namespace`.
        namespace: String,
        /// `metadata.name`.
        name: String,
        /// `metadata.uid`.
        uid: String,
    },
}

/// One snapshot finding: the facts a VolumeLeftover's status would carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFinding {
    /// Why it is a leftover.
    pub reason: SnapshotReason,
    /// The object it is about.
    pub subject: SnapshotSubject,
    /// The VolumeSnapshotContent: the subject's name, or the name a snapshot is bound to.
    pub content_name: Option<String>,
    /// The VolumeSnapshot the content names (`spec.volumeSnapshotRef`), or the subject itself,
    /// as `namespace/name`.
    pub snapshot_ref: Option<String>,
    /// The uid the content names (`spec.volumeSnapshotRef.uid`): the gone snapshot's.
    pub snapshot_uid: Option<String>,
    /// `SnapshotRecreated` (and a recreated `SnapshotDeleteStuck`): the uid of the snapshot
    /// that has the name now.
    pub snapshot_uid_now: Option<String>,
    /// `spec.deletionPolicy` of the content.
    pub deletion_policy: Option<DeletionPolicy>,
    /// `spec.driver` of the content.
    pub driver: Option<String>,
    /// The backend snapshot: `status.snapshotHandle`, or for a pre-provisioned content without
    /// a status, `spec.source.snapshotHandle`.
    pub snapshot_handle: Option<String>,
    /// `spec.source.volumeHandle` of the content: the CSI volume the snapshot was cut from (the
    /// PV that has this handle, if any, is the caller's to find).
    pub source_volume_handle: Option<String>,
    /// A snapshot's `spec.source.persistentVolumeClaimName` (same namespace).
    pub source_claim: Option<String>,
    /// The restore size in bytes: the content's `status.restoreSize`, or the snapshot's
    /// quantity.
    pub restore_size_bytes: Option<i64>,
    /// `spec.volumeSnapshotClassName`.
    pub class: Option<String>,
    /// `status.readyToUse`.
    pub ready_to_use: Option<bool>,
    /// The content carries the being-deleted annotation: its snapshot's delete was seen by the
    /// snapshot-controller, so "gone" is not a store's delay.
    pub snapshot_delete_seen: bool,
    /// When the state began, where the objects date it (the content's or the snapshot's
    /// `deletionTimestamp`, the content's `creationTimestamp`, a tombstone's deletion); `None`:
    /// when first observed.
    pub since: Option<Time>,
    /// The sentence a status and a log would carry.
    pub message: String,
}

/// Why a snapshot object cannot be decided now; its `Display` is the sentence logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotUndecided {
    /// The VolumeSnapshot store is stale: its answer is not used.
    SnapshotStoreStale {
        /// The content's name.
        content: String,
    },
    /// VolumeSnapshots cannot be read (forbidden).
    SnapshotsForbidden {
        /// The content's name.
        content: String,
    },
    /// The VolumeSnapshotContent store is stale: its answer is not used.
    ContentStoreStale {
        /// The snapshot, `namespace/name`.
        snapshot: String,
    },
    /// VolumeSnapshotContents cannot be read (forbidden).
    ContentsForbidden {
        /// The snapshot, `namespace/name`.
        snapshot: String,
    },
}

impl std::fmt::Display for SnapshotUndecided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotUndecided::SnapshotStoreStale { content } => write!(
                f,
                "the VolumeSnapshot store is stale; VolumeSnapshotContent {content} waits until it has resynced"
            ),
            SnapshotUndecided::SnapshotsForbidden { content } => write!(
                f,
                "VolumeSnapshots cannot be read; whether the snapshot of VolumeSnapshotContent {content} exists is unknown"
            ),
            SnapshotUndecided::ContentStoreStale { snapshot } => write!(
                f,
                "the VolumeSnapshotContent store is stale; VolumeSnapshot {snapshot} waits until it has resynced"
            ),
            SnapshotUndecided::ContentsForbidden { snapshot } => write!(
                f,
                "VolumeSnapshotContents cannot be read; whether the content of VolumeSnapshot {snapshot} exists is unknown"
            ),
        }
    }
}

/// The verdict on one snapshot object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotVerdict {
    /// Not a finding (bound both ways, being created, or passing through a normal delete).
    Healthy,
    /// A finding. Its [`grace_of`] says how long the caller still holds it back when its clock
    /// starts at the first observation.
    Leftover(Box<SnapshotFinding>),
    /// A state that becomes this finding once the grace the objects date has passed (`until`);
    /// until then it is normally only passing through, and nothing is published.
    Waiting {
        /// The finding it would be.
        reason: SnapshotReason,
        /// When it becomes one, if nothing changes.
        until: Time,
    },
    /// Cannot be decided now: what is published stays as it is.
    Undecided(SnapshotUndecided),
    /// Kept on purpose (a backup tool's, or the ignore label): never a finding.
    Excluded(SnapshotExclusion),
    /// Too odd to say anything sensible about; the string says why (for a log).
    Skip(String),
}

/// Which grace a reason waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraceKind {
    /// Published at once.
    None,
    /// `--grace`: races between the two watches, and hand-made half states.
    Grace,
    /// `--delete-grace`: a normal snapshot delete is in progress.
    DeleteGrace,
}

/// Where a snapshot finding's grace clock starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotClock {
    /// At the first time this process saw the state (the objects do not date it).
    Observed,
    /// At this time, which the objects carry, so a restart does not restart the clock (the
    /// classifier has already held the state back until it passed).
    At(Time),
}

/// The grace each reason waits, and its rule:
///
/// | reason | grace | clock |
/// |---|---|---|
/// | `SnapshotDeleted`, `SnapshotRecreated` | `--grace`, none when the content carries the being-deleted annotation | observed |
/// | `SnapshotDeleteStuck` | `--delete-grace` | the content's `deletionTimestamp`, else the snapshot's, else observed |
/// | `ContentNeverBound` | `--grace` | the content's `creationTimestamp` (else observed) |
/// | `SnapshotContentMissing` | `--grace` | observed |
/// | `ContentDeleted` | none: the delete was observed (or the content's absence after a relist) | the deletion |
///
/// A Retain content's snapshot can look gone only because the snapshot store has not yet seen
/// a snapshot the content store already shows bound (a new snapshot binds within seconds); the
/// being-deleted annotation rules that out, since the controller sets it only on the content of
/// a snapshot it saw being deleted.
pub fn grace_kind(f: &SnapshotFinding) -> GraceKind {
    match f.reason {
        SnapshotReason::SnapshotDeleted | SnapshotReason::SnapshotRecreated => {
            if f.snapshot_delete_seen {
                GraceKind::None
            } else {
                GraceKind::Grace
            }
        }
        SnapshotReason::SnapshotDeleteStuck => GraceKind::DeleteGrace,
        SnapshotReason::ContentNeverBound | SnapshotReason::SnapshotContentMissing => {
            GraceKind::Grace
        }
        SnapshotReason::ContentDeleted => GraceKind::None,
    }
}

/// The grace a finding's state needs, and where its clock starts (see [`grace_kind`]).
pub fn grace_of(f: &SnapshotFinding, graces: Graces) -> (Duration, SnapshotClock) {
    let grace = match grace_kind(f) {
        GraceKind::None => Duration::ZERO,
        GraceKind::Grace => graces.grace,
        GraceKind::DeleteGrace => graces.delete_grace,
    };
    let clock = f
        .since
        .clone()
        .map_or(SnapshotClock::Observed, SnapshotClock::At);
    (grace, clock)
}

/// `t + d`, saturating.
fn plus(t: &Time, d: Duration) -> Time {
    let d = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    Time(t.0.checked_add(d).unwrap_or(jiff::Timestamp::MAX))
}

/// The facts of a content every content finding carries; the reason's own are set after.
fn content_finding(c: &SnapshotContent, uid: &str, reason: SnapshotReason) -> SnapshotFinding {
    let spec = &c.spec;
    let status = c.status.as_ref();
    let r = &spec.volume_snapshot_ref;
    SnapshotFinding {
        reason,
        subject: SnapshotSubject::Content {
            name: c.metadata.name.to_string(),
            uid: uid.to_string(),
        },
        content_name: Some(c.metadata.name.to_string()),
        snapshot_ref: match (r.namespace.as_deref(), r.name.as_deref()) {
            (Some(ns), Some(name)) => Some(format!("{ns}/{name}")),
            _ => None,
        },
        snapshot_uid: r.uid.as_ref().filter(|u| !u.is_empty()).map(Uid::to_string),
        snapshot_uid_now: None,
        deletion_policy: spec.deletion_policy,
        driver: spec.driver.as_deref().map(str::to_string),
        snapshot_handle: status
            .and_then(|s| s.snapshot_handle.as_deref())
            .or(spec.source.snapshot_handle.as_deref())
            .map(str::to_string),
        source_volume_handle: spec.source.volume_handle.as_deref().map(str::to_string),
        source_claim: None,
        restore_size_bytes: status.and_then(|s| s.restore_size),
        class: spec
            .volume_snapshot_class_name
            .as_deref()
            .map(str::to_string),
        ready_to_use: status.and_then(|s| s.ready_to_use),
        snapshot_delete_seen: c.metadata.snapshot_being_deleted,
        since: None,
        message: String::new(),
    }
}

/// Classifies one VolumeSnapshotContent by whether the VolumeSnapshot it names still exists.
/// `now` and the graces hold back the states whose start the objects date (see [`grace_of`]).
pub fn classify_content(
    content: &SnapshotContent,
    lookup: &impl SnapshotLookup,
    now: Time,
    graces: Graces,
) -> SnapshotVerdict {
    let name = &*content.metadata.name;
    if name.is_empty() {
        return SnapshotVerdict::Skip("VolumeSnapshotContent without metadata.name".into());
    }
    let uid = content.metadata.uid.as_ref().map(Uid::to_string);
    let Some(uid) = uid.as_deref().filter(|u| !u.is_empty()) else {
        return SnapshotVerdict::Skip(format!("VolumeSnapshotContent {name} has no metadata.uid"));
    };
    if let Some(why) = content.excluded {
        return SnapshotVerdict::Excluded(why);
    }
    let spec = &content.spec;
    let r = &spec.volume_snapshot_ref;
    let (Some(ns), Some(snap)) = (
        r.namespace.as_deref().filter(|s| !s.is_empty()),
        r.name.as_deref().filter(|s| !s.is_empty()),
    ) else {
        // The CRD requires both; only an object from before that rule can lack them.
        return SnapshotVerdict::Skip(format!(
            "VolumeSnapshotContent {name} has no spec.volumeSnapshotRef namespace and name"
        ));
    };
    // The CRD allows exactly these two.
    let delete = match spec.deletion_policy {
        Some(DeletionPolicy::Delete) => true,
        Some(DeletionPolicy::Retain) => false,
        Some(DeletionPolicy::Other) | None => {
            return SnapshotVerdict::Skip(format!(
                "VolumeSnapshotContent {name} has no deletionPolicy Delete or Retain"
            ));
        }
    };
    let Some(ref_uid) = r.uid.as_ref().filter(|u| !u.is_empty()) else {
        return unbound_content(content, uid, ns, snap, lookup, now, graces);
    };
    let ref_uid = ref_uid.to_string();

    let state = match lookup.snapshot(ns, snap) {
        Found::Stale => {
            return SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotStoreStale {
                content: name.into(),
            });
        }
        Found::Unknown => {
            return SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotsForbidden {
                content: name.into(),
            });
        }
        Found::Absent => SnapshotState::Gone,
        Found::Yes(f) if f.uid != ref_uid => SnapshotState::Recreated(f.uid),
        // The controller has started the content's delete (it annotates, then deletes it, in
        // one pass). Until it has, the snapshot may be held on purpose: while a PVC is being
        // restored from it, the controller keeps it (as-source-protection) and leaves the
        // content alone, for as long as the restore takes.
        Found::Yes(SnapshotFacts {
            deleting_since: Some(since),
            ..
        }) if delete
            && (content.metadata.snapshot_being_deleted
                || content.metadata.deletion_timestamp.is_some()) =>
        {
            SnapshotState::Terminating(since)
        }
        // Bound both ways; a snapshot held as a restore source; or a Retain content whose
        // snapshot is being deleted, which becomes `SnapshotDeleted` once the snapshot is gone.
        Found::Yes(_) => return SnapshotVerdict::Healthy,
    };

    let reason = match (delete, &state) {
        (true, _) => SnapshotReason::SnapshotDeleteStuck,
        (false, SnapshotState::Recreated(_)) => SnapshotReason::SnapshotRecreated,
        (false, _) => SnapshotReason::SnapshotDeleted,
    };
    let mut f = content_finding(content, uid, reason);
    if let SnapshotState::Recreated(now_uid) = &state {
        f.snapshot_uid_now = Some(now_uid.clone());
    }
    if delete {
        // The content's own delete dates the state best: the controller deletes a Delete
        // content as soon as it sees its snapshot being deleted.
        f.since = content
            .metadata
            .deletion_timestamp
            .as_deref()
            .cloned()
            .or(match &state {
                SnapshotState::Terminating(since) => Some(since.clone()),
                SnapshotState::Gone | SnapshotState::Recreated(_) => None,
            });
        if let Some(since) = &f.since {
            let until = plus(since, graces.delete_grace);
            if now.0 < until.0 {
                return SnapshotVerdict::Waiting { reason, until };
            }
        }
    }
    f.message = content_message(&f, content, &state, ns, snap);
    SnapshotVerdict::Leftover(Box::new(f))
}

/// What became of the VolumeSnapshot a bound content names.
enum SnapshotState {
    /// No snapshot has its name.
    Gone,
    /// Another snapshot, of this uid, has its name.
    Recreated(String),
    /// It is being deleted, since then.
    Terminating(Time),
}

/// Whether `content` and the VolumeSnapshot `snapshot` (the one its `spec.volumeSnapshotRef`
/// names, looked up by that namespace and name) name each other, so the snapshot-controller
/// binds them: the snapshot's `spec.source.volumeSnapshotContentName` is the content, and the
/// uid the content's ref carries, if any, is the snapshot's (a content bound to another uid is
/// refused, `SnapshotContentMisbound`: docs/snapshot-controller-notes.md). A snapshot being
/// deleted binds nothing: it goes.
///
/// The controller binds pre-provisioned pairs one at a time, behind a backlog when many are
/// applied at once (issue 33: 30 pairs bound over 31 s); until it gets to this pair, the content's
/// ref has no uid, and it is being bound, not never bound.
pub(crate) fn binding(content: &SnapshotContent, snapshot: &SnapshotFacts) -> bool {
    let names_content = snapshot.source_content.as_deref() == Some(&*content.metadata.name);
    let uid_fits = content
        .spec
        .volume_snapshot_ref
        .uid
        .as_ref()
        .map(Uid::to_string)
        .filter(|u| !u.is_empty())
        .is_none_or(|u| u == snapshot.uid);
    names_content && uid_fits && snapshot.deleting_since.is_none()
}

/// A content no snapshot has bound yet (`volumeSnapshotRef.uid` empty): `ContentNeverBound`
/// once `--grace` has passed since its creation, unless the snapshot it names names it back
/// ([`binding`]), however long the controller takes.
fn unbound_content(
    content: &SnapshotContent,
    uid: &str,
    ns: &str,
    snap: &str,
    lookup: &impl SnapshotLookup,
    now: Time,
    graces: Graces,
) -> SnapshotVerdict {
    let name = &*content.metadata.name;
    if content.spec.source.snapshot_handle.is_none() {
        // The controller writes a dynamic content with the snapshot's uid already set.
        return SnapshotVerdict::Skip(format!(
            "VolumeSnapshotContent {name} has neither a snapshotHandle source nor a bound snapshot uid"
        ));
    }
    let snapshot = lookup.snapshot(ns, snap);
    if let Found::Yes(s) = &snapshot
        && binding(content, s)
    {
        return SnapshotVerdict::Healthy;
    }
    let reason = SnapshotReason::ContentNeverBound;
    let mut f = content_finding(content, uid, reason);
    f.since = content.metadata.creation_timestamp.clone();
    if let Some(created) = &f.since {
        let until = plus(created, graces.grace);
        if now.0 < until.0 {
            return SnapshotVerdict::Waiting { reason, until };
        }
    }
    // Whether a snapshot names it back is not known: nothing is concluded.
    match snapshot {
        Found::Stale => {
            return SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotStoreStale {
                content: name.into(),
            });
        }
        Found::Unknown => {
            return SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotsForbidden {
                content: name.into(),
            });
        }
        Found::Yes(_) | Found::Absent => {}
    }
    f.message = content_message(&f, content, &SnapshotState::Gone, ns, snap);
    SnapshotVerdict::Leftover(Box::new(f))
}

/// The message of a content finding.
fn content_message(
    f: &SnapshotFinding,
    c: &SnapshotContent,
    state: &SnapshotState,
    ns: &str,
    snap: &str,
) -> String {
    let name = &*c.metadata.name;
    let policy = f.deletion_policy.map_or("", DeletionPolicy::as_str);
    let old_uid = f.snapshot_uid.as_deref().unwrap_or_default();
    let what = match f.reason {
        SnapshotReason::SnapshotDeleted => format!(
            "VolumeSnapshotContent {name} ({policy}) is bound to VolumeSnapshot {ns}/{snap} (uid {old_uid}), which no longer exists"
        ),
        SnapshotReason::SnapshotRecreated => format!(
            "VolumeSnapshotContent {name} ({policy}) is bound to VolumeSnapshot {ns}/{snap} uid {old_uid}; that name now belongs to uid {}",
            f.snapshot_uid_now.as_deref().unwrap_or_default()
        ),
        SnapshotReason::SnapshotDeleteStuck => {
            let snapshot = match state {
                SnapshotState::Recreated(now_uid) => format!(
                    "whose VolumeSnapshot {ns}/{snap} (uid {old_uid}) is gone and whose name now belongs to uid {now_uid}"
                ),
                SnapshotState::Terminating(t) => format!(
                    "whose VolumeSnapshot {ns}/{snap} (uid {old_uid}) is being deleted since {}",
                    t.0
                ),
                SnapshotState::Gone => {
                    format!("whose VolumeSnapshot {ns}/{snap} (uid {old_uid}) is gone")
                }
            };
            let why = match (c.metadata.deletion_timestamp.as_deref(), state) {
                (Some(t), _) => format!(
                    "is being deleted since {}: the driver has not finished deleting the backend snapshot",
                    t.0
                ),
                (None, SnapshotState::Terminating(_)) => {
                    "is not being deleted: the snapshot-controller has not deleted it".to_string()
                }
                (None, SnapshotState::Gone | SnapshotState::Recreated(_)) => {
                    "is not being deleted, and the snapshot-controller never deletes a content whose snapshot is gone".to_string()
                }
            };
            format!("VolumeSnapshotContent {name} (Delete) {snapshot}; it {why}")
        }
        SnapshotReason::ContentNeverBound => {
            let created = c
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| format!(", created {}", t.0))
                .unwrap_or_default();
            format!(
                "pre-provisioned VolumeSnapshotContent {name} ({policy}) names VolumeSnapshot {ns}/{snap}, which has never bound it{created}"
            )
        }
        SnapshotReason::ContentDeleted => {
            let snapshot = match &f.snapshot_uid {
                Some(u) => format!(", bound to VolumeSnapshot {ns}/{snap} (uid {u}),"),
                None => format!(", naming VolumeSnapshot {ns}/{snap},"),
            };
            let when = f
                .since
                .as_ref()
                .map(|t| format!(" at {}", t.0))
                .unwrap_or_default();
            format!(
                "VolumeSnapshotContent {name} ({policy}){snapshot} was deleted{when}; its backend snapshot was kept"
            )
        }
        // Not a content reason.
        SnapshotReason::SnapshotContentMissing => String::new(),
    };
    let backend = match (f.snapshot_handle.as_deref(), f.driver.as_deref()) {
        (Some(h), Some(d)) => format!("; backend snapshot {h} of driver {d}"),
        (Some(h), None) => format!("; backend snapshot {h}"),
        (None, _) => String::new(),
    };
    format!("{what}{backend}")
}

/// The tombstone of a content that was deleted at `deleted_at` (its delete observed, or its
/// absence after a relist), when its backend snapshot is left behind: a Retain content with a
/// known handle, not excluded. A Delete content's sidecar deletes the backend snapshot before it
/// lets the content go, so its delete leaves nothing (a hung one is `SnapshotDeleteStuck`
/// while it lasts).
pub fn tombstone(content: &SnapshotContent, deleted_at: Time) -> Option<SnapshotFinding> {
    let name = &*content.metadata.name;
    let uid = content.metadata.uid.as_ref().map(Uid::to_string)?;
    if name.is_empty() || uid.is_empty() || content.excluded.is_some() {
        return None;
    }
    if content.spec.deletion_policy != Some(DeletionPolicy::Retain) {
        return None;
    }
    let reason = SnapshotReason::ContentDeleted;
    let mut f = content_finding(content, &uid, reason);
    // Without a handle there is no backend snapshot to report (the sidecar never cut one).
    f.snapshot_handle.as_ref()?;
    f.since = Some(deleted_at);
    let r = &content.spec.volume_snapshot_ref;
    f.message = content_message(
        &f,
        content,
        &SnapshotState::Gone,
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default(),
    );
    Some(f)
}

/// Classifies one VolumeSnapshot by whether the content it is bound to still exists. `now` is
/// not read: the one state it can find is dated by nothing the objects carry (see
/// [`grace_of`]); it is taken so the two classifiers are called alike.
pub fn classify_snapshot(
    snapshot: &Snapshot,
    lookup: &impl ContentLookup,
    now: Time,
) -> SnapshotVerdict {
    let _ = now;
    let name = &*snapshot.metadata.name;
    let ns = snapshot.metadata.namespace.as_deref().unwrap_or_default();
    if name.is_empty() || ns.is_empty() {
        return SnapshotVerdict::Skip("VolumeSnapshot without metadata.name or namespace".into());
    }
    let uid = snapshot.metadata.uid.as_ref().map(Uid::to_string);
    let Some(uid) = uid.as_deref().filter(|u| !u.is_empty()) else {
        return SnapshotVerdict::Skip(format!("VolumeSnapshot {ns}/{name} has no metadata.uid"));
    };
    if let Some(why) = snapshot.excluded {
        return SnapshotVerdict::Excluded(why);
    }
    // Being deleted: its content goes first in a normal delete (the snapshot keeps its
    // bound-protection finalizer until then); a hung one is the content's finding.
    if snapshot.metadata.deletion_timestamp.is_some() {
        return SnapshotVerdict::Healthy;
    }
    let status = snapshot.status.as_ref();
    let Some(bound) = status
        .and_then(|s| s.bound_volume_snapshot_content_name.as_deref())
        .filter(|b| !b.is_empty())
    else {
        // Not bound (yet): being created, or refused (its status.error says why).
        return SnapshotVerdict::Healthy;
    };
    let key = format!("{ns}/{name}");
    match lookup.content(bound) {
        Found::Stale => {
            SnapshotVerdict::Undecided(SnapshotUndecided::ContentStoreStale { snapshot: key })
        }
        Found::Unknown => {
            SnapshotVerdict::Undecided(SnapshotUndecided::ContentsForbidden { snapshot: key })
        }
        Found::Yes(_) => SnapshotVerdict::Healthy,
        Found::Absent => {
            let spec = &snapshot.spec;
            let restore_size = status.and_then(|s| s.restore_size.as_deref());
            let message = format!(
                "VolumeSnapshot {key} is bound to VolumeSnapshotContent {bound}, which no longer exists"
            );
            SnapshotVerdict::Leftover(Box::new(SnapshotFinding {
                reason: SnapshotReason::SnapshotContentMissing,
                subject: SnapshotSubject::Snapshot {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    uid: uid.to_string(),
                },
                content_name: Some(bound.to_string()),
                snapshot_ref: Some(key),
                snapshot_uid: Some(uid.to_string()),
                snapshot_uid_now: None,
                deletion_policy: None,
                driver: None,
                snapshot_handle: None,
                source_volume_handle: None,
                source_claim: spec
                    .source
                    .persistent_volume_claim_name
                    .as_deref()
                    .map(str::to_string),
                restore_size_bytes: restore_size.and_then(crate::model::quantity::bytes),
                class: spec
                    .volume_snapshot_class_name
                    .as_deref()
                    .map(str::to_string),
                ready_to_use: status.and_then(|s| s.ready_to_use),
                snapshot_delete_seen: false,
                since: None,
                message,
            }))
        }
    }
}

impl From<SnapshotReason> for crate::model::crd::Reason {
    fn from(r: SnapshotReason) -> Self {
        use crate::model::crd::Reason;
        match r {
            SnapshotReason::SnapshotDeleted => Reason::SnapshotDeleted,
            SnapshotReason::SnapshotRecreated => Reason::SnapshotRecreated,
            SnapshotReason::SnapshotDeleteStuck => Reason::SnapshotDeleteStuck,
            SnapshotReason::ContentNeverBound => Reason::ContentNeverBound,
            SnapshotReason::SnapshotContentMissing => Reason::SnapshotContentMissing,
            SnapshotReason::ContentDeleted => Reason::ContentDeleted,
        }
    }
}

/// The VolumeLeftover name of a snapshot finding: `vsc-<hash>-<content>` for a content,
/// `vs-<hash>-<namespace>-<name>` for a snapshot (the hash over the namespace and the name, as
/// the census names a disk), so that no PersistentVolume's name and no other finding's is taken.
pub fn leftover_name(subject: &SnapshotSubject) -> String {
    match subject {
        SnapshotSubject::Content { name, .. } => content_leftover_name(name),
        SnapshotSubject::Snapshot {
            namespace, name, ..
        } => snapshot_leftover_name(namespace, name),
    }
}

/// The VolumeLeftover name of the findings about the VolumeSnapshotContent `name`.
pub fn content_leftover_name(name: &str) -> String {
    crate::decide::census::hashed_name("vsc", &[], name)
}

/// The VolumeLeftover name of the findings about the VolumeSnapshot `namespace/name`.
pub fn snapshot_leftover_name(namespace: &str, name: &str) -> String {
    crate::decide::census::hashed_name(
        "vs",
        &[namespace.as_bytes()],
        &format!("{namespace}-{name}"),
    )
}

/// Which snapshot object a VolumeLeftover name is about (the operator's index keeps one per
/// object in its stores).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SnapshotKey {
    /// The VolumeSnapshotContent of this name.
    Content(std::sync::Arc<str>),
    /// The VolumeSnapshot of this namespace and name.
    Snapshot {
        /// `metadata.namespace`.
        namespace: std::sync::Arc<str>,
        /// `metadata.name`.
        name: std::sync::Arc<str>,
    },
}

impl SnapshotKey {
    /// The VolumeLeftover name of its findings.
    pub fn leftover_name(&self) -> String {
        match self {
            SnapshotKey::Content(name) => content_leftover_name(name),
            SnapshotKey::Snapshot { namespace, name } => snapshot_leftover_name(namespace, name),
        }
    }
}

/// What the grace rule says of a snapshot finding (see [`grace_of`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapshotGate {
    /// Publish it; a new object gets this `firstSeen`.
    Now {
        /// When the finding began to hold.
        first_seen: Time,
    },
    /// Not yet: look again after this long.
    Later(Duration),
}

/// Holds back a snapshot finding whose grace is timed from its first observation until it has
/// lasted the grace, as [`crate::decide::plan::gate`] does for volumes. `observed` is the
/// caller's clock for this name (keyed by the subject's uid and the reason); `published`: the
/// same reason is already published (a restart never retracts it).
pub(crate) fn gate(
    f: &SnapshotFinding,
    observed: &mut Option<crate::decide::plan::Observed>,
    published: bool,
    now: &Time,
    graces: Graces,
) -> SnapshotGate {
    let (grace, clock) = grace_of(f, graces);
    let reason: crate::model::crd::Reason = f.reason.into();
    let uid = match &f.subject {
        SnapshotSubject::Content { uid, .. } | SnapshotSubject::Snapshot { uid, .. } => uid,
    };
    let same = |o: &crate::decide::plan::Observed| o.volume_uid == *uid && o.reason == reason;
    if !observed.as_ref().is_some_and(same) {
        *observed = Some(crate::decide::plan::Observed {
            volume_uid: uid.clone(),
            reason,
            since: now.clone(),
        });
    }
    let start = match clock {
        // The classifier held the state back until the grace the objects date had passed.
        SnapshotClock::At(t) => {
            return SnapshotGate::Now {
                first_seen: plus(&t, grace),
            };
        }
        SnapshotClock::Observed => observed
            .as_ref()
            .map_or_else(|| now.clone(), |o| o.since.clone()),
    };
    let elapsed = Duration::try_from(now.0.duration_since(start.0)).unwrap_or(Duration::ZERO);
    if grace.is_zero() || published || elapsed >= grace {
        SnapshotGate::Now {
            first_seen: now.clone(),
        }
    } else {
        SnapshotGate::Later(grace - elapsed)
    }
}

/// The finding as a VolumeLeftover publishes it: no volume, the subject, the snapshot objects in
/// `status.snapshot`, the source volume's driver and handle in `status.source`, the restore size
/// as the capacity; first seen at `now` (the planner keeps a published one).
pub fn as_finding(f: &SnapshotFinding, now: &Time) -> crate::model::finding::Finding {
    use crate::model::crd::{SnapshotInfo, State, Subject, VolumeLeftoverStatus, VolumeSourceInfo};
    let subject = match f.subject {
        SnapshotSubject::Content { .. } => Subject::SnapshotContent,
        SnapshotSubject::Snapshot { .. } => Subject::Snapshot,
    };
    let deleted = f.reason == SnapshotReason::ContentDeleted;
    crate::model::finding::Finding {
        volume_name: String::new(),
        volume_uid: String::new(),
        storage_class_name: None,
        object_name: Some(leftover_name(&f.subject)),
        status: VolumeLeftoverStatus {
            reason: f.reason.into(),
            state: State::Open,
            observed_generation: None,
            conditions: Vec::new(),
            acknowledged: None,
            message: f.message.clone(),
            hints: Vec::new(),
            phase: String::new(),
            phase_since: None,
            phase_message: None,
            reclaim_policy: String::new(),
            storage_class: None,
            claim: None,
            capacity: f
                .restore_size_bytes
                .map(crate::model::quantity::format_bytes),
            capacity_bytes: f.restore_size_bytes,
            disk_size_bytes: None,
            access_modes: Vec::new(),
            volume_mode: String::new(),
            source: VolumeSourceInfo {
                kind: "csi".into(),
                driver: f.driver.clone(),
                volume_handle: f.source_volume_handle.clone(),
                ..VolumeSourceInfo::default()
            },
            first_seen: now.clone(),
            subject,
            deleted_at: f.since.clone().filter(|_| deleted),
            image: None,
            cost: None,
            snapshot: Some(SnapshotInfo {
                content: f.content_name.clone(),
                snapshot: f.snapshot_ref.clone(),
                snapshot_uid: f.snapshot_uid.clone(),
                current_uid: f.snapshot_uid_now.clone(),
                deletion_policy: f.deletion_policy.map(|p| p.as_str().to_string()),
                snapshot_handle: f.snapshot_handle.clone(),
                source_claim: f.source_claim.clone(),
                restore_size_bytes: f.restore_size_bytes,
                snapshot_class: f.class.clone(),
                ready_to_use: f.ready_to_use,
                since: f.since.clone(),
            }),
        },
    }
}
