//! Reverse index from claims to the PersistentVolumes that name them. Pure: no client.
//!
//! A claim event re-evaluates exactly the PVs that reference it. Scanning every PV per event would
//! cost PVs × PVCs comparisons during an initial list (billions at 50,000 PVs). Fed by PV watch
//! events with `apply` / `delete` / `reset` (a relist replaces the whole state). A StorageClass event, rare, scans the PV store
//! instead: an index by class would cost about 40 bytes per PV for an event that comes a few
//! times a year.
//!
//! At 50,000 PVs the index is one entry per PV and one per claim named. Its strings are the
//! store's own (shared, not copied); claims are keyed by a 64-bit hash of their namespace and
//! name, and a lookup checks each PV's own reference, so that a collision can only cost a
//! comparison, never a wrong answer (`examples/memory.rs` measures it).

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::model::volume::Volume;

/// The claim (namespace, name) a PV names, sharing the volume's strings.
type ClaimKey = (Arc<str>, Arc<str>);

/// The PVs that name one claim: one in practice, so no allocation for it.
#[derive(Debug)]
enum Pvs {
    One(Arc<str>),
    /// Sorted.
    Many(Box<[Arc<str>]>),
}

impl Pvs {
    fn as_slice(&self) -> &[Arc<str>] {
        match self {
            Pvs::One(n) => std::slice::from_ref(n),
            Pvs::Many(v) => v,
        }
    }
}

/// The key of a claim in [`RefIndex`]: fixed keys, so the same on every run.
fn key(namespace: &str, name: &str) -> u64 {
    let mut h = DefaultHasher::new();
    (namespace, name).hash(&mut h);
    h.finish()
}

fn claim_of(pv: &Volume) -> Option<ClaimKey> {
    let non_empty = |s: &Option<Arc<str>>| s.clone().filter(|s| !s.is_empty());
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some((non_empty(&r.namespace)?, non_empty(&r.name)?))
}

/// Which PVs name which claim.
#[derive(Debug, Default)]
pub struct RefIndex {
    /// Every PV known, with the claim it names.
    refs: HashMap<Arc<str>, Option<ClaimKey>>,
    /// The PVs naming each claim, by [`key`] (several claims may share a key: each PV's own
    /// reference in `refs` says which it names).
    by_claim: HashMap<u64, Pvs>,
}

impl RefIndex {
    /// Records a PV (added or modified).
    pub(crate) fn apply(&mut self, pv: &Volume) {
        let Some(name) = pv.metadata.name.clone() else {
            return;
        };
        let claim = claim_of(pv);
        if self.refs.get(&name) == Some(&claim) {
            return;
        }
        self.delete(&name);
        if let Some((ns, c)) = &claim {
            match self.by_claim.entry(key(ns, c)) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Pvs::One(name.clone()));
                }
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    let mut pvs = o.get().as_slice().to_vec();
                    if let Err(at) = pvs.binary_search(&name) {
                        pvs.insert(at, name.clone());
                    }
                    o.insert(Pvs::Many(pvs.into_boxed_slice()));
                }
            }
        }
        self.refs.insert(name, claim);
    }

    /// Forgets a PV.
    pub(crate) fn delete(&mut self, name: &str) {
        let Some((name, old)) = self.refs.remove_entry(name) else {
            return;
        };
        let Some((ns, c)) = old else {
            return;
        };
        let k = key(&ns, &c);
        let Some(pvs) = self.by_claim.get(&k) else {
            return;
        };
        let rest: Vec<Arc<str>> = pvs
            .as_slice()
            .iter()
            .filter(|n| **n != name)
            .cloned()
            .collect();
        match rest.len() {
            0 => {
                self.by_claim.remove(&k);
            }
            1 => {
                self.by_claim
                    .insert(k, Pvs::One(rest.into_iter().next().unwrap_or(name)));
            }
            _ => {
                self.by_claim.insert(k, Pvs::Many(rest.into_boxed_slice()));
            }
        }
    }

    /// Replaces the whole state after a (re)list. (Which PVs vanished in a watch gap is the
    /// feed's to say: `FeedItem::Listed { gone }`, with their last objects.)
    pub fn reset<'a>(&mut self, pvs: impl IntoIterator<Item = &'a Volume>) {
        *self = RefIndex::default();
        for pv in pvs {
            self.apply(pv);
        }
    }

    /// PVs whose claimRef names `namespace/name`, sorted.
    pub fn pvs_for_claim<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.by_claim
            .get(&key(namespace, name))
            .map(Pvs::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(move |pv| {
                self.refs.get(*pv).is_some_and(|c| {
                    c.as_ref()
                        .is_some_and(|(ns, n)| &**ns == namespace && &**n == name)
                })
            })
            .map(|n| n.as_ref())
    }

    #[cfg(test)]
    /// Number of PVs known.
    pub(crate) fn len(&self) -> usize {
        self.refs.len()
    }

    #[cfg(test)]
    /// Whether no PV is known.
    pub(crate) fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }
}
