//! Classification of one PersistentVolume. Pure: no client, no clock (the time is an argument).
//!
//! The same code serves the controller (over reflector stores) and `scan` (over paginated lists):
//! both implement [`Lookup`].

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::crd::{
    ClaimInfo, Hint, Reason, StorageClassInfo, Tristate, VolumeLeftoverStatus, VolumeSourceInfo,
};
use crate::volume::{Volume, VolumeSpec};

/// What is known about a claim, looked up by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimFacts {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

/// What is known about a StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassFacts {
    /// `reclaimPolicy`, defaulted to Delete as the API server does.
    pub reclaim_policy: String,
}

/// The answer of a lookup: a 403 is [`Found::Unknown`], never [`Found::Absent`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<T> {
    /// The object exists.
    Yes(T),
    /// The object does not exist (the store is synced and does not hold it).
    Absent,
    /// The objects of this kind cannot be read.
    Unknown,
}

/// Read access to claims and StorageClasses.
pub trait Lookup {
    /// The claim `namespace/name`.
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts>;
    /// The StorageClass `name`.
    fn class(&self, name: &str) -> Found<ClassFacts>;
}

/// One finding: what to publish about a PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// `metadata.name` of the PersistentVolume.
    pub volume_name: String,
    /// `metadata.uid` of the PersistentVolume.
    pub volume_uid: String,
    /// The observation; `first_seen` is `now` (the planner keeps an earlier one).
    pub status: VolumeLeftoverStatus,
}

/// The verdict on one PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not a finding (Available, Pending, healthy Bound).
    Healthy,
    /// A finding.
    Leftover(Box<Finding>),
    /// The object is too odd to judge; the string says why (for a log line).
    Skip(String),
}

const RELEASED: &str = "Released";
const BOUND: &str = "Bound";
const FAILED: &str = "Failed";
const CLAIM_KIND: &str = "PersistentVolumeClaim";

/// Classifies one PersistentVolume.
pub fn classify(pv: &Volume, lookup: &impl Lookup, now: Time) -> Verdict {
    let Some(name) = pv.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
        return Verdict::Skip("PersistentVolume without metadata.name".into());
    };
    let Some(spec) = pv.spec.as_ref() else {
        return Verdict::Skip(format!("PersistentVolume {name} has no spec"));
    };
    let Some(uid) = pv.metadata.uid.as_deref().filter(|u| !u.is_empty()) else {
        return Verdict::Skip(format!("PersistentVolume {name} has no metadata.uid"));
    };
    let status = pv.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let judged = match phase {
        "Available" | "Pending" => return Verdict::Healthy,
        RELEASED => Judged::Released,
        BOUND => Judged::Bound,
        FAILED => Judged::Failed,
        "" => return Verdict::Skip(format!("PersistentVolume {name} has no status.phase")),
        other => {
            return Verdict::Skip(format!(
                "PersistentVolume {name} has unknown phase {other:?}"
            ));
        }
    };

    let claim_ref = spec.claim_ref.as_ref();
    if let Some(kind) = claim_ref.and_then(|r| r.kind.as_deref())
        && !kind.is_empty()
        && kind != CLAIM_KIND
    {
        return Verdict::Skip(format!(
            "PersistentVolume {name} has a claimRef to kind {kind:?}, not {CLAIM_KIND}"
        ));
    }
    let claim = claim_ref.map(|r| {
        observe_claim(
            r.namespace.as_deref(),
            r.name.as_deref(),
            r.uid.as_deref(),
            lookup,
        )
    });

    let reason = match (judged, &claim) {
        (Judged::Failed, _) => Reason::ReclaimFailed,
        (Judged::Released, None) => Reason::ReleasedWithoutClaim,
        (Judged::Released, Some(c)) => match (c.info.missing, &c.existing) {
            (Tristate::Unknown, _) => Reason::ClaimUnknown,
            (Tristate::True, Some(_)) => Reason::ClaimRecreated,
            (Tristate::True, None) => Reason::ClaimDeleted,
            (Tristate::False, _) => Reason::ClaimStillPresent,
        },
        (Judged::Bound, None) => {
            return Verdict::Skip(format!(
                "PersistentVolume {name} is Bound but has no claimRef"
            ));
        }
        (Judged::Bound, Some(c)) if c.incomplete => {
            return Verdict::Skip(format!(
                "PersistentVolume {name} is Bound but its claimRef lacks a namespace or name"
            ));
        }
        (Judged::Bound, Some(c)) => match c.info.missing {
            Tristate::True => Reason::BoundClaimMissing,
            // Unknown: claims cannot be read, and a 403 never makes a finding of a Bound PV.
            Tristate::False | Tristate::Unknown => return Verdict::Healthy,
        },
    };

    let reclaim_policy = spec
        .persistent_volume_reclaim_policy
        .clone()
        .unwrap_or_else(|| "Retain".to_string());
    let storage_class = spec
        .storage_class_name
        .as_deref()
        .filter(|c| !c.is_empty())
        .map(|c| observe_class(c, lookup));

    let mut hints = BTreeSet::new();
    if reclaim_policy == "Delete" && matches!(judged, Judged::Released | Judged::Failed) {
        hints.insert(Hint::ReclaimPolicyDelete);
    }
    if let Some(sc) = &storage_class {
        match sc.missing {
            Tristate::True => {
                hints.insert(Hint::StorageClassMissing);
            }
            Tristate::Unknown => {
                hints.insert(Hint::StorageClassUnknown);
            }
            Tristate::False => {}
        }
        if sc
            .reclaim_policy
            .as_deref()
            .is_some_and(|p| p != reclaim_policy)
        {
            hints.insert(Hint::ReclaimPolicyMismatch);
        }
    }

    let terminating = claim.as_ref().is_some_and(|c| c.terminating);
    let claim = claim.map(|c| c.info);
    let message = message(
        reason,
        name,
        claim.as_ref(),
        &reclaim_policy,
        &hints,
        terminating,
    );
    let phase_message = status
        .and_then(|s| s.message.clone())
        .filter(|m| !m.is_empty());
    Verdict::Leftover(Box::new(Finding {
        volume_name: name.to_string(),
        volume_uid: uid.to_string(),
        status: VolumeLeftoverStatus {
            reason,
            message,
            hints: hints.into_iter().collect(),
            phase: phase.to_string(),
            phase_since: status.and_then(|s| s.last_phase_transition_time.clone()),
            phase_message,
            reclaim_policy,
            storage_class,
            claim,
            capacity: spec
                .capacity
                .as_ref()
                .and_then(|c| c.storage.as_ref())
                .map(|q| q.0.clone()),
            access_modes: spec.access_modes.clone().unwrap_or_default(),
            volume_mode: spec
                .volume_mode
                .clone()
                .unwrap_or_else(|| "Filesystem".to_string()),
            source: volume_source(spec),
            first_seen: now,
        },
    }))
}

/// The phases that can carry a finding.
#[derive(Clone, Copy)]
enum Judged {
    Released,
    Bound,
    Failed,
}

struct ObservedClaim {
    info: ClaimInfo,
    /// The claimRef lacks a namespace or a name.
    incomplete: bool,
    /// The claim exists and is being deleted.
    terminating: bool,
    /// A claim exists under the reference's namespace/name but with another UID.
    existing: Option<String>,
}

fn observe_claim(
    namespace: Option<&str>,
    name: Option<&str>,
    uid: Option<&str>,
    lookup: &impl Lookup,
) -> ObservedClaim {
    let namespace = namespace.filter(|s| !s.is_empty());
    let name = name.filter(|s| !s.is_empty());
    let uid = uid.filter(|s| !s.is_empty());
    let reference = format!("{}/{}", namespace.unwrap_or(""), name.unwrap_or(""));
    let (missing, current_uid, terminating) = match (namespace, name) {
        (Some(ns), Some(n)) => match lookup.claim(ns, n) {
            Found::Unknown => (Tristate::Unknown, None, false),
            Found::Absent => (Tristate::True, None, false),
            // A claimRef without a uid is a pre-binding by name: any claim of that name is it.
            Found::Yes(c) if uid.is_none_or(|u| u == c.uid) => {
                (Tristate::False, None, c.terminating)
            }
            Found::Yes(c) => (Tristate::True, Some(c.uid), false),
        },
        _ => (Tristate::Unknown, None, false),
    };
    ObservedClaim {
        incomplete: namespace.is_none() || name.is_none(),
        terminating,
        existing: current_uid.clone(),
        info: ClaimInfo {
            reference,
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            uid: uid.map(str::to_string),
            missing,
            current_uid,
        },
    }
}

fn observe_class(name: &str, lookup: &impl Lookup) -> StorageClassInfo {
    let (reclaim_policy, missing) = match lookup.class(name) {
        Found::Yes(c) => (Some(c.reclaim_policy), Tristate::False),
        Found::Absent => (None, Tristate::True),
        Found::Unknown => (None, Tristate::Unknown),
    };
    StorageClassInfo {
        name: name.to_string(),
        reclaim_policy,
        missing,
    }
}

fn message(
    reason: Reason,
    pv: &str,
    claim: Option<&ClaimInfo>,
    reclaim: &str,
    hints: &BTreeSet<Hint>,
    terminating: bool,
) -> String {
    let claim_ref = claim.map_or("", |c| c.reference.as_str());
    let old_uid = claim.and_then(|c| c.uid.as_deref()).unwrap_or("?");
    let new_uid = claim.and_then(|c| c.current_uid.as_deref()).unwrap_or("?");
    let mut m = match reason {
        Reason::ClaimDeleted => format!(
            "PersistentVolume {pv} is Released and its claim {claim_ref} (uid {old_uid}) no longer exists; the volume and its data survived the claim."
        ),
        Reason::ClaimRecreated => format!(
            "PersistentVolume {pv} is Released and still names claim {claim_ref} uid {old_uid}, but the claim of that name now has uid {new_uid} and cannot bind it while the claimRef names the old uid."
        ),
        Reason::ClaimStillPresent if terminating => format!(
            "PersistentVolume {pv} is Released but its claim {claim_ref} (uid {old_uid}) still exists, terminating."
        ),
        Reason::ClaimStillPresent => format!(
            "PersistentVolume {pv} is Released but its claim {claim_ref} (uid {old_uid}) still exists."
        ),
        Reason::ClaimUnknown => format!(
            "PersistentVolume {pv} is Released; whether its claim {claim_ref} still exists is unknown."
        ),
        Reason::ReleasedWithoutClaim => {
            format!("PersistentVolume {pv} is Released but has no claimRef.")
        }
        Reason::BoundClaimMissing => format!(
            "PersistentVolume {pv} is Bound to claim {claim_ref} (uid {old_uid}), which does not exist."
        ),
        Reason::ReclaimFailed => {
            format!("PersistentVolume {pv} is Failed: its {reclaim} reclaim did not complete.")
        }
    };
    if hints.contains(&Hint::ReclaimPolicyDelete) && reason != Reason::ReclaimFailed {
        m.push_str(" Its reclaim policy is Delete: the provisioner's delete hung or failed.");
    }
    m
}

/// Where the data lives. Exhaustive over the sources the API knows, so a new one is a choice.
fn volume_source(spec: &VolumeSpec) -> VolumeSourceInfo {
    let mut s = VolumeSourceInfo::default();
    if let Some(csi) = &spec.csi {
        let attrs = csi.volume_attributes.as_ref();
        let attr = |v: Option<&String>| v.filter(|v| !v.is_empty()).cloned();
        s.kind = "csi".into();
        s.driver = Some(csi.driver.clone());
        s.volume_handle = Some(csi.volume_handle.clone());
        s.pool = attr(attrs.and_then(|a| a.pool.as_ref()));
        s.image_name = attr(attrs.and_then(|a| a.image_name.as_ref()));
    } else if let Some(rbd) = &spec.rbd {
        s.kind = "rbd".into();
        s.pool = Some(rbd.pool.clone().unwrap_or_else(|| "rbd".into()));
        s.image_name = Some(rbd.image.clone());
    } else if let Some(gce) = &spec.gce_persistent_disk {
        s.kind = "gcePersistentDisk".into();
        s.disk_name = Some(gce.pd_name.clone());
    } else if let Some(aws) = &spec.aws_elastic_block_store {
        s.kind = "awsElasticBlockStore".into();
        s.disk_name = Some(aws.volume_id.clone());
    } else if let Some(az) = &spec.azure_disk {
        s.kind = "azureDisk".into();
        s.disk_name = Some(az.disk_name.clone());
    } else if let Some(c) = &spec.cinder {
        s.kind = "cinder".into();
        s.disk_name = Some(c.volume_id.clone());
    } else if let Some(v) = &spec.vsphere_volume {
        s.kind = "vsphereVolume".into();
        s.disk_name = Some(v.volume_path.clone());
    } else if let Some(n) = &spec.nfs {
        s.kind = "nfs".into();
        s.path = Some(format!("{}:{}", n.server, n.path));
    } else if let Some(h) = &spec.host_path {
        s.kind = "hostPath".into();
        s.path = Some(h.path.clone());
    } else if let Some(l) = &spec.local {
        s.kind = "local".into();
        s.path = Some(l.path.clone());
    } else {
        s.kind = other_source_kind(spec).into();
    }
    s
}

fn other_source_kind(spec: &VolumeSpec) -> &'static str {
    let crate::volume::OtherSources {
        azure_file,
        cephfs,
        fc,
        flex_volume,
        flocker,
        glusterfs,
        iscsi,
        photon_persistent_disk,
        portworx_volume,
        quobyte,
        scale_io,
        storageos,
    } = &spec.other;
    [
        (azure_file.is_some(), "azureFile"),
        (cephfs.is_some(), "cephfs"),
        (fc.is_some(), "fc"),
        (flex_volume.is_some(), "flexVolume"),
        (flocker.is_some(), "flocker"),
        (glusterfs.is_some(), "glusterfs"),
        (iscsi.is_some(), "iscsi"),
        (photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (portworx_volume.is_some(), "portworxVolume"),
        (quobyte.is_some(), "quobyte"),
        (scale_io.is_some(), "scaleIO"),
        (storageos.is_some(), "storageos"),
    ]
    .into_iter()
    .find_map(|(set, kind)| set.then_some(kind))
    .unwrap_or("unknown")
}
