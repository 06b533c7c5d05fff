//! A claim's expansion, as the claim itself tells it. Pure: types and one function.
//!
//! Expansion is the one operation after provisioning that changes the claim, the PV and the disk:
//! a person raises `spec.resources.requests.storage`; the resizer (the CSI driver's
//! external-resizer, or kube-controller-manager's expand controller for an in-tree plugin) grows
//! the disk and records `status.allocatedResources`; the kubelet grows the filesystem; then
//! `status.capacity` follows. Each step can stop, and the claim says where through
//! `status.allocatedResourceStatuses` (Kubernetes 1.34+, the recovery from expansion failures) and
//! its conditions. Only a claim whose request exceeds its capacity keeps anything here, so the
//! claim store pays one pointer per claim for a resize that is not under way.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::quantity::bytes;

/// Where a resize stopped, by what the claim says (its resize status first, then its
/// conditions).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ResizeStep {
    /// Nothing answered the raised request: no resize status, no condition. No resizer acts on
    /// this driver's volumes (the CSI driver runs no external-resizer, or it is down).
    NotStarted,
    /// The resizer is growing the disk (`ControllerResizeInProgress`, condition `Resizing`).
    ControllerInProgress,
    /// The resizer tried and keeps failing (condition `ControllerResizeError`).
    ControllerFailed,
    /// The resizer says the size cannot be had (`ControllerResizeInfeasible`).
    ControllerInfeasible,
    /// The disk grew; the filesystem grows when a pod next mounts the claim
    /// (`NodeResizePending`, condition `FileSystemResizePending`).
    NodePending,
    /// The kubelet is growing the filesystem (`NodeResizeInProgress`).
    NodeInProgress,
    /// The kubelet tried and keeps failing (condition `NodeResizeError`).
    NodeFailed,
    /// The kubelet says the size cannot be had (`NodeResizeInfeasible`).
    NodeInfeasible,
}

impl ResizeStep {
    /// The step as written in the object.
    pub fn as_str(self) -> &'static str {
        match self {
            ResizeStep::NotStarted => "NotStarted",
            ResizeStep::ControllerInProgress => "ControllerInProgress",
            ResizeStep::ControllerFailed => "ControllerFailed",
            ResizeStep::ControllerInfeasible => "ControllerInfeasible",
            ResizeStep::NodePending => "NodePending",
            ResizeStep::NodeInProgress => "NodeInProgress",
            ResizeStep::NodeFailed => "NodeFailed",
            ResizeStep::NodeInfeasible => "NodeInfeasible",
        }
    }

    /// Where the resize stopped, in words: the end of "its expansion stopped ...".
    pub fn stopped_where(self) -> &'static str {
        match self {
            ResizeStep::NotStarted => "before anything acted on it",
            ResizeStep::ControllerInProgress => "while the resizer was growing the disk",
            ResizeStep::ControllerFailed => "at the resizer, which keeps failing to grow the disk",
            ResizeStep::ControllerInfeasible => "at the resizer, which says the size cannot be had",
            ResizeStep::NodePending => "after the disk grew, before its filesystem did",
            ResizeStep::NodeInProgress => "while the kubelet was growing the filesystem",
            ResizeStep::NodeFailed => "at the kubelet, which keeps failing to grow the filesystem",
            ResizeStep::NodeInfeasible => "at the kubelet, which says the size cannot be had",
        }
    }

    /// What a person can do about a resize stopped at this step (one sentence, for the message
    /// and `explain`).
    pub fn advice(self) -> &'static str {
        match self {
            ResizeStep::NotStarted => {
                "nothing has acted on the raised request: check that the CSI driver runs an \
                 external-resizer and supports expansion, or lower the request back"
            }
            ResizeStep::ControllerInProgress => {
                "the resizer has been growing the disk for longer than a resize takes: read the \
                 claim's events and the resizer's log"
            }
            ResizeStep::ControllerFailed => {
                "the resizer keeps failing to grow the disk: read the condition's message; lower \
                 the request back to a size the backend can give if it cannot be had"
            }
            ResizeStep::ControllerInfeasible | ResizeStep::NodeInfeasible => {
                "the size cannot be had: lower the request back (above the current capacity), \
                 which Kubernetes permits to recover from a failed expansion"
            }
            ResizeStep::NodePending => {
                "the disk grew; its filesystem grows when a pod next mounts the claim: start \
                 (or restart) a pod that uses it"
            }
            ResizeStep::NodeInProgress => {
                "the kubelet has been growing the filesystem for longer than a resize takes: \
                 read the kubelet's log on the node that mounts the claim"
            }
            ResizeStep::NodeFailed => {
                "the kubelet keeps failing to grow the filesystem: read the condition's message \
                 and the kubelet's log on the node that mounts the claim"
            }
        }
    }
}

/// A resize condition of the claim (`status: "True"` only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeCondition {
    /// `Resizing`, `FileSystemResizePending`, `ControllerResizeError` or `NodeResizeError`.
    pub kind: Box<str>,
    /// Its message, when it has one.
    pub message: Option<Box<str>>,
    /// Its `lastTransitionTime`.
    pub since: Option<Time>,
}

/// A claim whose request exceeds its capacity: what it asks, has, and says about the resize.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expansion {
    /// `spec.resources.requests.storage`, as written.
    pub requested: Box<str>,
    /// The same, in bytes.
    pub requested_bytes: i64,
    /// `status.capacity.storage`, as written.
    pub capacity: Box<str>,
    /// The same, in bytes.
    pub capacity_bytes: i64,
    /// `status.allocatedResources.storage`: what the resizer set out to give.
    pub allocated: Option<Box<str>>,
    /// `status.allocatedResourceStatuses.storage`, as written.
    pub resize_status: Option<Box<str>>,
    /// Where it stopped.
    pub step: ResizeStep,
    /// The resize conditions that hold, in the claim's order.
    pub conditions: Vec<ResizeCondition>,
}

impl Expansion {
    /// When the resize's current step began, as far as the claim dates it: the earliest
    /// `lastTransitionTime` of its resize conditions (none when nothing answered the request).
    pub fn since(&self) -> Option<&Time> {
        self.conditions
            .iter()
            .filter_map(|c| c.since.as_ref())
            .min_by_key(|t| t.0)
    }
}

/// Why a claim's size cannot be compared with its request. Never a finding: a size the code
/// cannot read is not a stuck expansion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uncomparable {
    /// A Bound claim without `status.capacity.storage`.
    NoCapacity,
    /// The request is not a quantity this code reads (or does not fit 64 bits of bytes).
    Request,
    /// The capacity is not a quantity this code reads (or does not fit 64 bits of bytes).
    Capacity,
}

impl Uncomparable {
    /// Why, for a log line or a count.
    pub fn as_str(self) -> &'static str {
        match self {
            Uncomparable::NoCapacity => "a Bound claim without status.capacity.storage",
            Uncomparable::Request => "a request that is not a readable quantity",
            Uncomparable::Capacity => "a capacity that is not a readable quantity",
        }
    }
}

/// What a claim's sizes say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClaimSize {
    /// Not expanding: not Bound, no request, or the request is at most the capacity (a backend
    /// that rounds up gives more than asked).
    #[default]
    Settled,
    /// The request exceeds the capacity.
    Expanding(Box<Expansion>),
    /// The sizes cannot be compared.
    Uncomparable(Uncomparable),
}

/// A quantity keyed `storage` (requests, capacity, allocatedResources,
/// allocatedResourceStatuses): the other keys are not read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct StorageWire {
    /// The `storage` key.
    pub storage: Option<Box<str>>,
}

/// `spec` of a claim, as far as its size is read.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ClaimSpecWire {
    /// `resources`.
    pub resources: Option<ResourcesWire>,
}

/// `spec.resources`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ResourcesWire {
    /// `requests`.
    pub requests: Option<StorageWire>,
}

/// `status` of a claim, as far as its size is read.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimStatusWire {
    /// `phase`.
    pub phase: Option<Box<str>>,
    /// `capacity`.
    pub capacity: Option<StorageWire>,
    /// `allocatedResources`.
    pub allocated_resources: Option<StorageWire>,
    /// `allocatedResourceStatuses`.
    pub allocated_resource_statuses: Option<StorageWire>,
    /// `conditions`.
    #[serde(default)]
    pub conditions: Vec<ConditionWire>,
}

/// One of a claim's `status.conditions`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionWire {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: Box<str>,
    /// `status`.
    pub status: Option<Box<str>>,
    /// `message`.
    pub message: Option<Box<str>>,
    /// `lastTransitionTime`.
    pub last_transition_time: Option<Time>,
}

/// The condition types that speak of a resize.
const RESIZE_CONDITIONS: [&str; 4] = [
    "Resizing",
    "FileSystemResizePending",
    "ControllerResizeError",
    "NodeResizeError",
];

/// What a claim's spec and status say about its size.
pub fn claim_size(spec: Option<&ClaimSpecWire>, status: Option<&ClaimStatusWire>) -> ClaimSize {
    let requested = spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.storage.as_deref());
    let bound = status.and_then(|s| s.phase.as_deref()) == Some("Bound");
    let (Some(requested), Some(status), true) = (requested, status, bound) else {
        return ClaimSize::Settled;
    };
    let Some(capacity) = status.capacity.as_ref().and_then(|c| c.storage.as_deref()) else {
        return ClaimSize::Uncomparable(Uncomparable::NoCapacity);
    };
    let Some(requested_bytes) = bytes(requested) else {
        return ClaimSize::Uncomparable(Uncomparable::Request);
    };
    let Some(capacity_bytes) = bytes(capacity) else {
        return ClaimSize::Uncomparable(Uncomparable::Capacity);
    };
    if requested_bytes <= capacity_bytes {
        return ClaimSize::Settled;
    }
    let conditions: Vec<ResizeCondition> = status
        .conditions
        .iter()
        .filter(|c| RESIZE_CONDITIONS.contains(&&*c.kind) && c.status.as_deref() == Some("True"))
        .map(|c| ResizeCondition {
            kind: c.kind.clone(),
            message: c.message.clone().filter(|m| !m.is_empty()),
            since: c.last_transition_time.clone(),
        })
        .collect();
    let resize_status = status
        .allocated_resource_statuses
        .as_ref()
        .and_then(|s| s.storage.clone())
        .filter(|s| !s.is_empty());
    let step = step(resize_status.as_deref(), &conditions);
    ClaimSize::Expanding(Box::new(Expansion {
        requested: requested.into(),
        requested_bytes,
        capacity: capacity.into(),
        capacity_bytes,
        allocated: status
            .allocated_resources
            .as_ref()
            .and_then(|a| a.storage.clone()),
        resize_status,
        step,
        conditions,
    }))
}

/// Where a resize stopped: the resize status decides the side (controller or node) and whether
/// it is infeasible; an error condition on the side under way says it keeps failing; without a
/// resize status (a resizer older than 1.34's), the conditions alone.
fn step(resize_status: Option<&str>, conditions: &[ResizeCondition]) -> ResizeStep {
    let has = |kind: &str| conditions.iter().any(|c| &*c.kind == kind);
    match resize_status {
        Some("ControllerResizeInfeasible") => ResizeStep::ControllerInfeasible,
        Some("NodeResizeInfeasible") => ResizeStep::NodeInfeasible,
        Some("ControllerResizeInProgress") if has("ControllerResizeError") => {
            ResizeStep::ControllerFailed
        }
        Some("ControllerResizeInProgress") => ResizeStep::ControllerInProgress,
        Some("NodeResizeInProgress") if has("NodeResizeError") => ResizeStep::NodeFailed,
        Some("NodeResizeInProgress") => ResizeStep::NodeInProgress,
        Some("NodeResizePending") => ResizeStep::NodePending,
        _ if has("ControllerResizeError") => ResizeStep::ControllerFailed,
        _ if has("NodeResizeError") => ResizeStep::NodeFailed,
        _ if has("FileSystemResizePending") => ResizeStep::NodePending,
        _ if has("Resizing") => ResizeStep::ControllerInProgress,
        _ => ResizeStep::NotStarted,
    }
}
