//! The house's layout holds: the stages reach each other one way, and no set of modules reaches
//! itself in a circle. Read from the source (`crate::` paths outside comments); needs no server.
//!
//! - every stage (a folder of src/) uses only the stages [`STAGES`] lists before it: `model/`
//!   (types and vocabulary) nothing, `decide/` (pure decisions) only `model/`, `engine/` (the
//!   generic scheduler, backoff, the clock) nothing (it knows none of the domain's types, which
//!   `run/` fills in), and so on up to `run/`, which wires them all;
//! - neither makes requests, starts tasks, sleeps or logs: no `kube::Client`, `kube::Api`,
//!   `tokio` or `tracing` (effects are returned to `run/`, which performs them);
//! - a storage backend is named only in its folder (`census/<backend>/`), where backends are
//!   registered, and in the few places [`NAMING_BACKENDS`] lists with the reason each still does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every module file of src/ (unit tests left out) by module path (`decide/plan`; a folder's
/// `mod.rs` is the folder).
fn modules() -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "tests") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|x| x == "rs")
                && p.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    let mut mods = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src()).unwrap().with_extension("");
        let mut name = rel.to_string_lossy().replace('\\', "/");
        if let Some(folder) = name.strip_suffix("/mod") {
            name = folder.to_string();
        }
        if name != "lib" && name != "main" {
            mods.insert(name, f);
        }
    }
    mods
}

/// The code of a file without comments and without `#[cfg(test)] mod .. { .. }` blocks.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut cfg_test = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let line = match line.find("//") {
            // A `//` inside a string ("http://") is rare in this code and harmless here.
            Some(i) => &line[..i],
            None => line,
        };
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            cfg_test = true;
            continue;
        }
        if cfg_test && trimmed.contains("mod ") && line.contains('{') {
            skip_depth = Some(depth);
        }
        cfg_test = false;
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
        }
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The modules a file's code names through `crate::` paths (the deepest existing module of
/// each path).
fn uses(code: &str, mods: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let path: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
        for k in (1..=parts.len()).rev() {
            let candidate = parts[..k].join("/");
            if mods.contains_key(&candidate) {
                found.insert(candidate);
                break;
            }
        }
        // `use crate::x::{a::B, c}`: the groups name modules too.
        if let Some(open) = rest.find('{')
            && rest[..open]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        {
            let base: Vec<&str> = rest[..open].split("::").filter(|p| !p.is_empty()).collect();
            let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
            for item in rest[open + 1..close].split(',') {
                let item: Vec<&str> = item.trim().split("::").collect();
                let full: Vec<&str> = base.iter().copied().chain(item).collect();
                for k in (1..=full.len()).rev() {
                    let candidate = full[..k].join("/");
                    if mods.contains_key(&candidate) {
                        found.insert(candidate);
                        break;
                    }
                }
            }
        }
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    mods.iter()
        .map(|(name, path)| {
            let mut to = uses(&code(path), &mods);
            to.remove(name);
            // A folder's mod.rs declaring its children is not a use of them.
            to.retain(|t| !t.starts_with(&format!("{name}/")));
            (name.clone(), to)
        })
        .collect()
}

#[test]
fn no_module_reaches_itself_through_others() {
    let g = graph();
    // Each module's reach; a circle is two modules that reach each other.
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(m) = todo.pop() {
            for t in g.get(&m).into_iter().flatten() {
                if seen.insert(t.clone()) {
                    todo.push(t.clone());
                }
            }
        }
        seen
    };
    let mut circles = Vec::new();
    for m in g.keys() {
        if reach(m).contains(m) {
            circles.push(m.clone());
        }
    }
    assert!(
        circles.is_empty(),
        "modules in a dependency circle (../shared/tools/modcycles.py src shows what ties it): {circles:?}"
    );
}

/// What each stage may use besides itself, lowest first: a stage uses only stages listed before
/// it (`engine` stands apart: it knows none of the domain). Every folder of src/ is a stage here,
/// so a new one must be given its place.
const STAGES: &[(&str, &[&str])] = &[
    // Types and vocabulary.
    ("model", &[]),
    // The generic scheduler, backoff, the clock.
    ("engine", &[]),
    // Pure decisions: time passed in, effects returned.
    ("decide", &["model"]),
    // The API server's objects read into stores (reflectors, relists).
    ("watch", &["model", "decide", "engine"]),
    // The storage backends listed, read-only.
    ("census", &["model", "decide", "engine"]),
    // Readiness and metrics, what the operator says of itself.
    ("telemetry", &["model", "decide", "watch"]),
    // The one place that writes: VolumeLeftovers, Events, reports, the election.
    (
        "publish",
        &["model", "decide", "engine", "watch", "telemetry"],
    ),
    // The one-shot command: reads, decides and prints; writes nothing.
    ("scan", &["model", "decide", "engine", "watch", "census"]),
    // The operator's wiring: everything.
    (
        "run",
        &[
            "model",
            "decide",
            "engine",
            "watch",
            "census",
            "telemetry",
            "publish",
            "scan",
        ],
    ),
];

#[test]
fn the_stages_reach_each_other_one_way() {
    let g = graph();
    let stage_of = |m: &str| m.split('/').next().unwrap().to_string();
    let mut wrong = Vec::new();
    let mut unplaced = BTreeSet::new();
    for (m, to) in &g {
        let stage = stage_of(m);
        let Some((_, allowed)) = STAGES.iter().find(|(s, _)| *s == stage) else {
            unplaced.insert(stage);
            continue;
        };
        for t in to {
            let target = stage_of(t);
            if target != stage && !allowed.contains(&target.as_str()) {
                wrong.push(format!("{m} -> {t}"));
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "stages without a place in STAGES: {unplaced:?}"
    );
    assert!(wrong.is_empty(), "uses against the layering: {wrong:?}");
    // Listed lowest first: no stage may use one listed after it.
    for (i, (stage, allowed)) in STAGES.iter().enumerate() {
        for a in *allowed {
            let at = STAGES.iter().position(|(s, _)| s == a).unwrap();
            assert!(at < i, "{stage} may use {a}, listed after it");
        }
    }
    for (stage, _) in STAGES {
        assert!(
            g.keys().any(|m| stage_of(m) == *stage),
            "no module of stage {stage}"
        );
    }
}

#[test]
fn model_and_decide_do_no_io_and_keep_no_clock() {
    let mods = modules();
    let forbidden = [
        "kube::Client",
        "kube::Api",
        "Api<",
        "Client::",
        "tokio",
        "tracing",
        "SystemTime::now",
        "Instant::now",
        "Timestamp::now",
        "std::fs",
        "std::net",
    ];
    let mut wrong = Vec::new();
    for (m, path) in &mods {
        if !(m.starts_with("model/") || m.starts_with("decide/")) {
            continue;
        }
        let code = code(path);
        for f in forbidden {
            if code.contains(f) {
                wrong.push(format!("{m}: {f}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "I/O or a clock in model/ or decide/: {wrong:?}"
    );
}

/// The reader above finds what it must: a use it cannot see would make the tests pass vacuously.
#[test]
fn the_reader_sees_uses_and_skips_comments_and_unit_tests() {
    let mods: BTreeMap<String, PathBuf> = ["model/crd", "decide/plan", "decide", "run/controller"]
        .into_iter()
        .map(|m| (m.to_string(), PathBuf::new()))
        .collect();
    let found = uses(
        "use crate::decide::plan::{self, Action};\nuse crate::{model::crd::Reason, run::controller};\nfn f() { crate::decide::plan::x(); }\n",
        &mods,
    );
    assert_eq!(
        found,
        ["decide/plan", "model/crd", "run/controller"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    let dir = std::env::temp_dir().join(format!("vl-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("x.rs");
    std::fs::write(
        &file,
        "// crate::run::controller in a comment\nuse crate::model::crd::X;\n#[cfg(test)]\nmod tests {\n    use crate::run::controller;\n    fn t() { tokio::spawn(async {}); }\n}\nfn after() {}\n",
    )
    .unwrap();
    let c = code(&file);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(c.contains("crate::model::crd::X"));
    assert!(c.contains("fn after"));
    assert!(!c.contains("run::controller"), "{c}");
    assert!(!c.contains("tokio"), "{c}");
}

/// The code that names a storage backend: its short name as a string, its CSI driver, its
/// in-tree volume source, its folder, Ceph's pool and image keys.
const BACKEND_WORDS: &[&str] = &[
    "\"ceph\"",
    "\"rbd\"",
    "\"gce\"",
    "\"ebs\"",
    "\"azure\"",
    "RBD_CSI_DRIVER",
    "GCE_PD_CSI_DRIVER",
    "EBS_CSI_DRIVER",
    "AZURE_DISK_CSI_DRIVER",
    "\"gcePersistentDisk\"",
    "\"awsElasticBlockStore\"",
    "\"azureDisk\"",
    "PoolKey",
    "ImageRef",
    "ceph::",
    "gce::",
    "ebs::",
    "azure::",
];

/// The modules besides the backends' own folders that still name backends, and why. A backend
/// is one folder under `src/census/` and one line where backends are registered: this list only
/// shrinks (each entry must still name one, so paying a debt removes its line).
const NAMING_BACKENDS: &[(&str, &str)] = &[
    ("census", "the registry: one line per backend"),
    (
        "census/config",
        "the configuration file: one section per backend",
    ),
    // The in-tree volume sources are a closed set: Kubernetes adds none (they migrate to CSI
    // drivers and are being removed), so these three never grow with a new backend.
    (
        "model/csi",
        "the CSI drivers the Kubernetes API's in-tree sources migrate to, by name",
    ),
    (
        "decide/classify",
        "the Kubernetes API's in-tree volume sources, read into one source record",
    ),
    (
        "decide/cost",
        "the CSI driver an in-tree source migrates to, whose price row prices it",
    ),
];

#[test]
fn a_backend_is_named_only_in_its_folder_and_where_it_is_registered() {
    let is_backend_folder = |m: &str| {
        ["census/ceph", "census/gce", "census/ebs", "census/azure"]
            .iter()
            .any(|f| m == *f || m.starts_with(&format!("{f}/")))
    };
    let mut naming = BTreeMap::new();
    for (name, path) in modules() {
        if is_backend_folder(&name) {
            continue;
        }
        // A cargo feature's name is not a backend named in code.
        let code = code(&path).replace("feature = \"", "feature=");
        let words: Vec<&str> = BACKEND_WORDS
            .iter()
            .copied()
            .filter(|w| code.contains(w))
            .collect();
        if !words.is_empty() {
            naming.insert(name, words);
        }
    }
    let allowed: BTreeMap<&str, &str> = NAMING_BACKENDS.iter().copied().collect();
    let stray: Vec<_> = naming
        .iter()
        .filter(|(m, _)| !allowed.contains_key(m.as_str()))
        .collect();
    assert!(
        stray.is_empty(),
        "backends named outside their folders (src/census/<backend>/): {stray:?}; a backend's \
         words go in its vocabulary (census::Backend), read through a Scope or DiskRef"
    );
    let paid: Vec<&&str> = allowed
        .keys()
        .filter(|m| !naming.contains_key(**m))
        .collect();
    assert!(
        paid.is_empty(),
        "these no longer name a backend: remove them from NAMING_BACKENDS: {paid:?}"
    );
}
