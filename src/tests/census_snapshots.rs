//! The census of backend snapshots (GCE snapshots, EBS snapshots a CSI driver made), without a
//! cloud: a snapshot no VolumeSnapshotContent or `ContentDeleted` tombstone names is a
//! `SnapshotWithoutContent` finding once it is older than the image grace and not another
//! cluster's; nothing is concluded while the content store is not current, and what is
//! published then stays.

use std::time::Duration;

use super::fixtures::{now, now_plus};
use crate::census::config::CensusConfig;
use crate::census::snapshot_ref as snapshot_handle_ref;
use crate::decide::census::{CreatedFor, DiskFacts, Scope, ScopeListing, Seen, disk_leftover_name};
use crate::decide::census_result::{CensusLog, CensusOutcome, CensusState, Naming, census_result};
use crate::model::crd::{Hint, Reason, Subject};

const CONFIG: &str = r#"
clusterName: prod
gce:
  - project: proj
    locations: [europe-west1-b]
    snapshots: true
ebs:
  - region: eu-west-1
    snapshots: true
  - region: us-east-1
"#;

fn state() -> CensusState {
    let c = CensusConfig::parse(CONFIG).expect("config parses");
    CensusState::new(c.census(Duration::from_secs(3600)))
}

fn ebs_snapshots() -> Scope {
    crate::census::ebs::vocabulary::snapshots(None, "eu-west-1")
}

fn gce_snapshots() -> Scope {
    crate::census::gce::vocabulary::snapshots("proj")
}

/// A snapshot `age` seconds old, cut for `default/<snapshot>` by content `<content>`, naming
/// `cluster`.
fn snap(age: i64, cluster: Option<&str>, recorded: Option<(&str, &str)>) -> Seen {
    Seen {
        size_only: None,
        users_only: 0,
        id: "1234".into(),
        detail: Some(Box::new(DiskFacts {
            size: 8 << 30,
            created: Some(now_plus(-age).0),
            cluster: cluster.map(str::to_string),
            source_disk: Some("vol-0aaa".into()),
            created_for: recorded.map(|(content, snapshot)| CreatedFor {
                pv: Some(content.into()),
                pvc: Some(snapshot.into()),
                pvc_namespace: Some("default".into()),
            }),
            ..DiskFacts::default()
        })),
    }
}

fn listing(snaps: Vec<(&str, Seen)>) -> ScopeListing {
    ScopeListing {
        started: now_plus(-10),
        scope_id: None,
        images: snaps.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

fn names(handles: Option<&[&str]>) -> Naming {
    Naming {
        snapshot_handles: handles.map(|h| h.iter().map(|s| s.to_string()).collect()),
        ..Naming::default()
    }
}

#[test]
fn a_snapshot_no_content_names_is_a_finding_with_what_the_driver_recorded() {
    let mut s = state();
    let key = ebs_snapshots();
    let snaps = listing(vec![
        (
            "snap-0aa",
            snap(7200, Some("prod"), Some(("snapcontent-1", "db-1"))),
        ),
        (
            "snap-0bb",
            snap(7200, Some("prod"), Some(("snapcontent-2", "db-2"))),
        ),
    ]);
    let out = census_result(&mut s, &key, Ok(snaps), &now(), || {
        names(Some(&["snap-0bb"]))
    });
    let name = disk_leftover_name(&key, "snap-0aa");
    assert_eq!(
        s.orphans.keys().collect::<Vec<_>>(),
        vec![&name],
        "only the snapshot no content names"
    );
    assert!(out.mark.contains(&name));
    let f = &s.orphans[&name].1.status;
    assert_eq!(f.reason, Reason::SnapshotWithoutContent);
    assert_eq!(f.subject, Subject::BackendSnapshot);
    assert!(f.hints.is_empty(), "{:?}", f.hints);
    let sn = f.snapshot.as_ref().expect("status.snapshot");
    assert_eq!(sn.snapshot_handle.as_deref(), Some("snap-0aa"));
    assert_eq!(sn.content.as_deref(), Some("snapcontent-1"));
    assert_eq!(sn.snapshot.as_deref(), Some("default/db-1"));
    assert_eq!(sn.restore_size_bytes, Some(8 << 30));
    assert_eq!(f.source.driver.as_deref(), Some("ebs.csi.aws.com"));
    assert_eq!(f.source.volume_handle.as_deref(), Some("vol-0aaa"));
    assert!(
        f.message.starts_with(
            "EBS snapshot snap-0aa (eu-west-1) is not named by any VolumeSnapshotContent"
        ),
        "{}",
        f.message
    );
    // Its name is not the name of a volume of that id in the volume scope.
    let volumes = crate::census::ebs::vocabulary::region(None, "eu-west-1");
    assert_ne!(name, disk_leftover_name(&volumes, "snap-0aa"));
}

#[test]
fn young_other_clusters_and_unattributed_snapshots() {
    let mut s = state();
    let key = gce_snapshots();
    let snaps = listing(vec![
        ("young", snap(60, Some("prod"), Some(("c", "s")))),
        ("theirs", snap(7200, Some("staging"), Some(("c", "s")))),
        ("nobodys", snap(7200, None, None)),
    ]);
    census_result(&mut s, &key, Ok(snaps), &now(), || names(Some(&[])));
    let found: Vec<&str> = s
        .orphans
        .values()
        .map(|(_, f)| f.status.image.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(
        found,
        vec!["nobodys"],
        "not the young one, not another cluster's"
    );
    let f = &s.orphans.values().next().unwrap().1.status;
    assert_eq!(f.hints, vec![Hint::OwnerUnknown]);
    assert_eq!(
        f.snapshot.as_ref().unwrap().snapshot_handle.as_deref(),
        Some("projects/proj/global/snapshots/nobodys")
    );
    assert_eq!(f.source.driver.as_deref(), Some("pd.csi.storage.gke.io"));
}

#[test]
fn a_gce_handle_names_the_snapshot_of_its_project_only() {
    let mut s = state();
    let key = gce_snapshots();
    let snaps = listing(vec![(
        "snapshot-1",
        snap(7200, Some("prod"), Some(("c", "s"))),
    )]);
    census_result(&mut s, &key, Ok(snaps.clone()), &now(), || {
        names(Some(&["projects/other/global/snapshots/snapshot-1"]))
    });
    assert_eq!(
        s.orphans.len(),
        1,
        "another project's snapshot of that name"
    );
    census_result(&mut s, &key, Ok(snaps), &now(), || {
        names(Some(&["projects/proj/global/snapshots/snapshot-1"]))
    });
    assert!(
        s.orphans.is_empty(),
        "named by a content now: {:?}",
        s.orphans
    );
}

#[test]
fn nothing_is_concluded_while_the_contents_are_not_known() {
    let mut s = state();
    let key = ebs_snapshots();
    let snaps = || listing(vec![("snap-0aa", snap(7200, Some("prod"), None))]);
    census_result(&mut s, &key, Ok(snaps()), &now(), || names(Some(&[])));
    assert_eq!(s.orphans.len(), 1);
    // The content store is not current: the published finding stays, none is added or cleared.
    let out = census_result(&mut s, &key, Ok(snaps()), &now(), || names(None));
    assert_eq!(s.orphans.len(), 1, "what is published stays");
    assert!(out.mark.is_empty(), "nothing decided again: {:?}", out.mark);
    assert!(s.unconcluded.contains(&key));
    // Said once when it starts, not at every listing; once when it ends.
    let said =
        |out: &CensusOutcome, line: &CensusLog| out.logs.iter().filter(|l| *l == line).count();
    assert_eq!(said(&out, &CensusLog::NotCompared), 1, "{:?}", out.logs);
    let again = census_result(&mut s, &key, Ok(snaps()), &now(), || names(None));
    assert_eq!(said(&again, &CensusLog::NotCompared), 0, "{:?}", again.logs);
    let back = census_result(&mut s, &key, Ok(snaps()), &now(), || {
        names(Some(&["snap-0aa"]))
    });
    assert_eq!(said(&back, &CensusLog::ComparedAgain), 1, "{:?}", back.logs);
    assert!(s.orphans.is_empty());
    assert!(!s.unconcluded.contains(&key));
    let later = census_result(&mut s, &key, Ok(snaps()), &now(), || names(Some(&[])));
    assert_eq!(
        said(&later, &CensusLog::ComparedAgain),
        0,
        "{:?}",
        later.logs
    );
}

#[test]
fn a_volume_scope_is_not_a_snapshot_scope() {
    // The disk census of a region does not read the contents, and a snapshot scope is only
    // there when its section asks for it.
    let s = state();
    assert!(s.census.pools.contains_key(&ebs_snapshots()));
    assert!(
        !s.census
            .pools
            .contains_key(&crate::census::ebs::vocabulary::snapshots(
                None,
                "us-east-1"
            ))
    );
    assert!(!crate::census::ebs::vocabulary::region(None, "eu-west-1").holds_snapshots());
}

#[test]
fn handles_are_parsed_by_their_shape() {
    assert_eq!(
        snapshot_handle_ref("snap-0123abcd"),
        Some(crate::model::backend::DiskRef::new(
            &crate::census::ebs::vocabulary::EBS,
            "snap-0123abcd",
            []
        ))
    );
    assert_eq!(
        snapshot_handle_ref("projects/p/global/snapshots/snapshot-1"),
        Some(crate::model::backend::DiskRef::new(
            &crate::census::gce::vocabulary::GCE,
            "snapshot-1",
            [Some("p".to_string())]
        ))
    );
    for other in [
        "projects/p/global/images/image-1",
        "snap-",
        "snap-xyz",
        "0001-0009-rook-ceph-0000000000000002-abc",
        "projects//global/snapshots/x",
        "projects/p/global/snapshots/",
    ] {
        assert_eq!(snapshot_handle_ref(other), None, "{other}");
    }
}

#[test]
fn a_content_deleted_after_the_listing_began_still_names_its_snapshot() {
    // The listing began at now-10 and holds the snapshot; its Delete-policy content went at
    // now-5, once the driver had deleted it. That listing is not proof of an orphan.
    let mut s = state();
    let key = ebs_snapshots();
    let snaps = || listing(vec![("snap-0aa", snap(7200, Some("prod"), None))]);
    s.content_gone(["snap-0aa".to_string()], &now_plus(-5));
    census_result(&mut s, &key, Ok(snaps()), &now(), || names(Some(&[])));
    assert!(s.orphans.is_empty(), "{:?}", s.orphans.keys());
    // A delete seen before the listing began does not name it: the snapshot outlived it.
    let mut s = state();
    s.content_gone(["snap-0aa".to_string()], &now_plus(-60));
    census_result(&mut s, &key, Ok(snaps()), &now(), || names(Some(&[])));
    assert_eq!(s.orphans.len(), 1);
}

#[test]
fn scan_says_it_does_not_know_a_scope_whose_contents_it_could_not_read() {
    let mut s = state();
    let key = ebs_snapshots();
    let snaps = || listing(vec![("snap-0aa", snap(7200, Some("prod"), None))]);
    s.census.record(&key, Ok(snaps()));
    let mut referenced = Default::default();
    let (found, unknown) = crate::scan::snapshot_orphans(&s.census, None, &mut referenced);
    assert!(found.is_empty(), "no content is not \"no content\"");
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    assert!(
        unknown[0]
            .line
            .starts_with("the snapshot census of ebs:eu-west-1/snapshots: ")
            && unknown[0].scope == "ebs:eu-west-1/snapshots",
        "{}",
        unknown[0]
    );
    // Named before the listings or after them: named.
    let handles = Some((vec!["snap-0aa".to_string()], Vec::new()));
    let (found, unknown) = crate::scan::snapshot_orphans(&s.census, handles, &mut referenced);
    assert!(
        found.is_empty() && unknown.is_empty(),
        "{found:?} {unknown:?}"
    );
    let mut referenced = Default::default();
    let handles = Some((Vec::new(), vec!["snap-0bb".to_string()]));
    let (found, _) = crate::scan::snapshot_orphans(&s.census, handles, &mut referenced);
    assert_eq!(found.len(), 1);
}

/// A `ContentDeleted` tombstone asks the census about its backend snapshot as a volume's
/// tombstone asks about its disk: found while the last listing has it, gone only after two
/// listings in a row without it, unknown while its scope fails. A GCE handle names its
/// project's scope; an EBS id, with two regions' snapshots listed, is found in either and
/// otherwise not censused (it may be in a region nobody lists). Every listing of a snapshot
/// scope marks the tombstones, so the one that ends them is acted on.
#[test]
fn a_content_tombstones_backend_snapshot_is_looked_up_as_a_disk_is() {
    use crate::decide::census::{Census, ImageFound};
    let mut s = state();
    let key = ebs_snapshots();
    let r = snapshot_handle_ref("snap-0aa").expect("an EBS id");
    assert_eq!(
        s.census.backend_snapshot(&r),
        ImageFound::Unknown,
        "not listed yet"
    );
    let tombstone = "vsc-0123456789abcdef-pre-content".to_string();
    let naming = Naming {
        leftovers: vec![(tombstone.clone(), Reason::ContentDeleted, None)],
        ..names(Some(&["snap-0aa"]))
    };
    let with = || listing(vec![("snap-0aa", snap(7200, Some("prod"), None))]);
    let out = census_result(&mut s, &key, Ok(with()), &now(), || naming.clone());
    assert!(out.mark.contains(&tombstone), "{:?}", out.mark);
    assert_eq!(
        s.census.backend_snapshot(&r),
        ImageFound::Present { watchers: 0 }
    );
    let out = census_result(&mut s, &key, Ok(listing(vec![])), &now(), || naming.clone());
    assert!(out.mark.contains(&tombstone));
    assert_eq!(s.census.backend_snapshot(&r), ImageFound::Unknown, "once");
    census_result(&mut s, &key, Ok(listing(vec![])), &now(), || naming.clone());
    assert_eq!(
        s.census.backend_snapshot(&r),
        ImageFound::Missing { in_trash: false },
        "twice"
    );
    s.census.record(&key, Err("EC2 is unavailable".into()));
    assert_eq!(s.census.backend_snapshot(&r), ImageFound::Unknown);

    // GCE: the handle's project only.
    let g = gce_snapshots();
    for _ in 0..2 {
        s.census.record(&g, Ok(listing(vec![])));
    }
    let ours = snapshot_handle_ref("projects/proj/global/snapshots/s1").expect("a GCE handle");
    let theirs = snapshot_handle_ref("projects/other/global/snapshots/s1").expect("a GCE handle");
    assert_eq!(
        s.census.backend_snapshot(&ours),
        ImageFound::Missing { in_trash: false }
    );
    assert_eq!(s.census.backend_snapshot(&theirs), ImageFound::NotCensused);
    // Not a handle the census keys (an RBD snapshot): nothing to look up.
    assert_eq!(snapshot_handle_ref("0001-0009-rbd-csi-snap-1"), None);

    // EBS, two regions listed.
    let east = crate::census::ebs::vocabulary::snapshots(None, "us-east-1");
    let mut c = Census::new(
        [ebs_snapshots(), east.clone()],
        Some("prod"),
        Duration::from_secs(3600),
    );
    assert_eq!(c.backend_snapshot(&r), ImageFound::Unknown);
    for _ in 0..2 {
        c.record(&ebs_snapshots(), Ok(listing(vec![])));
        c.record(&east, Ok(with()));
    }
    assert_eq!(c.backend_snapshot(&r), ImageFound::Present { watchers: 0 });
    c.record(&east, Ok(listing(vec![])));
    c.record(&east, Err("EC2 is unavailable".into()));
    assert_eq!(c.backend_snapshot(&r), ImageFound::Unknown);
    for _ in 0..2 {
        c.record(&east, Ok(listing(vec![])));
    }
    assert_eq!(
        c.backend_snapshot(&r),
        ImageFound::NotCensused,
        "in neither region listed: perhaps in a third"
    );
}
