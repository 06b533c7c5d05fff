//! A PersistentVolume's phase and reclaim policy as the decisions read them. Types only.
//!
//! Both are read from strings (the lean volume, a published status) and never written back:
//! the published status keeps the text the volume had, so a value Kubernetes does not define is
//! shown as it is.

/// The phase (`status.phase`), as far as the decisions care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// `Released`: its claim was deleted.
    Released,
    /// `Bound` to a claim.
    Bound,
    /// `Failed`: its reclaim (recycle or delete) failed.
    Failed,
    /// `Available` or `Pending`: waiting to be bound.
    Unbound,
    /// Missing, or a value Kubernetes does not define.
    Other,
}

impl Phase {
    /// The phase `status.phase` names (`""` when it is missing).
    pub(crate) fn of(s: &str) -> Phase {
        match s {
            "Released" => Phase::Released,
            "Bound" => Phase::Bound,
            "Failed" => Phase::Failed,
            "Available" | "Pending" => Phase::Unbound,
            _ => Phase::Other,
        }
    }
}

/// The reclaim policy (`spec.persistentVolumeReclaimPolicy`): what Kubernetes does with the disk
/// once the claim is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReclaimPolicy {
    /// The provisioner deletes the disk, then Kubernetes the volume.
    Delete,
    /// The volume and its disk stay until someone deletes them.
    Retain,
    /// The volume is scrubbed and made Available again (deprecated); the disk is never deleted.
    Recycle,
    /// A value Kubernetes does not define: treated like Retain (nothing deletes the disk).
    Other,
}

impl ReclaimPolicy {
    /// The policy a volume's or a class's `reclaimPolicy` names.
    pub(crate) fn of(s: &str) -> ReclaimPolicy {
        match s {
            "Delete" => ReclaimPolicy::Delete,
            "Retain" => ReclaimPolicy::Retain,
            "Recycle" => ReclaimPolicy::Recycle,
            _ => ReclaimPolicy::Other,
        }
    }
}
