//! Storage backend censuses (opt-in): each backend lists its disks or images read-only and
//! hands [`crate::decide::census::ScopeListing`]s to the decisions.

pub mod azure;
pub mod backend;
pub mod ceph;
pub mod config;
pub mod ebs;
pub mod gce;
pub mod section;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::census::backend::Lister;
use crate::census::config::CensusConfig;
use crate::decide::census::{FailureKind, Scope, ScopeListing};
use crate::model::backend::{Backend, DiskRef, SnapshotHandleRef};
use crate::model::crd::VolumeSourceInfo;
use crate::model::volume::VolumeSpec;

/// The function that makes a backend's listers from the census settings (none when the
/// configuration has no section of it, or when this build lacks the backend's cargo feature).
pub type MakeListers = fn(&CensusSettings) -> Vec<Box<dyn Lister>>;

/// What a backend registers: its words for the decisions, and how its listers are made. Each
/// backend's folder defines its own (`REGISTRATION` in its `mod.rs`).
pub struct Registration {
    /// Its words (its `vocabulary.rs`), compiled in every build.
    pub words: &'static dyn Backend,
    /// Its listers.
    pub listers: MakeListers,
    /// What must end before the process exits, awaited at most the bound given, saying whether
    /// it ended (librados's connections being shut down); `None` for a backend with nothing.
    pub released: Option<Released>,
}

/// Waits, at most a bound, for what a backend lets go in the background; says whether it ended.
pub type Released = fn(Duration) -> Pin<Box<dyn Future<Output = bool> + Send>>;

/// Waits, at most `bound` in all, until every backend has let go what it keeps (the process must
/// not exit before: librados aborts it); says whether all did.
pub async fn released(bound: Duration) -> bool {
    let until = tokio::time::Instant::now() + bound;
    let mut all = true;
    for wait in BACKENDS.iter().filter_map(|b| b.released) {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        all &= wait(left).await;
    }
    all
}

/// Every backend: a backend is one folder under `src/census/` and one line here.
const BACKENDS: &[Registration] = &[
    ceph::REGISTRATION,
    gce::REGISTRATION,
    ebs::REGISTRATION,
    azure::REGISTRATION,
];

/// The listers of every configured scope this build can list.
pub fn listers(settings: &CensusSettings) -> Vec<Box<dyn Lister>> {
    BACKENDS
        .iter()
        .flat_map(|b| (b.listers)(settings))
        .collect()
}

/// Every backend's words.
pub fn vocabularies() -> Vec<&'static dyn Backend> {
    BACKENDS.iter().map(|b| b.words).collect()
}

/// The disk a volume's source names, for any backend (whether it is censused or not: what is
/// read before the census knows its scopes, `scan`'s first look at the PVs).
pub fn disk_ref(source: &VolumeSourceInfo) -> Option<DiskRef> {
    BACKENDS.iter().find_map(|b| b.words.disk_ref(source))
}

/// The disk a volume's spec names ([`disk_ref`] of its source, zones included): the operator's
/// store, `scan`'s lists and the tombstones agree.
pub fn volume_disk(spec: &VolumeSpec) -> Option<DiskRef> {
    disk_ref(&crate::decide::classify::volume_source(spec))
}

/// The backend snapshot a VolumeSnapshotContent's handle names, for any backend.
pub fn snapshot_ref(handle: &str) -> Option<SnapshotHandleRef> {
    BACKENDS.iter().find_map(|b| b.words.snapshot_ref(handle))
}

/// A report for each configured scope no lister of `listers` covers (its backend's cargo
/// feature is off in this build): failed, saying so, so that nothing about it is concluded and
/// `scan` exits 4 naming it.
pub(crate) fn unbuilt(settings: &CensusSettings, listers: &[Box<dyn Lister>]) -> Vec<CensusReport> {
    let covered: std::collections::HashSet<Scope> =
        listers.iter().flat_map(|l| l.scopes()).collect();
    let mut configured: Vec<Scope> = settings
        .config
        .census(settings.image_grace)
        .pools
        .into_keys()
        .filter(|k| !covered.contains(k))
        .collect();
    configured.sort();
    configured
        .into_iter()
        .map(|key| {
            let backend = key.backend();
            let message = format!(
                "this build has no {} census (the {} feature is off)",
                backend.title(),
                backend.name()
            );
            CensusReport {
                key,
                result: Err(CensusFailure::new(
                    FailureKind::of(crate::decide::census::FailureCategory::Other),
                    message,
                )),
                requests: 0,
                elapsed: Duration::ZERO,
            }
        })
        .collect()
}

/// The census's own settings, shared by every backend: what to census (the configuration
/// file, one section per backend) and how often, the image grace, and the bounds of each
/// request and of each scope's whole listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CensusSettings {
    /// What to census.
    pub config: CensusConfig,
    /// How often each pool is censused.
    pub interval: Duration,
    /// How old an image no volume references must be before it is a finding.
    pub image_grace: Duration,
    /// The bound of each Ceph request (connect, each monitor and OSD operation).
    pub timeout: Duration,
    /// The bound of one pool's whole census.
    pub deadline: Duration,
}

/// The result of one scope's census, as every backend hands it to the loop.
#[derive(Debug)]
pub struct CensusReport {
    /// The pool, zone, region, ...
    pub key: Scope,
    /// The census, or why there is none.
    pub result: Result<ScopeListing, CensusFailure>,
    /// Requests it made (library calls, API requests).
    pub requests: u64,
    /// How long it took.
    pub(crate) elapsed: Duration,
}

#[cfg(test)]
pub(crate) use crate::model::text::LINE_BOUND;
pub(crate) use crate::model::text::one_line;

/// A service's error answer as every cloud backend's failure line says it: its own code, the
/// HTTP status and its own message, `UnauthorizedOperation (HTTP 403): You are not authorized
/// to perform this operation.` (EC2), `PERMISSION_DENIED (HTTP 403): Required
/// 'compute.disks.list' permission for 'projects/p'` (Compute). What the answer lacks is left
/// out. Never the SDK's debug form of the answer: that repeats the message and adds the raw
/// headers and body.
#[cfg(any(feature = "gce", feature = "ebs", feature = "azure"))]
pub(crate) fn service_line(
    code: Option<&str>,
    status: Option<u16>,
    message: Option<&str>,
) -> String {
    let head = match (code.filter(|c| !c.is_empty()), status) {
        (Some(c), Some(s)) => format!("{c} (HTTP {s})"),
        (Some(c), None) => c.to_string(),
        (None, Some(s)) => format!("HTTP {s}"),
        (None, None) => "an error answer without a code".to_string(),
    };
    match message.map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) => format!("{head}: {m}"),
        None => head,
    }
}

/// The innermost cause of `e` (itself when it has none): past the SDKs' wrappers ("dispatch
/// failure", "service error"), what actually went wrong (`Connection refused (os error 111)`).
#[cfg(any(feature = "gce", feature = "ebs", feature = "azure"))]
pub(crate) fn innermost<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    let mut e = e;
    while let Some(s) = e.source() {
        e = s;
    }
    e
}

/// Why a scope's census failed: its kind (the problem, mapped once from the backend's error
/// where the backend meets it), the line the logs and `scan` print, and the typed cause.
///
/// The kind is what is compared: one outage can fail with changing texts (an `rbd_list2`
/// timeout, then a `rados_connect` timeout), and is still one problem, logged once.
/// [`Display`](std::fmt::Display) is the whole line, the cause's text included as the logs have
/// always printed it, made one line and bounded by [`one_line`]; it does not repeat the kind,
/// which whoever prints the line prints beside it (the logs' `category`, `scan`'s
/// `failed (forbidden)`). [`source`](std::error::Error::source) is the cause itself, for code
/// that needs more than its text.
#[derive(Clone, Debug)]
pub struct CensusFailure {
    /// What kind of problem it is.
    pub kind: FailureKind,
    /// What failed, in one line of at most [`LINE_BOUND`](crate::model::text::LINE_BOUND) characters.
    pub message: String,
    /// The error behind it, when there is one (a deadline the census itself set has none).
    pub(crate) source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl std::fmt::Display for CensusFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CensusFailure {
    /// The cause itself (not the `Arc` around it), so that callers can downcast it.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl CensusFailure {
    /// A failure with no error behind it.
    pub(crate) fn new(kind: impl Into<FailureKind>, message: String) -> CensusFailure {
        CensusFailure {
            kind: kind.into(),
            message: one_line(&message),
            source: None,
        }
    }

    /// A failure caused by `source`, its kind mapped from it; `context` (when given) goes
    /// before the cause's text in the line: `context: cause`.
    pub(crate) fn caused<E>(
        kind: impl Into<FailureKind>,
        context: Option<String>,
        source: E,
    ) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        CensusFailure {
            kind: kind.into(),
            message: one_line(&match context {
                Some(c) => format!("{c}: {source}"),
                None => source.to_string(),
            }),
            source: Some(Arc::new(source)),
        }
    }

    #[cfg(test)]
    /// The neutral category.
    pub(crate) fn category(&self) -> crate::decide::census::FailureCategory {
        self.kind.category
    }
}

#[cfg(test)]
mod tests {
    use super::{CensusFailure, LINE_BOUND, one_line};
    use crate::decide::census::{FailureCategory, FailureKind};

    #[test]
    fn a_line_is_one_line_and_bounded_on_a_character() {
        assert_eq!(one_line("  a\n\tb\r\n\u{1b}c  "), "a b c");
        let fits = "é".repeat(LINE_BOUND);
        assert_eq!(one_line(&fits), fits, "as long as the bound: whole");
        let cut = one_line(&format!("{fits}é"));
        assert_eq!(cut.chars().count(), LINE_BOUND);
        assert_eq!(cut, format!("{}…", "é".repeat(LINE_BOUND - 1)));
        // Every constructor bounds: what reaches a log or stderr is never longer.
        let f = CensusFailure::new(
            FailureKind::of(FailureCategory::Server),
            format!("<html>\n<body>{}</body>\n</html>", "x".repeat(5_000)),
        );
        assert_eq!(f.to_string().chars().count(), LINE_BOUND);
        assert!(!f.to_string().contains('\n'));
    }
}
