//! A finding, the verdict on a volume and the change a write makes to a finding: what the
//! decisions produce and the rest of the house publishes.

use crate::model::crd::{Reason, VolumeLeftoverStatus};
use crate::model::phase::{Phase, ReclaimPolicy};

/// One finding: what to publish about a PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `metadata.name` of the PersistentVolume.
    pub volume_name: String,
    /// `metadata.uid` of the PersistentVolume.
    pub(crate) volume_uid: String,
    /// The raw `spec.storageClassName` (the original tool prints `""` as it is).
    pub(crate) storage_class_name: Option<String>,
    /// The observation; `first_seen` is `now` (the planner decides the published one).
    pub status: VolumeLeftoverStatus,
    /// The VolumeLeftover's name when it is not the PersistentVolume's (a finding about an
    /// image no volume references).
    pub(crate) object_name: Option<String>,
}

impl Finding {
    /// The VolumeLeftover's name.
    pub(crate) fn name(&self) -> &str {
        self.object_name.as_deref().unwrap_or(&self.volume_name)
    }
}

/// The verdict on one PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not a finding (Available, Pending, healthy Bound).
    Healthy,
    /// A finding.
    Leftover(Box<Finding>),
    /// Cannot be decided now: a store it depends on is stale, or claims are forbidden for a
    /// volume whose finding would depend on them. Whatever is published stays as it is.
    Undecided(Undecided),
    /// The object is too odd to say anything sensible about; the string says why (for a log).
    Skip(String),
    /// Kept on purpose (the ignore label, an excluded class or selector): never a finding.
    Ignored(crate::model::exclude::Exclusion),
}

/// Why a PersistentVolume cannot be decided now; its `Display` is the sentence logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Undecided {
    /// The claim store is stale: its answer about the volume's claim is not used.
    ClaimStoreStale {
        /// The PersistentVolume's name.
        volume: String,
    },
    /// The StorageClass store is stale: its answer about the volume's class is not used.
    ClassStoreStale {
        /// The PersistentVolume's name.
        volume: String,
    },
    /// Claims cannot be read, and a Bound volume is a finding only if its claim is missing.
    BoundClaimUnknown {
        /// The PersistentVolume's name.
        volume: String,
    },
    /// Claims cannot be read, and a pre-bound volume is a finding only if its claim is missing.
    PreboundClaimUnknown {
        /// The PersistentVolume's name.
        volume: String,
    },
    /// The census of the volume's disk has not answered yet (the operator's first listing of
    /// its scope is under way).
    CensusNotAnswered {
        /// The PersistentVolume's name.
        volume: String,
    },
}

impl std::fmt::Display for Undecided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecided::ClaimStoreStale { volume } => write!(
                f,
                "the claim store is stale; PersistentVolume {volume} waits until it has resynced"
            ),
            Undecided::ClassStoreStale { volume } => write!(
                f,
                "the StorageClass store is stale; PersistentVolume {volume} waits until it has resynced"
            ),
            Undecided::BoundClaimUnknown { volume } => write!(
                f,
                "claims cannot be read; whether the claim of Bound PersistentVolume {volume} exists is unknown"
            ),
            Undecided::PreboundClaimUnknown { volume } => write!(
                f,
                "claims cannot be read; whether the claim PersistentVolume {volume} is pre-bound to exists is unknown"
            ),
            Undecided::CensusNotAnswered { volume } => write!(
                f,
                "the census of its disk has not answered yet; PersistentVolume {volume} waits until it has"
            ),
        }
    }
}

/// Whether deleting this PersistentVolume left its disk behind: its reclaim policy was not
/// Delete (Retain, or Recycle, which never deletes the disk), or its delete was known to have
/// failed (phase Failed). A Delete-policy volume deleted otherwise is assumed deleted with it: the
/// provisioner deletes the backend volume before the PV object.
pub(crate) fn leaves_a_disk(reclaim_policy: ReclaimPolicy, phase: Phase) -> bool {
    reclaim_policy != ReclaimPolicy::Delete || phase == Phase::Failed
}

/// What changed about a finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Change {
    /// A finding was published.
    Found {
        /// Its reason.
        reason: Reason,
        /// Its message.
        message: String,
    },
    /// A published finding changed reason.
    ReasonChanged {
        /// Before.
        from: Reason,
        /// Now.
        to: Reason,
        /// The new message.
        message: String,
    },
    /// A published finding cleared (the volume is healthy, gone, or kept on purpose).
    Cleared {
        /// The reason it had.
        reason: Reason,
    },
}
