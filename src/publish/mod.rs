//! Every API write: VolumeLeftovers (the writer), Events, the OpenReports ClusterReport, the
//! leader election Lease.

pub mod events;
pub mod leader;
pub mod report;
pub mod writer;
