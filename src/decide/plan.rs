//! What to write for one PersistentVolume name. Pure: no client, no clock (the time is an
//! argument).
//!
//! Given the verdict, the VolumeLeftover that exists now (its lean form, [`Leftover`], from the
//! operator's own reflector) and the time, decides whether to create, apply, delete or leave
//! alone, and holds back states that are normally only passing through until they have lasted
//! their grace period. Nothing is written when the object already says the same, so a converged
//! cluster sees no writes, even after a restart.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use crate::decide::classify::{NOTE_FOUND, NOTE_IN_TRASH, NOTE_NOT_CHECKED, with_backend_note};
use crate::decide::cost;
use crate::model::crd::{
    AcknowledgedFinding, Condition, ConditionStatus, Reason, State, VolumeLeftover,
    VolumeLeftoverSpec, VolumeLeftoverStatus,
};
use crate::model::finding::{Finding, Verdict};
use crate::model::image::ImageFound;
use crate::model::labels::{
    HINT_LABEL_PREFIX, LABEL_CLAIM_NAMESPACE, LABEL_REASON, LABEL_STATE, LABEL_STORAGE_CLASS,
    MANAGED_BY, MANAGED_BY_VALUE, is_label_value, is_own_label,
};
use crate::model::leftover::{Leftover, digest};
use crate::model::phase::{Phase, ReclaimPolicy};
use crate::model::price::PriceTable;

/// The decision for one name.
#[derive(Clone, Debug)]
pub enum Action {
    /// The object already says what it should (or there is nothing to say, or nothing may be
    /// said yet).
    Nothing,
    /// No object of this name is known: create it (a create request, so that an object someone
    /// else made under this name is never taken over), then apply its status.
    Create {
        /// The complete desired object.
        object: Box<VolumeLeftover>,
    },
    /// The operator's own object differs: write the parts that differ. Labels, ownerReferences
    /// and the operator's spec fields with a JSON merge patch that names only them (a label of
    /// ours that no longer applies is removed; nobody else's field is mentioned); the status with
    /// a server-side apply of the status subresource.
    Apply {
        /// The complete desired object.
        object: Box<VolumeLeftover>,
        /// The metadata patch, when labels, ownerReferences or spec differ.
        meta: Option<serde_json::Value>,
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

/// How long states that are normally only passing through must last before they are published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Graces {
    /// For races between watches and hand-made half states: `ClaimStillPresent`,
    /// `ReleasedWithoutClaim`, `BoundClaimMissing`, `PreboundClaimMissing`.
    pub grace: Duration,
    /// For a volume whose reclaim policy is Delete and whose claim is gone (Bound with its claim
    /// missing, Released or Failed): the PV controller and the provisioner are normally deleting
    /// it.
    pub delete_grace: Duration,
    /// For a claim that asks for more than it has (`ExpansionStuck`): a resize normally
    /// completes within minutes, and a filesystem resize waits for a pod to mount the claim.
    pub expansion_grace: Duration,
}

/// Where a state's grace clock starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClockStart {
    /// At the volume's `status.lastPhaseTransitionTime`: the phase alone defines the state (a
    /// Delete-policy volume Released or Failed; a Released volume whose claim is still present),
    /// so the state began exactly then, and an operator restart does not restart the clock.
    Phase,
    /// At the first time this process saw the state: it depends on something the phase does not
    /// date (a claim that vanished, a claimRef cleared or set by hand long after the phase
    /// changed), so the phase's time would start the clock too early.
    Observed,
    /// At the start of the step a claim's resize is in, as its resize conditions date it (their
    /// earliest `lastTransitionTime`); where no condition dates it (nothing acted on the raised
    /// request), at the first time this process saw it.
    Expansion,
}

/// The grace a finding's state needs, and where its clock starts. Zero: publish at once.
pub(crate) fn grace_of(f: &Finding, graces: Graces) -> (Duration, ClockStart) {
    let s = &f.status;
    let (base, clock) = match s.reason {
        Reason::ClaimStillPresent => (graces.grace, ClockStart::Phase),
        Reason::ExpansionStuck => (graces.expansion_grace, ClockStart::Expansion),
        // A resize grows the disk before the PV: the two differ for a moment, which a census
        // listing may catch. Nothing dates the difference.
        Reason::DiskSizeMismatch => (graces.expansion_grace, ClockStart::Observed),
        Reason::ReleasedWithoutClaim | Reason::BoundClaimMissing | Reason::PreboundClaimMissing => {
            (graces.grace, ClockStart::Observed)
        }
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimUnknown
        | Reason::ClaimRefInvalid
        | Reason::ReclaimFailed => (Duration::ZERO, ClockStart::Phase),
        // The volume's delete was observed (or its absence after a relist): final, no grace.
        Reason::VolumeDeleted => (Duration::ZERO, ClockStart::Observed),
        // Confirmed by two censuses (and the image's own grace) before it is a finding.
        Reason::DiskWithoutVolume | Reason::VolumeWithoutDisk | Reason::SnapshotWithoutContent => {
            (Duration::ZERO, ClockStart::Observed)
        }
        // Held back by their own rules (`decide::snapshot::grace_of`, which reads what the
        // snapshot objects date) before they become a finding.
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted => (Duration::ZERO, ClockStart::Observed),
    };
    // A Delete-policy volume whose claim is gone is on its way out: the PV controller releases
    // it (behind a backlog under churn) and the provisioner deletes it. Every step of that
    // pipeline waits the delete grace.
    let (policy, phase) = (ReclaimPolicy::of(&s.reclaim_policy), Phase::of(&s.phase));
    let deleting = match s.reason {
        Reason::VolumeDeleted
        | Reason::DiskWithoutVolume
        | Reason::SnapshotWithoutContent
        | Reason::ExpansionStuck
        | Reason::DiskSizeMismatch => false,
        r if r.is_snapshot() => false,
        // The provisioner deletes the image before the PV: a Delete-policy volume on its way out
        // is without its image for a moment.
        Reason::VolumeWithoutDisk => {
            policy == ReclaimPolicy::Delete && matches!(phase, Phase::Released | Phase::Failed)
        }
        _ => {
            policy == ReclaimPolicy::Delete
                && matches!(phase, Phase::Released | Phase::Failed | Phase::Bound)
        }
    };
    let grace = if deleting {
        base.max(graces.delete_grace)
    } else {
        base
    };
    let clock = if clock == ClockStart::Phase && s.phase_since.is_none() {
        // Old API servers (before lastPhaseTransitionTime) and hand-written statuses.
        ClockStart::Observed
    } else {
        clock
    };
    (grace, clock)
}

/// The grace clock of one name, kept by the caller across evaluations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    /// The volume the clock is about.
    pub(crate) volume_uid: String,
    /// The reason the clock is about.
    pub(crate) reason: Reason,
    /// When this process first saw that state.
    pub(crate) since: Time,
}

/// Result of applying the grace rule.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Gated {
    /// Publish this verdict; a new object gets this `firstSeen`.
    Now {
        /// The verdict.
        verdict: Verdict,
        /// When the finding began to hold (for a new object).
        first_seen: Time,
    },
    /// Not yet: keep what is published (if anything) and look again after this long.
    Later(Duration),
}

/// Holds back states that are normally only passing through until they have lasted their grace
/// period, and dates the finding for `firstSeen`.
///
/// `observed` is the caller's clock for this name: updated here (started when the state is new,
/// cleared when there is no held state). A finding that is already published with the same
/// reason for the same volume is published again at once: a restart never retracts it.
pub(crate) fn gate(
    verdict: Verdict,
    existing: Option<&Leftover>,
    observed: &mut Option<Observed>,
    now: &Time,
    graces: Graces,
) -> Gated {
    let Verdict::Leftover(f) = &verdict else {
        *observed = None;
        return Gated::Now {
            verdict,
            first_seen: now.clone(),
        };
    };
    let (grace, clock) = grace_of(f, graces);
    let reason = f.status.reason;
    let same = |o: &Observed| o.volume_uid == f.volume_uid && o.reason == reason;
    if !observed.as_ref().is_some_and(same) {
        *observed = Some(Observed {
            volume_uid: f.volume_uid.clone(),
            reason,
            since: now.clone(),
        });
    }
    let dated = match clock {
        ClockStart::Phase => f.status.phase_since.clone(),
        ClockStart::Expansion => expansion_since(f),
        ClockStart::Observed => None,
    };
    let first_seen = match &dated {
        Some(start) => add(start, grace),
        None => now.clone(),
    };
    let start = dated.unwrap_or_else(|| {
        observed
            .as_ref()
            .map_or_else(|| now.clone(), |o| o.since.clone())
    });
    let published = existing
        .filter(|o| o.managed && *o.volume_uid == *f.volume_uid)
        .and_then(|o| o.status.as_ref())
        .is_some_and(|s| s.reason == reason);
    let elapsed = Duration::try_from(now.0.duration_since(start.0)).unwrap_or(Duration::ZERO);
    if grace.is_zero() || published || elapsed >= grace {
        Gated::Now {
            verdict,
            first_seen,
        }
    } else {
        Gated::Later(grace - elapsed)
    }
}

/// When the step a claim's resize is in began, as its resize conditions date it.
fn expansion_since(f: &Finding) -> Option<Time> {
    let e = f.status.claim.as_ref()?.expansion.as_ref()?;
    e.conditions
        .iter()
        .filter_map(|c| c.last_transition_time.clone())
        .min_by_key(|t| t.0)
}

/// `t + d`, to the second; `t` itself if the sum is out of range.
fn add(t: &Time, d: Duration) -> Time {
    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    Time(
        t.0.checked_add(jiff::SignedDuration::from_secs(secs))
            .unwrap_or(t.0),
    )
}

/// Decides what to write for one PV name.
///
/// `verdict` is `None` when the PV does not exist. `existing` is the VolumeLeftover of that name.
/// `first_seen` dates a finding that has no object yet; `now` dates condition transitions and
/// decides whether an acknowledgement has expired.
pub fn plan(
    name: &str,
    verdict: Option<&Verdict>,
    existing: Option<&Leftover>,
    first_seen: &Time,
    now: &Time,
    prices: Option<&PriceTable>,
) -> Action {
    if existing.is_some_and(|o| !o.managed) {
        // Someone else's object under our name: never touched, never deleted.
        return match verdict {
            Some(Verdict::Leftover(_)) => Action::Foreign {
                name: name.to_string(),
            },
            _ => Action::Nothing,
        };
    }
    match verdict {
        // Claims that became unreadable (a 403 while running) say nothing new about a volume
        // whose finding was decided on them: it stays as published (reason, Events, the
        // acknowledgement it covers), as an undecided volume's does.
        Some(Verdict::Leftover(f))
            if f.status.reason == Reason::ClaimUnknown
                && existing.is_some_and(|e| {
                    *e.volume_uid == *f.volume_uid
                        && e.status
                            .as_ref()
                            .is_some_and(|s| decided_on_claims(s.reason))
                }) =>
        {
            Action::Nothing
        }
        Some(Verdict::Leftover(f)) => {
            let object = desired(f, existing, first_seen, now, prices);
            match existing {
                None => Action::Create {
                    object: Box::new(object),
                },
                Some(e) => {
                    let meta = meta_patch(e, &object);
                    // The digests of the whole statuses: equal when they serialize to the same
                    // bytes (what the API server holds), as comparing them did. A status that
                    // spells an earlier version's name is written again, once, with the current
                    // names: the same finding, so the acknowledgement, firstSeen and the
                    // conditions' times stay and no Event is sent.
                    let status = e.status.as_ref().map(|s| s.digest)
                        != object.status.as_ref().map(digest)
                        || e.status.as_ref().is_some_and(|s| s.old_names);
                    if meta.is_some() || status {
                        Action::Apply {
                            object: Box::new(object),
                            meta,
                            status,
                        }
                    } else {
                        Action::Nothing
                    }
                }
            }
        }
        // A skipped or undecided PV keeps whatever was published: the odd object is logged, and
        // nothing is concluded from an unknown.
        Some(Verdict::Skip(_) | Verdict::Undecided(_)) => Action::Nothing,
        // Kept on purpose: a person or the configuration said so; what was published goes.
        Some(Verdict::Healthy | Verdict::Ignored(_)) | None => match existing {
            Some(e) => Action::Delete {
                name: name.to_string(),
                uid: e.uid.as_deref().map(Into::into),
            },
            None => Action::Nothing,
        },
    }
}

/// Whether a finding of this reason was decided by reading the volume's claim.
fn decided_on_claims(r: Reason) -> bool {
    match r {
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimStillPresent
        | Reason::BoundClaimMissing
        | Reason::PreboundClaimMissing
        | Reason::ExpansionStuck => true,
        Reason::ClaimUnknown
        | Reason::ClaimRefInvalid
        | Reason::ReleasedWithoutClaim
        | Reason::ReclaimFailed
        | Reason::VolumeDeleted
        | Reason::VolumeWithoutDisk
        | Reason::DiskWithoutVolume
        | Reason::DiskSizeMismatch
        | Reason::SnapshotWithoutContent => false,
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted => false,
    }
}

/// The complete object for a finding. `firstSeen` is kept from the existing object when it is
/// about the same volume (uid); otherwise it is `first_seen`. The state, the acknowledgement it
/// covers and the conditions follow from the existing object's `spec.acknowledgement`.
pub fn desired(
    f: &Finding,
    existing: Option<&Leftover>,
    first_seen: &Time,
    now: &Time,
    prices: Option<&PriceTable>,
) -> VolumeLeftover {
    let mut status = f.status.clone();
    status.first_seen = existing
        // Only for the same volume: a PV re-created under the same name is a new finding.
        .filter(|e| *e.volume_uid == *f.volume_uid)
        .and_then(|e| e.status.as_ref())
        .map_or_else(|| first_seen.clone(), |s| s.first_seen.clone());
    // Here, the one place every written finding passes, once firstSeen is settled: the
    // estimate may date from it.
    status.cost = prices.and_then(|t| cost::estimate(&status, t, now));
    hand_off(&mut status, f, existing, now);
    let mut o = VolumeLeftover::new(
        f.name(),
        VolumeLeftoverSpec {
            volume_name: f.volume_name.clone(),
            volume_uid: f.volume_uid.clone(),
            acknowledgement: existing.and_then(|e| e.acknowledgement.as_deref().cloned()),
        },
    );
    o.metadata = ObjectMeta {
        name: Some(f.name().to_string()),
        labels: Some(labels(&status)),
        // The version the decision was made on: the writer's status apply carries it, so that
        // it is refused if the object changed since (someone re-created it under the name,
        // acknowledged it) and the name is decided again.
        resource_version: existing
            .and_then(|e| e.resource_version.as_deref())
            .map(Into::into),
        // No ownerReference to the PV: a finding must be able to outlive its volume (a Retain
        // volume's tombstone is the last record of its disk), and the sweep removes the others.
        ..ObjectMeta::default()
    };
    o.status = Some(status);
    o
}

/// State, acknowledgement covered, observed generation and conditions.
///
/// An acknowledgement covers the finding as it was when the operator first saw it (its reason
/// and volume). When the finding changes reason (an acknowledged ClaimDeleted becomes
/// ClaimRecreated: someone made a claim of that name) or the PV is re-created under the same name,
/// what was acknowledged is no longer what is reported: the state is `Superseded`, and a person
/// acknowledges again (any edit of `spec.acknowledgement`) to cover the new finding. Past
/// `until`, the state is `Expired`.
fn hand_off(
    status: &mut VolumeLeftoverStatus,
    f: &Finding,
    existing: Option<&Leftover>,
    now: &Time,
) {
    let ack = existing.and_then(|e| e.acknowledgement.as_deref());
    let before = existing.and_then(|e| e.status.as_ref());
    let (state, acknowledged) = acknowledgement_state(ack, before, f, now);
    let generation = next_generation(f, existing);
    status.state = state;
    status.acknowledged = acknowledged;
    status.observed_generation = generation;
    let (ack_status, ack_message) = acknowledged_condition(state, ack, status);
    let wanted = [
        (
            "Acknowledged",
            ack_status,
            state.as_str().to_string(),
            ack_message,
        ),
        (
            "Open",
            ConditionStatus::from(state.is_open()),
            f.status.reason.as_str().to_string(),
            f.status.message.clone(),
        ),
    ];
    status.conditions = wanted
        .into_iter()
        .map(|(type_, st, reason, message)| {
            // A condition's transition time moves only when its status does.
            let last_transition_time = before
                .and_then(|b| match type_ {
                    "Acknowledged" => b.acknowledged_condition.as_ref(),
                    _ => b.open_condition.as_ref(),
                })
                .filter(|c| c.is(st))
                .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
            Condition {
                type_: type_.into(),
                status: st,
                reason,
                message,
                last_transition_time,
                observed_generation: generation,
            }
        })
        .collect();
}

/// The state, and what the acknowledgement (if any) covers: the finding as it was when the
/// acknowledgement was first seen, kept while the acknowledgement stays the same.
fn acknowledgement_state(
    ack: Option<&crate::model::crd::Acknowledgement>,
    before: Option<&crate::model::leftover::Status>,
    f: &Finding,
    now: &Time,
) -> (State, Option<AcknowledgedFinding>) {
    let Some(a) = ack else {
        return (State::Open, None);
    };
    let covered = before
        .and_then(|s| s.acknowledged.as_deref().cloned())
        .filter(|c| c.acknowledgement == *a)
        .unwrap_or_else(|| AcknowledgedFinding {
            acknowledgement: a.clone(),
            reason: f.status.reason,
            volume_uid: f.volume_uid.clone(),
        });
    let state = if a.until.as_ref().is_some_and(|u| u.0 <= now.0) {
        State::Expired
    } else if covered.reason != f.status.reason || covered.volume_uid != f.volume_uid {
        State::Superseded
    } else {
        State::Acknowledged
    };
    (state, Some(covered))
}

/// The generation the object will have once this is written: the operator's own spec fields
/// (the volume's name and uid, for a PV re-created under the name) are written before the
/// status, and a spec change makes the next generation.
fn next_generation(f: &Finding, existing: Option<&Leftover>) -> Option<i64> {
    let spec_changes =
        |e: &Leftover| e.volume_name() != f.volume_name || *e.volume_uid != *f.volume_uid;
    existing.map_or(Some(1), |e| {
        e.generation.map(|g| {
            if spec_changes(e) {
                g.saturating_add(1)
            } else {
                g
            }
        })
    })
}

/// The Acknowledged condition's status and message; `status.acknowledged` is what the
/// acknowledgement covers, already decided.
fn acknowledged_condition(
    state: State,
    ack: Option<&crate::model::crd::Acknowledgement>,
    status: &VolumeLeftoverStatus,
) -> (ConditionStatus, String) {
    let ticket = ack
        .and_then(|a| a.ticket.as_deref())
        .map_or(String::new(), |t| format!(" (ticket {t})"));
    match state {
        State::Acknowledged => (ConditionStatus::True, format!("Acknowledged{ticket}.")),
        State::Open => (ConditionStatus::False, "Not acknowledged.".to_string()),
        State::Expired => (
            ConditionStatus::False,
            format!("The acknowledgement{ticket} has expired."),
        ),
        State::Superseded => (
            ConditionStatus::False,
            format!(
                "The acknowledgement{ticket} covered {}; the finding has changed since.",
                status
                    .acknowledged
                    .as_ref()
                    .map_or("another finding", |c| c.reason.as_str())
            ),
        ),
    }
}

/// When the published state of `existing` changes by the clock alone (an acknowledgement's
/// `until` passing, its accrued cost's next day), if it does.
pub(crate) fn next_change(existing: Option<&Leftover>, now: &Time) -> Option<Duration> {
    let e = existing?;
    let until = e.acknowledgement.as_ref().and_then(|a| a.until.as_ref());
    let expires = until
        .and_then(|u| Duration::try_from(u.0.duration_since(now.0)).ok())
        .filter(|left| !left.is_zero());
    let accrues = e
        .status
        .as_ref()
        .and_then(|s| s.cost.as_ref())
        .and_then(|c| cost::next_step(&c.accrued_through, now));
    [expires, accrues].into_iter().flatten().min()
}

fn labels(s: &VolumeLeftoverStatus) -> BTreeMap<String, String> {
    let mut l = BTreeMap::from([
        (MANAGED_BY.to_string(), MANAGED_BY_VALUE.to_string()),
        (LABEL_REASON.to_string(), s.reason.as_str().to_string()),
        (LABEL_STATE.to_string(), s.state.as_str().to_string()),
    ]);
    if let Some(ns) = s
        .claim
        .as_ref()
        .and_then(|c| c.namespace.as_deref())
        .filter(|v| is_label_value(v))
    {
        l.insert(LABEL_CLAIM_NAMESPACE.into(), ns.into());
    }
    if let Some(class) = s
        .storage_class
        .as_ref()
        .map(|c| c.name.as_str())
        .filter(|v| is_label_value(v))
    {
        l.insert(LABEL_STORAGE_CLASS.into(), class.into());
    }
    for h in &s.hints {
        l.insert(format!("{HINT_LABEL_PREFIX}{}", h.as_str()), "true".into());
    }
    l
}

/// The JSON merge patch that makes the parts of metadata and spec this operator owns say what
/// `want` says, or `None` when they already do. It names only those parts: our labels (a label
/// of ours that no longer applies is set to null, which removes it), the removal of an
/// ownerReference to the PV left by an earlier version (the list is written whole, so the
/// others' entries are carried over) and `spec.volumeName` /
/// `spec.volumeUID`; `spec.acknowledgement` and everyone else's labels are never mentioned. It
/// carries the resourceVersion the decision was made on: refused if the object changed since.
fn meta_patch(have: &Leftover, want: &VolumeLeftover) -> Option<serde_json::Value> {
    let empty = BTreeMap::new();
    let have_labels = &have.own_labels();
    let want_labels = want.metadata.labels.as_ref().unwrap_or(&empty);
    let mut labels = serde_json::Map::new();
    for (k, v) in want_labels {
        if have_labels.get(k) != Some(v) {
            labels.insert(k.clone(), serde_json::Value::String(v.clone()));
        }
    }
    for k in have_labels.keys() {
        if is_own_label(k) && !want_labels.contains_key(k) {
            labels.insert(k.clone(), serde_json::Value::Null);
        }
    }
    // Kept only when one of them names a PersistentVolume: otherwise none is ours.
    let have_owners = have
        .pv_owner_references()
        .map(<[OwnerReference]>::to_vec)
        .unwrap_or_default();
    // Objects written by earlier versions carry an ownerReference to their PV, which would let
    // the garbage collector delete a tombstone with its volume: it is removed.
    let is_ours = |h: &OwnerReference| {
        h.api_version == "v1" && h.kind == "PersistentVolume" && h.name == want.spec.volume_name
    };
    let owners_same = !have_owners.iter().any(is_ours);
    let spec_same =
        have.volume_name() == want.spec.volume_name && *have.volume_uid == *want.spec.volume_uid;
    if labels.is_empty() && owners_same && spec_same {
        return None;
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert(
        "resourceVersion".into(),
        serde_json::json!(have.resource_version),
    );
    if !labels.is_empty() {
        metadata.insert("labels".into(), serde_json::Value::Object(labels));
    }
    if !owners_same {
        // The list is written whole: everyone else's references are carried over.
        let list: Vec<OwnerReference> = have_owners.into_iter().filter(|h| !is_ours(h)).collect();
        metadata.insert("ownerReferences".into(), serde_json::json!(list));
    }
    let mut patch = serde_json::json!({ "metadata": metadata });
    if !spec_same {
        patch["spec"] = serde_json::json!({
            "volumeName": want.spec.volume_name,
            "volumeUID": want.spec.volume_uid,
        });
    }
    Some(patch)
}

/// Decides what to write for a name whose PersistentVolume does not exist (any more).
///
/// `fresh` is the tombstone built from the volume's last object when its delete was watched
/// ([`crate::decide::classify::tombstone`]); without it, a finding published for a volume that vanished
/// while nothing watched becomes the tombstone ([`crate::decide::classify::tombstone_of`]), and a
/// published tombstone stays as it is. Nothing is invented for a volume the operator never saw.
/// The tombstone ends as every tombstone does ([`tombstone_plan`]: acknowledged, `ttl` passed,
/// or the census's `image` gone); every other finding of a deleted volume is deleted. While it
/// stays, its message
/// ends by saying what the census found: the image (or the image in the trash), or nothing
/// checked; an Unknown census keeps what the message said.
pub(crate) fn gone(
    name: &str,
    fresh: Option<&Finding>,
    existing: Option<&Leftover>,
    now: &Time,
    ttl: Option<Duration>,
    image: &ImageFound,
    prices: Option<&PriceTable>,
) -> Action {
    let published = existing
        .filter(|o| o.managed)
        .and_then(|e| Some((e, e.status.as_ref()?)));
    let tombstone = match (fresh, published) {
        (Some(f), _) => Some(f.clone()),
        (None, None) => None,
        // The facts are kept for every tombstone and every finding that may become one
        // (`leftover::needs_record`).
        (None, Some((e, s))) => match (s.reason, s.record()) {
            // Cannot happen (a tombstone keeps its facts); if it did, what is published stays.
            (Reason::VolumeDeleted, None) => return Action::Nothing,
            (Reason::VolumeDeleted, Some(status)) => Some(Finding {
                volume_name: e.volume_name().to_string(),
                volume_uid: e.volume_uid.to_string(),
                storage_class_name: status.storage_class.as_ref().map(|c| c.name.clone()),
                status,
                object_name: None,
            }),
            (_, status) => status.and_then(|status| {
                crate::decide::classify::tombstone_of(&status, e.volume_name(), &e.volume_uid, now)
            }),
        },
    };
    let Some(mut t) = tombstone else {
        return plan(name, None, existing, now, now, prices);
    };
    if let Some(note) = backend_note(image) {
        t.status.message = with_backend_note(&t.status.message, note);
    }
    tombstone_plan(name, t, existing, now, ttl, image, prices)
}

/// What to write for a tombstone of either kind: a deleted volume's (`VolumeDeleted`, its disk
/// left in the backend) or a deleted content's (`ContentDeleted`, its backend snapshot left).
/// The one place that decides whether a tombstone ends, so that both end alike:
/// - `ttl` has passed since the delete (`status.deletedAt`);
/// - the census says the backend object is gone (`backend`: two listings without it, not in
///   the trash);
/// - a person acknowledged it (an acknowledgement that covers this finding, not the one before
///   the delete: that is `Superseded`), and the census does not cover the backend object.
///
/// Otherwise it is published (created, or kept up to date), dated by its delete.
pub(crate) fn tombstone_plan(
    name: &str,
    t: Finding,
    existing: Option<&Leftover>,
    now: &Time,
    ttl: Option<Duration>,
    backend: &ImageFound,
    prices: Option<&PriceTable>,
) -> Action {
    let deleted_at = t.status.deleted_at.clone().unwrap_or_else(|| now.clone());
    let expired = ttl.is_some_and(|ttl| add(&deleted_at, ttl).0 <= now.0);
    if expired || *backend == (ImageFound::Missing { in_trash: false }) {
        return plan(name, None, existing, now, now, prices);
    }
    let action = plan(
        name,
        Some(&Verdict::Leftover(Box::new(t))),
        existing,
        &deleted_at,
        now,
        prices,
    );
    let state = state_after(&action, existing);
    // Acknowledged, the record lives in the person's ticket. With the census on, the disk or
    // snapshot the tombstone names would then be one nobody names, and come back as
    // DiskWithoutVolume or SnapshotWithoutContent: a second ticket for the same object. So it
    // stays, acknowledged, until the census says it is gone (or the TTL passes).
    if state == Some(State::Acknowledged) && *backend == ImageFound::NotCensused {
        return plan(name, None, existing, now, now, prices);
    }
    action
}

/// The last sentence a kept tombstone's message gets from the census, or `None` to keep the one
/// it has.
fn backend_note(image: &ImageFound) -> Option<&'static str> {
    match image {
        ImageFound::Missing { .. } => Some(NOTE_IN_TRASH),
        ImageFound::Present { .. } => Some(NOTE_FOUND),
        ImageFound::NotCensused => Some(NOTE_NOT_CHECKED),
        // No news: what the (published or fresh) message says stays.
        ImageFound::Unknown => None,
    }
}

/// The state the object will have once `action` is carried out (`None`: no object of ours).
fn state_after(action: &Action, existing: Option<&Leftover>) -> Option<State> {
    match action {
        Action::Create { object } | Action::Apply { object, .. } => {
            object.status.as_ref().map(|s| s.state)
        }
        Action::Nothing => existing.and_then(|e| e.status.as_ref()).map(|s| s.state),
        Action::Delete { .. } | Action::Foreign { .. } => None,
    }
}

/// When a published tombstone's `ttl` runs out, if it has not.
pub(crate) fn tombstone_expires(
    existing: Option<&Leftover>,
    now: &Time,
    ttl: Option<Duration>,
) -> Option<Duration> {
    let s = existing?.status.as_ref()?;
    if !matches!(s.reason, Reason::VolumeDeleted | Reason::ContentDeleted) {
        return None;
    }
    let end = add(s.deleted_at.as_ref()?, ttl?);
    Duration::try_from(end.0.duration_since(now.0)).ok()
}
