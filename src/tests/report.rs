//! The OpenReports ClusterReport built from the findings: deterministic, exact, ordered.

use super::fixtures::PvBuilder;
use super::fixtures::{VlBuilder, finding, lookup, mariadb_finding, mariadb_pv, now, pv};
use crate::decide::plan::desired;
use crate::decide::report::{cluster_report, owned, severity};
use crate::model::crd::{Acknowledgement, State, VolumeLeftover};
use crate::model::labels::MANAGED_BY;

fn published(pv_name: &str) -> VolumeLeftover {
    let f = finding(
        &pv(pv_name).retain().released().claim("ns", "c", "u"),
        &lookup(),
    );
    desired(&f, None, &now(), &now(), None).stored_as("uid")
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

/// An image no PV names, as the census publishes it: no volume, named after the image.
fn image_finding(name: &str) -> VolumeLeftover {
    let mut o = published("unused");
    o.metadata.name = Some(name.into());
    o.metadata.uid = Some(format!("uid-of-{name}"));
    o.spec.volume_name = String::new();
    o.spec.volume_uid = String::new();
    let s = o.status.as_mut().unwrap();
    s.reason = crate::model::crd::Reason::DiskWithoutVolume;
    s.image = Some(crate::model::crd::ImageInfo {
        cluster_id: Some("c1".into()),
        pool: Some("rbd".into()),
        name: name.into(),
        ..Default::default()
    });
    o
}

#[test]
fn image_findings_are_ordered_by_name_and_name_themselves() {
    let a = [
        image_finding("rbd-2"),
        published("pv-b"),
        image_finding("rbd-1"),
    ];
    let b = [
        image_finding("rbd-1"),
        image_finding("rbd-2"),
        published("pv-b"),
    ];
    let (ra, rb) = (cluster_report(&a), cluster_report(&b));
    assert_eq!(
        serde_json::to_vec(&ra).unwrap(),
        serde_json::to_vec(&rb).unwrap(),
        "no PV name to sort by: the order must not depend on the store's"
    );
    let resources: Vec<(&str, &str)> = ra["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let r = &x["resources"][0];
            (r["kind"].as_str().unwrap(), r["name"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        resources,
        [
            ("PersistentVolume", "pv-b"),
            ("VolumeLeftover", "rbd-1"),
            ("VolumeLeftover", "rbd-2")
        ]
    );
    assert_eq!(ra["results"][1]["resources"][0]["uid"], "uid-of-rbd-1");
    assert_eq!(ra["results"][1]["properties"]["image"], "rbd/rbd-1");
    assert_eq!(ra["results"][1]["severity"], "medium");
}

#[test]
fn properties_carry_what_a_person_needs() {
    let o = desired(&mariadb_finding(), None, &now(), &now(), None).stored_as("uid");
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
    for r in crate::model::crd::Reason::ALL {
        assert!(["critical", "high", "medium", "low", "info"].contains(&severity(r)));
    }
}

#[test]
fn no_findings_is_an_empty_report_with_zero_counts() {
    let r = cluster_report(std::iter::empty());
    assert_eq!(r["results"].as_array().unwrap().len(), 0);
    assert_eq!(r["summary"]["fail"], 0);
}

#[test]
fn the_report_there_is_compared_on_what_the_operator_writes_only() {
    let mine = cluster_report(&[published("x"), published("y")]);
    // As the API server returns it: its metadata, managedFields, someone's label.
    let mut there = mine.clone();
    there["metadata"]["uid"] = "1f0e".into();
    there["metadata"]["resourceVersion"] = "42".into();
    there["metadata"]["managedFields"] = serde_json::json!([{"manager": "volume-leftovers"}]);
    there["metadata"]["labels"]["team"] = "storage".into();
    assert_eq!(owned(&there), owned(&mine));
    // A result, a count, the source or our label that differs is a change.
    let other = cluster_report(&[published("x")]);
    assert_ne!(owned(&other), owned(&mine));
    let mut edited = there.clone();
    edited["summary"]["fail"] = 7.into();
    assert_ne!(owned(&edited), owned(&mine));
    let mut edited = there.clone();
    edited["results"][0]["result"] = "pass".into();
    assert_ne!(owned(&edited), owned(&mine));
    let mut edited = there;
    edited["metadata"]["labels"]
        .as_object_mut()
        .unwrap()
        .remove("app.kubernetes.io/managed-by");
    assert_ne!(owned(&edited), owned(&mine));
}
