//! The snapshot objects in the stores, by the VolumeLeftover name of their findings, and which
//! contents name which snapshot. Pure: no client.
//!
//! A finding's name is a hash of its object's ([`crate::decide::snapshot::leftover_name`]), so
//! the decision of a name needs this map back to the object. A snapshot's change also decides
//! the contents that name it again (by `spec.volumeSnapshotRef`: a Retain content whose snapshot
//! was deleted or re-created under another uid), and a content's change the snapshot it names
//! and the one bound to it. Fed by the two feeds with `apply` / `delete` / `reset`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::decide::snapshot::SnapshotKey;
use crate::model::snapshot::{Snapshot, SnapshotContent};

/// A VolumeSnapshot's namespace and name.
type SnapshotRef = (Arc<str>, Arc<str>);

/// See the module's documentation.
#[derive(Debug, Default)]
pub(crate) struct SnapshotIndex {
    /// Each object in the stores, by the VolumeLeftover name of its findings.
    by_leftover: HashMap<Box<str>, SnapshotKey>,
    /// The contents whose `spec.volumeSnapshotRef` names each snapshot.
    contents_of: HashMap<SnapshotRef, Vec<Arc<str>>>,
    /// What each content names (to undo it when the content changes or goes).
    names: HashMap<Arc<str>, SnapshotRef>,
    /// The objects kept out of the report (a backup tool's, or the ignore label), per kind.
    excluded_contents: HashSet<Arc<str>>,
    excluded_snapshots: HashSet<SnapshotRef>,
}

/// The key of a stored content.
fn content_key(c: &SnapshotContent) -> Arc<str> {
    Arc::from(&*c.metadata.name)
}

/// The namespace and name of a stored snapshot.
fn snapshot_ref(s: &Snapshot) -> SnapshotRef {
    (
        s.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| Arc::from("")),
        Arc::from(&*s.metadata.name),
    )
}

/// The snapshot a content's `spec.volumeSnapshotRef` names.
fn named_snapshot(c: &SnapshotContent) -> Option<SnapshotRef> {
    let r = &c.spec.volume_snapshot_ref;
    Some((r.namespace.clone()?, Arc::from(r.name.as_deref()?)))
}

impl SnapshotIndex {
    /// A content was added or changed. Returns the VolumeLeftover names its change concerns:
    /// its own, and the snapshot's it names.
    pub(crate) fn apply_content(&mut self, c: &SnapshotContent) -> Vec<String> {
        let name = content_key(c);
        let key = SnapshotKey::Content(name.clone());
        let mut concerned = vec![key.leftover_name()];
        // The snapshot it named before, if that changed.
        concerned.extend(self.unname(&name).map(|r| snapshot_name(&r)));
        self.by_leftover
            .insert(key.leftover_name().into_boxed_str(), key);
        if let Some(r) = named_snapshot(c) {
            concerned.push(snapshot_name(&r));
            self.contents_of
                .entry(r.clone())
                .or_default()
                .push(name.clone());
            self.names.insert(name.clone(), r);
        }
        if c.excluded.is_some() {
            self.excluded_contents.insert(name);
        } else {
            self.excluded_contents.remove(&name);
        }
        concerned
    }

    /// A content was deleted: the names its change concerns, as [`Self::apply_content`].
    pub(crate) fn delete_content(&mut self, c: &SnapshotContent) -> Vec<String> {
        let name = content_key(c);
        let own = SnapshotKey::Content(name.clone()).leftover_name();
        self.by_leftover.remove(own.as_str());
        self.excluded_contents.remove(&name);
        let mut concerned = vec![own];
        concerned.extend(self.unname(&name).map(|r| snapshot_name(&r)));
        concerned
    }

    /// A snapshot was added, changed or deleted (`present`). Returns the VolumeLeftover names
    /// its change concerns: its own, the contents that name it, and the content it is bound to
    /// or was made from.
    pub(crate) fn snapshot_changed(&mut self, s: &Snapshot, present: bool) -> Vec<String> {
        let r = snapshot_ref(s);
        let key = SnapshotKey::Snapshot {
            namespace: r.0.clone(),
            name: r.1.clone(),
        };
        let own = key.leftover_name();
        if present {
            self.by_leftover.insert(own.clone().into_boxed_str(), key);
            if s.excluded.is_some() {
                self.excluded_snapshots.insert(r.clone());
            } else {
                self.excluded_snapshots.remove(&r);
            }
        } else {
            self.by_leftover.remove(own.as_str());
            self.excluded_snapshots.remove(&r);
        }
        let mut concerned = vec![own];
        let bound = s
            .status
            .as_ref()
            .and_then(|st| st.bound_volume_snapshot_content_name.as_deref());
        let source = s.spec.source.volume_snapshot_content_name.as_deref();
        let naming = self.contents_of.get(&r).into_iter().flatten();
        let contents: HashSet<&str> = naming.map(|c| &**c).chain(bound).chain(source).collect();
        concerned.extend(
            contents
                .into_iter()
                .map(|c| SnapshotKey::Content(c.into()).leftover_name()),
        );
        concerned
    }

    /// A content's store was listed anew: the index is rebuilt from it.
    pub(crate) fn reset_contents<'a>(
        &mut self,
        contents: impl Iterator<Item = &'a SnapshotContent>,
    ) {
        self.by_leftover
            .retain(|_, k| matches!(k, SnapshotKey::Snapshot { .. }));
        self.contents_of.clear();
        self.names.clear();
        self.excluded_contents.clear();
        for c in contents {
            self.apply_content(c);
        }
    }

    /// The snapshot store was listed anew: the index is rebuilt from it.
    pub(crate) fn reset_snapshots<'a>(&mut self, snapshots: impl Iterator<Item = &'a Snapshot>) {
        self.by_leftover
            .retain(|_, k| matches!(k, SnapshotKey::Content(_)));
        self.excluded_snapshots.clear();
        for s in snapshots {
            self.snapshot_changed(s, true);
        }
    }

    /// The object the findings of this VolumeLeftover name are about, when it is in a store.
    pub(crate) fn get(&self, leftover: &str) -> Option<&SnapshotKey> {
        self.by_leftover.get(leftover)
    }

    /// Every VolumeLeftover name of an object in the stores (for a sweep).
    pub(crate) fn leftover_names(&self) -> impl Iterator<Item = &str> {
        self.by_leftover.keys().map(|k| &**k)
    }

    /// How many contents and snapshots are kept out of the report.
    pub(crate) fn excluded(&self) -> (usize, usize) {
        (self.excluded_contents.len(), self.excluded_snapshots.len())
    }

    /// Forgets what the content `name` named; returns it.
    fn unname(&mut self, name: &Arc<str>) -> Option<SnapshotRef> {
        let r = self.names.remove(name)?;
        if let Some(v) = self.contents_of.get_mut(&r) {
            v.retain(|c| c != name);
            if v.is_empty() {
                self.contents_of.remove(&r);
            }
        }
        Some(r)
    }
}

/// The VolumeLeftover name of a snapshot's findings.
fn snapshot_name(r: &SnapshotRef) -> String {
    crate::decide::snapshot::snapshot_leftover_name(&r.0, &r.1)
}
