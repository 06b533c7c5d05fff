//! Storage backend censuses (opt-in): each backend lists its disks or images read-only and
//! hands [`crate::decide::census::Snapshot`]s to the decisions.

pub mod ceph;
#[cfg(feature = "ebs")]
pub mod ebs;
