//! What one pool's census result means, pure: which failure or recovery to log (once), which
//! images whose details could not be read to report, which findings about unreferenced images
//! appear or go, and which names to decide again. No client, no clock, no log: the loop passes
//! the time and what names images, and performs what comes back.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::decide::census::{
    Census, DiskRef, Failing, Resolved, Scope, Snapshot, disk_leftover_name, disk_ref,
};
use crate::model::crd::{Reason, VolumeSourceInfo};
use crate::model::finding::Finding;

/// The census as the loop keeps it: each pool's state and the findings about images nothing
/// references, by VolumeLeftover name. `K` is the backend's error category.
#[derive(Debug)]
pub struct CensusState<K> {
    /// Each pool's listings.
    pub census: Census,
    /// The findings about images nothing references, by VolumeLeftover name.
    pub orphans: BTreeMap<String, (Scope, Finding)>,
    /// The findings about images no volume names whose details the last census could not
    /// read: what is published about them stays.
    pub held: BTreeMap<String, Scope>,
    /// Which pools are failing, to log once per problem.
    pub failing: Failing<K>,
    /// The images of each pool whose details could not be read, to log once per change.
    pub unread: BTreeMap<Scope, Vec<String>>,
}

impl<K> CensusState<K> {
    /// Nothing known yet.
    pub fn new(census: Census) -> Self {
        CensusState {
            census,
            orphans: BTreeMap::new(),
            held: BTreeMap::new(),
            failing: Failing::default(),
            unread: BTreeMap::new(),
        }
    }
}

/// What names images now, as the loop's stores say: read only when the census may conclude.
#[derive(Clone, Debug, Default)]
pub struct Naming {
    /// Each volume: its name and the disk it names ([`disk_ref`] of its source and zones).
    pub volumes: Vec<(String, Option<DiskRef>)>,
    /// Each managed VolumeLeftover: its name, its reason, and (for a tombstone) the source its
    /// record names.
    pub leftovers: Vec<(String, Reason, Option<VolumeSourceInfo>)>,
    /// The sources named by tombstones not written yet (a delete just watched).
    pub tombstones: Vec<VolumeSourceInfo>,
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
pub enum CensusLog<K> {
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
    Failed { category: K, message: String },
}

/// What to do about one census result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CensusOutcome<K> {
    /// The gauges.
    pub gauge: Gauge,
    /// The lines to log, in order.
    pub logs: Vec<CensusLog<K>>,
    /// The names to decide again.
    pub mark: Vec<String>,
}

/// Records a pool's census result (`Err`: the category and message of its failure) in `state`
/// and says what follows. `naming` is called only when the pool's census may conclude.
pub fn census_result<K: Copy + PartialEq>(
    state: &mut CensusState<K>,
    key: &Scope,
    result: Result<Snapshot, (K, String)>,
    now: &Time,
    naming: impl FnOnce() -> Naming,
) -> CensusOutcome<K> {
    let mut logs = Vec::new();
    let gauge = match &result {
        Ok(snap) => {
            if let Some(was) = state.failing.recovered(key) {
                logs.push(CensusLog::Recovered { after: was });
            } else {
                logs.push(CensusLog::Done {
                    images: snap.images.len(),
                });
            }
            let unread: Vec<String> = snap.unread.keys().cloned().collect();
            if state
                .unread
                .get(key)
                .map_or(!unread.is_empty(), |u| *u != unread)
            {
                logs.push(match snap.unread.iter().next() {
                    Some((image, error)) => CensusLog::Unread {
                        images: unread.len(),
                        first: image.clone(),
                        error: error.clone(),
                    },
                    None => CensusLog::ReadAgain,
                });
                state.unread.insert(key.clone(), unread);
            }
            Gauge::Done {
                images: snap.images.len(),
                unread: snap.unread.len(),
            }
        }
        Err((category, message)) => {
            if state.failing.failed(key, *category, message) {
                logs.push(CensusLog::Failed {
                    category: *category,
                    message: message.clone(),
                });
            }
            Gauge::Failed
        }
    };
    let mut out = CensusOutcome {
        gauge,
        logs,
        mark: Vec::new(),
    };
    state
        .census
        .record(key, result.map_err(|(_, message)| message));
    if !state.census.is_trusted(key) {
        // Nothing is concluded: what is published stays.
        return out;
    }
    let naming = naming();
    // Which images of the pool a volume or a tombstone names; which volumes may have lost
    // their image (or got it back).
    let mut referenced = HashSet::new();
    let marks = &mut out.mark;
    let pool = &state.census.pools[key];
    let (cur, prev) = (pool.current.clone(), pool.previous.clone());
    let census = &state.census;
    let in_scope = |r: &DiskRef| {
        matches!(census.resolve(r), Resolved::In(k) if k == key).then(|| r.name().to_string())
    };
    let in_pool = |source: &VolumeSourceInfo| in_scope(&disk_ref(source, &[])?);
    for (name, disk) in &naming.volumes {
        if let Some(img) = disk.as_ref().and_then(in_scope) {
            let now_missing = cur.as_ref().is_some_and(|c| !c.images.contains_key(&img));
            let was_missing = prev.as_ref().is_some_and(|p| !p.images.contains_key(&img));
            if now_missing || was_missing {
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
        if *reason == Reason::ImageWithoutVolume {
            marks.push(name.clone());
        }
    }
    for source in &naming.tombstones {
        if let Some(img) = in_pool(source) {
            referenced.insert(img);
        }
    }
    state.held.retain(|_, k| k != key);
    for img in cur.iter().flat_map(|c| c.unread.keys()) {
        if !referenced.contains(img) {
            state.held.insert(disk_leftover_name(key, img), key.clone());
        }
    }
    let found = state.census.orphans(key, &referenced, now);
    state.orphans.retain(|_, (k, _)| k != key);
    for f in found {
        marks.push(f.name().to_string());
        state.orphans.insert(f.name().to_string(), (key.clone(), f));
    }
    out
}
