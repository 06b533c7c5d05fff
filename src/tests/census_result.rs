//! What one census result means ([`census_result`]), without Ceph or a loop: failures and
//! recoveries logged once, unreadable images reported once per change, names decided again when
//! a pool's listing changes, findings about unreferenced images made and dropped.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::{now, now_plus};
use crate::census::ceph::handle::PoolKey;
use crate::census::ceph::rbd::Category;
use crate::census::ceph::vocabulary::leftover_name;
use crate::census::config::CensusConfig;
use crate::census::disk_ref;
use crate::decide::census::{DiskFacts, Scope, ScopeListing, Seen};
use crate::decide::census_result::{
    CensusLog, CensusOutcome, CensusState, Gauge, Naming, census_result,
};
use crate::model::crd::{Reason, VolumeSourceInfo};

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";

fn pool() -> PoolKey {
    PoolKey::new(FSID, "k8s-rbd", None)
}

fn key() -> Scope {
    pool().into()
}

fn state() -> CensusState {
    let config = CensusConfig::parse(&format!(
        "clusterName: e2e\nclusters:\n  - clusterID: {FSID}\n    monitors: [\"127.0.0.1:6789\"]\n    pools:\n      - name: k8s-rbd\n"
    ))
    .expect("config parses");
    CensusState::new(config.census(Duration::from_secs(3600)))
}

/// A listing of the pool with these images, their details unread.
fn listing(images: &[&str]) -> ScopeListing {
    ScopeListing {
        started: now_plus(-60),
        scope_id: Some(2),
        images: images
            .iter()
            .map(|n| {
                let seen = Seen {
                    size_only: None,
                    users_only: 0,
                    id: format!("id-{n}"),
                    detail: None,
                };
                (n.to_string(), seen)
            })
            .collect::<HashMap<_, _>>(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

/// An image of this cluster, two hours old, its details read.
fn old(mut s: ScopeListing, image: &str) -> ScopeListing {
    s.images.insert(
        image.to_string(),
        Seen {
            size_only: None,
            users_only: 0,
            id: format!("id-{image}"),
            detail: Some(Box::new(DiskFacts::ceph(
                1024,
                Some(now_plus(-7200).0),
                Vec::new(),
                None,
            ))),
        },
    );
    s
}

/// A ceph-csi volume's source naming `image` in the pool.
fn source(image: &str) -> VolumeSourceInfo {
    VolumeSourceInfo {
        kind: "csi".into(),
        driver: Some("rbd.csi.ceph.com".into()),
        cluster_id: Some(FSID.into()),
        pool: Some("k8s-rbd".into()),
        image_name: Some(image.into()),
        ..Default::default()
    }
}

fn volumes(v: &[(&str, &str)]) -> Naming {
    Naming {
        volumes: v
            .iter()
            .map(|(n, i)| (n.to_string(), disk_ref(&source(i))))
            .collect(),
        ..Default::default()
    }
}

fn run(
    st: &mut CensusState,
    result: Result<ScopeListing, (Category, &str)>,
    at: &Time,
    naming: Naming,
) -> CensusOutcome {
    census_result(
        st,
        &key(),
        result.map_err(|(c, m)| (c.into(), m.to_string())),
        at,
        || naming,
    )
}

/// A failure after the scope's first answer (the state is given one first when it has none).
fn failed(st: &mut CensusState, c: Category, m: &str) -> CensusOutcome {
    if !st.census.answered(&key()) {
        let first = census_result(
            st,
            &key(),
            Err((Category::Unavailable.into(), "not yet".to_string())),
            &now(),
            Naming::default,
        );
        assert!(first.mark.is_empty());
        st.census.pools.insert(key(), Default::default());
    }
    census_result(
        st,
        &key(),
        Err((c.into(), m.to_string())),
        &now(),
        || -> Naming { panic!("a failed census reads no names: it concludes nothing") },
    )
}

/// The verdicts that waited for a scope's first answer (`Census::has_answered`) are made once it
/// comes, whatever it says: its first answer, a listing or a failure, marks every volume naming a
/// disk of its backend; a failure after it concludes nothing and marks none.
#[test]
fn a_scopes_first_answer_even_a_failure_marks_the_volumes_that_waited_for_it() {
    let naming = || volumes(&[("pv-a", "a"), ("pv-b", "b")]);
    let r = disk_ref(&source("a")).unwrap();
    let mut st = state();
    assert!(!st.census.has_answered(&r), "no answer yet");
    let first = run(
        &mut st,
        Err((Category::Unavailable, "rbd_list2 timed out")),
        &now(),
        naming(),
    );
    assert_eq!(first.mark, vec!["pv-a".to_string(), "pv-b".to_string()]);
    assert!(st.census.has_answered(&r), "a failure is an answer");
    let again = census_result(
        &mut st,
        &key(),
        Err((
            Category::Unavailable.into(),
            "rbd_list2 timed out".to_string(),
        )),
        &now(),
        || -> Naming { panic!("a failed census reads no names after its first answer") },
    );
    assert!(again.mark.is_empty());
    let mut st = state();
    let listed = run(&mut st, Ok(listing(&["a", "b"])), &now(), naming());
    assert_eq!(listed.mark, vec!["pv-a".to_string(), "pv-b".to_string()]);
}

#[test]
fn a_failure_is_logged_once_per_kind_and_concludes_nothing() {
    let mut st = state();
    let out = failed(&mut st, Category::Unavailable, "rbd_list2 timed out");
    assert_eq!(out.gauge, Gauge::Failed);
    assert_eq!(
        out.logs,
        vec![CensusLog::Failed {
            category: Category::Unavailable.into(),
            message: "rbd_list2 timed out".into()
        }]
    );
    assert!(out.mark.is_empty());
    // The same outage in other words: counted, not logged again.
    let again = failed(&mut st, Category::Unavailable, "rados_connect timed out");
    assert_eq!(again.gauge, Gauge::Failed);
    assert!(again.logs.is_empty(), "{:?}", again.logs);
    // Another kind of problem is news.
    let other = failed(&mut st, Category::Forbidden, "the key was refused");
    assert_eq!(
        other.logs,
        vec![CensusLog::Failed {
            category: Category::Forbidden.into(),
            message: "the key was refused".into()
        }]
    );
}

#[test]
fn a_recovery_is_logged_once() {
    let mut st = state();
    failed(&mut st, Category::Unavailable, "rbd_list2 timed out");
    let back = run(&mut st, Ok(listing(&["a"])), &now(), Naming::default());
    assert_eq!(
        back.gauge,
        Gauge::Done {
            images: 1,
            unread: 0
        }
    );
    assert_eq!(
        back.logs,
        vec![CensusLog::Recovered {
            after: "rbd_list2 timed out".into()
        }]
    );
    let next = run(&mut st, Ok(listing(&["a"])), &now(), Naming::default());
    assert_eq!(next.logs, vec![CensusLog::Done { images: 1 }]);
}

#[test]
fn unreadable_images_are_logged_once_per_change_and_held() {
    let mut st = state();
    let mut s = listing(&["a", "b"]);
    s.unread.insert("b".into(), "EIO".into());
    let out = run(&mut st, Ok(s.clone()), &now(), Naming::default());
    assert_eq!(
        out.gauge,
        Gauge::Done {
            images: 2,
            unread: 1
        }
    );
    assert!(out.logs.contains(&CensusLog::Unread {
        images: 1,
        first: "b".into(),
        error: "EIO".into()
    }));
    assert_eq!(
        st.held.keys().collect::<Vec<_>>(),
        vec![&leftover_name(&pool(), "b")],
        "what is published about the unread image stays"
    );
    let same = run(&mut st, Ok(s), &now(), Naming::default());
    assert_eq!(same.logs, vec![CensusLog::Done { images: 2 }]);
    let read = run(&mut st, Ok(listing(&["a", "b"])), &now(), Naming::default());
    assert_eq!(
        read.logs,
        vec![CensusLog::Done { images: 2 }, CensusLog::ReadAgain]
    );
    assert!(st.held.is_empty());
}

#[test]
fn volumes_are_decided_again_when_their_image_leaves_or_comes_back() {
    let mut st = state();
    let naming = || volumes(&[("pv-a", "a"), ("pv-b", "b")]);
    // The first answer marks both (their verdicts waited for it).
    run(&mut st, Ok(listing(&["a", "b"])), &now(), naming());
    // `a` is no longer listed: its volume is decided again, `b`'s is not.
    let gone = run(&mut st, Ok(listing(&["b"])), &now(), naming());
    assert_eq!(gone.mark, vec!["pv-a".to_string()]);
    // Listed again: decided again (the previous listing lacked it).
    let back = run(&mut st, Ok(listing(&["a", "b"])), &now(), naming());
    assert_eq!(back.mark, vec!["pv-a".to_string()]);
    let steady = run(&mut st, Ok(listing(&["a", "b"])), &now(), naming());
    assert!(steady.mark.is_empty(), "{:?}", steady.mark);
}

#[test]
fn an_unreferenced_old_image_is_a_finding_until_something_names_it() {
    let mut st = state();
    let name = leftover_name(&pool(), "orphan");
    let naming = Naming {
        leftovers: vec![
            ("tomb".into(), Reason::VolumeDeleted, Some(source("kept"))),
            ("img-x".into(), Reason::DiskWithoutVolume, None),
        ],
        ..Default::default()
    };
    let s = old(old(listing(&[]), "orphan"), "kept");
    let out = run(&mut st, Ok(s.clone()), &now(), naming);
    // The tombstone names `kept`; every image finding is decided again; `orphan` is new.
    assert_eq!(
        out.mark,
        vec!["tomb".to_string(), "img-x".into(), name.clone()]
    );
    assert_eq!(st.orphans.keys().collect::<Vec<_>>(), vec![&name]);
    // A tombstone not written yet names it: the finding goes.
    let named = Naming {
        tombstones: vec![source("orphan"), source("kept")],
        ..Default::default()
    };
    let out = run(&mut st, Ok(s), &now(), named);
    assert!(out.mark.is_empty(), "{:?}", out.mark);
    assert!(st.orphans.is_empty());
}

#[test]
fn a_volume_deleted_after_the_listing_began_still_names_its_disk_for_that_listing() {
    // A Delete-policy PV goes only once the driver deleted its disk: a listing that began
    // before may still hold the disk while the PV is already gone from the store. The listing
    // began a minute ago (`listing`).
    let mut st = state();
    let gone = leftover_name(&pool(), "gone-with-its-pv");
    let lingering = leftover_name(&pool(), "left-long-ago");
    let disk = |image: &str| disk_ref(&source(image)).expect("a ceph-csi disk");
    st.volume_gone(disk("gone-with-its-pv"), &now_plus(-30));
    // A PV deleted before the listing began: its disk is really left.
    st.volume_gone(disk("left-long-ago"), &now_plus(-120));
    let s = old(old(listing(&[]), "gone-with-its-pv"), "left-long-ago");
    run(&mut st, Ok(s.clone()), &now(), Naming::default());
    assert_eq!(st.orphans.keys().collect::<Vec<_>>(), vec![&lingering]);
    assert!(
        !st.orphans.contains_key(&gone),
        "a state only passing through"
    );
    // A later listing that still holds it (the driver's delete failed): now it is left.
    let mut later = s;
    later.started = now_plus(10);
    run(&mut st, Ok(later), &now_plus(20), Naming::default());
    assert!(st.orphans.contains_key(&gone), "{:?}", st.orphans.keys());
}
