//! The artifacts that other tools read: the Argo CD health check (argocd/), the Prometheus alert
//! rules (charts/volume-leftovers/files/alerts.yaml, copied to prometheus/alerts.yaml, with their
//! promtool unit tests and runbooks in docs/runbooks/) and the Grafana dashboard
//! (charts/volume-leftovers/files/dashboard.json).
//!
//! - the health check passes its tests in Argo CD's Lua VM (tools/lua), built in and as an
//!   argocd-cm override, and argocd/README.md carries exactly health.lua;
//! - `promtool check rules` and `promtool test rules` pass, and every alert is tested firing and
//!   not firing;
//! - the chart renders exactly prometheus/alerts.yaml with default values, applies its two values
//!   (runbook base URL, capacity threshold), and renders the dashboard;
//! - every query of the dashboard and every alert uses only the metrics and labels the operator
//!   exports (`EXPORTED`), reads the per-replica gauges with `max` (never a sum over replicas) and
//!   the counters and histograms with `rate`/`increase`, and is valid PromQL for promtool;
//! - every alert has a severity, a summary, a description and a runbook in docs/runbooks/; the
//!   StoreDegraded runbook and alert name every store state, the OpenForADay runbook every reason.
//!
//! promtool, helm and argocd-lua-health are built from their Go modules by tools/build.sh (cached
//! outside the clone). When one cannot be built, the tests that need it fail with the reason; they
//! never skip.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

const CHART: &str = "charts/volume-leftovers";
const CHART_ALERTS: &str = "charts/volume-leftovers/files/alerts.yaml";
const CHART_DASHBOARD: &str = "charts/volume-leftovers/files/dashboard.json";
const FULL_VALUES: &str = "charts/volume-leftovers/ci/full-values.yaml";
const ALERTS: &str = "prometheus/alerts.yaml";
const ALERTS_TEST: &str = "prometheus/alerts_test.yaml";
const ARGOCD: &str = "argocd";
const HEALTH_DIR: &str = "argocd/resource_customizations/leftovers.dev/VolumeLeftover";
const RUNBOOKS: &str = "docs/runbooks";
const ARGOCD_CM_KEY: &str = "resource.customizations.health.leftovers.dev_VolumeLeftover";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Type {
    Gauge,
    Counter,
    Histogram,
}

/// A metric the operator exports, with its own labels.
struct Metric {
    name: &'static str,
    kind: Type,
    labels: &'static [&'static str],
}

const fn metric(name: &'static str, kind: Type, labels: &'static [&'static str]) -> Metric {
    Metric { name, kind, labels }
}

/// The metrics the operator exports, as queries name them (counters with `_total`; histograms by
/// their base name, queried as `_bucket`, `_sum` and `_count`). Every replica exports every one
/// of them: the gauges from its own caches, so a query combines replicas with `max`.
///
/// This list is what the dashboard and the alerts are checked against; it is meant to be replaced
/// by (or checked against) the operator's real exposition, e.g. the `# TYPE` lines of
/// `volume_leftovers::telemetry::Metrics::default().encode()`.
const EXPORTED: &[Metric] = &[
    metric(
        "volume_leftovers_findings",
        Type::Gauge,
        &["reason", "storage_class", "state"],
    ),
    metric(
        "volume_leftovers_findings_capacity_bytes",
        Type::Gauge,
        &["reason", "storage_class", "state"],
    ),
    // With a price table only.
    metric(
        "volume_leftovers_findings_monthly_cost_minor_units",
        Type::Gauge,
        &["reason", "storage_class", "state", "currency"],
    ),
    metric(
        "volume_leftovers_oldest_open_finding_seconds",
        Type::Gauge,
        &["reason"],
    ),
    metric("volume_leftovers_ignored_volumes", Type::Gauge, &[]),
    metric("volume_leftovers_ready", Type::Gauge, &[]),
    metric("volume_leftovers_store_state", Type::Gauge, &["resource"]),
    metric(
        "volume_leftovers_watch_errors_total",
        Type::Counter,
        &["resource", "category"],
    ),
    metric(
        "volume_leftovers_relists_total",
        Type::Counter,
        &["resource"],
    ),
    metric(
        "volume_leftovers_writes_total",
        Type::Counter,
        &["op", "result"],
    ),
    metric("volume_leftovers_writes_blocked", Type::Gauge, &[]),
    metric(
        "volume_leftovers_write_duration_seconds",
        Type::Histogram,
        &["op"],
    ),
    metric(
        "volume_leftovers_decision_duration_seconds",
        Type::Histogram,
        &[],
    ),
    metric("volume_leftovers_leader", Type::Gauge, &[]),
    metric(
        "volume_leftovers_leader_transitions_total",
        Type::Counter,
        &[],
    ),
    metric(
        "volume_leftovers_pending_findings",
        Type::Gauge,
        &["reason"],
    ),
    metric("volume_leftovers_undecided_volumes", Type::Gauge, &[]),
    metric("volume_leftovers_skipped_volumes", Type::Gauge, &[]),
    // With the census only: one series per Ceph pool (`pool`), per GCE zone or region and per
    // EBS region (`backend`, `scope`).
    metric(
        "volume_leftovers_census_up",
        Type::Gauge,
        &["pool", "backend", "scope"],
    ),
];

/// Labels the scrape adds to every series (Prometheus itself, and the Prometheus Operator's
/// ServiceMonitor), usable in any matcher or grouping.
const TARGET_LABELS: &[&str] = &[
    "namespace",
    "pod",
    "instance",
    "job",
    "service",
    "container",
    "endpoint",
];

// ---------------------------------------------------------------------------------------------
// Helpers

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel} is not YAML: {e}"))
}

/// A directory of this test binary for the files it writes.
fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("observability-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A Go tool built (or found in the cache) by tools/build.sh, once per test binary and tool.
fn tool(name: &'static str) -> PathBuf {
    static LUA: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static PROMTOOL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    static HELM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let (cell, module) = match name {
        "argocd-lua-health" => (&LUA, "lua"),
        "promtool" => (&PROMTOOL, "promtool"),
        "helm" => (&HELM, "helm"),
        other => panic!("no cell for tool {other}"),
    };
    let built = cell.get_or_init(|| {
        let out = Command::new(repo().join("tools/build.sh"))
            .arg(module)
            .output()
            .map_err(|e| format!("running tools/build.sh {module}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "tools/build.sh {module} failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join(name);
        if !bin.is_file() {
            return Err(format!(
                "tools/build.sh {module} printed no directory holding {name}"
            ));
        }
        Ok(bin)
    });
    match built {
        Ok(p) => p.clone(),
        Err(e) => panic!("{name} could not be built (tests never skip):\n{e}"),
    }
}

fn run(cmd: &mut Command) -> Output {
    cmd.current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"))
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `helm template volume-leftovers charts/volume-leftovers --show-only TEMPLATE ARGS...`, parsed.
fn render(template: &str, args: &[&str]) -> Value {
    let home = scratch().join("helm-home");
    let out = run(Command::new(tool("helm"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env_remove("KUBECONFIG")
        .env_remove("HELM_NAMESPACE")
        .args([
            "template",
            "volume-leftovers",
            CHART,
            "--namespace",
            "volume-leftovers",
            "--show-only",
            template,
        ])
        .args(args));
    assert!(
        out.status.success(),
        "helm template {args:?}:\n{}",
        text(&out)
    );
    let stream = String::from_utf8(out.stdout).expect("helm writes UTF-8");
    let doc: String = stream
        .lines()
        .filter(|l| l.trim_end() != "---")
        .map(|l| format!("{l}\n"))
        .collect();
    serde_saphyr::from_str(&doc)
        .unwrap_or_else(|e| panic!("helm's render does not parse: {e}\n{stream}"))
}

/// The alerting rules of a rule file (or a PrometheusRule's spec): (alert, rule).
fn alert_rules(rules: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            if let Some(alert) = rule["alert"].as_str() {
                out.push((alert.to_string(), rule.clone()));
            }
        }
    }
    out
}

fn default_runbook_base() -> String {
    let values = yaml(&format!("{CHART}/values.yaml"));
    values["metrics"]["prometheusRule"]["runbookBaseURL"]
        .as_str()
        .expect("metrics.prometheusRule.runbookBaseURL in values.yaml")
        .trim_end_matches('/')
        .to_string()
}

fn default_capacity_threshold() -> u64 {
    let values = yaml(&format!("{CHART}/values.yaml"));
    values["metrics"]["prometheusRule"]["capacityThresholdBytes"]
        .as_u64()
        .expect("metrics.prometheusRule.capacityThresholdBytes in values.yaml")
}

fn default_cost_threshold() -> u64 {
    let values = yaml(&format!("{CHART}/values.yaml"));
    values["metrics"]["prometheusRule"]["monthlyCostThresholdMinorUnits"]
        .as_u64()
        .expect("metrics.prometheusRule.monthlyCostThresholdMinorUnits in values.yaml")
}

// ---------------------------------------------------------------------------------------------
// (a) The Argo CD health check

#[test]
fn the_argocd_health_check_passes_its_tests_in_argo_cds_lua_vm() {
    let dir = repo().join(HEALTH_DIR);
    let tests = yaml(&format!("{HEALTH_DIR}/health_test.yaml"));
    let tests = tests["tests"]
        .as_array()
        .expect("tests in health_test.yaml");
    assert!(tests.len() >= 8, "at least 8 cases, got {}", tests.len());
    // Every object in testdata/ is a case, and every case's object exists.
    let inputs: BTreeSet<String> = tests
        .iter()
        .map(|t| t["inputPath"].as_str().expect("inputPath").to_string())
        .collect();
    assert_eq!(inputs.len(), tests.len(), "an inputPath is listed twice");
    let files: BTreeSet<String> = std::fs::read_dir(dir.join("testdata"))
        .expect("testdata/")
        .map(|e| format!("testdata/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert_eq!(inputs, files, "health_test.yaml and testdata/ differ");
    // Every branch: each state and each outcome.
    let mut states = BTreeSet::new();
    for input in &inputs {
        let obj = yaml(&format!("{HEALTH_DIR}/{input}"));
        states.insert(obj["status"]["state"].as_str().unwrap_or("-").to_string());
    }
    for s in ["Open", "Acknowledged", "Expired", "Superseded", "-"] {
        assert!(states.contains(s), "no case with state {s}: {states:?}");
    }
    let outcomes: BTreeSet<&str> = tests
        .iter()
        .map(|t| t["healthStatus"]["status"].as_str().expect("status"))
        .collect();
    for s in ["Progressing", "Degraded", "Healthy", "Unknown"] {
        assert!(outcomes.contains(s), "no case expecting {s}");
    }
    assert!(!outcomes.contains("Suspended"), "Acknowledged is Healthy");

    // As Argo CD runs its built-in checks (every library open), and as an argocd-cm override
    // without useOpenLibs runs (base, table and package only).
    for flags in [&[][..], &["-open-libs=false"][..]] {
        let out = run(Command::new(tool("argocd-lua-health"))
            .args(flags)
            .arg(ARGOCD));
        let report = text(&out);
        assert!(
            out.status.success(),
            "argocd-lua-health {flags:?} {ARGOCD}:\n{report}"
        );
        let summary = format!("{} passed, 0 failed", tests.len());
        assert!(report.contains(&summary), "expected {summary:?}:\n{report}");
    }
}

#[test]
fn the_argocd_readme_snippet_is_health_lua() {
    let readme = read(&format!("{ARGOCD}/README.md"));
    let lua = read(&format!("{HEALTH_DIR}/health.lua"));
    let mut lines = readme
        .lines()
        .skip_while(|l| !l.starts_with("<!-- argocd-cm:"));
    assert!(
        lines.next().is_some(),
        "argocd/README.md has no <!-- argocd-cm: ... --> block"
    );
    assert_eq!(lines.next(), Some("```yaml"), "the block is a yaml fence");
    let snippet: String = lines
        .take_while(|l| *l != "```")
        .map(|l| format!("{l}\n"))
        .collect();
    let cm: Value = serde_saphyr::from_str(&snippet)
        .unwrap_or_else(|e| panic!("the argocd-cm snippet is not YAML: {e}\n{snippet}"));
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["name"], "argocd-cm");
    let script = cm["data"][ARGOCD_CM_KEY]
        .as_str()
        .unwrap_or_else(|| panic!("no data.{ARGOCD_CM_KEY} in the snippet"));
    assert!(
        script == lua,
        "the script in argocd/README.md differs from health.lua: run scripts/sync-observability.sh"
    );
}

// ---------------------------------------------------------------------------------------------
// (b) promtool

#[test]
fn the_alert_rules_pass_promtool_check_and_their_unit_tests() {
    let promtool = tool("promtool");
    let out = run(Command::new(&promtool).args(["check", "rules", ALERTS]));
    assert!(
        out.status.success(),
        "promtool check rules {ALERTS}:\n{}",
        text(&out)
    );
    let out = run(Command::new(&promtool).args(["test", "rules", ALERTS_TEST]));
    assert!(
        out.status.success(),
        "promtool test rules {ALERTS_TEST}:\n{}",
        text(&out)
    );

    // Every alert is tested firing and not firing.
    let tests = yaml(ALERTS_TEST);
    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for t in tests["tests"].as_array().expect("tests") {
        for a in t["alert_rule_test"].as_array().into_iter().flatten() {
            let name = a["alertname"].as_str().expect("alertname").to_string();
            if a["exp_alerts"].as_array().is_some_and(|v| !v.is_empty()) {
                firing.insert(name);
            } else {
                silent.insert(name);
            }
        }
    }
    let alerts: BTreeSet<String> = alert_rules(&yaml(ALERTS))
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    for a in &alerts {
        assert!(firing.contains(a), "{a} is never tested firing");
        assert!(silent.contains(a), "{a} is never tested not firing");
    }
    assert_eq!(
        firing.union(&silent).cloned().collect::<BTreeSet<_>>(),
        alerts,
        "the tests name an alert that does not exist"
    );
}

// ---------------------------------------------------------------------------------------------
// (c) The chart's rules are prometheus/alerts.yaml; the dashboard renders

#[test]
fn the_charts_alert_rules_are_prometheus_alerts_yaml() {
    assert!(
        read(CHART_ALERTS) == read(ALERTS),
        "{ALERTS} differs from {CHART_ALERTS}: run scripts/sync-observability.sh"
    );
    let file = yaml(ALERTS);

    // Default values: the PrometheusRule's spec is the file.
    let rule = render(
        "templates/prometheusrule.yaml",
        &["--set", "metrics.prometheusRule.enabled=true"],
    );
    assert_eq!(rule["kind"], "PrometheusRule");
    assert!(
        rule["spec"] == file,
        "with default values the PrometheusRule's spec must be {ALERTS}:\n{}",
        serde_json::to_string_pretty(&rule["spec"]).unwrap()
    );

    // ci/full-values.yaml: another runbook base (with a trailing slash) and threshold; nothing
    // else changes.
    let full = render("templates/prometheusrule.yaml", &["-f", FULL_VALUES]);
    let values = yaml(FULL_VALUES);
    let base = values["metrics"]["prometheusRule"]["runbookBaseURL"]
        .as_str()
        .expect("runbookBaseURL in full-values")
        .trim_end_matches('/');
    let threshold = values["metrics"]["prometheusRule"]["capacityThresholdBytes"]
        .as_u64()
        .expect("capacityThresholdBytes in full-values");
    assert_ne!(threshold, default_capacity_threshold());
    let cost_threshold = values["metrics"]["prometheusRule"]["monthlyCostThresholdMinorUnits"]
        .as_u64()
        .expect("monthlyCostThresholdMinorUnits in full-values");
    assert_ne!(cost_threshold, default_cost_threshold());
    // Two rules share an alert name (VolumeLeftoversWritesFailing): a rule is its name and labels.
    let key = |alert: &str, rule: &Value| -> String {
        let labels: BTreeMap<&String, &Value> =
            rule["labels"].as_object().expect("labels").iter().collect();
        format!("{alert} {labels:?}")
    };
    let original: BTreeMap<String, Value> = alert_rules(&file)
        .into_iter()
        .map(|(a, r)| (key(&a, &r), r))
        .collect();
    let rendered = alert_rules(&full["spec"]);
    assert_eq!(rendered.len(), original.len());
    for (alert, r) in rendered {
        let mut expected = original[&key(&alert, &r)].clone();
        expected["annotations"]["runbook_url"] = Value::from(format!("{base}/{alert}.md"));
        if alert == "VolumeLeftoversCapacityHeld" {
            let expr = expected["expr"].as_str().unwrap().replace(
                &format!("> {}", default_capacity_threshold()),
                &format!("> {threshold}"),
            );
            assert!(expr.contains(&format!("> {threshold}")), "{expr}");
            expected["expr"] = Value::from(expr);
        }
        if alert == "VolumeLeftoversMonthlyCost" {
            let expr = expected["expr"].as_str().unwrap().replace(
                &format!("> {}", default_cost_threshold()),
                &format!("> {cost_threshold}"),
            );
            assert!(expr.contains(&format!("> {cost_threshold}")), "{expr}");
            expected["expr"] = Value::from(expr);
        }
        assert_eq!(r, expected, "{alert} rendered with {FULL_VALUES}");
    }

    // An empty base leaves runbook_url out.
    let none = render(
        "templates/prometheusrule.yaml",
        &[
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--set",
            "metrics.prometheusRule.runbookBaseURL=",
        ],
    );
    for (alert, r) in alert_rules(&none["spec"]) {
        assert!(
            r["annotations"].get("runbook_url").is_none(),
            "{alert} has a runbook_url"
        );
    }
}

#[test]
fn dashboards_enabled_renders_the_dashboard() {
    let cm = render(
        "templates/dashboard.yaml",
        &["--set", "dashboards.enabled=true"],
    );
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let json = cm["data"]["volume-leftovers.json"]
        .as_str()
        .expect("data.volume-leftovers.json");
    let rendered: Value = serde_json::from_str(json).expect("the rendered dashboard is JSON");
    let file: Value = serde_json::from_str(&read(CHART_DASHBOARD)).expect("dashboard.json");
    assert_eq!(rendered, file);
}

// ---------------------------------------------------------------------------------------------
// (d) Metric names and PromQL

/// Every `expr` of the dashboard: (where, expr).
fn dashboard_exprs(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let here = match (m.get("title"), m.get("refId")) {
                        (Some(Value::String(t)), _) => format!("{path}/{t}"),
                        (_, Some(Value::String(r))) => format!("{path}/{r}"),
                        _ => path.to_string(),
                    };
                    if k == "expr" {
                        out.push((here, x.as_str().expect("expr is a string").to_string()));
                    } else {
                        walk(x, &here, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, path, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(dashboard, "dashboard", &mut out);
    out
}

#[test]
fn the_dashboard_parses_and_reads_prometheus_through_the_datasource_variable() {
    let d: Value = serde_json::from_str(&read(CHART_DASHBOARD)).expect("dashboard.json is JSON");
    let vars = d["templating"]["list"].as_array().expect("templating.list");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a datasource variable of type prometheus"
    );
    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut titles = Vec::new();
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().expect("id")),
            "panel ids repeat"
        );
        titles.push(p["title"].as_str().expect("title").to_string());
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        let targets = p["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no query", p["title"]);
        for t in targets {
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{}", p["title"]);
        }
    }
    // What the dashboard is for.
    for want in [
        "Findings by reason",
        "Open capacity by storage class",
        "Oldest open finding by reason",
        "Store state per replica",
        "Writes by result",
        "Leader and readiness per replica",
        "Pending, undecided, skipped and ignored volumes",
    ] {
        assert!(titles.iter().any(|t| t == want), "no panel {want:?}");
    }
    assert!(dashboard_exprs(&d).len() >= titles.len());
}

#[test]
fn the_dashboard_and_the_alerts_use_only_the_exported_metrics() {
    let mut exprs = dashboard_exprs(&serde_json::from_str(&read(CHART_DASHBOARD)).unwrap());
    for (alert, rule) in alert_rules(&yaml(ALERTS)) {
        exprs.push((
            format!("alert {alert}"),
            rule["expr"].as_str().expect("expr").to_string(),
        ));
    }
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    for (place, expr) in &exprs {
        match check_expr(expr) {
            Ok(names) => used.extend(names),
            Err(p) => problems.extend(p.into_iter().map(|p| format!("{place}: {p}\n  {expr}"))),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Together they query every exported metric but the count of leader changes.
    let unused: Vec<&str> = EXPORTED
        .iter()
        .map(|m| m.name)
        .filter(|n| !used.contains(*n))
        .collect();
    assert!(
        unused
            .iter()
            .all(|n| *n == "volume_leftovers_leader_transitions_total"),
        "exported but never queried: {unused:?}"
    );
}

#[test]
fn the_dashboard_queries_are_valid_promql() {
    // promtool has no offline query parser of its own: each query becomes a recording rule, with
    // Grafana's interval variables replaced, and `promtool check rules` parses them.
    let d: Value = serde_json::from_str(&read(CHART_DASHBOARD)).unwrap();
    let mut file = String::from("groups:\n- name: dashboard\n  rules:\n");
    for (i, (_, expr)) in dashboard_exprs(&d).iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$__interval", "1m")
            .replace("$__range", "1d");
        file.push_str(&format!(
            "  - record: dashboard:query_{i}\n    expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        ));
    }
    let path = scratch().join("dashboard-rules.yaml");
    std::fs::write(&path, &file).unwrap();
    let out = run(Command::new(tool("promtool"))
        .args(["check", "rules"])
        .arg(&path));
    assert!(
        out.status.success(),
        "the dashboard's queries as rules:\n{file}\n{}",
        text(&out)
    );
}

#[test]
fn the_metric_check_catches_what_it_is_for() {
    let ok = [
        "max by (namespace, reason) (volume_leftovers_oldest_open_finding_seconds) > 86400",
        "sum by (storage_class) (label_replace(max by (namespace, reason, storage_class, state) (volume_leftovers_findings_capacity_bytes{state=~\"Open|Expired\"}), \"storage_class\", \"(none)\", \"storage_class\", \"\"))",
        "max by (namespace, resource) ((volume_leftovers_store_state != 1) and on (namespace, job, instance) (volume_leftovers_leader == 1))",
        "histogram_quantile(0.95, sum by (le, op) (rate(volume_leftovers_write_duration_seconds_bucket[$__rate_interval])))",
        "sum(rate(volume_leftovers_writes_total{result!~\"ok|outdated\"}[5m])) by (namespace) > 0",
        "max(volume_leftovers_ready) # a comment naming up",
    ];
    for e in ok {
        assert!(check_expr(e).is_ok(), "{e}: {:?}", check_expr(e));
    }
    let bad = [
        ("max(up)", "not exported"),
        ("max(volume_leftovers_finding)", "not exported"),
        ("sum(volume_leftovers_findings)", "with max"),
        (
            "sum by (reason) (volume_leftovers_findings_capacity_bytes)",
            "with max",
        ),
        ("volume_leftovers_ready == 0", "with max"),
        (
            "max by (reason) (volume_leftovers_findings{storageclass=\"x\"})",
            "no label storageclass",
        ),
        ("max by (namespce) (volume_leftovers_ready)", "namespce"),
        ("sum(volume_leftovers_writes_total)", "rate or increase"),
        (
            "sum(rate(volume_leftovers_write_duration_seconds[5m]))",
            "_bucket",
        ),
        (
            "max({__name__=~\"volume_leftovers_.*\"})",
            "cannot be checked",
        ),
    ];
    for (e, why) in bad {
        match check_expr(e) {
            Ok(_) => panic!("{e} passed the check"),
            Err(p) => assert!(p.iter().any(|p| p.contains(why)), "{e}: {p:?}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// Label matchers: the label names.
    Matchers(Vec<String>),
    Open,
    Close,
    Other,
}

fn lex(expr: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let skip_string = |i: &mut usize| -> Result<(), String> {
        let quote = chars[*i];
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' && quote != '`' {
                *i += 1;
            }
            *i += 1;
        }
        if *i >= chars.len() {
            return Err("unterminated string".into());
        }
        *i += 1;
        Ok(())
    };
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    while i < chars.len() {
        let c = chars[i];
        match c {
            _ if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => {
                skip_string(&mut i)?;
                out.push(Tok::Other);
            }
            '(' => {
                out.push(Tok::Open);
                i += 1;
            }
            ')' => {
                out.push(Tok::Close);
                i += 1;
            }
            '[' => {
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                i += 1;
                out.push(Tok::Other);
            }
            '{' => {
                i += 1;
                let mut labels = Vec::new();
                loop {
                    match chars.get(i) {
                        None => return Err("unterminated {".into()),
                        Some('}') => {
                            i += 1;
                            break;
                        }
                        Some('"' | '\'' | '`') => skip_string(&mut i)?,
                        Some(&c) if ident_char(c) => {
                            let start = i;
                            while i < chars.len() && ident_char(chars[i]) {
                                i += 1;
                            }
                            labels.push(chars[start..i].iter().collect());
                        }
                        Some(_) => i += 1,
                    }
                }
                out.push(Tok::Matchers(labels));
            }
            _ if c.is_ascii_digit()
                || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) =>
            {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                    i += 1;
                }
                out.push(Tok::Other);
            }
            '$' => {
                i += 1;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                out.push(Tok::Other);
            }
            _ if ident_char(c) => {
                let start = i;
                while i < chars.len() && ident_char(chars[i]) {
                    i += 1;
                }
                out.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            _ => {
                i += 1;
                out.push(Tok::Other);
            }
        }
    }
    Ok(out)
}

const AGGREGATORS: &[&str] = &[
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
];
const CLAUSES: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan", "start", "end",
];

/// Checks one PromQL expression against `EXPORTED`; returns the metrics it uses, or what is
/// wrong: a metric that is not exported (or a histogram without `_bucket`/`_sum`/`_count`), a
/// label the metric does not have, a per-replica gauge not read with `max` as the innermost
/// aggregation (a sum would count every replica's copy), a counter or histogram series not read
/// with `rate`/`increase`/`irate`, a grouping by an unknown label.
fn check_expr(expr: &str) -> Result<BTreeSet<String>, Vec<String>> {
    #[derive(Debug)]
    enum Frame {
        Call(String),
        Group,
        Clause,
    }
    let toks = lex(expr).map_err(|e| vec![e])?;
    let all_labels: BTreeSet<&str> = EXPORTED
        .iter()
        .flat_map(|m| m.labels.iter().copied())
        .chain(TARGET_LABELS.iter().copied())
        .chain(["le"])
        .collect();
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut pending_call: Option<String> = None;
    let mut pending_agg: Option<String> = None;
    let mut pending_clause = false;
    for (i, tok) in toks.iter().enumerate() {
        let next = toks.get(i + 1);
        match tok {
            Tok::Open => {
                let frame = if std::mem::take(&mut pending_clause) {
                    Frame::Clause
                } else if let Some(f) = pending_call.take().or_else(|| pending_agg.take()) {
                    Frame::Call(f)
                } else {
                    Frame::Group
                };
                stack.push(frame);
            }
            Tok::Close => {
                if stack.pop().is_none() {
                    problems.push("unbalanced )".to_string());
                }
            }
            Tok::Matchers(_) => {
                // A selector without a metric name: {__name__=~"..."} and the like.
                if !matches!(i.checked_sub(1).map(|j| &toks[j]), Some(Tok::Ident(_))) {
                    problems.push("a selector without a metric name cannot be checked".into());
                }
            }
            Tok::Other => {}
            Tok::Ident(name) => {
                let name = name.as_str();
                if CLAUSES.contains(&name) {
                    pending_clause = next == Some(&Tok::Open);
                } else if matches!(stack.last(), Some(Frame::Clause)) {
                    if !all_labels.contains(name) {
                        problems.push(format!("grouping by {name}, a label no metric has"));
                    }
                } else if next == Some(&Tok::Open) {
                    pending_call = Some(name.to_string());
                } else if AGGREGATORS.contains(&name) {
                    pending_agg = Some(name.to_string());
                } else if !KEYWORDS.contains(&name) {
                    let (metric, series_labels) = match exported(name) {
                        Some(found) => found,
                        None => {
                            problems.push(format!(
                                "{name} is not exported by the operator (or a histogram without _bucket/_sum/_count)"
                            ));
                            continue;
                        }
                    };
                    used.insert(metric.name.to_string());
                    if let Some(Tok::Matchers(labels)) = next {
                        for l in labels {
                            if !series_labels.contains(&l.as_str())
                                && !TARGET_LABELS.contains(&l.as_str())
                            {
                                problems.push(format!("{name} has no label {l}"));
                            }
                        }
                    }
                    let call = stack.iter().rev().find_map(|f| match f {
                        Frame::Call(c) => Some(c.as_str()),
                        _ => None,
                    });
                    match metric.kind {
                        Type::Gauge if call != Some("max") => problems.push(format!(
                            "{name} is a gauge every replica exports: read it with max (by ...), \
                             never a sum over replicas (innermost call: {call:?})"
                        )),
                        Type::Counter | Type::Histogram
                            if !matches!(call, Some("rate" | "increase" | "irate")) =>
                        {
                            problems.push(format!(
                                "{name} is a counter: read it with rate or increase (innermost call: {call:?})"
                            ))
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    if !stack.is_empty() {
        problems.push("unbalanced (".to_string());
    }
    if problems.is_empty() {
        Ok(used)
    } else {
        Err(problems)
    }
}

/// The exported metric a series name belongs to, and the labels its series carry.
fn exported(series: &str) -> Option<(&'static Metric, Vec<&'static str>)> {
    for m in EXPORTED {
        let labels = m.labels.to_vec();
        match m.kind {
            Type::Histogram => {
                if series == format!("{}_bucket", m.name) {
                    let mut l = labels;
                    l.push("le");
                    return Some((m, l));
                }
                if series == format!("{}_sum", m.name) || series == format!("{}_count", m.name) {
                    return Some((m, labels));
                }
            }
            _ if series == m.name => return Some((m, labels)),
            _ => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// (e) Alerts: labels, annotations, runbooks

#[test]
fn every_alert_has_a_severity_a_summary_a_description_and_a_runbook() {
    let base = default_runbook_base();
    let rules = alert_rules(&yaml(ALERTS));
    let required = [
        "VolumeLeftoversOpenForADay",
        "VolumeLeftoversCapacityHeld",
        "VolumeLeftoversMonthlyCost",
        "VolumeLeftoversOperatorNotReady",
        "VolumeLeftoversStoreDegraded",
        "VolumeLeftoversWritesFailing",
        "VolumeLeftoversNoLeader",
        "VolumeLeftoversCensusFailing",
        "VolumeLeftoversCloudCensusFailing",
    ];
    let names: BTreeSet<&str> = rules.iter().map(|(a, _)| a.as_str()).collect();
    assert_eq!(names, required.into_iter().collect::<BTreeSet<_>>());
    for (alert, rule) in &rules {
        assert!(
            ["critical", "warning", "info"]
                .contains(&rule["labels"]["severity"].as_str().unwrap_or("")),
            "{alert}: severity"
        );
        for a in ["summary", "description"] {
            assert!(
                rule["annotations"][a]
                    .as_str()
                    .is_some_and(|s| !s.trim().is_empty()),
                "{alert}: no {a}"
            );
        }
        assert_eq!(
            rule["annotations"]["runbook_url"].as_str(),
            Some(format!("{base}/{alert}.md").as_str()),
            "{alert}: runbook_url must be values.yaml's runbookBaseURL + /{alert}.md"
        );
        let page = read(&format!("{RUNBOOKS}/{alert}.md"));
        assert!(
            page.starts_with(&format!("# {alert}\n")),
            "{alert}.md title"
        );
        for section in [
            "## What it means",
            "## How to look",
            "## What to do",
            "## What not to do",
        ] {
            assert!(page.contains(section), "{alert}.md has no {section:?}");
        }
        assert!(page.contains("kubectl"), "{alert}.md: how to look");
    }
    // The threshold in the file is the chart's default.
    let capacity = &rules
        .iter()
        .find(|(a, _)| a == "VolumeLeftoversCapacityHeld")
        .unwrap()
        .1;
    assert!(
        capacity["expr"]
            .as_str()
            .unwrap()
            .contains(&format!("> {}", default_capacity_threshold())),
        "VolumeLeftoversCapacityHeld's threshold is values.yaml's capacityThresholdBytes"
    );
    let cost = &rules
        .iter()
        .find(|(a, _)| a == "VolumeLeftoversMonthlyCost")
        .unwrap()
        .1;
    assert!(
        cost["expr"]
            .as_str()
            .unwrap()
            .contains(&format!("> {}", default_cost_threshold())),
        "VolumeLeftoversMonthlyCost's threshold is values.yaml's monthlyCostThresholdMinorUnits"
    );
    // No runbook without its alert.
    for entry in std::fs::read_dir(repo().join(RUNBOOKS)).expect("docs/runbooks") {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if file == "README.md" {
            continue;
        }
        let alert = file.strip_suffix(".md").unwrap_or(&file);
        assert!(names.contains(alert), "docs/runbooks/{file} has no alert");
    }
}

/// Every value of `volume_leftovers_store_state` has its row in the StoreDegraded runbook's table
/// (`| 4 | NotServed |`) and is named in the alert's description (`4 NotServed`): a state that is
/// added, or one the alert leaves out on purpose, is explained where the person paged reads.
#[test]
fn the_store_degraded_runbook_and_alert_name_every_store_state() {
    use volume_leftovers::telemetry::StoreState;

    let alert = "VolumeLeftoversStoreDegraded";
    let page = read(&format!("{RUNBOOKS}/{alert}.md"));
    let rules = alert_rules(&yaml(ALERTS));
    let (_, rule) = rules
        .iter()
        .find(|(a, _)| a == alert)
        .unwrap_or_else(|| panic!("no {alert} in {ALERTS}"));
    let description = rule["annotations"]["description"]
        .as_str()
        .expect("a description");
    let mut missing = Vec::new();
    for (i, state) in StoreState::ALL.into_iter().enumerate() {
        let value = state as u8;
        assert_eq!(
            usize::from(value),
            i,
            "StoreState::ALL is in the order of the values"
        );
        let row = format!("| {value} | {} |", state.as_str());
        if !page.lines().any(|l| l.starts_with(&row)) {
            missing.push(format!("{RUNBOOKS}/{alert}.md: no table row {row:?}"));
        }
        let named = format!("{value} {}", state.as_str());
        if !description.contains(&named) {
            missing.push(format!("{alert}'s description does not name {named:?}"));
        }
    }
    assert!(missing.is_empty(), "{missing:#?}");
}

/// Every reason the operator writes has its row in the OpenForADay runbook's table (`| VolumeDeleted
/// |`): the alert carries the reason, and the page says what it usually means and who decides.
#[test]
fn the_open_for_a_day_runbook_names_every_reason() {
    use volume_leftovers::model::crd::Reason;

    let page = read(&format!("{RUNBOOKS}/VolumeLeftoversOpenForADay.md"));
    let missing: Vec<&str> = Reason::ALL
        .into_iter()
        .map(Reason::as_str)
        .filter(|r| !page.lines().any(|l| l.starts_with(&format!("| {r} |"))))
        .collect();
    assert!(
        missing.is_empty(),
        "{RUNBOOKS}/VolumeLeftoversOpenForADay.md has no table row for {missing:?}"
    );
}

#[test]
fn the_exported_list_is_the_operators_real_exposition() {
    use volume_leftovers::decide::name::Published;
    use volume_leftovers::model::crd::{Reason, State};
    use volume_leftovers::telemetry::{Kind, Metrics, StoreState};
    use volume_leftovers::watch::category::Category;

    // Every recording function once, so that every family has a series.
    let m = Metrics::default();
    m.init_reasons();
    m.watch_error(Kind::persistentvolumes, Category::Unavailable);
    m.relisted(Kind::persistentvolumes);
    m.store_state(Kind::persistentvolumes, StoreState::Synced);
    m.write("create", "ok", 2);
    m.writes_blocked(false);
    m.write_duration("create", std::time::Duration::from_millis(20));
    m.decision_duration(std::time::Duration::from_micros(30));
    m.finding(
        &Published {
            reason: Reason::ClaimDeleted,
            storage_class: "standard".into(),
            state: State::Open,
            capacity_bytes: 1 << 30,
            first_seen: 0,
            monthly_cost: Some(("USD".into(), 1700)),
        },
        1,
    );
    m.oldest_open(Reason::ClaimDeleted, 60);
    m.pending(Reason::BoundClaimMissing, 1);
    m.undecided(0);
    m.skipped(0);
    m.ignored(0);
    m.leader(true);
    m.ready(true);
    m.census_done("fsid/k8s-rbd", 3, 0, 0.1, 2);
    m.census_done(
        &volume_leftovers::census::ebs::vocabulary::region(None, "eu-west-1"),
        3,
        0,
        0.1,
        1,
    );
    let text = m.encode();
    let mut real: BTreeMap<String, String> = BTreeMap::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# TYPE ") {
            let mut it = rest.split_whitespace();
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            let name = if kind == "counter" {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            real.insert(name, kind.to_string());
        }
    }
    for metric in EXPORTED {
        let want = match metric.kind {
            Type::Gauge => "gauge",
            Type::Counter => "counter",
            Type::Histogram => "histogram",
        };
        assert_eq!(
            real.get(metric.name).map(String::as_str),
            Some(want),
            "{} is not exported as a {want}:\n{text}",
            metric.name
        );
        // And with the labels the list says: each on some sample of the family (the census's
        // series are labelled by pool or by backend and scope).
        let base = metric.name.trim_end_matches("_total");
        let samples: Vec<&str> = text
            .lines()
            .filter(|l| {
                !l.starts_with('#')
                    && (l.starts_with(&format!("{base}{{"))
                        || l.starts_with(&format!("{base}_"))
                        || l.starts_with(&format!("{base} ")))
            })
            .collect();
        assert!(!samples.is_empty(), "no sample of {}", metric.name);
        for label in metric.labels {
            assert!(
                samples.iter().any(|s| s.contains(&format!("{label}=\""))),
                "{} lacks label {label}: {samples:?}",
                metric.name
            );
        }
    }
}
