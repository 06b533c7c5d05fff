//! The cloud census as the loop keeps it, without a cloud: the zones and regions an aggregated
//! GCE listing names join the census, a disk in a zone or region not listed yet is Unknown, each
//! section names its own cluster, and each cloud scope has its `census_up{backend,scope}` and
//! one log line per change of its health.

use std::collections::HashSet;
use std::time::Duration;

use super::fixtures::{now, now_plus};
use crate::census::config::CensusConfig;
use crate::decide::census::{
    DiskFacts, DiskRef, FailureCategory, FailureKind, Scope, ScopeListing, Seen,
};
use crate::decide::census_result::{CensusLog, CensusState, Gauge, Naming, census_result};
use crate::model::crd::{Hint, Reason};
use crate::model::image::ImageFound;
use crate::telemetry::Metrics;

/// `open` is censused by one aggregated listing (its scopes join as listed), `fixed` by its
/// two locations, with its own cluster name; one EBS region with its own cluster name.
const CONFIG: &str = r#"
clusterName: prod
gce:
  - project: open
  - project: fixed
    locations: [europe-west1-b, europe-west1]
    clusterName: gke-fixed
ebs:
  - region: eu-west-1
    clusterName: eks-a
"#;

fn state() -> CensusState {
    let c = CensusConfig::parse(CONFIG).expect("config parses");
    CensusState::new(c.census(Duration::from_secs(3600)))
}

fn gce(project: &str, location: &str) -> Scope {
    crate::census::gce::vocabulary::location(project, location)
}

fn ebs() -> Scope {
    crate::census::ebs::vocabulary::region(None, "eu-west-1")
}

fn gce_disk(project: Option<&str>, location: &str, name: &str) -> DiskRef {
    crate::census::gce::vocabulary::disk(project, Some(location), name)
}

/// A disk two hours old, unattached, labelled with `cluster`.
fn disk(cluster: Option<&str>) -> Seen {
    Seen {
        size_only: None,
        users_only: 0,
        id: "42".into(),
        detail: Some(Box::new(DiskFacts {
            size: 10 << 30,
            created: Some(now_plus(-7200).0),
            kind: Some("pd-balanced".into()),
            cluster: cluster.map(str::to_string),
            ..DiskFacts::default()
        })),
    }
}

fn listing(at: i64, disks: Vec<(&str, Seen)>) -> ScopeListing {
    ScopeListing {
        started: now_plus(at),
        scope_id: None,
        images: disks.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

fn forbidden() -> (FailureKind, String) {
    (
        FailureKind::of(FailureCategory::Forbidden),
        "listing the disks of open/europe-west1-c: 403".into(),
    )
}

/// Records `result` for `key`, a PV named `pv` naming `disk`.
fn record(
    s: &mut CensusState,
    key: &Scope,
    result: Result<ScopeListing, (FailureKind, String)>,
    pv: Option<(&str, DiskRef)>,
) -> crate::decide::census_result::CensusOutcome {
    let naming = Naming {
        volumes: pv.into_iter().map(|(n, d)| (n.into(), Some(d))).collect(),
        ..Naming::default()
    };
    census_result(s, key, result, &now(), || naming)
}

// ---- 2. Scopes an aggregated listing names ----

#[test]
fn a_disk_in_a_zone_of_an_aggregated_project_not_listed_yet_is_unknown_not_uncensused() {
    let s = state();
    let volume_created = now_plus(-86400);
    for r in [
        gce_disk(Some("open"), "europe-west1-c", "pvc-1"),
        // In-tree: no project; only the open project can hold it.
        gce_disk(None, "us-central1-a", "legacy"),
    ] {
        assert_eq!(
            s.census.image(&r, Some(&volume_created)),
            ImageFound::Unknown,
            "{r:?}"
        );
    }
    // A project nothing censuses, and a location the listed-by-location project does not list.
    for r in [
        gce_disk(Some("elsewhere"), "europe-west1-c", "pvc-1"),
        gce_disk(Some("fixed"), "europe-west1-c", "pvc-1"),
    ] {
        assert_eq!(
            s.census.image(&r, Some(&volume_created)),
            ImageFound::NotCensused,
            "{r:?}"
        );
    }
    // In-tree, in a zone the fixed project lists and the open one may hold: not guessed.
    assert_eq!(
        s.census.image(
            &gce_disk(None, "europe-west1-b", "legacy"),
            Some(&volume_created)
        ),
        ImageFound::NotCensused
    );
    assert!(s.census.covers(&gce("open", "asia-east1-a")));
    assert!(!s.census.covers(&gce("fixed", "asia-east1-a")));
}

#[test]
fn a_zone_an_aggregated_listing_names_joins_the_census_and_its_disks_are_decided() {
    let mut s = state();
    let key = gce("open", "europe-west1-c");
    let pv = (
        "pv-gone",
        gce_disk(Some("open"), "europe-west1-c", "pvc-gone"),
    );
    let out = record(
        &mut s,
        &key,
        Ok(listing(
            -120,
            vec![("pvc-gone", disk(None)), ("orphan", disk(Some("prod")))],
        )),
        Some(pv.clone()),
    );
    assert!(s.census.pools.contains_key(&key), "admitted");
    assert_eq!(
        out.gauge,
        Gauge::Done {
            images: 2,
            unread: 0
        }
    );
    let orphans: Vec<&str> = s
        .orphans
        .values()
        .map(|(_, f)| f.status.image.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(orphans, ["orphan"], "the PV's disk is referenced");
    let (k, f) = s.orphans.values().next().unwrap();
    assert_eq!(*k, key);
    assert_eq!(f.status.reason, Reason::DiskWithoutVolume);
    assert!(f.status.hints.is_empty(), "ours: {:?}", f.status.hints);

    // The PV's disk: present, then gone from two listings in a row.
    let created = now_plus(-86400);
    assert!(matches!(
        s.census.image(&pv.1, Some(&created)),
        ImageFound::Present { .. }
    ));
    record(&mut s, &key, Ok(listing(-60, vec![])), Some(pv.clone()));
    record(&mut s, &key, Ok(listing(-30, vec![])), Some(pv.clone()));
    assert_eq!(
        s.census.image(&pv.1, Some(&created)),
        ImageFound::Missing { in_trash: false }
    );
    assert!(s.orphans.is_empty(), "the orphan was deleted");
}

#[test]
fn a_scope_of_nothing_configured_is_not_admitted() {
    let mut s = state();
    for key in [
        gce("elsewhere", "europe-west1-c"),
        gce("fixed", "asia-east1-a"),
    ] {
        let out = record(
            &mut s,
            &key,
            Ok(listing(-120, vec![("orphan", disk(Some("prod")))])),
            None,
        );
        assert!(!s.census.pools.contains_key(&key), "{key}");
        assert_eq!(out.mark, Vec::<String>::new());
        assert!(s.orphans.is_empty());
    }
}

#[test]
fn each_section_names_its_own_cluster() {
    let mut s = state();
    // The fixed project names its cluster gke-fixed: prod's disks are another cluster's there.
    let key = gce("fixed", "europe-west1-b");
    record(
        &mut s,
        &key,
        Ok(listing(
            -120,
            vec![
                ("ours", disk(Some("gke-fixed"))),
                ("theirs", disk(Some("prod"))),
            ],
        )),
        None,
    );
    let names: HashSet<&str> = s
        .orphans
        .values()
        .map(|(_, f)| f.status.image.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(names, HashSet::from(["ours"]));
    assert!(
        s.orphans
            .values()
            .all(|(_, f)| !f.status.hints.contains(&Hint::OwnerUnknown))
    );

    // The open project has none of its own: the file's prod, also in the scopes it admits.
    let mut s = state();
    let key = gce("open", "europe-west1-c");
    record(
        &mut s,
        &key,
        Ok(listing(
            -120,
            vec![
                ("ours", disk(Some("prod"))),
                ("theirs", disk(Some("gke-fixed"))),
            ],
        )),
        None,
    );
    let names: Vec<&str> = s
        .orphans
        .values()
        .map(|(_, f)| f.status.image.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(names, ["ours"]);

    // The EBS region's own: eks-a.
    let mut s = state();
    record(
        &mut s,
        &ebs(),
        Ok(listing(
            -120,
            vec![
                ("vol-1", disk(Some("eks-a"))),
                ("vol-2", disk(Some("prod"))),
            ],
        )),
        None,
    );
    let names: Vec<&str> = s
        .orphans
        .values()
        .map(|(_, f)| f.status.image.as_ref().unwrap().name.as_str())
        .collect();
    assert_eq!(names, ["vol-1"]);
}

// ---- 3. Each cloud scope's health ----

#[test]
fn a_cloud_scope_failing_is_logged_once_and_its_recovery_once() {
    let mut s = state();
    // A zone the aggregated listing marks unreachable, before it ever listed.
    let key = gce("open", "europe-west1-c");
    let logs = |o: crate::decide::census_result::CensusOutcome| o.logs;
    let first = logs(record(&mut s, &key, Err(forbidden()), None));
    assert!(matches!(first[..], [CensusLog::Failed { .. }]), "{first:?}");
    assert!(s.census.pools.contains_key(&key), "admitted, Unknown");
    assert!(!s.census.is_trusted(&key));
    let again = logs(record(&mut s, &key, Err(forbidden()), None));
    assert_eq!(again, [], "the same problem is not news");
    let back = logs(record(&mut s, &key, Ok(listing(-60, vec![])), None));
    assert!(
        matches!(back[..], [CensusLog::Recovered { .. }]),
        "{back:?}"
    );
    let quiet = logs(record(&mut s, &key, Ok(listing(-30, vec![])), None));
    assert!(matches!(quiet[..], [CensusLog::Done { .. }]), "{quiet:?}");
}

#[test]
fn a_failing_scope_clears_nothing_published_about_it() {
    let mut s = state();
    let key = gce("open", "europe-west1-c");
    record(
        &mut s,
        &key,
        Ok(listing(-120, vec![("orphan", disk(Some("prod")))])),
        None,
    );
    assert_eq!(s.orphans.len(), 1);
    let out = record(&mut s, &key, Err(forbidden()), None);
    assert_eq!(out.gauge, Gauge::Failed);
    assert_eq!(out.mark, Vec::<String>::new(), "nothing decided again");
    assert_eq!(s.orphans.len(), 1, "what was found stays");
}

#[test]
fn each_cloud_scope_has_its_census_up_series_beside_the_ceph_pools() {
    let m = Metrics::default();
    m.census_pending(&gce("fixed", "europe-west1-b"));
    m.census_done(&gce("open", "europe-west1-c"), 2, 0, 0.5, 3);
    m.census_failed(&ebs(), 1);
    m.census_failed(
        &crate::census::ebs::vocabulary::region(Some("123456789012"), "us-east-1"),
        1,
    );
    m.census_done("fsid/k8s-rbd", 3, 0, 0.1, 2);
    let text = m.encode();
    for line in [
        r#"volume_leftovers_census_up{backend="gce",scope="fixed/europe-west1-b"} 0"#,
        r#"volume_leftovers_census_up{backend="gce",scope="open/europe-west1-c"} 1"#,
        r#"volume_leftovers_census_up{backend="ebs",scope="eu-west-1"} 0"#,
        r#"volume_leftovers_census_up{backend="ebs",scope="123456789012/us-east-1"} 0"#,
        r#"volume_leftovers_census_up{pool="fsid/k8s-rbd"} 1"#,
        r#"volume_leftovers_census_images{backend="gce",scope="open/europe-west1-c"} 2"#,
        r#"volume_leftovers_census_failures_total{backend="ebs",scope="eu-west-1"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
}

#[test]
fn scan_and_the_operator_locate_an_ebs_volume_by_the_zones_its_pv_requires() {
    use crate::decide::lookup::disk_found;
    use crate::model::crd::VolumeSourceInfo;
    use crate::run::controller::{StoreLookup, View};
    use crate::scan::Facts;
    let c = CensusConfig::parse("ebs:\n  - region: us-east-1\n  - region: us-west-2\n").unwrap();
    let mut census = c.census(Duration::from_secs(3600));
    let east = crate::census::ebs::vocabulary::region(None, "us-east-1");
    census.record(&east, Ok(listing(-120, vec![])));
    census.record(&east, Ok(listing(-60, vec![])));
    let operator = StoreLookup {
        claims: View::Stale,
        classes: View::Stale,
        census: Some(&census),
    };
    let scan = Facts {
        census: Some(std::sync::Arc::new(census.clone())),
        ..Facts::default()
    };
    let source = |zones: &[&str]| VolumeSourceInfo {
        kind: "csi".into(),
        driver: Some("ebs.csi.aws.com".into()),
        volume_handle: Some("vol-0123456789abcdef0".into()),
        zones: zones.iter().map(|z| z.to_string()).collect(),
        ..VolumeSourceInfo::default()
    };
    let created = now_plus(-86400);
    for (zones, expected, why) in [
        (
            &["us-east-1a"][..],
            ImageFound::Missing { in_trash: false },
            "its zone says us-east-1",
        ),
        (
            &[][..],
            ImageFound::NotCensused,
            "without its zones, either region could hold it",
        ),
        (
            &["eu-central-1a"][..],
            ImageFound::NotCensused,
            "a region not censused says nothing",
        ),
    ] {
        let s = source(zones);
        assert_eq!(
            disk_found(&operator, &s, Some(&created)),
            expected,
            "operator: {why}"
        );
        assert_eq!(
            disk_found(&scan, &s, Some(&created)),
            expected,
            "scan: {why}"
        );
    }
}

#[test]
fn an_azure_disk_is_found_by_its_resource_id_in_any_case_and_an_orphan_is_named_stably() {
    use crate::decide::census::disk_leftover_name;
    use crate::decide::lookup::disk_found;
    use crate::model::crd::VolumeSourceInfo;
    use crate::run::controller::{StoreLookup, View};
    let c = CensusConfig::parse(
        "clusterName: prod\nazure:\n  - subscription: SUB-1\n    resourceGroups: [MC_prod_aks_westeurope]\n    nodeResourceGroup: true\n",
    )
    .unwrap();
    let mut census = c.census(Duration::from_secs(3600));
    let rg = crate::census::azure::vocabulary::resource_group("sub-1", "mc_prod_aks_westeurope");
    assert_eq!(rg.to_string(), "azure:sub-1/mc_prod_aks_westeurope");
    census.record(&rg, Ok(listing(-120, vec![("pvc-a", disk(Some("prod")))])));
    census.record(&rg, Ok(listing(-60, vec![("pvc-a", disk(Some("prod")))])));
    let operator = StoreLookup {
        claims: View::Stale,
        classes: View::Stale,
        census: Some(&census),
    };
    let created = now_plus(-86400);
    let csi = |handle: &str| VolumeSourceInfo {
        kind: "csi".into(),
        driver: Some("disk.csi.azure.com".into()),
        volume_handle: Some(handle.into()),
        ..VolumeSourceInfo::default()
    };
    for (source, expected, why) in [
        (
            csi("/subscriptions/SUB-1/resourceGroups/mc_prod_aks_westeurope/providers/Microsoft.Compute/disks/PVC-A"),
            ImageFound::Present { watchers: 0 },
            "the handle in another case",
        ),
        (
            VolumeSourceInfo {
                kind: "azureDisk".into(),
                disk_name: Some("pvc-gone".into()),
                disk_uri: Some("/subscriptions/sub-1/resourcegroups/MC_PROD_AKS_WESTEUROPE/providers/microsoft.compute/disks/pvc-gone".into()),
                ..VolumeSourceInfo::default()
            },
            ImageFound::Missing { in_trash: false },
            "in-tree, by its diskURI",
        ),
        (
            csi("/subscriptions/sub-1/resourceGroups/other/providers/Microsoft.Compute/disks/pvc-a"),
            ImageFound::NotCensused,
            "a resource group not censused",
        ),
        (
            csi("/subscriptions/sub-1/resourceGroups/mc_prod_aks_westeurope/providers/Microsoft.Compute/snapshots/pvc-a"),
            ImageFound::NotCensused,
            "a snapshot's id names no disk",
        ),
    ] {
        assert_eq!(disk_found(&operator, &source, Some(&created)), expected, "{why}");
    }
    // Stable across versions: the name must never change.
    assert_eq!(
        disk_leftover_name(&rg, "pvc-a"),
        disk_leftover_name(&rg, "pvc-a"),
    );
    assert!(disk_leftover_name(&rg, "pvc-a").starts_with("azure-"));
    let orphans = census.orphans(&rg, &HashSet::new(), &now());
    let [f] = &orphans[..] else {
        panic!("pvc-a, two hours old and named by nothing: {orphans:?}");
    };
    assert_eq!(f.status.reason, Reason::DiskWithoutVolume);
    assert!(
        f.status.message.starts_with(
            "Azure managed disk pvc-a (subscription sub-1, resource group mc_prod_aks_westeurope) is not referenced"
        ),
        "{}",
        f.status.message
    );
    assert!(
        !f.status.hints.contains(&Hint::OwnerUnknown),
        "its cluster's"
    );
    let image = f.status.image.as_ref().unwrap();
    assert_eq!(
        image.resource_group.as_deref(),
        Some("mc_prod_aks_westeurope")
    );
    assert_eq!(
        census.recorded_scope(&f.status),
        Some(rg.clone()),
        "the published finding names its scope back"
    );
    assert_eq!(
        f.status.source.disk_uri.as_deref(),
        Some(
            "/subscriptions/sub-1/resourceGroups/mc_prod_aks_westeurope/providers/Microsoft.Compute/disks/pvc-a"
        )
    );
}

/// A disk's details (labels or tags, owner, record) are what a finding about it shows, when
/// nothing names it: the census keeps only the size and the users of the disks a PV names (most
/// disks are named), still answering what a PV asks of its disk. A named disk whose PV goes is an
/// orphan of the next listing, which has its details again.
#[test]
fn the_details_of_the_disks_a_pv_names_are_not_kept_and_an_orphan_shows_its_own() {
    let mut s = state();
    let key = gce("open", "europe-west1-c");
    let tagged = || {
        let mut d = disk(Some("prod"));
        let facts = d.detail.as_mut().unwrap();
        facts.tags = vec![("team".into(), "storage".into())];
        facts.in_use = vec!["projects/open/zones/europe-west1-c/instances/node-1".into()];
        d
    };
    let named_disk = gce_disk(Some("open"), "europe-west1-c", "named");
    let pv = ("pv-a", named_disk.clone());
    let both = |at| listing(at, vec![("named", tagged()), ("orphan", tagged())]);
    record(&mut s, &key, Ok(both(-120)), Some(pv));
    let seen = |s: &CensusState, name: &str| {
        s.census
            .scope_state(&key)
            .unwrap()
            .current
            .as_ref()
            .unwrap()
            .images[name]
            .clone()
    };
    let kept = |s: &CensusState, name: &str| seen(s, name).detail.unwrap().tags;
    let named = seen(&s, "named");
    assert!(named.detail.is_none(), "a PV names it: {named:?}");
    assert_eq!((named.size(), named.users()), (Some(10 << 30), 1));
    assert_eq!(
        s.census.image(&named_disk, Some(&now_plus(-86_400))),
        ImageFound::Present { watchers: 1 },
        "what a PV asks of its disk"
    );
    assert_eq!(kept(&s, "orphan"), [("team".into(), "storage".into())]);
    let shown = |s: &CensusState, name: &str| {
        s.orphans
            .values()
            .map(|(_, f)| f.status.image.as_ref().unwrap())
            .find(|i| i.name == name)
            .map(|i| i.tags.clone())
    };
    assert_eq!(
        shown(&s, "orphan").unwrap().get("team").map(String::as_str),
        Some("storage")
    );
    // Its PV gone, the named disk is an orphan of the next listing, with its tags.
    record(&mut s, &key, Ok(both(-60)), None);
    assert_eq!(
        shown(&s, "named")
            .expect("an orphan now")
            .get("team")
            .map(String::as_str),
        Some("storage")
    );
}
