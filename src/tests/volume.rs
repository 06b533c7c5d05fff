//! The lean forms the stores keep: what is shared, what is boxed, what is kept.

use std::sync::Arc;

use super::fixtures::*;
use crate::intern::{CAP, intern};
use crate::lookup::Claim;
use crate::volume::Volume;

#[test]
fn interned_strings_are_one_allocation_shared() {
    let a = intern("interned-test-standard");
    let b = intern(&String::from("interned-test-standard"));
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(&*a, "interned-test-standard");
}

#[test]
fn the_interner_stays_bounded_and_still_answers_when_full() {
    // Far more distinct strings than the cap, none held elsewhere: the set prunes what nobody
    // holds, and every answer is the string asked for.
    let held: Vec<Arc<str>> = (0..CAP / 2).map(|i| intern(&format!("held-{i}"))).collect();
    for i in 0..CAP * 2 {
        let s = format!("transient-{i}");
        assert_eq!(&*intern(&s), s);
        assert!(crate::intern::len() <= CAP, "the set grew past its cap");
    }
    // What is held is still shared.
    assert!(Arc::ptr_eq(&held[0], &intern("held-0")));
}

#[test]
fn volumes_share_their_repeated_strings() {
    let a = Volume::from(&mariadb_pv());
    let mut other = mariadb_pv();
    other.metadata.name = Some("other-pv".into());
    let b = Volume::from(&other);
    let (sa, sb) = (a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap());
    let class = |s: &crate::volume::VolumeSpec| s.storage_class_name.clone().unwrap();
    assert!(Arc::ptr_eq(&class(sa), &class(sb)));
    let ns =
        |s: &crate::volume::VolumeSpec| s.claim_ref.as_ref().unwrap().namespace.clone().unwrap();
    assert!(Arc::ptr_eq(&ns(sa), &ns(sb)));
    let phase = |v: &Volume| v.status.as_ref().unwrap().phase.clone().unwrap();
    assert!(Arc::ptr_eq(&phase(&a), &phase(&b)));
}

#[test]
fn a_csi_volume_has_no_in_tree_box_and_an_in_tree_one_has_it() {
    let csi = Volume::from(&pv("a").csi("rbd.csi.ceph.com", "0001-handle", []));
    assert!(csi.spec.as_ref().unwrap().in_tree.is_none());
    let nfs = Volume::from(&pv("b").nfs("nfs.example", "/exports/b"));
    let t = nfs
        .spec
        .as_ref()
        .unwrap()
        .in_tree
        .as_deref()
        .expect("boxed");
    assert_eq!(
        t.nfs.as_ref().map(|n| n.server.as_str()),
        Some("nfs.example")
    );
}

#[test]
fn a_claim_keeps_the_facts_scan_reads() {
    let mut meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        namespace: Some("mariadb".into()),
        name: Some("mariadb".into()),
        uid: Some("uid-1".into()),
        ..Default::default()
    };
    let c = Claim::of(&meta);
    assert_eq!(c.facts(), crate::lookup::claim_facts(&meta));
    assert!(!c.terminating);
    meta.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    assert!(Claim::of(&meta).terminating);
}
