//! A disk's size against its PV's capacity (`DiskSizeMismatch`, the hint `DiskSizeDiffers`, the
//! cost by the billed size): compared at the backend's granularity, where the census lists
//! the disk's size (GCE, EBS: every disk; RBD: every image, a named one's from its header), and
//! told the same by `scan` and the operator.

use std::sync::Arc;
use std::time::Duration;

use super::fixtures::{PvBuilder, lookup, now, now_plus, pv, verdict};
use crate::census::config::CensusConfig;
use crate::decide::census::{DiskFacts, Scope, ScopeListing, Seen};
use crate::model::crd::{Hint, Reason, SizeBasis};
use crate::model::finding::{Finding, Verdict};
use crate::model::size::{DiskSize, SizeDrift};
use crate::scan::Facts;

const GIB: u64 = 1 << 30;

#[test]
fn sizes_compare_at_the_backend_s_granularity() {
    let ebs = crate::census::ebs::vocabulary::volume("vol-1", None);
    let gib = |n: u64| DiskSize::of(&ebs, n * GIB);
    // A 10G (decimal) request provisioned as a 10 GiB volume: the same size.
    assert_eq!(gib(10).against(10_000_000_000), None);
    assert_eq!(gib(10).against(10 * GIB as i64), None);
    assert_eq!(
        gib(20).against(10 * GIB as i64),
        Some(SizeDrift::DiskLarger)
    );
    assert_eq!(
        gib(10).against(20 * GIB as i64),
        Some(SizeDrift::DiskSmaller)
    );
    // 10 GiB and one byte is allocated as 11 GiB.
    assert_eq!(gib(11).against(10 * GIB as i64 + 1), None);
    // A capacity that is no positive size is not compared.
    assert_eq!(gib(10).against(0), None);
    assert_eq!(gib(10).against(-1), None);
    let ceph = crate::model::backend::DiskRef::from(crate::census::ceph::handle::ImageRef {
        cluster_id: None,
        pool: Some("p".into()),
        pool_id: None,
        namespace: String::new(),
        name: "img".into(),
    });
    let mib = DiskSize::of(&ceph, 10 * GIB + (1 << 20));
    assert_eq!(mib.against(10 * GIB as i64), Some(SizeDrift::DiskLarger));
}

/// A census of one EBS region whose listing holds `vol-0a` of `size` bytes.
fn census_with(size: u64) -> Facts {
    let c = CensusConfig::parse("ebs:\n  - region: eu-west-1\n").unwrap();
    let mut census = c.census(Duration::from_secs(3600));
    let key = crate::census::ebs::vocabulary::region(None, "eu-west-1");
    let listing = |at: i64| ScopeListing {
        started: now_plus(at),
        scope_id: None,
        images: [(
            "vol-0a".to_string(),
            Seen {
                size_only: None,
                users_only: 0,
                id: "vol-0a".into(),
                detail: Some(Box::new(DiskFacts {
                    size,
                    created: Some(now_plus(-86_400).0),
                    ..DiskFacts::default()
                })),
            },
        )]
        .into(),
        recoverable: Default::default(),
        unread: Default::default(),
    };
    census.record(&key, Ok(listing(-120)));
    census.record(&key, Ok(listing(-60)));
    Facts {
        census: Some(Arc::new(census)),
        ..lookup()
            .with_claim("team-a", "data", "uid-1")
            .with_class("gp3", "Retain")
    }
}

fn ebs_pv(phase: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
    pv("pv-data")
        .retain()
        .phase(phase)
        .since(now_plus(-86_400))
        .claim("team-a", "data", "uid-1")
        .class("gp3")
        .capacity("10Gi")
        .csi("ebs.csi.aws.com", "vol-0a", [])
        .zones(["eu-west-1a"])
}

fn leftover(v: Verdict) -> Finding {
    match v {
        Verdict::Leftover(f) => *f,
        other => panic!("expected a finding, got {other:?}"),
    }
}

#[test]
fn a_healthy_volume_whose_disk_has_another_size_is_disk_size_mismatch() {
    let mut created = ebs_pv("Bound");
    created.metadata.creation_timestamp = Some(now_plus(-86_400));
    // The same size: healthy.
    assert_eq!(verdict(&created, &census_with(10 * GIB)), Verdict::Healthy);
    let f = leftover(verdict(&created, &census_with(20 * GIB)));
    assert_eq!(f.status.reason, Reason::DiskSizeMismatch);
    assert_eq!(f.status.disk_size_bytes, Some(20 * GIB as i64));
    assert!(f.status.hints.is_empty(), "{:?}", f.status.hints);
    assert!(
        f.status
            .message
            .ends_with("Its disk is 20Gi, larger than the PV's capacity: it bills for 20Gi (grown in the backend, or an expansion that stopped before the PV was updated)."),
        "{}",
        f.status.message
    );
    let f = leftover(verdict(&created, &census_with(5 * GIB)));
    assert_eq!(f.status.reason, Reason::DiskSizeMismatch);
    assert!(
        f.status.message.contains("Its disk is 5Gi, smaller"),
        "{}",
        f.status.message
    );
    // Without the census: nothing to compare.
    assert_eq!(
        verdict(
            &created,
            &lookup()
                .with_claim("team-a", "data", "uid-1")
                .with_class("gp3", "Retain")
        ),
        Verdict::Healthy
    );
}

#[test]
fn on_another_finding_a_differing_size_is_a_hint_and_the_cost_is_the_disk_s() {
    let mut released = ebs_pv("Released");
    released.metadata.creation_timestamp = Some(now_plus(-86_400));
    let facts = census_with(20 * GIB);
    let f = leftover(verdict(
        &released,
        &Facts {
            claims: Some(Default::default()),
            ..facts
        },
    ));
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(f.status.hints, vec![Hint::DiskSizeDiffers]);
    assert_eq!(f.status.disk_size_bytes, Some(20 * GIB as i64));
    assert!(
        f.status.message.contains("it bills for 20Gi"),
        "{}",
        f.status.message
    );

    let table = crate::model::price::PriceTable::parse(
        "currency: USD\nvolumes:\n  - driver: ebs.csi.aws.com\n    perGiBMonth: \"0.08\"\n",
    )
    .expect("a price table");
    let cost = crate::decide::cost::estimate(&f.status, &table, &now()).expect("priced");
    assert_eq!(cost.size_basis, SizeBasis::DiskSize);
    assert_eq!(
        cost.monthly_minor_units, 160,
        "20 GiB at 0.08: the disk's size"
    );
    let mut without = f.status.clone();
    without.disk_size_bytes = None;
    let cost = crate::decide::cost::estimate(&without, &table, &now()).expect("priced");
    assert_eq!(cost.size_basis, SizeBasis::PvCapacity);
    assert_eq!(cost.monthly_minor_units, 80);
}

// ---- RBD images: the size read from a named image's header ----

const FSID: &str = "4a7d1c2e-0000-4000-8000-000000000001";

fn ceph_key() -> Scope {
    crate::census::ceph::handle::PoolKey::new(FSID, "k8s-rbd", None).into()
}

/// A Ceph listing at `at` seconds from now whose image `csi-vol-a` has the size `size`, or is
/// among the unread (`None`: its header did not answer).
fn rbd_listing(at: i64, size: Option<u64>) -> ScopeListing {
    let unread = match size {
        Some(_) => Default::default(),
        None => [("csi-vol-a".to_string(), "timed out".to_string())].into(),
    };
    ScopeListing {
        started: now_plus(at),
        scope_id: Some(2),
        images: [(
            "csi-vol-a".to_string(),
            Seen {
                id: "1f2e3d".into(),
                detail: None,
                size_only: size,
                users_only: 0,
            },
        )]
        .into(),
        recoverable: Default::default(),
        unread,
    }
}

fn rbd_facts(listings: &[ScopeListing]) -> Facts {
    let c = CensusConfig::parse(&format!(
        "clusters:\n  - clusterID: {FSID}\n    monitors: [\"127.0.0.1:6789\"]\n    keyring: /k\n    pools:\n      - name: k8s-rbd\n"
    ))
    .unwrap();
    let mut census = c.census(Duration::from_secs(3600));
    for l in listings {
        census.record(&ceph_key(), Ok(l.clone()));
    }
    Facts {
        census: Some(Arc::new(census)),
        ..lookup().with_claim("team-a", "data", "uid-1")
    }
}

fn rbd_pv() -> k8s_openapi::api::core::v1::PersistentVolume {
    let mut p = pv("pv-rbd")
        .retain()
        .phase("Bound")
        .claim("team-a", "data", "uid-1")
        .capacity("10Gi")
        .csi(
            "rbd.csi.ceph.com",
            "h",
            [
                ("clusterID", FSID),
                ("pool", "k8s-rbd"),
                ("imageName", "csi-vol-a"),
            ],
        );
    p.metadata.creation_timestamp = Some(now_plus(-86_400));
    p
}

#[test]
fn an_rbd_image_grown_under_its_pv_is_disk_size_mismatch_to_the_mebibyte() {
    let mib = 1 << 20;
    let listed = |size| rbd_facts(&[rbd_listing(-120, Some(size)), rbd_listing(-60, Some(size))]);
    assert_eq!(verdict(&rbd_pv(), &listed(10 * GIB)), Verdict::Healthy);
    let f = leftover(verdict(&rbd_pv(), &listed(10 * GIB + mib)));
    assert_eq!(f.status.reason, Reason::DiskSizeMismatch);
    assert_eq!(f.status.disk_size_bytes, Some((10 * GIB + mib) as i64));
    let f = leftover(verdict(&rbd_pv(), &listed(20 * GIB)));
    assert!(
        f.status.message.contains("Its disk is 20Gi, larger"),
        "{}",
        f.status.message
    );
}

#[test]
fn an_rbd_size_that_could_not_be_read_keeps_the_one_read_before() {
    // The last listing could not read the header: the listing before says the size, so a
    // finding about it is neither dropped nor made up for one unanswered request.
    let facts = rbd_facts(&[rbd_listing(-120, Some(20 * GIB)), rbd_listing(-60, None)]);
    let f = leftover(verdict(&rbd_pv(), &facts));
    assert_eq!(f.status.reason, Reason::DiskSizeMismatch);
    // Never read: nothing compared.
    let facts = rbd_facts(&[rbd_listing(-120, None), rbd_listing(-60, None)]);
    assert_eq!(verdict(&rbd_pv(), &facts), Verdict::Healthy);
    // An image not among the unread, listed without a size (asked for its name only): the
    // size before is not carried over (it may be another image of the same name).
    let mut named_only = rbd_listing(-60, None);
    named_only.unread.clear();
    let facts = rbd_facts(&[rbd_listing(-120, Some(20 * GIB)), named_only]);
    assert_eq!(verdict(&rbd_pv(), &facts), Verdict::Healthy);
}

/// What the census will say of a volume's disk (its size here) is part of the verdict: until
/// the census of its scope has answered, the verdict waits (`Undecided`, what is published
/// stays), so that a restart does not first write a finding without its size, then with it.
/// A failed first answer is an answer: the verdict is then made without the census.
#[test]
fn a_verdict_waits_for_the_census_of_its_disk_to_answer() {
    let released = ebs_pv("Released");
    let c = CensusConfig::parse("ebs:\n  - region: eu-west-1\n").unwrap();
    let key = crate::census::ebs::vocabulary::region(None, "eu-west-1");
    let facts = |census: crate::decide::census::Census| Facts {
        census: Some(Arc::new(census)),
        ..lookup().with_class("gp3", "Retain")
    };
    let not_yet = c.census(Duration::from_secs(3600));
    assert!(
        matches!(
            verdict(&released, &facts(not_yet)),
            Verdict::Undecided(crate::model::finding::Undecided::CensusNotAnswered { .. })
        ),
        "no answer yet"
    );
    let mut failed = c.census(Duration::from_secs(3600));
    failed.record(&key, Err("403".into()));
    let f = leftover(verdict(&released, &facts(failed)));
    assert_eq!(f.status.reason, Reason::ClaimDeleted);
    assert_eq!(
        f.status.disk_size_bytes, None,
        "nothing from a failed census"
    );
    let f = leftover(verdict(&released, &census_with(10 * GIB)));
    assert_eq!(f.status.disk_size_bytes, Some(10 * GIB as i64));
}
