//! The census configuration file (`--census-config`): which Ceph clusters and pools to list, and
//! how to reach them.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::decide::census::{Census, PoolKey};

/// The census configuration file (`--census-config`), YAML.
///
/// ```yaml
/// clusterName: prod-eu-1          # what ceph-csi records as csi.ceph.com/cluster/name here
/// clusters:
///   - clusterID: 4a7d...          # ceph-csi's clusterID (its config map's key)
///     monitors: ["10.0.0.1:6789", "10.0.0.2:6789"]
///     user: leftovers             # a read-only Ceph user
///     keyring: /etc/volume-leftovers/ceph/keyring
///     pools:
///       - name: replicapool
///       - name: shared
///         radosNamespace: team-a
/// ```
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CensusConfig {
    /// The name ceph-csi records for this Kubernetes cluster (`clusterName` in its config, image
    /// metadata `csi.ceph.com/cluster/name`). An image whose metadata names another cluster is
    /// not this cluster's and never a finding.
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// The Ceph clusters to census.
    pub clusters: Vec<ClusterConfig>,
}

/// One Ceph cluster.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConfig {
    /// ceph-csi's `clusterID` for it (the `clusterID` volume attribute, and the id in volume
    /// handles).
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// Monitor addresses (`10.0.0.1:6789`, or `[v2:...,v1:...]`).
    #[serde(default)]
    pub monitors: Vec<String>,
    /// The Ceph user, without `client.`.
    #[serde(default = "default_user")]
    pub user: String,
    /// A keyring file with the user's key.
    #[serde(default)]
    pub keyring: Option<PathBuf>,
    /// A file holding only the user's key (as `ceph auth get-key` prints it; a Secret's key).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// A `ceph.conf` to read first.
    #[serde(default)]
    pub conf_file: Option<PathBuf>,
    /// The pools to census.
    pub pools: Vec<PoolConfig>,
}

fn default_user() -> String {
    "leftovers".into()
}

/// One pool (one RADOS namespace of it).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PoolConfig {
    /// The pool's name.
    pub name: String,
    /// The RADOS namespace (ceph-csi's `radosNamespace`); the default namespace when unset.
    #[serde(default)]
    pub rados_namespace: Option<String>,
}

impl CensusConfig {
    /// Parses and checks the file's text.
    pub fn parse(text: &str) -> Result<CensusConfig, String> {
        let c: CensusConfig = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if c.clusters.is_empty() {
            return Err("no clusters".into());
        }
        let mut seen = BTreeSet::new();
        for cl in &c.clusters {
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
        Ok(c)
    }

    /// The census of these pools before any listing: every pool answers Unknown.
    pub fn census(&self, image_grace: Duration) -> Census {
        Census::new(self.pools(), self.cluster_name.as_deref(), image_grace)
    }

    /// Every pool, keyed.
    pub fn pools(&self) -> impl Iterator<Item = PoolKey> + '_ {
        self.clusters.iter().flat_map(|c| {
            c.pools
                .iter()
                .map(|p| PoolKey::new(&c.cluster_id, &p.name, p.rados_namespace.as_deref()))
        })
    }
}
