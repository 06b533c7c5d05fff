//! What to write for one PersistentVolume name. Pure: no client, no clock.
//!
//! Given the verdict, the VolumeLeftover that exists now (from the operator's own reflector) and
//! the time, decides whether to apply, delete or leave alone. Nothing is written when the object
//! already says the same, so a converged cluster sees no writes, even after a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::classify::{Finding, Verdict};
use crate::crd::{Reason, VolumeLeftover, VolumeLeftoverSpec};

/// Field manager of every write.
pub const FIELD_MANAGER: &str = "volume-leftovers";
/// Label that marks the objects this operator owns; objects without it are never touched.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY`].
pub const MANAGED_BY_VALUE: &str = "volume-leftovers";
/// Label with the finding's reason.
pub const LABEL_REASON: &str = "leftovers.dev/reason";
/// Label with the claim's namespace.
pub const LABEL_CLAIM_NAMESPACE: &str = "leftovers.dev/claim-namespace";
/// Label with the StorageClass name.
pub const LABEL_STORAGE_CLASS: &str = "leftovers.dev/storage-class";
/// Every label this operator writes; any other label on a VolumeLeftover belongs to someone else.
pub const OWN_LABELS: [&str; 4] = [
    MANAGED_BY,
    LABEL_REASON,
    LABEL_CLAIM_NAMESPACE,
    LABEL_STORAGE_CLASS,
];

/// The decision for one name.
#[derive(Clone, Debug)]
pub enum Action {
    /// The object already says what it should (or there is nothing to say).
    Nothing,
    /// Server-side apply the object; `meta` and `status` say which of the two parts differ.
    Apply {
        /// The complete desired object.
        object: Box<VolumeLeftover>,
        /// Labels, ownerReferences or spec differ.
        meta: bool,
        /// Status differs.
        status: bool,
    },
    /// Delete the managed object with this UID (precondition, so a newer object survives).
    Delete {
        /// Name of the VolumeLeftover.
        name: String,
        /// UID of the object observed.
        uid: Option<String>,
    },
    /// A VolumeLeftover of that name exists but is not managed by the operator: leave it alone.
    Foreign {
        /// Name of the VolumeLeftover.
        name: String,
    },
}

/// Grace for `BoundClaimMissing`, which real clusters show transiently.
#[derive(Clone, Copy, Debug)]
pub struct BoundGrace {
    /// How long the state must persist before it is published.
    pub grace: Duration,
}

/// Result of applying the grace rule.
#[derive(Clone, Debug, PartialEq)]
pub enum Gated {
    /// Publish this verdict.
    Now(Verdict),
    /// Not yet: look again after this long (the suspicion started at `since`).
    Later(Duration),
}

/// Holds back a `BoundClaimMissing` finding until it has persisted for the grace period, unless
/// it is already published (a restart does not retract a published finding).
///
/// `suspect_since` is when this process first saw the PV in that state, if it has; the caller
/// keeps it. `now` and `suspect_since` are wall-clock times.
pub fn gate(
    verdict: Verdict,
    existing: Option<&VolumeLeftover>,
    suspect_since: Option<Time>,
    now: &Time,
    grace: BoundGrace,
) -> Gated {
    let Verdict::Leftover(f) = &verdict else {
        return Gated::Now(verdict);
    };
    if f.status.reason != Reason::BoundClaimMissing {
        return Gated::Now(verdict);
    }
    let published = existing
        .filter(|o| is_managed(o) && o.spec.volume_uid == f.volume_uid)
        .and_then(|o| o.status.as_ref())
        .is_some_and(|s| s.reason == Reason::BoundClaimMissing);
    if published {
        return Gated::Now(verdict);
    }
    let since = suspect_since.unwrap_or_else(|| now.clone());
    let elapsed = now.0.duration_since(since.0);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    if elapsed >= grace.grace {
        Gated::Now(verdict)
    } else {
        Gated::Later(grace.grace - elapsed)
    }
}

/// Whether the object carries the operator's managed-by label.
pub fn is_managed(o: &VolumeLeftover) -> bool {
    o.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// Decides what to write for one PV name.
///
/// `verdict` is `None` when the PV does not exist. `existing` is the VolumeLeftover of that name.
pub fn plan(name: &str, verdict: Option<&Verdict>, existing: Option<&VolumeLeftover>) -> Action {
    if existing.is_some_and(|o| !is_managed(o)) {
        // Someone else's object under our name: never touched, never deleted.
        return match verdict {
            Some(Verdict::Leftover(_)) => Action::Foreign {
                name: name.to_string(),
            },
            _ => Action::Nothing,
        };
    }
    match verdict {
        Some(Verdict::Leftover(f)) => {
            let object = desired(f, existing);
            let (meta, status) = match existing {
                None => (true, true),
                Some(e) => (!same_meta(e, &object), e.status != object.status),
            };
            if meta || status {
                Action::Apply {
                    object: Box::new(object),
                    meta,
                    status,
                }
            } else {
                Action::Nothing
            }
        }
        // A skipped PV keeps whatever was published: the odd object is logged, not un-reported.
        Some(Verdict::Skip(_)) => Action::Nothing,
        Some(Verdict::Healthy) | None => match existing {
            Some(e) => Action::Delete {
                name: name.to_string(),
                uid: e.metadata.uid.clone(),
            },
            None => Action::Nothing,
        },
    }
}

/// The complete object for a finding. `firstSeen` is kept from the existing object when it is
/// about the same volume (uid).
pub fn desired(f: &Finding, existing: Option<&VolumeLeftover>) -> VolumeLeftover {
    let mut status = f.status.clone();
    // Only for the same volume: a PV re-created under the same name is a new finding.
    if let Some(seen) = existing
        .filter(|e| e.spec.volume_uid == f.volume_uid)
        .and_then(|e| e.status.as_ref())
        .map(|s| s.first_seen.clone())
    {
        status.first_seen = seen;
    }
    let mut o = VolumeLeftover::new(
        &f.volume_name,
        VolumeLeftoverSpec {
            volume_name: f.volume_name.clone(),
            volume_uid: f.volume_uid.clone(),
        },
    );
    o.metadata = ObjectMeta {
        name: Some(f.volume_name.clone()),
        labels: Some(labels(f)),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            name: f.volume_name.clone(),
            uid: f.volume_uid.clone(),
            // No blockOwnerDeletion: it needs delete rights on the PV under
            // OwnerReferencesPermissionEnforcement, and nothing should wait for us.
            block_owner_deletion: None,
            controller: None,
        }]),
        ..ObjectMeta::default()
    };
    o.status = Some(status);
    o
}

fn labels(f: &Finding) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    l.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
    l.insert(LABEL_REASON.into(), f.status.reason.as_str().into());
    if let Some(ns) = f
        .status
        .claim
        .as_ref()
        .and_then(|c| c.namespace.as_deref())
        .filter(|v| is_label_value(v))
    {
        l.insert(LABEL_CLAIM_NAMESPACE.into(), ns.into());
    }
    if let Some(class) = f
        .status
        .storage_class
        .as_ref()
        .map(|c| c.name.as_str())
        .filter(|v| is_label_value(v))
    {
        l.insert(LABEL_STORAGE_CLASS.into(), class.into());
    }
    l
}

/// A label value: at most 63 characters, alphanumerics and `-_.` inside, alphanumeric at both
/// ends. StorageClass names may be up to 253 characters: those get no label rather than a
/// rejected write.
pub fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Whether the parts of metadata and spec this operator owns already say what `want` says.
/// Labels and ownerReferences that others added are theirs and do not count.
fn same_meta(have: &VolumeLeftover, want: &VolumeLeftover) -> bool {
    let empty = BTreeMap::new();
    let have_labels = have.metadata.labels.as_ref().unwrap_or(&empty);
    let want_labels = want.metadata.labels.as_ref().unwrap_or(&empty);
    let labels_same = OWN_LABELS
        .iter()
        .all(|k| have_labels.get(*k) == want_labels.get(*k));
    let owners_same = want.metadata.owner_references.iter().flatten().all(|w| {
        have.metadata
            .owner_references
            .iter()
            .flatten()
            .any(|h| h == w)
    });
    labels_same && owners_same && have.spec == want.spec
}
