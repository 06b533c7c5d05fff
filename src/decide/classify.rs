//! Classification of one PersistentVolume. Pure: no client, no clock (the time is an argument).
//!
//! The same code serves the operator (over reflector stores) and `scan` (over paginated lists):
//! both implement [`Lookup`]. A finding never says more than its inputs show: a claim is missing
//! only when a healthy store or a completed list says no claim of that name exists, a 403 makes
//! it Unknown, and an answer from a stale store makes the whole verdict [`Verdict::Undecided`].

use crate::model::uid::Uid;
use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

#[cfg(test)]
pub(crate) use crate::decide::lookup::ClassFacts;
pub(crate) use crate::decide::lookup::{ClaimFacts, Found, Lookup, disk_found};
use crate::model::crd::{
    ClaimInfo, Hint, Reason, StorageClassInfo, Subject, Tristate, VolumeLeftoverStatus,
    VolumeSourceInfo,
};
use crate::model::expansion::ClaimSize;
use crate::model::finding::Undecided;
pub(crate) use crate::model::finding::{Finding, Verdict, leaves_a_disk};
use crate::model::image::ImageFound;
use crate::model::phase::{Phase, ReclaimPolicy};
use crate::model::size::SizeDrift;
use crate::model::volume::{ClaimRef, Volume, VolumeSpec};

const CLAIM_KIND: &str = "PersistentVolumeClaim";

/// Classifies one PersistentVolume: what its phase and claim say, and, where the storage
/// backend's census covers its image, whether the image is gone (`VolumeWithoutDisk` wins over
/// the claim's story: it is the more urgent one, and its message says both).
pub fn classify(pv: &Volume, lookup: &impl Lookup, now: Time) -> Verdict {
    let verdict = classify_claim(pv, lookup, now.clone());
    if !matches!(verdict, Verdict::Healthy | Verdict::Leftover(_)) {
        return verdict;
    }
    let Some(spec) = pv.spec.as_ref() else {
        return verdict;
    };
    let source = volume_source(spec);
    // What the census will say of the disk (there, gone, its size) is part of the verdict:
    // before it has answered, the verdict waits, and what is published stays.
    if let Some(c) = lookup.census()
        && let Some(r) = c.disk_ref(&source)
        && !c.has_answered(&r)
    {
        return Verdict::Undecided(Undecided::CensusNotAnswered {
            volume: pv.metadata.name.as_deref().unwrap_or_default().to_string(),
        });
    }
    let ImageFound::Missing { in_trash } =
        disk_found(lookup, &source, pv.metadata.creation_timestamp.as_ref())
    else {
        return with_disk_size(verdict, pv, spec, &source, lookup, now);
    };
    let looked_in = lookup
        .census()
        .and_then(|c| crate::decide::census::looked_in(c, &source));
    census_finding(
        pv,
        spec,
        Reason::VolumeWithoutDisk,
        in_trash,
        looked_in,
        lookup,
        now,
    )
    .unwrap_or(verdict)
}

/// The finding the census makes of a volume (its disk gone, or of another size): `None` for a
/// volume without a name or uid, which has no finding.
fn census_finding(
    pv: &Volume,
    spec: &VolumeSpec,
    reason: Reason,
    in_trash: bool,
    looked_in: Option<crate::model::crd::ImageInfo>,
    lookup: &impl Lookup,
    now: Time,
) -> Option<Verdict> {
    let uid = pv.metadata.uid.as_ref().map(Uid::to_string)?;
    let name = pv.metadata.name.as_deref()?;
    let phase_str = pv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    Some(describe(
        Described {
            pv,
            name,
            uid: &uid,
            spec,
            phase: Phase::of(phase_str),
            phase_str,
            claim: spec.claim_ref.as_ref().map(|r| observe_claim(r, lookup)),
            reason,
            deleted_at: None,
            in_trash,
            looked_in,
        },
        lookup,
        now,
    ))
}

/// What the disk's size, where the census lists it, adds to the verdict on its volume: on a
/// finding, the size (its cost is then the disk's) and, where it differs from the PV's capacity,
/// the hint `DiskSizeDiffers`; on a volume that is otherwise healthy, a differing size is itself
/// the finding `DiskSizeMismatch` (one finding per PV: the stronger story keeps the name).
fn with_disk_size(
    verdict: Verdict,
    pv: &Volume,
    spec: &VolumeSpec,
    source: &VolumeSourceInfo,
    lookup: &impl Lookup,
    now: Time,
) -> Verdict {
    let Some(size) = crate::decide::lookup::disk_size(lookup, source) else {
        return verdict;
    };
    let capacity = spec
        .capacity
        .as_ref()
        .and_then(|c| c.storage.as_deref())
        .and_then(crate::model::quantity::bytes);
    let drift = capacity.and_then(|c| size.against(c));
    let bytes = i64::try_from(size.bytes).ok();
    match verdict {
        Verdict::Leftover(mut f) => {
            f.status.disk_size_bytes = bytes;
            if let Some(drift) = drift {
                if !f.status.hints.contains(&Hint::DiskSizeDiffers) {
                    f.status.hints.push(Hint::DiskSizeDiffers);
                    f.status.hints.sort();
                }
                f.status.message.push(' ');
                f.status.message.push_str(&size_sentence(size, drift));
            }
            Verdict::Leftover(f)
        }
        Verdict::Healthy if drift.is_some() => {
            match census_finding(pv, spec, Reason::DiskSizeMismatch, false, None, lookup, now) {
                Some(Verdict::Leftover(mut f)) => {
                    f.status.disk_size_bytes = bytes;
                    if let Some(drift) = drift {
                        f.status.message.push(' ');
                        f.status.message.push_str(&size_sentence(size, drift));
                    }
                    Verdict::Leftover(f)
                }
                Some(other) => other,
                None => Verdict::Healthy,
            }
        }
        other => other,
    }
}

/// What a differing disk size means, in one sentence.
fn size_sentence(size: crate::model::size::DiskSize, drift: SizeDrift) -> String {
    let disk = crate::model::quantity::format_bytes(i64::try_from(size.bytes).unwrap_or(i64::MAX));
    match drift {
        SizeDrift::DiskLarger => format!(
            "Its disk is {disk}, larger than the PV's capacity: it bills for {disk} (grown in the backend, or an expansion that stopped before the PV was updated)."
        ),
        SizeDrift::DiskSmaller => format!(
            "Its disk is {disk}, smaller than the PV's capacity: the PV says more than the disk has (an expansion that never reached the disk, or a capacity edited by hand)."
        ),
    }
}

/// Classifies one PersistentVolume by its phase and its claim.
fn classify_claim(pv: &Volume, lookup: &impl Lookup, now: Time) -> Verdict {
    let Some(name) = pv.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
        return Verdict::Skip("PersistentVolume without metadata.name".into());
    };
    let uid = pv.metadata.uid.as_ref().map(Uid::to_string);
    let Some(uid) = uid.as_deref().filter(|u| !u.is_empty()) else {
        return Verdict::Skip(format!("PersistentVolume {name} has no metadata.uid"));
    };
    if let Some(why) = pv.excluded {
        return Verdict::Ignored(why);
    }
    let default_spec = VolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&default_spec);
    let status = pv.status.as_ref();
    let phase_str = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let phase = Phase::of(phase_str);

    let claim = spec.claim_ref.as_ref().map(|r| observe_claim(r, lookup));
    if claim.as_ref().is_some_and(|c| c.stale) {
        return Verdict::Undecided(Undecided::ClaimStoreStale {
            volume: name.into(),
        });
    }

    let reason = match claim_reason(name, phase, phase_str, claim.as_ref()) {
        Ok(reason) => reason,
        Err(no_finding) => return no_finding,
    };

    describe(
        Described {
            pv,
            name,
            uid,
            spec,
            phase,
            phase_str,
            claim,
            reason,
            deleted_at: None,
            in_trash: false,
            looked_in: None,
        },
        lookup,
        now,
    )
}

/// The reason of the finding a volume's phase and claim make, or, as the error, the verdict when
/// they make none: healthy, skipped, or undecided because the claim cannot be read.
fn claim_reason(
    name: &str,
    phase: Phase,
    phase_str: &str,
    claim: Option<&ObservedClaim>,
) -> Result<Reason, Verdict> {
    // One arm per phase: the phases are disjoint, so each arm decides alone.
    match (phase, claim) {
        (Phase::Failed, _) => Ok(Reason::ReclaimFailed),
        (Phase::Released, claim) => Ok(released_reason(claim)),
        (Phase::Bound, claim) => bound_reason(name, claim),
        (Phase::Unbound | Phase::Other, Some(c)) if !c.incomplete => {
            prebound_reason(name, phase, phase_str, c)
        }
        (Phase::Unbound, _) => Err(Verdict::Healthy),
        (Phase::Other, _) => Err(undefined_phase(name, phase_str)),
    }
}

/// A Released volume is always a finding: what its claimRef names says which.
fn released_reason(claim: Option<&ObservedClaim>) -> Reason {
    match claim {
        None => Reason::ReleasedWithoutClaim,
        Some(c) if c.incomplete || c.not_a_claim => Reason::ClaimRefInvalid,
        Some(c) => match &c.found {
            Found::Yes(facts) if c.same_claim(facts) => Reason::ClaimStillPresent,
            Found::Yes(_) => Reason::ClaimRecreated,
            Found::Absent => Reason::ClaimDeleted,
            Found::Unknown | Found::Stale => Reason::ClaimUnknown,
        },
    }
}

/// A Bound volume is a finding only when its claim is known to be gone (or another claim now
/// has its name).
fn bound_reason(name: &str, claim: Option<&ObservedClaim>) -> Result<Reason, Verdict> {
    let c = match claim {
        None => {
            return Err(Verdict::Skip(format!(
                "PersistentVolume {name} is Bound but has no claimRef"
            )));
        }
        Some(c) if c.incomplete => {
            return Err(Verdict::Skip(format!(
                "PersistentVolume {name} is Bound but its claimRef lacks a namespace or name"
            )));
        }
        Some(c) => c,
    };
    match &c.found {
        // Its claim is there: healthy, unless the claim asks for more than it has (how long it
        // has, the expansion grace decides: `plan::gate`).
        Found::Yes(facts) if c.same_claim(facts) => match facts.size {
            ClaimSize::Expanding(_) => Ok(Reason::ExpansionStuck),
            ClaimSize::Settled => Err(Verdict::Healthy),
            // Never a guess either way: skipped (logged once and counted by the operator, in
            // `volume_leftovers_skipped_volumes`), what is published stays.
            ClaimSize::Uncomparable(why) => Err(Verdict::Skip(format!(
                "PersistentVolume {name}: its claim {} has {}, so whether its expansion stopped cannot be told",
                c.info.reference,
                why.as_str()
            ))),
        },
        Found::Yes(_) | Found::Absent => Ok(Reason::BoundClaimMissing),
        // A 403 never makes a finding of a Bound volume, nor clears one.
        Found::Unknown | Found::Stale => Err(Verdict::Undecided(Undecided::BoundClaimUnknown {
            volume: name.into(),
        })),
    }
}

/// An unbound volume (or one of an undefined phase) with a complete claimRef is pre-bound: a
/// finding when the claim it waits for does not exist.
fn prebound_reason(
    name: &str,
    phase: Phase,
    phase_str: &str,
    c: &ObservedClaim,
) -> Result<Reason, Verdict> {
    match &c.found {
        Found::Absent => Ok(Reason::PreboundClaimMissing),
        Found::Yes(_) if phase == Phase::Unbound => Err(Verdict::Healthy),
        Found::Yes(_) => Err(undefined_phase(name, phase_str)),
        Found::Unknown | Found::Stale => Err(Verdict::Undecided(Undecided::PreboundClaimUnknown {
            volume: name.into(),
        })),
    }
}

/// A phase Kubernetes does not define: the volume is skipped rather than guessed about.
fn undefined_phase(name: &str, phase_str: &str) -> Verdict {
    Verdict::Skip(format!(
        "PersistentVolume {name} has phase {phase_str:?}, which Kubernetes does not define"
    ))
}

/// What a finding is about, with its reason decided.
struct Described<'a> {
    pv: &'a Volume,
    name: &'a str,
    uid: &'a str,
    spec: &'a VolumeSpec,
    phase: Phase,
    phase_str: &'a str,
    claim: Option<ObservedClaim>,
    reason: Reason,
    deleted_at: Option<Time>,
    /// The census found the image gone and it is in the RBD trash.
    in_trash: bool,
    /// Where the census looked for the disk it found gone (`status.image`): the scope's
    /// location and the disk's name.
    looked_in: Option<crate::model::crd::ImageInfo>,
}

/// Everything a finding says about its PersistentVolume once its reason is decided.
fn describe(d: Described<'_>, lookup: &impl Lookup, now: Time) -> Verdict {
    let reclaim_policy = d
        .spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .unwrap_or("Retain")
        .to_string();
    let name = d.name;
    let class_name = d
        .spec
        .storage_class_name
        .as_deref()
        .filter(|c| !c.is_empty());
    let storage_class = match class_name.map(|c| observe_class(c, lookup)) {
        Some(None) => {
            return Verdict::Undecided(Undecided::ClassStoreStale {
                volume: name.into(),
            });
        }
        Some(Some(c)) => Some(c),
        None => None,
    };
    let hints = hints(&d, &reclaim_policy, storage_class.as_ref());
    let message = describe_message(&d, &reclaim_policy, &hints);
    Verdict::Leftover(Box::new(finding(
        d,
        reclaim_policy,
        storage_class,
        hints,
        message,
        now,
    )))
}

/// The hints: what else is odd about the volume, beyond its reason.
fn hints(
    d: &Described<'_>,
    reclaim_policy: &str,
    storage_class: Option<&StorageClassInfo>,
) -> BTreeSet<Hint> {
    let mut hints = BTreeSet::new();
    if d.in_trash {
        hints.insert(Hint::DiskInTrash);
    }
    if reclaim_policy == "Delete" && matches!(d.phase, Phase::Released | Phase::Failed) {
        hints.insert(Hint::ReclaimPolicyDelete);
    }
    if let Some(sc) = storage_class {
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
    // A tombstone's volume is already gone, no longer terminating.
    if d.pv.metadata.deletion_timestamp.is_some() && d.deleted_at.is_none() {
        hints.insert(Hint::VolumeTerminating);
    }
    if let Some(c) = &d.claim {
        if c.not_a_claim {
            hints.insert(Hint::ClaimRefNotAClaim);
        }
        if c.incomplete {
            hints.insert(Hint::ClaimRefIncomplete);
        }
    }
    if d.phase == Phase::Other {
        hints.insert(Hint::PhaseUnknown);
    }
    hints
}

/// The finding's message, from the facts of the volume alone.
fn describe_message(d: &Described<'_>, reclaim: &str, hints: &BTreeSet<Hint>) -> String {
    let phase_since =
        d.pv.status
            .as_ref()
            .and_then(|s| s.last_phase_transition_time.clone());
    message(&MessageFacts {
        reason: d.reason,
        uid: d.uid,
        deleted_at: d.deleted_at.as_ref(),
        source: &volume_source(d.spec),
        pv: d.name,
        phase: d.phase_str,
        phase_since: phase_since.as_ref(),
        claim: d.claim.as_ref(),
        reclaim,
        hints,
        deleting_since: d.pv.metadata.deletion_timestamp.as_deref(),
        finalizers: &d
            .pv
            .metadata
            .finalizers
            .iter()
            .flat_map(|f| f.iter())
            .map(|f| f.to_string())
            .collect::<Vec<_>>(),
    })
}

/// The finding itself. Destructures `d` whole, so that a new fact about the volume is a choice
/// here rather than silently left out.
fn finding(
    d: Described<'_>,
    reclaim_policy: String,
    storage_class: Option<StorageClassInfo>,
    hints: BTreeSet<Hint>,
    message: String,
    now: Time,
) -> Finding {
    let Described {
        pv,
        name,
        uid,
        spec,
        phase: _,
        phase_str,
        claim,
        reason,
        deleted_at,
        in_trash: _,
        looked_in,
    } = d;
    let status = pv.status.as_ref();
    let phase_since = status.and_then(|s| s.last_phase_transition_time.clone());
    let phase_message = status
        .and_then(|s| s.message.as_deref())
        .filter(|m| !m.is_empty())
        .map(str::to_string);
    let capacity = spec.capacity.as_ref().and_then(|c| c.storage.as_deref());
    Finding {
        volume_name: name.to_string(),
        volume_uid: uid.to_string(),
        storage_class_name: spec.storage_class_name.as_deref().map(str::to_string),
        status: VolumeLeftoverStatus {
            reason,
            // The hand-off fields (state, conditions, what an acknowledgement covers) are the
            // planner's: they depend on the published object.
            state: crate::model::crd::State::Open,
            observed_generation: None,
            conditions: Vec::new(),
            acknowledged: None,
            message,
            hints: hints.into_iter().collect(),
            phase: phase_str.to_string(),
            phase_since,
            phase_message,
            reclaim_policy,
            storage_class,
            claim: claim.map(|c| c.info),
            capacity: capacity.map(str::to_string),
            capacity_bytes: capacity.and_then(crate::model::quantity::bytes),
            disk_size_bytes: None,
            access_modes: spec
                .access_modes
                .iter()
                .flat_map(|m| m.iter())
                .map(|m| m.to_string())
                .collect(),
            volume_mode: spec
                .volume_mode
                .as_deref()
                .unwrap_or("Filesystem")
                .to_string(),
            source: volume_source(spec),
            first_seen: now,
            subject: subject(deleted_at.is_some(), reason),
            deleted_at,
            image: looked_in,
            cost: None,
            snapshot: None,
        },
        object_name: None,
    }
}

/// What is left behind: a deleted volume leaves only its disk; a volume whose image is gone is
/// itself the leftover, with the image it names.
fn subject(deleted: bool, reason: Reason) -> Subject {
    if deleted {
        Subject::Disk
    } else if reason == Reason::VolumeWithoutDisk {
        Subject::VolumeAndDisk
    } else {
        Subject::Volume
    }
}

struct ObservedClaim {
    info: ClaimInfo,
    /// The claimRef lacks a namespace or a name.
    incomplete: bool,
    /// The claimRef names a kind other than PersistentVolumeClaim.
    not_a_claim: bool,
    /// What the lookup answered (`Absent` when nothing was looked up: an incomplete claimRef).
    found: Found<ClaimFacts>,
    /// The answer came from a stale store.
    stale: bool,
}

impl ObservedClaim {
    /// Whether `facts` is the claim the claimRef identifies. A claimRef without a UID is a
    /// pre-binding by name: any claim of that name is it.
    fn same_claim(&self, facts: &ClaimFacts) -> bool {
        self.info.uid.as_deref().is_none_or(|u| u == facts.uid)
    }

    fn terminating(&self) -> bool {
        matches!(&self.found, Found::Yes(c) if c.terminating && self.same_claim(c))
    }
}

fn observe_claim(r: &ClaimRef, lookup: &impl Lookup) -> ObservedClaim {
    let non_empty = |s: Option<&str>| s.filter(|s| !s.is_empty()).map(str::to_string);
    let namespace = non_empty(r.namespace.as_deref());
    let name = non_empty(r.name.as_deref());
    let uid = r.uid.as_ref().map(Uid::to_string).filter(|u| !u.is_empty());
    let not_a_claim = r
        .kind
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != CLAIM_KIND);
    let reference = format!(
        "{}/{}",
        namespace.as_deref().unwrap_or(""),
        name.as_deref().unwrap_or("")
    );
    // The original tool's claim_missing: looked up by namespace and name (whatever the kind), and
    // false when there is nothing to look up.
    let (found, missing) = match (&namespace, &name) {
        (Some(ns), Some(n)) => {
            let found = lookup.claim(ns, n);
            let missing = match &found {
                Found::Yes(_) => Tristate::False,
                Found::Absent => Tristate::True,
                Found::Unknown | Found::Stale => Tristate::Unknown,
            };
            (found, missing)
        }
        _ => (Found::Absent, Tristate::False),
    };
    let current_uid = match &found {
        Found::Yes(c) if uid.as_deref().is_some_and(|u| u != c.uid) => Some(c.uid.clone()),
        _ => None,
    };
    let expansion = match &found {
        Found::Yes(c) if current_uid.is_none() => match &c.size {
            ClaimSize::Expanding(e) => Some(crate::model::crd::ExpansionInfo::of(e)),
            ClaimSize::Settled | ClaimSize::Uncomparable(_) => None,
        },
        _ => None,
    };
    ObservedClaim {
        incomplete: namespace.is_none() || name.is_none(),
        not_a_claim,
        stale: found == Found::Stale,
        found,
        info: ClaimInfo {
            reference,
            namespace,
            name,
            uid,
            missing,
            current_uid,
            expansion,
        },
    }
}

/// `None` when the class store is stale.
fn observe_class(name: &str, lookup: &impl Lookup) -> Option<StorageClassInfo> {
    let (facts, missing) = match lookup.class(name) {
        Found::Yes(c) => (Some(c), Tristate::False),
        Found::Absent => (None, Tristate::True),
        Found::Unknown => (None, Tristate::Unknown),
        Found::Stale => return None,
    };
    let (reclaim_policy, disk_type, replication_type) = match facts {
        Some(c) => (Some(c.reclaim_policy), c.disk_type, c.replication_type),
        None => (None, None, None),
    };
    Some(StorageClassInfo {
        name: name.to_string(),
        reclaim_policy,
        missing,
        disk_type,
        replication_type,
    })
}

/// Everything a message may say: only facts of the objects, so the same state gives the same
/// sentence (no "for 12 minutes" that would change on every evaluation).
struct MessageFacts<'a> {
    reason: Reason,
    uid: &'a str,
    deleted_at: Option<&'a Time>,
    source: &'a VolumeSourceInfo,
    pv: &'a str,
    phase: &'a str,
    phase_since: Option<&'a Time>,
    claim: Option<&'a ObservedClaim>,
    reclaim: &'a str,
    hints: &'a BTreeSet<Hint>,
    deleting_since: Option<&'a Time>,
    finalizers: &'a [String],
}

fn timestamp(t: &Time) -> String {
    t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A finding's message: the sentence of its reason, then what its hints and its deletion add
/// (each only where the reason's sentence has not said it already).
fn message(f: &MessageFacts<'_>) -> String {
    let mut m = reason_sentence(f);
    if f.hints.contains(&Hint::ClaimRefNotAClaim) && f.reason != Reason::ClaimRefInvalid {
        m.push_str(&format!(" Its claimRef {}.", claim_ref_oddity(f.claim)));
    }
    if f.hints.contains(&Hint::ReclaimPolicyDelete) && f.reason != Reason::VolumeDeleted {
        match f.phase_since {
            Some(t) => m.push_str(&format!(
                " Its reclaim policy is Delete and it has been {} since {}: the provisioner's delete hung or failed.",
                f.phase,
                timestamp(t)
            )),
            None => m.push_str(
                " Its reclaim policy is Delete: the provisioner's delete hung or failed.",
            ),
        }
    }
    if let (Some(t), false) = (f.deleting_since, f.reason == Reason::VolumeDeleted) {
        if f.finalizers.is_empty() {
            m.push_str(&format!(" It is being deleted since {}.", timestamp(t)));
        } else {
            m.push_str(&format!(
                " It is being deleted since {}, held by finalizer {}.",
                timestamp(t),
                f.finalizers.join(", ")
            ));
        }
    }
    m
}

/// The first sentence of a message: what the reason means for this volume.
fn reason_sentence(f: &MessageFacts<'_>) -> String {
    let pv = f.pv;
    let info = f.claim.map(|c| &c.info);
    let claim_ref = info.map_or("", |c| c.reference.as_str());
    let old_uid = info.and_then(|c| c.uid.as_deref()).unwrap_or("none");
    let new_uid = info.and_then(|c| c.current_uid.as_deref()).unwrap_or("?");
    let terminating = f.claim.is_some_and(ObservedClaim::terminating);
    match f.reason {
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
            "PersistentVolume {pv} is Released; whether its claim {claim_ref} still exists is unknown (claims cannot be read)."
        ),
        Reason::ClaimRefInvalid => {
            let what = claim_ref_oddity(f.claim);
            format!(
                "PersistentVolume {pv} is {} and its claimRef {what}; the claim it was bound to cannot be identified.",
                f.phase
            )
        }
        Reason::ReleasedWithoutClaim => {
            format!("PersistentVolume {pv} is Released but has no claimRef.")
        }
        Reason::BoundClaimMissing => match info.and_then(|c| c.current_uid.as_deref()) {
            Some(current) => format!(
                "PersistentVolume {pv} is Bound to claim {claim_ref} uid {old_uid}, but the claim of that name has uid {current}."
            ),
            None => format!(
                "PersistentVolume {pv} is Bound to claim {claim_ref} (uid {old_uid}), which does not exist."
            ),
        },
        Reason::PreboundClaimMissing => {
            let phase = if f.phase.is_empty() {
                "without a phase".to_string()
            } else {
                f.phase.to_string()
            };
            format!(
                "PersistentVolume {pv} is {phase} and pre-bound to claim {claim_ref}, which does not exist; it waits for that claim and no other claim can bind it."
            )
        }
        Reason::ReclaimFailed => format!(
            "PersistentVolume {pv} is Failed: its {} reclaim did not complete.",
            f.reclaim
        ),
        Reason::ExpansionStuck => expansion_sentence(pv, claim_ref, info),
        // The sizes are said by `size_sentence`, after this one.
        Reason::DiskSizeMismatch => format!(
            "PersistentVolume {pv} is {} ({}) and its disk, {}, has another size than the PV's capacity.",
            if f.phase.is_empty() {
                "without a phase"
            } else {
                f.phase
            },
            if claim_ref.is_empty() {
                "no claimRef".to_string()
            } else {
                format!("claim {claim_ref}")
            },
            disk(f.source)
        ),
        Reason::VolumeWithoutDisk => image_gone_sentence(f, claim_ref),
        Reason::DiskWithoutVolume => format!(
            "{} is not referenced by any PersistentVolume.",
            disk(f.source)
        ),
        Reason::VolumeDeleted => volume_deleted_sentence(f, claim_ref),
        // Not a volume's reason: a snapshot finding's message is decide::snapshot's.
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted
        | Reason::SnapshotWithoutContent => String::new(),
    }
}

/// The sentence of a volume whose claim's expansion stopped: sizes, the step, what the claim's
/// conditions say (bounded: a resizer's message can be a stack of errors) and what to do.
fn expansion_sentence(pv: &str, claim_ref: &str, info: Option<&ClaimInfo>) -> String {
    let Some(e) = info.and_then(|c| c.expansion.as_ref()) else {
        return format!(
            "PersistentVolume {pv} is Bound to claim {claim_ref}, whose expansion stopped."
        );
    };
    let said = e
        .conditions
        .iter()
        .find_map(|c| c.message.as_deref().map(|m| (c.type_.as_str(), m)))
        .map(|(kind, m)| {
            format!(
                " {kind}: {}.",
                crate::model::text::one_line(m).trim_end_matches('.')
            )
        })
        .unwrap_or_default();
    format!(
        "PersistentVolume {pv} is Bound to claim {claim_ref}, which asks for {} but has {}: its expansion stopped {}.{said} {}.",
        e.requested,
        e.capacity,
        e.stopped_at.stopped_where(),
        crate::model::text::upper_first(e.stopped_at.advice()),
    )
}

/// The sentence of a volume whose image the census no longer finds: it says the claim's story
/// too, since this reason wins over it.
fn image_gone_sentence(f: &MessageFacts<'_>, claim_ref: &str) -> String {
    let pv = f.pv;
    format!(
        "PersistentVolume {pv} is {} ({}) but {} is gone from the storage backend: two censuses in a row did not find it{}.{}",
        if f.phase.is_empty() {
            "without a phase"
        } else {
            f.phase
        },
        if claim_ref.is_empty() {
            "no claimRef".to_string()
        } else {
            format!("claim {claim_ref}")
        },
        disk(f.source),
        if f.hints.contains(&Hint::DiskInTrash) {
            "; it is in the pool's trash, restorable until it is purged"
        } else {
            ""
        },
        if Phase::of(f.phase) == Phase::Bound {
            " A Bound volume without its disk: its data is lost unless the disk is restored."
        } else {
            ""
        },
    )
}

/// The sentence of a tombstone: which disk the deleted volume left, and whose it was.
fn volume_deleted_sentence(f: &MessageFacts<'_>, claim_ref: &str) -> String {
    let pv = f.pv;
    format!(
        "PersistentVolume {pv} (uid {}) was deleted at {}; {} {}, which may still hold data: this is the last record of which disk belonged to claim {}. {NOTE_NOT_CHECKED}",
        f.uid,
        f.deleted_at
            .map_or("an unknown time".to_string(), timestamp),
        why_kept(f.reclaim),
        disk(f.source),
        if claim_ref.is_empty() {
            "none"
        } else {
            claim_ref
        },
    )
}

/// Why deleting a volume with this reclaim policy left its disk, in words.
fn why_kept(reclaim: &str) -> String {
    if ReclaimPolicy::of(reclaim) == ReclaimPolicy::Delete {
        "its reclaim policy was Delete but its phase was Failed (its delete had failed), so Kubernetes may not have deleted".into()
    } else {
        format!("its reclaim policy was {reclaim}, so Kubernetes did not delete")
    }
}

/// The disk or image behind a volume, in words.
fn disk(s: &VolumeSourceInfo) -> String {
    match (
        &s.pool,
        &s.image_name,
        &s.disk_name,
        &s.path,
        &s.volume_handle,
    ) {
        (Some(pool), Some(image), ..) => format!("the RBD image {pool}/{image}"),
        (_, _, Some(disk), ..) => format!("the {} disk {disk}", s.kind),
        (_, _, _, Some(path), _) => format!("the {} storage at {path}", s.kind),
        (.., Some(handle)) => format!(
            "the volume {handle} of driver {}",
            s.driver.as_deref().unwrap_or("?")
        ),
        _ => format!("the {} storage behind it", s.kind),
    }
}

/// The tombstone of a PersistentVolume that was deleted (its last known object), when deleting it
/// left its disk behind. `deleted_at` is its deletionTimestamp when it had one.
pub(crate) fn tombstone(pv: &Volume, lookup: &impl Lookup, now: Time) -> Option<Finding> {
    let name = pv.metadata.name.as_deref().filter(|n| !n.is_empty())?;
    let uid = pv.metadata.uid.as_ref().map(Uid::to_string);
    let uid = uid.as_deref().filter(|u| !u.is_empty())?;
    if pv.excluded.is_some() {
        return None;
    }
    let default_spec = VolumeSpec::default();
    let spec = pv.spec.as_ref().unwrap_or(&default_spec);
    let phase_str = pv
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("");
    let policy = spec
        .persistent_volume_reclaim_policy
        .as_deref()
        .unwrap_or("Retain");
    if !leaves_a_disk(ReclaimPolicy::of(policy), Phase::of(phase_str)) {
        return None;
    }
    let deleted_at = pv
        .metadata
        .deletion_timestamp
        .as_deref()
        .unwrap_or(&now)
        .clone();
    let claim = spec.claim_ref.as_ref().map(|r| observe_claim(r, lookup));
    match describe(
        Described {
            pv,
            name,
            uid,
            spec,
            phase: Phase::of(phase_str),
            phase_str,
            claim,
            reason: Reason::VolumeDeleted,
            deleted_at: Some(deleted_at),
            in_trash: false,
            looked_in: None,
        },
        lookup,
        now,
    ) {
        Verdict::Leftover(f) => Some(*f),
        _ => None,
    }
}

/// The last sentence of a tombstone's message without the census (or before it has said
/// anything about the image): it never claims the image still exists.
pub(crate) const NOTE_NOT_CHECKED: &str = "Not checked against the storage backend.";
/// The same, once the storage backend's census has found the disk.
pub const NOTE_FOUND: &str = "The storage backend's census finds the disk.";
/// [`NOTE_FOUND`] as versions before one vocabulary wrote it: replaced like the others.
const NOTE_FOUND_BEFORE: &str = "The storage backend's census finds the image.";
/// The same, once the census has found the image in its pool's trash.
pub(crate) const NOTE_IN_TRASH: &str = "The storage backend's census finds the image in the pool's trash (restorable until it is purged).";

/// A tombstone's message with `note` as its last sentence instead of whichever it had.
pub(crate) fn with_backend_note(message: &str, note: &str) -> String {
    let body = [
        NOTE_NOT_CHECKED,
        NOTE_FOUND,
        NOTE_IN_TRASH,
        NOTE_FOUND_BEFORE,
    ]
    .iter()
    .find_map(|n| message.strip_suffix(n))
    .unwrap_or(message)
    .trim_end();
    format!("{body} {note}")
}

/// The tombstone of a PersistentVolume that vanished while the watch was down, from the object
/// the store last had: [`tombstone`], saying that its delete was not watched.
pub(crate) fn tombstone_unwatched(pv: &Volume, lookup: &impl Lookup, now: Time) -> Option<Finding> {
    let mut t = tombstone(pv, lookup, now.clone())?;
    t.status.message = unwatched_message(&t.status, &t.volume_name, &t.volume_uid, &now);
    Some(t)
}

fn unwatched_message(
    status: &VolumeLeftoverStatus,
    volume_name: &str,
    volume_uid: &str,
    now: &Time,
) -> String {
    let claim_ref = status.claim.as_ref().map_or("", |c| c.reference.as_str());
    format!(
        "PersistentVolume {volume_name} (uid {volume_uid}) was deleted while the operator was not watching (seen gone at {}); {} {}, which may still hold data: this is the last record of which disk belonged to claim {}. {NOTE_NOT_CHECKED}",
        timestamp(now),
        why_kept(&status.reclaim_policy),
        disk(&status.source),
        if claim_ref.is_empty() {
            "none"
        } else {
            claim_ref
        },
    )
}

/// The tombstone of a PersistentVolume that vanished while the watch was down (no final object):
/// built from what its published finding said, when deleting it left its disk behind.
pub(crate) fn tombstone_of(
    published: &VolumeLeftoverStatus,
    volume_name: &str,
    volume_uid: &str,
    now: &Time,
) -> Option<Finding> {
    // Only a volume's own finding becomes its tombstone (one about its image being gone does
    // not: the disk is gone too).
    if published.reason == Reason::VolumeDeleted || published.subject != Subject::Volume {
        return None;
    }
    if !leaves_a_disk(
        ReclaimPolicy::of(&published.reclaim_policy),
        Phase::of(&published.phase),
    ) {
        return None;
    }
    let mut status = published.clone();
    status.hints.retain(|h| *h != Hint::VolumeTerminating);
    status.reason = Reason::VolumeDeleted;
    status.subject = Subject::Disk;
    status.deleted_at = Some(now.clone());
    status.message = unwatched_message(&status, volume_name, volume_uid, now);
    Some(Finding {
        volume_name: volume_name.to_string(),
        volume_uid: volume_uid.to_string(),
        storage_class_name: status.storage_class.as_ref().map(|c| c.name.clone()),
        status,
        object_name: None,
    })
}

fn claim_ref_oddity(claim: Option<&ObservedClaim>) -> String {
    let Some(c) = claim else {
        return "is missing".into();
    };
    let mut odd = Vec::new();
    if c.not_a_claim {
        odd.push("names a kind other than PersistentVolumeClaim".to_string());
    }
    if c.info.namespace.is_none() {
        odd.push("has no namespace".to_string());
    }
    if c.info.name.is_none() {
        odd.push("has no name".to_string());
    }
    if odd.is_empty() {
        "is valid".into()
    } else {
        odd.join(" and ")
    }
}

/// Where a volume's data lives, from its spec. Exhaustive over the sources the API knows, so a
/// new one is a choice.
pub(crate) fn volume_source(spec: &VolumeSpec) -> VolumeSourceInfo {
    let mut s = VolumeSourceInfo::default();
    let in_tree = spec.in_tree.as_deref();
    if let Some(csi) = &spec.csi {
        let attrs = csi.volume_attributes.as_ref();
        let attr = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(str::to_string);
        s.kind = "csi".into();
        s.driver = Some(csi.driver.to_string());
        s.volume_handle = Some(csi.volume_handle.to_string());
        s.pool = attr(attrs.and_then(|a| a.pool.as_deref()));
        s.image_name = attr(attrs.and_then(|a| a.image_name.as_deref()));
        s.cluster_id = attr(attrs.and_then(|a| a.cluster_id.as_deref()));
        s.rados_namespace = attr(attrs.and_then(|a| a.rados_namespace.as_deref()));
    } else if let Some(rbd) = in_tree.and_then(|t| t.rbd.as_ref()) {
        s.kind = "rbd".into();
        s.pool = Some(rbd.pool.clone().unwrap_or_else(|| "rbd".into()));
        s.image_name = Some(rbd.image.clone());
    } else if let Some(gce) = in_tree.and_then(|t| t.gce_persistent_disk.as_ref()) {
        s.kind = "gcePersistentDisk".into();
        s.disk_name = Some(gce.pd_name.clone());
    } else if let Some(aws) = in_tree.and_then(|t| t.aws_elastic_block_store.as_ref()) {
        s.kind = "awsElasticBlockStore".into();
        s.disk_name = Some(aws.volume_id.clone());
    } else if let Some(az) = in_tree.and_then(|t| t.azure_disk.as_ref()) {
        s.kind = "azureDisk".into();
        s.disk_name = Some(az.disk_name.clone());
        s.disk_uri = Some(az.disk_uri.clone()).filter(|u| !u.is_empty());
    } else if let Some(c) = in_tree.and_then(|t| t.cinder.as_ref()) {
        s.kind = "cinder".into();
        s.disk_name = Some(c.volume_id.clone());
    } else if let Some(v) = in_tree.and_then(|t| t.vsphere_volume.as_ref()) {
        s.kind = "vsphereVolume".into();
        s.disk_name = Some(v.volume_path.clone());
    } else if let Some(n) = in_tree.and_then(|t| t.nfs.as_ref()) {
        s.kind = "nfs".into();
        s.path = Some(format!("{}:{}", n.server, n.path));
    } else if let Some(h) = in_tree.and_then(|t| t.host_path.as_ref()) {
        s.kind = "hostPath".into();
        s.path = Some(h.path.clone());
    } else if let Some(l) = in_tree.and_then(|t| t.local.as_ref()) {
        s.kind = "local".into();
        s.path = Some(l.path.clone());
    } else {
        s.kind = in_tree.map_or("unknown", other_source_kind).into();
    }
    // The zones locate an in-tree disk and an EBS volume's region, for the PV and, once it is
    // gone, for its tombstone.
    s.zones = spec.zones().into_iter().map(str::to_string).collect();
    s
}

fn other_source_kind(t: &crate::model::volume::InTree) -> &'static str {
    let crate::model::volume::OtherSources {
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
    } = &t.other;
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
