//! Readiness, metrics and the HTTP endpoints that show them (`/healthz`, `/readyz`, `/metrics`).
//! I/O: only `server` does any (it serves HTTP); nothing here talks to the API server.
//!
//! - `health`: each store's state, the writes-blocked reason, and what `/readyz` says.
//! - `metrics`: the Prometheus metrics, one group per subsystem, each registering its own.
//! - `server`: the endpoints.

mod health;
mod metrics;
mod server;

pub(crate) use health::Standing;
pub use health::{CRD_FIX, Health, Kind, StoreHealth, StoreState, Trust, WritesBlocked};
pub use metrics::Metrics;
pub(crate) use server::serve;
