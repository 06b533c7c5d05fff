//! The documentation's shape, checked without a server: README.md stays a short front page that
//! links every page of `docs/`, and every figures block (the output `scripts/figures.sh` writes
//! between `<!-- figures:NAME -->` and `<!-- /figures:NAME -->`) is closed and lives in exactly
//! one file, which is where `scripts/figures.sh NAME` looks for it. Every reason the CRD admits
//! has its row in a table of docs/reasons.md.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, relative to the repository.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out = vec![repo().join("README.md")];
    walk(&repo().join("docs"), &mut out);
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_readme_is_short_and_links_every_page_of_docs() {
    let readme = read(&repo().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines; move the depth to docs/"
    );
    // A user's first: what it finds, installing it, `kubectl leftovers`; then the two commands
    // of the people who work on it.
    let order: Vec<Option<usize>> = [
        "## What it finds",
        "## Install on your cluster",
        "## kubectl leftovers",
        "## Working on the project",
    ]
    .iter()
    .map(|h| readme.find(h))
    .collect();
    assert!(
        order.iter().all(Option::is_some) && order.windows(2).all(|w| w[0] < w[1]),
        "README.md's sections are not in a user's order: {order:?}"
    );
    assert!(
        readme
            .split("```")
            .skip(1)
            .step_by(2)
            .any(|b| b.contains("make demo") && b.contains("make test")),
        "no code block of README.md names the two commands"
    );
    assert!(
        !readme.contains("<!-- figures:"),
        "benchmark output belongs in docs/benchmarks.md"
    );
    for page in pages() {
        let rel = page
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        // The runbooks are linked through their index page.
        if rel == "README.md"
            || (rel.starts_with("docs/runbooks/") && rel != "docs/runbooks/README.md")
        {
            continue;
        }
        assert!(
            readme.contains(&format!("]({rel})")) || readme.contains(&format!("]({rel}#")),
            "README.md does not link {rel}"
        );
    }
}

#[test]
fn every_figures_block_is_closed_and_in_exactly_one_file() {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for page in pages() {
        let text = read(&page);
        let rel = page
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for (i, _) in text.match_indices("<!-- figures:") {
            let name = text[i + "<!-- figures:".len()..]
                .split(" -->")
                .next()
                .unwrap()
                .to_string();
            let end = format!("<!-- /figures:{name} -->");
            let after = &text[i..];
            let close = after
                .find(&end)
                .unwrap_or_else(|| panic!("{rel}: figures block {name} is not closed"));
            assert!(
                !after[1..close].contains("<!-- figures:"),
                "{rel}: figures block {name} holds another block"
            );
            found.entry(name).or_default().push(rel.clone());
        }
    }
    assert!(
        found.contains_key("handover"),
        "no handover block: {found:?}"
    );
    for (name, files) in &found {
        assert_eq!(
            files.len(),
            1,
            "figures block {name} is in {files:?}; scripts/figures.sh needs exactly one"
        );
    }
}

/// Every path under `src/` that a page names exists: the layout the docs describe is the real one.
#[test]
fn every_source_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut named = 0;
    for page in pages() {
        let text = read(&page);
        for (i, _) in text.match_indices("src/") {
            // Only paths of this repository: `src/...` at the start of a word (not
            // `kube-runtime/src/...`).
            if i > 0 && !text[..i].ends_with([' ', '`', '(', '|', '\n']) {
                continue;
            }
            let path: String = text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '-'))
                .collect();
            let path = path.trim_end_matches('.');
            named += 1;
            if !repo().join(path).exists() {
                missing.push(format!("{}: {path}", page.display()));
            }
        }
    }
    assert!(named > 5, "the reader found only {named} paths");
    assert!(
        missing.is_empty(),
        "paths the docs name that do not exist: {missing:#?}"
    );
}

/// The first cell of every table row of a page, without its backticks.
fn first_cells(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix('|'))
        .filter_map(|l| l.split('|').next())
        .map(|c| c.trim().trim_matches('`').to_string())
        .collect()
}

/// Every value the CRD's `status.reason` admits (crds/volumeleftovers.yaml: the reasons the
/// operator writes and the earlier names it still reads) is the first cell of a row of a table in
/// docs/reasons.md, which says when it is published and what ends it.
#[test]
fn every_reason_of_the_crd_is_in_a_table_of_reasons_md() {
    use volume_leftovers::model::crd::Reason;

    let crd: serde_json::Value =
        serde_saphyr::from_str(&read(&repo().join("crds/volumeleftovers.yaml")))
            .expect("crds/volumeleftovers.yaml is YAML");
    let mut admitted = BTreeSet::new();
    for version in crd["spec"]["versions"].as_array().expect("spec.versions") {
        let reason =
            &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["reason"];
        for r in reason["enum"].as_array().expect("an enum of status.reason") {
            admitted.insert(r.as_str().expect("a string").to_string());
        }
    }
    for r in Reason::ALL {
        assert!(
            admitted.contains(r.as_str()),
            "the CRD does not admit {}: regenerate crds/",
            r.as_str()
        );
    }
    let tables = first_cells(&read(&repo().join("docs/reasons.md")));
    let missing: Vec<&String> = admitted.iter().filter(|r| !tables.contains(*r)).collect();
    assert!(
        missing.is_empty(),
        "docs/reasons.md has no table row for {missing:?}"
    );
}

/// Every long flag of `run` and `scan`, as clap knows them, is in the command synopsis of
/// docs/configuration.md under its own command: the reference is the binary's.
#[test]
fn every_flag_of_run_and_scan_is_in_the_configuration_reference() {
    use clap::CommandFactory;
    let page = read(&repo().join("docs/configuration.md"));
    let cli = volume_leftovers::run::cli::Cli::command();
    let mut missing = Vec::new();
    for command in ["run", "scan"] {
        // The synopsis of one command: from `volume-leftovers <command>` to the next command's.
        let start = page
            .find(&format!("volume-leftovers {command} "))
            .unwrap_or_else(|| panic!("no synopsis of `{command}` in docs/configuration.md"));
        let rest = &page[start + 17..];
        let end = rest.find("volume-leftovers ").unwrap_or(rest.len());
        let synopsis = &rest[..end];
        let sub = cli
            .find_subcommand(command)
            .unwrap_or_else(|| panic!("no subcommand {command}"));
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if !synopsis.contains(&format!("--{long}")) {
                missing.push(format!("{command} --{long}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags missing from docs/configuration.md's synopsis: {missing:?}"
    );
}

/// `scan`'s exit codes say the same in `--help` and in docs/configuration.md.
#[test]
fn scans_exit_codes_are_defined_once_in_help_and_docs() {
    use clap::CommandFactory;
    let cli = volume_leftovers::run::cli::Cli::command();
    let help = cli
        .find_subcommand("scan")
        .and_then(|s| s.get_about())
        .map(|a| a.to_string())
        .expect("scan's about");
    let page = read(&repo().join("docs/configuration.md"))
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for (code, meaning) in [
        ("0", "none found"),
        ("3", "leftovers found"),
        ("4", "the report is incomplete"),
    ] {
        assert!(
            help.contains(&format!("{code}: ")) && help.contains(meaning),
            "scan --help does not define exit {code} as {meaning:?}: {help}"
        );
    }
    assert!(
        page.contains("4 the report is incomplete"),
        "docs/configuration.md defines exit 4 otherwise"
    );
}

/// Every resource the ClusterRole grants anything on is named in operations.md's summary of it.
#[test]
fn the_clusterrole_summary_names_every_resource_it_grants() {
    let role: serde_json::Value =
        serde_saphyr::from_str(&read(&repo().join("deploy/clusterrole.yaml")))
            .expect("deploy/clusterrole.yaml is YAML");
    let page = read(&repo().join("docs/operations.md"));
    let summary = &page[page.find("ClusterRole (").expect("the ClusterRole summary")..];
    let summary = &summary[..summary.find(')').map_or(summary.len(), |i| i + 600)];
    let mut missing = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        for r in rule["resources"].as_array().expect("resources") {
            let r = r.as_str().expect("a resource");
            let plain = r.split('/').next().unwrap_or(r);
            if !summary.contains(plain) {
                missing.push(r.to_string());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/operations.md's ClusterRole summary omits {missing:?}"
    );
}

/// Every link from one page of the docs to a heading of another (`page.md#anchor`) finds that
/// heading (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
#[test]
fn every_anchor_a_page_links_to_exists() {
    fn anchor(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = read(&page);
        for (i, _) in text.match_indices(".md#") {
            let start = text[..i].rfind('(').map_or(i, |s| s + 1);
            let target = &text[start..i + 3];
            let frag: String = text[i + 4..]
                .chars()
                .take_while(|c| *c != ')' && !c.is_whitespace())
                .collect();
            let file = page.parent().unwrap().join(target);
            let Ok(linked) = std::fs::read_to_string(&file) else {
                broken.push(format!("{}: {target} does not exist", page.display()));
                continue;
            };
            checked += 1;
            let found = linked
                .lines()
                .filter_map(|l| {
                    l.trim_start_matches('#')
                        .strip_prefix(' ')
                        .filter(|_| l.starts_with('#'))
                })
                .any(|h| anchor(h) == frag);
            if !found {
                broken.push(format!("{}: {target}#{frag}", page.display()));
            }
        }
    }
    assert!(checked > 3, "the reader found only {checked} links");
    assert!(
        broken.is_empty(),
        "links to headings that do not exist: {broken:#?}"
    );
}

/// Every values file docs/quickstart.md shows is shown as it is in docs/quickstart/ (where
/// tests/e2e/chart.rs renders each with the chart and has the API server accept it), and every
/// such file is shown.
#[test]
fn the_quickstarts_values_files_are_shown_as_they_are() {
    let page = read(&repo().join("docs/quickstart.md"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("docs/quickstart"))
        .expect("docs/quickstart/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let shown = format!(
            "<!-- values:{name} -->\n```yaml\n{}```\n<!-- /values:{name} -->",
            read(&f)
        );
        assert!(
            page.contains(&shown),
            "docs/quickstart.md does not show docs/quickstart/{name} as it is"
        );
    }
}
