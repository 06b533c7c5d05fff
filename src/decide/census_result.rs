//! What one pool's census result means, pure: which failure or recovery to log (once), which
//! images whose details could not be read to report, which findings about unreferenced images
//! appear or go, and which names to decide again. No client, no clock, no log: the loop passes
//! the time and what names images, and performs what comes back.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::census::{
    Census, DiskRef, FailureKind, Resolved, Scope, ScopeListing, ScopeState, disk_leftover_name,
};
use crate::model::crd::{Reason, VolumeSourceInfo};
use crate::model::finding::Finding;

/// The census as the loop keeps it: each scope's state (its listings and what the log said of
/// it, in [`Census::pools`]) and, by VolumeLeftover name, the findings about disks nothing
/// references and those whose details could not be read.
#[derive(Debug)]
pub struct CensusState {
    /// Each scope's state.
    pub census: Census,
    /// The findings about images nothing references, by VolumeLeftover name.
    pub orphans: BTreeMap<String, (Scope, Finding)>,
    /// The findings about images no volume names whose details the last census could not
    /// read: what is published about them stays.
    pub held: BTreeMap<String, Scope>,
    /// The snapshot scopes whose last listing could not be compared with the
    /// VolumeSnapshotContents (their store was not current): nothing is concluded about their
    /// snapshots, and what is published about them stays.
    pub unconcluded: BTreeSet<Scope>,
    /// The handles of contents deleted lately, with when the delete was seen: a listing that
    /// began before a content's delete may hold its snapshot (a Delete-policy content goes
    /// only once its backend snapshot is deleted, after the listing), so the snapshot counts
    /// as named for that listing.
    named_lately: Vec<(String, Time)>,
    /// The disks of volumes deleted lately, with when the delete was seen: the same for
    /// disks (a Delete-policy PV goes only once the driver deleted its disk, which a listing
    /// that began before may still hold).
    disks_named_lately: Vec<(DiskRef, Time)>,
}

impl CensusState {
    /// Nothing known yet.
    pub fn new(census: Census) -> Self {
        CensusState {
            census,
            orphans: BTreeMap::new(),
            held: BTreeMap::new(),
            unconcluded: BTreeSet::new(),
            named_lately: Vec::new(),
            disks_named_lately: Vec::new(),
        }
    }

    /// A volume naming `disk` was deleted at `at`; what was deleted before [`NAMED_LATELY`] is
    /// forgotten.
    pub fn volume_gone(&mut self, disk: DiskRef, at: &Time) {
        let horizon = at.0 - jiff::SignedDuration::try_from(NAMED_LATELY).unwrap_or_default();
        self.disks_named_lately.retain(|(_, t)| t.0 >= horizon);
        self.disks_named_lately.push((disk, at.clone()));
    }

    /// A content naming `handles` was deleted at `at`; what was deleted before
    /// [`NAMED_LATELY`] is forgotten.
    pub fn content_gone(&mut self, handles: impl IntoIterator<Item = String>, at: &Time) {
        let horizon = at.0 - jiff::SignedDuration::try_from(NAMED_LATELY).unwrap_or_default();
        self.named_lately.retain(|(_, t)| t.0 >= horizon);
        self.named_lately
            .extend(handles.into_iter().map(|h| (h, at.clone())));
    }
}

/// How long a deleted content's handle (or a deleted volume's disk) keeps naming its snapshot
/// (disk) for the listings that began before the delete: longer than any listing takes (their
/// deadline is minutes).
pub const NAMED_LATELY: std::time::Duration = std::time::Duration::from_secs(3600);

/// What names images now, as the loop's stores say: read only when the census may conclude.
#[derive(Clone, Debug, Default)]
pub struct Naming {
    /// Each volume: its name and the disk it names ([`crate::census::volume_disk`]).
    pub volumes: Vec<(String, Option<DiskRef>)>,
    /// Each managed VolumeLeftover: its name, its reason, and (for a tombstone) the source its
    /// record names.
    pub leftovers: Vec<(String, Reason, Option<VolumeSourceInfo>)>,
    /// The sources named by tombstones not written yet (a delete just watched).
    pub tombstones: Vec<VolumeSourceInfo>,
    /// The backend snapshots named now: every VolumeSnapshotContent's handle (excluded ones
    /// too: a backup tool's snapshot is named), each `ContentDeleted` tombstone's, written or
    /// not. `None` when the content store is not current (or the kind is not served): then
    /// no snapshot scope concludes anything.
    pub snapshot_handles: Option<Vec<String>>,
}

/// What the pool's census gauges say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gauge {
    /// It worked: how many images it listed, how many it could not read.
    Done { images: usize, unread: usize },
    /// It failed.
    Failed,
}

/// A line to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CensusLog {
    /// The pool was failing and works again; `after` is the failure it ends.
    Recovered { after: String },
    /// A census like the last (debug).
    Done { images: usize },
    /// The set of images whose details could not be read changed and is not empty.
    Unread {
        images: usize,
        first: String,
        error: String,
    },
    /// The details of every image can be read again.
    ReadAgain,
    /// The pool started failing, or fails in another way.
    Failed {
        category: FailureKind,
        message: String,
    },
    /// A snapshot scope is listed but its snapshots are no longer compared: which ones the
    /// VolumeSnapshotContents name is not known (their store is not current).
    NotCompared,
    /// A snapshot scope's snapshots are compared again.
    ComparedAgain,
}

/// What to do about one census result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CensusOutcome {
    /// The gauges.
    pub gauge: Gauge,
    /// The lines to log, in order.
    pub logs: Vec<CensusLog>,
    /// The names to decide again.
    pub mark: Vec<String>,
}

/// Records a scope's census result (`Err`: the kind and message of its failure) in `state`
/// and says what follows. `naming` is called only when the scope's census may conclude.
pub fn census_result<N>(
    state: &mut CensusState,
    key: &Scope,
    result: Result<ScopeListing, (FailureKind, String)>,
    now: &Time,
    naming: impl FnOnce() -> N,
) -> CensusOutcome
where
    N: std::borrow::Borrow<Naming>,
{
    // A zone or region an aggregated listing names for the first time joins the census.
    state.census.admit(key);
    let (gauge, logs) = match state.census.pools.get_mut(key) {
        Some(scope) => news(scope, &result),
        // Not configured: nothing is kept of it.
        None => news(&mut ScopeState::default(), &result),
    };
    let mut out = CensusOutcome {
        gauge,
        logs,
        mark: Vec::new(),
    };
    // The scope's first answer: the volumes whose verdict waited for it are decided now
    // (`Census::has_answered`), whatever it says.
    let first_answer = !key.holds_snapshots() && !state.census.answered(key);
    state
        .census
        .record(key, result.map_err(|(_, message)| message));
    if !state.census.is_trusted(key) {
        if first_answer {
            mark_the_backends_volumes(naming().borrow(), key, &mut out.mark);
        }
        // Nothing is concluded: what is published stays.
        return out;
    }
    let naming = naming();
    let naming = naming.borrow();
    if first_answer {
        mark_the_backends_volumes(naming, key, &mut out.mark);
    }
    let started = state.census.pools[key]
        .current
        .as_ref()
        .map(|c| c.started.clone());
    let since_started = |at: &Time| started.as_ref().is_some_and(|s| at.0 >= s.0);
    let referenced = if key.holds_snapshots() {
        let Some(handles) = &naming.snapshot_handles else {
            // Which snapshots the contents name is not known: nothing is concluded (said once).
            if state.unconcluded.insert(key.clone()) {
                out.logs.push(CensusLog::NotCompared);
            }
            return out;
        };
        if state.unconcluded.remove(key) {
            out.logs.push(CensusLog::ComparedAgain);
        }
        let lately = state
            .named_lately
            .iter()
            .filter(|(_, at)| since_started(at))
            .map(|(h, _)| h);
        let handles: Vec<&String> = handles.iter().chain(lately).collect();
        snapshot_references(&state.census, key, &handles, naming, &mut out.mark)
    } else {
        let lately: Vec<&DiskRef> = state
            .disks_named_lately
            .iter()
            .filter(|(_, at)| since_started(at))
            .map(|(d, _)| d)
            .collect();
        references(&state.census, key, naming, &lately, &mut out.mark)
    };
    hold_unread(state, key, &referenced);
    replace_orphans(state, key, &referenced, now, &mut out.mark);
    state.census.forget_details(key, &referenced);
    out
}

/// The gauges and the lines to log for a result, recording in `scope` what the log says.
fn news(
    scope: &mut ScopeState,
    result: &Result<ScopeListing, (FailureKind, String)>,
) -> (Gauge, Vec<CensusLog>) {
    let mut logs = Vec::new();
    let snap = match result {
        Ok(snap) => snap,
        Err((category, message)) => {
            if scope.failed(*category, message) {
                logs.push(CensusLog::Failed {
                    category: *category,
                    message: message.clone(),
                });
            }
            return (Gauge::Failed, logs);
        }
    };
    logs.push(match scope.recovered() {
        Some(after) => CensusLog::Recovered { after },
        None => CensusLog::Done {
            images: snap.images.len(),
        },
    });
    if scope.unread_now(snap.unread.keys().cloned().collect()) {
        logs.push(match snap.unread.iter().next() {
            Some((image, error)) => CensusLog::Unread {
                images: snap.unread.len(),
                first: image.clone(),
                error: error.clone(),
            },
            None => CensusLog::ReadAgain,
        });
    }
    let gauge = Gauge::Done {
        images: snap.images.len(),
        unread: snap.unread.len(),
    };
    (gauge, logs)
}

/// Marks every volume naming a disk of `key`'s backend.
fn mark_the_backends_volumes(naming: &Naming, key: &Scope, marks: &mut Vec<String>) {
    let backend = key.backend();
    marks.extend(
        naming
            .volumes
            .iter()
            .filter(|(_, d)| d.as_ref().is_some_and(|d| d.is_of(backend)))
            .map(|(name, _)| name.clone()),
    );
}

/// Which disks of `key` a volume or a tombstone names; marks the volumes that may have lost
/// their disk (or got it back), the tombstones of the scope and every finding about a disk
/// without a volume.
fn references(
    census: &Census,
    key: &Scope,
    naming: &Naming,
    deleted_lately: &[&DiskRef],
    marks: &mut Vec<String>,
) -> HashSet<String> {
    let mut referenced = HashSet::new();
    let scope = &census.pools[key];
    let (cur, prev) = (scope.current.as_deref(), scope.previous.as_deref());
    let in_scope = |r: &DiskRef| {
        matches!(census.resolve(r), Resolved::In(k) if k == key).then(|| r.name().to_string())
    };
    let in_pool = |source: &VolumeSourceInfo| in_scope(&census.disk_ref(source)?);
    for (name, disk) in &naming.volumes {
        if let Some(img) = disk.as_ref().and_then(in_scope) {
            let now_missing = cur.is_some_and(|c| !c.images.contains_key(&img));
            let was_missing = prev.is_some_and(|p| !p.images.contains_key(&img));
            // Its size (what its finding is priced by, and whether it differs from the PV's)
            // is new or changed.
            let size = |s: Option<&ScopeListing>| s.and_then(|s| s.images.get(&img)?.size());
            let resized = size(cur).is_some() && (prev.is_none() || size(cur) != size(prev));
            if now_missing || was_missing || resized {
                marks.push(name.clone());
            }
            referenced.insert(img);
        }
    }
    for (name, reason, source) in &naming.leftovers {
        if *reason == Reason::VolumeDeleted
            && let Some(img) = source.as_ref().and_then(in_pool)
        {
            referenced.insert(img);
            marks.push(name.clone());
        }
        if *reason == Reason::DiskWithoutVolume {
            marks.push(name.clone());
        }
    }
    referenced.extend(naming.tombstones.iter().filter_map(in_pool));
    // A volume deleted since the listing began named its disk when the listing saw it.
    referenced.extend(deleted_lately.iter().copied().filter_map(in_scope));
    referenced
}

/// Which snapshots of the snapshot scope `key` a content or a tombstone names; marks every
/// finding about a snapshot without a content (each scope's are replaced) and every
/// `ContentDeleted` tombstone (the listing may be the second without its snapshot, which ends
/// it; they are few, and which scope holds an EBS id is known only by looking).
fn snapshot_references(
    census: &Census,
    key: &Scope,
    handles: &[&String],
    naming: &Naming,
    marks: &mut Vec<String>,
) -> HashSet<String> {
    for (name, reason, _) in &naming.leftovers {
        if matches!(
            reason,
            Reason::SnapshotWithoutContent | Reason::ContentDeleted
        ) {
            marks.push(name.clone());
        }
    }
    handles
        .iter()
        .filter_map(|h| Some(census.snapshot_ref(h)?.name_in(key)?.to_string()))
        .collect()
}

/// The disks of `key` nothing names whose details could not be read: what is published about
/// them stays.
fn hold_unread(state: &mut CensusState, key: &Scope, referenced: &HashSet<String>) {
    state.held.retain(|_, k| k != key);
    let cur = state.census.pools[key].current.clone();
    for img in cur.iter().flat_map(|c| c.unread.keys()) {
        if !referenced.contains(img) {
            state.held.insert(disk_leftover_name(key, img), key.clone());
        }
    }
}

/// Replaces the findings about the disks of `key` nothing references, marking each.
fn replace_orphans(
    state: &mut CensusState,
    key: &Scope,
    referenced: &HashSet<String>,
    now: &Time,
    marks: &mut Vec<String>,
) {
    let found = state.census.orphans(key, referenced, now);
    state.orphans.retain(|_, (k, _)| k != key);
    for f in found {
        marks.push(f.name().to_string());
        state.orphans.insert(f.name().to_string(), (key.clone(), f));
    }
}
