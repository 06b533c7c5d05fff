//! `scan`: the facts as a lookup, the findings' order, the JSON line of the original tool and
//! the table.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::PersistentVolume;

use super::fixtures::{PvBuilder, finding, lookup, mariadb_finding, mariadb_pv, pv};
use crate::decide::classify::{ClaimFacts, ClassFacts, Found, Lookup};
use crate::model::finding::Finding;
use crate::model::volume::Volume;
use crate::scan::{Facts, Format, findings, seven_keys, write_json_line, write_report};

/// The original tool's line for the mariadb leftover, up to where the tool's keys end.
const MARIADB_PREFIX: &str = r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": true, "storage_class": "standard", "capacity": "250Mi", "#;

fn claims(entries: &[(&str, &str, &str)]) -> Option<HashMap<(String, String), ClaimFacts>> {
    Some(
        entries
            .iter()
            .map(|(ns, name, uid)| {
                (
                    (ns.to_string(), name.to_string()),
                    ClaimFacts {
                        uid: uid.to_string(),
                        terminating: false,
                        size: Default::default(),
                    },
                )
            })
            .collect(),
    )
}

fn classes(entries: &[(&str, &str)]) -> Option<HashMap<String, ClassFacts>> {
    Some(
        entries
            .iter()
            .map(|(name, policy)| {
                (
                    name.to_string(),
                    ClassFacts {
                        reclaim_policy: policy.to_string(),
                        ..ClassFacts::default()
                    },
                )
            })
            .collect(),
    )
}

fn json_line(f: &Finding) -> String {
    let mut out = Vec::new();
    write_json_line(&mut out, f).expect("write");
    String::from_utf8(out).expect("utf-8")
}

fn report(found: &[Finding], format: Format) -> String {
    let mut out = Vec::new();
    write_report(&mut out, found, format).expect("write");
    String::from_utf8(out).expect("utf-8")
}

fn mariadb_facts() -> Facts {
    Facts {
        claims: claims(&[]),
        classes: classes(&[("standard", "Retain")]),
        census: None,
    }
}

fn scan_of(pvs: &[PersistentVolume], facts: &Facts) -> Vec<Finding> {
    let vols: Vec<Volume> = pvs.iter().map(Volume::from).collect();
    findings(&vols, facts)
}

// ---- Facts as a Lookup ----

#[test]
fn snapshot_finds_a_claim_by_namespace_and_name() {
    let s = Facts {
        claims: claims(&[("ns", "c", "uid-1")]),
        ..Facts::default()
    };
    assert_eq!(
        s.claim("ns", "c"),
        Found::Yes(ClaimFacts {
            uid: "uid-1".into(),
            terminating: false,
            size: Default::default()
        })
    );
    assert_eq!(s.claim("ns", "d"), Found::Absent);
    assert_eq!(s.claim("other", "c"), Found::Absent);
}

#[test]
fn snapshot_without_claims_answers_unknown_not_absent() {
    let s = Facts::default();
    assert_eq!(s.claim("ns", "c"), Found::Unknown);
}

#[test]
fn snapshot_finds_a_class_by_name() {
    let s = Facts {
        classes: classes(&[("standard", "Retain")]),
        ..Facts::default()
    };
    assert_eq!(
        s.class("standard"),
        Found::Yes(ClassFacts {
            reclaim_policy: "Retain".into(),
            ..ClassFacts::default()
        })
    );
    assert_eq!(s.class("fast"), Found::Absent);
}

#[test]
fn snapshot_without_classes_answers_unknown_not_absent() {
    assert_eq!(Facts::default().class("standard"), Found::Unknown);
}

#[test]
fn class_facts_default_an_unset_reclaim_policy_to_delete() {
    let sc = k8s_openapi::api::storage::v1::StorageClass::default();
    assert_eq!(
        crate::decide::lookup::class_facts(&sc).reclaim_policy,
        "Delete"
    );
    let retain = k8s_openapi::api::storage::v1::StorageClass {
        reclaim_policy: Some("Retain".into()),
        ..Default::default()
    };
    assert_eq!(
        crate::decide::lookup::class_facts(&retain).reclaim_policy,
        "Retain"
    );
}

// ---- findings ----

#[test]
fn findings_are_sorted_by_name_and_leave_out_healthy_and_skipped_pvs() {
    let pvs = [
        pv("zeta").retain().released().claim("ns", "z", "u"),
        pv("healthy").retain().bound().claim("ns", "h", "uid-h"),
        pv("alpha").retain().failed(),
        pv("odd").phase("Lost"),
        pv("available").available(),
        pv("mid").retain().released(),
    ];
    let facts = Facts {
        claims: claims(&[("ns", "h", "uid-h")]),
        classes: classes(&[]),
        census: None,
    };
    let names: Vec<String> = scan_of(&pvs, &facts)
        .into_iter()
        .map(|f| f.volume_name)
        .collect();
    assert_eq!(names, vec!["alpha", "mid", "zeta"]);
}

#[test]
fn findings_of_an_empty_cluster_are_empty() {
    assert!(scan_of(&[], &Facts::default()).is_empty());
}

#[test]
fn findings_use_the_same_classification_as_the_controller() {
    let found = scan_of(&[mariadb_pv()], &mariadb_facts());
    assert_eq!(found.len(), 1);
    let mut expected = mariadb_finding();
    // Only the wall-clock time differs.
    expected.status.first_seen = found[0].status.first_seen.clone();
    assert_eq!(found[0], expected);
}

#[test]
fn findings_when_claims_are_forbidden_report_claim_unknown() {
    let facts = Facts {
        claims: None,
        ..mariadb_facts()
    };
    let found = scan_of(&[mariadb_pv()], &facts);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].status.reason,
        crate::model::crd::Reason::ClaimUnknown
    );
}

// ---- JSON lines ----

#[test]
fn mariadb_json_line_starts_with_the_original_tools_seven_keys() {
    let line = json_line(&mariadb_finding());
    assert!(
        line.starts_with(MARIADB_PREFIX),
        "\n got: {line}\nwant: {MARIADB_PREFIX}..."
    );
}

#[test]
fn mariadb_json_line_from_a_scan_starts_with_the_original_tools_seven_keys() {
    let found = scan_of(&[mariadb_pv()], &mariadb_facts());
    let line = json_line(&found[0]);
    assert!(line.starts_with(MARIADB_PREFIX), "{line}");
}

#[test]
fn json_line_is_one_line_of_valid_json() {
    let line = json_line(&mariadb_finding());
    assert!(line.ends_with("}\n"), "{line:?}");
    assert_eq!(line.matches('\n').count(), 1);
    let v: serde_json::Value = serde_json::from_str(&line).expect("valid JSON");
    assert_eq!(v["reason"], "ClaimDeleted");
    assert_eq!(v["claim_uid"], "uid-mariadb-1");
    assert_eq!(v["claim_current_uid"], serde_json::Value::Null);
    assert_eq!(v["storage_class_reclaim"], "Retain");
    assert_eq!(v["phase_since"], "2026-02-27T09:15:00Z");
    assert_eq!(v["volume_mode"], "Filesystem");
    assert_eq!(v["source_type"], "csi");
    assert_eq!(v["driver"], "rbd.csi.ceph.com");
    assert_eq!(v["pool"], "replicapool");
    assert_eq!(v["image_name"], "csi-vol-mariadb");
    assert_eq!(v["message"], mariadb_finding().status.message.as_str());
}

/// Issue 33: the line said every fact of the PV's source but its zones, which locate an
/// in-tree disk (and an EBS volume's region), and which the operator publishes
/// (`status.source.zones`).
#[test]
fn json_line_names_the_zones_that_locate_the_disk() {
    let p = pv("intree")
        .retain()
        .released()
        .claim("db", "data", "uid-1")
        .gce_pd("disk-1")
        .zones(["europe-west1-b", "europe-west1-c"]);
    let f = finding(&p, &lookup());
    assert_eq!(f.status.source.zones, ["europe-west1-b", "europe-west1-c"]);
    let v: serde_json::Value = serde_json::from_str(&json_line(&f)).expect("valid JSON");
    assert_eq!(
        v["zones"],
        serde_json::json!(["europe-west1-b", "europe-west1-c"])
    );
    let v: serde_json::Value =
        serde_json::from_str(&json_line(&mariadb_finding())).expect("valid JSON");
    assert_eq!(v["zones"], serde_json::json!([]), "none required: empty");
}

#[test]
fn json_line_puts_reason_right_after_the_original_keys() {
    let line = json_line(&mariadb_finding());
    let rest = line.strip_prefix(MARIADB_PREFIX).expect("prefix");
    assert!(rest.starts_with(r#""reason": "ClaimDeleted", "#), "{rest}");
}

#[test]
fn json_line_uses_python_separators_in_arrays_too() {
    let p = mariadb_pv()
        .delete()
        .access_modes(["ReadWriteOnce", "ReadOnlyMany"]);
    let f = super::fixtures::finding(&p, &lookup().with_class("standard", "Retain"));
    let line = json_line(&f);
    assert!(
        line.contains(r#""hints": ["ReclaimPolicyDelete", "ReclaimPolicyMismatch"]"#),
        "{line}"
    );
    assert!(
        line.contains(r#""access_modes": ["ReadWriteOnce", "ReadOnlyMany"]"#),
        "{line}"
    );
}

#[test]
fn json_line_with_claims_forbidden_says_claim_missing_null() {
    let f = super::fixtures::finding(
        &mariadb_pv(),
        &lookup().with_class("standard", "Retain").claims_forbidden(),
    );
    let line = json_line(&f);
    assert!(
        line.contains(r#""claim": "mariadb/mariadb", "claim_missing": null, "#),
        "{line}"
    );
}

#[test]
fn json_line_of_a_recreated_claim_has_both_uids() {
    let f = super::fixtures::finding(
        &mariadb_pv(),
        &lookup().with_class("standard", "Retain").with_claim(
            "mariadb",
            "mariadb",
            "uid-mariadb-2",
        ),
    );
    let line = json_line(&f);
    // The original tool: the claim of that name exists, so it is not missing. The reason and
    // the two uids say what happened.
    assert!(line.contains(r#""claim_missing": false, "#), "{line}");
    assert!(line.contains(r#""reason": "ClaimRecreated", "#), "{line}");
    assert!(
        line.contains(r#""claim_uid": "uid-mariadb-1", "claim_current_uid": "uid-mariadb-2""#),
        "{line}"
    );
}

#[test]
fn json_line_without_claim_ref_says_no_claim_is_missing_as_the_original_tool() {
    let f = super::fixtures::finding(&pv("bare").retain().released(), &lookup());
    let line = json_line(&f);
    assert!(
        line.starts_with(
            r#"{"name": "bare", "phase": "Released", "reclaim": "Retain", "claim": null, "claim_missing": false, "storage_class": null, "capacity": null, "reason": "ReleasedWithoutClaim", "#
        ),
        "{line}"
    );
}

#[test]
fn json_report_writes_one_line_per_finding_in_order() {
    let a = mariadb_finding();
    let b = super::fixtures::finding(&pv("other").retain().failed(), &lookup());
    let out = report(&[a, b], Format::Jsonl);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with(r#"{"name": "mariadb-pv", "#));
    assert!(lines[1].starts_with(r#"{"name": "other", "#));
}

#[test]
fn json_report_of_no_findings_is_empty() {
    assert_eq!(report(&[], Format::Jsonl), "");
}

// ---- Table ----

const HEADER: [&str; 8] = [
    "NAME",
    "REASON",
    "PHASE",
    "RECLAIM",
    "CLAIM",
    "CLAIM-MISSING",
    "CLASS",
    "CAPACITY",
];

#[test]
fn table_has_a_header_and_one_row_per_finding() {
    let a = mariadb_finding();
    let b = super::fixtures::finding(&pv("other").retain().failed(), &lookup());
    let out = report(&[a, b], Format::Table);
    let rows: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        vec![
            HEADER.to_vec(),
            vec![
                "mariadb-pv",
                "ClaimDeleted",
                "Released",
                "Retain",
                "mariadb/mariadb",
                "true",
                "standard",
                "250Mi"
            ],
            vec![
                "other",
                "ReclaimFailed",
                "Failed",
                "Retain",
                "<none>",
                "false",
                "<none>",
                "<none>"
            ],
        ]
    );
}

#[test]
fn table_columns_are_aligned() {
    let a = mariadb_finding();
    let b = super::fixtures::finding(&pv("x").retain().failed(), &lookup());
    let out = report(&[a, b], Format::Table);
    let lines: Vec<&str> = out.lines().collect();
    let column = |line: &str, cell: &str| line.find(cell).expect(cell);
    assert_eq!(column(lines[0], "REASON"), column(lines[1], "ClaimDeleted"));
    assert_eq!(
        column(lines[0], "REASON"),
        column(lines[2], "ReclaimFailed")
    );
    assert_eq!(column(lines[0], "CAPACITY"), column(lines[1], "250Mi"));
    assert!(
        lines.iter().all(|l| l == &l.trim_end()),
        "no trailing spaces"
    );
}

#[test]
fn table_says_unknown_when_claims_are_forbidden() {
    let f = super::fixtures::finding(
        &mariadb_pv(),
        &lookup().with_class("standard", "Retain").claims_forbidden(),
    );
    let out = report(&[f], Format::Table);
    let row: Vec<&str> = out
        .lines()
        .nth(1)
        .expect("row")
        .split_whitespace()
        .collect();
    assert_eq!(row[5], "unknown");
}

#[test]
fn table_of_no_findings_is_the_header_only() {
    let out = report(&[], Format::Table);
    assert_eq!(out.lines().count(), 1);
    assert_eq!(out.split_whitespace().collect::<Vec<_>>(), HEADER.to_vec());
}

#[test]
fn json_line_with_an_incomplete_claim_ref_prints_no_claim_string() {
    let f = super::fixtures::finding(
        &pv("half").retain().released().claim("", "data", "uid-1"),
        &lookup(),
    );
    let line = json_line(&f);
    // The original tool looks nothing up without a namespace: claim null, claim_missing false.
    assert!(
        line.contains(r#""claim": null, "claim_missing": false, "#),
        "{line}"
    );
}

#[test]
fn json_line_prints_an_empty_class_name_as_the_original_tool_does() {
    let f = super::fixtures::finding(&pv("e").retain().released().class(""), &lookup());
    let line = json_line(&f);
    assert!(line.contains(r#""storage_class": "", "#), "{line}");
}

#[test]
fn seven_keys_of_every_row_the_original_tool_prints_agree_with_it() {
    // (pv, facts, the original tool's seven keys) for the rows it prints.
    let l = lookup().with_class("standard", "Retain");
    let cases: Vec<(PersistentVolume, Facts, &str)> = vec![
        (
            mariadb_pv(),
            l.clone(),
            r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": true, "storage_class": "standard", "capacity": "250Mi"}"#,
        ),
        (
            mariadb_pv(),
            l.clone().with_claim("mariadb", "mariadb", "uid-new"),
            r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": false, "storage_class": "standard", "capacity": "250Mi"}"#,
        ),
        (
            pv("pre")
                .retain()
                .available()
                .claim_by_name("ns", "never")
                .capacity("1Gi"),
            l.clone(),
            r#"{"name": "pre", "phase": "Available", "reclaim": "Retain", "claim": "ns/never", "claim_missing": true, "storage_class": null, "capacity": "1Gi"}"#,
        ),
        (
            pv("b")
                .retain()
                .bound()
                .claim("ns", "gone", "u")
                .class("standard"),
            l.clone(),
            r#"{"name": "b", "phase": "Bound", "reclaim": "Retain", "claim": "ns/gone", "claim_missing": true, "storage_class": "standard", "capacity": null}"#,
        ),
        (
            pv("odd").retain().released().claim("", "c", "u"),
            l.clone(),
            r#"{"name": "odd", "phase": "Released", "reclaim": "Retain", "claim": null, "claim_missing": false, "storage_class": null, "capacity": null}"#,
        ),
        (
            pv("kind")
                .retain()
                .released()
                .claim("ns", "c", "u")
                .claim_kind("Pod"),
            l.clone(),
            r#"{"name": "kind", "phase": "Released", "reclaim": "Retain", "claim": "ns/c", "claim_missing": true, "storage_class": null, "capacity": null}"#,
        ),
        (
            pv("nostatus").retain().claim("ns", "c", "u").no_status(),
            l.clone(),
            r#"{"name": "nostatus", "phase": "", "reclaim": "Retain", "claim": "ns/c", "claim_missing": true, "storage_class": null, "capacity": null}"#,
        ),
        (
            pv("bare").retain().released().class(""),
            l.clone(),
            r#"{"name": "bare", "phase": "Released", "reclaim": "Retain", "claim": null, "claim_missing": false, "storage_class": "", "capacity": null}"#,
        ),
        (
            mariadb_pv(),
            l.clone().claims_forbidden(),
            r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": null, "storage_class": "standard", "capacity": "250Mi"}"#,
        ),
    ];
    for (p, facts, want) in cases {
        let found = scan_of(&[p], &facts);
        assert_eq!(found.len(), 1, "{want}");
        let keys = seven_keys(&found[0]);
        let mut out = Vec::new();
        let mut ser = serde_json::Serializer::with_formatter(&mut out, PySep);
        serde::Serialize::serialize(&keys, &mut ser).expect("json");
        assert_eq!(String::from_utf8(out).expect("utf-8"), want);
        // The line itself starts with the same keys.
        let line = json_line(&found[0]);
        assert!(line.starts_with(&want[..want.len() - 1]), "{line}");
    }
}

/// Python's separators, for comparing with the original tool's lines.
struct PySep;

impl serde_json::ser::Formatter for PySep {
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

#[test]
fn a_failed_read_keeps_the_client_error_and_says_the_line_it_said() {
    use crate::scan::ScanError;
    use crate::watch::category::{Category, RequestError};
    use std::error::Error as _;

    let status = kube::core::Status::failure("Unauthorized", "Unauthorized").with_code(401);
    let e = ScanError::Read {
        verb: "list",
        resource: "persistentvolumes",
        server: "https://127.0.0.1:6443".into(),
        source: Box::new(RequestError::Client(kube::Error::Api(status.boxed()))),
        credentials: Some("the kubeconfig's user \"u\" (context \"c\")".into()),
    };
    assert_eq!(e.category(), Some(Category::Unauthorized));
    assert_eq!(
        e.to_string(),
        "cannot list persistentvolumes from https://127.0.0.1:6443: 401 Unauthorized: \
         Unauthorized (the credentials of the kubeconfig's user \"u\" (context \"c\") were rejected)"
    );
    let client = e
        .source()
        .and_then(|request| request.source())
        .and_then(|k| k.downcast_ref::<kube::Error>());
    assert!(
        matches!(client, Some(kube::Error::Api(s)) if s.code == 401),
        "{e:?}"
    );

    let slow = ScanError::Read {
        verb: "list",
        resource: "persistentvolumeclaims",
        server: "https://127.0.0.1:6443".into(),
        source: Box::new(RequestError::Timeout(std::time::Duration::from_secs(30))),
        credentials: None,
    };
    assert_eq!(slow.category(), Some(Category::Timeout));
    assert_eq!(
        slow.to_string(),
        "cannot list persistentvolumeclaims from https://127.0.0.1:6443: no answer within 30s"
    );
    assert_eq!(
        ScanError::Output(std::io::Error::other("closed")).category(),
        None
    );
}

// ---- the cloud census in a scan ----

mod cloud {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::PersistentVolume;

    use super::super::fixtures::{PvBuilder, now_plus, pv};
    use crate::census::{CensusFailure, CensusReport};
    use crate::decide::census::{
        Census, CreatedFor, DiskFacts, FailureCategory, FailureKind, Scope, ScopeListing, Seen,
    };
    use crate::model::crd::{Hint, Reason};
    use crate::model::finding::Finding;
    use crate::model::volume::Volume;
    use crate::scan::cloud::{DiskKeys, Failures, disk_keys, record};
    use crate::scan::{Facts, Format, Outcome, ScanResult, findings, write_report_with};

    fn zone() -> Scope {
        crate::census::gce::vocabulary::location("p1", "europe-west1-b")
    }

    fn region() -> Scope {
        crate::census::ebs::vocabulary::region(Some("123456789012"), "eu-west-1")
    }

    /// A disk created two hours before the fixtures' now.
    fn disk(cluster: Option<&str>, users: &[&str], pv: Option<&str>) -> Seen {
        Seen {
            size_only: None,
            users_only: 0,
            id: "4711".into(),
            detail: Some(Box::new(DiskFacts {
                size: 10 << 30,
                created: Some(now_plus(-7200).0),
                kind: Some("pd-balanced".into()),
                in_use: users.iter().map(|u| u.to_string()).collect(),
                created_for: pv.map(|pv| CreatedFor {
                    pv: Some(pv.into()),
                    pvc: Some("data".into()),
                    pvc_namespace: Some("db".into()),
                }),
                cluster: cluster.map(str::to_string),
                tags: cluster
                    .map(|c| vec![("goog-k8s-cluster-name".to_string(), c.to_string())])
                    .unwrap_or_default(),
                ..DiskFacts::default()
            })),
        }
    }

    /// One listing of `scope` at `at` seconds from now: these disks, or a failure.
    fn listed(
        scope: &Scope,
        at: i64,
        disks: Result<Vec<(&str, Seen)>, FailureCategory>,
    ) -> CensusReport {
        CensusReport {
            key: scope.clone(),
            result: disks
                .map(|d| ScopeListing {
                    started: now_plus(at),
                    scope_id: None,
                    images: d.into_iter().map(|(n, s)| (n.to_string(), s)).collect(),
                    recoverable: Default::default(),
                    unread: Default::default(),
                })
                .map_err(|c| {
                    CensusFailure::new(FailureKind::of(c), format!("listing {scope}: {c:?}"))
                }),
            requests: 1,
            elapsed: Duration::ZERO,
        }
    }

    /// A PV made an hour before now, Available, naming its disk by a CSI handle.
    fn csi_pv(name: &str, driver: &str, handle: &str) -> PersistentVolume {
        let mut p = pv(name).retain().available().csi(driver, handle, []);
        p.metadata.creation_timestamp = Some(now_plus(-3600));
        p
    }

    fn classified(c: &Census, pvs: &[PersistentVolume]) -> Vec<Finding> {
        let facts = Facts {
            claims: Some(HashMap::new()),
            classes: Some(HashMap::new()),
            census: Some(Arc::new(c.clone())),
        };
        let vols: Vec<Volume> = pvs.iter().map(Volume::from).collect();
        findings(&vols, &facts)
    }

    fn reasons(found: &[Finding]) -> Vec<(String, Reason)> {
        found
            .iter()
            .map(|f| (f.name().to_string(), f.status.reason))
            .collect()
    }

    fn json(found: &[Finding], census: &Census) -> String {
        let disks: HashMap<String, DiskKeys> = found
            .iter()
            .filter_map(|f| Some((f.name().to_string(), disk_keys(f, census)?)))
            .collect();
        let mut out = Vec::new();
        write_report_with(&mut out, found, &disks, Format::Jsonl).expect("write");
        String::from_utf8(out).expect("utf-8")
    }

    const GCE: &str = "pd.csi.storage.gke.io";
    const EBS: &str = "ebs.csi.aws.com";

    #[test]
    fn a_disk_missing_from_two_listings_in_a_row_makes_its_pv_a_finding_whose_line_names_the_disk()
    {
        let mut c = Census::new([zone(), region()], Some("prod"), Duration::from_secs(3600));
        let pvs = [
            csi_pv("pv-gce", GCE, "projects/p1/zones/europe-west1-b/disks/gone"),
            csi_pv("pv-ebs", EBS, "vol-0dead"),
            csi_pv(
                "pv-kept",
                GCE,
                "projects/p1/zones/europe-west1-b/disks/kept",
            ),
        ];
        let mut failed = Failures::new();
        let gce_disks = || vec![("kept", disk(Some("prod"), &[], Some("pv-kept")))];
        record(
            &mut c,
            vec![listed(&zone(), 0, Ok(gce_disks()))],
            &mut failed,
        );
        record(&mut c, vec![listed(&region(), 0, Ok(vec![]))], &mut failed);
        assert!(
            classified(&c, &pvs).is_empty(),
            "one listing is not two: an absence after one is unknown"
        );
        record(
            &mut c,
            vec![listed(&zone(), 60, Ok(gce_disks()))],
            &mut failed,
        );
        record(&mut c, vec![listed(&region(), 60, Ok(vec![]))], &mut failed);
        assert!(failed.is_empty(), "{failed:?}");
        let found = classified(&c, &pvs);
        assert_eq!(
            reasons(&found),
            [
                ("pv-ebs".to_string(), Reason::VolumeWithoutDisk),
                ("pv-gce".to_string(), Reason::VolumeWithoutDisk),
            ]
        );
        let lines = json(&found, &c);
        let mut lines = lines.lines();
        let ebs = lines.next().expect("the EBS PV's line");
        assert!(
            ebs.ends_with(r#", "backend": "ebs", "scope": "ebs:123456789012/eu-west-1", "project": null, "zone": null, "region": "eu-west-1", "account": "123456789012", "disk_id": null, "size_bytes": null, "disk_type": null, "created": null, "attached_to": [], "last_detached": null, "replica_zones": [], "owner": null, "owner_cluster": null, "created_for_pv": null, "created_for_claim": null, "tags": {}}"#),
            "{ebs}"
        );
        assert!(ebs.contains(r#""volume_handle": "vol-0dead""#), "{ebs}");
        let gce = lines.next().expect("the GCE PV's line");
        assert!(
            gce.contains(r#""backend": "gce", "scope": "gce:p1/europe-west1-b", "project": "p1", "zone": "europe-west1-b", "region": "europe-west1", "account": null"#),
            "{gce}"
        );
    }

    /// Issue 33: `scan` located a PV's disk without the zones its node affinity requires, where
    /// the operator used them: a healthy EBS volume of an uncensused region was said lost, and
    /// in-tree GCE disks that were gone were not reported.
    #[test]
    fn scan_locates_a_disk_by_the_zones_its_pv_requires_as_the_operator_does() {
        let regional = crate::census::gce::vocabulary::location("p1", "europe-west1");
        let mut c = Census::new(
            [zone(), regional.clone(), region()],
            Some("prod"),
            Duration::from_secs(3600),
        );
        let mut failed = Failures::new();
        for at in [0, 60] {
            for scope in [zone(), regional.clone(), region()] {
                record(&mut c, vec![listed(&scope, at, Ok(vec![]))], &mut failed);
            }
        }
        assert!(failed.is_empty(), "{failed:?}");
        let in_tree = |name: &str, disk: &str| {
            let mut p = pv(name).retain().available().gce_pd(disk);
            p.metadata.creation_timestamp = Some(now_plus(-3600));
            p
        };
        let pvs = [
            // A healthy volume in eu-central-1, a region not censused: nothing is known of it.
            csi_pv("pv-ebs-elsewhere", EBS, "vol-0acc0000000000003")
                .bound()
                .claim("db", "data", "u-1")
                .zones(["eu-central-1a"]),
            in_tree("intree-zonal", "intree-gone-z").zones(["europe-west1-b"]),
            in_tree("intree-regional", "intree-gone-r").zones(["europe-west1-b", "europe-west1-c"]),
        ];
        let facts = Facts {
            claims: Some(HashMap::from([(
                ("db".to_string(), "data".to_string()),
                crate::decide::lookup::ClaimFacts {
                    uid: "u-1".into(),
                    terminating: false,
                    size: Default::default(),
                },
            )])),
            classes: Some(HashMap::new()),
            census: Some(Arc::new(c.clone())),
        };
        let vols: Vec<Volume> = pvs.iter().map(Volume::from).collect();
        let found = findings(&vols, &facts);
        assert_eq!(
            reasons(&found),
            [
                ("intree-regional".to_string(), Reason::VolumeWithoutDisk),
                ("intree-zonal".to_string(), Reason::VolumeWithoutDisk),
            ]
        );
        // Where the listings looked for each, in the fields every backend fills.
        let looked: Vec<_> = found
            .iter()
            .map(|f| {
                let i = f.status.image.as_ref().expect("where it was looked for");
                (
                    i.account.as_deref(),
                    i.zone.as_deref(),
                    i.region.as_deref(),
                    i.name.as_str(),
                    f.status.source.zones.clone(),
                )
            })
            .collect();
        assert_eq!(
            looked,
            [
                (
                    Some("p1"),
                    None,
                    Some("europe-west1"),
                    "intree-gone-r",
                    vec!["europe-west1-b".to_string(), "europe-west1-c".to_string()]
                ),
                (
                    Some("p1"),
                    Some("europe-west1-b"),
                    Some("europe-west1"),
                    "intree-gone-z",
                    vec!["europe-west1-b".to_string()]
                ),
            ]
        );
    }

    #[test]
    fn a_disk_no_pv_names_is_reported_with_what_names_it_unless_another_cluster_owns_it() {
        let mut c = Census::new([zone()], Some("prod"), Duration::from_secs(3600));
        let mut failed = Failures::new();
        for at in [0, 60] {
            let disks = vec![
                ("nobody-says", disk(None, &[], None)),
                ("theirs", disk(Some("staging"), &[], Some("pvc-9"))),
                ("ours", disk(Some("prod"), &["vm-1"], Some("pvc-1"))),
            ];
            record(&mut c, vec![listed(&zone(), at, Ok(disks))], &mut failed);
        }
        let found = c.orphans(&zone(), &Default::default(), &now_plus(120));
        let by_disk: Vec<(&str, &[Hint])> = found
            .iter()
            .map(|f| {
                let image = f.status.image.as_ref().expect("image");
                (image.name.as_str(), f.status.hints.as_slice())
            })
            .collect();
        assert_eq!(
            by_disk,
            [
                ("nobody-says", &[Hint::OwnerUnknown][..]),
                ("ours", &[Hint::DiskInUse][..]),
            ],
            "another cluster's disk is not reported"
        );
        let lines = json(&found, &c);
        let lines: Vec<&str> = lines.lines().collect();
        assert!(
            lines[0].contains(r#""reason": "DiskWithoutVolume""#)
                && lines[0].contains(r#""source_type": "gcePersistentDisk""#)
                && lines[0].contains(r#""disk_name": "nobody-says""#),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].ends_with(r#", "backend": "gce", "scope": "gce:p1/europe-west1-b", "project": "p1", "zone": "europe-west1-b", "region": "europe-west1", "account": null, "disk_id": "4711", "size_bytes": 10737418240, "disk_type": "pd-balanced", "created": "2026-03-01T10:00:00Z", "attached_to": [], "last_detached": null, "replica_zones": [], "owner": "unknown", "owner_cluster": null, "created_for_pv": null, "created_for_claim": null, "tags": {}}"#),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].ends_with(r#", "attached_to": ["vm-1"], "last_detached": null, "replica_zones": [], "owner": "ours", "owner_cluster": "prod", "created_for_pv": "pvc-1", "created_for_claim": "db/data", "tags": {"goog-k8s-cluster-name": "prod"}}"#),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn a_scope_whose_listing_failed_either_time_is_named_and_nothing_is_concluded_about_it() {
        let mut c = Census::new([zone(), region()], Some("prod"), Duration::from_secs(3600));
        let mut failed = Failures::new();
        let orphan = || vec![("orphan", disk(None, &[], None))];
        // GCE: listed, then a 403. EBS: throttled, then listed.
        record(&mut c, vec![listed(&zone(), 0, Ok(orphan()))], &mut failed);
        record(
            &mut c,
            vec![listed(&region(), 0, Err(FailureCategory::Quota))],
            &mut failed,
        );
        record(
            &mut c,
            vec![listed(&zone(), 60, Err(FailureCategory::Forbidden))],
            &mut failed,
        );
        record(&mut c, vec![listed(&region(), 60, Ok(vec![]))], &mut failed);
        let lines: Vec<String> = failed.values().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "the EBS census of ebs:123456789012/eu-west-1 failed (quota): listing ebs:123456789012/eu-west-1: Quota; nothing is said about its disks",
                "the GCE census of gce:p1/europe-west1-b failed (forbidden): listing gce:p1/europe-west1-b: Forbidden; nothing is said about its disks",
            ]
        );
        let pvs = [
            csi_pv("pv-gce", GCE, "projects/p1/zones/europe-west1-b/disks/gone"),
            csi_pv("pv-ebs", EBS, "vol-0dead"),
        ];
        assert!(
            classified(&c, &pvs).is_empty(),
            "an Unknown scope, or one listed once, says no disk is missing"
        );
        assert!(
            c.orphans(&zone(), &Default::default(), &now_plus(120))
                .is_empty(),
            "a disk in an Unknown scope is no orphan"
        );
        let report = ScanResult {
            cloud_failed: failed.into_values().collect(),
            ..ScanResult::default()
        };
        assert_eq!(Outcome::of(&report), Outcome::Incomplete, "exit 4");
    }

    #[test]
    fn scopes_an_aggregated_listing_names_join_the_census() {
        let mut c = Census::new(Vec::<Scope>::new(), Some("prod"), Duration::from_secs(3600));
        c.open_whole(crate::census::gce::vocabulary::project("p1"), None);
        let regional = crate::census::gce::vocabulary::location("p1", "europe-west1");
        let mut failed = Failures::new();
        for at in [0, 60] {
            let disks = vec![("regional", disk(None, &[], None))];
            record(&mut c, vec![listed(&regional, at, Ok(disks))], &mut failed);
        }
        let found = c.orphans(&regional, &Default::default(), &now_plus(120));
        assert_eq!(found.len(), 1);
        let line = json(&found, &c);
        assert!(
            line.contains(r#""project": "p1", "zone": null, "region": "europe-west1""#),
            "{line}"
        );
    }

    /// Issue 33: `scan` recorded a disk naming its section's own `clusterName` as naming the
    /// file's, then compared it with the section's name (as the operator does, through
    /// [`Census::cluster_name_of`]): this cluster's disks in such a section read as another
    /// cluster's and were never reported, while the operator published them. A listing is now
    /// recorded as read, as in the operator: the section's name is this cluster's there, the
    /// file's another's; and a zone an aggregated listing names is admitted with its section's
    /// name.
    #[test]
    fn each_section_names_its_own_cluster_as_the_operator_reads_it() {
        let config = crate::census::config::CensusConfig::parse(
            "clusterName: prod
gce:
  - project: fixed
    locations: [europe-west1-b]
    clusterName: gke-prod
  - project: open
    clusterName: gke-open
ebs:
  - region: eu-west-1
    clusterName: eks-prod
",
        )
        .expect("config parses");
        let mut c = config.census(Duration::from_secs(3600));
        let gce = |project: &str, location: &str| {
            crate::census::gce::vocabulary::location(project, location)
        };
        let ebs = crate::census::ebs::vocabulary::region(None, "eu-west-1");
        let scopes = [
            (gce("fixed", "europe-west1-b"), "gke-prod"),
            (gce("open", "europe-west1-c"), "gke-open"),
            (ebs, "eks-prod"),
        ];
        let mut failed = Failures::new();
        for at in [0, 60] {
            for (scope, ours) in &scopes {
                let disks = vec![
                    ("ours", disk(Some(ours), &[], Some("pv-1"))),
                    ("files", disk(Some("prod"), &[], Some("pv-2"))),
                ];
                record(&mut c, vec![listed(scope, at, Ok(disks))], &mut failed);
            }
        }
        assert!(failed.is_empty(), "{failed:?}");
        for (scope, _) in &scopes {
            let found = c.orphans(scope, &Default::default(), &now_plus(120));
            let names: Vec<&str> = found
                .iter()
                .map(|f| f.status.image.as_ref().expect("image").name.as_str())
                .collect();
            assert_eq!(names, ["ours"], "{scope}");
            assert!(
                found[0].status.hints.is_empty(),
                "{:?}",
                found[0].status.hints
            );
        }
    }
}

// ---- the operator's graces in a scan ----

/// Issue 33: `scan` applied no grace (and for snapshots only the default ones), so it printed
/// states the operator holds back, and withheld what an operator with shorter graces published.
/// It now holds back by the operator's own rule ([`crate::decide::plan::gate`]) with the graces
/// it is given, and names what it held and until when.
mod graces {
    use std::time::Duration;

    use super::super::fixtures::{PvBuilder, finding, lookup, now, now_plus, pv};
    use crate::decide::plan::Graces;
    use crate::model::crd::Reason;
    use crate::scan::{Held, hold};

    const DEFAULTS: Graces = Graces {
        grace: Duration::from_secs(120),
        delete_grace: Duration::from_secs(600),
        expansion_grace: Duration::from_secs(120),
    };

    #[test]
    fn a_delete_policy_volume_released_five_minutes_ago_is_held_until_its_delete_grace_has_passed()
    {
        let f = finding(
            &pv("going")
                .delete()
                .released()
                .since(now_plus(-300))
                .claim_by_name("db", "data"),
            &lookup(),
        );
        let (reported, held) = hold(vec![f.clone()], DEFAULTS, &now());
        assert!(reported.is_empty(), "{reported:?}");
        assert_eq!(
            held,
            [Held {
                kind: "PersistentVolume",
                name: "going".into(),
                reason: f.status.reason.as_str(),
                until: now_plus(300),
            }],
            "held until its phase time plus the delete grace"
        );
        let short = Graces {
            delete_grace: Duration::from_secs(60),
            ..DEFAULTS
        };
        let (reported, held) = hold(vec![f], short, &now());
        assert!(held.is_empty());
        assert_eq!(reported.len(), 1);
        assert_eq!(
            reported[0].status.first_seen,
            now_plus(-240),
            "dated as the operator dates it: its phase time plus the grace"
        );
    }

    #[test]
    fn a_state_the_objects_do_not_date_is_held_from_this_look_unless_its_grace_is_zero() {
        let f = finding(
            &pv("lost").retain().bound().claim("db", "data", "u-1"),
            &lookup(),
        );
        assert_eq!(f.status.reason, Reason::BoundClaimMissing);
        let (reported, held) = hold(vec![f.clone()], DEFAULTS, &now());
        assert!(reported.is_empty());
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].until, now_plus(120));
        let none = Graces {
            grace: Duration::ZERO,
            delete_grace: Duration::ZERO,
            expansion_grace: Duration::ZERO,
        };
        let (reported, held) = hold(vec![f], none, &now());
        assert!(held.is_empty());
        assert_eq!(reported.len(), 1);
    }

    #[test]
    fn a_retain_volume_whose_claim_is_deleted_is_reported_at_once() {
        let f = finding(
            &pv("kept")
                .retain()
                .released()
                .since(now_plus(-5))
                .claim_by_name("db", "data"),
            &lookup(),
        );
        assert_eq!(f.status.reason, Reason::ClaimDeleted);
        let (reported, held) = hold(vec![f], DEFAULTS, &now());
        assert!(held.is_empty());
        assert_eq!(reported.len(), 1);
    }
}
