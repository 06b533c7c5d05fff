//! `plan::gate` (the grace rule) and `plan::plan` (what to write).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::fixtures::{
    PvBuilder, VlBuilder, finding, lean, lookup, mariadb_finding, mariadb_pv, now, now_plus, pv,
    released_at,
};
use crate::decide::classify::{NOTE_FOUND, NOTE_IN_TRASH, NOTE_NOT_CHECKED, classify};
use crate::decide::plan::{
    Action, ClockStart, Gated, Graces, Observed, desired, gate, grace_of, next_change, plan,
};
use crate::model::crd::{Acknowledgement, ConditionStatus, State};
use crate::model::crd::{Reason, VolumeLeftover};
use crate::model::finding::{Finding, Undecided, Verdict};
use crate::model::image::ImageFound;
use crate::model::labels::{
    LABEL_CLAIM_NAMESPACE, LABEL_REASON, LABEL_STATE, LABEL_STORAGE_CLASS, MANAGED_BY,
    MANAGED_BY_VALUE, is_label_value, is_managed,
};
use crate::model::volume::Volume;

const GRACES: Graces = Graces {
    grace: Duration::from_secs(120),
    delete_grace: Duration::from_secs(600),
    expansion_grace: Duration::from_secs(120),
};

/// A Bound PV whose claim is gone.
fn bound_claim_missing() -> Finding {
    let f = finding(
        &pv("b")
            .retain()
            .bound()
            .since(released_at())
            .claim("ns", "c", "uid-1"),
        &lookup(),
    );
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    f
}

fn leftover(f: &Finding) -> Verdict {
    Verdict::Leftover(Box::new(f.clone()))
}

/// What the operator would have published for `f`, as read back from the API server.
fn published(f: &Finding) -> VolumeLeftover {
    desired(f, None, &now(), &now(), None).stored_as("vl-uid-1")
}

/// The grace clock of `f`'s state, started `seconds_ago`.
fn seen(f: &Finding, seconds_ago: i64) -> Option<Observed> {
    Some(Observed {
        volume_uid: f.volume_uid.clone(),
        reason: f.status.reason,
        since: now_plus(-seconds_ago),
    })
}

#[track_caller]
fn expect_apply(a: Action) -> (VolumeLeftover, bool, bool) {
    match a {
        Action::Apply {
            object,
            meta,
            status,
        } => (*object, meta.is_some(), status),
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[track_caller]
fn expect_create(a: Action) -> VolumeLeftover {
    match a {
        Action::Create { object } => *object,
        other => panic!("expected Create, got {other:?}"),
    }
}

#[track_caller]
fn expect_nothing(a: Action) {
    assert!(matches!(a, Action::Nothing), "expected Nothing, got {a:?}");
}

#[track_caller]
fn expect_now(g: Gated) -> Time {
    match g {
        Gated::Now { first_seen, .. } => first_seen,
        other => panic!("expected Now, got {other:?}"),
    }
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

// ---- gate: which states wait, and how long ----

#[test]
fn retain_findings_of_a_released_volume_need_no_grace() {
    let (grace, clock) = grace_of(&mariadb_finding(), GRACES);
    assert_eq!((grace, clock), (Duration::ZERO, ClockStart::Phase));
}

#[test]
fn a_delete_policy_released_volume_waits_the_delete_grace_from_its_phase_time() {
    let f = finding(&mariadb_pv().delete(), &lookup());
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(600), ClockStart::Phase)
    );
}

#[test]
fn a_delete_policy_failed_volume_waits_the_delete_grace_too() {
    let f = finding(&pv("f").delete().failed().since(released_at()), &lookup());
    assert_eq!(f.status.reason, Reason::ReclaimFailed);
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(600), ClockStart::Phase)
    );
}

#[test]
fn claim_still_present_waits_the_grace_from_its_phase_time() {
    let f = finding(
        &mariadb_pv(),
        &lookup().with_claim("mariadb", "mariadb", "uid-mariadb-1"),
    );
    assert_eq!(f.status.reason, Reason::ClaimStillPresent);
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(120), ClockStart::Phase)
    );
}

#[test]
fn states_the_phase_does_not_date_wait_from_when_they_were_first_seen() {
    // A claimRef cleared by hand long after the volume was Released: the phase's time would
    // start the clock too early and publish the documented reuse as a finding.
    let released_without = finding(&pv("r").retain().released().since(released_at()), &lookup());
    let prebound = finding(
        &pv("p")
            .retain()
            .available()
            .since(released_at())
            .claim_by_name("ns", "c"),
        &lookup(),
    );
    for f in [&released_without, &prebound, &bound_claim_missing()] {
        assert_eq!(
            grace_of(f, GRACES),
            (Duration::from_secs(120), ClockStart::Observed),
            "{:?}",
            f.status.reason
        );
    }
}

#[test]
fn a_delete_policy_bound_volume_whose_claim_is_gone_waits_the_delete_grace() {
    // The PV controller releases it behind a backlog under churn, then the provisioner deletes it.
    let f = finding(
        &pv("b")
            .delete()
            .bound()
            .since(released_at())
            .claim("ns", "c", "u"),
        &lookup(),
    );
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(600), ClockStart::Observed)
    );
}

#[test]
fn a_delete_policy_volume_released_without_claim_waits_the_longer_grace() {
    let f = finding(&pv("r").delete().released().since(released_at()), &lookup());
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(600), ClockStart::Observed)
    );
}

#[test]
fn without_a_phase_transition_time_every_clock_starts_when_first_seen() {
    let f = finding(&mariadb_pv().delete().no_status().released(), &lookup());
    assert_eq!(f.status.phase_since, None);
    assert_eq!(
        grace_of(&f, GRACES),
        (Duration::from_secs(600), ClockStart::Observed)
    );
}

// ---- gate: the clock ----

#[test]
fn gate_publishes_a_retain_finding_at_once_dated_by_its_phase_time() {
    let mut clock = None;
    let first = expect_now(gate(
        leftover(&mariadb_finding()),
        None,
        &mut clock,
        &now(),
        GRACES,
    ));
    assert_eq!(
        first,
        released_at(),
        "firstSeen is when the volume was Released"
    );
}

#[test]
fn gate_holds_a_delete_policy_finding_for_the_rest_of_the_delete_grace() {
    let f = finding(&mariadb_pv().delete().since(now_plus(-60)), &lookup());
    let mut clock = None;
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(540)));
}

#[test]
fn gate_publishes_a_delete_policy_finding_after_the_delete_grace_dated_by_phase_time_plus_grace() {
    let f = finding(&mariadb_pv().delete().since(now_plus(-601)), &lookup());
    let mut clock = None;
    let first = expect_now(gate(leftover(&f), None, &mut clock, &now(), GRACES));
    assert_eq!(
        first,
        now_plus(-1),
        "the moment the grace ended, the same after any restart"
    );
}

#[test]
fn gate_holds_bound_claim_missing_back_for_the_rest_of_the_grace() {
    let f = bound_claim_missing();
    let mut clock = seen(&f, 30);
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(90)));
}

#[test]
fn gate_holds_a_first_sighting_back_for_the_whole_grace_and_starts_the_clock() {
    let f = bound_claim_missing();
    let mut clock = None;
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
    assert_eq!(clock, seen(&f, 0));
}

#[test]
fn gate_ignores_the_phase_time_for_a_state_the_phase_does_not_date() {
    // Bound for a month; the claim vanished just now.
    let f = bound_claim_missing();
    assert!(f.status.phase_since.is_some());
    let mut clock = None;
    assert!(matches!(
        gate(leftover(&f), None, &mut clock, &now(), GRACES),
        Gated::Later(_)
    ));
}

#[test]
fn gate_restarts_the_clock_when_the_reason_changes() {
    let f = bound_claim_missing();
    let mut clock = Some(Observed {
        volume_uid: f.volume_uid.clone(),
        reason: Reason::ReleasedWithoutClaim,
        since: now_plus(-3600),
    });
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_restarts_the_clock_for_a_new_volume_of_the_same_name() {
    let f = bound_claim_missing();
    let mut clock = Some(Observed {
        volume_uid: "an-older-volume".into(),
        reason: f.status.reason,
        since: now_plus(-3600),
    });
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_publishes_bound_claim_missing_exactly_at_the_grace() {
    let f = bound_claim_missing();
    let mut clock = seen(&f, 120);
    let first = expect_now(gate(leftover(&f), None, &mut clock, &now(), GRACES));
    assert_eq!(first, now(), "dated when published");
}

#[test]
fn gate_with_zero_grace_publishes_at_once() {
    let f = bound_claim_missing();
    let zero = Graces {
        grace: Duration::ZERO,
        delete_grace: Duration::ZERO,
        expansion_grace: Duration::ZERO,
    };
    let mut clock = None;
    expect_now(gate(leftover(&f), None, &mut clock, &now(), zero));
}

#[test]
fn gate_treats_a_clock_from_the_future_as_just_started() {
    let f = bound_claim_missing();
    let mut clock = seen(&f, -30);
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_treats_a_phase_time_from_the_future_as_just_started() {
    let f = finding(&mariadb_pv().delete().since(now_plus(3600)), &lookup());
    let mut clock = None;
    let g = gate(leftover(&f), None, &mut clock, &now(), GRACES);
    assert_eq!(g, Gated::Later(Duration::from_secs(600)));
}

#[test]
fn gate_publishes_at_once_what_is_already_published_with_that_reason() {
    // A restart never retracts a published finding.
    let f = bound_claim_missing();
    let existing = published(&f);
    let mut clock = None;
    expect_now(gate(
        leftover(&f),
        Some(&lean(&existing)),
        &mut clock,
        &now(),
        GRACES,
    ));
}

#[test]
fn gate_holds_back_when_the_published_object_has_another_reason() {
    // The published ClaimDeleted stays as it is while the new state is in its grace.
    let f = bound_claim_missing();
    let existing = published(&mariadb_finding());
    let mut clock = seen(&f, 10);
    let g = gate(
        leftover(&f),
        Some(&lean(&existing)),
        &mut clock,
        &now(),
        GRACES,
    );
    assert_eq!(g, Gated::Later(Duration::from_secs(110)));
}

#[test]
fn gate_ignores_a_foreign_object_that_says_bound_claim_missing() {
    let f = bound_claim_missing();
    let foreign = published(&f).without_label(MANAGED_BY);
    let mut clock = None;
    let g = gate(
        leftover(&f),
        Some(&lean(&foreign)),
        &mut clock,
        &now(),
        GRACES,
    );
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_holds_back_when_the_published_object_is_for_an_older_pv_of_that_name() {
    let f = bound_claim_missing();
    let mut existing = published(&f);
    existing.spec.volume_uid = "uid-of-a-deleted-pv".into();
    let mut clock = None;
    let g = gate(
        leftover(&f),
        Some(&lean(&existing)),
        &mut clock,
        &now(),
        GRACES,
    );
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_passes_healthy_undecided_and_skip_through_and_stops_the_clock() {
    for v in [
        Verdict::Healthy,
        Verdict::Skip("odd".into()),
        Verdict::Undecided(Undecided::ClaimStoreStale { volume: "a".into() }),
    ] {
        let mut clock = seen(&bound_claim_missing(), 30);
        match gate(v.clone(), None, &mut clock, &now(), GRACES) {
            Gated::Now { verdict, .. } => assert_eq!(verdict, v),
            other => panic!("{other:?}"),
        }
        assert_eq!(clock, None);
    }
}

// ---- plan: applying ----

#[test]
fn finding_with_nothing_published_is_created() {
    let f = mariadb_finding();
    let object = expect_create(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        None,
        &now(),
        &now(),
        None,
    ));
    let want = desired(&f, None, &now(), &now(), None);
    assert_eq!(object.metadata, want.metadata);
    assert_eq!(object.spec, want.spec);
    assert_eq!(object.status, want.status);
}

#[test]
fn finding_already_published_the_same_needs_nothing() {
    let f = mariadb_finding();
    let existing = published(&f);
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
}

#[test]
fn published_object_read_back_as_json_needs_nothing() {
    // What the reflector hands back went through JSON: times and optional fields must survive.
    let f = mariadb_finding();
    let json = serde_json::to_string(&published(&f)).expect("json");
    let existing: VolumeLeftover = serde_json::from_str(&json).expect("parse");
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
}

#[test]
fn only_a_status_change_applies_status_only() {
    let before = mariadb_finding();
    let existing = published(&before);
    let mut after = before.clone();
    after.status.capacity = Some("500Mi".into());
    let (object, meta, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&after)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(!meta);
    assert!(status);
    let s = object.status.expect("status");
    assert_eq!(s.capacity.as_deref(), Some("500Mi"));
}

#[test]
fn a_new_reason_changes_the_reason_label_and_the_status() {
    let existing = published(&mariadb_finding());
    let recreated = finding(
        &mariadb_pv(),
        &lookup()
            .with_class("standard", "Retain")
            .with_claim("mariadb", "mariadb", "uid-2"),
    );
    let (object, meta, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&recreated)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(meta && status);
    assert_eq!(
        object.metadata.labels.expect("labels").get(LABEL_REASON),
        Some(&"ClaimRecreated".to_string())
    );
}

#[test]
fn a_hand_edited_reason_label_is_reverted() {
    let f = mariadb_finding();
    let existing = published(&f).label(LABEL_REASON, "ClaimRecreated");
    let (object, meta, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(meta);
    assert!(!status);
    assert_eq!(
        object.metadata.labels.expect("labels").get(LABEL_REASON),
        Some(&"ClaimDeleted".to_string())
    );
}

#[test]
fn a_removed_label_of_ours_is_restored() {
    let f = mariadb_finding();
    for key in [LABEL_REASON, LABEL_CLAIM_NAMESPACE, LABEL_STORAGE_CLASS] {
        let existing = published(&f).without_label(key);
        let (_, meta, status) = expect_apply(plan(
            "mariadb-pv",
            Some(&leftover(&f)),
            Some(&lean(&existing)),
            &now(),
            &now(),
            None,
        ));
        assert!(meta, "removing {key} must be reverted");
        assert!(!status, "{key}");
    }
}

#[test]
fn a_label_of_ours_that_no_longer_applies_is_removed_by_the_patch() {
    // The class is now unnamed: the merge patch sets the storage-class label to null.
    let mut f = mariadb_finding();
    let existing = published(&f);
    f.status.storage_class = None;
    match plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Apply { meta: Some(p), .. } => {
            assert_eq!(
                p["metadata"]["labels"][LABEL_STORAGE_CLASS],
                serde_json::Value::Null
            );
            assert!(
                p["metadata"]["labels"].get(LABEL_REASON).is_none(),
                "only what changes"
            );
            assert!(p.get("spec").is_none(), "the spec is not mentioned: {p}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_metadata_patch_never_mentions_the_acknowledgement_or_someone_elses_label() {
    let f = mariadb_finding();
    let mut existing = published(&f).label("team", "storage");
    existing.spec.acknowledgement = Some(ack("OPS-1", None));
    existing.spec.volume_uid = "an-older-pv".into();
    match plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Apply { meta: Some(p), .. } => {
            let spec = p["spec"].as_object().expect("spec");
            assert_eq!(
                spec.keys().collect::<Vec<_>>(),
                ["volumeName", "volumeUID"],
                "{p}"
            );
            assert!(p["metadata"]["labels"].get("team").is_none(), "{p}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_apply_carries_the_resource_version_it_was_decided_on() {
    let f = mariadb_finding();
    let existing = published(&f).label(LABEL_REASON, "Edited");
    match plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Apply { meta: Some(p), .. } => {
            assert_eq!(p["metadata"]["resourceVersion"], "1001");
            assert_eq!(p["metadata"]["labels"][LABEL_REASON], "ClaimDeleted");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_foreign_label_added_by_someone_else_is_not_ours_to_change() {
    let f = mariadb_finding();
    let existing = published(&f).label("team", "storage");
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
}

#[test]
fn an_extra_owner_reference_added_by_someone_else_is_not_ours_to_change() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    existing
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new)
        .push(OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "audit".into(),
            uid: "cm-uid".into(),
            ..OwnerReference::default()
        });
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
}

#[test]
fn an_owner_reference_to_the_pv_left_by_an_earlier_version_is_removed_and_the_others_kept() {
    // It would let the garbage collector delete the finding with its volume: a Retain volume's
    // tombstone must outlive it.
    let f = mariadb_finding();
    let mut existing = published(&f);
    let audit = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "audit".into(),
        uid: "cm-uid".into(),
        ..OwnerReference::default()
    };
    existing.metadata.owner_references = Some(vec![
        OwnerReference {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            name: "mariadb-pv".into(),
            uid: "pv-uid-mariadb-pv".into(),
            ..OwnerReference::default()
        },
        audit.clone(),
    ]);
    match plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Apply {
            meta: Some(patch),
            status: false,
            ..
        } => {
            assert_eq!(
                patch["metadata"]["ownerReferences"],
                serde_json::json!([audit])
            );
            assert!(patch["metadata"].get("labels").is_none(), "{patch}");
            assert!(patch.get("spec").is_none(), "{patch}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hand_edited_spec_is_reverted() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    // The hand edit of the spec makes generation 2.
    existing.spec.volume_uid = "someone-else".into();
    existing.metadata.generation = Some(2);
    let (object, meta, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(meta);
    assert_eq!(object.spec.volume_uid, "pv-uid-mariadb-pv");
    // The revert makes generation 3; the status says it observed that one, in the same action.
    assert!(status);
    assert_eq!(object.status.unwrap().observed_generation, Some(3));
}

#[test]
fn a_hand_edited_status_is_reverted() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    existing.status.as_mut().expect("status").message = "all fine".into();
    let (_, meta, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(!meta);
    assert!(status);
}

#[test]
fn first_seen_is_kept_from_the_published_object() {
    let first = mariadb_finding();
    let existing = published(&first);
    let later = match classify(
        &Volume::from(&mariadb_pv()),
        &lookup().with_class("standard", "Retain"),
        now_plus(3600),
    ) {
        Verdict::Leftover(f) => *f,
        other => panic!("{other:?}"),
    };
    assert_eq!(later.status.first_seen, now_plus(3600));
    assert_eq!(
        desired(&later, Some(&lean(&existing)), &now(), &now(), None)
            .status
            .expect("status")
            .first_seen,
        now()
    );
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&later)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
}

#[test]
fn first_seen_is_kept_when_the_finding_changes() {
    let existing = published(&mariadb_finding());
    let mut later = mariadb_finding();
    later.status.first_seen = now_plus(600);
    later.status.reason = Reason::ClaimRecreated;
    let (object, _, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&later)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(status);
    assert_eq!(object.status.expect("status").first_seen, now());
}

/// The mariadb PV deleted and re-created under the same name, classified an hour later.
fn mariadb_recreated_later() -> Finding {
    match classify(
        &Volume::from(&mariadb_pv().uid("pv-uid-new")),
        &lookup().with_class("standard", "Retain"),
        now_plus(3600),
    ) {
        Verdict::Leftover(f) => *f,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pv_recreated_under_the_same_name_updates_spec() {
    let existing = published(&mariadb_finding());
    let again = mariadb_recreated_later();
    let (object, meta, _) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&again)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert!(meta);
    assert_eq!(object.spec.volume_uid, "pv-uid-new");
    assert_eq!(object.metadata.owner_references, None);
    // The spec is written first and makes the next generation: the status says it observed
    // that one, so Argo CD and kstatus do not see a stale status until a second write.
    let generation = existing.metadata.generation.expect("stored") + 1;
    let s = object.status.expect("status");
    assert_eq!(s.observed_generation, Some(generation));
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(generation)),
        "{:?}",
        s.conditions
    );
    // Once written, the same decision is nothing more.
    let mut written = existing.clone();
    written.spec.volume_uid = "pv-uid-new".into();
    written.metadata.generation = Some(generation);
    let again_planned = plan(
        "mariadb-pv",
        Some(&leftover(&again)),
        Some(&lean(&written)),
        &now(),
        &now(),
        None,
    );
    let (o, meta, _) = expect_apply(again_planned);
    assert!(!meta);
    assert_eq!(o.status.unwrap().observed_generation, Some(generation));
}

#[test]
fn a_pv_recreated_under_the_same_name_is_a_new_finding_with_its_own_first_seen() {
    // Another volume (another uid) did not exist when the old finding was first seen.
    let existing = published(&mariadb_finding());
    let again = mariadb_recreated_later();
    let (object, _, status) = expect_apply(plan(
        "mariadb-pv",
        Some(&leftover(&again)),
        Some(&lean(&existing)),
        &now_plus(3600),
        &now(),
        None,
    ));
    assert!(status);
    assert_eq!(object.status.expect("status").first_seen, now_plus(3600));
}

#[test]
fn the_wall_clock_has_whole_seconds_so_first_seen_compares_equal_after_a_round_trip() {
    // `Time` serialises to seconds; a sub-second firstSeen would differ on every re-plan.
    let t = crate::engine::clock::wall_clock();
    assert_eq!(t.0.subsec_nanosecond(), 0);
    let back: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(serde_json::to_value(&t).expect("json")).expect("parse");
    assert_eq!(back, t);
}

// ---- plan: deleting and leaving alone ----

#[test]
fn healthy_with_a_published_object_deletes_it_by_uid() {
    let existing = published(&mariadb_finding());
    match plan(
        "mariadb-pv",
        Some(&Verdict::Healthy),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Delete { name, uid } => {
            assert_eq!(name, "mariadb-pv");
            assert_eq!(uid.as_deref(), Some("vl-uid-1"));
        }
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[test]
fn a_vanished_pv_with_a_published_object_deletes_it_by_uid() {
    let existing = published(&mariadb_finding());
    match plan(
        "mariadb-pv",
        None,
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ) {
        Action::Delete { name, uid } => {
            assert_eq!(name, "mariadb-pv");
            assert_eq!(uid.as_deref(), Some("vl-uid-1"));
        }
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[test]
fn healthy_with_nothing_published_needs_nothing() {
    expect_nothing(plan(
        "a",
        Some(&Verdict::Healthy),
        None,
        &now(),
        &now(),
        None,
    ));
    expect_nothing(plan("a", None, None, &now(), &now(), None));
}

#[test]
fn skip_keeps_what_was_published() {
    let existing = published(&mariadb_finding());
    for v in [
        Verdict::Skip("odd".into()),
        Verdict::Undecided(Undecided::ClaimStoreStale { volume: "a".into() }),
    ] {
        expect_nothing(plan(
            "mariadb-pv",
            Some(&v),
            Some(&lean(&existing)),
            &now(),
            &now(),
            None,
        ));
        expect_nothing(plan("mariadb-pv", Some(&v), None, &now(), &now(), None));
    }
}

#[test]
fn a_finding_over_an_unmanaged_object_is_foreign() {
    let f = mariadb_finding();
    let foreign = published(&f).without_label(MANAGED_BY);
    match plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&foreign)),
        &now(),
        &now(),
        None,
    ) {
        Action::Foreign { name } => assert_eq!(name, "mariadb-pv"),
        other => panic!("expected Foreign, got {other:?}"),
    }
}

#[test]
fn an_object_managed_by_someone_else_is_foreign() {
    let f = mariadb_finding();
    let foreign = published(&f).label(MANAGED_BY, "helm");
    assert!(!is_managed(&foreign));
    assert!(matches!(
        plan(
            "mariadb-pv",
            Some(&leftover(&f)),
            Some(&lean(&foreign)),
            &now(),
            &now(),
            None
        ),
        Action::Foreign { .. }
    ));
}

#[test]
fn an_unmanaged_object_is_never_deleted() {
    let foreign = published(&mariadb_finding()).without_label(MANAGED_BY);
    expect_nothing(plan(
        "mariadb-pv",
        Some(&Verdict::Healthy),
        Some(&lean(&foreign)),
        &now(),
        &now(),
        None,
    ));
    expect_nothing(plan(
        "mariadb-pv",
        None,
        Some(&lean(&foreign)),
        &now(),
        &now(),
        None,
    ));
    expect_nothing(plan(
        "mariadb-pv",
        Some(&Verdict::Skip("odd".into())),
        Some(&lean(&foreign)),
        &now(),
        &now(),
        None,
    ));
}

// ---- desired object ----

#[test]
fn desired_object_is_named_after_the_pv_and_names_it_in_its_spec() {
    let o = desired(&mariadb_finding(), None, &now(), &now(), None);
    assert_eq!(o.metadata.name.as_deref(), Some("mariadb-pv"));
    assert_eq!(o.spec.volume_name, "mariadb-pv");
    assert_eq!(o.spec.volume_uid, "pv-uid-mariadb-pv");
    assert_eq!(o.spec.acknowledgement, None);
    let s = o.status.expect("status");
    assert_eq!(s.reason, mariadb_finding().status.reason);
    assert_eq!(s.state, State::Open);
    assert_eq!(
        s.observed_generation,
        Some(1),
        "a create makes generation 1"
    );
    assert_eq!(o.metadata.namespace, None, "cluster-scoped");
}

#[test]
fn desired_object_has_its_labels() {
    let o = desired(&mariadb_finding(), None, &now(), &now(), None);
    assert!(is_managed(&o));
    let expected: BTreeMap<String, String> = [
        (MANAGED_BY, MANAGED_BY_VALUE),
        (LABEL_REASON, "ClaimDeleted"),
        (LABEL_STATE, "Open"),
        (LABEL_CLAIM_NAMESPACE, "mariadb"),
        (LABEL_STORAGE_CLASS, "standard"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(o.metadata.labels, Some(expected));
}

#[test]
fn each_hint_is_a_label_to_select_on() {
    let f = finding(
        &mariadb_pv().delete(),
        &lookup().with_class("standard", "Retain"),
    );
    let labels = desired(&f, None, &now(), &now(), None)
        .metadata
        .labels
        .expect("labels");
    assert_eq!(
        labels
            .get("hint.leftovers.dev/ReclaimPolicyDelete")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels
            .get("hint.leftovers.dev/ReclaimPolicyMismatch")
            .map(String::as_str),
        Some("true")
    );
}

#[test]
fn desired_object_without_claim_or_class_has_no_claim_or_class_label() {
    let f = finding(&pv("a").retain().released(), &lookup());
    let labels = desired(&f, None, &now(), &now(), None)
        .metadata
        .labels
        .expect("labels");
    assert_eq!(
        labels.keys().map(String::as_str).collect::<Vec<_>>(),
        vec![MANAGED_BY, LABEL_REASON, LABEL_STATE]
    );
}

#[test]
fn a_class_name_too_long_for_a_label_gets_no_label() {
    let long = "c".repeat(70);
    let f = finding(&pv("a").retain().released().class(&long), &lookup());
    assert_eq!(f.status.storage_class.as_ref().expect("class").name, long);
    let labels = desired(&f, None, &now(), &now(), None)
        .metadata
        .labels
        .expect("labels");
    assert!(!labels.contains_key(LABEL_STORAGE_CLASS), "{labels:?}");
}

#[test]
fn an_invalid_class_name_gets_no_label() {
    for bad in ["-fast", "fast.", "fast/ssd"] {
        let f = finding(&pv("a").retain().released().class(bad), &lookup());
        let labels = desired(&f, None, &now(), &now(), None)
            .metadata
            .labels
            .expect("labels");
        assert!(
            !labels.contains_key(LABEL_STORAGE_CLASS),
            "{bad}: {labels:?}"
        );
    }
}

#[test]
fn desired_object_has_no_owner_reference() {
    // Findings are not garbage-collected with their volume: a tombstone must outlive it, and
    // the sweep deletes the rest.
    let o = desired(&mariadb_finding(), None, &now(), &now(), None);
    assert_eq!(o.metadata.owner_references, None);
}

#[test]
fn desired_object_serialises_the_api_version_and_kind() {
    let v = serde_json::to_value(desired(&mariadb_finding(), None, &now(), &now(), None))
        .expect("json");
    assert_eq!(v["apiVersion"], "leftovers.dev/v1alpha1");
    assert_eq!(v["kind"], "VolumeLeftover");
    assert!(
        v["metadata"]["ownerReferences"][0]
            .get("blockOwnerDeletion")
            .is_none()
    );
}

// ---- is_label_value ----

#[test]
fn label_values_that_are_valid() {
    for ok in [
        "a",
        "A",
        "0",
        "standard",
        "fast-ssd",
        "a_b.c-d",
        "csi.ceph.rbd",
        &"x".repeat(63),
    ] {
        assert!(is_label_value(ok), "{ok:?} is a valid label value");
    }
}

#[test]
fn label_values_that_are_invalid() {
    for bad in [
        "",
        &"x".repeat(64),
        "-a",
        "a-",
        "_a",
        "a_",
        ".a",
        "a.",
        "a/b",
        "a b",
        "a:b",
        "é",
        "a\n",
    ] {
        assert!(!is_label_value(bad), "{bad:?} is not a valid label value");
    }
}

// ---- acknowledgement and state ----

fn ack(ticket: &str, until: Option<Time>) -> Acknowledgement {
    Acknowledgement {
        by: Some("alice".into()),
        reason: Some("kept for the migration".into()),
        ticket: Some(ticket.into()),
        until,
    }
}

/// The published object, acknowledged by someone else (their write bumps the generation).
fn acknowledged(f: &Finding, a: Acknowledgement) -> VolumeLeftover {
    let mut o = published(f);
    o.spec.acknowledgement = Some(a);
    o.metadata.generation = Some(2);
    o
}

fn status_of(a: Action) -> crate::model::crd::VolumeLeftoverStatus {
    match a {
        Action::Apply {
            object,
            meta,
            status,
        } => {
            assert!(status, "a status write");
            if let Some(p) = &meta {
                assert!(p.get("spec").is_none(), "the spec is someone else's: {p}");
            }
            object.status.expect("status")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_acknowledgement_is_recorded_with_what_it_covers_and_the_state_turns_acknowledged() {
    let f = mariadb_finding();
    let existing = acknowledged(&f, ack("OPS-123", None));
    let s = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert_eq!(s.state, State::Acknowledged);
    assert_eq!(s.observed_generation, Some(2));
    let covered = s.acknowledged.expect("covered");
    assert_eq!(covered.reason, Reason::ClaimDeleted);
    assert_eq!(covered.volume_uid, f.volume_uid);
    let types: Vec<(&str, &str)> = s
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(types, [("Acknowledged", "True"), ("Open", "False")]);
    assert!(s.conditions[0].message.contains("OPS-123"));
    assert!(
        s.conditions
            .iter()
            .all(|c| c.observed_generation == Some(2))
    );
}

#[test]
fn once_recorded_an_acknowledgement_writes_nothing_more() {
    let f = mariadb_finding();
    let mut existing = acknowledged(&f, ack("OPS-123", None));
    let s = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    existing.status = Some(s);
    existing
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(LABEL_STATE.into(), "Acknowledged".into());
    expect_nothing(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now_plus(60),
        &now_plus(60),
        None,
    ));
}

#[test]
fn a_finding_that_changes_reason_is_no_longer_what_was_acknowledged() {
    let f = mariadb_finding();
    let mut existing = acknowledged(&f, ack("OPS-123", None));
    existing.status = Some(status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    )));
    let recreated = finding(
        &mariadb_pv(),
        &lookup()
            .with_class("standard", "Retain")
            .with_claim("mariadb", "mariadb", "uid-new"),
    );
    assert_eq!(recreated.status.reason, Reason::ClaimRecreated);
    let s = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&recreated)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert_eq!(s.state, State::Superseded);
    assert_eq!(
        s.acknowledged.expect("covered").reason,
        Reason::ClaimDeleted
    );
    assert!(
        s.conditions
            .iter()
            .any(|c| c.type_ == "Open" && c.status == ConditionStatus::True)
    );
}

#[test]
fn editing_the_acknowledgement_acknowledges_the_finding_as_it_is_now() {
    let f = mariadb_finding();
    let mut existing = acknowledged(&f, ack("OPS-123", None));
    existing.status = Some(status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    )));
    let recreated = finding(
        &mariadb_pv(),
        &lookup()
            .with_class("standard", "Retain")
            .with_claim("mariadb", "mariadb", "uid-new"),
    );
    existing.spec.acknowledgement = Some(ack("OPS-124", None));
    let s = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&recreated)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert_eq!(s.state, State::Acknowledged);
    assert_eq!(
        s.acknowledged.expect("covered").reason,
        Reason::ClaimRecreated
    );
}

#[test]
fn an_acknowledgement_expires_at_its_until_and_says_when_to_look_again() {
    let f = mariadb_finding();
    let existing = acknowledged(&f, ack("OPS-123", Some(now_plus(3600))));
    assert_eq!(
        next_change(Some(&lean(&existing)), &now()),
        Some(Duration::from_secs(3600))
    );
    let before = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now(),
        &now(),
        None,
    ));
    assert_eq!(before.state, State::Acknowledged);
    let after = status_of(plan(
        "mariadb-pv",
        Some(&leftover(&f)),
        Some(&lean(&existing)),
        &now_plus(3600),
        &now_plus(3600),
        None,
    ));
    assert_eq!(after.state, State::Expired);
    assert_eq!(next_change(Some(&lean(&existing)), &now_plus(3600)), None);
}

#[test]
fn a_condition_keeps_its_transition_time_while_its_status_holds() {
    let f = mariadb_finding();
    let first = desired(&f, None, &now(), &now(), None);
    let mut existing = first.clone().stored_as("vl-uid-1");
    existing.status = first.status.clone();
    let later = desired(&f, Some(&lean(&existing)), &now(), &now_plus(600), None);
    assert_eq!(
        later.status, first.status,
        "nothing changed: the same bytes"
    );
}

// ---- Volumes that are gone: tombstones ----

use crate::decide::classify::tombstone;
use crate::decide::plan::{gone, tombstone_expires};
use crate::model::crd::Subject;
use crate::model::finding::leaves_a_disk;
use crate::model::phase::{Phase, ReclaimPolicy};

/// The mariadb PV as the watch's Delete event shows it: deletion requested an hour before now.
fn mariadb_deleted() -> Finding {
    let pv = mariadb_pv().terminating(now_plus(-3600), []);
    tombstone(
        &Volume::from(&pv),
        &lookup().with_class("standard", "Retain"),
        now(),
    )
    .expect("a Retain volume's delete leaves its disk")
}

/// What the API server stores after `action` (a create or an apply).
#[track_caller]
fn stored(action: Action) -> VolumeLeftover {
    match action {
        Action::Create { object } | Action::Apply { object, .. } => {
            let mut o = (*object).stored_as("vl-uid-1");
            // The server keeps the acknowledgement a person wrote; apply never sends it.
            o.metadata.generation = Some(1);
            o
        }
        other => panic!("expected a write, got {other:?}"),
    }
}

#[test]
fn only_a_delete_that_leaves_the_disk_makes_a_tombstone() {
    let leaves =
        |policy: &str, phase: &str| leaves_a_disk(ReclaimPolicy::of(policy), Phase::of(phase));
    assert!(leaves("Retain", "Released"));
    assert!(leaves("Retain", "Available"));
    assert!(
        leaves("Recycle", "Released"),
        "recycling scrubs, never deletes"
    );
    assert!(leaves("Delete", "Failed"), "its delete had failed");
    assert!(!leaves("Delete", "Released"), "a normal dynamic delete");
    assert!(!leaves("Delete", "Bound"));
    // What Kubernetes does not define deletes nothing.
    assert!(leaves("Archive", "Released"));
    assert!(leaves("", "Released"));
    assert!(!leaves("Delete", ""));
    let deleting = pv("d").delete().released().terminating(now(), []);
    assert_eq!(tombstone(&Volume::from(&deleting), &lookup(), now()), None);
}

#[test]
fn a_watched_delete_of_a_retain_volume_creates_its_tombstone_dated_by_the_delete() {
    let t = mariadb_deleted();
    let o = expect_create(gone(
        "mariadb-pv",
        Some(&t),
        None,
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    let s = o.status.expect("status");
    assert_eq!(s.reason, Reason::VolumeDeleted);
    assert_eq!(s.subject, Subject::Disk);
    assert_eq!(s.deleted_at, Some(now_plus(-3600)));
    assert_eq!(s.first_seen, now_plus(-3600));
    assert_eq!(s.state, State::Open);
    assert!(
        s.message.contains("RBD image replicapool/csi-vol-mariadb")
            && s.message.contains("claim mariadb/mariadb")
            && s.message
                .ends_with("Not checked against the storage backend."),
        "{}",
        s.message
    );
    assert!(
        !s.hints
            .contains(&crate::model::crd::Hint::VolumeTerminating)
    );
    // Everything the PV said is kept: the record of the disk.
    assert_eq!(
        s.source.volume_handle.as_deref(),
        Some("0001-0009-rook-ceph-0000000000000002-mariadb")
    );
    assert_eq!(s.capacity_bytes, Some(250 * 1024 * 1024));
    assert_eq!(
        s.claim.expect("claim").uid.as_deref(),
        Some("uid-mariadb-1")
    );
    assert_eq!(o.spec.volume_uid, "pv-uid-mariadb-pv");
    assert_eq!(
        o.metadata.labels.expect("labels")[LABEL_REASON],
        "VolumeDeleted"
    );
}

#[test]
fn a_watched_delete_turns_the_published_finding_into_the_tombstone_keeping_first_seen() {
    let existing = published(&mariadb_finding());
    let first_seen = existing.status.as_ref().expect("status").first_seen.clone();
    let (o, _, status) = expect_apply(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        Some(&lean(&existing)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    assert!(status);
    let s = o.status.expect("status");
    assert_eq!(s.reason, Reason::VolumeDeleted);
    assert_eq!(s.first_seen, first_seen);
}

#[test]
fn a_volume_a_relist_no_longer_finds_becomes_the_same_tombstone_as_its_published_finding() {
    // The store's last object of a volume that vanished in a watch gap makes the tombstone the
    // published finding's facts would have made (they are no longer kept once the volume is
    // seen): same facts, same message.
    let pv = Volume::from(&mariadb_pv());
    let lookup = lookup().with_class("standard", "Retain");
    let t = crate::decide::classify::tombstone_unwatched(&pv, &lookup, now()).expect("a tombstone");
    let existing = published(&mariadb_finding());
    let from_facts = tombstone_of_published(&existing);
    assert_eq!(t.status.reason, Reason::VolumeDeleted);
    assert_eq!(t.status.deleted_at, Some(now()));
    assert_eq!(t.status.message, from_facts.status.message);
    assert!(
        t.status
            .message
            .contains("while the operator was not watching")
    );
    assert_eq!(t.status.source, from_facts.status.source);
    assert_eq!(t.status.claim, from_facts.status.claim);
    // A volume whose delete takes its disk leaves none.
    let delete = Volume::from(&pv_named_delete());
    assert_eq!(
        crate::decide::classify::tombstone_unwatched(&delete, &lookup, now()),
        None
    );
}

#[test]
fn a_tombstone_whose_subject_has_its_old_name_is_written_again_once() {
    // Its conditions name no old word (their reason is VolumeDeleted), so only the note that an
    // old name was read tells the plan the object differs from what it would write.
    use crate::model::leftover::{Keep, Leftover, LeftoverObject};
    let existing = published(&mariadb_finding());
    let (o, _, _) = expect_apply(gone(
        "mariadb-pv",
        None,
        Some(&lean(&existing)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    let back = stored(Action::Apply {
        object: Box::new(o),
        meta: None,
        status: true,
    });
    let text = serde_json::to_string(&back).unwrap();
    let old_text = text.replace("\"subject\":\"Disk\"", "\"subject\":\"Image\"");
    assert_ne!(old_text, text);
    let read = |json: &str| {
        Leftover::read(
            serde_json::from_str::<LeftoverObject>(json).unwrap(),
            Keep::default(),
        )
    };
    let later = now_plus(60);
    let again = |existing: &Leftover| {
        gone(
            "mariadb-pv",
            None,
            Some(existing),
            &later,
            None,
            &ImageFound::NotCensused,
            None,
        )
    };
    expect_nothing(again(&read(&text)));
    let (o, meta, status) = expect_apply(again(&read(&old_text)));
    assert!(status && !meta, "the status alone is written");
    assert_eq!(
        o.status.as_ref().map(|s| s.subject),
        Some(crate::model::crd::Subject::Disk)
    );
    assert_eq!(
        serde_json::to_string(&o.status).unwrap(),
        serde_json::to_string(&back.status).unwrap()
    );
}

fn pv_named_delete() -> k8s_openapi::api::core::v1::PersistentVolume {
    pv("d").delete().released().claim("ns", "c", "u")
}

/// The tombstone a published finding's facts make when its volume vanished unwatched.
fn tombstone_of_published(existing: &VolumeLeftover) -> Finding {
    crate::decide::classify::tombstone_of(
        existing.status.as_ref().expect("status"),
        &existing.spec.volume_name,
        &existing.spec.volume_uid,
        &now(),
    )
    .expect("a tombstone")
}

#[test]
fn a_finding_of_a_retain_volume_deleted_while_nothing_watched_becomes_its_tombstone() {
    let existing = published(&mariadb_finding());
    let (o, _, _) = expect_apply(gone(
        "mariadb-pv",
        None,
        Some(&lean(&existing)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    let s = o.status.as_ref().expect("status");
    assert_eq!(s.reason, Reason::VolumeDeleted);
    assert_eq!(s.deleted_at, Some(now()));
    assert!(
        s.message.contains("while the operator was not watching"),
        "{}",
        s.message
    );
    // The lean form keeps the facts: exactly the tombstone the whole object makes.
    let whole = tombstone_of_published(&existing);
    assert_eq!(
        serde_json::to_value(&o).expect("json"),
        serde_json::to_value(desired(
            &whole,
            Some(&lean(&existing)),
            &now(),
            &now(),
            None
        ))
        .expect("json")
    );
    // Read back, it stays as it is, at any later time (a restart, a resync).
    let back = stored(Action::Apply {
        object: Box::new(o),
        meta: None,
        status: true,
    });
    expect_nothing(gone(
        "mariadb-pv",
        None,
        Some(&lean(&back)),
        &now_plus(86400),
        None,
        &ImageFound::NotCensused,
        None,
    ));
}

#[test]
fn a_finding_of_a_delete_policy_volume_that_is_gone_is_deleted() {
    let mut existing = published(&mariadb_finding());
    existing.status.as_mut().expect("status").reclaim_policy = "Delete".into();
    expect_delete(gone(
        "mariadb-pv",
        None,
        Some(&lean(&existing)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
}

#[test]
fn nothing_is_invented_for_a_volume_never_seen() {
    expect_nothing(gone(
        "mariadb-pv",
        None,
        None,
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
}

#[test]
fn a_tombstone_stays_until_its_ttl_and_says_when_that_is() {
    let t = stored(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        None,
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    let ttl = Some(Duration::from_secs(7200));
    // Deleted an hour ago: an hour left.
    expect_nothing(gone(
        "mariadb-pv",
        None,
        Some(&lean(&t)),
        &now(),
        ttl,
        &ImageFound::NotCensused,
        None,
    ));
    assert_eq!(
        tombstone_expires(Some(&lean(&t)), &now(), ttl),
        Some(Duration::from_secs(3600))
    );
    assert_eq!(tombstone_expires(Some(&lean(&t)), &now(), None), None);
    expect_delete(gone(
        "mariadb-pv",
        None,
        Some(&lean(&t)),
        &now_plus(3600),
        ttl,
        &ImageFound::NotCensused,
        None,
    ));
}

#[test]
fn a_tombstone_ends_when_the_census_shows_its_image_gone() {
    let t = stored(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        None,
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    expect_delete(gone(
        "mariadb-pv",
        None,
        Some(&lean(&t)),
        &now(),
        None,
        &ImageFound::Missing { in_trash: false },
        None,
    ));
}

#[test]
fn an_acknowledged_tombstone_is_deleted_but_an_acknowledgement_of_the_earlier_finding_is_not_enough()
 {
    let t = stored(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        None,
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    // A person acknowledges the tombstone: the record now lives in their ticket.
    let mut acked = t.clone();
    acked.spec.acknowledgement = Some(ack("OPS-7", None));
    expect_delete(gone(
        "mariadb-pv",
        None,
        Some(&lean(&acked)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    // The acknowledgement covered the ClaimDeleted finding before the volume was deleted: the
    // deletion is news, the state is Superseded, and the record stays.
    let mut earlier = published(&mariadb_finding());
    earlier.spec.acknowledgement = Some(ack("OPS-6", None));
    let earlier = stored(plan(
        "mariadb-pv",
        Some(&leftover(&mariadb_finding())),
        Some(&lean(&earlier)),
        &now(),
        &now(),
        None,
    ));
    let (o, _, _) = expect_apply(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        Some(&lean(&earlier)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
    assert_eq!(o.status.expect("status").state, State::Superseded);
}

#[test]
fn someone_elses_object_under_a_deleted_volumes_name_is_left_alone() {
    let mut foreign = published(&mariadb_finding()).without_label(MANAGED_BY);
    foreign.metadata.labels = None;
    assert!(!is_managed(&foreign));
    assert!(matches!(
        gone(
            "mariadb-pv",
            Some(&mariadb_deleted()),
            Some(&lean(&foreign)),
            &now(),
            None,
            &ImageFound::NotCensused,
            None
        ),
        Action::Foreign { .. }
    ));
    expect_nothing(gone(
        "mariadb-pv",
        None,
        Some(&lean(&foreign)),
        &now(),
        None,
        &ImageFound::NotCensused,
        None,
    ));
}

#[track_caller]
fn expect_delete(a: Action) {
    match a {
        Action::Delete { name, uid } => {
            assert_eq!(name, "mariadb-pv");
            assert_eq!(uid.as_deref(), Some("vl-uid-1"));
        }
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[test]
fn claims_that_become_unreadable_leave_a_published_claim_finding_as_it_is() {
    let deleted = finding(
        &pv("r").retain().released().claim("ns", "c", "uid-1"),
        &lookup(),
    );
    assert_eq!(deleted.status.reason, Reason::ClaimDeleted);
    let unknown = finding(
        &pv("r").retain().released().claim("ns", "c", "uid-1"),
        &lookup().claims_forbidden(),
    );
    assert_eq!(unknown.status.reason, Reason::ClaimUnknown);
    let existing = lean(&published(&deleted));
    let kept = plan(
        "r",
        Some(&leftover(&unknown)),
        Some(&existing),
        &now(),
        &now(),
        None,
    );
    assert!(
        matches!(kept, Action::Nothing),
        "a 403 is no news about the claim: no rewrite, no Event, no Superseded acknowledgement: {kept:?}"
    );
    // Nothing published yet: the unknown is what there is to say.
    let created = expect_create(plan(
        "r",
        Some(&leftover(&unknown)),
        None,
        &now(),
        &now(),
        None,
    ));
    assert_eq!(created.status.unwrap().reason, Reason::ClaimUnknown);
    // Another volume under the name (re-created PV): its own finding, unknown claim and all.
    let mut other = unknown.clone();
    other.volume_uid = "another-volume".into();
    let (o, _, status) = expect_apply(plan(
        "r",
        Some(&leftover(&other)),
        Some(&existing),
        &now(),
        &now(),
        None,
    ));
    assert!(status);
    assert_eq!(o.status.unwrap().reason, Reason::ClaimUnknown);
    // A finding that did not depend on the claim follows the volume as ever.
    let failed = finding(
        &pv("r").retain().failed().claim("ns", "c", "uid-1"),
        &lookup(),
    );
    assert_eq!(failed.status.reason, Reason::ReclaimFailed);
    let existing = lean(&published(&failed));
    let (o, _, _) = expect_apply(plan(
        "r",
        Some(&leftover(&unknown)),
        Some(&existing),
        &now(),
        &now(),
        None,
    ));
    assert_eq!(o.status.unwrap().reason, Reason::ClaimUnknown);
}

/// What to write for the published tombstone `t` once the census says `image` of its image.
fn tombstone_then(t: &VolumeLeftover, image: &ImageFound) -> Action {
    gone(
        "mariadb-pv",
        None,
        Some(&lean(t)),
        &now(),
        None,
        image,
        None,
    )
}

/// The mariadb tombstone as published, the census having said `image`.
fn mariadb_tombstone(image: &ImageFound) -> VolumeLeftover {
    stored(gone(
        "mariadb-pv",
        Some(&mariadb_deleted()),
        None,
        &now(),
        None,
        image,
        None,
    ))
}

#[test]
fn a_tombstone_note_an_earlier_version_wrote_is_replaced_not_repeated() {
    use crate::decide::classify::with_backend_note;
    let before = "PersistentVolume p was deleted. The storage backend's census finds the image.";
    assert_eq!(
        with_backend_note(before, NOTE_FOUND),
        format!("PersistentVolume p was deleted. {NOTE_FOUND}")
    );
}

#[test]
fn a_tombstone_says_what_the_census_found_of_its_image_and_an_unknown_census_changes_nothing() {
    let message = |o: &VolumeLeftover| o.status.as_ref().unwrap().message.clone();
    let t = mariadb_tombstone(&ImageFound::Unknown);
    assert!(message(&t).ends_with(NOTE_NOT_CHECKED), "{}", message(&t));
    // The census finds the image: the tombstone says so, once.
    let found = |image: &ImageFound, from: &VolumeLeftover| tombstone_then(from, image);
    let (o, meta, status) = expect_apply(found(&ImageFound::Present { watchers: 0 }, &t));
    assert!(!meta && status);
    let m = message(&o);
    assert!(
        m.ends_with(NOTE_FOUND) && !m.contains(NOTE_NOT_CHECKED),
        "{m}"
    );
    assert!(m.contains("was deleted at"), "the rest stays: {m}");
    let present = stored(Action::Apply {
        object: Box::new(o),
        meta: None,
        status: true,
    });
    expect_nothing(found(&ImageFound::Present { watchers: 2 }, &present));
    // Ceph down: no news, nothing written.
    expect_nothing(found(&ImageFound::Unknown, &present));
    // In the trash: said; purged (two censuses without it): the tombstone ends.
    let (o, _, _) = expect_apply(found(&ImageFound::Missing { in_trash: true }, &present));
    assert!(message(&o).ends_with(NOTE_IN_TRASH), "{}", message(&o));
    expect_delete(found(&ImageFound::Missing { in_trash: false }, &present));
    // The pool is no longer censused: back to saying nothing was checked.
    let (o, _, _) = expect_apply(found(&ImageFound::NotCensused, &present));
    assert!(message(&o).ends_with(NOTE_NOT_CHECKED), "{}", message(&o));
}

#[test]
fn an_acknowledged_tombstone_stays_while_the_census_finds_its_image() {
    let mut acked = mariadb_tombstone(&ImageFound::Present { watchers: 0 });
    acked.spec.acknowledgement = Some(ack("OPS-8", None));
    // Deleted, its image would come back as DiskWithoutVolume: a second ticket for one disk.
    let (o, _, _) = expect_apply(tombstone_then(&acked, &ImageFound::Present { watchers: 0 }));
    assert_eq!(o.status.as_ref().unwrap().state, State::Acknowledged);
    let acked = stored(Action::Apply {
        object: Box::new(o),
        meta: None,
        status: true,
    });
    expect_nothing(tombstone_then(&acked, &ImageFound::Unknown));
    expect_delete(tombstone_then(
        &acked,
        &ImageFound::Missing { in_trash: false },
    ));
    // Without the census covering it, the acknowledgement ends it, as ever.
    expect_delete(tombstone_then(&acked, &ImageFound::NotCensused));
}
