//! The keys of a census for any backend, without a cloud: which disk a volume names (every
//! handle form, malformed ones included), which censused scope holds it, how scopes are
//! labelled, and the names of findings about cloud disks.

use std::time::Duration;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, VolumeNodeAffinity,
};

use super::fixtures::{PvBuilder, now_plus, pv};
use crate::census::ceph::handle::PoolKey;
use crate::census::ceph::vocabulary::leftover_name;
use crate::census::volume_disk;
use crate::decide::census::{
    Census, DiskRef, Resolved, Scope, ScopeListing, Seen, disk_leftover_name,
};
use crate::model::image::ImageFound;
use crate::model::volume::Volume;

/// Requires the zones `(key, values)` in the PV's node affinity, each as its own expression.
fn affinity(mut p: PersistentVolume, exprs: &[(&str, &str, &[&str])]) -> PersistentVolume {
    let spec = p.spec.get_or_insert_with(Default::default);
    spec.node_affinity = Some(VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(
                    exprs
                        .iter()
                        .map(|(key, op, values)| NodeSelectorRequirement {
                            key: key.to_string(),
                            operator: op.to_string(),
                            values: Some(values.iter().map(|v| v.to_string()).collect()),
                        })
                        .collect(),
                ),
                match_fields: None,
            }],
        }),
    });
    p
}

fn zoned(p: PersistentVolume, zones: &[&str]) -> PersistentVolume {
    affinity(p, &[("topology.kubernetes.io/zone", "In", zones)])
}

/// The disk the PV names, as the operator reads it (the lean volume, its source and zones).
fn disk_of(p: PersistentVolume) -> Option<DiskRef> {
    let v = Volume::from(&p);
    let spec = v.spec.as_ref().expect("spec");
    volume_disk(spec)
}

fn gce(project: Option<&str>, location: Option<&str>, name: &str) -> Option<DiskRef> {
    Some(crate::census::gce::vocabulary::disk(
        project, location, name,
    ))
}

fn ebs(volume_id: &str, region: Option<&str>) -> Option<DiskRef> {
    Some(crate::census::ebs::vocabulary::volume(volume_id, region))
}

const GCE: &str = "pd.csi.storage.gke.io";
const EBS: &str = "ebs.csi.aws.com";

#[test]
fn a_gce_csi_handle_names_a_zonal_or_regional_disk_and_nothing_else() {
    let cases: &[(&str, Option<DiskRef>)] = &[
        (
            "projects/p1/zones/us-central1-a/disks/pvc-1",
            gce(Some("p1"), Some("us-central1-a"), "pvc-1"),
        ),
        (
            "projects/p1/regions/us-central1/disks/pvc-2",
            gce(Some("p1"), Some("us-central1"), "pvc-2"),
        ),
        // A migrated in-tree volume whose PV did not name the project.
        (
            "projects/UNSPECIFIED/zones/europe-west1-b/disks/legacy",
            gce(None, Some("europe-west1-b"), "legacy"),
        ),
        ("projects/p1/zones/us-central1-a/disks/", None),
        ("projects/p1/zones/us-central1-a/disks/d/extra", None),
        ("projects/p1/global/us-central1-a/disks/d", None),
        ("projects//zones/us-central1-a/disks/d", None),
        ("projects/p1/zones//disks/d", None),
        ("p1/zones/us-central1-a/disks/d", None),
        ("projects/p1/zones/us-central1-a/snapshots/d", None),
        ("/////", None),
        ("", None),
        ("vol-0123456789abcdef0", None),
    ];
    for (handle, want) in cases {
        assert_eq!(&disk_of(pv("a").csi(GCE, handle, [])), want, "{handle:?}");
    }
}

#[test]
fn an_in_tree_gce_disk_is_located_by_its_node_affinity_zones() {
    let one = ["us-central1-a"];
    let two = ["us-central1-a", "us-central1-b"];
    let cases: &[(&str, &[&str], Option<DiskRef>)] = &[
        ("d1", &one, gce(None, Some("us-central1-a"), "d1")),
        // A regional PD lists its two zones: its location is their region.
        ("d2", &two, gce(None, Some("us-central1"), "d2")),
        // The label form of the same (`__` between zones).
        (
            "d3",
            &["us-central1-a__us-central1-f"],
            gce(None, Some("us-central1"), "d3"),
        ),
        // Zones of two regions, or zones not shaped `{locale}-{region}-{zone}`: unknown.
        (
            "d4",
            &["us-central1-a", "europe-west1-b"],
            gce(None, None, "d4"),
        ),
        ("d5", &["zone-x", "zone-y"], gce(None, None, "d5")),
        ("d6", &[], gce(None, None, "d6")),
        ("", &one, None),
        ("a/b", &one, None),
    ];
    for (name, zones, want) in cases {
        assert_eq!(
            &disk_of(zoned(pv("a").gce_pd(name), zones)),
            want,
            "{name:?} {zones:?}"
        );
    }
    // Every documented zone key counts; other keys and operators do not.
    for key in [
        "failure-domain.beta.kubernetes.io/zone",
        "topology.gke.io/zone",
    ] {
        let p = affinity(pv("a").gce_pd("d"), &[(key, "In", &one)]);
        assert_eq!(disk_of(p), gce(None, Some("us-central1-a"), "d"), "{key}");
    }
    let p = affinity(
        pv("a").gce_pd("d"),
        &[
            ("kubernetes.io/hostname", "In", &["node-1"]),
            ("topology.kubernetes.io/zone", "NotIn", &["us-central1-b"]),
        ],
    );
    assert_eq!(disk_of(p), gce(None, None, "d"));
}

#[test]
fn an_ebs_volume_is_named_by_its_csi_handle_or_in_tree_id_and_located_by_its_zone() {
    let csi: &[(&str, &[&str], Option<DiskRef>)] = &[
        (
            "vol-0123456789abcdef0",
            &["us-east-1a"],
            ebs("vol-0123456789abcdef0", Some("us-east-1")),
        ),
        ("vol-12345678", &[], ebs("vol-12345678", None)),
        // Two regions: which one is not known.
        (
            "vol-12345678",
            &["us-east-1a", "eu-west-1a"],
            ebs("vol-12345678", None),
        ),
        ("vol-", &[], None),
        ("vol-xyz", &[], None),
        ("VOL-12345678", &[], None),
        ("arn:aws:ec2:us-east-1:1:volume/vol-12345678", &[], None),
        ("", &[], None),
    ];
    for (handle, zones, want) in csi {
        let p = affinity(
            pv("a").csi(EBS, handle, []),
            &[("topology.ebs.csi.aws.com/zone", "In", zones)],
        );
        assert_eq!(&disk_of(p), want, "{handle:?} {zones:?}");
    }
    let in_tree: &[(&str, &[&str], Option<DiskRef>)] = &[
        (
            "aws://eu-west-1b/vol-12345678",
            &[],
            ebs("vol-12345678", Some("eu-west-1")),
        ),
        ("aws:///vol-12345678", &[], ebs("vol-12345678", None)),
        (
            "vol-12345678",
            &["us-gov-west-1a"],
            ebs("vol-12345678", Some("us-gov-west-1")),
        ),
        // A Local Zone belongs to its parent region.
        (
            "aws://us-west-2-lax-1a/vol-abc",
            &[],
            ebs("vol-abc", Some("us-west-2")),
        ),
        // The zone in the id wins over the node affinity.
        (
            "aws://eu-west-1b/vol-12345678",
            &["us-east-1a"],
            ebs("vol-12345678", Some("eu-west-1")),
        ),
        // A region where a zone belongs: no region is made up.
        (
            "aws://us-east-1/vol-12345678",
            &[],
            ebs("vol-12345678", None),
        ),
        ("aws://eu-west-1b/", &[], None),
        ("aws://eu-west-1b/vol-1/extra", &[], None),
        ("aws://eu-west-1b", &[], None),
        ("aws:/vol-12345678", &[], None),
        ("", &[], None),
    ];
    for (id, zones, want) in in_tree {
        let p = zoned(pv("a").aws_ebs(id), zones);
        assert_eq!(&disk_of(p), want, "{id:?} {zones:?}");
    }
}

#[test]
fn every_volume_keeps_the_zones_its_affinity_requires_one_list_shared() {
    let ceph = zoned(
        pv("a").csi("rbd.csi.ceph.com", "not-a-handle", []),
        &["us-east-1b", "us-east-1a", "us-east-1a"],
    );
    let cloud = zoned(pv("b").gce_pd("d"), &["us-east-1a", "us-east-1b"]);
    let (ceph, cloud) = (
        Volume::from(&ceph).spec.expect("spec"),
        Volume::from(&cloud).spec.expect("spec"),
    );
    assert_eq!(ceph.zones(), ["us-east-1a", "us-east-1b"]);
    assert_eq!(cloud.zones(), ["us-east-1a", "us-east-1b"]);
    // Interned: a zone costs a volume nothing but its share of one list.
    assert!(std::sync::Arc::ptr_eq(
        ceph.zones.as_ref().expect("zones"),
        cloud.zones.as_ref().expect("zones")
    ));
    let none = Volume::from(&pv("c").gce_pd("e")).spec.expect("spec");
    assert!(none.zones.is_none());
}

fn gce_scope(project: &str, location: &str) -> Scope {
    crate::census::gce::vocabulary::location(project, location)
}

fn ebs_scope(account: Option<&str>, region: &str) -> Scope {
    crate::census::ebs::vocabulary::region(account, region)
}

#[test]
fn a_cloud_disk_is_censused_only_by_the_one_scope_that_can_hold_it() {
    let c = Census::new(
        [
            gce_scope("p1", "us-central1-a"),
            gce_scope("p1", "us-central1"),
            gce_scope("p2", "us-central1-a"),
            ebs_scope(None, "us-east-1"),
            Scope::from(PoolKey::new("fsid", "us-east-1", None)),
        ],
        None,
        Duration::ZERO,
    );
    let cases: &[(Option<DiskRef>, Option<Scope>)] = &[
        (
            gce(Some("p1"), Some("us-central1-a"), "d"),
            Some(gce_scope("p1", "us-central1-a")),
        ),
        (
            gce(Some("p1"), Some("us-central1"), "d"),
            Some(gce_scope("p1", "us-central1")),
        ),
        // Two projects have that zone and the volume does not say which.
        (gce(None, Some("us-central1-a"), "d"), None),
        (
            gce(None, Some("us-central1"), "d"),
            Some(gce_scope("p1", "us-central1")),
        ),
        (gce(Some("p1"), None, "d"), None),
        (gce(Some("p3"), Some("us-central1-a"), "d"), None),
        (
            ebs("vol-1", Some("us-east-1")),
            Some(ebs_scope(None, "us-east-1")),
        ),
        // One EBS scope: a volume that does not say its region can only be there.
        (ebs("vol-1", None), Some(ebs_scope(None, "us-east-1"))),
        (ebs("vol-1", Some("eu-west-1")), None),
    ];
    for (r, want) in cases {
        let r = r.as_ref().expect("a disk");
        let got = match c.resolve(r) {
            Resolved::In(s) => Some(s.clone()),
            Resolved::NotCensused => None,
            Resolved::NotYet => panic!("{r:?}: cloud scopes need no listing to resolve"),
        };
        assert_eq!(&got, want, "{r:?}");
    }
    let two_accounts = Census::new(
        [
            ebs_scope(Some("1"), "us-east-1"),
            ebs_scope(Some("2"), "us-east-1"),
        ],
        None,
        Duration::ZERO,
    );
    assert_eq!(
        two_accounts.resolve(&ebs("vol-1", Some("us-east-1")).expect("disk")),
        Resolved::NotCensused
    );
}

#[test]
fn a_cloud_disk_missing_from_two_listings_is_missing() {
    let scope = gce_scope("p1", "us-central1");
    let mut c = Census::new([scope.clone()], None, Duration::ZERO);
    let listing = |at, names: &[&str]| ScopeListing {
        started: now_plus(at),
        scope_id: None,
        images: names
            .iter()
            .map(|n| {
                let seen = Seen {
                    size_only: None,
                    users_only: 0,
                    id: "123".into(),
                    detail: None,
                };
                (n.to_string(), seen)
            })
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    };
    let kept = gce(Some("p1"), Some("us-central1"), "kept").expect("disk");
    let gone = gce(None, Some("us-central1"), "gone").expect("disk");
    let created = now_plus(-100);
    c.record(&scope, Ok(listing(-20, &["kept", "gone"])));
    assert_eq!(
        c.image(&kept, Some(&created)),
        ImageFound::Present { watchers: 0 }
    );
    c.record(&scope, Ok(listing(-10, &["kept"])));
    assert_eq!(c.image(&gone, Some(&created)), ImageFound::Unknown);
    c.record(&scope, Ok(listing(0, &["kept"])));
    assert_eq!(
        c.image(&gone, Some(&created)),
        ImageFound::Missing { in_trash: false }
    );
}

#[test]
fn scopes_are_labelled_by_backend_and_ceph_keeps_its_labels() {
    let pool = PoolKey::new("fsid", "k8s-rbd", None);
    let cases = [
        (Scope::from(pool.clone()), "fsid/k8s-rbd", "ceph"),
        (
            Scope::from(PoolKey::new("fsid", "shared", Some("team-a"))),
            "fsid/shared/team-a",
            "ceph",
        ),
        (
            gce_scope("p1", "us-central1-a"),
            "gce:p1/us-central1-a",
            "gce",
        ),
        (ebs_scope(None, "us-east-1"), "ebs:us-east-1", "ebs"),
        (
            ebs_scope(Some("123456789012"), "us-east-1"),
            "ebs:123456789012/us-east-1",
            "ebs",
        ),
    ];
    for (scope, label, backend) in cases {
        assert_eq!(scope.to_string(), label);
        assert_eq!(scope.backend().name(), backend);
    }
}

#[test]
fn cloud_leftover_names_follow_the_rbd_scheme_and_never_collide() {
    let pool = PoolKey::new("fsid", "k8s-rbd", None);
    assert_eq!(
        disk_leftover_name(&Scope::from(pool.clone()), "csi-vol-1"),
        leftover_name(&pool, "csi-vol-1")
    );
    // Pinned: the name must never change between versions.
    assert_eq!(
        disk_leftover_name(&gce_scope("p1", "us-central1-a"), "pvc-1"),
        "gce-a859f24467d6d376-pvc-1"
    );
    assert_eq!(
        disk_leftover_name(&ebs_scope(None, "us-east-1"), "vol-0123456789abcdef0"),
        "ebs-8a6c5235766387f9-vol-0123456789abcdef0"
    );
    let names = [
        disk_leftover_name(&gce_scope("p1", "us-central1-a"), "d"),
        disk_leftover_name(&gce_scope("p1", "us-central1"), "d"),
        disk_leftover_name(&gce_scope("p2", "us-central1-a"), "d"),
        disk_leftover_name(&ebs_scope(None, "us-central1-a"), "d"),
        disk_leftover_name(&ebs_scope(Some("1"), "us-east-1"), "d"),
        disk_leftover_name(&ebs_scope(Some("2"), "us-east-1"), "d"),
    ];
    let distinct: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(distinct.len(), names.len(), "{names:?}");
    for n in &names {
        assert!(n.len() <= 253 && !n.ends_with('-'), "{n}");
    }
}

#[test]
fn whose_a_disk_is_follows_what_it_says_and_what_this_cluster_is_called() {
    use crate::decide::census::{CreatedFor, DiskFacts, Owner};
    let facts = |cluster: Option<&str>, recorded: bool| DiskFacts {
        cluster: cluster.map(str::to_string),
        created_for: recorded.then(CreatedFor::default),
        ..DiskFacts::default()
    };
    let cases = [
        (Some("a"), true, Some("a"), Owner::Ours),
        (Some("a"), false, Some("a"), Owner::Ours),
        (Some("b"), true, Some("a"), Owner::OtherCluster("b".into())),
        (Some("b"), false, Some("a"), Owner::OtherCluster("b".into())),
        // Only one side names a cluster: cannot tell.
        (Some("a"), true, None, Owner::Unknown),
        (None, true, Some("a"), Owner::Unknown),
        // Neither does, and the provisioner recorded it: one cluster, this one.
        (None, true, None, Owner::Ours),
        // Nothing recorded at all.
        (None, false, None, Owner::Unknown),
        (None, false, Some("a"), Owner::Unknown),
    ];
    for (cluster, recorded, ours, want) in cases {
        assert_eq!(
            facts(cluster, recorded).owner(ours),
            want,
            "{cluster:?} {recorded} {ours:?}"
        );
    }
}

#[test]
fn a_cloud_disk_nothing_names_is_a_finding_with_its_facts_unless_another_cluster_owns_it() {
    use crate::decide::census::{CreatedFor, DiskFacts};
    use crate::model::crd::{Hint, Reason};
    let scope = gce_scope("p1", "us-central1");
    let mut c = Census::new([scope.clone()], Some("prod"), Duration::from_secs(3600));
    let disk = |cluster: Option<&str>, users: &[&str]| Seen {
        size_only: None,
        users_only: 0,
        id: "4711".into(),
        detail: Some(Box::new(DiskFacts {
            size: 10 << 30,
            created: Some(now_plus(-7200).0),
            kind: Some("pd-balanced".into()),
            in_use: users.iter().map(|u| u.to_string()).collect(),
            created_for: Some(CreatedFor {
                pv: Some("pvc-1".into()),
                pvc: Some("data".into()),
                pvc_namespace: Some("db".into()),
            }),
            cluster: cluster.map(str::to_string),
            replica_zones: vec!["us-central1-a".into(), "us-central1-b".into()],
            ..DiskFacts::default()
        })),
    };
    let images = [
        ("ours", disk(Some("prod"), &[])),
        ("theirs", disk(Some("staging"), &[])),
        ("nobody-says", disk(None, &[])),
        ("attached", disk(Some("prod"), &["vm-1"])),
    ];
    c.record(
        &scope,
        Ok(ScopeListing {
            started: now_plus(0),
            scope_id: None,
            images: images
                .into_iter()
                .map(|(n, s)| (n.to_string(), s))
                .collect(),
            recoverable: Default::default(),
            unread: Default::default(),
        }),
    );
    let found = c.orphans(&scope, &Default::default(), &now_plus(0));
    let by_disk: std::collections::BTreeMap<_, _> = found
        .iter()
        .map(|f| (f.status.image.as_ref().expect("image").name.as_str(), f))
        .collect();
    assert_eq!(
        by_disk.keys().copied().collect::<Vec<_>>(),
        ["attached", "nobody-says", "ours"],
        "another cluster's disk is not a finding"
    );
    let ours = by_disk["ours"];
    assert_eq!(ours.name(), disk_leftover_name(&scope, "ours"));
    assert_eq!(ours.status.reason, Reason::DiskWithoutVolume);
    assert!(ours.status.hints.is_empty(), "{:?}", ours.status.hints);
    assert_eq!(ours.status.capacity_bytes, Some(10 << 30));
    assert_eq!(ours.status.source.kind, "gcePersistentDisk");
    assert_eq!(ours.status.source.disk_name.as_deref(), Some("ours"));
    let image = ours.status.image.as_ref().expect("image");
    assert_eq!(
        (
            image.backend.clone(),
            image.account.as_deref(),
            image.region.as_deref(),
            image.zone.as_deref(),
            image.cluster_id.as_deref(),
            image.pool.as_deref()
        ),
        (
            Some(crate::model::crd::DiskBackend::named("gce")),
            Some("p1"),
            Some("us-central1"),
            None,
            None,
            None
        ),
        "a regional disk's location in the neutral fields, none in Ceph's"
    );
    let owner = image.owner.as_ref().expect("owner");
    assert_eq!(owner.volume_name.as_deref(), Some("pvc-1"));
    assert_eq!(owner.cluster_name.as_deref(), Some("prod"));
    assert_eq!(
        ours.status.message,
        "GCE persistent disk ours (project p1, us-central1) is not referenced by any PersistentVolume or tombstone. The GCE PD CSI driver recorded it as PersistentVolume pvc-1 for claim db/data in this cluster (prod)."
    );
    assert_eq!(by_disk["nobody-says"].status.hints, [Hint::OwnerUnknown]);
    let attached = by_disk["attached"];
    assert_eq!(attached.status.hints, [Hint::DiskInUse]);
    assert!(
        attached
            .status
            .message
            .ends_with(" It is attached to vm-1: in use, not a plain orphan."),
        "{}",
        attached.status.message
    );
}

/// Where a finding's `image` block places its disk is read back as the scope it came from, for
/// every backend; an object written before the neutral fields (a cloud disk's project or account
/// in `clusterID`, its zone or region in `pool`) is still read so.
#[test]
fn an_image_blocks_location_reads_back_as_its_scope_old_objects_too() {
    use crate::model::crd::{ImageInfo, Reason, VolumeLeftoverStatus, VolumeSourceInfo};
    let status =
        |reason: Reason, kind: &str, driver: Option<&str>, image: ImageInfo| VolumeLeftoverStatus {
            reason,
            source: VolumeSourceInfo {
                kind: kind.into(),
                driver: driver.map(str::to_string),
                ..VolumeSourceInfo::default()
            },
            image: Some(image),
            ..super::fixtures::mariadb_finding().status
        };
    let scopes = [
        (
            Scope::from(PoolKey::new("fsid", "k8s-rbd", Some("ns1"))),
            Reason::DiskWithoutVolume,
            "rbd",
            None,
        ),
        (
            crate::census::gce::vocabulary::location("p1", "europe-west1-b"),
            Reason::DiskWithoutVolume,
            "gcePersistentDisk",
            None,
        ),
        (
            crate::census::gce::vocabulary::location("p1", "europe-west1"),
            Reason::DiskWithoutVolume,
            "gcePersistentDisk",
            None,
        ),
        (
            crate::census::ebs::vocabulary::region(Some("123456789012"), "eu-west-1"),
            Reason::DiskWithoutVolume,
            "awsElasticBlockStore",
            None,
        ),
        (
            crate::census::ebs::vocabulary::region(None, "eu-west-1"),
            Reason::DiskWithoutVolume,
            "awsElasticBlockStore",
            None,
        ),
        (
            crate::census::gce::vocabulary::snapshots("p1"),
            Reason::SnapshotWithoutContent,
            "csi",
            Some("pd.csi.storage.gke.io"),
        ),
        (
            crate::census::ebs::vocabulary::snapshots(Some("123456789012"), "eu-west-1"),
            Reason::SnapshotWithoutContent,
            "csi",
            Some("ebs.csi.aws.com"),
        ),
    ];
    // Read back by the census of those scopes (a backend it does not census names none).
    let census = Census::new(scopes.iter().map(|s| s.0.clone()), None, Duration::ZERO);
    for (scope, reason, kind, driver) in scopes {
        let new = scope.backend().location(&scope);
        assert_eq!(
            census.recorded_scope(&status(reason, kind, driver, new.clone())),
            Some(scope.clone()),
            "{new:?}"
        );
        if scope.backend().name() == "ceph" {
            continue;
        }
        // As written before `backend`: `clusterID` = project or account, `pool` = location
        // (the scopes' first and second parts).
        let old = ImageInfo {
            cluster_id: Some(scope.part(0).to_string()),
            pool: Some(scope.part(1).to_string()),
            name: "d".into(),
            ..ImageInfo::default()
        };
        assert_eq!(
            census.recorded_scope(&status(reason, kind, driver, old.clone())),
            Some(scope),
            "{old:?}"
        );
    }
}
