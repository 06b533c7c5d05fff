//! Label selectors for exclusions, and the exclusions themselves.

use std::collections::BTreeMap;

use crate::model::exclude::{Exclusion, Exclusions};
use crate::model::selector::{Requirement, Selector};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn parses_every_form() {
    let s = Selector::parse("team=db,env!=prod,keep,!tmp,tier in (a, b),zone notin (x)")
        .expect("parses");
    assert_eq!(
        s.0,
        vec![
            Requirement::Equals("team".into(), "db".into()),
            Requirement::NotEquals("env".into(), "prod".into()),
            Requirement::Exists("keep".into()),
            Requirement::NotExists("tmp".into()),
            Requirement::In("tier".into(), vec!["a".into(), "b".into()]),
            Requirement::NotIn("zone".into(), vec!["x".into()]),
        ]
    );
    assert_eq!(
        s.to_string(),
        "team=db,env!=prod,keep,!tmp,tier in (a,b),zone notin (x)"
    );
}

#[test]
fn matches_as_kubernetes_does() {
    let s = Selector::parse("team=db,env!=prod,!tmp").unwrap();
    assert!(s.matches(Some(&labels(&[("team", "db")]))));
    assert!(s.matches(Some(&labels(&[("team", "db"), ("env", "dev")]))));
    assert!(!s.matches(Some(&labels(&[("team", "db"), ("env", "prod")]))));
    assert!(!s.matches(Some(&labels(&[("team", "db"), ("tmp", "")]))));
    assert!(!s.matches(None));
    let notin = Selector::parse("zone notin (x)").unwrap();
    assert!(notin.matches(None), "notin holds when the key is absent");
    let prefixed = Selector::parse("example.com/keep=yes").unwrap();
    assert!(prefixed.matches(Some(&labels(&[("example.com/keep", "yes")]))));
}

#[test]
fn an_empty_selector_excludes_nothing() {
    assert!(!Selector::default().matches(Some(&labels(&[("a", "b")]))));
}

#[test]
fn malformed_selectors_are_errors_not_panics() {
    for bad in [
        "a=b,",
        ",",
        "a in b",
        "a in (b",
        "a b c",
        "-a=b",
        "a=b c",
        "a)",
        "a notin x",
    ] {
        assert!(Selector::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn the_ignore_label_wins_then_the_class_then_the_selector() {
    let e = Exclusions {
        classes: ["archive".to_string()].into(),
        selector: Some(Selector::parse("team=db").unwrap()),
    };
    let ignore = labels(&[("leftovers.dev/ignore", "true"), ("team", "db")]);
    assert_eq!(
        e.why(Some(&ignore), Some("archive")),
        Some(Exclusion::IgnoreLabel)
    );
    assert_eq!(e.why(None, Some("archive")), Some(Exclusion::StorageClass));
    assert_eq!(
        e.why(Some(&labels(&[("team", "db")])), Some("fast")),
        Some(Exclusion::Selector)
    );
    assert_eq!(e.why(Some(&labels(&[("team", "web")])), Some("fast")), None);
    let not_true = labels(&[("leftovers.dev/ignore", "false")]);
    assert_eq!(Exclusions::default().why(Some(&not_true), None), None);
}
