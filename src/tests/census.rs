//! The census, without Ceph: configuration, which image a volume names, what two listings may
//! conclude, the findings about unreferenced images, and `VolumeWithoutDisk` in classification.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::{PvBuilder, lookup, now, now_plus, pv};
use crate::census::ceph::handle::image_ref;
use crate::census::ceph::handle::{ImageRef, PoolKey};
use crate::census::ceph::snapshot_of;
use crate::census::ceph::vocabulary::leftover_name;
use crate::census::config::CensusConfig;
use crate::decide::census::{Census, DiskFacts, DiskRef, Resolved, Scope, ScopeListing, Seen};
use crate::decide::classify::{classify, volume_source};
use crate::decide::plan::{Graces, grace_of};
use crate::model::crd::{Hint, ImageOwner, Reason, Subject, VolumeSourceInfo};
use crate::model::finding::Verdict;
use crate::model::image::ImageFound;
use crate::model::volume::Volume;

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";

const CONFIG: &str = r#"
clusterName: e2e
clusters:
  - clusterID: 4a7d1c2e-0000-4000-8000-000000000001
    monitors: ["127.0.0.1:6789"]
    keyring: /etc/ceph/keyring
    pools:
      - name: k8s-rbd
      - name: shared
        radosNamespace: team-a
"#;

fn config() -> CensusConfig {
    CensusConfig::parse(CONFIG).expect("config parses")
}

fn pool() -> PoolKey {
    PoolKey::new(FSID, "k8s-rbd", None)
}

fn key() -> Scope {
    pool().into()
}

fn census() -> Census {
    config().census(Duration::from_secs(3600))
}

/// An image with its details read: created `age` seconds before now, owned per `cluster`.
fn detailed(age: i64, cluster: Option<&str>, watchers: &[&str]) -> Seen {
    Seen {
        size_only: None,
        users_only: 0,
        id: "1234abcd".into(),
        detail: Some(Box::new(DiskFacts::ceph(
            10 * 1024 * 1024 * 1024,
            Some(now_plus(-age).0),
            watchers.iter().map(|w| w.to_string()).collect(),
            cluster.map(|c| ImageOwner {
                volume_name: Some("pvc-1".into()),
                claim_namespace: Some("db".into()),
                claim_name: Some("data".into()),
                cluster_name: Some(c.into()),
            }),
        ))),
    }
}

fn listed() -> Seen {
    Seen {
        size_only: None,
        users_only: 0,
        id: "5678".into(),
        detail: None,
    }
}

fn snapshot(at: Time, images: Vec<(&str, Seen)>, trash: &[&str]) -> ScopeListing {
    ScopeListing {
        started: at,
        scope_id: Some(2),
        images: images
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
        recoverable: trash.iter().map(|t| t.to_string()).collect(),
        unread: Default::default(),
    }
}

fn rbd_ref(name: &str) -> ImageRef {
    ImageRef {
        cluster_id: Some(FSID.into()),
        pool: Some("k8s-rbd".into()),
        pool_id: None,
        namespace: String::new(),
        name: name.into(),
    }
}

// ---- Configuration ----

#[test]
fn the_configuration_names_clusters_users_and_pools() {
    let c = config();
    assert_eq!(c.cluster_name.as_deref(), Some("e2e"));
    assert_eq!(c.clusters[0].user, "leftovers", "the default user");
    let pools: Vec<String> = c.pools().map(|k| k.to_string()).collect();
    assert_eq!(
        pools,
        [format!("{FSID}/k8s-rbd"), format!("{FSID}/shared/team-a")]
    );
}

#[test]
fn a_bad_configuration_says_what_is_wrong() {
    for (text, says) in [
        ("clusters: []", "no clusters"),
        (
            "clusters: [{clusterID: a, monitors: [m], pools: []}]",
            "cluster a: no pools",
        ),
        (
            "clusters: [{clusterID: a, pools: [{name: p}]}]",
            "neither monitors nor confFile",
        ),
        (
            "clusters: [{clusterID: a, monitors: [m], pools: [{name: p}, {name: p}]}]",
            "listed twice",
        ),
        (
            "clusters: [{clusterID: a, monitors: [m], pools: [{name: p}], secret: x}]",
            "secret",
        ),
    ] {
        let e = CensusConfig::parse(text).expect_err(text);
        assert!(e.contains(says), "{text}: {e}");
    }
}

#[test]
fn cloud_sections_need_no_ceph_and_name_their_scopes_up_front_when_they_can() {
    let c = CensusConfig::parse(
        r#"
clusterName: prod-eu-1
gce:
  - project: my-project
    locations: [europe-west1, europe-west1-b]
    clusterName: gke-eu-1
    clusterLabel: my-label
    keyFile: /etc/volume-leftovers/gce/key.json
    endpoint: http://127.0.0.1:8080
  - project: other
ebs:
  - region: eu-west-1
    account: "123456789012"
    clusterTag: my-cluster-tag
    endpoint: http://127.0.0.1:5000
  - region: us-east-1
"#,
    )
    .expect("config parses");
    assert!(c.clusters.is_empty(), "no Ceph");
    assert_eq!(c.gce[0].cluster_name.as_deref(), Some("gke-eu-1"));
    assert_eq!(c.gce[1].locations, None, "every location");
    assert_eq!(c.ebs[0].cluster_tag.as_deref(), Some("my-cluster-tag"));
    let census = c.census(Duration::from_secs(60));
    let scopes: Vec<String> = census.pools.keys().map(|s| s.to_string()).collect();
    assert_eq!(
        scopes,
        [
            "ebs:us-east-1",
            "ebs:123456789012/eu-west-1",
            "gce:my-project/europe-west1",
            "gce:my-project/europe-west1-b",
            "gce:other",
        ],
        "the aggregated project has its own scope before its first listing, none of its zones"
    );
    assert_eq!(census.cluster_name.as_deref(), Some("prod-eu-1"));
}

#[test]
fn a_bad_cloud_section_says_what_is_wrong() {
    for (text, says) in [
        (
            "{}",
            "no clusters, gce projects, ebs regions or azure subscriptions",
        ),
        ("gce: []\nebs: []", "nothing to census"),
        ("gce: [{locations: [europe-west1]}]", "project"),
        ("gce: [{project: \"\"}]", "without project"),
        (
            "gce: [{project: p}, {project: p}]",
            "gce project p is listed twice",
        ),
        ("gce: [{project: p, locations: []}]", "locations is empty"),
        (
            "gce: [{project: p, locations: [europe]}]",
            "\"europe\" is neither a zone",
        ),
        (
            "gce: [{project: p, locations: [Europe-West1]}]",
            "is neither",
        ),
        ("gce: [{project: p, locations: [a-b-c-d]}]", "is neither"),
        (
            "gce: [{project: p, locations: [a-b, a-b]}]",
            "location a-b is listed twice",
        ),
        (
            "gce: [{project: p, clusterName: \"\"}]",
            "clusterName is empty",
        ),
        (
            "gce: [{project: p, clusterLabel: \"\"}]",
            "clusterLabel is empty",
        ),
        ("gce: [{project: p, endpoint: 127.0.0.1:1}]", "not an http"),
        ("gce: [{project: p, zone: a-b-c}]", "zone"),
        ("ebs: [{account: \"1\"}]", "region"),
        ("ebs: [{region: \"\"}]", "without region"),
        ("ebs: [{region: r}, {region: r}]", "ebs:r is listed twice"),
        ("ebs: [{region: r, account: \"\"}]", "account is empty"),
        (
            "ebs: [{region: r, clusterTag: \"\"}]",
            "clusterTag is empty",
        ),
        (
            "ebs: [{region: r, clusterName: \"\"}]",
            "clusterName is empty",
        ),
        ("ebs: [{region: r, endpoint: ftp://x}]", "not an http"),
        ("ebs: [{region: r, tags: {a: b}}]", "tags"),
        ("aws: [{region: r}]", "aws"),
        ("azure: [{subscription: s}]", "resourceGroups"),
        (
            "azure: [{subscription: s, resourceGroups: [rg], endpoint: \"http://x\"}]",
            "not an https:// URL",
        ),
    ] {
        let e = CensusConfig::parse(text).expect_err(text);
        assert!(e.contains(says), "{text}: {e}");
    }
}

// ---- Which image a volume names ----

fn source_of(p: PersistentVolume) -> VolumeSourceInfo {
    volume_source(Volume::from(&p).spec.as_ref().expect("spec"))
}

#[test]
fn a_ceph_csi_volume_names_its_image_by_attributes_or_by_handle() {
    let handle = format!("0001-0024-{FSID}-0000000000000002-5f6c7d8e-9a0b-11ee-b962-0242ac120002");
    let by_attrs = source_of(pv("a").csi(
        "rbd.csi.ceph.com",
        &handle,
        [
            ("clusterID", FSID),
            ("pool", "k8s-rbd"),
            ("imageName", "csi-vol-named"),
            ("radosNamespace", "team-a"),
        ],
    ));
    assert_eq!(
        image_ref(&by_attrs),
        Some(ImageRef {
            cluster_id: Some(FSID.into()),
            pool: Some("k8s-rbd".into()),
            pool_id: Some(2),
            namespace: "team-a".into(),
            name: "csi-vol-named".into(),
        })
    );
    // Only the handle (older ceph-csi): the pool by id, the image from the uuid.
    let by_handle = source_of(pv("b").csi("rook-ceph.rbd.csi.ceph.com", &handle, []));
    assert_eq!(
        image_ref(&by_handle),
        Some(ImageRef {
            cluster_id: Some(FSID.into()),
            pool: None,
            pool_id: Some(2),
            namespace: String::new(),
            name: "csi-vol-5f6c7d8e-9a0b-11ee-b962-0242ac120002".into(),
        })
    );
    let in_tree = source_of(pv("c").rbd(None, "legacy"));
    assert_eq!(
        image_ref(&in_tree),
        Some(ImageRef {
            cluster_id: None,
            pool: Some("rbd".into()),
            pool_id: None,
            namespace: String::new(),
            name: "legacy".into(),
        })
    );
    for other in [
        pv("d").csi("ebs.csi.aws.com", "vol-1", []),
        pv("e").csi("rbd.csi.ceph.com", "not-a-handle", []),
        pv("f").host_path("/data"),
    ] {
        assert_eq!(image_ref(&source_of(other)), None);
    }
}

// ---- Names ----

#[test]
fn leftover_names_are_stable_valid_and_distinct() {
    // The name must never change between versions: it is the object people and tools follow.
    assert_eq!(
        leftover_name(&pool(), "csi-vol-5f6c7d8e"),
        "rbd-57c05e1945e7117a-csi-vol-5f6c7d8e"
    );
    let odd = format!("Weird_Image.{}ü", "x".repeat(300));
    for image in ["csi-vol-1", "UPPER_case", "-.-", "", &odd] {
        let n = leftover_name(&pool(), image);
        assert!(n.len() <= 253, "{n}");
        assert!(
            n.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{n}"
        );
        assert!(!n.ends_with('-') && n.starts_with("rbd-"), "{n}");
    }
    let other_pool = PoolKey::new(FSID, "other", None);
    assert_ne!(
        leftover_name(&pool(), "img"),
        leftover_name(&other_pool, "img")
    );
    assert_ne!(leftover_name(&pool(), "a_b"), leftover_name(&pool(), "a-b"));
}

// ---- What two listings may conclude ----

#[test]
fn before_any_census_and_after_a_failure_every_answer_is_unknown() {
    let mut c = census();
    let old = Some(now_plus(-86400));
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("x").clone()), old.as_ref()),
        ImageFound::Unknown
    );
    c.record(&key(), Ok(snapshot(now_plus(-20), vec![], &[])));
    c.record(&key(), Ok(snapshot(now_plus(-10), vec![], &[])));
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("x").clone()), old.as_ref()),
        ImageFound::Missing { in_trash: false }
    );
    // Ceph goes down: nothing is concluded, not even what was concluded before.
    c.record(&key(), Err("Ceph is unavailable".into()));
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("x").clone()), old.as_ref()),
        ImageFound::Unknown
    );
    assert!(!c.is_trusted(&key()));
}

#[test]
fn an_image_is_missing_only_after_two_listings_without_it_and_a_volume_older_than_both() {
    let mut c = census();
    let old = now_plus(-86400);
    c.record(
        &key(),
        Ok(snapshot(now_plus(-20), vec![("img", listed())], &[])),
    );
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("img").clone()), Some(&old)),
        ImageFound::Present { watchers: 0 }
    );
    c.record(&key(), Ok(snapshot(now_plus(-10), vec![], &[])));
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("img").clone()), Some(&old)),
        ImageFound::Unknown,
        "one listing without it: maybe a race"
    );
    c.record(&key(), Ok(snapshot(now(), vec![], &["img"])));
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("img").clone()), Some(&old)),
        ImageFound::Missing { in_trash: true }
    );
    // A volume created after the first listing without it: its image may be on its way.
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("img").clone()), Some(&now_plus(-5))),
        ImageFound::Unknown
    );
    assert_eq!(
        c.image(&DiskRef::from(rbd_ref("img").clone()), None),
        ImageFound::Unknown
    );
}

#[test]
fn pools_not_censused_and_ambiguous_in_tree_volumes_are_not_censused() {
    let c = census();
    let mut r = rbd_ref("img");
    r.pool = Some("elsewhere".into());
    assert_eq!(
        c.image(&DiskRef::from(r.clone()), None),
        ImageFound::NotCensused
    );
    let mut other = rbd_ref("img");
    other.cluster_id = Some("another-cluster".into());
    assert_eq!(
        c.image(&DiskRef::from(other.clone()), None),
        ImageFound::NotCensused
    );
    // In-tree: no cluster id; one configured cluster has the pool, so it resolves.
    let mut in_tree = rbd_ref("img");
    in_tree.cluster_id = None;
    assert_eq!(
        c.resolve(&DiskRef::from(in_tree.clone())),
        Resolved::In(&key())
    );
    // Two clusters with a pool of that name: it does not say which.
    let two = CensusConfig::parse(&format!(
        "{CONFIG}\n  - clusterID: second\n    monitors: [m]\n    pools: [{{name: k8s-rbd}}]\n"
    ))
    .expect("config");
    let c2 = two.census(Duration::ZERO);
    assert_eq!(
        c2.resolve(&DiskRef::from(in_tree.clone())),
        Resolved::NotCensused
    );
    assert_eq!(
        c2.image(&DiskRef::from(in_tree.clone()), None),
        ImageFound::NotCensused
    );
}

#[test]
fn a_handle_with_only_a_pool_id_resolves_once_the_pool_was_listed() {
    let mut c = census();
    let mut r = rbd_ref("img");
    r.pool = None;
    r.pool_id = Some(2);
    assert_eq!(
        c.image(&DiskRef::from(r.clone()), None),
        ImageFound::Unknown,
        "the pool's id is not known yet"
    );
    c.record(&key(), Ok(snapshot(now(), vec![("img", listed())], &[])));
    assert_eq!(
        c.image(&DiskRef::from(r.clone()), None),
        ImageFound::Present { watchers: 0 }
    );
    r.pool_id = Some(99);
    assert_eq!(
        c.image(&DiskRef::from(r.clone()), None),
        ImageFound::NotCensused
    );
}

// ---- Images nothing references ----

fn censused(images: Vec<(&str, Seen)>) -> Census {
    let mut c = census();
    c.record(&key(), Ok(snapshot(now_plus(-60), images, &[])));
    c
}

#[test]
fn an_old_unreferenced_image_of_this_cluster_is_a_finding_with_its_details() {
    let c = censused(vec![("csi-vol-orphan", detailed(7200, Some("e2e"), &[]))]);
    let found = c.orphans(&key(), &HashSet::new(), &now());
    assert_eq!(found.len(), 1);
    let f = &found[0];
    let s = &f.status;
    assert_eq!(f.name(), leftover_name(&pool(), "csi-vol-orphan"));
    assert_eq!(f.volume_name, "");
    assert_eq!(s.reason, Reason::DiskWithoutVolume);
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.hints.is_empty(), "{:?}", s.hints);
    assert_eq!(s.capacity.as_deref(), Some("10Gi"));
    assert_eq!(s.capacity_bytes, Some(10 * 1024 * 1024 * 1024));
    let img = s.image.as_ref().expect("image");
    assert_eq!(
        (
            img.cluster_id.as_deref(),
            img.pool.as_deref(),
            img.name.as_str()
        ),
        (Some(FSID), Some("k8s-rbd"), "csi-vol-orphan")
    );
    assert_eq!(img.created, Some(now_plus(-7200)));
    assert_eq!(s.source.pool.as_deref(), Some("k8s-rbd"));
    assert!(
        s.message.contains(
            "ceph-csi recorded it as PersistentVolume pvc-1 for claim db/data in this cluster"
        ),
        "{}",
        s.message
    );
    // Deterministic: the same census gives the same finding.
    assert_eq!(c.orphans(&key(), &HashSet::new(), &now()), found);
}

#[test]
fn referenced_young_snapshot_undetailed_and_other_clusters_images_are_not_findings() {
    let c = censused(vec![
        ("csi-vol-used", detailed(7200, Some("e2e"), &[])),
        ("csi-vol-young", detailed(600, Some("e2e"), &[])),
        ("csi-snap-1", detailed(7200, Some("e2e"), &[])),
        ("csi-vol-theirs", detailed(7200, Some("prod-us"), &[])),
        ("csi-vol-unread", listed()),
    ]);
    let referenced: HashSet<String> = ["csi-vol-used".to_string()].into();
    assert_eq!(c.orphans(&key(), &referenced, &now()), vec![]);
}

#[test]
fn without_ownership_metadata_or_with_watchers_it_says_so() {
    let c = censused(vec![
        ("legacy", detailed(7200, None, &[])),
        ("mapped", detailed(7200, Some("e2e"), &["10.0.0.7:0/123"])),
    ]);
    let found = c.orphans(&key(), &HashSet::new(), &now());
    let by_image: HashMap<String, _> = found
        .iter()
        .map(|f| (f.status.image.as_ref().unwrap().name.clone(), f))
        .collect();
    assert_eq!(by_image["legacy"].status.hints, vec![Hint::OwnerUnknown]);
    assert!(
        by_image["legacy"]
            .status
            .message
            .contains("no ceph-csi ownership metadata")
    );
    assert_eq!(by_image["mapped"].status.hints, vec![Hint::DiskInUse]);
    assert!(
        by_image["mapped"]
            .status
            .message
            .contains("open or mapped by 10.0.0.7:0/123")
    );
}

#[test]
fn a_failing_census_reports_no_orphans() {
    let mut c = censused(vec![("orphan", detailed(7200, Some("e2e"), &[]))]);
    c.record(&key(), Err("timeout".into()));
    assert_eq!(c.orphans(&key(), &HashSet::new(), &now()), vec![]);
}

// ---- VolumeWithoutDisk ----

fn bound_rbd_pv() -> PersistentVolume {
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
                ("imageName", "csi-vol-gone"),
            ],
        );
    p.metadata.creation_timestamp = Some(now_plus(-86400));
    p
}

fn with_census(c: Census) -> super::fixtures::FakeLookup {
    let mut l = lookup().with_claim("db", "data", "uid-data");
    l.census = Some(Arc::new(c));
    l
}

#[test]
fn a_bound_volume_whose_image_is_gone_is_a_data_loss_finding() {
    let mut c = census();
    c.record(&key(), Ok(snapshot(now_plus(-20), vec![], &[])));
    c.record(&key(), Ok(snapshot(now_plus(-10), vec![], &[])));
    match classify(&Volume::from(&bound_rbd_pv()), &with_census(c), now()) {
        Verdict::Leftover(f) => {
            let s = &f.status;
            assert_eq!(s.reason, Reason::VolumeWithoutDisk);
            assert_eq!(s.subject, Subject::VolumeAndDisk);
            assert_eq!(s.phase, "Bound");
            assert!(
                s.message.contains("RBD image k8s-rbd/csi-vol-gone is gone")
                    && s.message.contains("its data is lost"),
                "{}",
                s.message
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_finding_spelled_with_the_old_names_is_written_again_once_without_an_event() {
    use super::fixtures::VlBuilder;
    use crate::decide::name::told;
    use crate::decide::plan::{Action, desired, plan};
    use crate::model::leftover::{Keep, Leftover, LeftoverObject};

    let mut c = census();
    c.record(&key(), Ok(snapshot(now_plus(-20), vec![], &[])));
    c.record(&key(), Ok(snapshot(now_plus(-10), vec![], &[])));
    let Verdict::Leftover(f) = classify(&Volume::from(&bound_rbd_pv()), &with_census(c), now())
    else {
        panic!("a finding")
    };
    let published =
        serde_json::to_string(&desired(&f, None, &now(), &now(), None).stored_as("vl")).unwrap();
    let spelled_old = published
        .replace("\"VolumeWithoutDisk\"", "\"VolumeWithoutImage\"")
        .replace("\"VolumeAndDisk\"", "\"VolumeAndImage\"");
    assert_ne!(spelled_old, published);
    let read = |json: &str| {
        let o: LeftoverObject = serde_json::from_str(json).expect("an object");
        Leftover::read(o, Keep::default())
    };
    let verdict = Verdict::Leftover(f.clone());
    let first_seen = f.status.first_seen.clone();
    let name = f.volume_name.as_str();

    // Today's names, as published: nothing to write.
    let current = read(&published);
    let a = plan(
        name,
        Some(&verdict),
        Some(&current),
        &first_seen,
        &now(),
        None,
    );
    assert!(matches!(a, Action::Nothing), "{a:?}");

    // The old names: the same finding, its status written again, and no Event.
    let old = read(&spelled_old);
    assert_eq!(
        old.status.as_ref().map(|s| s.reason),
        Some(Reason::VolumeWithoutDisk)
    );
    let a = plan(name, Some(&verdict), Some(&old), &first_seen, &now(), None);
    let Action::Apply { object, status, .. } = &a else {
        panic!("expected Apply, got {a:?}")
    };
    assert!(status, "the status is written");
    let s = object.status.as_ref().unwrap();
    assert_eq!(
        (s.reason, s.subject),
        (Reason::VolumeWithoutDisk, Subject::VolumeAndDisk)
    );
    assert_eq!(s.first_seen, first_seen);
    assert!(told(&a, Some(&old)).is_none(), "no Event for a rename");
}

#[test]
fn while_the_census_cannot_say_a_volume_is_classified_by_its_claim_alone() {
    let mut c = census();
    c.record(&key(), Ok(snapshot(now_plus(-20), vec![], &[])));
    c.record(&key(), Err("Ceph is unavailable".into()));
    assert_eq!(
        classify(&Volume::from(&bound_rbd_pv()), &with_census(c), now()),
        Verdict::Healthy
    );
}

#[test]
fn a_delete_policy_volume_whose_image_is_gone_waits_the_delete_grace() {
    let mut c = census();
    c.record(&key(), Ok(snapshot(now_plus(-20), vec![], &[])));
    c.record(&key(), Ok(snapshot(now_plus(-10), vec![], &[])));
    let graces = Graces {
        grace: Duration::from_secs(120),
        delete_grace: Duration::from_secs(600),
        expansion_grace: Duration::from_secs(120),
    };
    let releasing = bound_rbd_pv().delete().released();
    let Verdict::Leftover(f) = classify(&Volume::from(&releasing), &with_census(c.clone()), now())
    else {
        panic!("a finding")
    };
    assert_eq!(f.status.reason, Reason::VolumeWithoutDisk);
    assert_eq!(grace_of(&f, graces).0, Duration::from_secs(600));
    let Verdict::Leftover(f) = classify(&Volume::from(&bound_rbd_pv()), &with_census(c), now())
    else {
        panic!("a finding")
    };
    assert_eq!(
        grace_of(&f, graces).0,
        Duration::ZERO,
        "a Bound one is published at once"
    );
}

/// A census keeps the images whose details it could not read apart: they are listed (they
/// exist), carry no details (no orphan is made of them), and are named in `unread` with why.
#[test]
fn images_whose_details_could_not_be_read_are_listed_and_unread() {
    use crate::census::ceph::rbd::{Detail, Image, ImageDetail, ImageName, PoolCensus, RbdError};
    let image = |name: &str, detail: Detail| Image {
        name: ImageName {
            name: name.into(),
            id: format!("id-{name}"),
        },
        detail,
    };
    let read = ImageDetail {
        size: 1,
        created: None,
        watchers: Vec::new(),
        metadata: Default::default(),
    };
    let c = PoolCensus {
        fsid: FSID.into(),
        pool: "k8s-rbd".into(),
        pool_id: 2,
        namespace: None,
        images: vec![
            image("a", Detail::Read(read)),
            image("b", Detail::Failed(RbdError::Config("unreadable".into()))),
            image("c", Detail::NotAsked),
            image("d", Detail::Gone),
        ],
        trash: Vec::new(),
        requests: Default::default(),
        timings: Default::default(),
    };
    let s = snapshot_of(c, now());
    assert_eq!(s.images.len(), 4);
    assert!(s.images["a"].detail.is_some());
    assert!(s.images["b"].detail.is_none());
    assert_eq!(
        s.unread.keys().collect::<Vec<_>>(),
        vec!["b"],
        "only the image whose read failed: not one nobody asked about, not one removed since"
    );
    assert!(s.unread["b"].contains("unreadable"), "{:?}", s.unread);
}

#[test]
fn one_problem_is_logged_once_whatever_its_text_and_its_end_once() {
    use crate::census::ceph::rbd::Category;
    let mut f = crate::decide::census::ScopeState::default();
    assert!(f.failed(Category::Unavailable.into(), "rbd_list2 timed out"));
    // The same outage in other words (the next census times out in rados_connect), again and
    // again: not news.
    for _ in 0..3 {
        assert!(!f.failed(Category::Unavailable.into(), "rados_connect timed out"));
        assert!(!f.failed(Category::Unavailable.into(), "rbd_list2 timed out"));
    }
    // Another problem is.
    assert!(f.failed(Category::Forbidden.into(), "the key was refused"));
    assert_eq!(f.recovered().as_deref(), Some("the key was refused"));
    assert_eq!(f.recovered(), None, "its end is said once");
    assert!(f.failed(Category::Unavailable.into(), "rbd_list2 timed out"));
}

#[test]
fn a_ceph_error_gets_its_category_once_and_keeps_its_name_text_and_source() {
    use crate::census::CensusFailure;
    use crate::census::ceph::rbd::Category;
    use crate::decide::census::{FailureCategory, FailureKind};
    let cases = [
        (
            Category::Unavailable,
            FailureCategory::Timeout,
            "unavailable",
        ),
        (Category::Forbidden, FailureCategory::Forbidden, "forbidden"),
        (Category::NotFound, FailureCategory::Other, "not_found"),
        (
            Category::LibraryMissing,
            FailureCategory::Other,
            "library_missing",
        ),
        (Category::Config, FailureCategory::Other, "config"),
        (Category::Other, FailureCategory::Other, "other"),
    ];
    for (ceph, category, name) in cases {
        let kind = FailureKind::from(ceph);
        assert_eq!(
            (kind.category, kind.to_string()),
            (category, name.to_string())
        );
    }
    // The line is what the logs printed before ("context: cause"); the cause stays reachable.
    let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
    let f = CensusFailure::caused(
        Category::Config,
        Some("cannot read the key file /k".into()),
        io,
    );
    assert_eq!(f.to_string(), "cannot read the key file /k: no such file");
    let cause = std::error::Error::source(&f).expect("a source");
    assert_eq!(cause.to_string(), "no such file");
    assert!(cause.downcast_ref::<std::io::Error>().is_some());
    assert_eq!(f.category(), FailureCategory::Other);
    let bare = CensusFailure::caused(
        Category::Unavailable,
        None,
        std::io::Error::other("timed out"),
    );
    assert_eq!(bare.to_string(), "timed out");
    // Two problems of one category are still two problems to the log.
    let mut failing = crate::decide::census::ScopeState::default();
    assert!(failing.failed(FailureKind::from(Category::NotFound), "no pool"));
    assert!(failing.failed(FailureKind::from(Category::Config), "bad option"));
    assert!(!failing.failed(FailureKind::from(Category::Config), "bad option again"));
}

/// A Ceph failure's line is librbd's own words: the call, what it was called on, the errno's
/// text and number; one line, bounded as every backend's (a pool name can be long).
#[test]
fn a_ceph_failure_is_one_line_with_the_call_and_the_errnos_text() {
    use crate::census::LINE_BOUND;
    use crate::census::ceph::failure;
    use crate::census::ceph::rbd::{Failure, RbdError, Target};
    let refused = |pool: &str| {
        RbdError::Forbidden(Box::new(Failure {
            call: "rbd_list2",
            target: Target::Pool {
                pool: pool.into(),
                namespace: None,
            },
            code: -13,
            elapsed: Duration::ZERO,
        }))
    };
    let f = failure(refused("replicapool"), None);
    assert_eq!(
        f.to_string(),
        "Ceph refused the request: rbd_list2 on pool replicapool: Permission denied (-13) \
         (check the user's caps: mon 'allow r' osd 'profile rbd-read-only')"
    );
    assert_eq!(f.kind.to_string(), "forbidden");
    let long = failure(refused(&"p\n".repeat(400)), Some("cluster c".into())).to_string();
    assert!(long.starts_with("cluster c: Ceph refused the request: rbd_list2 on pool p p p"));
    assert!(!long.contains('\n'), "{long}");
    assert_eq!(long.chars().count(), LINE_BOUND, "{long}");
}
