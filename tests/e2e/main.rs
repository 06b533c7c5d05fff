//! End-to-end tests against real control planes (etcd, kube-apiserver, kube-controller-manager
//! built from Go modules by controlplane/build.sh). One test binary, so each control plane is
//! started once and shared.

mod lifecycle;
mod operator;
mod support;
