//! Types and vocabulary only: the CRD, labels, selectors, exclusions, findings, and the lean
//! forms of volumes, claims, snapshot objects and VolumeLeftovers kept in the stores. No client,
//! no clock, no I/O.

pub mod backend;
pub mod crd;
pub mod csi;
pub mod exclude;
pub mod expansion;
pub mod finding;
pub mod image;
pub mod intern;
pub mod labels;
pub mod leftover;
pub mod listing;
pub mod meta;
pub mod phase;
pub mod price;
pub mod quantity;
pub mod runbook;
pub mod selector;
pub mod size;
pub mod snapshot;
pub mod text;
pub mod uid;
pub mod volume;
