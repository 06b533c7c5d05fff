//! Volumes kept on purpose: never findings. Pure.
//!
//! A human marks one PV with the label `leftovers.dev/ignore: "true"` (the operator still never
//! writes PVs); an operator configures classes or a label selector to exclude as a whole. An
//! excluded PV has no VolumeLeftover (one that exists is deleted) and is counted in
//! `volume_leftovers_ignored_volumes`.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::selector::Selector;

/// The label a person sets on a PV to keep it out of the report.
pub(crate) const IGNORE_LABEL: &str = "leftovers.dev/ignore";

/// Why a volume is not reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exclusion {
    /// The PV carries `leftovers.dev/ignore: "true"`.
    IgnoreLabel,
    /// Its StorageClass is excluded (`--exclude-storage-class`).
    StorageClass,
    /// Its labels match `--exclude-selector`.
    Selector,
}

/// The configured exclusions.
#[derive(Clone, Debug, Default)]
pub struct Exclusions {
    /// StorageClass names whose volumes are never reported.
    pub classes: BTreeSet<String>,
    /// PVs whose labels match are never reported.
    pub selector: Option<Selector>,
}

impl Exclusions {
    /// Why a PV with these labels and class is excluded, if it is.
    pub(crate) fn why(
        &self,
        labels: Option<&BTreeMap<String, String>>,
        class: Option<&str>,
    ) -> Option<Exclusion> {
        if labels
            .and_then(|l| l.get(IGNORE_LABEL))
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
        {
            return Some(Exclusion::IgnoreLabel);
        }
        if class.is_some_and(|c| self.classes.contains(c)) {
            return Some(Exclusion::StorageClass);
        }
        if self.selector.as_ref().is_some_and(|s| s.matches(labels)) {
            return Some(Exclusion::Selector);
        }
        None
    }
}
