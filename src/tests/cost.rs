//! The price table and the cost estimates: what a table accepts, which row prices a finding,
//! and the amounts, to the minor unit, for a table of cases (zonal, regional, class row,
//! snapshot row, tombstone, disk without a volume, accrued since), and when there is none.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::decide::cost::{estimate, money, next_step};
use crate::decide::lookup::ClassFacts;
use crate::decide::plan::{Action, desired, next_change, plan};
use crate::model::backend::Backend;
use crate::model::crd::{CostEstimate, ImageInfo, Reason, Subject, VolumeLeftoverStatus};
use crate::model::finding::Verdict;
use crate::model::price::{PriceKey, PriceTable, Priced};

/// The example table of docs/cost.md (GCE and AWS rows), in USD.
const TABLE: &str = r#"
currency: USD
note: "examples, not quotes"
volumes:
  - storageClass: premium-rwo
    perGiBMonth: "0.17"
  - driver: pd.csi.storage.gke.io
    type: pd-balanced
    perGiBMonth: "0.10"
  - driver: pd.csi.storage.gke.io
    type: pd-balanced
    regional: true
    perGiBMonth: "0.20"
  - driver: pd.csi.storage.gke.io
    type: pd-ssd
    regional: true
    perGiBMonth: "0.34"
  - driver: pd.csi.storage.gke.io
    perGiBMonth: "0.04"
  - driver: ebs.csi.aws.com
    type: gp3
    perGiBMonth: "0.08"
  - driver: disk.csi.azure.com
    type: Premium_LRS
    perGiBMonth: "0.15"
snapshots:
  - driver: pd.csi.storage.gke.io
    perGiBMonth: "0.05"
"#;

fn table() -> PriceTable {
    PriceTable::parse(TABLE).expect("the example table")
}

/// A class with disk parameters.
fn class(lookup: FakeLookup, name: &str, disk_type: &str, replication: Option<&str>) -> FakeLookup {
    let mut l = lookup;
    l.classes.get_or_insert_with(Default::default).insert(
        name.into(),
        ClassFacts {
            reclaim_policy: "Retain".into(),
            disk_type: Some(disk_type.into()),
            replication_type: replication.map(Into::into),
        },
    );
    l
}

/// A Released Retain GCE PD CSI volume of `size`, class `class`, released at [`released_at`].
fn gce_volume(name: &str, size: &str, class_name: &str, handle: &str) -> VolumeLeftoverStatus {
    let pv = pv(name)
        .retain()
        .released()
        .since(released_at())
        .claim("shop", "data", "uid-claim")
        .class(class_name)
        .capacity(size)
        .csi("pd.csi.storage.gke.io", handle, []);
    let l = class(lookup(), "standard-rwo", "pd-balanced", None);
    let l = class(l, "fast-repl", "pd-ssd", Some("regional-pd"));
    let l = class(l, "premium-rwo", "pd-ssd", None);
    finding(&pv, &l).status
}

fn cost(s: &VolumeLeftoverStatus) -> Option<CostEstimate> {
    estimate(s, &table(), &now())
}

#[test]
fn the_example_table_is_accepted_and_its_rows_say_what_they_match() {
    let t = table();
    assert_eq!(t.currency, "USD");
    assert_eq!(t.decimals, 2);
    let key = PriceKey {
        driver: Some("pd.csi.storage.gke.io"),
        disk_type: Some("PD-SSD"),
        regional: true,
        ..PriceKey::default()
    };
    let p = t.price(Priced::Volume, &key).unwrap();
    assert_eq!(p.nanos_per_gib_month, 340_000_000);
    assert_eq!(p.row, "driver pd.csi.storage.gke.io type pd-ssd regional");
    // A type the table does not name falls to the driver's row.
    let other = PriceKey {
        disk_type: Some("hyperdisk-balanced"),
        ..key
    };
    assert_eq!(
        t.price(Priced::Volume, &other).unwrap().row,
        "driver pd.csi.storage.gke.io"
    );
    // A snapshot is priced from the snapshot rows only.
    assert_eq!(
        t.price(Priced::Snapshot, &key).unwrap().nanos_per_gib_month,
        50_000_000
    );
    let ebs = PriceKey {
        driver: Some("ebs.csi.aws.com"),
        ..PriceKey::default()
    };
    assert_eq!(t.price(Priced::Snapshot, &ebs), None);
    // gp2 has no row, and the EBS driver has no catch-all row.
    assert_eq!(
        t.price(
            Priced::Volume,
            &PriceKey {
                disk_type: Some("gp2"),
                ..ebs
            }
        ),
        None
    );
}

#[test]
fn a_price_written_as_a_yaml_number_is_the_same_price() {
    let t = PriceTable::parse(
        "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: 0.17}, {storageClass: b, perGiBMonth: 2}]",
    )
    .unwrap();
    let class = |c| PriceKey {
        storage_class: Some(c),
        ..PriceKey::default()
    };
    assert_eq!(
        t.price(Priced::Volume, &class("a"))
            .unwrap()
            .nanos_per_gib_month,
        170_000_000
    );
    assert_eq!(
        t.price(Priced::Volume, &class("b"))
            .unwrap()
            .nanos_per_gib_month,
        2_000_000_000
    );
}

#[test]
fn a_table_that_cannot_be_meant_is_refused_with_the_row_named() {
    for (text, says) in [
        (
            "currency: usd\nvolumes: [{storageClass: a, perGiBMonth: '1'}]",
            "ISO 4217",
        ),
        ("currency: USD\n", "no prices"),
        (
            "currency: USD\ndecimals: 7\nvolumes: [{storageClass: a, perGiBMonth: '1'}]",
            "decimals 7",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, driver: b, perGiBMonth: '1'}]",
            "volumes[0]: names both",
        ),
        (
            "currency: USD\nvolumes: [{perGiBMonth: '1'}]",
            "volumes[0]: names neither",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, type: x, perGiBMonth: '1'}]",
            "driver rows",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: '-1'}]",
            "not a decimal",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: '0.1.2'}]",
            "not a decimal",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: '0.0000000001'}]",
            "nine decimal",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: '2000000'}]",
            "typo",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGiBMonth: '1'}, {storageClass: a, perGiBMonth: '2'}]",
            "volumes[1]: matches the same volumes as volumes[0]",
        ),
        (
            "currency: USD\nvolumes: [{driver: d, type: gp3, perGiBMonth: '1'}, {driver: d, type: GP3, perGiBMonth: '2'}]",
            "volumes[1]",
        ),
        (
            "currency: USD\nvolumes: [{storageClass: a, perGibMonth: '1'}]",
            "perGibMonth",
        ),
    ] {
        let e = PriceTable::parse(text).expect_err(text);
        assert!(e.contains(says), "{text}: {e}");
    }
}

/// The table of cases: what each finding costs a month and since it became a leftover, in cents.
#[test]
fn each_case_costs_what_the_arithmetic_says_to_the_cent() {
    // Released at 2026-02-27T09:15:00Z, now 2026-03-01T12:00:00Z: two whole days.
    let zonal = gce_volume(
        "zonal",
        "100Gi",
        "standard-rwo",
        "projects/p/zones/europe-west1-b/disks/zonal",
    );
    let regional = gce_volume(
        "regional",
        "2Ti",
        "fast-repl",
        "projects/p/regions/europe-west1/disks/regional",
    );
    let by_class = gce_volume(
        "byclass",
        "10Gi",
        "premium-rwo",
        "projects/p/zones/europe-west1-b/disks/byclass",
    );
    // 1.5 GiB of pd-balanced: 0.15 a month exactly; 2 days of it: 0.15 × 48 / 730 = 0.0098… → 0.01.
    let odd = gce_volume(
        "odd",
        "1536Mi",
        "standard-rwo",
        "projects/p/zones/europe-west1-b/disks/odd",
    );
    for (s, monthly, accrued, row) in [
        // 100 GiB × 0.10 = 10.00; × 48 h / 730 h = 0.6575… → 0.66.
        (
            &zonal,
            1000,
            66,
            "driver pd.csi.storage.gke.io type pd-balanced",
        ),
        // 2048 GiB × 0.34 = 696.32; × 48 / 730 = 45.785… → 45.79.
        (
            &regional,
            69632,
            4579,
            "driver pd.csi.storage.gke.io type pd-ssd regional",
        ),
        // The class's row wins over its driver's (pd-ssd zonal has none anyway).
        (&by_class, 170, 11, "storageClass premium-rwo"),
        (&odd, 15, 1, "driver pd.csi.storage.gke.io type pd-balanced"),
    ] {
        let c = cost(s).unwrap_or_else(|| panic!("{s:?}"));
        assert_eq!(
            (
                c.monthly_minor_units,
                c.accrued_minor_units,
                c.priced_by.as_str()
            ),
            (monthly, accrued, row),
            "{}",
            s.message
        );
        assert_eq!(c.currency, "USD");
        assert_eq!(c.since, released_at());
        assert_eq!(c.accrued_through, time("2026-03-01T09:15:00Z"));
    }
    assert_eq!(
        cost(&regional).unwrap().display,
        "696.32 USD/month, 45.79 USD since 2026-02-27"
    );
}

#[test]
fn a_tombstone_costs_since_its_delete_and_a_disk_since_its_last_detach() {
    let mut tomb = gce_volume(
        "gone",
        "100Gi",
        "standard-rwo",
        "projects/p/zones/europe-west1-b/disks/gone",
    );
    tomb.reason = Reason::VolumeDeleted;
    tomb.subject = Subject::Disk;
    tomb.deleted_at = Some(time("2026-02-28T12:00:00Z"));
    let c = cost(&tomb).unwrap();
    assert_eq!(c.since, time("2026-02-28T12:00:00Z"));
    // One whole day: 10.00 × 24 / 730 = 0.3287… → 0.33.
    assert_eq!((c.monthly_minor_units, c.accrued_minor_units), (1000, 33));

    // An EBS volume no PV names, 10 GiB gp3, detached 10 days and 1 hour ago.
    let mut disk = gce_volume("x", "1Gi", "standard-rwo", "h");
    disk.reason = Reason::DiskWithoutVolume;
    disk.subject = Subject::Disk;
    disk.storage_class = None;
    disk.capacity_bytes = Some(10 << 30);
    disk.source = crate::model::crd::VolumeSourceInfo {
        kind: "awsElasticBlockStore".into(),
        disk_name: Some("vol-0123".into()),
        ..Default::default()
    };
    disk.image = Some(ImageInfo {
        name: "vol-0123".into(),
        size_bytes: Some(10 << 30),
        disk_type: Some("gp3".into()),
        created: Some(now_plus(-90 * 86400)),
        last_detached: Some(now_plus(-(10 * 86400 + 3600))),
        ..Default::default()
    });
    let c = cost(&disk).unwrap();
    assert_eq!(c.priced_by, "driver ebs.csi.aws.com type gp3");
    assert_eq!(c.since, now_plus(-(10 * 86400 + 3600)));
    // 10 × 0.08 = 0.80 a month; 10 days: 0.80 × 240 / 730 = 0.263… → 0.26.
    assert_eq!((c.monthly_minor_units, c.accrued_minor_units), (80, 26));
    // Never detached: since its creation (90 days: 0.80 × 2160 / 730 = 2.367… → 2.37).
    disk.image.as_mut().unwrap().last_detached = None;
    assert_eq!(cost(&disk).unwrap().accrued_minor_units, 237);

    // An Azure managed disk no PV names: its finding records the in-tree `azureDisk` source,
    // priced as the driver it migrates to, by its SKU.
    disk.source = crate::census::azure::vocabulary::AZURE.source(
        &crate::census::azure::vocabulary::resource_group("s", "g"),
        "pvc-1",
    );
    disk.image.as_mut().unwrap().disk_type = Some("Premium_LRS".into());
    let c = cost(&disk).expect("an Azure disk is priced by its SKU row");
    assert_eq!(c.priced_by, "driver disk.csi.azure.com type Premium_LRS");
    assert_eq!(c.monthly_minor_units, 150);
}

#[test]
fn a_backend_snapshot_no_content_names_costs_by_its_drivers_snapshot_row_since_its_creation() {
    // A GCE snapshot of 200 GiB (its disk's size) the census found no content naming, cut 30
    // days ago: 200 × 0.05 = 10.00 a month; 30 days: 10.00 × 720 / 730 = 9.863… → 9.86.
    let mut s = gce_volume("x", "1Gi", "standard-rwo", "h");
    s.reason = Reason::SnapshotWithoutContent;
    s.subject = Subject::BackendSnapshot;
    s.storage_class = None;
    s.capacity_bytes = None;
    s.source.driver = Some("pd.csi.storage.gke.io".into());
    s.snapshot = Some(crate::model::crd::SnapshotInfo {
        snapshot_handle: Some("projects/p/global/snapshots/snapshot-1".into()),
        restore_size_bytes: Some(200 << 30),
        since: Some(now_plus(-30 * 86400)),
        ..Default::default()
    });
    let c = cost(&s).expect("priced by the driver's snapshot row");
    assert_eq!(c.priced_by, "driver pd.csi.storage.gke.io");
    assert_eq!(c.since, now_plus(-30 * 86400));
    assert_eq!((c.monthly_minor_units, c.accrued_minor_units), (1000, 986));
    // The EBS driver has no snapshot row in this table (only a volume row): no estimate.
    s.source.driver = Some("ebs.csi.aws.com".into());
    assert_eq!(cost(&s), None);
}

#[test]
fn without_a_size_a_row_or_a_disk_there_is_no_estimate() {
    let zonal = || {
        gce_volume(
            "zonal",
            "100Gi",
            "standard-rwo",
            "projects/p/zones/europe-west1-b/disks/zonal",
        )
    };
    let mut no_size = zonal();
    no_size.capacity_bytes = None;
    assert_eq!(cost(&no_size), None);
    // The disk is gone: nothing bills.
    let mut no_disk = zonal();
    no_disk.reason = Reason::VolumeWithoutDisk;
    assert_eq!(cost(&no_disk), None);
    // A Ceph volume: the table has no row for its driver.
    let ceph = mariadb_finding().status;
    assert_eq!(cost(&ceph), None);
    // A class gone (its type unknown), of a driver whose rows all name a type: none applies.
    let mut unknown_type = zonal();
    unknown_type.source.driver = Some("ebs.csi.aws.com".into());
    unknown_type.storage_class.as_mut().unwrap().disk_type = None;
    assert_eq!(cost(&unknown_type), None);
}

#[test]
fn minor_units_follow_the_tables_decimals_and_round_half_up() {
    let yen = PriceTable::parse(
        "currency: JPY\ndecimals: 0\nvolumes: [{driver: pd.csi.storage.gke.io, perGiBMonth: '12.5'}]",
    )
    .unwrap();
    // 1 GiB × 12.5 = 12.5 → 13 yen.
    let s = gce_volume(
        "y",
        "1Gi",
        "standard-rwo",
        "projects/p/zones/asia-northeast1-a/disks/y",
    );
    let c = estimate(&s, &yen, &now()).unwrap();
    assert_eq!(c.monthly_minor_units, 13);
    assert!(c.display.starts_with("13 JPY/month"), "{}", c.display);
    assert_eq!(money(123_456, 2, "EUR"), "1234.56 EUR");
    assert_eq!(money(7, 3, "BHD"), "0.007 BHD");
}

#[test]
fn the_estimate_is_written_with_the_finding_and_moves_once_a_day() {
    let t = table();
    let s = gce_volume(
        "zonal",
        "100Gi",
        "standard-rwo",
        "projects/p/zones/europe-west1-b/disks/zonal",
    );
    let f = crate::model::finding::Finding {
        volume_name: "zonal".into(),
        volume_uid: "pv-uid-zonal".into(),
        storage_class_name: Some("standard-rwo".into()),
        status: s,
        object_name: None,
    };
    let v = Verdict::Leftover(Box::new(f.clone()));
    let Action::Create { object } = plan("zonal", Some(&v), None, &now(), &now(), Some(&t)) else {
        panic!("a create")
    };
    let c = object.status.as_ref().unwrap().cost.clone().unwrap();
    assert_eq!(c.accrued_minor_units, 66);
    // Without a table, the same finding has no cost field.
    assert_eq!(
        desired(&f, None, &now(), &now(), None).status.unwrap().cost,
        None
    );
    let published = lean(&(*object).clone().stored_as("vl-uid"));
    // The same day: nothing to write, and the next look is when the next day is counted.
    let later = Time(now().0 + jiff::SignedDuration::from_hours(20));
    assert!(matches!(
        plan(
            "zonal",
            Some(&v),
            Some(&published),
            &now(),
            &later,
            Some(&t)
        ),
        Action::Nothing
    ));
    // Counted through 09:15 today; now is 12:00: the next step is 21 h 15 min away.
    let wait = next_change(Some(&published), &now()).unwrap();
    assert_eq!(wait.as_secs(), 21 * 3600 + 15 * 60);
    assert_eq!(
        next_step(&c.accrued_through, &now()).unwrap().as_secs(),
        wait.as_secs()
    );
    // A day on: the accrued amount moves, and only it (and when it was counted through).
    let day_on = Time(now().0 + jiff::SignedDuration::from_hours(22));
    let Action::Apply {
        object,
        meta,
        status,
    } = plan(
        "zonal",
        Some(&v),
        Some(&published),
        &now(),
        &day_on,
        Some(&t),
    )
    else {
        panic!("an apply")
    };
    assert!(status && meta.is_none());
    let moved = object.status.unwrap().cost.unwrap();
    assert_eq!(moved.accrued_minor_units, 99);
    assert_eq!(moved.monthly_minor_units, c.monthly_minor_units);
    // Without the table now, the field goes.
    let Action::Apply { object, .. } =
        plan("zonal", Some(&v), Some(&published), &now(), &now(), None)
    else {
        panic!("an apply")
    };
    assert_eq!(object.status.unwrap().cost, None);
}

#[test]
fn the_example_tables_in_the_docs_are_accepted() {
    for (file, currency) in [
        ("docs/prices/gce-us-central1.yaml", "USD"),
        ("docs/prices/aws-us-east-1.yaml", "USD"),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let text = std::fs::read_to_string(&path).expect(file);
        let t = PriceTable::parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(t.currency, currency, "{file}");
        assert!(
            t.note.as_deref().is_some_and(|n| n.contains("example")),
            "{file}: marked as an example"
        );
    }
    // The GCE example prices the issue's ticket: a 2 TiB regional SSD, about 700 a month.
    let gce = PriceTable::parse(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("docs/prices/gce-us-central1.yaml"),
        )
        .unwrap(),
    )
    .unwrap();
    let s = gce_volume(
        "regional",
        "2Ti",
        "fast-repl",
        "projects/p/regions/us-central1/disks/regional",
    );
    assert_eq!(
        estimate(&s, &gce, &now()).unwrap().monthly_minor_units,
        69632
    );
}

#[test]
fn scan_prints_the_estimate_after_the_other_keys_and_nothing_without_one() {
    let mut f = mariadb_finding();
    let mut out = Vec::new();
    crate::scan::write_json_line(&mut out, &f).unwrap();
    let plain = String::from_utf8(out).unwrap();
    assert!(!plain.contains("cost"), "{plain}");
    let t = PriceTable::parse(
        "currency: EUR\nvolumes: [{storageClass: standard, perGiBMonth: '0.40'}]",
    )
    .unwrap();
    f.status.cost = estimate(&f.status, &t, &now());
    let mut out = Vec::new();
    crate::scan::write_json_line(&mut out, &f).unwrap();
    let line = String::from_utf8(out).unwrap();
    // 250 MiB × 0.40 a GiB-month = 0.0977 → 0.10; released 2 days ago: 0.0064 → 0.01.
    assert!(
        line.ends_with(
            r#""currency": "EUR", "monthly_cost_minor_units": 10, "accrued_cost_minor_units": 1, "cost_since": "2026-02-27T09:15:00Z", "priced_by": "storageClass standard", "cost_size_basis": "PvCapacity"}
"#
        ),
        "{line}"
    );
    assert_eq!(
        &line[..plain.len() - 2],
        &plain[..plain.len() - 2],
        "the other keys as before"
    );
    // The table gains a COST column only when something is priced.
    let mut out = Vec::new();
    crate::scan::write_report(
        &mut out,
        std::slice::from_ref(&f),
        crate::scan::Format::Table,
    )
    .unwrap();
    let table = String::from_utf8(out).unwrap();
    assert!(
        table.lines().next().unwrap().ends_with("COST")
            && table.contains("0.10 EUR/month, 0.01 EUR since 2026-02-27"),
        "{table}"
    );
}
