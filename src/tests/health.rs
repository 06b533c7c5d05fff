//! Store health: how far each store is trusted as time passes, and what `/readyz` says.

use std::time::Duration;

use tokio::time::Instant;

use crate::telemetry::Standing;
use crate::telemetry::{CRD_FIX, Health, Kind, StoreHealth, StoreState, Trust, WritesBlocked};
use crate::watch::category::Category;

fn synced() -> StoreHealth {
    StoreHealth {
        state: StoreState::Synced,
        ..StoreHealth::default()
    }
}

fn failing(state: StoreState, since: Instant, error: &str, category: Category) -> StoreHealth {
    StoreHealth {
        state,
        since: Some(since),
        error: Some(error.into()),
        category: Some(category),
    }
}

fn all_synced(h: &Health) {
    for k in Kind::ALL {
        h.set_store(k, synced());
    }
}

#[tokio::test(start_paused = true)]
async fn a_degraded_store_is_trusted_for_the_bound_then_stale_until_it_lists_again() {
    let h = Health::new(Duration::from_secs(15));
    assert_eq!(
        h.trust(Kind::persistentvolumeclaims, Instant::now()),
        Trust::Pending
    );
    assert!(!h.report().0, "unready before the first lists");
    all_synced(&h);
    assert!(h.report().0);
    let failed_at = Instant::now();
    h.set_store(
        Kind::persistentvolumeclaims,
        failing(
            StoreState::Degraded,
            failed_at,
            "503 ServiceUnavailable",
            Category::Unavailable,
        ),
    );
    // A blip: still current, still ready.
    tokio::time::advance(Duration::from_secs(15)).await;
    assert_eq!(
        h.trust(Kind::persistentvolumeclaims, Instant::now()),
        Trust::Current
    );
    let (ready, body) = h.report();
    assert!(ready, "{body}");
    assert!(
        body.contains("persistentvolumeclaims: Degraded for 15s (503"),
        "{body}"
    );
    // Past the bound: stale, and /readyz names the store and the error.
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(
        h.trust(Kind::persistentvolumeclaims, Instant::now()),
        Trust::Stale
    );
    assert_eq!(
        h.trust(Kind::persistentvolumes, Instant::now()),
        Trust::Current
    );
    let (ready, body) = h.report();
    assert!(!ready);
    assert!(
        body.contains("persistentvolumeclaims: Degraded for 16s (stale: its answers are not used) (503 ServiceUnavailable)"),
        "{body}"
    );
    // A completed list makes it current again at once.
    h.set_store(Kind::persistentvolumeclaims, synced());
    assert_eq!(
        h.trust(Kind::persistentvolumeclaims, Instant::now()),
        Trust::Current
    );
    assert!(h.report().0);
}

#[tokio::test(start_paused = true)]
async fn forbidden_claims_are_unknown_and_unready_and_a_missing_crd_says_the_fix() {
    let h = Health::new(Duration::from_secs(15));
    all_synced(&h);
    h.set_store(
        Kind::persistentvolumeclaims,
        failing(
            StoreState::Forbidden,
            Instant::now(),
            "403 Forbidden: user cannot list",
            Category::Forbidden,
        ),
    );
    assert_eq!(
        h.trust(Kind::persistentvolumeclaims, Instant::now()),
        Trust::Forbidden
    );
    let (ready, body) = h.report();
    assert!(
        !ready,
        "findings go on, but the Deployment shows something is wrong"
    );
    assert!(
        body.contains("persistentvolumeclaims: Forbidden for 0s (403"),
        "{body}"
    );

    all_synced(&h);
    h.set_store(
        Kind::volumeleftovers,
        failing(
            StoreState::Pending,
            Instant::now(),
            "404 NotFound",
            Category::NotFound,
        ),
    );
    let (ready, body) = h.report();
    assert!(!ready);
    assert!(body.contains(CRD_FIX), "{body}");
}

#[tokio::test(start_paused = true)]
async fn a_synced_standby_is_ready_blocked_writes_and_shutdown_are_not() {
    let h = Health::new(Duration::from_secs(15));
    all_synced(&h);
    h.set_leader(Standing::Standby {
        lease: "volume-leftovers/volume-leftovers".into(),
    });
    let (ready, body) = h.report();
    assert!(
        ready,
        "a rolling update must not stall on a standby: {body}"
    );
    assert!(
        body.contains("leader: standby (lease volume-leftovers/volume-leftovers)\n"),
        "{body}"
    );
    h.set_writes_blocked(Some(WritesBlocked::new(
        Category::Forbidden,
        "403 on volumeleftovers".into(),
    )));
    let (ready, body) = h.report();
    assert!(!ready);
    assert!(
        body.contains("writes: blocked (forbidden: 403 on volumeleftovers)\n"),
        "{body}"
    );
    h.set_writes_blocked(None);
    assert!(h.report().0);
    h.shutting_down();
    assert!(!h.report().0);
}

#[test]
fn the_election_and_blocked_writes_read_as_they_always_did() {
    // `/readyz` bodies and log lines that runbooks and alerts quote.
    let standby = Standing::Standby {
        lease: "ns/name".into(),
    };
    assert_eq!(standby.to_string(), "standby (lease ns/name)");
    assert_eq!(Standing::Leading.to_string(), "leading");
    assert_eq!(Standing::Lost.to_string(), "lost the lease");

    let failing = WritesBlocked::new(Category::Forbidden, "403 Forbidden".into());
    assert_eq!(failing.category(), Category::Forbidden);
    assert_eq!(failing.fix(), "");
    assert_eq!(failing.to_string(), "forbidden: 403 Forbidden");
    // A 404 on writes means the CRD is missing: its fix goes with it.
    let missing = WritesBlocked::new(Category::NotFound, "404 Not Found".into());
    assert_eq!(
        missing,
        WritesBlocked::CrdMissing {
            error: "404 Not Found".into()
        }
    );
    assert_eq!(missing.category(), Category::NotFound);
    assert_eq!(missing.error(), "404 Not Found");
    assert_eq!(missing.fix(), format!("; {CRD_FIX}"));
    assert_eq!(
        missing.to_string(),
        format!("not_found: 404 Not Found; {CRD_FIX}")
    );
}
