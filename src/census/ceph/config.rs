//! The Ceph part of the census configuration file ([`crate::census::config::CensusConfig`]):
//! which Ceph clusters and pools to list, and how to reach them.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;

use super::handle::PoolKey;

/// One Ceph cluster.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConfig {
    /// ceph-csi's `clusterID` for it (the `clusterID` volume attribute, and the id in volume
    /// handles).
    #[serde(rename = "clusterID")]
    pub(crate) cluster_id: String,
    /// Monitor addresses (`10.0.0.1:6789`, or `[v2:...,v1:...]`).
    #[serde(default)]
    pub(crate) monitors: Vec<String>,
    /// The Ceph user, without `client.`.
    #[serde(default = "default_user")]
    pub(crate) user: String,
    /// A keyring file with the user's key.
    #[serde(default)]
    pub(crate) keyring: Option<PathBuf>,
    /// A file holding only the user's key (as `ceph auth get-key` prints it; a Secret's key).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// A `ceph.conf` to read first.
    #[serde(default)]
    pub(crate) conf_file: Option<PathBuf>,
    /// The pools to census.
    pub(crate) pools: Vec<PoolConfig>,
}

fn default_user() -> String {
    "leftovers".into()
}

/// One pool (one RADOS namespace of it).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct PoolConfig {
    /// The pool's name.
    pub(crate) name: String,
    /// The RADOS namespace (ceph-csi's `radosNamespace`); the default namespace when unset.
    #[serde(default)]
    pub(crate) rados_namespace: Option<String>,
}

/// Checks the Ceph clusters: each names its id, monitors (or a `ceph.conf`) and its pools, and
/// no pool is listed twice.
pub(crate) fn check(clusters: &[ClusterConfig]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for cl in clusters {
        if cl.cluster_id.is_empty() {
            return Err("a cluster without clusterID".into());
        }
        if cl.pools.is_empty() {
            return Err(format!("cluster {}: no pools", cl.cluster_id));
        }
        if cl.monitors.is_empty() && cl.conf_file.is_none() {
            return Err(format!(
                "cluster {}: neither monitors nor confFile",
                cl.cluster_id
            ));
        }
        for p in &cl.pools {
            if p.name.is_empty() {
                return Err(format!("cluster {}: a pool without a name", cl.cluster_id));
            }
            if !seen.insert(PoolKey::new(
                &cl.cluster_id,
                &p.name,
                p.rados_namespace.as_deref(),
            )) {
                return Err(format!(
                    "cluster {}: pool {} is listed twice",
                    cl.cluster_id, p.name
                ));
            }
        }
    }
    Ok(())
}
