//! The GCE census, I/O: lists a project's persistent disks, zonal and regional, and (when asked)
//! the snapshots the PD CSI driver cut, read-only, with Google's own clients
//! (`google-cloud-compute-v1`, `google-cloud-auth`).
//!
//! **I/O: reads Compute Engine (`compute.disks.list`; `compute.snapshots.list` for the
//! snapshots, nothing else); writes nothing.** A listing
//! covers either every location of the project in one paginated `disks.aggregatedList` (zonal
//! and regional disks alike, keyed `zones/Z` and `regions/R`), or the zones and regions it is
//! given, each with its own paginated `disks.list` / `regionDisks.list` (a regional disk is in
//! no zone's list: the seed's "disks.list on a single zone will miss it").
//!
//! Each scope's answer is either its complete list of disks or a [`ListError`] with its
//! category, never a partial list: a page that fails fails its scope (for the aggregated
//! listing, every scope), and a scope the aggregated answer marks with a warning other than
//! `NO_RESULTS_ON_PAGE` (`UNREACHABLE`) fails that scope. Each request is bounded
//! ([`GceConfig::attempt_timeout`]); 429, 5xx, timeouts and I/O errors are retried with
//! exponential backoff, at most [`GceConfig::attempts`] times; each scope's listing as a whole
//! is bounded by [`GceConfig::deadline`].
//!
//! Credentials: a service-account key file, or Application Default Credentials (GKE Workload
//! Identity through the metadata server, `GOOGLE_APPLICATION_CREDENTIALS`), scoped to
//! `compute.readonly`. With a key file, google-cloud-auth signs a JWT with the key and sends it
//! as the bearer token itself (AIP-4111): it never calls the key's `token_uri`.
//!
//! Least privilege: the one IAM permission `compute.disks.list` on the project, which
//! `disks.list`, `regionDisks.list` and `disks.aggregatedList` all require (a custom role;
//! `roles/compute.viewer` grants far more), and `compute.snapshots.list` for the snapshots
//! (`snapshots.list`, global: one listing per project, complete or failed as a whole).
//!
//! Folder: [`config`] (its section of the configuration file) and [`vocabulary`] (its words
//! for the decisions), both compiled in every build; `client` (the
//! service's client), `facts` (what an answer says, pure), `census` (the
//! [`Lister`](crate::census::backend::Lister)); the last three need the `gce` feature.

#[cfg(feature = "gce")]
pub mod census;
#[cfg(feature = "gce")]
mod client;
pub mod config;
#[cfg(feature = "gce")]
pub mod facts;
pub mod handle;
mod runbook;
pub mod vocabulary;

#[cfg(feature = "gce")]
pub use client::*;

/// GCE's registration ([`crate::census::Registration`]).
pub const REGISTRATION: crate::census::Registration = crate::census::Registration {
    words: &vocabulary::GCE,
    #[cfg(feature = "gce")]
    listers: census::listers,
    #[cfg(not(feature = "gce"))]
    listers: |_| Vec::new(),
    released: None,
};
