//! Issue 33: `scan` and the operator tell the same truth. Over generated worlds (PVs of every
//! phase, reclaim policy and claimRef, naming Ceph, GCE and EBS disks by CSI handles and by
//! in-tree sources with their zones; claims; classes; two listings of each census scope, some
//! failing) `scan`'s pure pipeline and the operator's loop publish the same findings: the same
//! names, and for each the same status but for the hand-off fields only the operator keeps
//! (state, conditions, observedGeneration, acknowledged, firstSeen).
//!
//! `scan`: the listings recorded as `scan` records them (`census_once` for Ceph,
//! [`cloud::record`] for the clouds), [`Facts`] as the lookup, [`Classified::volume`] for each PV
//! (`classify`, and the disks named), the census's orphans ([`crate::scan::orphans`], through
//! `Census::orphans`), [`hold`] with zero graces, the cost. The operator: its loop
//! ([`crate::run::controller::Loop::step`], driven as `tests::machine` drives it, with zero
//! graces) over the same objects and the same census reports, every write it asks for performed
//! on a map that stands in for the API server and fed back as the writer and the watch would.
//! Its VolumeLeftovers at the end are compared with `scan`'s findings.
//!
//! One difference is by design, and checked as such: a scope whose last listing failed keeps
//! what the operator published from an earlier one (nothing is concluded from an outage), while
//! `scan`, which has no earlier listing to trust, says nothing about it and reports it failed
//! (exit 4).
//!
//! A lag, not a difference: a listing that reaches the operator before its stores have listed
//! concludes nothing that is decided (the scheduler drops marks until then, and the sweep that
//! follows the lists marks PVs and VolumeLeftovers, not the census's disks), so its disks
//! without a volume are published at the scope's next listing. The worlds where the first
//! listings come first (`census_first`) give the operator its second ones after the lists.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::watcher;
use proptest::prelude::*;
use serde_json::Value;

use super::fixtures::{PvBuilder, now, now_plus, pv};
use super::machine::{
    World, class, listed_claims, listed_classes, listed_leftovers, listed_pvs, world_with,
};
use crate::census::CensusSettings;
use crate::census::ceph::handle::PoolKey;
use crate::census::config::CensusConfig;
use crate::census::{CensusFailure, CensusReport};
use crate::decide::census::{
    CreatedFor, DiskFacts, FailureCategory, FailureKind, Scope, ScopeListing, Seen,
};
use crate::decide::lookup::{Claim, ClaimFacts, ClassFacts};
use crate::decide::plan::{Action, Graces};
use crate::model::crd::{ImageOwner, Reason, VolumeLeftover};
use crate::model::finding::Finding;
use crate::model::price::PriceTable;
use crate::model::volume::Volume;
use crate::publish::writer::{Op, Outcome, Written};
use crate::run::controller::Event;
use crate::run::settings::Settings;
use crate::run::wiring::Input;
use crate::scan::cloud::{Failures, record};
use crate::scan::{Classified, Facts, Referenced, hold, orphans};
use crate::watch::feed::FeedItem;

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";
const POOL: &str = "k8s-rbd";
const ACCOUNT: &str = "123456789012";
/// This cluster's name in the file; the sections name their own when the world says so.
const CLUSTER: &str = "prod";
const GKE: &str = "gke-prod";
const EKS: &str = "eks-prod";
const NS: &str = "db";

/// Graces zero: what the operator publishes at once is what `scan` reports (`scan` holds back
/// by the same gate; the grace rule itself is `tests::plan`'s and `tests::scan`'s).
const ZERO: Graces = Graces {
    grace: Duration::ZERO,
    delete_grace: Duration::ZERO,
    expansion_grace: Duration::ZERO,
};
const IMAGE_GRACE: Duration = Duration::from_secs(600);

/// The places a disk can be: each census scope that holds disks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    /// The Ceph pool.
    Ceph,
    /// Project `p`'s zone `europe-west1-b` (configured).
    GceZone,
    /// Project `p`'s region `europe-west1` (configured).
    GceRegion,
    /// Project `q`'s zone `europe-west1-c` (`q` is listed as a whole: admitted when listed).
    GceOpen,
    /// The EBS region `us-east-1`.
    Ebs,
}

const PLACES: [Place; 5] = [
    Place::Ceph,
    Place::GceZone,
    Place::GceRegion,
    Place::GceOpen,
    Place::Ebs,
];

impl Place {
    fn scope(self) -> Scope {
        let gce = |project: &str, location: &str| {
            crate::census::gce::vocabulary::location(project, location)
        };
        match self {
            Place::Ceph => PoolKey::new(FSID, POOL, None).into(),
            Place::GceZone => gce("p", "europe-west1-b"),
            Place::GceRegion => gce("p", "europe-west1"),
            Place::GceOpen => gce("q", "europe-west1-c"),
            Place::Ebs => crate::census::ebs::vocabulary::region(Some(ACCOUNT), "us-east-1"),
        }
    }

    /// The disks a listing of it may hold (the PVs name these, and some that no listing has).
    fn disks(self) -> &'static [&'static str] {
        match self {
            Place::Ceph => &["csi-vol-a", "csi-vol-b"],
            Place::GceZone => &["pd-a", "pd-b"],
            Place::GceRegion => &["rpd-a"],
            Place::GceOpen => &["qd-a"],
            Place::Ebs => &["vol-0a", "vol-0b"],
        }
    }
}

/// What a listing reads of one disk.
#[derive(Clone, Debug)]
struct DiskSpec {
    /// The cluster its metadata, labels or tags name: none, this one (the file's name), the
    /// section's own name, another.
    cluster: Option<&'static str>,
    /// Older than the image grace, or not.
    old: bool,
    /// Attached, watched.
    in_use: bool,
    /// Ownership metadata naming a PV and a claim.
    created_for: bool,
}

/// A PV's source.
#[derive(Clone, Debug)]
enum Source {
    /// ceph-csi, its image named by the attributes.
    CephCsi(&'static str),
    /// In-tree `rbd`.
    Rbd(&'static str),
    /// The GCE PD CSI driver: `projects/<location>/disks/<name>`.
    GceCsi(&'static str, &'static str),
    /// In-tree `gcePersistentDisk`, located by the zones of the node affinity.
    GcePd(&'static str, &'static [&'static str]),
    /// The EBS CSI driver, with the zones of the node affinity.
    EbsCsi(&'static str, &'static [&'static str]),
    /// In-tree `awsElasticBlockStore`: `<prefix><volume id>`.
    Ebs(&'static str, &'static str),
    /// Nothing censused.
    HostPath,
}

/// A PV's claimRef.
#[derive(Clone, Debug)]
enum ClaimRef {
    None,
    /// `db/<name>` with a uid.
    Full(&'static str, &'static str),
    /// `db/<name>` by name only: a pre-binding.
    ByName(&'static str),
}

#[derive(Clone, Debug)]
struct PvSpec {
    phase: &'static str,
    policy: &'static str,
    since: bool,
    claim: ClaimRef,
    class: Option<&'static str>,
    capacity: &'static str,
    source: Source,
    /// Seconds before now it was created: before both listings, between them, or not said.
    created: Option<i64>,
}

/// Two listings of a place: each its disks, or a failure.
type Listings = [Result<Vec<(&'static str, DiskSpec)>, FailureCategory>; 2];

#[derive(Clone, Debug)]
struct WorldSpec {
    /// The GCE and EBS sections name this cluster by names of their own.
    own_names: bool,
    pvs: Vec<PvSpec>,
    /// Claims in `db`: name, uid, being deleted.
    claims: Vec<(&'static str, &'static str, bool)>,
    /// `standard` (Retain) exists; `fast` (Delete, pd-ssd) exists.
    classes: (bool, bool),
    listings: Vec<(Place, Listings)>,
    /// The first listings reach the operator before its stores have listed anything (the
    /// second ones after: what they conclude is decided only once the stores have listed, at
    /// the next listing; see the module doc).
    census_first: bool,
}

fn sel<T: Clone + std::fmt::Debug + 'static>(v: &[T]) -> proptest::sample::Select<T> {
    proptest::sample::select(v.to_vec())
}

fn source() -> impl Strategy<Value = Source> {
    const ZONES: &[&[&str]] = &[
        &[],
        &["europe-west1-b"],
        &["europe-west1-b", "europe-west1-c"],
        &["europe-west1-c"],
    ];
    prop_oneof![
        sel(&["csi-vol-a", "csi-vol-b", "csi-vol-gone"]).prop_map(Source::CephCsi),
        sel(&["csi-vol-a", "csi-vol-gone"]).prop_map(Source::Rbd),
        (
            sel(&[
                "p/zones/europe-west1-b",
                "p/regions/europe-west1",
                "q/zones/europe-west1-c",
            ]),
            sel(&["pd-a", "pd-b", "rpd-a", "qd-a", "pd-gone"]),
        )
            .prop_map(|(l, n)| Source::GceCsi(l, n)),
        (sel(&["pd-a", "rpd-a", "qd-a", "pd-gone"]), sel(ZONES))
            .prop_map(|(n, z)| Source::GcePd(n, z)),
        (
            sel(&["vol-0a", "vol-0b", "vol-0f"]),
            sel(&[&[][..], &["us-east-1a"][..], &["us-west-2a"][..]]),
        )
            .prop_map(|(n, z)| Source::EbsCsi(n, z)),
        (
            sel(&["vol-0a", "vol-0f"]),
            sel(&["aws://us-east-1a/", "aws:///", ""])
        )
            .prop_map(|(n, p)| Source::Ebs(n, p)),
        Just(Source::HostPath),
    ]
}

fn claim_ref() -> impl Strategy<Value = ClaimRef> {
    prop_oneof![
        Just(ClaimRef::None),
        (sel(&["c", "d"]), sel(&["u1", "u2"])).prop_map(|(n, u)| ClaimRef::Full(n, u)),
        sel(&["c", "d"]).prop_map(ClaimRef::ByName),
    ]
}

fn pv_spec() -> impl Strategy<Value = PvSpec> {
    (
        sel(&["Bound", "Released", "Failed", "Available", "Pending"]),
        sel(&["Retain", "Delete"]),
        any::<bool>(),
        claim_ref(),
        sel(&[None, Some("standard"), Some("fast"), Some("gone")]),
        sel(&["10Gi", "1Ti"]),
        source(),
        sel(&[Some(3600), Some(90), None]),
    )
        .prop_map(
            |(phase, policy, since, claim, class, capacity, source, created)| PvSpec {
                phase,
                policy,
                since,
                claim,
                class,
                capacity,
                source,
                created,
            },
        )
}

fn disk_spec() -> impl Strategy<Value = DiskSpec> {
    (
        sel(&[None, Some(CLUSTER), Some("own"), Some("another")]),
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.3),
        any::<bool>(),
    )
        .prop_map(|(cluster, old, in_use, created_for)| DiskSpec {
            cluster,
            old,
            in_use,
            created_for,
        })
}

fn listing(
    place: Place,
) -> impl Strategy<Value = Result<Vec<(&'static str, DiskSpec)>, FailureCategory>> {
    let disks = proptest::collection::vec((any::<bool>(), disk_spec()), place.disks().len())
        .prop_map(move |v| {
            place
                .disks()
                .iter()
                .zip(v)
                .filter(|(_, (listed, _))| *listed)
                .map(|(n, (_, d))| (*n, d))
                .collect()
        });
    prop_oneof![
        4 => disks.prop_map(Ok),
        1 => sel(&[FailureCategory::Timeout, FailureCategory::Forbidden]).prop_map(Err),
    ]
}

fn world() -> impl Strategy<Value = WorldSpec> {
    let listings = PLACES
        .iter()
        .map(|p| (Just(*p), [listing(*p), listing(*p)]))
        .collect::<Vec<_>>();
    (
        any::<bool>(),
        proptest::collection::vec(pv_spec(), 0..6),
        proptest::collection::vec(
            (
                sel(&["c", "d"]),
                sel(&["u1", "u2"]),
                proptest::bool::weighted(0.2),
            ),
            0..3,
        ),
        (any::<bool>(), any::<bool>()),
        listings,
        any::<bool>(),
    )
        .prop_map(
            |(own_names, pvs, claims, classes, listings, census_first)| WorldSpec {
                own_names,
                pvs,
                claims,
                classes,
                listings,
                census_first,
            },
        )
}

// ---- The world as objects ----

impl WorldSpec {
    fn config(&self) -> CensusConfig {
        let (gke, eks) = if self.own_names {
            (
                format!("    clusterName: {GKE}\n"),
                format!("    clusterName: {EKS}\n"),
            )
        } else {
            (String::new(), String::new())
        };
        CensusConfig::parse(&format!(
            "clusterName: {CLUSTER}
clusters:
  - clusterID: {FSID}
    monitors: [\"127.0.0.1:6789\"]
    pools: [{{name: {POOL}}}]
gce:
  - project: p
    locations: [europe-west1-b, europe-west1]
{gke}  - project: q
{gke}ebs:
  - region: us-east-1
    account: \"{ACCOUNT}\"
{eks}"
        ))
        .expect("the census configuration parses")
    }

    /// The name a disk's metadata gives this cluster when it says "own": its section's.
    fn own(&self, place: Place) -> &'static str {
        match (self.own_names, place) {
            (false, _) | (_, Place::Ceph) => CLUSTER,
            (true, Place::Ebs) => EKS,
            (true, _) => GKE,
        }
    }

    fn pvs(&self) -> Vec<PersistentVolume> {
        self.pvs
            .iter()
            .enumerate()
            .map(|(i, s)| volume(&format!("pv-{i}"), s))
            .collect()
    }

    fn claims(&self) -> Vec<Claim> {
        let mut by_name = BTreeMap::new();
        for (name, uid, terminating) in &self.claims {
            by_name.insert(*name, (*uid, *terminating));
        }
        by_name
            .into_iter()
            .map(|(name, (uid, terminating))| {
                Claim::of(
                    &ObjectMeta {
                        namespace: Some(NS.into()),
                        name: Some(name.into()),
                        uid: Some(uid.into()),
                        deletion_timestamp: terminating.then(|| now_plus(-30)),
                        ..ObjectMeta::default()
                    }
                    .into(),
                )
            })
            .collect()
    }

    fn classes(&self) -> Vec<StorageClass> {
        let mut out = Vec::new();
        if self.classes.0 {
            out.push(class("standard", "Retain"));
        }
        if self.classes.1 {
            let mut fast = class("fast", "Delete");
            fast.parameters = Some([("type".to_string(), "pd-ssd".to_string())].into());
            out.push(fast);
        }
        out
    }

    /// The census reports, in the order they arrive: the first listing of every place, and the
    /// second. `q` is listed as a whole: its project's own scope is reported with its zone.
    fn reports(&self) -> (Vec<CensusReport>, Vec<CensusReport>) {
        let mut rounds = (Vec::new(), Vec::new());
        let mut q_listed = false;
        for n in 0..2 {
            let out = if n == 0 { &mut rounds.0 } else { &mut rounds.1 };
            for (place, listings) in &self.listings {
                let started = now_plus(if n == 0 { -120 } else { -60 });
                let result = match &listings[n] {
                    Ok(disks) => Ok(self.snapshot(*place, disks, &started)),
                    Err(c) => Err(CensusFailure::new(
                        FailureKind::of(*c),
                        format!("listing {} failed", place.scope()),
                    )),
                };
                if *place == Place::GceOpen {
                    // An aggregated listing: the project's own scope, and the zone once a
                    // listing has named it (a failure fails every scope known).
                    let project = crate::census::gce::vocabulary::project("q");
                    let own = result
                        .as_ref()
                        .map(|_| empty(&started))
                        .map_err(Clone::clone);
                    out.push(report(project, own));
                    let listed = result.is_ok();
                    if listed || q_listed {
                        q_listed |= listed;
                        out.push(report(place.scope(), result));
                    }
                    continue;
                }
                out.push(report(place.scope(), result));
            }
        }
        rounds
    }

    fn snapshot(
        &self,
        place: Place,
        disks: &[(&'static str, DiskSpec)],
        at: &Time,
    ) -> ScopeListing {
        ScopeListing {
            started: at.clone(),
            scope_id: Some(2),
            images: disks
                .iter()
                .map(|(name, d)| {
                    let seen = Seen {
                        size_only: None,
                        users_only: 0,
                        id: format!("id-{name}"),
                        detail: Some(Box::new(self.facts(place, name, d))),
                    };
                    (name.to_string(), seen)
                })
                .collect(),
            recoverable: Default::default(),
            unread: Default::default(),
        }
    }

    /// What a listing reads of a disk, as each backend's listing fills it in.
    fn facts(&self, place: Place, name: &str, d: &DiskSpec) -> DiskFacts {
        let cluster = d.cluster.map(|c| match c {
            "own" => self.own(place),
            other => other,
        });
        let created = now_plus(if d.old { -7200 } else { -300 }).0;
        let owner = d.created_for.then(|| ImageOwner {
            volume_name: Some(format!("pvc-{name}")),
            claim_namespace: Some(NS.into()),
            claim_name: Some("data".into()),
            cluster_name: cluster.map(str::to_string),
        });
        if place == Place::Ceph {
            let watchers = d.in_use.then(|| "10.0.0.7:0/1".to_string());
            let mut f = DiskFacts::ceph(
                10 << 30,
                Some(created),
                watchers.into_iter().collect(),
                owner,
            );
            f.cluster = cluster.map(str::to_string);
            return f;
        }
        let (label, zone, replicas, kind) = match place {
            Place::Ebs => (
                cluster.map(|c| (format!("kubernetes.io/cluster/{c}"), "owned".to_string())),
                Some("us-east-1a"),
                Vec::new(),
                "gp3",
            ),
            Place::GceRegion => (
                cluster.map(|c| ("goog-k8s-cluster-name".to_string(), c.to_string())),
                None,
                vec!["europe-west1-b".to_string(), "europe-west1-c".to_string()],
                "pd-ssd",
            ),
            _ => (
                cluster.map(|c| ("goog-k8s-cluster-name".to_string(), c.to_string())),
                Some(if place == Place::GceOpen {
                    "europe-west1-c"
                } else {
                    "europe-west1-b"
                }),
                Vec::new(),
                "pd-balanced",
            ),
        };
        DiskFacts {
            size: 10 << 30,
            created: Some(created),
            kind: Some(kind.into()),
            in_use: d
                .in_use
                .then(|| "instances/node-1".to_string())
                .into_iter()
                .collect(),
            created_for: owner.map(|o| CreatedFor {
                pv: o.volume_name,
                pvc: o.claim_name,
                pvc_namespace: o.claim_namespace,
            }),
            cluster: cluster.map(str::to_string),
            replica_zones: replicas,
            zone: zone.map(str::to_string),
            tags: label.into_iter().collect(),
            ..DiskFacts::default()
        }
    }
}

fn empty(at: &Time) -> ScopeListing {
    ScopeListing {
        started: at.clone(),
        scope_id: None,
        images: Default::default(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

fn report(key: Scope, result: Result<ScopeListing, CensusFailure>) -> CensusReport {
    CensusReport {
        key,
        result,
        requests: 1,
        elapsed: Duration::ZERO,
    }
}

fn volume(name: &str, s: &PvSpec) -> PersistentVolume {
    let mut p = pv(name)
        .phase(s.phase)
        .reclaim(s.policy)
        .capacity(s.capacity)
        .access_modes(["ReadWriteOnce"]);
    if s.since {
        p = p.since(now_plus(-1800));
    }
    p = match s.claim {
        ClaimRef::None => p,
        ClaimRef::Full(n, uid) => p.claim(NS, n, uid),
        ClaimRef::ByName(n) => p.claim_by_name(NS, n),
    };
    if let Some(c) = s.class {
        p = p.class(c);
    }
    let zones = |p: PersistentVolume, z: &[&str]| match z {
        [] => p,
        [a] => p.zones([*a]),
        [a, b] => p.zones([*a, *b]),
        _ => unreachable!("at most two zones"),
    };
    p = match &s.source {
        Source::CephCsi(image) => p.csi(
            "rbd.csi.ceph.com",
            "0001-0024-not-a-handle",
            [("clusterID", FSID), ("pool", POOL), ("imageName", image)],
        ),
        Source::Rbd(image) => p.rbd(Some(POOL), image),
        Source::GceCsi(location, disk) => p.csi(
            "pd.csi.storage.gke.io",
            &format!("projects/{location}/disks/{disk}"),
            [],
        ),
        Source::GcePd(disk, z) => zones(p.gce_pd(disk), z),
        Source::EbsCsi(id, z) => zones(p.csi("ebs.csi.aws.com", id, []), z),
        Source::Ebs(id, prefix) => p.aws_ebs(&format!("{prefix}{id}")),
        Source::HostPath => p.host_path("/mnt/x"),
    };
    p.metadata.creation_timestamp = s.created.map(|ago| now_plus(-ago));
    p
}

fn prices() -> PriceTable {
    PriceTable::parse(
        r#"
currency: USD
volumes:
  - storageClass: standard
    perGiBMonth: "0.17"
  - driver: rbd.csi.ceph.com
    perGiBMonth: "0.02"
  - driver: pd.csi.storage.gke.io
    type: pd-ssd
    perGiBMonth: "0.17"
  - driver: pd.csi.storage.gke.io
    perGiBMonth: "0.04"
  - driver: ebs.csi.aws.com
    perGiBMonth: "0.08"
"#,
    )
    .expect("the price table parses")
}

// ---- scan ----

/// What `scan` reports of the world: its findings (priced), and the scopes it says nothing
/// about (a listing failed: exit 4).
fn scan(w: &WorldSpec) -> (Vec<Finding>, Vec<Scope>) {
    let config = w.config();
    let mut census = config.census(IMAGE_GRACE);
    let mut failed = Failures::new();
    let mut ceph_failed = Vec::new();
    let (first, second) = w.reports();
    for r in first.into_iter().chain(second) {
        match r.key.backend().name() {
            // `census_once`: recorded as it comes.
            "ceph" => {
                if r.result.is_err() {
                    ceph_failed.push(r.key.clone());
                }
                census.record(&r.key, r.result.map_err(|f| f.message));
            }
            // `cloud::gce::twice` and `cloud::ebs::twice`.
            _ => record(&mut census, vec![r], &mut failed),
        }
    }
    let facts = Facts {
        claims: Some(
            w.claims()
                .iter()
                .map(|c| ((c.namespace.to_string(), c.name.to_string()), c.facts()))
                .collect::<HashMap<(String, String), ClaimFacts>>(),
        ),
        classes: Some(
            w.classes()
                .iter()
                .map(|c| {
                    let name = c.metadata.name.clone().unwrap_or_default();
                    (name, crate::decide::lookup::class_facts(c))
                })
                .collect::<HashMap<String, ClassFacts>>(),
        ),
        census: Some(Arc::new(census.clone())),
    };
    let mut classified = Classified::default();
    let mut referenced = Referenced::new();
    for p in w.pvs() {
        classified.volume(Volume::from(&p), &facts, &now(), &mut referenced);
    }
    // A second look at a claim answers what the first did: nothing changes in between here.
    let mut findings = classified.findings;
    findings.extend(classified.recheck.into_iter().map(|(_, f)| f));
    findings.extend(orphans(&census, &referenced, &now()));
    let (mut findings, held) = hold(findings, ZERO, &now());
    assert!(
        held.is_empty(),
        "nothing is held with zero graces: {held:?}"
    );
    let table = prices();
    for f in &mut findings {
        f.status.cost = crate::decide::cost::estimate(&f.status, &table, &now());
    }
    let mut unknown: Vec<Scope> = failed
        .values()
        .filter_map(|f| {
            census
                .pools
                .keys()
                .find(|k| k.to_string() == f.scope)
                .cloned()
        })
        .chain(ceph_failed)
        .collect();
    unknown.sort();
    unknown.dedup();
    (findings, unknown)
}

// ---- the operator ----

/// The API server, as far as the operator's VolumeLeftovers go.
#[derive(Default)]
struct Server {
    objects: BTreeMap<String, VolumeLeftover>,
    made: u32,
    version: u64,
}

impl Server {
    /// Performs a write the loop asked for: the store shows its result, and the event the watch
    /// would deliver is returned with the writer's outcome.
    fn perform(&mut self, w: &mut World, name: &str, action: Action) -> (Op, Event) {
        self.version += 1;
        let version = Some(self.version.to_string());
        match action {
            Action::Create { object } => {
                assert!(!self.objects.contains_key(name), "{name} created twice");
                self.made += 1;
                let mut o = *object;
                o.metadata.uid = Some(format!("vl-uid-{}", self.made));
                o.metadata.resource_version = version;
                o.metadata.generation = Some(1);
                self.objects.insert(name.to_string(), o.clone());
                (Op::Create, w.put_leftover(&o))
            }
            Action::Apply { object, .. } => {
                let before = self.objects.get(name).expect("an object to apply to");
                let mut o = *object;
                o.metadata.uid = before.metadata.uid.clone();
                o.metadata.generation = before.metadata.generation;
                o.metadata.resource_version = version;
                self.objects.insert(name.to_string(), o.clone());
                (Op::Apply, w.put_leftover(&o))
            }
            Action::Delete { .. } => {
                let o = self.objects.remove(name).expect("an object to delete");
                let l = super::fixtures::lean(&o);
                w.vl.apply_watcher_event(&watcher::Event::Delete(l.clone()));
                (
                    Op::Delete,
                    Event::Input(Input::Vl(Box::new(FeedItem::Deleted(l)))),
                )
            }
            other => panic!("not a write: {other:?}"),
        }
    }
}

/// Steps the loop with `event` and everything that follows from it (writes performed, their
/// outcomes and watch events fed back) until it asks for nothing more.
fn settle(w: &mut World, server: &mut Server, event: Event) {
    let mut queue = VecDeque::from([event]);
    let mut steps = 0;
    while let Some(event) = queue.pop_front() {
        steps += 1;
        assert!(steps < 1000, "the operator's writes do not settle");
        for start in w.step(event).writes {
            let (op, echo) = server.perform(w, &start.name, start.action);
            queue.push_back(Event::Written {
                name: start.name,
                result: Ok(Written {
                    op,
                    outcome: Outcome::Done,
                    echo: None,
                    requests: 1,
                }),
                told: start.told,
            });
            queue.push_back(echo);
        }
    }
}

/// What the operator publishes of the world, by name.
fn operator(ws: &WorldSpec) -> BTreeMap<String, VolumeLeftover> {
    let settings = Settings {
        graces: ZERO,
        census: Some(CensusSettings {
            config: ws.config(),
            interval: Duration::from_secs(60),
            image_grace: IMAGE_GRACE,
            timeout: Duration::from_secs(10),
            deadline: Duration::from_secs(30),
        }),
        prices: Some(Arc::new(prices())),
        ..Settings::default()
    };
    let mut w = world_with(settings);
    let mut server = Server::default();
    let (first, second) = ws.reports();
    let census = |w: &mut World, server: &mut Server, reports: Vec<CensusReport>| {
        for r in reports {
            settle(w, server, Event::Input(Input::Census(vec![r])));
        }
    };
    let mut rounds = vec![first, second];
    if ws.census_first {
        let first = rounds.remove(0);
        census(&mut w, &mut server, first);
    }
    let mut events = Vec::new();
    for p in ws.pvs() {
        events.push(w.put_pv(&p));
    }
    for c in ws.claims() {
        events.push(w.put_claim(c));
    }
    for c in ws.classes() {
        events.push(w.put_class(c));
    }
    events.extend([
        listed_pvs(),
        listed_claims(),
        listed_classes(),
        listed_leftovers(),
    ]);
    for e in events {
        settle(&mut w, &mut server, e);
    }
    for round in rounds {
        census(&mut w, &mut server, round);
    }
    server.objects
}

// ---- the comparison ----

/// A status as both tell it: without the hand-off fields, which only the operator keeps.
fn told(status: &crate::model::crd::VolumeLeftoverStatus) -> Value {
    let mut v = serde_json::to_value(status).expect("a status serializes");
    let o = v.as_object_mut().expect("an object");
    for k in [
        "state",
        "conditions",
        "observedGeneration",
        "acknowledged",
        "firstSeen",
    ] {
        o.remove(k);
    }
    v
}

fn one_truth(ws: &WorldSpec) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let published = rt.block_on(async { operator(ws) });
    let (found, unknown) = scan(ws);
    let scanned: BTreeMap<String, Value> = found
        .iter()
        .map(|f| (f.name().to_string(), told(&f.status)))
        .collect();
    prop_assert_eq!(scanned.len(), found.len(), "scan reports each name once");
    for (name, o) in &published {
        let status = o.status.as_ref().expect("a published status");
        match scanned.get(name) {
            Some(s) => prop_assert_eq!(&told(status), s, "{}", name),
            None => {
                // Kept from an earlier listing while the scope's last one failed: scan, which
                // has only its own two, says nothing about the scope and reports it failed.
                let scope = ws.config().census(IMAGE_GRACE).recorded_scope(status);
                prop_assert!(
                    status.reason == Reason::DiskWithoutVolume
                        && scope.as_ref().is_some_and(|k| unknown.contains(k)),
                    "{} is published as {:?} (scope {:?}) and scan does not report it; scan's failed scopes: {:?}",
                    name,
                    status.reason,
                    scope,
                    unknown
                );
            }
        }
    }
    for name in scanned.keys() {
        prop_assert!(
            published.contains_key(name),
            "scan reports {} and the operator publishes nothing of that name: {:?}",
            name,
            scanned[name]
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn scan_and_the_operator_publish_the_same_findings(ws in world()) {
        one_truth(&ws)?;
    }
}
