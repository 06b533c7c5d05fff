//! `classify`: every reason, the healthy phases, the skips, the hints, the observed fields.

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume};

use super::fixtures::{
    FakeLookup, PvBuilder, StaleLookup, finding, lookup, mariadb_pv, now, now_plus, pv,
    released_at, verdict,
};
use crate::decide::classify::classify;
use crate::model::crd::{
    ClaimInfo, Hint, Reason, StorageClassInfo, Tristate, VolumeLeftoverStatus, VolumeSourceInfo,
};
use crate::model::finding::{Undecided, Verdict};
use crate::model::volume::Volume;

/// A lookup where the claims the reason tests ask about are absent and class `standard` is
/// Retain, so no hint interferes.
fn classes() -> FakeLookup {
    lookup().with_class("standard", "Retain")
}

fn released(name: &str) -> PersistentVolume {
    pv(name)
        .retain()
        .released()
        .class("standard")
        .claim("ns", "c", "uid-1")
}

fn bound(name: &str) -> PersistentVolume {
    pv(name)
        .retain()
        .bound()
        .class("standard")
        .claim("ns", "c", "uid-1")
}

#[track_caller]
fn assert_skip(v: Verdict, mentions: &str) {
    match v {
        Verdict::Skip(why) => assert!(
            why.contains(mentions),
            "skip reason {why:?} should mention {mentions:?}"
        ),
        other => panic!("expected a skip mentioning {mentions:?}, got {other:?}"),
    }
}

// ---- Reasons ----

#[test]
fn released_with_claim_gone_is_claim_deleted() {
    let f = finding(&released("a"), &classes());
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(
        f.status.claim,
        Some(ClaimInfo {
            reference: "ns/c".into(),
            namespace: Some("ns".into()),
            name: Some("c".into()),
            uid: Some("uid-1".into()),
            missing: Tristate::True,
            current_uid: None,
            expansion: None
        })
    );
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn canonical_uids_compare_as_the_text_they_are() {
    // The stores keep canonical uids as 16 bytes (`crate::model::uid`): the same claim is the same,
    // a recreated one is told apart, and both uids read back as written.
    let (old, new) = (
        "6f1e3a2b-0c4d-4e5f-9a8b-7c6d5e4f3a2b",
        "6f1e3a2b-0c4d-4e5f-9a8b-7c6d5e4f3a2c",
    );
    let pv = pv("a")
        .retain()
        .released()
        .claim("ns", "c", old)
        .uid("0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a");
    let same = finding(&pv, &classes().with_claim("ns", "c", old));
    assert_eq!(same.status.reason, Reason::ClaimStillPresent);
    assert_eq!(same.volume_uid, "0d9c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a");
    let f = finding(&pv, &classes().with_claim("ns", "c", new));
    assert_eq!(f.status.reason, Reason::ClaimRecreated);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(claim.uid.as_deref(), Some(old));
    assert_eq!(claim.current_uid.as_deref(), Some(new));
}

#[test]
fn released_with_a_new_claim_of_that_name_is_claim_recreated_with_both_uids() {
    let f = finding(&released("a"), &classes().with_claim("ns", "c", "uid-2"));
    assert_eq!(f.status.reason, Reason::ClaimRecreated);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(claim.uid.as_deref(), Some("uid-1"));
    assert_eq!(claim.current_uid.as_deref(), Some("uid-2"));
    // The original tool's claim_missing: a claim of that name exists. Not a bug: the new claim
    // exists; the reason and the two uids say what happened.
    assert_eq!(claim.missing, Tristate::False);
    assert!(
        f.status.message.contains("uid-1") && f.status.message.contains("uid-2"),
        "message names both uids: {}",
        f.status.message
    );
}

#[test]
fn released_with_the_same_claim_still_there_is_claim_still_present() {
    let f = finding(
        &released("a"),
        &classes().with_terminating_claim("ns", "c", "uid-1"),
    );
    assert_eq!(f.status.reason, Reason::ClaimStillPresent);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(claim.missing, Tristate::False);
    assert_eq!(claim.current_uid, None);
}

#[test]
fn released_when_claims_are_forbidden_is_claim_unknown() {
    let f = finding(&released("a"), &classes().claims_forbidden());
    assert_eq!(f.status.reason, Reason::ClaimUnknown);
    assert_eq!(
        f.status.claim.expect("claim info").missing,
        Tristate::Unknown
    );
}

#[test]
fn released_with_claim_ref_without_namespace_is_claim_ref_invalid() {
    let p = released("a").claim_ref(ObjectReference {
        kind: Some("PersistentVolumeClaim".into()),
        name: Some("c".into()),
        uid: Some("uid-1".into()),
        ..ObjectReference::default()
    });
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ClaimRefInvalid);
    assert_eq!(f.status.hints, vec![Hint::ClaimRefIncomplete]);
    let claim = f.status.claim.expect("claim info");
    // Nothing to look up: the original tool says false.
    assert_eq!(claim.missing, Tristate::False);
    assert_eq!(claim.namespace, None);
    assert_eq!(claim.reference, "/c");
    assert!(
        f.status.message.contains("has no namespace"),
        "{}",
        f.status.message
    );
}

#[test]
fn released_with_claim_ref_without_name_is_claim_ref_invalid() {
    let p = released("a").claim_ref(ObjectReference {
        namespace: Some("ns".into()),
        name: Some(String::new()),
        uid: Some("uid-1".into()),
        ..ObjectReference::default()
    });
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ClaimRefInvalid);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(claim.missing, Tristate::False);
    assert_eq!(claim.name, None, "an empty name is no name");
    assert!(
        f.status.message.contains("has no name"),
        "{}",
        f.status.message
    );
}

#[test]
fn released_without_claim_ref_is_released_without_claim() {
    let p = pv("a").retain().released().class("standard");
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ReleasedWithoutClaim);
    assert_eq!(f.status.claim, None);
}

#[test]
fn bound_to_a_claim_that_is_gone_is_bound_claim_missing() {
    let f = finding(&bound("a"), &classes());
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(claim.missing, Tristate::True);
    assert_eq!(claim.current_uid, None);
}

#[test]
fn bound_to_a_claim_name_that_now_has_another_uid_is_bound_claim_missing() {
    let f = finding(&bound("a"), &classes().with_claim("ns", "c", "uid-2"));
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    let claim = f.status.claim.expect("claim info");
    assert_eq!(
        claim.missing,
        Tristate::False,
        "a claim of that name exists"
    );
    assert_eq!(claim.uid.as_deref(), Some("uid-1"));
    assert_eq!(claim.current_uid.as_deref(), Some("uid-2"));
    assert!(
        f.status.message.contains("has uid uid-2"),
        "{}",
        f.status.message
    );
}

#[test]
fn failed_with_a_claim_is_reclaim_failed() {
    let p = pv("a")
        .retain()
        .failed()
        .class("standard")
        .claim("ns", "c", "uid-1")
        .status_message("Recycle failed: pod failed");
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(f.status.phase, "Failed");
    assert_eq!(
        f.status.phase_message.as_deref(),
        Some("Recycle failed: pod failed")
    );
    assert_eq!(f.status.claim.expect("claim info").missing, Tristate::True);
}

#[test]
fn failed_without_a_claim_is_reclaim_failed() {
    let p = pv("a").retain().failed().class("standard");
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(f.status.claim, None);
    assert_eq!(f.status.phase_message, None);
}

#[test]
fn failed_with_an_existing_claim_is_still_reclaim_failed() {
    let f = finding(
        &pv("a").retain().failed().claim("ns", "c", "uid-1"),
        &lookup().with_claim("ns", "c", "uid-1"),
    );
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(f.status.claim.expect("claim info").missing, Tristate::False);
}

// ---- Healthy ----

#[test]
fn available_is_healthy() {
    let p = pv("a").retain().available().class("standard");
    assert_eq!(verdict(&p, &classes()), Verdict::Healthy);
}

#[test]
fn available_pre_bound_to_a_claim_that_does_not_exist_is_prebound_claim_missing() {
    // What the usual "reuse" patch leaves when the new claim never comes: it waits forever.
    let p = pv("a").retain().available().claim_by_name("ns", "gone");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::PreboundClaimMissing);
    assert_eq!(f.status.claim.expect("claim info").missing, Tristate::True);
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn available_pre_bound_to_an_existing_claim_is_healthy() {
    let p = pv("a").retain().available().claim_by_name("ns", "c");
    assert_eq!(
        verdict(&p, &lookup().with_claim("ns", "c", "uid-1")),
        Verdict::Healthy
    );
}

#[test]
fn available_pre_bound_when_claims_are_forbidden_is_undecided() {
    let p = pv("a").retain().available().claim_by_name("ns", "c");
    assert_eq!(
        verdict(&p, &lookup().claims_forbidden()),
        Verdict::Undecided(Undecided::PreboundClaimUnknown { volume: "a".into() })
    );
}

#[test]
fn pending_pre_bound_to_a_claim_that_does_not_exist_is_prebound_claim_missing() {
    let p = pv("a").pending().claim_by_name("ns", "gone");
    assert_eq!(
        finding(&p, &lookup()).status.reason,
        Reason::PreboundClaimMissing
    );
}

#[test]
fn pending_is_healthy() {
    assert_eq!(verdict(&pv("a").pending(), &lookup()), Verdict::Healthy);
}

#[test]
fn bound_to_its_claim_is_healthy() {
    let l = classes().with_claim("ns", "c", "uid-1");
    assert_eq!(verdict(&bound("a"), &l), Verdict::Healthy);
}

#[test]
fn bound_when_claims_are_forbidden_is_undecided_because_a_403_is_not_a_404() {
    // Not Healthy either: that would delete a published BoundClaimMissing on a 403.
    let l = classes().claims_forbidden();
    assert_eq!(
        verdict(&bound("a"), &l),
        Verdict::Undecided(Undecided::BoundClaimUnknown { volume: "a".into() })
    );
}

#[test]
fn bound_by_name_only_to_an_existing_claim_is_healthy() {
    let p = pv("a").bound().claim_by_name("ns", "c");
    let l = lookup().with_claim("ns", "c", "uid-anything");
    assert_eq!(verdict(&p, &l), Verdict::Healthy);
}

#[test]
fn bound_by_name_only_to_a_claim_that_is_gone_is_bound_claim_missing() {
    let p = pv("a").bound().claim_by_name("ns", "c");
    assert_eq!(
        finding(&p, &lookup()).status.reason,
        Reason::BoundClaimMissing
    );
}

#[test]
fn released_by_name_only_with_a_claim_of_that_name_is_claim_still_present() {
    let p = pv("a").released().claim_by_name("ns", "c");
    let f = finding(&p, &lookup().with_claim("ns", "c", "uid-x"));
    assert_eq!(f.status.reason, Reason::ClaimStillPresent);
    assert_eq!(f.status.claim.expect("claim info").uid, None);
}

#[test]
fn claim_ref_kind_may_be_left_unset() {
    let p = released("a").claim_ref(ObjectReference {
        namespace: Some("ns".into()),
        name: Some("c".into()),
        uid: Some("uid-1".into()),
        ..ObjectReference::default()
    });
    assert_eq!(finding(&p, &classes()).status.reason, Reason::ClaimDeleted);
}

// ---- Skips ----

#[test]
fn pv_without_name_is_skipped() {
    assert_skip(
        verdict(&released("a").no_name(), &lookup()),
        "metadata.name",
    );
}

#[test]
fn pv_with_empty_name_is_skipped() {
    let mut p = released("a");
    p.metadata.name = Some(String::new());
    assert_skip(verdict(&p, &lookup()), "metadata.name");
}

#[test]
fn pv_without_uid_is_skipped() {
    assert_skip(verdict(&released("a").no_uid(), &lookup()), "metadata.uid");
}

#[test]
fn pv_without_spec_reads_as_an_empty_spec() {
    let p = pv("a").no_spec().released();
    assert_eq!(
        finding(&p, &lookup()).status.reason,
        Reason::ReleasedWithoutClaim
    );
}

#[test]
fn pv_without_status_and_a_claim_that_does_not_exist_is_reported_as_the_original_tool_does() {
    // The original tool prints any PV whose claim is missing, whatever its phase.
    let p = pv("a").retain().claim("ns", "c", "uid-1").no_status();
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::PreboundClaimMissing);
    assert_eq!(f.status.phase, "");
    assert_eq!(f.status.hints, vec![Hint::PhaseUnknown]);
    assert!(
        f.status.message.contains("without a phase"),
        "{}",
        f.status.message
    );
}

#[test]
fn pv_without_status_or_claim_ref_is_skipped() {
    assert_skip(verdict(&pv("a").no_status(), &lookup()), "phase \"\"");
}

#[test]
fn pv_with_empty_phase_is_skipped() {
    assert_skip(verdict(&pv("a").phase(""), &lookup()), "does not define");
}

#[test]
fn pv_with_unknown_phase_is_skipped() {
    assert_skip(verdict(&pv("a").phase("Lost"), &lookup()), "\"Lost\"");
}

#[test]
fn phase_is_case_sensitive() {
    assert_skip(
        verdict(&pv("a").phase("released"), &lookup()),
        "does not define",
    );
}

#[test]
fn unknown_phase_with_a_claim_that_does_not_exist_is_reported_with_a_hint() {
    let p = pv("a").phase("Lost").claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::PreboundClaimMissing);
    assert_eq!(f.status.phase, "Lost");
    assert_eq!(f.status.hints, vec![Hint::PhaseUnknown]);
}

#[test]
fn unknown_phase_with_an_existing_claim_is_skipped() {
    let p = pv("a").phase("Lost").claim("ns", "c", "uid-1");
    assert_skip(
        verdict(&p, &lookup().with_claim("ns", "c", "uid-1")),
        "\"Lost\"",
    );
}

#[test]
fn bound_without_claim_ref_is_skipped() {
    let p = pv("a").retain().bound().class("standard");
    assert_skip(verdict(&p, &classes()), "no claimRef");
}

#[test]
fn released_with_a_claim_ref_to_another_kind_is_claim_ref_invalid() {
    let p = released("a").claim_kind("ConfigMap");
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ClaimRefInvalid);
    assert_eq!(f.status.hints, vec![Hint::ClaimRefNotAClaim]);
    // Looked up by namespace and name, as the original tool does: no claim ns/c exists.
    assert_eq!(f.status.claim.expect("claim info").missing, Tristate::True);
    assert!(
        f.status
            .message
            .contains("names a kind other than PersistentVolumeClaim"),
        "{}",
        f.status.message
    );
}

#[test]
fn bound_with_a_claim_ref_to_another_kind_and_no_claim_of_that_name_is_bound_claim_missing() {
    let p = bound("a").claim_kind("Pod");
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    assert_eq!(f.status.hints, vec![Hint::ClaimRefNotAClaim]);
    assert!(
        f.status.message.contains("names a kind other than"),
        "{}",
        f.status.message
    );
}

#[test]
fn failed_with_an_incomplete_claim_ref_is_reclaim_failed_with_the_hint() {
    let p = pv("a").retain().failed().claim_ref(ObjectReference {
        name: Some("c".into()),
        ..ObjectReference::default()
    });
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(f.status.hints, vec![Hint::ClaimRefIncomplete]);
}

// ---- Claims unknown: never True ----

#[test]
fn claims_unknown_never_make_claim_missing_true_in_any_phase() {
    let l = classes().claims_forbidden();
    for phase in ["Released", "Bound", "Failed", "Available", "Pending"] {
        let p = pv("a").retain().phase(phase).claim("ns", "c", "uid-1");
        match verdict(&p, &l) {
            Verdict::Leftover(f) => assert_eq!(
                f.status.claim.expect("claim info").missing,
                Tristate::Unknown,
                "phase {phase}"
            ),
            Verdict::Healthy | Verdict::Undecided(_) => {}
            Verdict::Skip(why) => panic!("phase {phase} skipped: {why}"),
            Verdict::Ignored(why) => panic!("phase {phase} ignored: {why:?}"),
        }
    }
}

#[test]
fn failed_when_claims_are_forbidden_reports_claim_missing_unknown() {
    let p = pv("a").retain().failed().claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup().claims_forbidden());
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(
        f.status.claim.expect("claim info").missing,
        Tristate::Unknown
    );
}

// ---- Hints ----

#[test]
fn released_with_delete_policy_hints_reclaim_policy_delete() {
    let p = pv("a").delete().released().claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(f.status.hints, vec![Hint::ReclaimPolicyDelete]);
    assert!(
        f.status.message.contains("reclaim policy is Delete"),
        "{}",
        f.status.message
    );
}

#[test]
fn failed_with_delete_policy_hints_reclaim_policy_delete() {
    let p = pv("a").delete().failed();
    let f = finding(&p, &lookup());
    assert_eq!(f.status.hints, vec![Hint::ReclaimPolicyDelete]);
    assert!(
        f.status.message.contains("Delete reclaim"),
        "{}",
        f.status.message
    );
}

#[test]
fn released_with_retain_policy_has_no_reclaim_policy_delete_hint() {
    let f = finding(
        &pv("a").retain().released().claim("ns", "c", "u"),
        &lookup(),
    );
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
    assert!(!f.status.message.contains("Delete"), "{}", f.status.message);
}

#[test]
fn bound_finding_with_delete_policy_has_no_reclaim_policy_delete_hint() {
    let p = pv("a").delete().bound().claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn pv_policy_different_from_class_policy_hints_mismatch_and_reports_both() {
    let p = released("a"); // Retain, class standard
    let f = finding(&p, &lookup().with_class("standard", "Delete"));
    assert_eq!(f.status.hints, vec![Hint::ReclaimPolicyMismatch]);
    assert_eq!(f.status.reclaim_policy, "Retain");
    assert_eq!(
        f.status.storage_class,
        Some(StorageClassInfo {
            name: "standard".into(),
            reclaim_policy: Some("Delete".into()),
            missing: Tristate::False,
            disk_type: None,
            replication_type: None,
        })
    );
}

#[test]
fn pv_policy_equal_to_class_policy_has_no_mismatch_hint() {
    let f = finding(&released("a"), &lookup().with_class("standard", "Retain"));
    assert!(
        !f.status.hints.contains(&Hint::ReclaimPolicyMismatch),
        "{:?}",
        f.status.hints
    );
}

#[test]
fn class_that_no_longer_exists_hints_storage_class_missing() {
    let f = finding(&released("a"), &lookup());
    assert_eq!(f.status.hints, vec![Hint::StorageClassMissing]);
    assert_eq!(
        f.status.storage_class,
        Some(StorageClassInfo {
            name: "standard".into(),
            reclaim_policy: None,
            missing: Tristate::True,
            disk_type: None,
            replication_type: None,
        })
    );
}

#[test]
fn classes_forbidden_hint_storage_class_unknown_and_no_mismatch() {
    let f = finding(&released("a"), &lookup().classes_forbidden());
    assert_eq!(f.status.hints, vec![Hint::StorageClassUnknown]);
    let sc = f.status.storage_class.expect("class info");
    assert_eq!(sc.missing, Tristate::Unknown);
    assert_eq!(sc.reclaim_policy, None);
}

#[test]
fn pv_without_class_has_no_class_info_and_no_class_hint() {
    let p = pv("a").retain().released().claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup().classes_forbidden());
    assert_eq!(f.status.storage_class, None);
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn empty_class_name_counts_as_no_class() {
    let p = pv("a").retain().released().class("");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.storage_class, None);
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn hints_are_sorted() {
    // Delete on a Released PV whose class says Retain: two hints, in Hint's order.
    let p = pv("a")
        .delete()
        .released()
        .class("standard")
        .claim("ns", "c", "u");
    let f = finding(&p, &lookup().with_class("standard", "Retain"));
    assert_eq!(
        f.status.hints,
        vec![Hint::ReclaimPolicyDelete, Hint::ReclaimPolicyMismatch]
    );
    let mut sorted = f.status.hints.clone();
    sorted.sort();
    assert_eq!(f.status.hints, sorted);
}

#[test]
fn missing_class_and_delete_policy_give_both_hints_in_order() {
    let p = pv("a").delete().failed().class("gone");
    let f = finding(&p, &lookup());
    assert_eq!(
        f.status.hints,
        vec![Hint::ReclaimPolicyDelete, Hint::StorageClassMissing]
    );
}

// ---- Observed fields ----

#[test]
fn mariadb_status_is_observed_field_by_field() {
    let f = finding(&mariadb_pv(), &lookup().with_class("standard", "Retain"));
    assert_eq!(f.volume_name, "mariadb-pv");
    assert_eq!(f.volume_uid, "pv-uid-mariadb-pv");
    let VolumeLeftoverStatus {
        reason,
        state,
        observed_generation,
        conditions,
        acknowledged,
        capacity_bytes,
        disk_size_bytes,
        message,
        hints,
        phase,
        phase_since,
        phase_message,
        reclaim_policy,
        storage_class,
        claim,
        capacity,
        access_modes,
        volume_mode,
        source,
        first_seen,
        subject,
        deleted_at,
        image,
        cost,
        snapshot,
    } = f.status;
    assert_eq!(cost, None, "the planner estimates it, with a price table");
    assert_eq!(disk_size_bytes, None, "no census lists its disk");
    assert_eq!(snapshot, None, "a volume's finding");
    assert_eq!(reason, Reason::ClaimDeleted);
    assert_eq!(
        message,
        "PersistentVolume mariadb-pv is Released and its claim mariadb/mariadb (uid uid-mariadb-1) no longer exists; the volume and its data survived the claim."
    );
    assert!(hints.is_empty());
    assert_eq!(phase, "Released");
    assert_eq!(phase_since, Some(released_at()));
    assert_eq!(phase_message, None);
    assert_eq!(reclaim_policy, "Retain");
    assert_eq!(
        storage_class,
        Some(StorageClassInfo {
            name: "standard".into(),
            reclaim_policy: Some("Retain".into()),
            missing: Tristate::False,
            disk_type: None,
            replication_type: None,
        })
    );
    assert_eq!(
        claim,
        Some(ClaimInfo {
            reference: "mariadb/mariadb".into(),
            namespace: Some("mariadb".into()),
            name: Some("mariadb".into()),
            uid: Some("uid-mariadb-1".into()),
            missing: Tristate::True,
            current_uid: None,
            expansion: None
        })
    );
    assert_eq!(capacity.as_deref(), Some("250Mi"));
    assert_eq!(capacity_bytes, Some(250 * 1024 * 1024));
    // The hand-off fields are the planner's.
    assert_eq!(state, crate::model::crd::State::Open);
    assert_eq!(observed_generation, None);
    assert!(conditions.is_empty());
    assert_eq!(acknowledged, None);
    assert_eq!(access_modes, vec!["ReadWriteOnce".to_string()]);
    assert_eq!(volume_mode, "Filesystem");
    assert_eq!(
        source,
        VolumeSourceInfo {
            kind: "csi".into(),
            driver: Some("rbd.csi.ceph.com".into()),
            volume_handle: Some("0001-0009-rook-ceph-0000000000000002-mariadb".into()),
            pool: Some("replicapool".into()),
            image_name: Some("csi-vol-mariadb".into()),
            cluster_id: None,
            rados_namespace: None,
            disk_name: None,
            disk_uri: None,
            path: None,
            zones: Vec::new(),
        }
    );
    assert_eq!(first_seen, now());
    assert_eq!(subject, crate::model::crd::Subject::Volume);
    assert_eq!(deleted_at, None);
    assert_eq!(image, None);
}

#[test]
fn phase_since_is_absent_when_the_server_did_not_set_it() {
    let f = finding(&released("a"), &classes());
    assert_eq!(f.status.phase_since, None);
}

#[test]
fn first_seen_is_the_time_passed_in() {
    let later = now_plus(90);
    match classify(&Volume::from(&released("a")), &classes(), later.clone()) {
        Verdict::Leftover(f) => assert_eq!(f.status.first_seen, later),
        other => panic!("{other:?}"),
    }
}

#[test]
fn capacity_is_kept_as_written() {
    for q in ["250Mi", "1Gi", "1073741824", "0.5Ti"] {
        let f = finding(&released("a").capacity(q), &classes());
        assert_eq!(f.status.capacity.as_deref(), Some(q));
    }
}

#[test]
fn capacity_is_absent_without_a_storage_quantity() {
    let f = finding(&released("a"), &classes());
    assert_eq!(f.status.capacity, None);
}

#[test]
fn access_modes_are_kept_in_order() {
    let p = released("a").access_modes(["ReadWriteMany", "ReadOnlyMany"]);
    assert_eq!(
        finding(&p, &classes()).status.access_modes,
        vec!["ReadWriteMany".to_string(), "ReadOnlyMany".to_string()]
    );
}

#[test]
fn volume_mode_defaults_to_filesystem_and_keeps_block() {
    assert_eq!(
        finding(&released("a"), &classes()).status.volume_mode,
        "Filesystem"
    );
    let block = released("a").volume_mode("Block");
    assert_eq!(finding(&block, &classes()).status.volume_mode, "Block");
}

#[test]
fn unset_reclaim_policy_reads_as_retain_the_api_default() {
    let mut p = released("a");
    p.spec
        .as_mut()
        .expect("spec")
        .persistent_volume_reclaim_policy = None;
    let f = finding(&p, &classes());
    assert_eq!(f.status.reclaim_policy, "Retain");
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
}

#[test]
fn unset_reclaim_policy_on_a_delete_class_hints_mismatch() {
    let mut p = released("a");
    p.spec
        .as_mut()
        .expect("spec")
        .persistent_volume_reclaim_policy = None;
    let f = finding(&p, &lookup().with_class("standard", "Delete"));
    assert_eq!(f.status.hints, vec![Hint::ReclaimPolicyMismatch]);
}

// ---- Volume sources ----

fn source_of(p: PersistentVolume) -> VolumeSourceInfo {
    finding(&p, &classes()).status.source
}

#[test]
fn csi_source_reports_driver_handle_pool_and_image() {
    let s = source_of(released("a").csi(
        "rbd.csi.ceph.com",
        "handle",
        [("pool", "p"), ("imageName", "img"), ("clusterID", "x")],
    ));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "csi".into(),
            driver: Some("rbd.csi.ceph.com".into()),
            volume_handle: Some("handle".into()),
            pool: Some("p".into()),
            image_name: Some("img".into()),
            cluster_id: Some("x".into()),
            rados_namespace: None,
            disk_name: None,
            disk_uri: None,
            path: None,
            zones: Vec::new(),
        }
    );
}

#[test]
fn csi_source_without_ceph_attributes_has_no_pool_or_image() {
    let s = source_of(released("a").csi(
        "pd.csi.storage.gke.io",
        "projects/p/regions/r/disks/pvc-1",
        [("pool", "")],
    ));
    assert_eq!(s.kind, "csi");
    assert_eq!(s.driver.as_deref(), Some("pd.csi.storage.gke.io"));
    assert_eq!(
        s.volume_handle.as_deref(),
        Some("projects/p/regions/r/disks/pvc-1")
    );
    assert_eq!(s.pool, None, "an empty attribute is no attribute");
    assert_eq!(s.image_name, None);
}

#[test]
fn in_tree_rbd_source_reports_pool_and_image() {
    let s = source_of(released("a").rbd(Some("kube"), "img-1"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "rbd".into(),
            pool: Some("kube".into()),
            image_name: Some("img-1".into()),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn in_tree_rbd_source_without_pool_reports_the_default_pool_rbd() {
    let s = source_of(released("a").rbd(None, "img-1"));
    assert_eq!(s.pool.as_deref(), Some("rbd"));
    assert_eq!(s.image_name.as_deref(), Some("img-1"));
}

#[test]
fn gce_persistent_disk_source_reports_the_disk_name() {
    let s = source_of(released("a").gce_pd("pvc-disk-1"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "gcePersistentDisk".into(),
            disk_name: Some("pvc-disk-1".into()),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn aws_ebs_source_reports_the_volume_id() {
    let s = source_of(released("a").aws_ebs("vol-0abc"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "awsElasticBlockStore".into(),
            disk_name: Some("vol-0abc".into()),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn nfs_source_reports_server_colon_path() {
    let s = source_of(released("a").nfs("nfs.example", "/exports/a"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "nfs".into(),
            path: Some("nfs.example:/exports/a".into()),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn host_path_source_reports_the_path() {
    let s = source_of(released("a").host_path("/mnt/data"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "hostPath".into(),
            path: Some("/mnt/data".into()),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn other_in_tree_source_reports_its_type_only() {
    let s = source_of(released("a").iscsi("iqn.2001-04.com.example:storage"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "iscsi".into(),
            ..VolumeSourceInfo::default()
        }
    );
}

#[test]
fn no_source_reports_unknown() {
    let s = source_of(released("a"));
    assert_eq!(
        s,
        VolumeSourceInfo {
            kind: "unknown".into(),
            ..VolumeSourceInfo::default()
        }
    );
}

// ---- Determinism ----

#[test]
fn classifying_twice_gives_equal_findings() {
    let l = lookup()
        .with_class("standard", "Delete")
        .with_claim("mariadb", "mariadb", "uid-2");
    let a = finding(&mariadb_pv().delete(), &l);
    let b = finding(&mariadb_pv().delete(), &l);
    assert_eq!(a, b);
}

#[test]
fn serialized_status_is_byte_identical_across_runs() {
    let l = lookup()
        .with_class("standard", "Retain")
        .with_claim("mariadb", "mariadb", "uid-2");
    let a = serde_json::to_string(&finding(&mariadb_pv().delete(), &l).status).expect("json");
    let b = serde_json::to_string(&finding(&mariadb_pv().delete(), &l).status).expect("json");
    assert_eq!(a, b);
    assert!(
        a.contains(r#""hints":["ReclaimPolicyDelete","ReclaimPolicyMismatch"]"#),
        "{a}"
    );
}

#[test]
fn serialized_status_has_no_nulls() {
    // Server-side apply would take an explicit null as "clear this field".
    let p = pv("a").released().claim_by_name("ns", "c");
    let json =
        serde_json::to_string(&finding(&p, &lookup().claims_forbidden()).status).expect("json");
    assert!(!json.contains("null"), "{json}");
    assert!(!json.contains("phaseSince"), "{json}");
    assert!(!json.contains("storageClass"), "{json}");
}

#[test]
fn serialized_status_round_trips() {
    let status = finding(&mariadb_pv(), &classes()).status;
    let json = serde_json::to_string(&status).expect("json");
    let back: VolumeLeftoverStatus = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, status);
}

#[test]
fn bound_with_a_claim_ref_without_namespace_is_skipped_not_healthy() {
    let p = pv("a").retain().bound().claim("", "c", "uid-1");
    assert_skip(verdict(&p, &lookup()), "lacks a namespace or name");
}

#[test]
fn claim_still_present_says_when_the_claim_is_terminating() {
    let f = finding(
        &released("a"),
        &classes().with_terminating_claim("ns", "c", "uid-1"),
    );
    assert!(
        f.status.message.ends_with("still exists, terminating."),
        "{}",
        f.status.message
    );
    let f = finding(&released("a"), &classes().with_claim("ns", "c", "uid-1"));
    assert!(
        f.status.message.ends_with("still exists."),
        "{}",
        f.status.message
    );
}

#[test]
fn a_volume_reads_the_api_json_ignoring_what_it_does_not_need() {
    let json = serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pvc-1", "uid": "u-1", "annotations": {"a": "b"}},
        "spec": {
            "capacity": {"storage": "20Gi", "other": "1"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "c", "uid": "cu"},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "ceph",
            "mountOptions": ["discard"],
            "nodeAffinity": {"required": {"nodeSelectorTerms": []}},
            "csi": {
                "driver": "rbd.csi.ceph.com",
                "volumeHandle": "h-1",
                "fsType": "ext4",
                "nodeStageSecretRef": {"name": "s", "namespace": "n"},
                "volumeAttributes": {"clusterID": "c", "pool": "p", "imageName": "img"}
            },
            "someFutureField": {"x": 1}
        },
        "status": {"phase": "Released", "lastPhaseTransitionTime": "2026-01-02T03:04:05Z"}
    });
    let v: Volume = serde_json::from_value(json).expect("a PV's JSON reads as a Volume");
    let f = match classify(&v, &classes(), now()) {
        Verdict::Leftover(f) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(f.status.capacity.as_deref(), Some("20Gi"));
    assert_eq!(f.status.source.driver.as_deref(), Some("rbd.csi.ceph.com"));
    assert_eq!(f.status.source.volume_handle.as_deref(), Some("h-1"));
    assert_eq!(f.status.source.pool.as_deref(), Some("p"));
    assert_eq!(f.status.source.image_name.as_deref(), Some("img"));
    assert_eq!(f.status.reclaim_policy, "Delete");
    assert_eq!(
        f.status.phase_since,
        Some(super::fixtures::time("2026-01-02T03:04:05Z"))
    );
}

#[test]
fn a_volume_with_an_in_tree_source_it_does_not_detail_still_names_it() {
    let json = serde_json::json!({
        "metadata": {"name": "old", "uid": "u"},
        "spec": {"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.x", "lun": 0}},
        "status": {"phase": "Released"}
    });
    let v: Volume = serde_json::from_value(json).unwrap();
    match classify(&v, &classes(), now()) {
        Verdict::Leftover(f) => assert_eq!(f.status.source.kind, "iscsi"),
        other => panic!("{other:?}"),
    }
}

// ---- Stale stores: nothing is concluded ----

#[test]
fn a_stale_claim_store_leaves_every_volume_with_a_claim_ref_undecided() {
    let stale = StaleLookup {
        inner: classes(),
        claims: true,
        classes: false,
    };
    for phase in [
        "Released",
        "Bound",
        "Failed",
        "Available",
        "Pending",
        "Lost",
    ] {
        let p = pv("a")
            .retain()
            .phase(phase)
            .class("standard")
            .claim("ns", "c", "uid-1");
        assert_eq!(
            classify(&Volume::from(&p), &stale, now()),
            Verdict::Undecided(Undecided::ClaimStoreStale { volume: "a".into() }),
            "phase {phase}"
        );
    }
}

#[test]
fn a_stale_claim_store_does_not_hold_back_a_volume_without_a_claim_ref() {
    let stale = StaleLookup {
        inner: classes(),
        claims: true,
        classes: false,
    };
    let p = pv("a").retain().released().class("standard");
    match classify(&Volume::from(&p), &stale, now()) {
        Verdict::Leftover(f) => assert_eq!(f.status.reason, Reason::ReleasedWithoutClaim),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_stale_class_store_leaves_a_volume_with_a_class_undecided() {
    let stale = StaleLookup {
        inner: classes(),
        claims: false,
        classes: true,
    };
    assert_eq!(
        classify(&Volume::from(&released("a")), &stale, now()),
        Verdict::Undecided(Undecided::ClassStoreStale { volume: "a".into() })
    );
}

#[test]
fn undecided_volumes_are_logged_with_the_sentences_they_always_had() {
    let volume = || "pv-1".to_string();
    let said = [
        (
            Undecided::ClaimStoreStale { volume: volume() },
            "the claim store is stale; PersistentVolume pv-1 waits until it has resynced",
        ),
        (
            Undecided::ClassStoreStale { volume: volume() },
            "the StorageClass store is stale; PersistentVolume pv-1 waits until it has resynced",
        ),
        (
            Undecided::BoundClaimUnknown { volume: volume() },
            "claims cannot be read; whether the claim of Bound PersistentVolume pv-1 exists is unknown",
        ),
        (
            Undecided::PreboundClaimUnknown { volume: volume() },
            "claims cannot be read; whether the claim PersistentVolume pv-1 is pre-bound to exists is unknown",
        ),
    ];
    for (why, sentence) in said {
        assert_eq!(why.to_string(), sentence);
    }
}

// ---- Terminating volumes and messages that say how long ----

#[test]
fn a_volume_being_deleted_says_so_and_names_what_holds_it() {
    let p = released("a").terminating(now_plus(-60), ["kubernetes.io/pv-protection"]);
    let f = finding(&p, &classes());
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(f.status.hints, vec![Hint::VolumeTerminating]);
    assert!(
        f.status.message.ends_with(
            "It is being deleted since 2026-03-01T11:59:00Z, held by finalizer kubernetes.io/pv-protection."
        ),
        "{}",
        f.status.message
    );
}

#[test]
fn a_delete_policy_finding_says_since_when_it_is_released() {
    let p = released("a").delete().since(released_at());
    let f = finding(&p, &lookup().with_class("standard", "Delete"));
    assert!(
        f.status.message.contains(
            "Its reclaim policy is Delete and it has been Released since 2026-02-27T09:15:00Z: the provisioner's delete hung or failed."
        ),
        "{}",
        f.status.message
    );
}

#[test]
fn the_message_is_the_same_at_any_time() {
    // No "for 12 minutes": the same state gives the same bytes.
    let p = released("a").delete().since(released_at());
    let l = lookup().with_class("standard", "Delete");
    let a = classify(&Volume::from(&p), &l, now());
    let b = classify(&Volume::from(&p), &l, now_plus(86_400));
    match (a, b) {
        (Verdict::Leftover(a), Verdict::Leftover(b)) => {
            assert_eq!(a.status.message, b.status.message)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_raw_storage_class_name_is_kept_for_the_original_tools_key() {
    let p = pv("a").retain().released().class("");
    let f = finding(&p, &lookup());
    assert_eq!(f.storage_class_name.as_deref(), Some(""));
    assert_eq!(f.status.storage_class, None);
}
