//! The label vocabulary of VolumeLeftovers: the field manager, the labels this operator owns,
//! and what a label value may be. At the bottom of the house: everything that reads or writes a
//! label uses these names.

use crate::model::crd::VolumeLeftover;

/// Field manager of every write.
pub(crate) const FIELD_MANAGER: &str = "volume-leftovers";
/// Label that marks the objects this operator owns; objects without it are never touched.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "volume-leftovers";
/// Label with the finding's reason.
pub const LABEL_REASON: &str = "leftovers.dev/reason";
/// Label with the claim's namespace, when the claimRef names one.
pub(crate) const LABEL_CLAIM_NAMESPACE: &str = "leftovers.dev/claim-namespace";
/// Label with the StorageClass name, when there is one and it is a valid label value.
pub(crate) const LABEL_STORAGE_CLASS: &str = "leftovers.dev/storage-class";
/// Label with the state (Open, Acknowledged, Expired, Superseded).
pub(crate) const LABEL_STATE: &str = "leftovers.dev/state";
/// Prefix of one label per hint: `hint.leftovers.dev/ReclaimPolicyDelete: "true"`, so that
/// `kubectl get vl -l hint.leftovers.dev/ReclaimPolicyDelete` lists the hung deletes.
pub(crate) const HINT_LABEL_PREFIX: &str = "hint.leftovers.dev/";

/// Whether a label is one this operator writes; any other label on a VolumeLeftover belongs to
/// someone else and is never touched.
pub(crate) fn is_own_label(key: &str) -> bool {
    matches!(
        key,
        MANAGED_BY | LABEL_REASON | LABEL_CLAIM_NAMESPACE | LABEL_STORAGE_CLASS | LABEL_STATE
    ) || key.starts_with(HINT_LABEL_PREFIX)
}

/// A non-empty label value: at most 63 characters, alphanumerics and `-_.` inside, alphanumeric
/// at both ends. StorageClass names may be up to 253 characters: those get an empty label rather
/// than a rejected write.
pub(crate) fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether the object carries the operator's managed-by label.
pub(crate) fn is_managed(o: &VolumeLeftover) -> bool {
    o.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}
