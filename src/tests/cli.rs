//! The command line: clap's own consistency check, durations, defaults and bounds.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches};

use crate::run::cli::{Cli, Command, LogFormat, RunArgs, parse_duration};
use crate::scan::Format;

/// Parses `args` with every environment fallback switched off, so a developer's `VL_*`
/// variables cannot change what the defaults look like.
fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    let cmd = Cli::command()
        .mut_args(|a| a.env(None))
        .mut_subcommand("run", |s| s.mut_args(|a| a.env(None)))
        .mut_subcommand("scan", |s| s.mut_args(|a| a.env(None)));
    let matches = cmd.try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

#[track_caller]
fn run_args(args: &[&str]) -> RunArgs {
    match parse(args).expect("parses").command {
        Command::Run(r) => r,
        other => panic!("expected run, got {other:?}"),
    }
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn every_run_and_scan_flag_has_an_env_fallback_and_a_doc() {
    let cmd = Cli::command();
    for sub in ["run", "scan"] {
        let s = cmd.find_subcommand(sub).expect(sub);
        for a in s.get_arguments().filter(|a| !a.is_global_set()) {
            let id = a.get_id().as_str();
            if id == "help" {
                continue;
            }
            assert!(a.get_env().is_some(), "{sub} --{id} has no env fallback");
            assert!(a.get_help().is_some(), "{sub} --{id} has no help");
        }
    }
}

#[test]
fn parse_duration_reads_seconds() {
    assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
}

#[test]
fn parse_duration_reads_minutes() {
    assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
}

#[test]
fn parse_duration_reads_hours_and_minutes() {
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
}

#[test]
fn parse_duration_reads_iso_8601() {
    assert_eq!(parse_duration("PT90S"), Ok(Duration::from_secs(90)));
}

#[test]
fn parse_duration_rejects_garbage_with_examples() {
    for bad in ["", "soon", "5", "m5", "5 parsecs"] {
        let e = parse_duration(bad).expect_err(bad);
        assert!(e.contains("examples: 30s, 5m, 1h"), "{bad:?}: {e}");
    }
}

#[test]
fn parse_duration_rejects_negative_durations() {
    assert_eq!(
        parse_duration("-5m"),
        Err("durations must not be negative".to_string())
    );
}

#[test]
fn run_defaults() {
    let r = run_args(&["volume-leftovers", "run"]);
    let RunArgs {
        listen,
        concurrency,
        resync,
        graces,
        stale_after,
        request_timeout,
        watch_timeout,
        page_size,
        leader_elect,
        lease_name,
        lease_namespace,
        lease_duration,
        events,
        openreports,
        tombstone_ttl,
        exclude,
        census,
        pricing,
        snapshots,
    } = r;
    assert_eq!(
        snapshots.exclusions(),
        crate::model::snapshot::SnapshotExclusions::default(),
        "Velero's contents are kept out unless asked"
    );
    assert_eq!(pricing.price_table, None, "cost estimates are opt-in");
    assert!(pricing.prices().expect("no file to read").is_none());
    assert_eq!(census.census_config, None, "the Ceph census is opt-in");
    assert_eq!(census.census_interval, Duration::from_secs(600));
    assert_eq!(census.census_image_grace, Duration::from_secs(3600));
    assert_eq!(census.census_timeout, Duration::from_secs(10));
    assert!(census.settings().expect("no file to read").is_none());
    assert!(!openreports, "the OpenReports mirror is opt-in");
    assert_eq!(
        tombstone_ttl, None,
        "tombstones stay until acknowledged unless asked"
    );
    assert!(events, "Events on the PVs are on unless turned off");
    assert!(exclude.storage_classes.is_empty() && exclude.selector.is_none());
    assert!(!leader_elect, "one process is the only writer unless asked");
    assert_eq!(lease_name, "volume-leftovers");
    assert_eq!(lease_namespace, None);
    assert_eq!(lease_duration, Duration::from_secs(15));
    assert_eq!(listen, "0.0.0.0:8080".parse::<SocketAddr>().expect("addr"));
    assert_eq!(concurrency, 16);
    assert_eq!(resync, Duration::from_secs(300));
    assert_eq!(graces.grace, Duration::from_secs(120));
    assert_eq!(graces.delete_grace, Duration::from_secs(600));
    assert_eq!(stale_after, Duration::from_secs(15));
    assert_eq!(request_timeout, Duration::from_secs(30));
    assert_eq!(watch_timeout, Duration::from_secs(30));
    assert_eq!(page_size, 500);
}

/// One set of defaults: `run` without flags runs with `Settings::default()`, which is also what
/// the e2e tests start from. Only the Event identity differs: it is this replica's name, known at
/// run time (`Settings::default()` publishes no Events).
#[test]
fn run_without_flags_runs_with_the_library_defaults() {
    let mut parsed = crate::run::settings(&run_args(&["volume-leftovers", "run"]));
    assert_eq!(
        parsed.events,
        Some(crate::watch::client::identity()),
        "Events are on"
    );
    parsed.events = None;
    assert_eq!(
        format!("{parsed:#?}"),
        format!("{:#?}", crate::run::settings::Settings::default())
    );
}

#[test]
fn tombstone_ttl_is_a_duration() {
    let r = run_args(&["volume-leftovers", "run", "--tombstone-ttl", "720h"]);
    assert_eq!(r.tombstone_ttl, Some(Duration::from_secs(720 * 3600)));
    assert!(parse(&["volume-leftovers", "run", "--tombstone-ttl", "-1h"]).is_err());
}

#[test]
fn global_defaults() {
    let cli = parse(&["volume-leftovers", "run"]).expect("parses");
    assert_eq!(cli.log_format, LogFormat::Text);
    assert_eq!(cli.log, "info");
}

#[test]
fn run_flags_override_the_defaults() {
    let r = run_args(&[
        "volume-leftovers",
        "run",
        "--listen",
        "127.0.0.1:9090",
        "--concurrency",
        "8",
        "--resync",
        "1h",
        "--grace",
        "30s",
        "--delete-grace",
        "1h",
        "--page-size",
        "100",
    ]);
    assert_eq!(
        r.listen,
        "127.0.0.1:9090".parse::<SocketAddr>().expect("addr")
    );
    assert_eq!(r.concurrency, 8);
    assert_eq!(r.resync, Duration::from_secs(3600));
    assert_eq!(r.graces.grace, Duration::from_secs(30));
    assert_eq!(r.graces.delete_grace, Duration::from_secs(3600));
    assert_eq!(r.page_size, 100);
}

#[test]
fn concurrency_is_bounded_1_to_64() {
    for bad in ["0", "65"] {
        assert!(
            parse(&["volume-leftovers", "run", "--concurrency", bad]).is_err(),
            "--concurrency {bad}"
        );
    }
    assert_eq!(
        run_args(&["volume-leftovers", "run", "--concurrency", "64"]).concurrency,
        64
    );
}

#[test]
fn page_size_is_bounded_1_to_10000() {
    for bad in ["0", "10001"] {
        assert!(
            parse(&["volume-leftovers", "run", "--page-size", bad]).is_err(),
            "--page-size {bad}"
        );
    }
}

#[test]
fn a_bad_duration_flag_is_rejected() {
    assert!(parse(&["volume-leftovers", "run", "--resync", "often"]).is_err());
}

#[test]
fn scan_defaults_to_a_table_on_a_terminal_and_the_seeds_lines_in_a_pipe_and_takes_every_format() {
    match parse(&["volume-leftovers", "scan"])
        .expect("parses")
        .command
    {
        Command::Scan(s) => assert_eq!(s.output, None),
        other => panic!("{other:?}"),
    }
    assert_eq!(Format::default_for(true), Format::Table);
    assert_eq!(Format::default_for(false), Format::Jsonl);
    for (flag, format) in [
        ("table", Format::Table),
        ("wide", Format::Wide),
        ("json", Format::Json),
        ("yaml", Format::Yaml),
        ("name", Format::Name),
        ("jsonl", Format::Jsonl),
    ] {
        match parse(&["volume-leftovers", "scan", "-o", flag])
            .expect("parses")
            .command
        {
            Command::Scan(s) => assert_eq!(s.output, Some(format), "-o {flag}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn crd_subcommand_parses() {
    assert!(matches!(
        parse(&["volume-leftovers", "crd"]).expect("parses").command,
        Command::Crd
    ));
}

#[test]
fn a_subcommand_is_required() {
    assert!(parse(&["volume-leftovers"]).is_err());
}

#[test]
fn global_flags_work_after_the_subcommand() {
    let cli = parse(&[
        "volume-leftovers",
        "scan",
        "--log-format",
        "json",
        "--log",
        "debug",
    ])
    .expect("parses");
    assert_eq!(cli.log_format, LogFormat::Json);
    assert_eq!(cli.log, "debug");
}

#[test]
fn the_old_bound_grace_flag_still_sets_the_grace() {
    let r = run_args(&["volume-leftovers", "run", "--bound-grace", "45s"]);
    assert_eq!(r.graces.grace, Duration::from_secs(45));
}

#[test]
fn a_zero_resync_is_a_usage_error_not_a_panic() {
    let e = parse(&["volume-leftovers", "run", "--resync", "0s"]).expect_err("0s");
    assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
    assert!(e.to_string().contains("must be at least 1s"), "{e}");
}

#[test]
fn a_wait_so_long_that_a_timer_would_overflow_is_a_usage_error() {
    for flag in ["--grace", "--delete-grace", "--stale-after"] {
        let e = parse(&["volume-leftovers", "run", flag, "100000000h"]).expect_err(flag);
        assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation, "{flag}");
        assert!(
            e.to_string().contains("must be at most 366d"),
            "{flag}: {e}"
        );
    }
    let e = parse(&["volume-leftovers", "run", "--resync", "48h"]).expect_err("48h");
    assert!(e.to_string().contains("must be at most 1d"), "{e}");
}

#[test]
fn a_zero_grace_is_allowed_and_means_publish_at_once() {
    let r = run_args(&[
        "volume-leftovers",
        "run",
        "--grace",
        "0s",
        "--delete-grace",
        "0s",
    ]);
    assert_eq!(r.graces.grace, Duration::ZERO);
    assert_eq!(r.graces.delete_grace, Duration::ZERO);
}

#[test]
fn request_and_watch_timeouts_are_bounded() {
    assert!(parse(&["volume-leftovers", "run", "--request-timeout", "0s"]).is_err());
    assert!(parse(&["volume-leftovers", "run", "--watch-timeout", "1s"]).is_err());
    assert!(parse(&["volume-leftovers", "scan", "--request-timeout", "11m"]).is_err());
}

#[test]
fn the_default_grace_outlasts_a_watch_that_hangs_silently() {
    let r = run_args(&["volume-leftovers", "run"]);
    let bound = crate::run::cli::silent_watch_bound(r.watch_timeout);
    assert_eq!(bound, Duration::from_secs(35));
    // With room for the resumed watch to replay what it missed.
    assert!(
        r.graces.grace >= bound * 3,
        "{:?} vs {bound:?}",
        r.graces.grace
    );
    assert_eq!(r.silent_watch_risk(), None);
    let r = run_args(&["volume-leftovers", "run", "--grace", "30s"]);
    let risk = r
        .silent_watch_risk()
        .expect("a grace inside the bound is said");
    assert!(
        risk.contains("--grace 30s") && risk.contains("--watch-timeout 30s"),
        "{risk}"
    );
    let r = run_args(&[
        "volume-leftovers",
        "run",
        "--grace",
        "2m",
        "--watch-timeout",
        "290s",
    ]);
    assert!(
        r.silent_watch_risk().is_some(),
        "kube's old default with the default grace"
    );
    let r = run_args(&["volume-leftovers", "run", "--grace", "0s"]);
    assert!(
        r.silent_watch_risk().is_some(),
        "no grace holds nothing back"
    );
}

#[test]
fn exclusions_are_read_from_repeated_and_comma_separated_flags() {
    let r = run_args(&[
        "volume-leftovers",
        "run",
        "--exclude-storage-class",
        "archive,scratch",
        "--exclude-storage-class=legacy",
        "--exclude-selector",
        "team in (archive,backup),!keep",
    ]);
    let e = r.exclude.exclusions();
    assert_eq!(
        e.classes.iter().map(String::as_str).collect::<Vec<_>>(),
        ["archive", "legacy", "scratch"]
    );
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let s = e.selector.expect("a selector");
    assert!(s.matches(Some(&labels(&[("team", "backup")]))));
    assert!(!s.matches(Some(&labels(&[("team", "backup"), ("keep", "")]))));
    assert!(!s.matches(Some(&labels(&[("team", "db")]))));
    assert!(parse(&["volume-leftovers", "run", "--exclude-selector", "team in ("]).is_err());
}

#[test]
fn scan_keeps_velero_snapshots_out_by_default_and_an_empty_selector_keeps_none_out() {
    use crate::model::selector::{Requirement, Selector};
    let asked = |args: &[&str]| match parse(args).expect("parses").command {
        Command::Scan(s) => s.snapshots.asked(&s.graces),
        other => panic!("{other:?}"),
    };
    let default = asked(&["volume-leftovers", "scan"]);
    assert_eq!(
        default.exclusions.selector,
        Some(Selector(vec![Requirement::Exists(
            "velero.io/backup-name".into()
        )]))
    );
    assert_eq!(default.graces.grace, Duration::from_secs(120));
    assert_eq!(default.graces.delete_grace, Duration::from_secs(600));
    let none = asked(&["volume-leftovers", "scan", "--exclude-snapshot-selector="]);
    assert_eq!(none.exclusions.selector, None);
    let own = asked(&[
        "volume-leftovers",
        "scan",
        "--exclude-snapshot-selector=backup.example/owner",
    ]);
    assert_eq!(
        own.exclusions.selector,
        Some(Selector(vec![Requirement::Exists(
            "backup.example/owner".into()
        )]))
    );
    assert!(
        parse(&[
            "volume-leftovers",
            "scan",
            "--exclude-snapshot-selector=a in ("
        ])
        .is_err()
    );
}

#[test]
fn scan_takes_the_operators_graces_with_the_same_defaults() {
    let run = run_args(&["volume-leftovers", "run"]);
    let scan = |args: &[&str]| match parse(args).expect("parses").command {
        Command::Scan(s) => s,
        other => panic!("{other:?}"),
    };
    let default = scan(&["volume-leftovers", "scan"]);
    assert_eq!(
        default.graces.graces(),
        run.graces.graces(),
        "one set of defaults"
    );
    let short = scan(&[
        "volume-leftovers",
        "scan",
        "--grace",
        "0s",
        "--delete-grace",
        "30s",
    ]);
    assert_eq!(short.graces.graces().grace, Duration::ZERO);
    assert_eq!(short.graces.graces().delete_grace, Duration::from_secs(30));
    assert_eq!(
        short.snapshots.asked(&short.graces).graces,
        short.graces.graces(),
        "the snapshot part holds back by the same graces"
    );
}
