//! volume-leftovers: reports PersistentVolumes that survived their claims, and the disks they left.
//!
//! The house, bottom up; each stage uses only the ones before it (`tests/layout.rs` checks the
//! first two, and that no modules reach each other in a circle):
//!
//! - [`model`]: types and vocabulary (the CRD, labels, selectors, exclusions, findings, the lean
//!   stored forms). No I/O, no clock.
//! - [`decide`]: pure decisions (lookup, classify, plan, census conclusions, the OpenReports
//!   content). Times are arguments; effects are returned.
//! - [`engine`]: the generic scheduler, backoff and the clock.
//! - [`watch`]: reading the API (reflector feeds, indexes, error categories).
//! - [`publish`]: every API write (VolumeLeftovers, Events, the ClusterReport, the Lease).
//! - [`census`]: the storage backends' read-only censuses (Ceph RBD; GCE persistent disks and AWS
//!   EBS volumes with the `gce` and `ebs` features).
//! - [`telemetry`]: metrics, health and readiness.
//! - [`run`] and [`scan`]: the two commands; `run` alone wires everything.
//!
//! Items are `pub(crate)` unless the binary, the integration tests or the benchmarks use them,
//! so the compiler finds dead code and the stages' boundaries are the ones written here; the
//! CRD ([`model::crd`]) is the public contract.

pub mod census;
pub mod decide;
pub mod engine;
pub mod model;
pub mod publish;
pub mod run;
pub mod scan;
pub mod telemetry;
#[cfg(test)]
mod tests;
pub mod watch;

use kube::CustomResourceExt;

/// The CRD as YAML, exactly as committed in `crds/volumeleftovers.yaml`.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(&model::crd::VolumeLeftover::crd())
}
