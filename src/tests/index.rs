//! `index::RefIndex`: which PVs name which claim.

use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume};

use super::fixtures::{PvBuilder, pv};
use crate::model::volume::Volume;
use crate::watch::index::RefIndex;

fn claimed(name: &str, ns: &str, claim: &str, class: &str) -> PersistentVolume {
    pv(name).bound().claim(ns, claim, "uid").class(class)
}

fn for_claim(i: &RefIndex, ns: &str, name: &str) -> Vec<String> {
    i.pvs_for_claim(ns, name).map(str::to_string).collect()
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_new_index_is_empty() {
    let i = RefIndex::default();
    assert!(i.is_empty());
    assert_eq!(i.len(), 0);
    assert_eq!(for_claim(&i, "ns", "c"), Vec::<String>::new());
}

#[test]
fn apply_indexes_a_pv_by_its_claim() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    assert_eq!(i.len(), 1);
    assert!(!i.is_empty());
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
}

#[test]
fn claim_lookup_needs_both_namespace_and_name_to_match() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    assert!(for_claim(&i, "other", "c").is_empty());
    assert!(for_claim(&i, "ns", "other").is_empty());
}

#[test]
fn several_pvs_naming_one_claim_are_listed_sorted() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("zeta", "ns", "c", "standard")));
    i.apply(&Volume::from(&claimed("alpha", "ns", "c", "standard")));
    i.apply(&Volume::from(&claimed("mid", "other", "d", "standard")));
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["alpha", "zeta"]));
    assert_eq!(for_claim(&i, "other", "d"), strings(&["mid"]));
}

#[test]
fn applying_the_same_pv_twice_is_idempotent() {
    let mut i = RefIndex::default();
    let p = claimed("a", "ns", "c", "standard");
    i.apply(&Volume::from(&p));
    i.apply(&Volume::from(&p));
    assert_eq!(i.len(), 1);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
}

#[test]
fn a_pv_whose_claim_ref_changes_moves_to_the_new_claim() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "old", "standard")));
    i.apply(&Volume::from(&claimed("a", "ns", "new", "standard")));
    assert_eq!(i.len(), 1);
    assert!(for_claim(&i, "ns", "old").is_empty());
    assert_eq!(for_claim(&i, "ns", "new"), strings(&["a"]));
}

#[test]
fn a_pv_whose_claim_ref_is_cleared_leaves_the_claim() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    i.apply(&Volume::from(&pv("a").available().class("standard")));
    assert_eq!(i.len(), 1);
    assert!(for_claim(&i, "ns", "c").is_empty());
}

#[test]
fn delete_forgets_the_pv_everywhere() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    i.apply(&Volume::from(&claimed("b", "ns", "c", "standard")));
    i.delete("a");
    assert_eq!(i.len(), 1);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["b"]));
    i.delete("b");
    assert!(i.is_empty());
    assert!(for_claim(&i, "ns", "c").is_empty());
}

#[test]
fn deleting_an_unknown_pv_changes_nothing() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    i.delete("nope");
    assert_eq!(i.len(), 1);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
}

#[test]
fn a_pv_can_be_indexed_again_after_delete() {
    let mut i = RefIndex::default();
    let p = claimed("a", "ns", "c", "standard");
    i.apply(&Volume::from(&p));
    i.delete("a");
    i.apply(&Volume::from(&p));
    assert_eq!(i.len(), 1);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
}

#[test]
fn a_pv_without_claim_is_counted_but_not_indexed() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&pv("a").available()));
    assert_eq!(i.len(), 1);
    assert!(for_claim(&i, "", "").is_empty());
}

#[test]
fn a_claim_ref_without_namespace_is_not_indexed_by_claim() {
    let mut i = RefIndex::default();
    let p = pv("a")
        .released()
        .class("standard")
        .claim_ref(ObjectReference {
            name: Some("c".into()),
            ..ObjectReference::default()
        });
    i.apply(&Volume::from(&p));
    assert_eq!(i.len(), 1);
    assert!(for_claim(&i, "", "c").is_empty());
}

#[test]
fn a_pv_without_name_is_ignored() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(
        &claimed("a", "ns", "c", "standard").no_name(),
    ));
    assert!(i.is_empty());
    assert!(for_claim(&i, "ns", "c").is_empty());
}

#[test]
fn reset_forgets_the_names_that_vanished() {
    let mut i = RefIndex::default();
    for n in ["d", "b", "a", "c"] {
        i.apply(&Volume::from(&claimed(n, "ns", n, "standard")));
    }
    i.reset(&vols(&[
        claimed("a", "ns", "a", "standard"),
        claimed("e", "ns", "e", "standard"),
    ]));
    assert_eq!(i.len(), 2);
    for gone in ["b", "c", "d"] {
        assert!(for_claim(&i, "ns", gone).is_empty(), "{gone}");
    }
    assert_eq!(for_claim(&i, "ns", "a"), strings(&["a"]));
    assert_eq!(for_claim(&i, "ns", "e"), strings(&["e"]));
}

#[test]
fn reset_rebuilds_the_index_from_the_list() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    i.apply(&Volume::from(&claimed("b", "ns", "c", "standard")));
    i.reset(&vols(&[
        claimed("a", "ns", "moved", "fast"),
        claimed("e", "ns", "c", "standard"),
    ]));
    assert_eq!(i.len(), 2);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["e"]));
    assert_eq!(for_claim(&i, "ns", "moved"), strings(&["a"]));
}

#[test]
fn reset_with_an_empty_list_forgets_everything() {
    let mut i = RefIndex::default();
    i.apply(&Volume::from(&claimed("a", "ns", "c", "standard")));
    i.reset(&vols(&[]));
    assert!(i.is_empty());
    assert!(for_claim(&i, "ns", "c").is_empty());
}

#[test]
fn reset_of_an_empty_index_indexes_the_list() {
    let mut i = RefIndex::default();
    i.reset(&vols(&[claimed("a", "ns", "c", "standard")]));
    assert_eq!(i.len(), 1);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
}

#[test]
fn reset_with_the_same_list_changes_nothing() {
    let mut i = RefIndex::default();
    let pvs = [
        claimed("a", "ns", "c", "standard"),
        claimed("b", "ns", "d", "fast"),
    ];
    i.reset(&vols(&pvs));
    i.reset(&vols(&pvs));
    assert_eq!(i.len(), 2);
    assert_eq!(for_claim(&i, "ns", "c"), strings(&["a"]));
    assert_eq!(for_claim(&i, "ns", "d"), strings(&["b"]));
}

fn vols(pvs: &[k8s_openapi::api::core::v1::PersistentVolume]) -> Vec<Volume> {
    pvs.iter().map(Volume::from).collect()
}

#[test]
fn pvs_come_and_go_one_at_a_time_on_one_claim() {
    let mut i = RefIndex::default();
    for n in ["c", "a", "b"] {
        i.apply(&Volume::from(&claimed(n, "ns", "x", "standard")));
    }
    assert_eq!(for_claim(&i, "ns", "x"), strings(&["a", "b", "c"]));
    i.delete("b");
    assert_eq!(for_claim(&i, "ns", "x"), strings(&["a", "c"]));
    i.apply(&Volume::from(&claimed("a", "ns", "y", "standard")));
    assert_eq!(for_claim(&i, "ns", "x"), strings(&["c"]));
    assert_eq!(for_claim(&i, "ns", "y"), strings(&["a"]));
    i.delete("c");
    assert!(for_claim(&i, "ns", "x").is_empty());
    assert_eq!(i.len(), 1);
}

#[test]
fn many_claims_each_find_exactly_their_own_pv() {
    // Keys are hashes: every claim must still get exactly its PV, never a neighbour's.
    let mut i = RefIndex::default();
    for n in 0..2000 {
        i.apply(&Volume::from(&claimed(
            &format!("pv-{n}"),
            &format!("ns-{}", n % 7),
            &format!("data-{n}"),
            "standard",
        )));
    }
    for n in 0..2000 {
        let ns = format!("ns-{}", n % 7);
        assert_eq!(
            for_claim(&i, &ns, &format!("data-{n}")),
            strings(&[&format!("pv-{n}")])
        );
        assert!(for_claim(&i, &format!("ns-{}", (n + 1) % 7), &format!("data-{n}")).is_empty());
    }
}
