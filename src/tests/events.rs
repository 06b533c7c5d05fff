//! The events recorder lets go of its cache once it is all expired.

use std::sync::Arc;
use std::time::Duration;

use crate::model::crd::Reason;
use crate::publish::events::{Change, Events};

fn events() -> Events {
    // Nothing listens there: each publish fails in the background, which is all these need.
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    Events::new(
        client,
        "test".into(),
        Duration::from_millis(100),
        Arc::new(crate::telemetry::Metrics::default()),
    )
}

#[tokio::test(start_paused = true)]
async fn the_recorder_is_replaced_only_after_the_series_window_of_its_last_event() {
    let e = events();
    let first = e.recorder();
    // Nothing published: nothing to let go of, however long.
    tokio::time::advance(Duration::from_secs(3600)).await;
    e.tidy();
    assert!(Arc::ptr_eq(&first, &e.recorder()));

    let found = Change::Found {
        reason: Reason::ClaimDeleted,
        message: "m".into(),
    };
    assert!(e.emit("pv-1", "uid-1", &found));
    // Within kube-runtime's six minutes the cache may still count a repeat: kept.
    tokio::time::advance(Duration::from_secs(6 * 60)).await;
    e.tidy();
    assert!(Arc::ptr_eq(&first, &e.recorder()));
    // A later event restarts the window.
    assert!(e.emit("pv-2", "uid-2", &found));
    tokio::time::advance(Duration::from_secs(6 * 60)).await;
    e.tidy();
    assert!(Arc::ptr_eq(&first, &e.recorder()));
    // Past the window of the last one: a fresh recorder, and the old one (its cache) goes once
    // the publishes in flight end.
    tokio::time::advance(Duration::from_secs(61)).await;
    e.tidy();
    let second = e.recorder();
    assert!(!Arc::ptr_eq(&first, &second));
    // And only once: nothing was published through the new one.
    tokio::time::advance(Duration::from_secs(3600)).await;
    e.tidy();
    assert!(Arc::ptr_eq(&second, &e.recorder()));
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_events_is_spread_over_recorders_of_bounded_cache() {
    let e = events();
    let first = e.recorder();
    let found = Change::Found {
        reason: Reason::ClaimDeleted,
        message: "m".into(),
    };
    let mut recorders = vec![first];
    for i in 0..2500 {
        // Let the background publishes end, so that slots are free.
        while !e.emit(&format!("pv-{i}"), "uid", &found) {
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        let now = e.recorder();
        if !Arc::ptr_eq(recorders.last().unwrap(), &now) {
            recorders.push(now);
        }
    }
    // 1000 events through each: the first, then the second and a third from event 2001 on.
    assert_eq!(recorders.len(), 3);
}

/// The Event a write makes is about the finding's PV; an image no volume references has none
/// (an Event needs an object: the API server refuses one about a PV named "").
#[test]
fn a_finding_about_a_volume_tells_its_pv_and_one_about_an_image_alone_tells_nothing() {
    use crate::decide::name::told;
    use crate::decide::plan::{Action, desired};
    use crate::tests::fixtures::{mariadb_finding, now};

    let f = mariadb_finding();
    let create = |f: &crate::model::finding::Finding| Action::Create {
        object: Box::new(desired(f, None, &now(), &now(), None)),
    };
    let t = told(&create(&f), None).expect("a new finding about a PV tells it");
    assert_eq!(t.pv, f.volume_name);
    assert!(matches!(t.change, Change::Found { .. }));

    let mut image = f.clone();
    image.object_name = Some("c-1.pool.csi-vol-1".into());
    image.volume_name.clear();
    image.volume_uid.clear();
    image.status.reason = Reason::DiskWithoutVolume;
    assert!(told(&create(&image), None).is_none());
}

#[tokio::test]
async fn events_beyond_the_four_in_flight_are_dropped_and_every_result_is_counted() {
    // A server that accepts connections and never answers: each event stays in flight until
    // its timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let metrics = Arc::new(crate::telemetry::Metrics::default());
    let e = Events::new(
        client,
        "test".into(),
        Duration::from_millis(500),
        metrics.clone(),
    );
    let found = Change::Found {
        reason: Reason::ClaimDeleted,
        message: "m".into(),
    };
    let sent: Vec<bool> = (0..6)
        .map(|i| e.emit(&format!("pv-{i}"), "uid", &found))
        .collect();
    assert_eq!(sent, [true, true, true, true, false, false]);
    let count = |result: &str| {
        let sample = format!(r#"volume_leftovers_events_total{{result="{result}"}} "#);
        metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&sample)?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    assert_eq!(count("dropped"), 2.0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while count("failed") < 4.0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(count("failed"), 4.0, "{}", metrics.encode());
    assert_eq!(count("published"), 0.0);
    // The slots are free again.
    assert!(e.emit("pv-6", "uid", &found));
    drop(silent);
}

#[test]
fn events_are_limited_to_a_burst_then_a_steady_rate() {
    use crate::publish::events::{Bucket, EVENT_BURST, EVENT_RATE};
    let t0 = tokio::time::Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut b = Bucket::new(t0);
    // 1000 attempts over one second: the burst and one second's rate.
    let sent = (0..1000).filter(|i| b.take(at(*i))).count();
    assert_eq!(
        sent as f64,
        EVENT_BURST + EVENT_RATE * 1.0 - 1.0,
        "the last refill lands at 1 s"
    );
    // Quiet for a minute: the burst is back, no more.
    let later = (0..500).filter(|i| b.take(at(61_000 + *i))).count();
    assert_eq!(later as f64, EVENT_BURST + EVENT_RATE * 0.5 - 1.0);
    // Steady: one every 100 ms gets through, every time.
    let mut b = Bucket::new(t0);
    for _ in 0..EVENT_BURST as usize {
        assert!(b.take(t0));
    }
    assert!(!b.take(t0));
    assert!((1..=50).all(|i| b.take(t0 + Duration::from_millis(100 * i))));
}
