//! The only code that writes to the API server, and it writes only VolumeLeftovers. I/O.
//!
//! Every request is bounded in time: a write that hangs is abandoned (dropping the request closes
//! its connection) and reported as a timeout, so it never holds a concurrency slot forever.

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};

use crate::decide::plan::Action;
use crate::engine::schedule::{Echo, WriteEnd};
use crate::model::crd::VolumeLeftover;
use crate::model::labels::FIELD_MANAGER;
use crate::watch::category::{Category, describe};

/// Errors of one write, with the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Creating the object failed.
    #[error("creating VolumeLeftover {name}: {message}")]
    Create {
        /// Object name.
        name: String,
        /// Category.
        category: Category,
        /// Cause, in one line.
        message: String,
    },
    /// Patching labels, ownerReferences and spec failed.
    #[error("patching VolumeLeftover {name}: {message}")]
    Apply {
        /// Object name.
        name: String,
        /// Category.
        category: Category,
        /// Cause, in one line.
        message: String,
    },
    /// Applying the status failed.
    #[error("applying status of VolumeLeftover {name}: {message}")]
    ApplyStatus {
        /// Object name.
        name: String,
        /// Category.
        category: Category,
        /// Cause, in one line.
        message: String,
    },
    /// Deleting failed.
    #[error("deleting VolumeLeftover {name}: {message}")]
    Delete {
        /// Object name.
        name: String,
        /// Category.
        category: Category,
        /// Cause, in one line.
        message: String,
    },
}

impl WriteError {
    /// Stable short name of the step, for metrics.
    pub fn op(&self) -> &'static str {
        match self {
            WriteError::Create { .. } => "create",
            WriteError::Apply { .. } => "apply",
            WriteError::ApplyStatus { .. } => "apply_status",
            WriteError::Delete { .. } => "delete",
        }
    }

    /// The category of the cause.
    pub fn category(&self) -> Category {
        match self {
            WriteError::Create { category, .. }
            | WriteError::Apply { category, .. }
            | WriteError::ApplyStatus { category, .. }
            | WriteError::Delete { category, .. } => *category,
        }
    }

    /// Whether the failure is about the resource type rather than this object: the identity may
    /// not write VolumeLeftovers at all, or the CRD is missing (a create answered 404).
    pub fn write_wide(&self) -> bool {
        match self {
            WriteError::Create { category, .. } => {
                matches!(category, Category::Forbidden | Category::NotFound)
            }
            other => other.category() == Category::Forbidden,
        }
    }
}

/// What one write did.
#[derive(Debug)]
pub struct Written {
    /// The operation, for metrics (`create`, `apply`, `delete`).
    pub op: &'static str,
    /// How it ended, for the scheduler.
    pub end: WriteEnd,
    /// What the operator's VolumeLeftover watch will show once it has caught up.
    pub echo: Option<Echo>,
    /// Requests sent.
    pub requests: u32,
}

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

    async fn bounded<T>(
        &self,
        fut: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, (Category, String)> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err((Category::of(&e), describe(&e))),
            Err(_) => Err((
                Category::Timeout,
                format!("no answer within {}s", self.timeout.as_secs_f32()),
            )),
        }
    }

    /// Performs one action.
    pub async fn execute(&self, action: Action) -> Result<Written, WriteError> {
        let pp = PatchParams::apply(FIELD_MANAGER).force();
        match action {
            Action::Nothing | Action::Foreign { .. } => Ok(Written {
                op: "none",
                end: WriteEnd::Done,
                echo: None,
                requests: 0,
            }),
            Action::Create { object } => {
                let name = object.name_any();
                let mut main = (*object).clone();
                main.status = None;
                let pp_create = PostParams {
                    field_manager: Some(FIELD_MANAGER.to_string()),
                    ..PostParams::default()
                };
                let created = match self.bounded(self.api.create(&pp_create, &main)).await {
                    Ok(o) => o,
                    // Someone's object of that name, which the store has not shown yet: never
                    // taken over. Decide again once the store shows it.
                    Err((Category::Conflict, _)) => {
                        return Ok(Written {
                            op: "create",
                            end: WriteEnd::Outdated,
                            echo: Some(Echo::Exists),
                            requests: 1,
                        });
                    }
                    Err((category, message)) => {
                        return Err(WriteError::Create {
                            name,
                            category,
                            message,
                        });
                    }
                };
                let version = created.metadata.resource_version.as_deref();
                let written = match self.apply_status(&name, version, &object, &pp).await {
                    Ok(o) => o,
                    // Changed or deleted right after the create (acknowledged at once, say):
                    // the object exists; its status comes when the name is decided again.
                    Err(WriteError::ApplyStatus {
                        category: Category::Conflict | Category::NotFound,
                        ..
                    }) => {
                        return Ok(Written {
                            op: "create",
                            end: WriteEnd::Outdated,
                            echo: None,
                            requests: 2,
                        });
                    }
                    Err(e) => return Err(e),
                };
                Ok(Written {
                    op: "create",
                    end: WriteEnd::Done,
                    echo: written.metadata.resource_version.map(Echo::Version),
                    requests: 2,
                })
            }
            Action::Apply {
                object,
                meta,
                status,
            } => {
                let name = object.name_any();
                let mut written = None;
                let mut requests = 0;
                if let Some(patch) = meta {
                    requests += 1;
                    let mp = PatchParams {
                        field_manager: Some(FIELD_MANAGER.to_string()),
                        ..PatchParams::default()
                    };
                    match self
                        .bounded(self.api.patch(&name, &mp, &Patch::Merge(&patch)))
                        .await
                    {
                        Ok(o) => written = Some(o),
                        // Changed since the decision (the patch carries its resourceVersion), or
                        // deleted meanwhile: decide again on what the store shows next.
                        Err((Category::Conflict | Category::NotFound, _)) => {
                            return Ok(Written {
                                op: "apply",
                                end: WriteEnd::Outdated,
                                echo: None,
                                requests,
                            });
                        }
                        Err((category, message)) => {
                            return Err(WriteError::Apply {
                                name,
                                category,
                                message,
                            });
                        }
                    }
                }
                if status {
                    requests += 1;
                    // After the metadata patch, the version it made; else the one decided on.
                    let version = match &written {
                        Some(o) => o.metadata.resource_version.clone(),
                        None => object.metadata.resource_version.clone(),
                    };
                    match self
                        .apply_status(&name, version.as_deref(), &object, &pp)
                        .await
                    {
                        Ok(o) => written = Some(o),
                        // Deleted meanwhile (the status subresource never creates), or changed
                        // since the decision (made again by someone else, acknowledged): decide
                        // again on what the store shows next.
                        Err(WriteError::ApplyStatus {
                            category: Category::NotFound | Category::Conflict,
                            ..
                        }) => {
                            return Ok(Written {
                                op: "apply",
                                end: WriteEnd::Outdated,
                                echo: None,
                                requests,
                            });
                        }
                        Err(e) => return Err(e),
                    }
                }
                Ok(Written {
                    op: "apply",
                    end: WriteEnd::Done,
                    echo: written
                        .and_then(|o| o.metadata.resource_version)
                        .map(Echo::Version),
                    requests,
                })
            }
            Action::Delete { name, uid } => {
                let dp = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid,
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                match self.bounded(self.api.delete(&name, &dp)).await {
                    Ok(_) | Err((Category::NotFound, _)) => Ok(Written {
                        op: "delete",
                        end: WriteEnd::Done,
                        echo: Some(Echo::Gone),
                        requests: 1,
                    }),
                    // Replaced by a newer object (uid precondition): its watch event brings the
                    // name back here.
                    Err((Category::Conflict, _)) => Ok(Written {
                        op: "delete",
                        end: WriteEnd::Outdated,
                        echo: None,
                        requests: 1,
                    }),
                    Err((category, message)) => Err(WriteError::Delete {
                        name,
                        category,
                        message,
                    }),
                }
            }
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
        pp: &PatchParams,
    ) -> Result<VolumeLeftover, WriteError> {
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
        self.bounded(self.api.patch_status(name, pp, &Patch::Apply(&body)))
            .await
            .map_err(|(category, message)| WriteError::ApplyStatus {
                name: name.to_string(),
                category,
                message,
            })
    }
}
