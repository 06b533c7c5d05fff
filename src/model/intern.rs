//! Strings that repeat across tens of thousands of cached objects (namespaces, StorageClass names,
//! drivers, pools, reclaim policies, phases, access modes), shared instead of copied. Pure.
//!
//! One process-wide set of `Arc<str>`. It is bounded: when it holds [`CAP`] strings, those that no
//! cached object holds any more are dropped, and if it is still full the string is returned
//! unshared (correct, only not shared). Only low-cardinality values belong here; names and uids
//! do not. Lists that repeat whole (access modes, finalizers) are shared the same way.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Most strings kept.
pub(crate) const CAP: usize = 16_384;

static SET: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

/// `s`, shared with every other holder of the same string.
pub(crate) fn intern(s: &str) -> Arc<str> {
    // A poisoned lock only means another thread panicked while holding it; the set is still a
    // valid set.
    let mut guard = SET.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(a) = set.get(s) {
        return a.clone();
    }
    if set.len() >= CAP {
        set.retain(|a| Arc::strong_count(a) > 1);
    }
    let a: Arc<str> = Arc::from(s);
    if set.len() < CAP {
        set.insert(a.clone());
    }
    a
}

/// Lists of strings that repeat whole across objects (a volume's access modes, its finalizers).
/// A shared list of shared strings.
pub(crate) type List = Arc<[Arc<str>]>;

static LISTS: Mutex<Option<HashSet<List>>> = Mutex::new(None);

/// `items`, each interned, as one list shared with every other holder of the same list. Bounded
/// like the strings: at [`CAP`] lists, those nobody holds are dropped, and a list that still does
/// not fit is returned unshared.
pub(crate) fn intern_list<S: AsRef<str>>(items: &[S]) -> List {
    let items: Vec<Arc<str>> = items.iter().map(|s| intern(s.as_ref())).collect();
    let mut guard = LISTS.lock().unwrap_or_else(|e| e.into_inner());
    let set = guard.get_or_insert_with(HashSet::new);
    if let Some(a) = set.get(items.as_slice()) {
        return a.clone();
    }
    if set.len() >= CAP {
        set.retain(|a| Arc::strong_count(a) > 1);
    }
    let a: List = Arc::from(items);
    if set.len() < CAP {
        set.insert(a.clone());
    }
    a
}

/// How many strings are kept.
#[cfg(test)]
pub(crate) fn len() -> usize {
    SET.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map_or(0, HashSet::len)
}
