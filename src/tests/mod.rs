//! Unit tests of the pure logic: classification, planning, the reference index, the scan report,
//! the CRD and the command line. No API server, no clock: time is a fixed argument.

mod census;
mod census_cloud;
mod census_result;
mod census_snapshots;
mod classify;
mod cli;
mod cost;
mod crd;
mod disk;
mod events;
mod expansion;
mod explain;
mod feed;
mod fixtures;
mod health;
mod index;
mod leader;
mod leftover;
mod machine;
mod metrics;
mod name;
mod one_truth;
mod output;
mod plan;
mod props;
mod quantity;
mod report;
mod scan;
mod schedule;
mod selector;
mod size;
mod snapshot;
mod snapshot_loop;
mod volume;
mod writer;
