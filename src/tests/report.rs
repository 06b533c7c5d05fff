//! The OpenReports ClusterReport built from the findings: deterministic, exact, ordered.

use super::fixtures::PvBuilder;
use super::fixtures::{VlBuilder, finding, lookup, mariadb_finding, mariadb_pv, now, pv};
use crate::crd::{Acknowledgement, State, VolumeLeftover};
use crate::plan::{MANAGED_BY, desired};
use crate::report::{cluster_report, severity};

fn published(pv_name: &str) -> VolumeLeftover {
    let f = finding(
        &pv(pv_name).retain().released().claim("ns", "c", "u"),
        &lookup(),
    );
    desired(&f, None, &now(), &now()).stored_as("uid")
}

#[test]
fn one_result_per_finding_in_pv_name_order_with_exact_counts() {
    let mut acked = published("b-acked");
    acked.spec.acknowledgement = Some(Acknowledgement {
        ticket: Some("OPS-9".into()),
        ..Acknowledgement::default()
    });
    acked.status.as_mut().unwrap().state = State::Acknowledged;
    let foreign = published("a-foreign").without_label(MANAGED_BY);
    let items = [published("c-open"), acked, foreign, published("a-open")];
    let r = cluster_report(&items);
    let names: Vec<&str> = r["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["resources"][0]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["a-open", "b-acked", "c-open"],
        "sorted; someone else's left out"
    );
    assert_eq!(r["summary"]["fail"], 2);
    assert_eq!(r["summary"]["skip"], 1);
    assert_eq!(r["results"][1]["result"], "skip");
    assert_eq!(r["results"][1]["properties"]["ticket"], "OPS-9");
    assert_eq!(r["results"][0]["policy"], "ClaimDeleted");
    assert_eq!(r["results"][0]["category"], "Storage");
    assert_eq!(r["source"], "volume-leftovers");
}

#[test]
fn the_same_findings_give_the_same_bytes_in_any_order() {
    let a = [published("x"), published("y")];
    let b = [published("y"), published("x")];
    assert_eq!(
        serde_json::to_vec(&cluster_report(&a)).unwrap(),
        serde_json::to_vec(&cluster_report(&b)).unwrap()
    );
}

#[test]
fn properties_carry_what_a_person_needs() {
    let o = desired(&mariadb_finding(), None, &now(), &now()).stored_as("uid");
    let r = cluster_report([&o]);
    let p = &r["results"][0]["properties"];
    assert_eq!(p["storageClass"], "standard");
    assert_eq!(p["capacity"], "250Mi");
    assert_eq!(p["claim"], "mariadb/mariadb");
    assert_eq!(p["firstSeen"], "2026-03-01T12:00:00Z");
    assert_eq!(r["results"][0]["timestamp"]["nanos"], 0);
    let _ = mariadb_pv();
}

#[test]
fn every_reason_has_a_severity_policy_reporter_knows() {
    for r in crate::crd::Reason::ALL {
        assert!(["critical", "high", "medium", "low", "info"].contains(&severity(r)));
    }
}

#[test]
fn no_findings_is_an_empty_report_with_zero_counts() {
    let r = cluster_report(std::iter::empty());
    assert_eq!(r["results"].as_array().unwrap().len(), 0);
    assert_eq!(r["summary"]["fail"], 0);
}
