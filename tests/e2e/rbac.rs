//! Every verb the operator's identity is granted is one the code calls, and every call the code
//! makes is granted: the API calls in src/, found by reading the source, against the rules of
//! deploy/ and of the chart rendered by the real Helm. Needs no server.
//!
//! The reader knows the shapes the code uses and fails on anything else, so that a new call
//! cannot slip past it: a client is a variable or field named `api` or `*_api` of type `Api<T>`;
//! a request is a method call on it (`api.list(..)`); `T` maps to a resource in [`TYPES`]; the
//! reflectors are `watcher::watcher(..)` in src/watch/feed.rs, fed by `feed(x_api, ..)`; Events go
//! through kube-runtime's `Recorder`. Other ways to reach the API server fail the test until it
//! learns them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::chart::{render, rules_of, split};
use crate::support::repo;

/// The resource each client type in src/ is for: (file, or "*" for any; type; API group;
/// resource).
const TYPES: &[(&str, &str, &str, &str)] = &[
    ("*", "VolumeObject", "", "persistentvolumes"),
    ("*", "ClaimMeta", "", "persistentvolumeclaims"),
    ("*", "ClaimObject", "", "persistentvolumeclaims"),
    ("*", "PersistentVolumeClaim", "", "persistentvolumeclaims"),
    ("*", "StorageClass", "storage.k8s.io", "storageclasses"),
    ("*", "LeftoverObject", "leftovers.dev", "volumeleftovers"),
    ("*", "VolumeLeftover", "leftovers.dev", "volumeleftovers"),
    (
        "*",
        "crate::model::crd::VolumeLeftover",
        "leftovers.dev",
        "volumeleftovers",
    ),
    ("*", "Lease", "coordination.k8s.io", "leases"),
    (
        "*",
        "VolumeSnapshotContentObject",
        "snapshot.storage.k8s.io",
        "volumesnapshotcontents",
    ),
    (
        "*",
        "VolumeSnapshotObject",
        "snapshot.storage.k8s.io",
        "volumesnapshots",
    ),
    // The ClusterReport writer (its ApiResource is built from openreports.io's GVK there).
    (
        "src/publish/report.rs",
        "DynamicObject",
        "openreports.io",
        "clusterreports",
    ),
];

/// The verbs each request method of `kube::Api` is authorized as, and on which subresource.
/// A server-side apply (`Patch::Apply`) of the object itself creates it when it does not exist,
/// and the API server authorizes that create as `create`; on `/status` it never creates.
fn verbs_of(method: &str, args: &str) -> Option<(&'static str, Vec<&'static str>)> {
    let apply = args.contains("Patch::Apply");
    Some(match method {
        "create" => ("", vec!["create"]),
        "patch" if apply => ("", vec!["patch", "create"]),
        "patch" | "patch_metadata" => ("", vec!["patch"]),
        "patch_status" => ("/status", vec!["patch"]),
        "replace" => ("", vec!["update"]),
        "replace_status" => ("/status", vec!["update"]),
        "delete" => ("", vec!["delete"]),
        "delete_collection" => ("", vec!["deletecollection"]),
        "get" | "get_opt" | "get_metadata" | "get_metadata_opt" => ("", vec!["get"]),
        "get_status" => ("/status", vec!["get"]),
        "list" | "list_metadata" => ("", vec!["list"]),
        "watch" | "watch_metadata" => ("", vec!["watch"]),
        _ => return None,
    })
}

/// Constructs that reach the API server other than the ones this reader knows.
const UNKNOWN_WAYS: &[&str] = &[
    ".request(",
    ".request_text(",
    ".request_stream(",
    "Discovery",
    "Controller::new",
    "metadata_watcher(",
    "await_condition",
    "reflector::reflector(",
    "list_api_groups(",
    "list_core_api_versions(",
];

/// Discovery requests: `GET /apis/GROUP/VERSION` is a non-resource URL that the default
/// `system:discovery` ClusterRole grants every authenticated identity, so it needs no rule of
/// ours. Each is listed with the one file allowed to make it, so a new one is seen here.
const DISCOVERY: &[(&str, &str)] = &[("src/watch/served.rs", "list_api_group_resources(")];

/// One API call found in src/.
#[derive(Debug)]
struct Call {
    at: String,
    group: String,
    resource: String,
    verbs: Vec<&'static str>,
}

fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // Unit tests make no requests of their own.
                if p.file_name().is_some_and(|n| n != "tests") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo().join("src"), &mut out);
    out.sort();
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The identifier that ends right before byte `end` of `text`.
fn ident_before(text: &str, end: usize) -> &str {
    let start = text[..end]
        .char_indices()
        .rev()
        .find(|(_, c)| !is_ident(*c))
        .map_or(0, |(i, c)| i + c.len_utf8());
    &text[start..end]
}

/// The text between the parenthesis at `open` and its match.
fn args_at(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced parenthesis at byte {open}")
}

/// Every `Api<T>` or `Api::<T>` in `text`: (byte offset, T).
fn api_types(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for pat in ["Api<", "Api::<"] {
        for (i, _) in text.match_indices(pat) {
            if i > 0 && text[..i].ends_with(is_ident) {
                continue;
            }
            let from = i + pat.len();
            let len = text[from..].find('>').unwrap();
            out.push((i, text[from..from + len].trim().to_string()));
        }
    }
    out.sort();
    out
}

fn resource_of(file: &str, ty: &str) -> (String, String) {
    let found: Vec<_> = TYPES
        .iter()
        .filter(|(f, t, _, _)| (*f == "*" || *f == file) && *t == ty)
        .collect();
    match found.as_slice() {
        [(_, _, g, r)] => (g.to_string(), r.to_string()),
        _ => panic!(
            "{file}: Api<{ty}>: which resource is that? Add it to TYPES in {}",
            file!()
        ),
    }
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// Every API call in src/, with the resource and the verbs it is authorized as.
fn calls() -> Vec<Call> {
    let mut calls = Vec::new();
    let mut generic_watchers = 0;
    let mut feeds = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap();
        let file = path
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        for way in UNKNOWN_WAYS {
            assert!(
                !text.contains(way),
                "{file} reaches the API server through `{way}`: teach {} what it requests",
                file!()
            );
        }
        for (allowed, way) in DISCOVERY {
            assert!(
                !text.contains(way) || file == *allowed,
                "{file} makes the discovery request `{way}`, known only in {allowed}: teach {} what it requests",
                file!()
            );
        }
        let types = api_types(&text);
        // Every client is named so that its requests are found below.
        for (at, ty) in &types {
            let before = text[..*at].trim_end().trim_end_matches('&').trim_end();
            if let Some(b) = before.strip_suffix(':') {
                let name = ident_before(b, b.trim_end().len());
                assert!(
                    name == "api" || name.ends_with("_api"),
                    "{file}:{}: a client of Api<{ty}> named `{name}`: name it `api` or `*_api`",
                    line_of(&text, *at)
                );
            }
        }
        let type_at = |at: usize| -> Option<&str> {
            types
                .iter()
                .rev()
                .find(|(i, _)| *i < at)
                .map(|(_, t)| t.as_str())
        };
        // Requests: `api.method(` and `x_api.method(`.
        for (i, _) in text.match_indices("api.") {
            let name = ident_before(&text, i + 3);
            if !(name == "api" || name.ends_with("_api")) {
                continue;
            }
            let rest = &text[i + 4..];
            let method_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
            let method = &rest[..method_len];
            if method == "clone" || !rest[method_len..].starts_with('(') {
                continue;
            }
            let at = format!("{file}:{}", line_of(&text, i));
            let args = args_at(&text, i + 4 + method_len);
            let (sub, verbs) = verbs_of(method, args)
                .unwrap_or_else(|| panic!("{at}: `{name}.{method}(..)`: which verb is that?"));
            let ty = type_at(i).unwrap_or_else(|| panic!("{at}: no Api<T> before it"));
            let (group, resource) = resource_of(&file, ty);
            calls.push(Call {
                at,
                group,
                resource: format!("{resource}{sub}"),
                verbs,
            });
        }
        // Reflectors: a paginated list, then a watch.
        for (i, _) in text.match_indices("watcher::watcher(") {
            let at = format!("{file}:{}", line_of(&text, i));
            let ty = type_at(i).unwrap_or_else(|| panic!("{at}: no Api<T> before it"));
            if ty.len() == 1 {
                // Generic: the resources are those `feed(..)` is called with.
                assert_eq!(
                    file, "src/watch/feed.rs",
                    "{at}: a generic watcher outside feed()"
                );
                generic_watchers += 1;
                continue;
            }
            let (group, resource) = resource_of(&file, ty);
            calls.push(Call {
                at,
                group,
                resource,
                verbs: vec!["list", "watch"],
            });
        }
        for (i, _) in text.match_indices("feed(") {
            if text[..i].ends_with(is_ident) || text[..i].ends_with("fn ") {
                continue;
            }
            let at = format!("{file}:{}", line_of(&text, i));
            let args = args_at(&text, i + 4);
            let client = args.split(',').next().unwrap().trim();
            let param = format!("{client}: Api<");
            let d = text[..i]
                .rfind(&param)
                .unwrap_or_else(|| panic!("{at}: feed({client}, ..): `{param}T>` not found"));
            let ty = type_at(d + param.len()).unwrap();
            // A generic helper that takes the client as a parameter (`fn watched<K>(api:
            // Api<K>, ..)`): the resources are those of the clients its callers build,
            // `watched(Api::<T>::all(..), ..)`.
            let tys: Vec<&str> = if ty.len() == 1 {
                let f = text[..d].rfind("fn ").expect("the enclosing fn");
                let name: String = text[f + 3..].chars().take_while(|c| is_ident(*c)).collect();
                let callers: Vec<&str> = text
                    .match_indices(&format!("{name}("))
                    .filter_map(|(j, _)| {
                        let from = j + name.len() + 1;
                        let arg = from + (text[from..].len() - text[from..].trim_start().len());
                        text[arg..]
                            .starts_with("Api::<")
                            .then(|| type_at(arg + 1).unwrap())
                    })
                    .collect();
                assert!(
                    !callers.is_empty(),
                    "{at}: no caller of {name}(Api::<T>::all(..), ..)"
                );
                callers
            } else {
                vec![ty]
            };
            for ty in tys {
                let (group, resource) = resource_of(&file, ty);
                feeds.push(Call {
                    at: at.clone(),
                    group,
                    resource,
                    verbs: vec!["list", "watch"],
                });
            }
        }
        // Events through kube-runtime 5's Recorder: `publish` creates an Event, and patches it
        // (its series count) for a repeat (kube-runtime src/events.rs).
        for (i, _) in text.match_indices("Recorder::new(") {
            calls.push(Call {
                at: format!("{file}:{}", line_of(&text, i)),
                group: "events.k8s.io".into(),
                resource: "events".into(),
                verbs: vec!["create", "patch"],
            });
        }
    }
    assert_eq!(
        generic_watchers, 1,
        "the one reflector, in src/watch/feed.rs"
    );
    assert!(!feeds.is_empty(), "feed() is called");
    calls.extend(feeds);
    calls
}

type Grant = (String, String, String);

fn wanted(calls: &[Call]) -> BTreeMap<Grant, Vec<String>> {
    let mut out: BTreeMap<Grant, Vec<String>> = BTreeMap::new();
    for c in calls {
        for v in &c.verbs {
            out.entry((c.group.clone(), c.resource.clone(), v.to_string()))
                .or_default()
                .push(c.at.clone());
        }
    }
    out
}

fn granted(rules: &[k8s_openapi::api::rbac::v1::PolicyRule]) -> BTreeSet<Grant> {
    let mut out = BTreeSet::new();
    for r in rules {
        for g in r.api_groups.clone().unwrap_or_default() {
            for res in r.resources.clone().unwrap_or_default() {
                for v in &r.verbs {
                    out.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    out
}

/// `resource.group`, as kubectl writes it (the core group has no suffix).
fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// Both ways: nothing granted without a call, no call without a grant.
fn assert_same(what: &str, wanted: &BTreeMap<Grant, Vec<String>>, granted: &BTreeSet<Grant>) {
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(g, _)| !granted.contains(*g))
        .map(|((g, r, v), at)| format!("{v} {} (called at {})", qualified(g, r), at.join(", ")))
        .collect();
    let unused: Vec<String> = granted
        .iter()
        .filter(|g| !wanted.contains_key(*g))
        .map(|(g, r, v)| format!("{v} {}", qualified(g, r)))
        .collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "{what}:\n  called but not granted: {missing:?}\n  granted but no code calls it: {unused:?}"
    );
}

#[test]
fn every_granted_verb_is_one_the_code_calls_and_every_call_is_granted() {
    let calls = calls();
    let all = wanted(&calls);
    // The Lease is the Role's, the rest the ClusterRole's; what is called on each is granted
    // there.
    let lease = |g: &Grant| g.1 == "leases";

    // The chart with every feature that adds a rule on (Events are on by default).
    let stream = render(
        "volume-leftovers",
        "volume-leftovers",
        &["--set", "openReports.enabled=true"],
    );
    let docs = split(&stream);
    for (kind, mine) in [("ClusterRole", false), ("Role", true)] {
        let rules: Vec<_> = docs
            .iter()
            .filter(|d| d.kind() == kind)
            .flat_map(rules_of)
            .collect();
        let want = all
            .iter()
            .filter(|(g, _)| lease(g) == mine)
            .map(|(g, at)| (g.clone(), at.clone()))
            .collect();
        assert_same(&format!("the chart's {kind}"), &want, &granted(&rules));
    }

    // deploy/: the default values, so no OpenReports rule.
    for (file, mine) in [
        ("deploy/clusterrole.yaml", false),
        ("deploy/role.yaml", true),
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        let rules = split(&text).iter().flat_map(rules_of).collect::<Vec<_>>();
        let want = all
            .iter()
            .filter(|(g, _)| lease(g) == mine && g.1 != "clusterreports")
            .map(|(g, at)| (g.clone(), at.clone()))
            .collect();
        assert_same(file, &want, &granted(&rules));
    }
}
