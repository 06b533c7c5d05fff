//! The loop as a state machine (`run::controller::Loop`), driven without a server: the stores
//! are real reflector stores filled by hand, the feeds' items, write outcomes and ticks are
//! handed to `Loop::step` with the time, and what comes back is what the shell would perform.
//! Time is tokio's paused clock (the scheduler's wake-ups run on it) and a fixed wall clock.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use tokio::time::Instant;

use super::fixtures::{PvBuilder, VlBuilder, finding, lookup, mariadb_pv, now, now_plus, pv};
use crate::decide::lookup::Claim;
use crate::decide::name::{Echo, published};
use crate::decide::plan::{Action, desired};
use crate::model::crd::{Reason, VolumeLeftover};
use crate::model::leftover::Leftover;
use crate::model::volume::Volume;
use crate::publish::leader::Role;
use crate::publish::writer::{Op, Outcome, WriteError, Written};
use crate::run::controller::{Effects, Event, Gauge, Log, Loop, StoreLog, Tick};
use crate::run::settings::Settings;
use crate::run::wiring::{Input, Stores};
use crate::telemetry::Health;
use crate::watch::category::RequestError;
use crate::watch::feed::{FeedError, FeedItem};

const STALE_AFTER: Duration = Duration::from_secs(60);

/// The loop with its four stores, and the hands that fill them (as the feeds do, before they
/// hand the item to the loop).
pub(super) struct World {
    pub(super) machine: Loop,
    pub(super) pv: Writer<Volume>,
    pvc: Writer<Claim>,
    sc: Writer<StorageClass>,
    pub(super) vl: Writer<Leftover>,
    _role: tokio::sync::watch::Sender<Role>,
}

fn world() -> World {
    world_with(Settings::default())
}

pub(super) fn world_with(settings: Settings) -> World {
    world_reporting(settings, false)
}

/// The loop, with the OpenReports mirror on (`report`) or off.
fn world_reporting(settings: Settings, report: bool) -> World {
    let (pv_store, pv) = reflector::store();
    let (pvc_store, pvc) = reflector::store();
    let (sc_store, sc) = reflector::store();
    let (vl_store, vl) = reflector::store();
    let (role_tx, role) = tokio::sync::watch::channel(Role::Unelected);
    let machine = Loop::new(
        Stores {
            pv: pv_store,
            pvc: pvc_store,
            sc: sc_store,
            vl: vl_store,
            vsc: reflector::store().0,
            vs: reflector::store().0,
        },
        role,
        report,
        settings,
        Arc::new(Health::new(STALE_AFTER)),
        std::time::Instant::now,
        Instant::now(),
    );
    World {
        machine,
        pv,
        pvc,
        sc,
        vl,
        _role: role_tx,
    }
}

pub(super) fn class(name: &str, policy: &str) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        provisioner: "test.csi".into(),
        reclaim_policy: Some(policy.into()),
        ..StorageClass::default()
    }
}

pub(super) fn claim(namespace: &str, name: &str, uid: &str) -> Claim {
    Claim::of(
        &ObjectMeta {
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            ..ObjectMeta::default()
        }
        .into(),
    )
}

/// What the operator published for the Bound PV `b` whose claim was missing.
fn published_claim_missing() -> VolumeLeftover {
    let p = pv("b").retain().bound().claim("ns", "c", "uid-1");
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    desired(&f, None, &now_plus(-3600), &now_plus(-3600), None).stored_as("vl-uid-1")
}

impl World {
    pub(super) fn step(&mut self, event: Event) -> Effects {
        self.machine.step(event, Instant::now(), &now())
    }
    pub(super) fn put_pv(&mut self, p: &PersistentVolume) -> Event {
        let v = Volume::from(p);
        self.pv
            .apply_watcher_event(&watcher::Event::Apply(v.clone()));
        Event::Input(Input::Pv(Box::new(FeedItem::Applied(v))))
    }
    pub(super) fn put_claim(&mut self, c: Claim) -> Event {
        self.pvc
            .apply_watcher_event(&watcher::Event::Apply(c.clone()));
        Event::Input(Input::Pvc(Box::new(FeedItem::Applied(c))))
    }
    pub(super) fn put_class(&mut self, c: StorageClass) -> Event {
        self.sc
            .apply_watcher_event(&watcher::Event::Apply(c.clone()));
        Event::Input(Input::Sc(Box::new(FeedItem::Applied(c))))
    }
    pub(super) fn put_leftover(&mut self, o: &VolumeLeftover) -> Event {
        let l = super::fixtures::lean(o);
        self.vl
            .apply_watcher_event(&watcher::Event::Apply(l.clone()));
        Event::Input(Input::Vl(Box::new(FeedItem::Applied(l))))
    }
}

pub(super) fn listed_pvs() -> Event {
    Event::Input(Input::Pv(Box::new(FeedItem::Listed { gone: Vec::new() })))
}
pub(super) fn listed_claims() -> Event {
    Event::Input(Input::Pvc(Box::new(FeedItem::Listed { gone: Vec::new() })))
}
pub(super) fn listed_classes() -> Event {
    Event::Input(Input::Sc(Box::new(FeedItem::Listed { gone: Vec::new() })))
}
pub(super) fn listed_leftovers() -> Event {
    Event::Input(Input::Vl(Box::new(FeedItem::Listed { gone: Vec::new() })))
}
fn pvs_failing() -> Event {
    Event::Input(Input::Pv(Box::new(FeedItem::Failed {
        error: FeedError::ListPage(Duration::from_secs(60)),
        retry_in: Duration::from_secs(1),
    })))
}

/// The writes asked for, as `op name`.
fn writes(fx: &Effects) -> Vec<String> {
    fx.writes
        .iter()
        .map(|w| {
            let op = match &w.action {
                Action::Create { .. } => "create",
                Action::Apply { .. } => "apply",
                Action::Delete { .. } => "delete",
                a => panic!("not a write: {a:?}"),
            };
            format!("{op} {}", w.name)
        })
        .collect()
}

/// An empty claim store at start-up would turn every Released PV into "claim deleted": until
/// every store has listed, nothing is decided, whatever the other stores say.
#[tokio::test(start_paused = true)]
async fn nothing_is_decided_before_every_store_listed() {
    let mut w = world();
    let mut asked = Vec::new();
    let pv_in = w.put_pv(&mariadb_pv());
    let sc_in = w.put_class(class("standard", "Retain"));
    for event in [
        pv_in,
        sc_in,
        listed_pvs(),
        listed_classes(),
        listed_leftovers(),
        Event::Tick(Tick::Resync),
    ] {
        asked.extend(writes(&w.step(event)));
    }
    assert_eq!(asked, Vec::<String>::new(), "the claims have not listed");
    assert!(!w.machine.is_deciding(), "nothing is decided yet");
    let fx = w.step(listed_claims());
    assert!(w.machine.is_deciding());
    assert_eq!(writes(&fx), ["create mariadb-pv"], "every store listed");
}

/// A store whose watch has failed for longer than `stale_after` answers nothing: a published
/// finding is not deleted on its account, and is once the store has listed again.
#[tokio::test(start_paused = true)]
async fn a_stale_store_holds_decisions_and_deletes_nothing_published() {
    let mut w = world();
    let events = [
        w.put_pv(&pv("b").retain().bound().claim("ns", "c", "uid-1")),
        w.put_claim(claim("ns", "c", "uid-1")),
        w.put_class(class("standard", "Retain")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ];
    for event in events {
        assert!(w.step(event).writes.is_empty(), "b is healthy");
    }
    assert!(w.step(pvs_failing()).writes.is_empty());
    tokio::time::advance(STALE_AFTER + Duration::from_secs(1)).await;
    // A finding about b shows up (another replica wrote it before the claim came back).
    let vl_in = w.put_leftover(&published_claim_missing());
    assert!(w.step(vl_in).writes.is_empty(), "the PV store is stale");
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(fx.writes.is_empty(), "still stale at the sweep");
    let fx = w.step(listed_pvs());
    assert_eq!(writes(&fx), ["delete b"], "the PV store is current again");
}

/// After a write the name waits until the VolumeLeftover store shows what it left: the echo
/// the writer reports is what the next decision waits for, until `echo_wait` ends.
#[tokio::test(start_paused = true)]
async fn a_written_outcome_makes_the_name_wait_for_its_echo() {
    let mut w = world();
    let events = [
        w.put_pv(&mariadb_pv()),
        w.put_class(class("standard", "Retain")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
    ];
    for event in events {
        assert!(w.step(event).writes.is_empty());
    }
    let fx = w.step(listed_leftovers());
    assert_eq!(writes(&fx), ["create mariadb-pv"]);
    let start = fx.writes.into_iter().next().expect("one write");
    let fx = w.step(Event::Written {
        name: start.name,
        result: Ok(Written {
            op: Op::Create,
            outcome: Outcome::Done,
            echo: Some(Echo::Version("1001".into())),
            requests: 1,
        }),
        told: start.told,
    });
    assert!(
        fx.writes.is_empty(),
        "the store has not shown the write yet"
    );
    assert_eq!(fx.events.len(), 1, "the Event of the change that landed");
    tokio::time::advance(Duration::from_secs(1)).await;
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(fx.writes.is_empty(), "a sweep waits for the echo too");
    // The echo never came: the wait ends and the name is decided on what the store says.
    let echo_wait = Settings::default().echo_wait;
    tokio::time::advance(echo_wait).await;
    let fx = w.step(Event::Tick(Tick::Resync));
    assert_eq!(writes(&fx), ["create mariadb-pv"], "after the echo wait");
}

// ---- Census ----

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";

fn census_world() -> World {
    let config = crate::census::config::CensusConfig::parse(&format!(
        "clusterName: e2e\nclusters:\n  - clusterID: {FSID}\n    monitors: [\"127.0.0.1:6789\"]\n    pools:\n      - name: k8s-rbd\n"
    ))
    .expect("config parses");
    world_with(Settings {
        census: Some(crate::census::CensusSettings {
            config,
            interval: Duration::from_secs(60),
            image_grace: Duration::from_secs(3600),
            timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
        }),
        ..Settings::default()
    })
}

/// A listing of the pool with these images, each two hours old, its details read.
fn listing(images: &[&str]) -> crate::decide::census::ScopeListing {
    use crate::decide::census::{DiskFacts, ScopeListing, Seen};
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
                    detail: Some(Box::new(DiskFacts::ceph(
                        1024,
                        Some(now_plus(-7200).0),
                        Vec::new(),
                        None,
                    ))),
                };
                (n.to_string(), seen)
            })
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

fn census_done(images: &[&str]) -> Event {
    census_report(Ok(listing(images)))
}

fn census_report(
    result: Result<crate::decide::census::ScopeListing, crate::census::CensusFailure>,
) -> Event {
    Event::Input(Input::Census(vec![crate::census::CensusReport {
        key: crate::census::ceph::handle::PoolKey::new(FSID, "k8s-rbd", None).into(),
        result,
        requests: 3,
        elapsed: Duration::from_millis(20),
    }]))
}

/// A pool whose census fails is Unknown: the finding about an image nothing references stays
/// (it goes only when a census that works no longer lists the image).
#[tokio::test(start_paused = true)]
async fn a_failed_census_deletes_nothing() {
    let mut w = census_world();
    for event in [
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ] {
        assert!(w.step(event).writes.is_empty(), "no volume, no finding");
    }
    let fx = w.step(census_done(&["orphan"]));
    let [start] = <[_; 1]>::try_from(fx.writes).expect("one write");
    let Action::Create { object } = &start.action else {
        panic!("expected a Create, got {:?}", start.action);
    };
    // It landed, and the store shows it.
    let published = object.clone().stored_as("vl-uid-1");
    let vl_in = w.put_leftover(&published);
    w.step(Event::Written {
        name: start.name.clone(),
        result: Ok(Written {
            op: Op::Create,
            outcome: Outcome::Done,
            echo: None,
            requests: 1,
        }),
        told: None,
    });
    assert!(w.step(vl_in).writes.is_empty(), "published as decided");

    let failure = crate::census::CensusFailure::new(
        crate::census::ceph::rbd::Category::Unavailable,
        "Ceph is unavailable".into(),
    );
    let fx = w.step(census_report(Err(failure)));
    assert!(
        fx.writes.is_empty(),
        "the pool is Unknown: {:?}",
        writes(&fx)
    );
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(fx.writes.is_empty(), "at the sweep too: {:?}", writes(&fx));
    // A census that works again and no longer lists it: now it goes.
    let mut asked = Vec::new();
    for _ in 0..2 {
        asked.extend(writes(&w.step(census_done(&[]))));
    }
    assert_eq!(asked, [format!("delete {}", start.name)]);
}

/// Reports that arrive together (a GCE listing's, one per zone and region) are each decided, in
/// order, as they would be one at a time; what names disks is read once for all of them.
#[tokio::test(start_paused = true)]
async fn census_reports_that_arrive_together_are_each_decided_as_if_alone() {
    let listed = |w: &mut World| {
        for event in [
            listed_pvs(),
            listed_claims(),
            listed_classes(),
            listed_leftovers(),
        ] {
            assert!(w.step(event).writes.is_empty());
        }
    };
    let reports = |images: &[&[&str]]| -> Vec<crate::census::CensusReport> {
        images
            .iter()
            .flat_map(|i| match census_done(i) {
                Event::Input(Input::Census(r)) => r,
                _ => unreachable!(),
            })
            .collect()
    };
    let listings: [&[&str]; 2] = [&[], &["orphan"]];
    let mut alone = census_world();
    listed(&mut alone);
    let mut one_by_one = Vec::new();
    for r in reports(&listings) {
        one_by_one.extend(writes(&alone.step(Event::Input(Input::Census(vec![r])))));
    }
    let mut together = census_world();
    listed(&mut together);
    let fx = together.step(Event::Input(Input::Census(reports(&listings))));
    assert_eq!(writes(&fx), one_by_one);
    assert_eq!(
        one_by_one.len(),
        1,
        "the second listing's orphan: {one_by_one:?}"
    );
}

// ---- Effects: logs, gauges, the next wake-up ----

/// The world with `mariadb-pv` (a Released Retain PV: a finding to create) and every store
/// listed; returns the name of the create asked for and the Event it tells.
fn listed_with_mariadb(w: &mut World) -> (Arc<str>, Option<crate::run::controller::Told>) {
    let events = [
        w.put_pv(&mariadb_pv()),
        w.put_class(class("standard", "Retain")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
    ];
    for event in events {
        assert!(w.step(event).writes.is_empty());
    }
    let fx = w.step(listed_leftovers());
    assert_eq!(writes(&fx), ["create mariadb-pv"]);
    let start = fx.writes.into_iter().next().expect("one write");
    (start.name, start.told)
}

/// A create refused because the identity may not create VolumeLeftovers: a failure of the
/// resource type, not of the object.
fn forbidden_create() -> WriteError {
    WriteError::Create {
        name: "mariadb-pv".into(),
        source: RequestError::Client(kube::Error::Api(
            kube::core::Status::failure("forbidden", "Forbidden")
                .with_code(403)
                .boxed(),
        )),
    }
}

fn blocked_lines(fx: &Effects) -> usize {
    fx.logs
        .iter()
        .filter(|l| matches!(l, Log::WritesBlocked { .. }))
        .count()
}

fn unblocked_lines(fx: &Effects) -> usize {
    fx.logs
        .iter()
        .filter(|l| matches!(l, Log::WritesUnblocked))
        .count()
}

/// Writes failing as a whole are logged once when they start failing (an error), not at every
/// failed probe after it, and once when a write lands again (an info); the gauge follows.
#[tokio::test(start_paused = true)]
async fn writes_blocked_is_logged_once_per_change() {
    let mut w = world();
    let (name, told) = listed_with_mariadb(&mut w);
    let fx = w.step(Event::Written {
        name,
        result: Err(forbidden_create()),
        told,
    });
    assert_eq!(blocked_lines(&fx), 1, "{:?}", fx.logs);
    assert!(
        matches!(&fx.logs[0], Log::WriteFailed { .. }),
        "the failure itself first: {:?}",
        fx.logs
    );
    assert!(fx.gauges.contains(&Gauge::WritesBlocked(true)));
    // The probes keep failing: no second error, no second gauge change.
    let mut probes = 0;
    while probes < 3 {
        w.machine.scheduler.next_wake().await;
        let fx = w.step(Event::Woke);
        assert_eq!(blocked_lines(&fx), 0, "{:?}", fx.logs);
        let Some(start) = fx.writes.into_iter().next() else {
            continue;
        };
        probes += 1;
        let fx = w.step(Event::Written {
            name: start.name,
            result: Err(forbidden_create()),
            told: start.told,
        });
        assert_eq!(blocked_lines(&fx), 0, "probe {probes}: {:?}", fx.logs);
        assert!(!fx.gauges.contains(&Gauge::WritesBlocked(true)));
        assert!(fx.logs.contains(&Log::WriteFailedAgain {
            error: forbidden_create().to_string()
        }));
    }
    // A probe lands: one info line, the gauge cleared.
    let start = loop {
        w.machine.scheduler.next_wake().await;
        if let Some(start) = w.step(Event::Woke).writes.into_iter().next() {
            break start;
        }
    };
    let landed = || Written {
        op: Op::Create,
        outcome: Outcome::Done,
        echo: None,
        requests: 1,
    };
    let fx = w.step(Event::Written {
        name: start.name,
        result: Ok(landed()),
        told: start.told,
    });
    assert_eq!(unblocked_lines(&fx), 1, "{:?}", fx.logs);
    assert!(fx.gauges.contains(&Gauge::WritesBlocked(false)));
    let fx = w.step(Event::Tick(Tick::Resync));
    assert_eq!(unblocked_lines(&fx) + blocked_lines(&fx), 0);
}

/// A finding that shows up in the store counts once in the gauges (the same object again does
/// not count twice) and is taken off when it goes; the age of the oldest open finding is read
/// from the wall clock handed in, not from the machine's own.
#[tokio::test(start_paused = true)]
async fn a_published_finding_is_counted_once_and_taken_off_when_it_goes() {
    let mut w = world();
    let o = published_claim_missing();
    let p = published(&super::fixtures::lean(&o)).expect("a managed finding");
    let vl_in = w.put_leftover(&o);
    let fx = w.step(vl_in);
    let counted = |fx: &Effects, delta| {
        fx.gauges
            .iter()
            .filter(|g| {
                **g == Gauge::Finding {
                    published: p.clone(),
                    delta,
                }
            })
            .count()
    };
    assert_eq!(counted(&fx, 1), 1, "{:?}", fx.gauges);
    let vl_in = w.put_leftover(&o);
    let fx = w.step(vl_in);
    assert_eq!(counted(&fx, 1) + counted(&fx, -1), 0, "{:?}", fx.gauges);
    // Published an hour before the wall clock the test hands in.
    let fx = w.step(Event::Tick(Tick::Ages));
    assert!(
        fx.gauges.contains(&Gauge::OldestOpen {
            reason: Reason::BoundClaimMissing,
            seconds: 3600,
        }),
        "{:?}",
        fx.gauges
    );
    let l = super::fixtures::lean(&o);
    w.vl.apply_watcher_event(&watcher::Event::Delete(l.clone()));
    let fx = w.step(Event::Input(Input::Vl(Box::new(FeedItem::Deleted(l)))));
    assert_eq!(counted(&fx, -1), 1, "{:?}", fx.gauges);
    assert_eq!(counted(&fx, 1), 0);
}

/// A state passing through is held for its grace: the machine says it must be woken when the
/// grace ends, and is then, and writes.
#[tokio::test(start_paused = true)]
async fn the_next_wake_up_is_the_end_of_the_grace() {
    let mut w = world();
    let events = [
        w.put_pv(&pv("b").retain().bound().claim("ns", "c", "uid-1")),
        w.put_class(class("standard", "Retain")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
    ];
    for event in events {
        assert_eq!(w.step(event).wake, None, "nothing is decided yet");
    }
    let seen = Instant::now();
    let fx = w.step(listed_leftovers());
    assert!(fx.writes.is_empty(), "the claim may yet show up");
    let grace = Settings::default().graces.grace;
    assert_eq!(fx.wake, Some(seen + grace));
    // Both clocks move on together (the grace is counted on the wall clock).
    let wall = |since: Duration| now_plus(i64::try_from(since.as_secs()).expect("small"));
    tokio::time::advance(Duration::from_secs(10)).await;
    let fx = w.machine.step(
        Event::Tick(Tick::Resync),
        Instant::now(),
        &wall(seen.elapsed()),
    );
    assert_eq!(fx.wake, Some(seen + grace), "a sweep does not restart it");
    w.machine.scheduler.next_wake().await;
    assert_eq!(Instant::now(), seen + grace, "woken when it said");
    let fx = w
        .machine
        .step(Event::Woke, Instant::now(), &wall(seen.elapsed()));
    assert_eq!(writes(&fx), ["create b"]);
}

/// After a write the name waits for its echo: the machine says it must be woken when the echo
/// wait ends.
#[tokio::test(start_paused = true)]
async fn the_next_wake_up_is_the_end_of_the_echo_wait() {
    let mut w = world();
    let (name, told) = listed_with_mariadb(&mut w);
    let written = Instant::now();
    let fx = w.step(Event::Written {
        name,
        result: Ok(Written {
            op: Op::Create,
            outcome: Outcome::Done,
            echo: Some(Echo::Version("1001".into())),
            requests: 1,
        }),
        told,
    });
    assert_eq!(fx.wake, None, "nothing waits until it is decided again");
    tokio::time::advance(Duration::from_secs(1)).await;
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(fx.writes.is_empty());
    let echo_wait = Settings::default().echo_wait;
    assert_eq!(fx.wake, Some(written + echo_wait));
}

/// A Retain PV deleted while watched leaves its tombstone: logged once, published as a
/// `VolumeDeleted` finding dated by the wall clock handed in with the delete (the pure
/// lifecycle after that, TTL and restarts included, is `tests::name`'s).
#[tokio::test(start_paused = true)]
async fn a_watched_delete_is_a_tombstone_dated_by_the_wall_clock_handed_in() {
    let mut w = world();
    let p = pv("b").retain().bound().claim("ns", "c", "uid-1");
    let events = [
        w.put_pv(&p),
        w.put_claim(claim("ns", "c", "uid-1")),
        w.put_class(class("standard", "Retain")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ];
    for event in events {
        assert!(w.step(event).writes.is_empty(), "b is healthy");
    }
    let v = Volume::from(&p);
    w.pv.apply_watcher_event(&watcher::Event::Delete(v.clone()));
    let deleted = now_plus(30);
    let fx = w.machine.step(
        Event::Input(Input::Pv(Box::new(FeedItem::Deleted(v)))),
        Instant::now(),
        &deleted,
    );
    let tombstones: Vec<_> = fx
        .logs
        .iter()
        .filter(|l| matches!(l, Log::Store(StoreLog::Tombstone { .. })))
        .collect();
    assert_eq!(
        tombstones,
        [&Log::Store(StoreLog::Tombstone {
            pv: "b".into(),
            uid: "pv-uid-b".into()
        })]
    );
    let [start] = <[_; 1]>::try_from(fx.writes).expect("one write");
    let Action::Create { object } = &start.action else {
        panic!("expected a Create, got {:?}", start.action);
    };
    let status = object.status.as_ref().expect("a status");
    assert_eq!(status.reason, Reason::VolumeDeleted);
    assert_eq!(status.deleted_at, Some(deleted));
}

/// A Delete-policy PV goes only once ceph-csi deleted its image: a census whose listing began
/// before the PV's delete still holds the image, and that is no leftover (a state only passing
/// through). The same listing without the delete having been watched would report it.
#[tokio::test(start_paused = true)]
async fn an_image_whose_volume_was_deleted_after_the_listing_began_is_no_leftover() {
    let mut w = census_world();
    let p = pv("d").delete().bound().claim("ns", "c", "uid-1").csi(
        "rbd.csi.ceph.com",
        "0001-0024-handle-of-d",
        [
            ("clusterID", FSID),
            ("pool", "k8s-rbd"),
            ("imageName", "csi-vol-d"),
        ],
    );
    let events = [
        w.put_pv(&p),
        w.put_claim(claim("ns", "c", "uid-1")),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ];
    for event in events {
        w.step(event);
    }
    // The claim and the PV deleted (the image already gone in Ceph); the listing began a
    // minute before this step's wall clock and still lists the image.
    let v = Volume::from(&p);
    w.pv.apply_watcher_event(&watcher::Event::Delete(v.clone()));
    w.step(Event::Input(Input::Pv(Box::new(FeedItem::Deleted(v)))));
    let fx = w.step(census_done(&["csi-vol-d"]));
    assert!(
        writes(&fx).is_empty(),
        "no DiskWithoutVolume for an image deleted with its PV: {:?}",
        writes(&fx)
    );
    // A later listing that still lists it: the driver's delete did not happen; now it is left.
    let mut later = listing(&["csi-vol-d"]);
    later.started = now_plus(1);
    let fx = w
        .machine
        .step(census_report(Ok(later)), Instant::now(), &now_plus(2));
    assert_eq!(writes(&fx).len(), 1, "{:?}", writes(&fx));
}

/// Issue 32: volumes whose verdict waits for the census's first answer are not converged: the
/// first round says it converged once the census has answered and what followed is written, not
/// when the stores have listed and every verdict still waits.
#[tokio::test(start_paused = true)]
async fn a_first_start_converges_after_the_census_first_answers() {
    let mut w = census_world();
    let p = pv("d")
        .retain()
        .released()
        .since(now_plus(-600))
        .claim_by_name("ns", "c")
        .csi(
            "rbd.csi.ceph.com",
            "0001-0024-handle-of-d",
            [
                ("clusterID", FSID),
                ("pool", "k8s-rbd"),
                ("imageName", "csi-vol-d"),
            ],
        );
    let converged = |fx: &Effects| {
        fx.logs
            .iter()
            .filter(|l| matches!(l, Log::Converged { .. }))
            .count()
    };
    let mut said = 0;
    for event in [
        w.put_pv(&p),
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ] {
        let fx = w.step(event);
        assert!(fx.writes.is_empty(), "the verdict waits for the census");
        said += converged(&fx);
    }
    assert_eq!(said, 0, "not converged while the census has not answered");
    let fx = w.step(census_done(&["csi-vol-d"]));
    assert_eq!(converged(&fx), 0, "its write is in flight");
    let [start] = <[_; 1]>::try_from(fx.writes).expect("the finding, once the census answered");
    let fx = w.step(Event::Written {
        name: start.name.clone(),
        result: Ok(Written {
            op: Op::Create,
            outcome: Outcome::Done,
            echo: None,
            requests: 1,
        }),
        told: start.told,
    });
    let Some(Log::Converged { written, .. }) =
        fx.logs.iter().find(|l| matches!(l, Log::Converged { .. }))
    else {
        panic!("converged once its write landed: {:?}", fx.logs);
    };
    assert_eq!(*written, 1);
}

/// Issue 29: a first start that publishes many findings says how far it is every few seconds
/// (writes done, names to go, states held in a grace) and once, when nothing is queued or in
/// flight, that it converged; not before it decides, and never again after.
#[tokio::test(start_paused = true)]
async fn a_first_start_says_how_far_it_is_and_once_that_it_converged() {
    let settings = Settings {
        concurrency: 2,
        ..Settings::default()
    };
    let mut w = world_with(settings);
    let mut events = vec![w.put_class(class("standard", "Retain"))];
    for i in 0..6 {
        let p = pv(&format!("r{i}"))
            .retain()
            .released()
            .since(now_plus(-600))
            .claim_by_name("ns", &format!("c{i}"))
            .class("standard");
        events.push(w.put_pv(&p));
    }
    // One state held in its grace: a Bound volume whose claim is missing.
    events.push(w.put_pv(&pv("held").retain().bound().claim("ns", "gone", "u-9")));
    events.extend([listed_pvs(), listed_claims(), listed_classes()]);
    let mut logs = Vec::new();
    for e in events {
        let fx = w.step(e);
        assert!(
            fx.writes.is_empty(),
            "nothing is decided before every store listed"
        );
        logs.extend(fx.logs);
    }
    let said = |logs: &[Log]| {
        logs.iter()
            .filter(|l| matches!(l, Log::Converging { .. } | Log::Converged { .. }))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(said(&logs).is_empty(), "{logs:?}");
    let mut fx = w.step(listed_leftovers());
    let mut progress = Vec::new();
    // Each write lands three seconds after it started, two at a time.
    while !fx.writes.is_empty() {
        progress.extend(said(&fx.logs));
        tokio::time::advance(Duration::from_secs(3)).await;
        let mut next = Effects::default();
        for start in fx.writes {
            let landed = w.step(Event::Written {
                name: start.name.clone(),
                result: Ok(Written {
                    op: Op::Create,
                    outcome: Outcome::Done,
                    echo: None,
                    requests: 1,
                }),
                told: start.told,
            });
            progress.extend(said(&landed.logs));
            next.writes.extend(landed.writes);
        }
        fx = next;
    }
    let converged: Vec<&Log> = progress
        .iter()
        .filter(|l| matches!(l, Log::Converged { .. }))
        .collect();
    assert_eq!(converged.len(), 1, "{progress:?}");
    let Log::Converged { held, written, .. } = converged[0] else {
        unreachable!()
    };
    assert_eq!((*held, *written), (1, 6), "{progress:?}");
    let during: Vec<&Log> = progress
        .iter()
        .filter(|l| matches!(l, Log::Converging { .. }))
        .collect();
    assert!(
        !during.is_empty(),
        "nine seconds of writes said how far they were: {progress:?}"
    );
    assert!(
        matches!(progress.last(), Some(Log::Converged { .. })),
        "nothing after the convergence: {progress:?}"
    );
    tokio::time::advance(Duration::from_secs(30)).await;
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(said(&fx.logs).is_empty(), "said once: {:?}", fx.logs);
}

/// Each report tick with no report write in flight is a look at the report, counted whether or
/// not it writes: what lets a test (or a person) tell that the leader looked after a change,
/// and that no write it started is still on its way, without waiting a tick's worth of time.
#[tokio::test(start_paused = true)]
async fn each_report_tick_with_no_report_write_in_flight_is_a_counted_look() {
    let mut w = world_reporting(Settings::default(), true);
    for e in [
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ] {
        w.step(e);
    }
    let looks = |fx: &Effects| {
        fx.gauges
            .iter()
            .filter(|g| matches!(g, Gauge::ReportChecked))
            .count()
    };
    let fx = w.step(Event::Tick(Tick::Report));
    assert_eq!(looks(&fx), 1);
    let first = fx
        .report
        .expect("the first look compares with what is there");
    let fx = w.step(Event::Tick(Tick::Report));
    assert_eq!(looks(&fx), 0, "its write is in flight: no look");
    assert!(fx.report.is_none());
    w.step(Event::Reported {
        content: first.content,
        applied: crate::publish::report::Applied::Unchanged,
    });
    let fx = w.step(Event::Tick(Tick::Report));
    assert_eq!(looks(&fx), 1, "looked again once the write ended");
    assert!(fx.report.is_none(), "nothing changed: nothing written");
}
