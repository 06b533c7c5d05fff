//! `decide::name`: the whole decision about one name, as the loop makes it, with the stores as
//! plain maps and both clocks passed in. Each table pairs a case that must hold back with its
//! twin that must write, so a decision that stops holding back (or never writes) fails.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::{
    FakeLookup, PvBuilder, VlBuilder, finding, lookup, mariadb_finding, mariadb_pv, now, now_plus,
    pv,
};
use crate::census::ceph::handle::PoolKey;
use crate::census::ceph::vocabulary::leftover_name;
use crate::decide::census::{Census, DiskFacts, Scope, ScopeListing, Seen};
use crate::decide::classify::{classify, tombstone};
use crate::decide::name::{
    Decision, Echo, FOREIGN, Held, HeldChange, Images, Inputs, Log, Memo, Outcome, Rules, Stores,
};
use crate::decide::plan::{Action, Graces, desired};
use crate::model::crd::{ImageOwner, Reason};
use crate::model::finding::{Change, Finding, Verdict};
use crate::model::labels::MANAGED_BY;
use crate::model::leftover::Leftover;
use crate::model::volume::Volume;

const GRACES: Graces = Graces {
    grace: Duration::from_secs(120),
    delete_grace: Duration::from_secs(600),
    expansion_grace: Duration::from_secs(120),
};

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";

fn pool() -> PoolKey {
    PoolKey::new(FSID, "k8s-rbd", None)
}

fn key() -> Scope {
    pool().into()
}

/// The operator's view: the PV and VolumeLeftover stores, claims and classes, the census.
struct World {
    stale: bool,
    pvs: BTreeMap<String, Arc<Volume>>,
    vls: BTreeMap<String, Arc<Leftover>>,
    lookup: FakeLookup,
    census: Option<Census>,
    orphans: BTreeMap<String, (Scope, Finding)>,
    held: BTreeMap<String, Scope>,
    unconcluded: std::collections::BTreeSet<Scope>,
    ttl: Option<Duration>,
    prices: Option<crate::model::price::PriceTable>,
    /// Both snapshot stores listed (empty): snapshot names may be decided.
    snapshots_listed: bool,
}

impl Stores for World {
    fn current(&self) -> bool {
        !self.stale
    }
    fn volume(&self, name: &str) -> Option<Arc<Volume>> {
        self.pvs.get(name).cloned()
    }
    fn leftover(&self, name: &str) -> Option<Arc<Leftover>> {
        self.vls.get(name).cloned()
    }
    fn snapshots_current(&self) -> bool {
        self.snapshots_listed
    }
}

fn world() -> World {
    World {
        stale: false,
        pvs: BTreeMap::new(),
        vls: BTreeMap::new(),
        lookup: lookup().with_class("standard", "Retain"),
        census: None,
        orphans: BTreeMap::new(),
        held: BTreeMap::new(),
        unconcluded: Default::default(),
        ttl: None,
        prices: None,
        snapshots_listed: false,
    }
}

impl World {
    fn pv(mut self, p: PersistentVolume) -> Self {
        let v = Volume::from(&p);
        self.pvs.insert(
            v.metadata.name.as_deref().unwrap_or_default().into(),
            Arc::new(v),
        );
        self
    }
    /// The store shows `o` as the API server returned it (resourceVersion 1001).
    fn vl(mut self, o: crate::model::crd::VolumeLeftover) -> Self {
        let name = o.metadata.name.clone().expect("named");
        self.vls.insert(name, Arc::new(super::fixtures::lean(&o)));
        self
    }
    fn census(mut self, c: Census) -> Self {
        self.lookup.census = Some(Arc::new(c.clone()));
        self.census = Some(c);
        self
    }
    fn stale(mut self) -> Self {
        self.stale = true;
        self
    }
    fn decide(&self, name: &str, memo: &mut Memo, at: Instant, now: &Time) -> Outcome {
        let inputs = Inputs {
            stores: self,
            lookup: &self.lookup,
            images: self.census.as_ref().map(|census| Images {
                census,
                orphans: &self.orphans,
                held: &self.held,
                unconcluded: &self.unconcluded,
            }),
            rules: Rules {
                graces: GRACES,
                tombstone_ttl: self.ttl,
                prices: self.prices.as_ref(),
            },
        };
        inputs.decide(name, memo, at, now)
    }
}

/// The decision in one word: `idle`, `wait`, or the write (`create`, `apply`, `delete`).
fn what(o: &Outcome) -> &'static str {
    match &o.decision {
        Decision::Idle => "idle",
        Decision::WaitFor(_) => "wait",
        Decision::Write((Action::Create { .. }, _)) => "create",
        Decision::Write((Action::Apply { .. }, _)) => "apply",
        Decision::Write((Action::Delete { .. }, _)) => "delete",
        Decision::Write((a, _)) => panic!("not a write: {a:?}"),
    }
}

/// What the operator published for `f`, as the store shows it.
fn published(f: &Finding) -> crate::model::crd::VolumeLeftover {
    desired(f, None, &now_plus(-3600), &now_plus(-3600), None).stored_as("vl-uid-1")
}

/// A Bound PV `b` whose claim `ns/c` exists: healthy.
fn healthy() -> (PersistentVolume, FakeLookup) {
    (
        pv("b").retain().bound().claim("ns", "c", "uid-1"),
        lookup().with_claim("ns", "c", "uid-1"),
    )
}

/// The finding published for `b` while its claim was missing.
fn b_claim_missing() -> Finding {
    let (p, _) = healthy();
    let f = finding(&p, &lookup());
    assert_eq!(f.status.reason, Reason::BoundClaimMissing);
    f
}

// ---- Census fixtures ----

fn snapshot(at: Time, images: Vec<(&str, Seen)>) -> ScopeListing {
    ScopeListing {
        started: at,
        scope_id: Some(2),
        images: images
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

/// An image of this cluster, two hours old, its details read.
fn old_image() -> Seen {
    Seen {
        size_only: None,
        users_only: 0,
        id: "1234abcd".into(),
        detail: Some(Box::new(DiskFacts::ceph(
            1 << 30,
            Some(now_plus(-7200).0),
            vec![],
            Some(ImageOwner {
                volume_name: Some("pvc-1".into()),
                claim_namespace: Some("db".into()),
                claim_name: Some("data".into()),
                cluster_name: Some("e2e".into()),
            }),
        ))),
    }
}

fn census() -> Census {
    Census::new([key()], Some("e2e"), Duration::from_secs(3600))
}

/// Two censuses in a row that list `images`: what they say is trusted.
fn listed_twice(images: &[&str]) -> Census {
    let mut c = census();
    for at in [-20, -10] {
        let seen = images.iter().map(|i| (*i, old_image())).collect();
        c.record(&key(), Ok(snapshot(now_plus(at), seen)));
    }
    c
}

/// A census that listed `images` once and then failed (Ceph is down): it answers Unknown.
fn failing(images: &[&str]) -> Census {
    let mut c = census();
    let seen = images.iter().map(|i| (*i, old_image())).collect();
    c.record(&key(), Ok(snapshot(now_plus(-20), seen)));
    c.record(&key(), Err("Ceph is unavailable".into()));
    c
}

/// A Bound ceph-csi PV `data-pv` whose claim exists, its image `csi-vol-data`.
fn rbd_pv() -> PersistentVolume {
    let mut p = pv("data-pv")
        .retain()
        .bound()
        .claim("db", "data", "uid-data")
        .csi(
            "rbd.csi.ceph.com",
            "h",
            [
                ("clusterID", FSID),
                ("pool", "k8s-rbd"),
                ("imageName", "csi-vol-data"),
            ],
        );
    p.metadata.creation_timestamp = Some(now_plus(-86400));
    p
}

/// The `VolumeWithoutDisk` finding published for [`rbd_pv`] when two censuses missed its image.
fn volume_without_image() -> Finding {
    let mut l = lookup().with_claim("db", "data", "uid-data");
    l.census = Some(Arc::new(listed_twice(&[])));
    match classify(&Volume::from(&rbd_pv()), &l, now()) {
        Verdict::Leftover(f) if f.status.reason == Reason::VolumeWithoutDisk => *f,
        other => panic!("{other:?}"),
    }
}

/// The `DiskWithoutVolume` finding about image `orphan`.
fn image_without_volume() -> Finding {
    let f = listed_twice(&["orphan"]).orphans(&key(), &HashSet::new(), &now());
    assert_eq!(f.len(), 1, "{f:?}");
    f.into_iter().next().unwrap()
}

/// The tombstone of [`rbd_pv`] after a watched delete at `at`.
fn rbd_tombstone(at: Time) -> Finding {
    let t = tombstone(&Volume::from(&rbd_pv()), &lookup(), at).expect("a Retain PV leaves a disk");
    assert_eq!(t.status.reason, Reason::VolumeDeleted);
    t
}

// ---- Stale gating ----

/// While the PV or the VolumeLeftover store is not current nothing is decided: no write, the
/// name held as undecided (once for the gauges), its memory untouched. The same names decided
/// on current stores do write.
#[test]
fn nothing_is_decided_on_stale_stores() {
    let (b, b_lookup) = healthy();
    let image = image_without_volume();
    let cases: Vec<(&str, World, &str)> = vec![
        ("a new finding", world().pv(mariadb_pv()), "create"),
        (
            "a cleared finding",
            World {
                lookup: b_lookup,
                ..world()
            }
            .pv(b)
            .vl(published(&b_claim_missing())),
            "delete",
        ),
        (
            // The census was turned off: nobody vouches for the image finding any more.
            "an image finding nobody vouches for",
            world().vl(published(&image)),
            "delete",
        ),
    ];
    let t0 = Instant::now();
    for (case, w, current) in cases {
        let name = w
            .pvs
            .keys()
            .chain(w.vls.keys())
            .next()
            .expect("a name")
            .clone();
        let mut memo = Memo::default();
        let out = w.decide(&name, &mut memo, t0, &now());
        assert_eq!(what(&out), current, "{case}: on current stores");

        let w = w.stale();
        let mut memo = Memo {
            tombstone: Some(Box::new(mariadb_finding())),
            ..Memo::default()
        };
        let out = w.decide(&name, &mut memo, t0, &now());
        assert_eq!(what(&out), "idle", "{case}: stale");
        assert_eq!(
            out.held,
            Some(HeldChange {
                from: None,
                to: Some(Held::Undecided)
            }),
            "{case}"
        );
        assert_eq!(memo.held, Some(Held::Undecided), "{case}");
        assert!(memo.tombstone.is_some(), "{case}: the tombstone is kept");
        let again = w.decide(&name, &mut memo, t0, &now());
        assert_eq!(what(&again), "idle", "{case}: still stale");
        assert_eq!(again.held, None, "{case}: counted once");
    }
}

// ---- Echo wait ----

/// A case, the store it reads, the name, the write waited for, seconds since the write, and
/// the decision.
type EchoCase<'a> = (&'a str, &'a World, &'a str, Option<Echo>, u64, &'a str);

/// After a write the name waits until the VolumeLeftover store shows what it left (or the wait
/// ends): deciding on the older view would send the same write again.
#[test]
fn a_write_not_yet_seen_back_is_waited_for() {
    let (b, b_lookup) = healthy();
    let new_finding = world().pv(mariadb_pv());
    // The store shows the finding at resourceVersion 1001; the volume is healthy now.
    let cleared = World {
        lookup: b_lookup,
        ..world()
    }
    .pv(b)
    .vl(published(&b_claim_missing()));
    let nothing = world();
    let t0 = Instant::now();
    let wait = Duration::from_secs(10);
    #[rustfmt::skip]
    let cases: Vec<EchoCase> = vec![
        ("created, not seen yet", &new_finding, "mariadb-pv", Some(Echo::Exists), 0, "wait"),
        ("created, never seen", &new_finding, "mariadb-pv", Some(Echo::Exists), 10, "create"),
        ("no write before", &new_finding, "mariadb-pv", None, 0, "create"),
        ("applied, older version shown", &cleared, "b", Some(Echo::Version("1002".into())), 0, "wait"),
        ("applied, unparsable version", &cleared, "b", Some(Echo::Version("x".into())), 0, "wait"),
        ("applied, its version shown", &cleared, "b", Some(Echo::Version("1001".into())), 0, "delete"),
        ("applied, a later version shown", &cleared, "b", Some(Echo::Version("999".into())), 0, "delete"),
        ("deleted, still shown", &cleared, "b", Some(Echo::Gone), 5, "wait"),
        ("deleted, gone", &nothing, "b", Some(Echo::Gone), 0, "idle"),
    ];
    for (case, w, name, echo, after, expected) in cases {
        let mut memo = Memo {
            echo: echo.clone().map(|e| (e, t0 + wait)),
            ..Memo::default()
        };
        let out = w.decide(name, &mut memo, t0 + Duration::from_secs(after), &now());
        assert_eq!(what(&out), expected, "{case}");
        if expected == "wait" {
            assert!(
                matches!(out.decision, Decision::WaitFor(d) if d == wait - Duration::from_secs(after)),
                "{case}: until the wait ends: {:?}",
                out.decision
            );
            assert_eq!(memo.echo.map(|e| e.0), echo, "{case}: still waited for");
        } else {
            assert_eq!(memo.echo, None, "{case}: the wait is over");
        }
    }
}

// ---- Census Unknown holds; nothing deleted on Unknown ----

/// What a census that cannot say now (Ceph down, an image's details unreadable) never does:
/// clear a published finding. Each case's twin, where the census answers, does.
#[test]
fn nothing_is_deleted_while_the_census_cannot_say() {
    let vwi = volume_without_image();
    let iwv = image_without_volume();
    let iwv_name = leftover_name(&pool(), "orphan");
    assert_eq!(iwv.name(), iwv_name);
    let with_claim = |w: World| World {
        lookup: lookup().with_claim("db", "data", "uid-data"),
        ..w
    };
    let unread = |w: World| World {
        held: [(iwv_name.clone(), key())].into(),
        ..w
    };
    let t0 = Instant::now();
    #[rustfmt::skip]
    let cases: Vec<(&str, World, &str, &str, Option<Held>)> = vec![
        // A volume whose image was missing: an outage neither finds it again nor clears it.
        ("volume without image, census down", with_claim(world()).pv(rbd_pv()).vl(published(&vwi)).census(failing(&[])), "data-pv", "idle", Some(Held::Undecided)),
        ("volume without image, image back", with_claim(world()).pv(rbd_pv()).vl(published(&vwi)).census(listed_twice(&["csi-vol-data"])), "data-pv", "delete", None),
        // An image nothing references: its finding stays while its pool's census is not trusted.
        ("image without volume, census down", world().vl(published(&iwv)).census(failing(&["orphan"])), &iwv_name, "idle", None),
        ("image without volume, details unreadable", unread(world()).vl(published(&iwv)).census(listed_twice(&["orphan"])), &iwv_name, "idle", None),
        ("image without volume, referenced again", world().vl(published(&iwv)).census(listed_twice(&["orphan"])), &iwv_name, "delete", None),
        // A deleted volume's tombstone: ended only by two censuses without its image.
        ("tombstone, census down", world().vl(published(&rbd_tombstone(now_plus(-60)))).census(failing(&[])), "data-pv", "idle", None),
        ("tombstone, image still there", world().vl(published(&rbd_tombstone(now_plus(-60)))).census(listed_twice(&["csi-vol-data"])), "data-pv", "apply", None),
        ("tombstone, image gone", world().vl(published(&rbd_tombstone(now_plus(-60)))).census(listed_twice(&[])), "data-pv", "delete", None),
    ];
    for (case, w, name, expected, held) in cases {
        let mut memo = Memo::default();
        let out = w.decide(name, &mut memo, t0, &now());
        assert_eq!(what(&out), expected, "{case}");
        assert_eq!(memo.held, held, "{case}");
    }
}

// ---- Tombstones ----

/// A Retain PV deleted while watched: its tombstone is published from the memo (with the Event
/// that it was found), the memo lets go once the store shows it, and the TTL ends it.
#[test]
fn a_watched_delete_becomes_a_tombstone_until_its_ttl() {
    let t0 = Instant::now();
    let deleted = rbd_tombstone(now());
    let mut memo = Memo {
        tombstone: Some(Box::new(deleted.clone())),
        ..Memo::default()
    };
    let w = world();
    let out = w.decide("data-pv", &mut memo, t0, &now());
    let Decision::Write((Action::Create { object }, Some(told))) = out.decision else {
        panic!("expected a create with an Event: {:?}", out.decision)
    };
    let status = object.status.as_ref().expect("status");
    assert_eq!(status.reason, Reason::VolumeDeleted);
    assert!(matches!(
        told.change,
        Change::Found {
            reason: Reason::VolumeDeleted,
            ..
        }
    ));
    assert!(memo.tombstone.is_some(), "kept until the store shows it");

    // The store shows it: the memo lets go, and nothing more is written.
    let ttl = Duration::from_secs(3600);
    let w = World {
        ttl: Some(ttl),
        ..world()
    }
    .vl((*object).clone().stored_as("vl-uid-1"));
    let out = w.decide("data-pv", &mut memo, t0, &now());
    assert_eq!(memo.tombstone, None);
    assert!(
        matches!(out.decision, Decision::WaitFor(d) if d == ttl + Duration::from_secs(1)),
        "wakes when the TTL ends: {:?}",
        out.decision
    );

    // An hour later (the census is off: nothing else ends it) it is deleted.
    let later = now_plus(3600);
    let out = w.decide("data-pv", &mut memo, t0, &later);
    assert_eq!(what(&out), "delete");
    let Decision::Write((_, Some(told))) = out.decision else {
        panic!("the Event that it cleared")
    };
    assert_eq!(
        told.change,
        Change::Cleared {
            reason: Reason::VolumeDeleted
        }
    );
    // Without a TTL it stays.
    let out = world().vl((*object).clone().stored_as("vl-uid-1")).decide(
        "data-pv",
        &mut Memo::default(),
        t0,
        &later,
    );
    assert_eq!(what(&out), "idle");
}

/// Once the store shows the tombstone this process published, the published one is what
/// stays: the memo's copy (the PV's last object, without what the census said since) lets go
/// and does not overwrite it while the census cannot say.
#[test]
fn the_published_tombstone_replaces_the_memos() {
    let t0 = Instant::now();
    let mut memo = Memo {
        tombstone: Some(Box::new(rbd_tombstone(now_plus(-60)))),
        ..Memo::default()
    };
    let out =
        world()
            .census(listed_twice(&["csi-vol-data"]))
            .decide("data-pv", &mut memo, t0, &now());
    let Decision::Write((Action::Create { object }, _)) = out.decision else {
        panic!("{:?}", out.decision)
    };
    assert_ne!(
        object.status.as_ref().map(|s| &s.message),
        memo.tombstone.as_ref().map(|t| &t.status.message),
        "the census's note is published"
    );
    let w = world()
        .census(failing(&["csi-vol-data"]))
        .vl(object.stored_as("vl-uid-1"));
    let out = w.decide("data-pv", &mut memo, t0, &now_plus(10));
    assert_eq!(what(&out), "idle", "{:?}", out.decision);
    assert_eq!(memo.tombstone, None);
}

/// A finding whose PV vanished becomes its tombstone when deleting it left its disk (Retain),
/// and is deleted otherwise.
#[test]
fn a_vanished_volume_leaves_a_tombstone_only_where_its_disk_stays() {
    let t0 = Instant::now();
    let retain = mariadb_finding();
    let delete_policy = finding(
        &mariadb_pv().delete().class("fast"),
        &lookup().with_class("fast", "Delete"),
    );
    for (case, f, expected) in [
        ("Retain", retain.clone(), "apply"),
        ("Delete", delete_policy, "delete"),
    ] {
        let w = world().vl(published(&f));
        let out = w.decide("mariadb-pv", &mut Memo::default(), t0, &now());
        assert_eq!(what(&out), expected, "{case}");
        if let Decision::Write((Action::Apply { object, .. }, told)) = out.decision {
            assert_eq!(
                object.status.as_ref().map(|s| s.reason),
                Some(Reason::VolumeDeleted)
            );
            assert!(matches!(
                told.map(|t| t.change),
                Some(Change::ReasonChanged {
                    to: Reason::VolumeDeleted,
                    ..
                })
            ));
        }
    }
}

// ---- Grace, and a restart ----

/// A state normally only passing through (a Bound volume whose claim vanished) is held for its
/// grace, then published; a restarted process (an empty memo) that finds it published keeps it
/// as it is instead of retracting it or starting its grace again.
#[test]
fn a_passing_state_waits_its_grace_and_a_restart_keeps_what_is_published() {
    let t0 = Instant::now();
    let (b, _) = healthy();
    let w = World {
        lookup: lookup(),
        ..world()
    }
    .pv(b.clone());
    let mut memo = Memo::default();
    let out = w.decide("b", &mut memo, t0, &now());
    assert!(
        matches!(out.decision, Decision::WaitFor(d) if d == GRACES.grace),
        "{:?}",
        out.decision
    );
    assert_eq!(memo.held, Some(Held::Pending(Reason::BoundClaimMissing)));
    assert_eq!(
        out.held,
        Some(HeldChange {
            from: None,
            to: Some(Held::Pending(Reason::BoundClaimMissing))
        })
    );
    assert!(matches!(
        out.logs.as_slice(),
        [Log::Holding {
            reason: Some(Reason::BoundClaimMissing),
            ..
        }]
    ));
    // Half-way, it still waits the rest.
    let out = w.decide("b", &mut memo, t0, &now_plus(60));
    assert!(matches!(out.decision, Decision::WaitFor(d) if d == Duration::from_secs(60)));
    // Its grace over, it is published.
    let out = w.decide("b", &mut memo, t0, &now_plus(120));
    let Decision::Write((Action::Create { object }, _)) = out.decision else {
        panic!("{:?}", out.decision)
    };
    assert_eq!(
        out.held,
        Some(HeldChange {
            from: Some(Held::Pending(Reason::BoundClaimMissing)),
            to: None
        })
    );
    assert_eq!(memo.held, None);

    // A new process: nothing remembered, the object published.
    let restarted = World {
        lookup: lookup(),
        ..world()
    }
    .pv(b)
    .vl(object.stored_as("vl-uid-1"));
    let mut memo = Memo::default();
    let out = restarted.decide("b", &mut memo, t0, &now_plus(130));
    assert_eq!(what(&out), "idle", "neither retracted nor re-dated");
    assert_eq!(memo.held, None);
}

/// A state the phase dates (a Delete-policy volume Released, on its way out) counts its grace
/// from the phase's time: a process started during it (an empty memo) waits only the rest.
#[test]
fn a_grace_dated_by_the_phase_is_not_restarted_by_a_restart() {
    let t0 = Instant::now();
    // How long ago it was Released, and how long it still waits (`None`: published now).
    for (released_ago, waits) in [(500, Some(100)), (600, None), (700, None)] {
        let w = World {
            lookup: lookup(),
            ..world()
        }
        .pv(mariadb_pv().delete().since(now_plus(-released_ago)));
        let out = w.decide("mariadb-pv", &mut Memo::default(), t0, &now());
        match (&out.decision, waits) {
            (Decision::WaitFor(d), Some(s)) => {
                assert_eq!(*d, Duration::from_secs(s), "released {released_ago}s ago")
            }
            (Decision::Write((Action::Create { .. }, _)), None) => {}
            (d, _) => panic!("released {released_ago}s ago: {d:?}, expected {waits:?}"),
        }
    }
}

// ---- Logs once ----

/// A volume too odd to judge and a VolumeLeftover someone else owns are warned about once per
/// change, not at every decision.
#[test]
fn warnings_are_logged_once_per_change() {
    let t0 = Instant::now();
    let odd = pv("odd").phase("Lost");
    let w = world().pv(odd);
    let mut memo = Memo::default();
    let first = w.decide("odd", &mut memo, t0, &now());
    assert!(
        matches!(first.logs.as_slice(), [Log::Skipped { pv, .. }] if pv == "odd"),
        "{:?}",
        first.logs
    );
    assert_eq!(memo.held, Some(Held::Skipped));
    let again = w.decide("odd", &mut memo, t0, &now());
    assert_eq!(again.logs, vec![]);

    let theirs = published(&mariadb_finding()).without_label(MANAGED_BY);
    let w = world().pv(mariadb_pv()).vl(theirs);
    let mut memo = Memo::default();
    let first = w.decide("mariadb-pv", &mut memo, t0, &now());
    assert_eq!(what(&first), "idle");
    assert_eq!(
        first.logs,
        vec![Log::Foreign {
            name: "mariadb-pv".into()
        }]
    );
    assert_eq!(memo.logged.as_deref(), Some(FOREIGN));
    let again = w.decide("mariadb-pv", &mut memo, t0, &now());
    assert_eq!(again.logs, vec![]);
}

// ---- A deleted content's tombstone ----

/// An EBS snapshot id: a handle the census can look up.
const SNAP_HANDLE: &str = "snap-0a1b2c3d4e5f60718";

fn ebs_snapshots() -> Scope {
    crate::census::ebs::vocabulary::snapshots(None, "us-east-1")
}

impl World {
    fn snapshots_listed(mut self) -> Self {
        self.snapshots_listed = true;
        self
    }
}

/// The `ContentDeleted` tombstone of the notes' `pre-content` (its backend snapshot an EBS
/// one), deleted at `at`.
fn content_tombstone(at: Time) -> Finding {
    let mut v = super::snapshot::pre_content_after_snapshot_delete();
    v["spec"]["source"]["snapshotHandle"] = serde_json::json!(SNAP_HANDLE);
    let c = super::snapshot::content_of(v);
    let f = crate::decide::snapshot::tombstone(&c, at.clone()).expect("Retain, with a handle");
    crate::decide::snapshot::as_finding(&f, &at)
}

/// The `SnapshotDeleted` finding `pre-content` had before it was deleted.
fn content_snapshot_deleted() -> Finding {
    let c = super::snapshot::content_of(super::snapshot::pre_content_after_snapshot_delete());
    struct NoSnapshots;
    impl crate::decide::snapshot::SnapshotLookup for NoSnapshots {
        fn snapshot(
            &self,
            _: &str,
            _: &str,
        ) -> crate::decide::lookup::Found<crate::decide::snapshot::SnapshotFacts> {
            crate::decide::lookup::Found::Absent
        }
    }
    match crate::decide::snapshot::classify_content(&c, &NoSnapshots, now(), GRACES) {
        crate::decide::snapshot::SnapshotVerdict::Leftover(f) => {
            crate::decide::snapshot::as_finding(&f, &now_plus(-3600))
        }
        other => panic!("{other:?}"),
    }
}

/// The object as the store shows it once a person acknowledged it (issue 33's patch).
fn acknowledged(mut o: crate::model::crd::VolumeLeftover) -> crate::model::crd::VolumeLeftover {
    o.spec.acknowledgement = Some(crate::model::crd::Acknowledgement {
        by: Some("acc".into()),
        ticket: Some("ACC-I5".into()),
        reason: Some("backend snapshot checked".into()),
        until: None,
    });
    o.metadata.generation = Some(2);
    o.metadata.resource_version = Some("1002".into());
    o
}

/// The EBS snapshot scope listed twice with `handles`.
fn snapshots_listed_twice(handles: &[&str]) -> Census {
    let mut c = Census::new([ebs_snapshots()], Some("e2e"), Duration::from_secs(3600));
    for at in [-20, -10] {
        let seen = handles
            .iter()
            .map(|h| {
                let s = Seen {
                    size_only: None,
                    users_only: 0,
                    id: (*h).to_string(),
                    detail: None,
                };
                (*h, s)
            })
            .collect();
        c.record(&ebs_snapshots(), Ok(snapshot(now_plus(at), seen)));
    }
    c
}

/// The EBS snapshot scope listed once with `handles`, then failing.
fn snapshots_failing(handles: &[&str]) -> Census {
    let mut c = snapshots_listed_twice(handles);
    c.record(&ebs_snapshots(), Err("EC2 is unavailable".into()));
    c
}

/// A content's tombstone ends as a volume's does: acknowledged (the acknowledgement covers
/// `ContentDeleted`), past `--tombstone-ttl`, or when two listings of the census no longer find
/// its backend snapshot. Where the census covers the snapshot, an acknowledged one stays until
/// the snapshot is gone (deleted, the snapshot would come back as `SnapshotWithoutContent`).
/// An acknowledgement of the finding before the delete (`SnapshotDeleted`) does not end it.
#[test]
fn a_deleted_contents_tombstone_ends_as_a_volumes_does() {
    let t0 = Instant::now();
    let name = crate::decide::snapshot::content_leftover_name("pre-content");
    let t = content_tombstone(now_plus(-600));
    assert_eq!(t.name(), name);
    assert_eq!(t.status.reason, Reason::ContentDeleted);
    let open = || world().snapshots_listed().vl(published(&t));
    let acked = || world().snapshots_listed().vl(acknowledged(published(&t)));
    let ttl = |w: World| World {
        ttl: Some(Duration::from_secs(300)),
        ..w
    };
    #[rustfmt::skip]
    let cases: Vec<(&str, World, &str)> = vec![
        ("open", open(), "idle"),
        ("acknowledged", acked(), "delete"),
        ("open, past the TTL", ttl(open()), "delete"),
        ("acknowledged, snapshot stores not listed", World { snapshots_listed: false, ..acked() }, "idle"),
        // The census covers its backend snapshot.
        ("open, census finds the snapshot", open().census(snapshots_listed_twice(&[SNAP_HANDLE])), "idle"),
        ("open, census lists twice without it", open().census(snapshots_listed_twice(&[])), "delete"),
        ("open, census down", open().census(snapshots_failing(&[])), "idle"),
        ("acknowledged, census finds the snapshot", acked().census(snapshots_listed_twice(&[SNAP_HANDLE])), "apply"),
        ("acknowledged, census down", acked().census(snapshots_failing(&[SNAP_HANDLE])), "apply"),
        ("acknowledged, census lists twice without it", acked().census(snapshots_listed_twice(&[])), "delete"),
    ];
    for (case, w, expected) in cases {
        let out = w.decide(&name, &mut Memo::default(), t0, &now());
        assert_eq!(what(&out), expected, "{case}: {:?}", out.decision);
        if let Decision::Write((Action::Apply { object, .. }, _)) = &out.decision {
            let s = object.status.as_ref().expect("status");
            assert_eq!(s.reason, Reason::ContentDeleted, "{case}");
            assert_eq!(s.state, crate::model::crd::State::Acknowledged, "{case}");
        }
    }

    // Acknowledged while it was SnapshotDeleted (and the operator wrote what that covered):
    // the delete is news (Superseded), it stays.
    let earlier = content_snapshot_deleted();
    let acked = acknowledged(published(&earlier));
    let Action::Apply { object, .. } = crate::decide::plan::plan(
        &name,
        Some(&Verdict::Leftover(Box::new(earlier))),
        Some(&super::fixtures::lean(&acked)),
        &now_plus(-900),
        &now_plus(-900),
        None,
    ) else {
        panic!("the acknowledgement is written")
    };
    let before = object.stored_as("vl-uid-1");
    assert_eq!(
        before.status.as_ref().map(|s| s.state),
        Some(crate::model::crd::State::Acknowledged)
    );
    let mut memo = Memo {
        tombstone: Some(Box::new(t.clone())),
        ..Memo::default()
    };
    let out = world()
        .snapshots_listed()
        .vl(before)
        .decide(&name, &mut memo, t0, &now());
    let Decision::Write((Action::Apply { object, .. }, _)) = out.decision else {
        panic!("{:?}", out.decision)
    };
    let s = object.status.as_ref().expect("status");
    assert_eq!(s.reason, Reason::ContentDeleted);
    assert_eq!(s.state, crate::model::crd::State::Superseded);
}
