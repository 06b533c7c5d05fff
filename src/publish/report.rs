//! Writes the OpenReports `ClusterReport` ([`crate::decide::report`] says what it holds):
//! [`ReportWriter`] reads the one there once and applies it when it changed (opt-in with
//! `--openreports`, only when the OpenReports CRD is installed).

use std::time::Duration;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::decide::report::{REPORT_NAME, owned};
use crate::model::labels::FIELD_MANAGER;
use crate::watch::category::{Category, describe};

/// How applying the report went.
#[derive(Debug)]
pub(crate) enum Applied {
    /// Written.
    Done,
    /// The report there already says the same: nothing was written.
    Unchanged,
    /// The OpenReports CRD is not installed.
    NotInstalled,
    /// It failed; try again later.
    Failed(ReportError),
}

/// Why applying the report failed: the client's error, kept as the source, or no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReportError {
    /// The API server refused the apply, or it did not reach it. Shown as [`describe`] says.
    #[error("{}", describe(.0))]
    Client(#[source] kube::Error),
    /// No answer within the bound.
    #[error("no answer")]
    Timeout,
}

impl ReportError {
    /// What kind of failure it is.
    pub(crate) fn category(&self) -> Category {
        match self {
            ReportError::Client(e) => Category::of(e),
            ReportError::Timeout => Category::Timeout,
        }
    }
}

/// Reads the report to compare (once, before the first write), and applies it when it changed.
#[derive(Clone)]
pub(crate) struct ReportWriter {
    api: Api<DynamicObject>,
    timeout: Duration,
}

impl ReportWriter {
    /// A writer for cluster-scoped `ClusterReport`s.
    pub(crate) fn new(client: Client, timeout: Duration) -> ReportWriter {
        let gvk = GroupVersionKind::gvk("openreports.io", "v1alpha1", "ClusterReport");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterreports");
        ReportWriter {
            api: Api::all_with(client, &ar),
            timeout,
        }
    }

    /// Writes `report` unless `compare` and the report there already says the same ([`owned`]).
    /// `compare` is for the first write of a process (or after a failed one): later ones compare
    /// with what this process last wrote, without a request. A report that cannot be read is
    /// written.
    pub(crate) async fn write(&self, report: &Value, compare: bool) -> Applied {
        if compare {
            match tokio::time::timeout(self.timeout, self.api.get_opt(REPORT_NAME)).await {
                Ok(Ok(Some(there))) => match serde_json::to_value(&there) {
                    Ok(there) if owned(&there) == owned(report) => return Applied::Unchanged,
                    _ => {}
                },
                // Not there yet (or no CRD: the apply tells which).
                Ok(Ok(None)) => {}
                Ok(Err(e)) => {
                    tracing::info!(error = %describe(&e), "reading the OpenReports ClusterReport failed; writing it")
                }
                Err(_) => {
                    tracing::info!("reading the OpenReports ClusterReport timed out; writing it")
                }
            }
        }
        self.apply(report).await
    }

    /// Server-side applies `report` (a create when there is none: the API server authorizes
    /// that as `create`).
    async fn apply(&self, report: &Value) -> Applied {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        match tokio::time::timeout(
            self.timeout,
            self.api.patch(REPORT_NAME, &pp, &Patch::Apply(report)),
        )
        .await
        {
            Ok(Ok(_)) => Applied::Done,
            Ok(Err(e)) if Category::of(&e) == Category::NotFound => Applied::NotInstalled,
            Ok(Err(e)) => Applied::Failed(ReportError::Client(e)),
            Err(_) => Applied::Failed(ReportError::Timeout),
        }
    }
}
