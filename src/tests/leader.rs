//! The election's pure decision: create, acquire, renew or wait, on this process's own clock.

use std::time::Duration;

use tokio::time::Instant;

use crate::publish::leader::{LeaderSettings, Observed, Role, Step, next_step};

fn settings() -> LeaderSettings {
    LeaderSettings {
        lease_name: "volume-leftovers".into(),
        namespace: "ns".into(),
        identity: "me".into(),
        duration: Duration::from_secs(15),
        renew_every: Duration::from_secs(5),
    }
}

fn held(holder: &str, changed_at: Instant) -> Observed {
    Observed {
        holder: holder.into(),
        duration: Duration::from_secs(15),
        transitions: 3,
        resource_version: "42".into(),
        changed_at,
    }
}

#[tokio::test(start_paused = true)]
async fn no_lease_yet_is_created() {
    assert_eq!(
        next_step(None, "me", &settings(), Instant::now()),
        Step::Create
    );
}

#[tokio::test(start_paused = true)]
async fn a_released_lease_is_taken_at_once() {
    let now = Instant::now();
    let o = held("", now);
    assert_eq!(next_step(Some(&o), "me", &settings(), now), Step::Acquire);
}

#[tokio::test(start_paused = true)]
async fn a_lease_held_by_another_is_waited_for_until_it_would_expire_on_this_clock() {
    let seen = Instant::now();
    let o = held("other", seen);
    let now = seen + Duration::from_secs(4);
    assert_eq!(
        next_step(Some(&o), "me", &settings(), now),
        Step::Wait {
            at: seen + Duration::from_secs(15)
        }
    );
    // Not renewed within its duration, as seen here: taken.
    let later = seen + Duration::from_secs(15);
    assert_eq!(next_step(Some(&o), "me", &settings(), later), Step::Acquire);
}

#[tokio::test(start_paused = true)]
async fn our_own_lease_is_renewed_every_third_of_its_duration() {
    let seen = Instant::now();
    let o = held("me", seen);
    assert_eq!(
        next_step(Some(&o), "me", &settings(), seen),
        Step::Renew {
            at: seen + Duration::from_secs(5)
        }
    );
}

#[tokio::test(start_paused = true)]
async fn a_leader_may_write_only_until_its_bound() {
    let now = Instant::now();
    let role = Role::Leading {
        until: now + Duration::from_secs(10),
    };
    assert!(role.may_write(now));
    assert!(!role.may_write(now + Duration::from_secs(10)));
    assert!(!Role::Standby.may_write(now));
    assert!(!Role::Lost.may_write(now));
    assert!(role.leads());
    assert!(!Role::Standby.leads() && !Role::Lost.leads());
}

#[tokio::test(start_paused = true)]
async fn without_an_election_a_replica_leads_and_writes_for_as_long_as_it_runs() {
    let now = Instant::now();
    assert!(Role::Unelected.leads());
    assert!(Role::Unelected.may_write(now));
    // No lease, so no bound to run past, however long the process runs.
    assert!(Role::Unelected.may_write(now + Duration::from_secs(200 * 365 * 24 * 3600)));
}

#[test]
fn a_crashed_holder_is_replaced_within_the_lease_plus_two_bounded_requests() {
    use crate::publish::leader::{renew_every, request_timeout, takeover_bound};
    let s = Duration::from_secs;
    // The tests' short lease: renewed every 2 s, requests bounded by the renewal period.
    assert_eq!(renew_every(s(6)), s(2));
    assert_eq!(request_timeout(renew_every(s(6))), s(2));
    assert_eq!(takeover_bound(s(6)), s(10));
    // The default lease: requests bounded by 5 s.
    assert_eq!(request_timeout(renew_every(s(15))), s(5));
    assert_eq!(takeover_bound(s(15)), s(25));
    // A long lease: requests still bounded by 5 s.
    assert_eq!(takeover_bound(s(60)), s(70));
}
