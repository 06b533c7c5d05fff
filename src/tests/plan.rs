//! `plan::gate` (the grace of BoundClaimMissing) and `plan::plan` (what to write).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::fixtures::{
    PvBuilder, VlBuilder, finding, lookup, mariadb_finding, mariadb_pv, now, now_plus, pv,
};
use crate::classify::{Finding, Verdict, classify};
use crate::crd::{Reason, VolumeLeftover};
use crate::plan::{
    Action, BoundGrace, Gated, LABEL_CLAIM_NAMESPACE, LABEL_REASON, LABEL_STORAGE_CLASS,
    MANAGED_BY, MANAGED_BY_VALUE, desired, gate, is_label_value, is_managed, plan,
};
use crate::volume::Volume;

const TWO_MINUTES: BoundGrace = BoundGrace {
    grace: Duration::from_secs(120),
};

/// A Bound PV whose claim is gone.
fn bound_claim_missing() -> Finding {
    let f = finding(
        &pv("b").retain().bound().claim("ns", "c", "uid-1"),
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
    desired(f, None).stored_as("vl-uid-1")
}

#[track_caller]
fn expect_apply(a: Action) -> (VolumeLeftover, bool, bool) {
    match a {
        Action::Apply {
            object,
            meta,
            status,
        } => (*object, meta, status),
        other => panic!("expected Apply, got {other:?}"),
    }
}

#[track_caller]
fn expect_nothing(a: Action) {
    assert!(matches!(a, Action::Nothing), "expected Nothing, got {a:?}");
}

// ---- gate ----

#[test]
fn gate_holds_bound_claim_missing_back_for_the_rest_of_the_grace() {
    let v = leftover(&bound_claim_missing());
    let g = gate(v, None, Some(now_plus(-30)), &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Later(Duration::from_secs(90)));
}

#[test]
fn gate_holds_a_first_sighting_back_for_the_whole_grace() {
    let v = leftover(&bound_claim_missing());
    let g = gate(v, None, None, &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_publishes_bound_claim_missing_exactly_at_the_grace() {
    let v = leftover(&bound_claim_missing());
    let g = gate(v.clone(), None, Some(now_plus(-120)), &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Now(v));
}

#[test]
fn gate_publishes_bound_claim_missing_after_the_grace() {
    let v = leftover(&bound_claim_missing());
    let g = gate(v.clone(), None, Some(now_plus(-3600)), &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Now(v));
}

#[test]
fn gate_with_zero_grace_publishes_at_once() {
    let v = leftover(&bound_claim_missing());
    let zero = BoundGrace {
        grace: Duration::ZERO,
    };
    assert_eq!(gate(v.clone(), None, None, &now(), zero), Gated::Now(v));
}

#[test]
fn gate_treats_a_suspicion_from_the_future_as_just_started() {
    let v = leftover(&bound_claim_missing());
    let g = gate(v, None, Some(now_plus(30)), &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_publishes_at_once_when_already_published_as_bound_claim_missing() {
    let f = bound_claim_missing();
    let existing = published(&f);
    let g = gate(leftover(&f), Some(&existing), None, &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Now(leftover(&f)));
}

#[test]
fn gate_holds_back_when_the_published_object_has_another_reason() {
    let f = bound_claim_missing();
    let existing = published(&mariadb_finding());
    let g = gate(
        leftover(&f),
        Some(&existing),
        Some(now_plus(-10)),
        &now(),
        TWO_MINUTES,
    );
    assert_eq!(g, Gated::Later(Duration::from_secs(110)));
}

#[test]
fn gate_ignores_a_foreign_object_that_says_bound_claim_missing() {
    let f = bound_claim_missing();
    let foreign = published(&f).without_label(MANAGED_BY);
    let g = gate(leftover(&f), Some(&foreign), None, &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}

#[test]
fn gate_passes_other_findings_through_at_once() {
    let v = leftover(&mariadb_finding());
    assert_eq!(
        gate(v.clone(), None, None, &now(), TWO_MINUTES),
        Gated::Now(v)
    );
}

#[test]
fn gate_passes_healthy_and_skip_through() {
    assert_eq!(
        gate(Verdict::Healthy, None, None, &now(), TWO_MINUTES),
        Gated::Now(Verdict::Healthy)
    );
    let skip = Verdict::Skip("odd".into());
    assert_eq!(
        gate(skip.clone(), None, Some(now()), &now(), TWO_MINUTES),
        Gated::Now(skip)
    );
}

// ---- plan: applying ----

#[test]
fn finding_with_nothing_published_applies_meta_and_status() {
    let f = mariadb_finding();
    let (object, meta, status) = expect_apply(plan("mariadb-pv", Some(&leftover(&f)), None));
    assert!(meta && status);
    let want = desired(&f, None);
    assert_eq!(object.metadata, want.metadata);
    assert_eq!(object.spec, want.spec);
    assert_eq!(object.status, want.status);
}

#[test]
fn finding_already_published_the_same_needs_nothing() {
    let f = mariadb_finding();
    let existing = published(&f);
    expect_nothing(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
}

#[test]
fn published_object_read_back_as_json_needs_nothing() {
    // What the reflector hands back went through JSON: times and optional fields must survive.
    let f = mariadb_finding();
    let json = serde_json::to_string(&published(&f)).expect("json");
    let existing: VolumeLeftover = serde_json::from_str(&json).expect("parse");
    expect_nothing(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
}

#[test]
fn only_a_status_change_applies_status_only() {
    let before = mariadb_finding();
    let existing = published(&before);
    let mut after = before.clone();
    after.status.capacity = Some("500Mi".into());
    let (object, meta, status) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&after)), Some(&existing)));
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
        Some(&existing),
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
    let (object, meta, status) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
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
        let (_, meta, status) =
            expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
        assert!(meta, "removing {key} must be reverted");
        assert!(!status, "{key}");
    }
}

#[test]
fn a_stale_label_of_ours_that_should_be_gone_is_a_meta_change() {
    // The class is now unnamed: the storage-class label must go.
    let mut f = mariadb_finding();
    let existing = published(&f);
    f.status.storage_class = None;
    let (object, meta, _) = expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
    assert!(meta);
    assert!(
        !object
            .metadata
            .labels
            .expect("labels")
            .contains_key(LABEL_STORAGE_CLASS)
    );
}

#[test]
fn a_foreign_label_added_by_someone_else_is_not_ours_to_change() {
    let f = mariadb_finding();
    let existing = published(&f).label("team", "storage");
    expect_nothing(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
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
    expect_nothing(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
}

#[test]
fn a_removed_owner_reference_of_ours_is_restored() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    existing.metadata.owner_references = None;
    let (_, meta, status) = expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
    assert!(meta);
    assert!(!status);
}

#[test]
fn a_hand_edited_spec_is_reverted() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    existing.spec.volume_uid = "someone-else".into();
    let (object, meta, status) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
    assert!(meta);
    assert!(!status);
    assert_eq!(object.spec.volume_uid, "pv-uid-mariadb-pv");
}

#[test]
fn a_hand_edited_status_is_reverted() {
    let f = mariadb_finding();
    let mut existing = published(&f);
    existing.status.as_mut().expect("status").message = "all fine".into();
    let (_, meta, status) = expect_apply(plan("mariadb-pv", Some(&leftover(&f)), Some(&existing)));
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
        desired(&later, Some(&existing))
            .status
            .expect("status")
            .first_seen,
        now()
    );
    expect_nothing(plan("mariadb-pv", Some(&leftover(&later)), Some(&existing)));
}

#[test]
fn first_seen_is_kept_when_the_finding_changes() {
    let existing = published(&mariadb_finding());
    let mut later = mariadb_finding();
    later.status.first_seen = now_plus(600);
    later.status.reason = Reason::ClaimRecreated;
    let (object, _, status) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&later)), Some(&existing)));
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
fn a_pv_recreated_under_the_same_name_updates_spec_and_owner_reference() {
    let existing = published(&mariadb_finding());
    let again = mariadb_recreated_later();
    let (object, meta, _) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&again)), Some(&existing)));
    assert!(meta);
    assert_eq!(object.spec.volume_uid, "pv-uid-new");
    let owners = object.metadata.owner_references.expect("owner references");
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].uid, "pv-uid-new");
}

#[test]
fn a_pv_recreated_under_the_same_name_is_a_new_finding_with_its_own_first_seen() {
    // Another volume (another uid) did not exist when the old finding was first seen.
    let existing = published(&mariadb_finding());
    let again = mariadb_recreated_later();
    let (object, _, status) =
        expect_apply(plan("mariadb-pv", Some(&leftover(&again)), Some(&existing)));
    assert!(status);
    assert_eq!(object.status.expect("status").first_seen, now_plus(3600));
}

#[test]
fn the_wall_clock_has_whole_seconds_so_first_seen_compares_equal_after_a_round_trip() {
    // `Time` serialises to seconds; a sub-second firstSeen would differ on every re-plan.
    let t = crate::controller::wall_clock();
    assert_eq!(t.0.subsec_nanosecond(), 0);
    let back: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_json::from_value(serde_json::to_value(&t).expect("json")).expect("parse");
    assert_eq!(back, t);
}

// ---- plan: deleting and leaving alone ----

#[test]
fn healthy_with_a_published_object_deletes_it_by_uid() {
    let existing = published(&mariadb_finding());
    match plan("mariadb-pv", Some(&Verdict::Healthy), Some(&existing)) {
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
    match plan("mariadb-pv", None, Some(&existing)) {
        Action::Delete { name, uid } => {
            assert_eq!(name, "mariadb-pv");
            assert_eq!(uid.as_deref(), Some("vl-uid-1"));
        }
        other => panic!("expected Delete, got {other:?}"),
    }
}

#[test]
fn healthy_with_nothing_published_needs_nothing() {
    expect_nothing(plan("a", Some(&Verdict::Healthy), None));
    expect_nothing(plan("a", None, None));
}

#[test]
fn skip_keeps_what_was_published() {
    let existing = published(&mariadb_finding());
    expect_nothing(plan(
        "mariadb-pv",
        Some(&Verdict::Skip("odd".into())),
        Some(&existing),
    ));
    expect_nothing(plan("mariadb-pv", Some(&Verdict::Skip("odd".into())), None));
}

#[test]
fn a_finding_over_an_unmanaged_object_is_foreign() {
    let f = mariadb_finding();
    let foreign = published(&f).without_label(MANAGED_BY);
    match plan("mariadb-pv", Some(&leftover(&f)), Some(&foreign)) {
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
        plan("mariadb-pv", Some(&leftover(&f)), Some(&foreign)),
        Action::Foreign { .. }
    ));
}

#[test]
fn an_unmanaged_object_is_never_deleted() {
    let foreign = published(&mariadb_finding()).without_label(MANAGED_BY);
    expect_nothing(plan("mariadb-pv", Some(&Verdict::Healthy), Some(&foreign)));
    expect_nothing(plan("mariadb-pv", None, Some(&foreign)));
    expect_nothing(plan(
        "mariadb-pv",
        Some(&Verdict::Skip("odd".into())),
        Some(&foreign),
    ));
}

// ---- desired object ----

#[test]
fn desired_object_is_named_after_the_pv_and_names_it_in_its_spec() {
    let o = desired(&mariadb_finding(), None);
    assert_eq!(o.metadata.name.as_deref(), Some("mariadb-pv"));
    assert_eq!(o.spec.volume_name, "mariadb-pv");
    assert_eq!(o.spec.volume_uid, "pv-uid-mariadb-pv");
    assert_eq!(o.status, Some(mariadb_finding().status));
    assert_eq!(o.metadata.namespace, None, "cluster-scoped");
}

#[test]
fn desired_object_has_all_four_labels() {
    let o = desired(&mariadb_finding(), None);
    assert!(is_managed(&o));
    let expected: BTreeMap<String, String> = [
        (MANAGED_BY, MANAGED_BY_VALUE),
        (LABEL_REASON, "ClaimDeleted"),
        (LABEL_CLAIM_NAMESPACE, "mariadb"),
        (LABEL_STORAGE_CLASS, "standard"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(o.metadata.labels, Some(expected));
}

#[test]
fn desired_object_without_claim_or_class_has_no_claim_or_class_label() {
    let f = finding(&pv("a").retain().released(), &lookup());
    let labels = desired(&f, None).metadata.labels.expect("labels");
    assert_eq!(
        labels.keys().map(String::as_str).collect::<Vec<_>>(),
        vec![MANAGED_BY, LABEL_REASON]
    );
}

#[test]
fn a_class_name_too_long_for_a_label_gets_no_label() {
    let long = "c".repeat(70);
    let f = finding(&pv("a").retain().released().class(&long), &lookup());
    assert_eq!(f.status.storage_class.as_ref().expect("class").name, long);
    let labels = desired(&f, None).metadata.labels.expect("labels");
    assert!(!labels.contains_key(LABEL_STORAGE_CLASS), "{labels:?}");
}

#[test]
fn an_invalid_class_name_gets_no_label() {
    for bad in ["-fast", "fast.", "fast/ssd"] {
        let f = finding(&pv("a").retain().released().class(bad), &lookup());
        let labels = desired(&f, None).metadata.labels.expect("labels");
        assert!(
            !labels.contains_key(LABEL_STORAGE_CLASS),
            "{bad}: {labels:?}"
        );
    }
}

#[test]
fn desired_object_has_one_owner_reference_to_the_pv_without_block_owner_deletion() {
    let o = desired(&mariadb_finding(), None);
    assert_eq!(
        o.metadata.owner_references,
        Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "PersistentVolume".into(),
            name: "mariadb-pv".into(),
            uid: "pv-uid-mariadb-pv".into(),
            block_owner_deletion: None,
            controller: None,
        }])
    );
}

#[test]
fn desired_object_serialises_the_api_version_and_kind() {
    let v = serde_json::to_value(desired(&mariadb_finding(), None)).expect("json");
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

#[test]
fn gate_holds_back_when_the_published_object_is_for_an_older_pv_of_that_name() {
    let f = bound_claim_missing();
    let mut existing = published(&f);
    existing.spec.volume_uid = "uid-of-a-deleted-pv".into();
    let g = gate(leftover(&f), Some(&existing), None, &now(), TWO_MINUTES);
    assert_eq!(g, Gated::Later(Duration::from_secs(120)));
}
