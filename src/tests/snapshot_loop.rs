//! Snapshot findings in the operator's loop (`run::controller::Loop`), driven without a server
//! as `machine.rs` drives the volume findings: the snapshot stores filled by hand, their feeds'
//! items handed to `Loop::step`, and the writes that come back. What is proven: nothing before
//! both snapshot stores listed, nothing while their kinds are not served (and the operator is
//! ready), the findings and their names, a normal snapshot delete publishing nothing, the
//! tombstone of a deleted Retain content (ended by its TTL or an acknowledgement), a
//! pre-provisioned pair not yet bound publishing nothing, and the excluded objects counted.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::fixtures::{VlBuilder, now};
use super::snapshot::{
    content_of, dynamic_content, dynamic_snapshot, pre_content, pre_content_after_snapshot_delete,
    snapshot_of, velero_labelled,
};
use crate::decide::plan::Action;
use crate::decide::snapshot::{content_leftover_name, snapshot_leftover_name};
use crate::model::crd::{Reason, Subject, VolumeLeftover};
use crate::model::leftover::Leftover;
use crate::model::snapshot::{Snapshot, SnapshotContent};
use crate::publish::leader::Role;
use crate::publish::writer::{Op, Outcome, Written};
use crate::run::controller::{Effects, Event, Gauge, Log, Loop, Tick, WatchLog};
use crate::run::settings::Settings;
use crate::run::wiring::{Input, Stores};
use crate::telemetry::{Health, Kind, StoreState};
use crate::watch::feed::FeedItem;

/// The loop with its six stores and the hands that fill the VolumeLeftover and snapshot stores.
struct World {
    machine: Loop,
    health: Arc<Health>,
    vl: Writer<Leftover>,
    vsc: Writer<SnapshotContent>,
    vs: Writer<Snapshot>,
    _stores: (
        Writer<crate::model::volume::Volume>,
        Writer<crate::decide::lookup::Claim>,
        Writer<StorageClass>,
    ),
    _role: tokio::sync::watch::Sender<Role>,
}

fn world() -> World {
    world_with(Settings::default())
}

fn world_with(settings: Settings) -> World {
    let (pv_store, pv) = reflector::store();
    let (pvc_store, pvc) = reflector::store();
    let (sc_store, sc) = reflector::store();
    let (vl_store, vl) = reflector::store();
    let (vsc_store, vsc) = reflector::store();
    let (vs_store, vs) = reflector::store();
    let (role_tx, role) = tokio::sync::watch::channel(Role::Unelected);
    let health = Arc::new(Health::new(Duration::from_secs(60)));
    let machine = Loop::new(
        Stores {
            pv: pv_store,
            pvc: pvc_store,
            sc: sc_store,
            vl: vl_store,
            vsc: vsc_store,
            vs: vs_store,
        },
        role,
        false,
        settings,
        health.clone(),
        std::time::Instant::now,
        Instant::now(),
    );
    World {
        machine,
        health,
        vl,
        vsc,
        vs,
        _stores: (pv, pvc, sc),
        _role: role_tx,
    }
}

fn listed<K>(wrap: fn(Box<FeedItem<K>>) -> Input) -> Event {
    Event::Input(wrap(Box::new(FeedItem::Listed { gone: Vec::new() })))
}

/// The four volume stores listed (empty): the loop decides from here on.
fn volumes_listed() -> Vec<Event> {
    vec![
        listed(Input::Pv),
        listed(Input::Pvc),
        listed(Input::Sc),
        listed(Input::Vl),
    ]
}

impl World {
    fn step(&mut self, event: Event) -> Effects {
        self.machine.step(event, Instant::now(), &now())
    }
    fn steps(&mut self, events: Vec<Event>) -> Vec<String> {
        events
            .into_iter()
            .flat_map(|e| writes(&self.step(e)))
            .collect()
    }
    fn put_content(&mut self, v: Value) -> Event {
        let c = content_of(v);
        self.vsc
            .apply_watcher_event(&watcher::Event::Apply(c.clone()));
        Event::Input(Input::Vsc(Box::new(FeedItem::Applied(c))))
    }
    fn delete_content(&mut self, v: Value) -> Event {
        let c = content_of(v);
        self.vsc
            .apply_watcher_event(&watcher::Event::Delete(c.clone()));
        Event::Input(Input::Vsc(Box::new(FeedItem::Deleted(c))))
    }
    fn put_snapshot(&mut self, v: Value) -> Event {
        let s = snapshot_of(v);
        self.vs
            .apply_watcher_event(&watcher::Event::Apply(s.clone()));
        Event::Input(Input::Vs(Box::new(FeedItem::Applied(s))))
    }
    fn delete_snapshot(&mut self, v: Value) -> Event {
        let s = snapshot_of(v);
        self.vs
            .apply_watcher_event(&watcher::Event::Delete(s.clone()));
        Event::Input(Input::Vs(Box::new(FeedItem::Deleted(s))))
    }
    /// The write a step asked for lands; returns the object as the store then shows it.
    fn echo(&mut self, fx: &Effects) -> Event {
        let o = written(fx);
        let w = &fx.writes[0];
        let op = match &w.action {
            Action::Create { .. } => Op::Create,
            _ => Op::Apply,
        };
        let landed = Event::Written {
            name: w.name.clone(),
            result: Ok(Written {
                op,
                outcome: Outcome::Done,
                echo: None,
                requests: 1,
            }),
            told: None,
        };
        self.step(landed);
        let l = super::fixtures::lean(&o);
        self.vl
            .apply_watcher_event(&watcher::Event::Apply(l.clone()));
        Event::Input(Input::Vl(Box::new(FeedItem::Applied(l))))
    }
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

/// The one object a step asked to create or apply, stored as the API server would keep it.
fn written(fx: &Effects) -> VolumeLeftover {
    let [w] = fx.writes.as_slice() else {
        panic!("one write: {:?}", writes(fx));
    };
    match &w.action {
        Action::Create { object } | Action::Apply { object, .. } => {
            (**object).clone().stored_as("vl-snap-uid")
        }
        a => panic!("not a create or apply: {a:?}"),
    }
}

fn with_deletion(mut v: Value) -> Value {
    v["metadata"]["deletionTimestamp"] = json!("2026-03-01T12:00:00Z");
    v
}

const PRE: &str = "pre-content";

/// The SnapshotDeleted finding of `pre-content` as the loop publishes it.
fn published_snapshot_deleted() -> VolumeLeftover {
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_content(pre_content_after_snapshot_delete()));
    events.push(listed(Input::Vsc));
    w.steps(events);
    written(&w.step(listed(Input::Vs)))
}

/// A Retain content whose snapshot was deleted is reported only once both snapshot stores have
/// listed: an empty snapshot store would make every bound content's snapshot look gone.
#[tokio::test(start_paused = true)]
async fn nothing_about_snapshots_before_both_snapshot_stores_listed() {
    let mut w = world();
    let mut asked = w.steps(volumes_listed());
    let content = w.put_content(pre_content_after_snapshot_delete());
    asked.extend(w.steps(vec![content, listed(Input::Vsc), Event::Tick(Tick::Resync)]));
    assert_eq!(asked, Vec::<String>::new(), "the snapshots have not listed");
    let fx = w.step(listed(Input::Vs));
    let name = content_leftover_name(PRE);
    assert_eq!(writes(&fx), [format!("create {name}")]);
    let o = written(&fx);
    let s = o.status.as_ref().expect("a status");
    assert_eq!(s.reason, Reason::SnapshotDeleted);
    assert_eq!(s.subject, Subject::SnapshotContent);
    assert_eq!(o.spec.volume_name, "", "no volume: a snapshot finding");
    let info = s.snapshot.as_ref().expect("status.snapshot");
    assert_eq!(info.content.as_deref(), Some(PRE));
    assert_eq!(info.snapshot.as_deref(), Some("default/pre-snap"));
    assert!(
        fx.events.is_empty(),
        "no Event: there is no PersistentVolume to attach it to"
    );
    // Written, echoed: nothing more to do, and the finding stays at the next sweep.
    let echo = w.echo(&fx);
    assert!(w.step(echo).writes.is_empty());
    assert!(w.step(Event::Tick(Tick::Resync)).writes.is_empty());
}

/// Without the snapshot CRDs the two stores are NotServed: the operator is ready, says so once,
/// and a published snapshot finding is neither changed nor cleared on that account.
#[tokio::test(start_paused = true)]
async fn kinds_not_served_keep_the_operator_ready_and_clear_nothing() {
    let mut w = world();
    w.steps(volumes_listed());
    let not_served = |wrap: fn(Box<FeedItem<Snapshot>>) -> Input| {
        Event::Input(wrap(Box::new(FeedItem::NotServed {
            check_in: Duration::from_secs(30),
        })))
    };
    let contents_not_served = Event::Input(Input::Vsc(Box::new(FeedItem::NotServed {
        check_in: Duration::from_secs(30),
    })));
    let fx = w.step(contents_not_served);
    let said = |fx: &Effects| {
        fx.logs
            .iter()
            .filter(|l| matches!(l, Log::Watch(WatchLog::NotServed { .. })))
            .count()
    };
    assert_eq!(said(&fx), 1, "{:?}", fx.logs);
    assert!(
        fx.gauges.iter().any(|g| matches!(
            g,
            Gauge::StoreState {
                kind: Kind::volumesnapshotcontents,
                state: StoreState::NotServed
            }
        )),
        "{:?}",
        fx.gauges
    );
    let fx = w.step(not_served(Input::Vs));
    assert_eq!(said(&fx), 1);
    let again = Event::Input(Input::Vsc(Box::new(FeedItem::NotServed {
        check_in: Duration::from_secs(30),
    })));
    assert_eq!(said(&w.step(again)), 0, "once per change");
    let (ready, body) = w.health.report();
    assert!(ready, "{body}");
    assert!(body.contains("volumesnapshots: NotServed"), "{body}");

    // A snapshot finding published before the CRDs went: it stays.
    let published = published_snapshot_deleted();
    let vl_in = {
        let l = super::fixtures::lean(&published);
        w.vl.apply_watcher_event(&watcher::Event::Apply(l.clone()));
        Event::Input(Input::Vl(Box::new(FeedItem::Applied(l))))
    };
    assert!(w.step(vl_in).writes.is_empty(), "kept: nothing is known");
    assert!(w.step(Event::Tick(Tick::Resync)).writes.is_empty());
}

/// A normal delete of a dynamic snapshot (the snapshot marked deleted, its Delete content
/// deleted by the controller and the driver, then the snapshot gone) publishes nothing at any
/// step.
#[tokio::test(start_paused = true)]
async fn a_normal_snapshot_delete_publishes_nothing() {
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_content(dynamic_content()));
    events.push(w.put_snapshot(dynamic_snapshot()));
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    let mut asked = w.steps(events);
    let deleting = w.put_snapshot(with_deletion(dynamic_snapshot()));
    asked.extend(writes(&w.step(deleting)));
    let mut content = dynamic_content();
    content["metadata"]["annotations"] =
        json!({"snapshot.storage.kubernetes.io/volumesnapshot-being-deleted": "yes"});
    let annotated = w.put_content(with_deletion(content.clone()));
    asked.extend(writes(&w.step(annotated)));
    let gone = w.delete_content(with_deletion(content));
    asked.extend(writes(&w.step(gone)));
    let gone = w.delete_snapshot(with_deletion(dynamic_snapshot()));
    asked.extend(writes(&w.step(gone)));
    asked.extend(writes(&w.step(Event::Tick(Tick::Resync))));
    assert_eq!(asked, Vec::<String>::new());
}

/// A Bound snapshot whose content is gone is SnapshotContentMissing once it lasted `--grace`
/// (its start is not dated by the objects), under the snapshot's name; the content back (a
/// store that only lagged) clears it.
#[tokio::test(start_paused = true)]
async fn a_bound_snapshot_without_its_content_waits_its_grace() {
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_snapshot(dynamic_snapshot()));
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    let asked = w.steps(events);
    assert_eq!(asked, Vec::<String>::new(), "within the grace");
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(fx.writes.is_empty());
    let wake = fx.wake.expect("woken when the grace ends");
    let wait = wake.saturating_duration_since(Instant::now());
    assert!(
        wait >= Duration::from_secs(110) && wait <= Duration::from_secs(125),
        "--grace (120 s) from the first observation: {wait:?}"
    );
    w.machine.scheduler.next_wake().await;
    let later = super::fixtures::now_plus(i64::try_from(wait.as_secs()).unwrap());
    let fx = w.machine.step(Event::Woke, Instant::now(), &later);
    let name = snapshot_leftover_name("default", "new-snapshot-demo");
    assert_eq!(writes(&fx), [format!("create {name}")]);
    assert_eq!(
        written(&fx).status.unwrap().reason,
        Reason::SnapshotContentMissing
    );
    let echo = w.echo(&fx);
    w.machine.step(echo, Instant::now(), &later);
    let back = w.put_content(dynamic_content());
    let fx = w.machine.step(back, Instant::now(), &later);
    assert_eq!(writes(&fx), [format!("delete {name}")]);
}

/// A Retain content with a backend snapshot that is deleted leaves a ContentDeleted tombstone:
/// the last record of the snapshot, kept across sweeps, until the TTL when one is set.
#[tokio::test(start_paused = true)]
async fn a_deleted_retain_content_is_kept_as_a_tombstone_until_its_ttl() {
    let mut w = world_with(Settings {
        tombstone_ttl: Some(Duration::from_secs(3600)),
        ..Settings::default()
    });
    let mut events = volumes_listed();
    events.push(w.put_content(pre_content()));
    events.push(w.put_snapshot(bound_pre_snapshot()));
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    assert_eq!(w.steps(events), Vec::<String>::new(), "bound both ways");
    let gone = w.delete_content(pre_content());
    let fx = w.step(gone);
    let name = content_leftover_name(PRE);
    // The snapshot's own finding (its content gone) waits its grace; the tombstone does not.
    assert_eq!(writes(&fx), [format!("create {name}")]);
    let o = written(&fx);
    let s = o.status.as_ref().unwrap();
    assert_eq!(s.reason, Reason::ContentDeleted);
    assert_eq!(s.deleted_at.as_ref(), Some(&now()));
    assert_eq!(
        s.snapshot.as_ref().unwrap().snapshot_handle.as_deref(),
        Some("snap-handle-1")
    );
    let echo = w.echo(&fx);
    assert_eq!(writes(&w.step(echo)), Vec::<String>::new());
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(
        !writes(&fx).contains(&format!("delete {name}")),
        "{:?}",
        writes(&fx)
    );
    // An hour after the delete, the TTL: the tombstone goes.
    let later = super::fixtures::now_plus(3601);
    let fx = w
        .machine
        .step(Event::Tick(Tick::Resync), Instant::now(), &later);
    assert!(
        writes(&fx).contains(&format!("delete {name}")),
        "{:?}",
        writes(&fx)
    );
}

/// Issue 33: a person acknowledges the ContentDeleted tombstone (`kubectl patch vl ... -p
/// '{"spec":{"acknowledgement":{...}}}'`): the record now lives in their ticket, and the
/// tombstone is deleted at once, as a volume's is. Without the census there is nothing else to
/// wait for.
#[tokio::test(start_paused = true)]
async fn an_acknowledged_content_tombstone_is_deleted() {
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_content(pre_content()));
    events.push(w.put_snapshot(bound_pre_snapshot()));
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    assert_eq!(w.steps(events), Vec::<String>::new(), "bound both ways");
    let gone = w.delete_content(pre_content());
    let fx = w.step(gone);
    let name = content_leftover_name(PRE);
    assert_eq!(writes(&fx), [format!("create {name}")]);
    let mut o = written(&fx);
    let echo = w.echo(&fx);
    assert_eq!(writes(&w.step(echo)), Vec::<String>::new());

    o.spec.acknowledgement = Some(crate::model::crd::Acknowledgement {
        by: Some("acc".into()),
        ticket: Some("ACC-I5".into()),
        reason: Some("backend snapshot checked".into()),
        until: None,
    });
    o.metadata.generation = Some(2);
    o.metadata.resource_version = Some("1002".into());
    let l = super::fixtures::lean(&o);
    w.vl.apply_watcher_event(&watcher::Event::Apply(l.clone()));
    let patched = Event::Input(Input::Vl(Box::new(FeedItem::Applied(l))));
    assert_eq!(writes(&w.step(patched)), [format!("delete {name}")]);
}

/// The snapshot `default/pre-snap` bound to [`pre_content`].
fn bound_pre_snapshot() -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": "pre-snap",
            "namespace": "default",
            "uid": super::snapshot::SNAP_UID,
            "creationTimestamp": "2026-03-01T11:00:00Z"
        },
        "spec": {"source": {"volumeSnapshotContentName": PRE}},
        "status": {"boundVolumeSnapshotContentName": PRE, "readyToUse": true}
    })
}

/// A backup tool's content whose snapshot is gone is no finding, and is counted.
#[tokio::test(start_paused = true)]
async fn a_backup_tools_content_is_counted_not_reported() {
    let mut w = world();
    let mut events = volumes_listed();
    let content = w.put_content(velero_labelled(pre_content_after_snapshot_delete()));
    events.push(content);
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    let mut counted = None;
    let mut asked = Vec::new();
    for e in events {
        let fx = w.step(e);
        asked.extend(writes(&fx));
        for g in &fx.gauges {
            if let Gauge::SnapshotsExcluded(c, s) = g {
                counted = Some((*c, *s));
            }
        }
    }
    assert_eq!(asked, Vec::<String>::new());
    assert_eq!(counted, Some((1, 0)), "one content kept out");
}

/// A snapshot of the gone one's name, with another uid: the content that names that name is
/// decided again (the index knows which contents name each snapshot) and becomes
/// SnapshotRecreated, reporting both uids.
#[tokio::test(start_paused = true)]
async fn a_recreated_snapshot_name_decides_the_content_that_names_it_again() {
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_content(pre_content_after_snapshot_delete()));
    events.push(listed(Input::Vsc));
    w.steps(events);
    let fx = w.step(listed(Input::Vs));
    let name = content_leftover_name(PRE);
    assert_eq!(writes(&fx), [format!("create {name}")]);
    let echo = w.echo(&fx);
    assert!(w.step(echo).writes.is_empty());
    let mut again = bound_pre_snapshot();
    again["metadata"]["uid"] = json!(super::snapshot::NEW_UID);
    again["status"] = json!({});
    // Of a claim, not of this content: only the content's own reference ties the two.
    again["spec"] = json!({"source": {"persistentVolumeClaimName": "data"}});
    let recreated = w.put_snapshot(again);
    let fx = w.step(recreated);
    assert_eq!(writes(&fx), [format!("apply {name}")]);
    let s = written(&fx).status.unwrap();
    assert_eq!(s.reason, Reason::SnapshotRecreated);
    let info = s.snapshot.unwrap();
    assert_eq!(
        info.snapshot_uid.as_deref(),
        Some(super::snapshot::SNAP_UID)
    );
    assert_eq!(info.current_uid.as_deref(), Some(super::snapshot::NEW_UID));
}

/// Issue 33, in the loop: pre-provisioned pairs applied at once, which the controller has not
/// bound yet long after `--grace` (a backlog). A content whose snapshot names it back is being
/// bound: nothing is written about it, at the lists or at a resync. A content whose snapshot
/// names another content is ContentNeverBound, as before.
#[tokio::test(start_paused = true)]
async fn a_pre_provisioned_pair_the_controller_has_not_bound_yet_is_no_finding() {
    let unbound = |content: &str, uid: &str, snapshot: &str| {
        let mut v = pre_content();
        v["metadata"]["name"] = json!(content);
        v["metadata"]["uid"] = json!(uid);
        v["spec"]["volumeSnapshotRef"] = json!({"name": snapshot, "namespace": "default"});
        v
    };
    let naming = |snapshot: &str, uid: &str, content: &str| {
        json!({
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshot",
            "metadata": {
                "name": snapshot,
                "namespace": "default",
                "uid": uid,
                "creationTimestamp": "2026-03-01T11:00:00Z"
            },
            "spec": {"source": {"volumeSnapshotContentName": content}}
        })
    };
    let mut w = world();
    let mut events = volumes_listed();
    events.push(w.put_content(unbound(
        "pair-content",
        "11111111-1111-4111-8111-111111111111",
        "pair-snap",
    )));
    events.push(w.put_snapshot(naming(
        "pair-snap",
        "22222222-2222-4222-8222-222222222222",
        "pair-content",
    )));
    events.push(w.put_content(unbound(
        "lone-content",
        "33333333-3333-4333-8333-333333333333",
        "lone-snap",
    )));
    events.push(w.put_snapshot(naming(
        "lone-snap",
        "44444444-4444-4444-8444-444444444444",
        "another-content",
    )));
    events.push(listed(Input::Vsc));
    events.push(listed(Input::Vs));
    let lone = content_leftover_name("lone-content");
    assert_eq!(w.steps(events), [format!("create {lone}")]);
    let fx = w.step(Event::Tick(Tick::Resync));
    assert!(
        !writes(&fx).contains(&format!("create {}", content_leftover_name("pair-content"))),
        "{:?}",
        writes(&fx)
    );
}
