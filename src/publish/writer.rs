//! The only code that writes to the API server, and it writes only VolumeLeftovers. I/O.
//!
//! Every request is bounded in time: a write that hangs is abandoned (dropping the request closes
//! its connection) and reported as a timeout, so it never holds a concurrency slot forever.

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};

use crate::decide::name::Echo;
use crate::decide::plan::Action;
use crate::engine::schedule::WriteEnd;
use crate::model::crd::VolumeLeftover;
use crate::model::labels::FIELD_MANAGER;
use crate::watch::category::{Category, RequestError};

/// Errors of one write: the step that failed and its request's error, kept as the source. The
/// category is the cause's ([`WriteError::category`]), computed when asked.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Creating the object failed.
    #[error("creating VolumeLeftover {name}: {source}")]
    Create {
        /// Object name.
        name: String,
        /// Cause.
        source: RequestError,
    },
    /// Patching labels, ownerReferences and spec failed.
    #[error("patching VolumeLeftover {name}: {source}")]
    Apply {
        /// Object name.
        name: String,
        /// Cause.
        source: RequestError,
    },
    /// Applying the status failed.
    #[error("applying status of VolumeLeftover {name}: {source}")]
    ApplyStatus {
        /// Object name.
        name: String,
        /// Cause.
        source: RequestError,
    },
    /// Deleting failed.
    #[error("deleting VolumeLeftover {name}: {source}")]
    Delete {
        /// Object name.
        name: String,
        /// Cause.
        source: RequestError,
    },
}

impl WriteError {
    /// The step that failed, for metrics.
    pub(crate) fn op(&self) -> Op {
        match self {
            WriteError::Create { .. } => Op::Create,
            WriteError::Apply { .. } => Op::Apply,
            WriteError::ApplyStatus { .. } => Op::ApplyStatus,
            WriteError::Delete { .. } => Op::Delete,
        }
    }

    /// The failed request's error.
    pub(crate) fn cause(&self) -> &RequestError {
        match self {
            WriteError::Create { source, .. }
            | WriteError::Apply { source, .. }
            | WriteError::ApplyStatus { source, .. }
            | WriteError::Delete { source, .. } => source,
        }
    }

    /// The category of the cause.
    pub(crate) fn category(&self) -> Category {
        self.cause().category()
    }

    /// Whether the failure is about the resource type rather than this object: the identity may
    /// not write VolumeLeftovers at all, or the CRD is missing (a create answered 404).
    pub(crate) fn write_wide(&self) -> bool {
        match self {
            WriteError::Create { .. } => {
                matches!(self.category(), Category::Forbidden | Category::NotFound)
            }
            other => other.category() == Category::Forbidden,
        }
    }
}

/// What a write did, or the step of it that failed: the `op` label of the write metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Nothing to send ([`Action::Nothing`], [`Action::Foreign`]).
    None,
    /// A create (and the status right after it).
    Create,
    /// A metadata patch and/or a status apply of an existing object.
    Apply,
    /// The status apply (a failed step only).
    ApplyStatus,
    /// A delete.
    Delete,
}

impl Op {
    #[cfg(test)]
    /// Every operation.
    pub(crate) const ALL: [Op; 5] = [Op::None, Op::Create, Op::Apply, Op::ApplyStatus, Op::Delete];

    /// What `action` does.
    pub(crate) fn of(action: &Action) -> Op {
        match action {
            Action::Nothing | Action::Foreign { .. } => Op::None,
            Action::Create { .. } => Op::Create,
            Action::Apply { .. } => Op::Apply,
            Action::Delete { .. } => Op::Delete,
        }
    }

    /// Stable short name, for metrics and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Op::None => "none",
            Op::Create => "create",
            Op::Apply => "apply",
            Op::ApplyStatus => "apply_status",
            Op::Delete => "delete",
        }
    }
}

/// How a write that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It landed (or there was nothing to send).
    Done,
    /// It was refused because the decision was made on an outdated view: decide again once the
    /// store has caught up.
    Outdated,
}

impl Outcome {
    #[cfg(test)]
    /// Every outcome.
    pub(crate) const ALL: [Outcome; 2] = [Outcome::Done, Outcome::Outdated];

    /// The `result` label of the write metrics (a failed write's is its error category).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "ok",
            Outcome::Outdated => "outdated",
        }
    }
}

impl<C> From<Outcome> for WriteEnd<C> {
    fn from(o: Outcome) -> WriteEnd<C> {
        match o {
            Outcome::Done => WriteEnd::Done,
            Outcome::Outdated => WriteEnd::Outdated,
        }
    }
}

/// What one write did.
#[derive(Debug)]
pub struct Written {
    /// The operation.
    pub(crate) op: Op,
    /// How it ended.
    pub outcome: Outcome,
    /// What the operator's VolumeLeftover watch will show once it has caught up.
    pub(crate) echo: Option<Echo>,
    /// Requests sent.
    pub requests: u32,
}

/// How the requests of one write ended, before they are counted: its outcome and echo.
type Ended = Result<(Outcome, Option<Echo>), WriteError>;

/// The writer.
#[derive(Clone)]
pub struct Writer {
    api: Api<VolumeLeftover>,
    timeout: Duration,
}

impl Writer {
    /// A writer whose every request gives up after `timeout`.
    pub fn new(api: Api<VolumeLeftover>, timeout: Duration) -> Writer {
        Writer { api, timeout }
    }

    /// Sends one request, counted in `sent`, bounded in time.
    async fn send<T>(
        &self,
        sent: &mut u32,
        fut: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, RequestError> {
        *sent += 1;
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(RequestError::Client(e)),
            Err(_) => Err(RequestError::Timeout(self.timeout)),
        }
    }

    /// Performs one action.
    pub async fn execute(&self, action: Action) -> Result<Written, WriteError> {
        let op = Op::of(&action);
        let mut requests = 0;
        let (outcome, echo) = match action {
            Action::Nothing | Action::Foreign { .. } => (Outcome::Done, None),
            Action::Create { object } => self.create(&object, &mut requests).await?,
            Action::Apply {
                object,
                meta,
                status,
            } => {
                self.apply(&object, meta.as_ref(), status, &mut requests)
                    .await?
            }
            Action::Delete { name, uid } => self.delete(name, uid, &mut requests).await?,
        };
        Ok(Written {
            op,
            outcome,
            echo,
            requests,
        })
    }

    /// Creates the object, then applies its status.
    async fn create(&self, object: &VolumeLeftover, sent: &mut u32) -> Ended {
        let name = object.name_any();
        let mut main = object.clone();
        main.status = None;
        let pp = PostParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..PostParams::default()
        };
        let created = match self.send(sent, self.api.create(&pp, &main)).await {
            Ok(o) => o,
            // Someone's object of that name, which the store has not shown yet: never taken
            // over. Decide again once the store shows it.
            Err(e) if e.category() == Category::Conflict => {
                return Ok((Outcome::Outdated, Some(Echo::Exists)));
            }
            Err(source) => return Err(WriteError::Create { name, source }),
        };
        let version = created.metadata.resource_version.as_deref();
        match self.apply_status(&name, version, object, sent).await {
            Ok(written) => Ok((Outcome::Done, version_echo(written))),
            // Changed or deleted right after the create (acknowledged at once, say): the object
            // exists; its status comes when the name is decided again.
            Err(e) if matches!(e.category(), Category::Conflict | Category::NotFound) => {
                Ok((Outcome::Outdated, None))
            }
            Err(source) => Err(WriteError::ApplyStatus { name, source }),
        }
    }

    /// Patches the metadata (`meta`, carrying the resourceVersion decided on) and/or applies
    /// the status of an existing object.
    async fn apply(
        &self,
        object: &VolumeLeftover,
        meta: Option<&serde_json::Value>,
        status: bool,
        sent: &mut u32,
    ) -> Ended {
        let name = object.name_any();
        let mut written = None;
        if let Some(patch) = meta {
            let mp = PatchParams {
                field_manager: Some(FIELD_MANAGER.to_string()),
                ..PatchParams::default()
            };
            match self
                .send(sent, self.api.patch(&name, &mp, &Patch::Merge(patch)))
                .await
            {
                Ok(o) => written = Some(o),
                // Changed since the decision (the patch carries its resourceVersion), or
                // deleted meanwhile: decide again on what the store shows next.
                Err(e) if matches!(e.category(), Category::Conflict | Category::NotFound) => {
                    return Ok((Outcome::Outdated, None));
                }
                Err(source) => return Err(WriteError::Apply { name, source }),
            }
        }
        if status {
            // After the metadata patch, the version it made; else the one decided on.
            let version = match &written {
                Some(o) => o.metadata.resource_version.clone(),
                None => object.metadata.resource_version.clone(),
            };
            match self
                .apply_status(&name, version.as_deref(), object, sent)
                .await
            {
                Ok(o) => written = Some(o),
                // Deleted meanwhile (the status subresource never creates), or changed since
                // the decision (made again by someone else, acknowledged): decide again on what
                // the store shows next.
                Err(e) if matches!(e.category(), Category::NotFound | Category::Conflict) => {
                    return Ok((Outcome::Outdated, None));
                }
                Err(source) => return Err(WriteError::ApplyStatus { name, source }),
            }
        }
        Ok((Outcome::Done, written.and_then(version_echo)))
    }

    /// Deletes the object `uid` of that name.
    async fn delete(&self, name: String, uid: Option<String>, sent: &mut u32) -> Ended {
        let dp = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.send(sent, self.api.delete(&name, &dp)).await {
            Ok(_) => Ok((Outcome::Done, Some(Echo::Gone))),
            Err(e) => match e.category() {
                Category::NotFound => Ok((Outcome::Done, Some(Echo::Gone))),
                // Replaced by a newer object (uid precondition): its watch event brings the
                // name back here.
                Category::Conflict => Ok((Outcome::Outdated, None)),
                _ => Err(WriteError::Delete { name, source: e }),
            },
        }
    }

    /// Applies the status to the object at `version` (when known: the API server refuses the
    /// write with a conflict if the object changed since, or is another one now; the status
    /// subresource ignores a uid in the body, so the version is the precondition).
    async fn apply_status(
        &self,
        name: &str,
        version: Option<&str>,
        object: &VolumeLeftover,
        sent: &mut u32,
    ) -> Result<VolumeLeftover, RequestError> {
        let mut metadata = serde_json::json!({ "name": name });
        if let Some(v) = version {
            metadata["resourceVersion"] = v.into();
        }
        let body = serde_json::json!({
            "apiVersion": VolumeLeftover::api_version(&()),
            "kind": VolumeLeftover::kind(&()),
            "metadata": metadata,
            "status": object.status,
        });
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        self.send(sent, self.api.patch_status(name, &pp, &Patch::Apply(&body)))
            .await
    }
}

/// The echo of an object written: its watch shows this resourceVersion once caught up.
fn version_echo(written: VolumeLeftover) -> Option<Echo> {
    written.metadata.resource_version.map(Echo::Version)
}
