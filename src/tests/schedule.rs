//! The loop's state machine, driven with events and tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::decide::name::{Held, Published};
use crate::engine::backoff::Backoff;
use crate::engine::schedule::{HORIZON, Limits, Next};
use crate::model::crd::Reason;
use crate::run::scheduling::{Condition, Scheduler, WriteEnd};
use crate::watch::category::Category;

fn limits(concurrency: usize) -> Limits {
    Limits {
        concurrency,
        ..Limits::default()
    }
}

fn active(concurrency: usize) -> Scheduler {
    let mut s = Scheduler::new(limits(concurrency), 7);
    s.activate();
    s
}

/// Decides every queued name as a write of its own name.
fn write_all(s: &mut Scheduler) -> Vec<String> {
    s.run(|name, _| Next::Write(name.to_string()))
        .into_iter()
        .map(|(_, w)| w)
        .collect()
}

fn idle_all(s: &mut Scheduler) -> Vec<String> {
    let mut seen = Vec::new();
    let _: Vec<(Arc<str>, ())> = s.run(|name, _| {
        seen.push(name.to_string());
        Next::Idle
    });
    seen
}

fn failed(category: Category, write_wide: bool) -> WriteEnd {
    WriteEnd::Failed {
        category,
        write_wide,
        error: format!("{category} error"),
    }
}

#[tokio::test(start_paused = true)]
async fn marks_before_activation_are_dropped_the_first_sweep_covers_them() {
    let mut s = Scheduler::new(limits(4), 1);
    s.mark("a");
    assert_eq!(s.queued(), 0);
    assert!(s.is_empty());
    s.activate();
    s.mark("a");
    assert_eq!(s.queued(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_name_is_queued_once_however_often_it_is_marked() {
    let mut s = active(4);
    for _ in 0..5 {
        s.mark("a");
    }
    s.mark("b");
    assert_eq!(idle_all(&mut s), ["a", "b"]);
}

#[tokio::test(start_paused = true)]
async fn names_decided_idle_leave_no_state_behind() {
    let mut s = active(4);
    for n in ["a", "b", "c"] {
        s.mark(n);
    }
    idle_all(&mut s);
    assert!(s.is_empty(), "{} names kept", s.len());
}

#[tokio::test(start_paused = true)]
async fn writes_in_flight_are_bounded_by_the_concurrency() {
    let mut s = active(2);
    for n in ["a", "b", "c"] {
        s.mark(n);
    }
    assert_eq!(write_all(&mut s), ["a", "b"]);
    assert_eq!(s.in_flight(), 2);
    assert_eq!(s.queued(), 1, "c waits for a slot");
    assert!(write_all(&mut s).is_empty());
    s.end_write("a", WriteEnd::Done);
    assert_eq!(write_all(&mut s), ["c"]);
}

#[tokio::test(start_paused = true)]
async fn a_name_marked_while_its_write_is_in_flight_is_decided_again_after_it() {
    let mut s = active(4);
    s.mark("a");
    assert_eq!(write_all(&mut s), ["a"]);
    s.mark("a");
    assert_eq!(s.queued(), 0, "never two writes of one name at once");
    s.end_write("a", WriteEnd::Done);
    assert_eq!(s.queued(), 1);
    assert_eq!(idle_all(&mut s), ["a"]);
    assert!(s.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_wait_brings_the_name_back_after_it() {
    let mut s = active(4);
    s.mark("a");
    let _: Vec<(Arc<str>, ())> = s.run(|_, _| Next::WaitFor(Duration::from_secs(90)));
    assert!(s.contains("a"), "a pending wake-up is state");
    let start = Instant::now();
    let woke = s.next_wake().await;
    assert_eq!(&*woke, "a");
    assert_eq!(start.elapsed(), Duration::from_secs(90));
    assert_eq!(idle_all(&mut s), ["a"]);
    assert!(s.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_earliest_wake_up_of_a_name_wins() {
    let mut s = active(4);
    s.wake_after("a", Duration::from_secs(60));
    s.wake_after("a", Duration::from_secs(5));
    s.wake_after("a", Duration::from_secs(30));
    let start = Instant::now();
    s.next_wake().await;
    assert_eq!(start.elapsed(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_failed_write_backs_off_and_marks_do_not_resend_it_early() {
    let mut s = active(4);
    s.mark("a");
    write_all(&mut s);
    assert_eq!(s.end_write("a", failed(Category::Unavailable, false)), None);
    // Events and sweeps during the backoff.
    for _ in 0..3 {
        s.mark("a");
    }
    assert_eq!(s.queued(), 0, "a write that is backing off is not re-sent");
    let start = Instant::now();
    assert_eq!(&*s.next_wake().await, "a");
    let first = start.elapsed();
    assert!(
        first >= Duration::from_millis(500) && first <= Duration::from_secs(1),
        "{first:?}"
    );
    assert_eq!(write_all(&mut s), ["a"]);
    s.end_write("a", failed(Category::Unavailable, false));
    let start = Instant::now();
    s.next_wake().await;
    let second = start.elapsed();
    assert!(
        second >= Duration::from_secs(1) && second <= Duration::from_secs(2),
        "{second:?}"
    );
    assert_eq!(s.get("a").map(|n| n.failures()), Some(2));
    write_all(&mut s);
    s.end_write("a", WriteEnd::Done);
    assert_eq!(s.get("a").map(|n| n.failures()), None, "state gone");
}

#[tokio::test(start_paused = true)]
async fn an_outdated_write_is_not_a_failure() {
    let mut s = active(4);
    s.mark("a");
    write_all(&mut s);
    assert_eq!(s.end_write("a", WriteEnd::Outdated), None);
    assert!(s.is_empty());
}

#[tokio::test(start_paused = true)]
async fn one_name_failing_again_and_again_is_not_a_write_wide_condition() {
    let mut s = active(4);
    for _ in 0..5 {
        s.mark("a");
        if write_all(&mut s).is_empty() {
            s.next_wake().await;
            write_all(&mut s);
        }
        assert_eq!(s.end_write("a", failed(Category::Invalid, false)), None);
    }
    assert!(s.blocked().is_none());
}

#[tokio::test(start_paused = true)]
async fn failures_on_several_names_in_a_row_are_one_condition_then_one_probe_at_a_time() {
    let mut s = active(8);
    for n in ["a", "b", "c", "d", "e"] {
        s.mark(n);
    }
    assert_eq!(write_all(&mut s), ["a", "b", "c", "d", "e"]);
    assert_eq!(s.end_write("a", failed(Category::Unavailable, false)), None);
    assert_eq!(s.end_write("b", failed(Category::Unavailable, false)), None);
    assert!(matches!(
        s.end_write("c", failed(Category::Unavailable, false)),
        Some(Condition::Blocked {
            category: Category::Unavailable,
            ..
        })
    ));
    // Later failures while blocked change nothing visible.
    assert_eq!(s.end_write("d", failed(Category::Unavailable, false)), None);
    // New findings are decided but parked, not written.
    s.mark("f");
    s.mark("g");
    assert!(write_all(&mut s).is_empty());
    assert_eq!(s.in_flight(), 1, "only e is still in flight");
    assert_eq!(s.end_write("e", failed(Category::Unavailable, false)), None);
    // The probe: exactly one write.
    let probe = loop {
        s.next_wake().await;
        let w = write_all(&mut s);
        assert!(w.len() <= 1, "one probe at a time: {w:?}");
        if let Some(p) = w.into_iter().next() {
            break p;
        }
    };
    assert_eq!(s.in_flight(), 1);
    assert_eq!(
        s.end_write(&probe, WriteEnd::Done),
        Some(Condition::Unblocked)
    );
    let released = write_all(&mut s);
    for n in ["f", "g"] {
        assert!(
            n == probe || released.contains(&n.to_string()),
            "{n}: {released:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_write_blocks_at_once_and_the_first_success_releases_every_parked_name() {
    let mut s = active(4);
    s.mark("a");
    write_all(&mut s);
    assert!(matches!(
        s.end_write("a", failed(Category::Forbidden, true)),
        Some(Condition::Blocked {
            category: Category::Forbidden,
            ..
        })
    ));
    for n in ["b", "c", "d"] {
        s.mark(n);
    }
    assert!(write_all(&mut s).is_empty(), "parked while blocked");
    // Wait for the probe and let it succeed.
    let probe = loop {
        s.next_wake().await;
        let w = write_all(&mut s);
        if let Some(w) = w.into_iter().next() {
            break w;
        }
    };
    assert_eq!(
        s.end_write(&probe, WriteEnd::Done),
        Some(Condition::Unblocked)
    );
    assert!(s.blocked().is_none());
    let mut rest = write_all(&mut s);
    rest.sort();
    let mut want: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .filter(|n| **n != probe)
        .map(|n| n.to_string())
        .collect();
    want.sort();
    // `a` is still backing off from its own failure unless it was the probe.
    let released: Vec<String> = want.iter().filter(|n| *n != "a").cloned().collect();
    for n in &released {
        assert!(rest.contains(n), "{n} released: {rest:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_memo_keeps_the_name_and_clearing_it_lets_the_state_go() {
    let mut s = active(4);
    s.memo("a").published = Some(Published {
        reason: Reason::ClaimDeleted,
        storage_class: String::new(),
        state: crate::model::crd::State::Open,
        capacity_bytes: 0,
        first_seen: 0,
        monthly_cost: None,
    });
    s.settle("a");
    assert!(s.contains("a"));
    s.memo("a").published = None;
    s.settle("a");
    assert!(!s.contains("a"));
}

#[tokio::test(start_paused = true)]
async fn a_held_name_keeps_its_memo_between_decisions() {
    let mut s = active(4);
    s.mark("a");
    let _: Vec<(Arc<str>, ())> = s.run(|_, memo| {
        memo.held = Some(Held::Pending(Reason::BoundClaimMissing));
        Next::WaitFor(Duration::from_secs(120))
    });
    s.mark("a");
    let mut saw = None;
    let _: Vec<(Arc<str>, ())> = s.run(|_, memo| {
        saw = memo.held;
        memo.held = None;
        Next::Idle
    });
    assert_eq!(saw, Some(Held::Pending(Reason::BoundClaimMissing)));
    // The wake-up is still pending: state stays until it fires.
    assert!(s.contains("a"));
    s.next_wake().await;
    idle_all(&mut s);
    assert!(!s.contains("a"));
}

#[tokio::test(start_paused = true)]
async fn thousands_of_names_through_the_loop_leave_nothing_behind() {
    let mut s = active(4);
    for i in 0..5000 {
        s.mark(&format!("pv-{i}"));
    }
    loop {
        let w = write_all(&mut s);
        if w.is_empty() {
            break;
        }
        for n in w {
            s.end_write(&n, WriteEnd::Done);
        }
    }
    // The echo of each write comes back as a mark; deciding it finds nothing to do.
    for i in 0..5000 {
        s.mark(&format!("pv-{i}"));
    }
    idle_all(&mut s);
    assert!(s.is_empty(), "{} names leaked", s.len());
}

// ---- backoff ----

#[test]
fn backoff_doubles_with_jitter_up_to_its_cap() {
    let mut b = Backoff::new(Duration::from_millis(500), Duration::from_secs(30), 42);
    let mut full = Duration::from_millis(500);
    for _ in 0..12 {
        let d = b.next_delay();
        assert!(
            d >= full / 2 && d <= full,
            "{d:?} not in [{:?}, {full:?}]",
            full / 2
        );
        full = (full * 2).min(Duration::from_secs(30));
    }
    assert_eq!(b.attempts(), 12);
}

#[test]
fn backoff_resets_to_its_first_delay() {
    let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(60), 3);
    for _ in 0..10 {
        b.next_delay();
    }
    b.reset();
    assert!(b.next_delay() <= Duration::from_secs(1));
}

#[test]
fn backoff_never_overflows() {
    let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(300), 9);
    for _ in 0..10_000 {
        assert!(b.next_delay() <= Duration::from_secs(300));
    }
}

#[test]
fn two_seeds_jitter_differently() {
    let mut a = Backoff::new(Duration::from_secs(10), Duration::from_secs(10), 1);
    let mut b = Backoff::new(Duration::from_secs(10), Duration::from_secs(10), 2);
    let da: Vec<Duration> = (0..5).map(|_| a.next_delay()).collect();
    let db: Vec<Duration> = (0..5).map(|_| b.next_delay()).collect();
    assert_ne!(da, db);
}

#[tokio::test(start_paused = true)]
async fn after_a_sweep_settles_the_map_of_names_gives_its_memory_back() {
    // A sweep queues every name; once decided and idle, their states go, and so does the room
    // the map had grown for them (hashbrown keeps its largest capacity otherwise).
    let mut s = active(4);
    for i in 0..60_000 {
        s.mark(&format!("pv-{i}"));
    }
    let grown = s.capacity();
    assert!(grown >= 60_000, "{grown}");
    // A few names keep a memo (published findings).
    for i in 0..100 {
        s.memo(&format!("pv-{i}")).logged = Some("kept".into());
    }
    assert_eq!(idle_all(&mut s).len(), 60_000);
    assert_eq!(s.queued(), 0);
    let after = s.capacity();
    assert!(
        after <= 1024,
        "capacity {after} after settling (was {grown})"
    );
    for i in 0..100 {
        assert!(s.contains(&format!("pv-{i}")), "a name with a memo stays");
    }
    assert!(!s.contains("pv-100"));
}

mod far_wake_ups {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Wake-ups come from data the operator does not control (an acknowledgement's `until`
        /// of 9999, a transition time, a TTL): at any distance, set and reset in any order, a
        /// wake-up never panics the timer queue and comes within the horizon, where the name is
        /// decided again.
        #[test]
        fn a_wake_up_at_any_distance_never_panics_and_comes_within_the_horizon(
            delays in prop::collection::vec(
                prop_oneof![
                    any::<u64>().prop_map(Duration::from_secs),
                    (0u64..3 * 365 * 24 * 3600).prop_map(Duration::from_secs),
                    Just(Duration::MAX),
                    Just(Duration::ZERO),
                ],
                1..6,
            ),
        ) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            rt.block_on(async {
                let mut s = active(4);
                s.mark("a");
                let _ = idle_all(&mut s);
                let nearest = delays.iter().min().copied().unwrap_or(Duration::ZERO);
                for d in &delays {
                    s.wake_after("a", *d);
                }
                let start = Instant::now();
                let woken = s.next_wake().await;
                assert_eq!(&*woken, "a");
                let waited = start.elapsed();
                assert!(waited <= HORIZON, "woken after {waited:?}");
                assert!(
                    waited >= nearest.min(HORIZON),
                    "woken after {waited:?}, before the nearest wake-up {nearest:?}"
                );
                assert_eq!(idle_all(&mut s), ["a"], "decided again when woken");
            });
        }
    }
}
