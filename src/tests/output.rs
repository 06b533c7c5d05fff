//! What `scan` and `kubectl leftovers` print: every format, the summary line, and the kubectl
//! plugin's arguments.

use std::ffi::OsString;

use super::fixtures::{PvBuilder, finding, lookup, mariadb_finding, now, pv};
use crate::model::crd::VolumeLeftover;
use crate::scan::output::{Format, summary, write};
use crate::scan::{CensusGap, Held, ScanResult};

fn report() -> ScanResult {
    let other = finding(
        &pv("zeta")
            .retain()
            .released()
            .claim_by_name("db", "gone")
            .capacity("1Gi"),
        &lookup(),
    );
    ScanResult {
        findings: vec![mariadb_finding(), other],
        ..ScanResult::default()
    }
}

fn printed(report: &ScanResult, format: Format) -> String {
    let mut out = Vec::new();
    write(&mut out, report, format, None, &now()).expect("write");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn json_and_yaml_are_one_list_of_the_volumeleftovers_the_operator_would_write() {
    let r = report();
    let json: serde_json::Value =
        serde_json::from_str(&printed(&r, Format::Json)).expect("one JSON document");
    assert_eq!(json["kind"], "List");
    let items: Vec<VolumeLeftover> =
        serde_json::from_value(json["items"].clone()).expect("VolumeLeftovers");
    let names: Vec<&str> = items
        .iter()
        .map(|o| o.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["mariadb-pv", "zeta"]);
    let expected = crate::decide::plan::desired(
        &r.findings[0],
        None,
        &r.findings[0].status.first_seen,
        &now(),
        None,
    );
    assert_eq!(
        serde_json::to_value(&items[0]).unwrap(),
        serde_json::to_value(&expected).unwrap(),
        "the operator's own object"
    );
    let yaml: serde_json::Value =
        serde_saphyr::from_str(&printed(&r, Format::Yaml)).expect("one YAML document");
    assert_eq!(yaml, json, "YAML says the same");
}

#[test]
fn name_is_kubectls_resource_slash_name() {
    assert_eq!(
        printed(&report(), Format::Name),
        "volumeleftover.leftovers.dev/mariadb-pv\nvolumeleftover.leftovers.dev/zeta\n"
    );
}

#[test]
fn jsonl_is_the_seeds_lines_and_wide_adds_hints_disk_and_message() {
    let r = report();
    let lines = printed(&r, Format::Jsonl);
    assert_eq!(lines.lines().count(), 2);
    assert!(
        lines.starts_with(r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain""#),
        "{lines}"
    );
    let table = printed(&r, Format::Table);
    let wide = printed(&r, Format::Wide);
    let header = |t: &str| {
        t.lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(header(&table).last().map(String::as_str), Some("CAPACITY"));
    assert_eq!(
        &header(&wide)[header(&table).len()..],
        ["HINTS", "DISK", "MESSAGE"]
    );
    let row = wide.lines().nth(1).unwrap();
    assert!(
        row.contains("csi-vol-mariadb") || row.contains("0001-0009"),
        "the disk: {row}"
    );
    assert!(
        row.ends_with(&r.findings[0].status.message),
        "the message last: {row}"
    );
    assert!(
        wide.lines().all(|l| l == l.trim_end()),
        "no trailing blanks"
    );
}

#[test]
fn the_summary_says_findings_by_reason_capacity_cost_and_what_is_not_known() {
    let mut r = report();
    assert_eq!(
        summary(&r, None),
        "2 finding(s): 2 ClaimDeleted; 1.2 GiB held; no price table (--price-table)"
    );
    r.census_failed.push(CensusGap {
        scope: "gce:p/snapshots".into(),
        line: "…".into(),
    });
    r.held.push(Held {
        kind: "PersistentVolume",
        name: "going".into(),
        reason: "ClaimDeleted",
        until: now(),
    });
    r.missing.push("list storageclasses".into());
    let line = summary(&r, None);
    assert!(line.ends_with("; Unknown: gce:p/snapshots; not permitted: list storageclasses; 1 held back in their grace"), "{line}");
    assert_eq!(summary(&ScanResult::default(), None), "no findings");
}

#[test]
fn the_summary_sums_the_cost_and_counts_what_no_row_prices() {
    let table = crate::model::price::PriceTable::parse(
        "currency: EUR\nvolumes:\n  - storageClass: standard\n    perGiBMonth: \"0.10\"\n",
    )
    .expect("a table");
    let mut r = report();
    for f in &mut r.findings {
        f.status.cost = crate::decide::cost::estimate(&f.status, &table, &now());
    }
    let line = summary(&r, Some(&table));
    assert!(
        line.contains("/month estimated, 1 finding(s) no price row covers"),
        "{line}"
    );
    assert!(line.contains("EUR"), "{line}");
}

fn args(a: &[&str]) -> Vec<OsString> {
    a.iter().map(OsString::from).collect()
}

#[test]
fn as_the_kubectl_plugin_scan_is_the_command_unless_another_is_named() {
    use crate::run::cli::plugin_args;
    let plugin = "/usr/local/bin/kubectl-leftovers";
    assert_eq!(plugin_args(args(&[plugin])), args(&[plugin, "scan"]));
    assert_eq!(
        plugin_args(args(&[plugin, "-o", "wide"])),
        args(&[plugin, "scan", "-o", "wide"])
    );
    for kept in [
        &[plugin, "completion", "bash"][..],
        &[plugin, "--version"],
        &[plugin, "help"],
        &[plugin, "scan"],
    ] {
        assert_eq!(plugin_args(args(kept)), args(kept));
    }
    let own = ["volume-leftovers", "-o", "wide"];
    assert_eq!(
        plugin_args(args(&own)),
        args(&own),
        "not as the plugin: as given"
    );
}

#[test]
fn version_names_the_revision_it_was_built_from() {
    let v = crate::run::cli::VERSION;
    assert!(v.starts_with(env!("CARGO_PKG_VERSION")), "{v}");
    let rev = v.split("revision ").nth(1).unwrap().trim_end_matches(')');
    assert!(
        rev == "unknown" || (rev.len() == 12 && rev.bytes().all(|b| b.is_ascii_hexdigit())),
        "{v}"
    );
}
