//! A claim whose expansion stopped (`ExpansionStuck`): what classification makes of a claim's
//! sizes, and how long `plan::gate` holds it back.

use std::time::Duration;

use super::fixtures::{FakeLookup, PvBuilder, lookup, now, now_plus, pv, verdict};
use crate::decide::lookup::{ClaimFacts, Found, Lookup};
use crate::decide::plan::{Gated, Graces, gate};
use crate::model::crd::{Hint, Reason};
use crate::model::expansion::{ClaimSize, Expansion, ResizeCondition, ResizeStep, Uncomparable};
use crate::model::finding::{Finding, Verdict};
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

const GRACES: Graces = Graces {
    grace: Duration::from_secs(120),
    delete_grace: Duration::from_secs(600),
    expansion_grace: Duration::from_secs(3600),
};

/// A claim asking for 20Gi with 10Gi, stopped at `step`, its conditions dated `since`.
fn expansion(step: ResizeStep, conditions: &[(&str, &str, Option<Time>)]) -> ClaimSize {
    ClaimSize::Expanding(Box::new(Expansion {
        requested: "20Gi".into(),
        requested_bytes: 20 << 30,
        capacity: "10Gi".into(),
        capacity_bytes: 10 << 30,
        allocated: None,
        resize_status: None,
        step,
        conditions: conditions
            .iter()
            .map(|(kind, message, since)| ResizeCondition {
                kind: (*kind).into(),
                message: (!message.is_empty()).then(|| (*message).into()),
                since: since.clone(),
            })
            .collect(),
    }))
}

/// A lookup holding the claim `team-a/data` with `uid` and these sizes.
fn with_sized_claim(uid: &str, size: ClaimSize) -> FakeLookup {
    let mut l = lookup().with_class("fast", "Retain");
    l.claims.as_mut().unwrap().insert(
        ("team-a".into(), "data".into()),
        ClaimFacts {
            uid: uid.into(),
            terminating: false,
            size,
        },
    );
    l
}

/// A Bound volume of claim `team-a/data` uid `uid-1`, with reclaim policy `policy`.
fn bound(policy: &str) -> PersistentVolume {
    pv("pv-data")
        .reclaim(policy)
        .bound()
        .since(now_plus(-86_400))
        .claim("team-a", "data", "uid-1")
        .class("fast")
        .capacity("10Gi")
}

fn stuck(l: &FakeLookup, policy: &str) -> Finding {
    match verdict(&bound(policy), l) {
        Verdict::Leftover(f) => *f,
        other => panic!("expected a finding, got {other:?}"),
    }
}

#[test]
fn a_bound_claim_asking_for_more_than_it_has_is_expansion_stuck_with_where_it_stopped() {
    let l = with_sized_claim(
        "uid-1",
        expansion(
            ResizeStep::ControllerInfeasible,
            &[(
                "ControllerResizeError",
                "rpc error: code = OutOfRange\n desc = the pool has no room",
                Some(now_plus(-7200)),
            )],
        ),
    );
    let f = stuck(&l, "Retain");
    assert_eq!(f.status.reason, Reason::ExpansionStuck);
    let e = f.status.claim.as_ref().unwrap().expansion.as_ref().unwrap();
    assert_eq!(
        (e.requested.as_str(), e.capacity.as_str()),
        ("20Gi", "10Gi")
    );
    assert_eq!(e.stopped_at, ResizeStep::ControllerInfeasible);
    assert_eq!(
        f.status.message,
        "PersistentVolume pv-data is Bound to claim team-a/data, which asks for 20Gi but has \
         10Gi: its expansion stopped at the resizer, which says the size cannot be had. \
         ControllerResizeError: rpc error: code = OutOfRange desc = the pool has no room. The \
         size cannot be had: lower the request back (above the current capacity), which \
         Kubernetes permits to recover from a failed expansion."
    );
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
    // The same claim, healthy: no finding.
    let settled = with_sized_claim("uid-1", ClaimSize::Settled);
    assert_eq!(verdict(&bound("Retain"), &settled), Verdict::Healthy);
}

#[test]
fn sizes_that_cannot_be_compared_are_never_a_stuck_expansion() {
    for why in [
        Uncomparable::NoCapacity,
        Uncomparable::Request,
        Uncomparable::Capacity,
    ] {
        let l = with_sized_claim("uid-1", ClaimSize::Uncomparable(why));
        assert_eq!(
            verdict(&bound("Retain"), &l),
            Verdict::Skip(format!(
                "PersistentVolume pv-data: its claim team-a/data has {}, so whether its expansion stopped cannot be told",
                why.as_str()
            )),
            "{why:?}"
        );
    }
}

#[test]
fn an_expanding_claim_of_another_uid_is_the_volume_s_missing_claim_not_its_expansion() {
    let l = with_sized_claim("uid-2", expansion(ResizeStep::NotStarted, &[]));
    let f = stuck(&l, "Retain");
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    assert_eq!(f.status.claim.as_ref().unwrap().expansion, None);
}

#[test]
fn a_forbidden_claim_store_decides_no_expansion() {
    let l = FakeLookup {
        claims: None,
        ..lookup()
    };
    assert_eq!(l.claim("team-a", "data"), Found::Unknown);
    assert!(matches!(
        verdict(&bound("Retain"), &l),
        Verdict::Undecided(_)
    ));
}

fn gated(f: &Finding, seen_ago: Option<i64>) -> Gated {
    let mut observed = seen_ago.map(|s| crate::decide::plan::Observed {
        volume_uid: f.volume_uid.clone(),
        reason: f.status.reason,
        since: now_plus(-s),
    });
    gate(
        Verdict::Leftover(Box::new(f.clone())),
        None,
        &mut observed,
        &now(),
        GRACES,
    )
}

#[test]
fn an_expansion_is_held_for_the_expansion_grace_from_the_step_its_conditions_date() {
    // Resizing for ten minutes: a slow resize, not yet stuck.
    let young = stuck(
        &with_sized_claim(
            "uid-1",
            expansion(
                ResizeStep::ControllerInProgress,
                &[("Resizing", "", Some(now_plus(-600)))],
            ),
        ),
        "Retain",
    );
    assert_eq!(gated(&young, None), Gated::Later(Duration::from_secs(3000)));
    // Resizing for two hours: published at once (even by a process that just started), dated
    // from the condition plus the grace.
    let old = stuck(
        &with_sized_claim(
            "uid-1",
            expansion(
                ResizeStep::ControllerInProgress,
                &[("Resizing", "", Some(now_plus(-7200)))],
            ),
        ),
        "Retain",
    );
    match gated(&old, None) {
        Gated::Now { first_seen, .. } => assert_eq!(first_seen, now_plus(-3600)),
        other => panic!("{other:?}"),
    }
    // Nothing dates it (no resizer answered): timed from the first observation.
    let undated = stuck(
        &with_sized_claim("uid-1", expansion(ResizeStep::NotStarted, &[])),
        "Retain",
    );
    assert_eq!(
        gated(&undated, None),
        Gated::Later(Duration::from_secs(3600))
    );
    assert_eq!(
        gated(&undated, Some(3000)),
        Gated::Later(Duration::from_secs(600))
    );
    assert!(matches!(gated(&undated, Some(3600)), Gated::Now { .. }));
}

#[test]
fn a_delete_policy_volume_s_expansion_waits_the_expansion_grace_not_the_delete_grace() {
    let graces = Graces {
        delete_grace: Duration::from_secs(7200),
        ..GRACES
    };
    let f = stuck(
        &with_sized_claim("uid-1", expansion(ResizeStep::NotStarted, &[])),
        "Delete",
    );
    assert!(!f.status.hints.contains(&Hint::ReclaimPolicyDelete));
    let (grace, _) = crate::decide::plan::grace_of(&f, graces);
    assert_eq!(grace, GRACES.expansion_grace);
}
