//! Storage backend censuses (opt-in): each backend lists its disks or images read-only and
//! hands [`crate::decide::census::Snapshot`]s to the decisions.

pub mod ceph;
pub mod config;
#[cfg(feature = "ebs")]
pub mod ebs;
#[cfg(feature = "gce")]
pub mod gce;

use std::sync::Arc;
use std::time::Duration;

use crate::decide::census::{FailureKind, Scope, Snapshot};

/// The result of one scope's census, as every backend hands it to the loop.
#[derive(Debug)]
pub struct CensusReport {
    /// The pool, zone, region, ...
    pub key: Scope,
    /// The census, or why there is none.
    pub result: Result<Snapshot, CensusFailure>,
    /// Requests it made (library calls, API requests).
    pub requests: u64,
    /// How long it took.
    pub(crate) elapsed: Duration,
}

/// Why a scope's census failed: its kind (the problem, mapped once from the backend's error
/// where the backend meets it), the line the logs and `scan` print, and the typed cause.
///
/// The kind is what is compared: one outage can fail with changing texts (an `rbd_list2`
/// timeout, then a `rados_connect` timeout), and is still one problem, logged once.
/// [`Display`](std::fmt::Display) is the whole line, the cause's text included as the logs have
/// always printed it; [`source`](std::error::Error::source) is the cause itself, for code that
/// needs more than its text.
#[derive(Clone, Debug)]
pub struct CensusFailure {
    /// What kind of problem it is.
    pub(crate) kind: FailureKind,
    /// What failed, in one line.
    pub(crate) message: String,
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
            message,
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
            message: match context {
                Some(c) => format!("{c}: {source}"),
                None => source.to_string(),
            },
            source: Some(Arc::new(source)),
        }
    }

    #[cfg(test)]
    /// The neutral category.
    pub(crate) fn category(&self) -> crate::decide::census::FailureCategory {
        self.kind.category
    }
}
