//! End-to-end tests against real control planes (etcd, kube-apiserver, kube-controller-manager
//! built from Go modules by controlplane/build.sh). One test binary, so each shared control
//! plane is started once.

#[cfg(feature = "azure")]
mod azure_census;
mod census;
mod ceph;
mod chart;
#[cfg(feature = "ebs")]
mod cloud;
// The cloud backends' scan: built with both (the default features).
#[cfg(all(feature = "gce", feature = "ebs"))]
mod cloud_scan;
mod cost;
mod csi;
mod demo;
mod deploy;
mod exclusions;
mod expansion;
mod explain;
mod fault;
mod gauges;
#[cfg(feature = "gce")]
mod gce_census;
mod ha;
mod handoff;
mod image;
mod lifecycle;
mod node;
mod odd;
// scan and the operator over one world of every backend: built with both.
#[cfg(all(feature = "gce", feature = "ebs"))]
mod one_truth;
mod operator;
mod quiet;
mod rbac;
mod release;
mod snapshots;
mod startup;
mod support;
mod tombstone;
mod trust;
