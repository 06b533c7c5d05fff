//! The lean form the operator caches of its VolumeLeftovers: what it keeps, and that deciding on
//! it is deciding on the object.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::fixtures::{PvBuilder, VlBuilder, finding, lookup, mariadb_finding, now, pv};
use crate::decide::plan::desired;
use crate::decide::report::cluster_report;
use crate::model::crd::{Acknowledgement, Reason, State, VolumeLeftover};
use crate::model::labels::{HINT_LABEL_PREFIX, LABEL_REASON, MANAGED_BY};
use crate::model::leftover::{Keep, Leftover, decode_labels, digest, encode_labels};

fn published(pv_name: &str) -> VolumeLeftover {
    let f = finding(
        &pv(pv_name).retain().released().claim("ns", "c", "u"),
        &lookup(),
    );
    desired(&f, None, &now(), &now(), None).stored_as("uid")
}

fn lean(o: &VolumeLeftover) -> Leftover {
    Leftover::new(o.clone(), Keep::default())
}

#[test]
fn own_labels_round_trip_and_nobody_elses_are_kept() {
    let o = published("a")
        .label("team", "storage")
        .label("example.com/owner", "x")
        .label(&format!("{HINT_LABEL_PREFIX}SomethingNew"), "")
        .label("leftovers.dev/odd", "volume-leftovers");
    let all = o.metadata.labels.clone().unwrap();
    let own: BTreeMap<String, String> = all
        .iter()
        .filter(|(k, _)| crate::model::labels::is_own_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(own.len() >= 4, "{own:?}");
    assert_eq!(lean(&o).own_labels(), own);
    assert_eq!(decode_labels(&encode_labels(&all)), own);
    assert!(decode_labels(&encode_labels(&BTreeMap::new())).is_empty());
    let encoded = encode_labels(&all);
    assert!(
        encoded.len() < own.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>(),
        "the common prefixes take one byte: {encoded:?}"
    );
}

#[test]
fn identity_spec_and_ownership_are_kept_as_they_are() {
    let mut o = published("a");
    o.spec.acknowledgement = Some(Acknowledgement {
        ticket: Some("OPS-1".into()),
        ..Acknowledgement::default()
    });
    let l = lean(&o);
    assert_eq!(&*l.name, "a");
    assert_eq!(l.uid.as_deref(), Some("uid"));
    assert_eq!(l.resource_version.as_deref(), Some("1001"));
    assert_eq!(l.generation, Some(1));
    assert!(l.managed);
    assert_eq!(l.volume_name(), "a");
    assert_eq!(&*l.volume_uid, o.spec.volume_uid.as_str());
    assert_eq!(
        l.acknowledgement.as_deref(),
        o.spec.acknowledgement.as_ref()
    );
    assert!(!lean(&o.clone().without_label(MANAGED_BY)).managed);
    let mut renamed = o.clone();
    renamed.spec.volume_name = "another".into();
    assert_eq!(lean(&renamed).volume_name(), "another");
}

#[test]
fn owner_references_are_kept_only_when_one_names_a_volume() {
    let other = OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "Thing".into(),
        name: "t".into(),
        uid: "t-uid".into(),
        ..OwnerReference::default()
    };
    let pv_ref = OwnerReference {
        api_version: "v1".into(),
        kind: "PersistentVolume".into(),
        name: "a".into(),
        uid: "pv-uid".into(),
        ..OwnerReference::default()
    };
    let mut o = published("a");
    o.metadata.owner_references = Some(vec![other.clone()]);
    assert_eq!(lean(&o).pv_owner_references(), None);
    o.metadata.owner_references = Some(vec![other.clone(), pv_ref.clone()]);
    assert_eq!(
        lean(&o).pv_owner_references(),
        Some(&[other, pv_ref][..]),
        "the whole list: the patch writes it back without ours"
    );
}

#[test]
fn the_digest_is_the_statuss_and_the_same_in_every_process() {
    let o = published("a");
    let s = o.status.clone().unwrap();
    assert_eq!(lean(&o).status.unwrap().digest, digest(&s));
    // Fixed: not seeded per process (replicas and restarts compare the same way).
    let fixed: crate::model::crd::VolumeLeftoverStatus =
        serde_json::from_value(serde_json::json!({
            "reason": "ClaimDeleted",
            "state": "Open",
            "message": "m",
            "phase": "Released",
            "reclaimPolicy": "Retain",
            "volumeMode": "Filesystem",
            "source": {"type": "csi"},
            "firstSeen": "2025-01-01T00:00:00Z",
        }))
        .expect("status");
    assert_eq!(digest(&fixed), DIGEST_OF_FIXED, "{:#x}", digest(&fixed));
    let mut edited = s.clone();
    edited.message.push('.');
    assert_ne!(digest(&edited), digest(&s));
    let mut edited = s.clone();
    edited.conditions[0].last_transition_time = crate::tests::fixtures::now_plus(1);
    assert_ne!(digest(&edited), digest(&s));
}

/// FNV-1a (128 bits) of the status's JSON, as an independent implementation computes it.
const DIGEST_OF_FIXED: u128 = 0xfa35ec22e2b40376db47250d383643fd;

#[test]
fn the_facts_are_kept_where_a_decision_may_need_them_again() {
    // A Retain volume's finding may become its tombstone: facts kept, without the message.
    let retain = lean(&published("a")).status.unwrap();
    let facts = retain.record().expect("kept");
    let full = published("a").status.unwrap();
    assert_eq!(facts.source, full.source);
    assert_eq!(facts.claim, full.claim);
    assert_eq!(facts.reclaim_policy, full.reclaim_policy);
    assert_eq!(facts.first_seen, full.first_seen);
    assert_eq!(facts.state, full.state);
    assert!(facts.message.is_empty() && facts.conditions.is_empty());
    // A Delete volume's finding does not: its disk goes with it.
    let f = finding(
        &pv("d").delete().released().claim("ns", "c", "u"),
        &lookup(),
    );
    let delete = desired(&f, None, &now(), &now(), None).stored_as("uid");
    assert!(lean(&delete).status.unwrap().record().is_none());
    // Unless the mirror shows every finding: then with its message.
    let kept = Leftover::new(
        delete.clone(),
        Keep {
            report: true,
            ..Keep::default()
        },
    );
    let facts = kept.status.unwrap().record().expect("kept for the mirror");
    assert_eq!(facts.message, delete.status.unwrap().message);
}

#[test]
fn a_finding_whose_volume_is_seen_keeps_no_facts_for_a_tombstone() {
    let seen = Keep {
        volume_seen: true,
        ..Keep::default()
    };
    let l = Leftover::new(published("a"), seen);
    let s = l.status.as_ref().unwrap();
    assert!(!s.has_record() && s.record().is_none());
    // What decisions read is all there, and compares equal to the object.
    let unseen = lean(&published("a"));
    let u = unseen.status.as_ref().unwrap();
    assert_eq!(
        (s.reason, s.state, &s.first_seen, s.digest),
        (u.reason, u.state, &u.first_seen, u.digest)
    );
    // The mirror keeps its facts all the same.
    let report = Leftover::new(
        published("a"),
        Keep {
            report: true,
            volume_seen: true,
        },
    );
    assert!(report.status.unwrap().has_record());
}

#[test]
fn facts_kept_for_a_tombstone_are_shed_once_and_only_those() {
    let l = lean(&published("a"));
    let shared = std::sync::Arc::new(l);
    let s = shared.status.as_ref().unwrap();
    assert!(s.has_record());
    assert!(s.shed(), "kept for a tombstone: shed");
    assert!(!s.has_record() && s.record().is_none());
    assert!(!s.shed(), "nothing left to shed");
    // A tombstone's facts are its content: never shed.
    let f = mariadb_finding();
    let mut o = desired(&f, None, &now(), &now(), None).stored_as("uid");
    let st = o.status.as_mut().unwrap();
    st.reason = Reason::VolumeDeleted;
    st.deleted_at = Some(now());
    let t = lean(&o);
    assert!(!t.status.as_ref().unwrap().shed());
    assert!(t.status.unwrap().record().is_some());
    // Nor the mirror's.
    let m = Leftover::new(
        published("a"),
        Keep {
            report: true,
            ..Keep::default()
        },
    );
    assert!(!m.status.as_ref().unwrap().shed());
    assert!(m.status.unwrap().has_record());
}

#[test]
fn a_tombstone_keeps_its_message() {
    let f = mariadb_finding();
    let mut o = desired(&f, None, &now(), &now(), None).stored_as("uid");
    let s = o.status.as_mut().unwrap();
    s.reason = Reason::VolumeDeleted;
    s.deleted_at = Some(now());
    s.message = "the last record".into();
    let facts = lean(&o).status.unwrap().record().expect("kept");
    assert_eq!(facts.message, "the last record");
    assert_eq!(facts.deleted_at, Some(now()));
}

#[test]
fn the_mirror_shows_the_same_report_from_the_lean_forms() {
    let mut acked = published("b-acked");
    acked.spec.acknowledgement = Some(Acknowledgement {
        ticket: Some("OPS-9".into()),
        ..Acknowledgement::default()
    });
    acked.status.as_mut().unwrap().state = State::Acknowledged;
    let f = finding(
        &pv("d").delete().released().claim("ns", "c", "u"),
        &lookup(),
    );
    let delete = desired(&f, None, &now(), &now(), None).stored_as("uid");
    let foreign = published("a-foreign").without_label(MANAGED_BY);
    let items = [
        published("c-open"),
        acked,
        foreign,
        delete,
        published("a-open"),
    ];
    let lean: Vec<VolumeLeftover> = items
        .iter()
        .map(|o| {
            Leftover::new(
                o.clone(),
                Keep {
                    report: true,
                    ..Keep::default()
                },
            )
            .to_object()
        })
        .collect();
    assert_eq!(cluster_report(&lean), cluster_report(&items));
}

#[test]
fn the_store_key_is_the_name_alone() {
    use kube::runtime::reflector::Lookup;
    let l = lean(&published("a").label(LABEL_REASON, "x"));
    let r = l.to_object_ref(());
    assert_eq!(r.name, "a");
    assert_eq!(r.namespace, None);
    assert_eq!(r.extra.resource_version, None);
    assert_eq!(r.extra.uid, None);
}
