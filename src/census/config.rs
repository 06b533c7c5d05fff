//! The census configuration file (`--census-config`): which backends to census (Ceph clusters
//! and pools, GCE projects, EBS regions, Azure resource groups) and how to reach them. Parsing and checking only: no
//! client is made here.

use std::time::Duration;

use serde::Deserialize;

use crate::census::azure::config::AzureSection;
use crate::census::ceph::config::ClusterConfig;
use crate::census::ceph::handle::PoolKey;
use crate::census::ebs::config::EbsSection;
use crate::census::gce::config::GceSection;
use crate::census::section::Section;
use crate::decide::census::{Census, Scope};

/// The census configuration file (`--census-config`), YAML. At least one backend is named;
/// each section is optional.
///
/// ```yaml
/// clusterName: prod-eu-1          # this cluster's name in the disks' ownership metadata
/// clusters:                       # Ceph
///   - clusterID: 4a7d...          # ceph-csi's clusterID (its config map's key)
///     monitors: ["10.0.0.1:6789", "10.0.0.2:6789"]
///     user: leftovers             # a read-only Ceph user
///     keyring: /etc/volume-leftovers/ceph/keyring
///     pools:
///       - name: replicapool
///       - name: shared
///         radosNamespace: team-a
/// gce:
///   - project: my-project
///     locations: [europe-west1, europe-west1-b]   # absent: every zone and region
///     clusterName: prod-eu-1                      # GKE's goog-k8s-cluster-name value
///     clusterLabel: goog-k8s-cluster-name
///     keyFile: /etc/volume-leftovers/gce/key.json # absent: Application Default Credentials
///     snapshots: true                             # also the PD CSI driver's snapshots
/// ebs:
///   - region: eu-west-1
///     account: "123456789012"     # a label of the scope
///     clusterName: prod-eu-1
///     clusterTag: my-cluster-tag  # an extra tag key naming the cluster
///     snapshots: true             # also the EBS CSI driver's snapshots (ec2:DescribeSnapshots)
/// azure:                          # see census::azure::config::AzureSection
///   - subscription: 00000000-0000-0000-0000-000000000000
///     resourceGroups: [MC_prod_aks_westeurope]
///     nodeResourceGroup: true
/// ```
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CensusConfig {
    /// The name the provisioners record for this Kubernetes cluster (ceph-csi's `clusterName`,
    /// image metadata `csi.ceph.com/cluster/name`; the default of each cloud section's). A disk
    /// whose metadata names another cluster is not this cluster's and never a finding.
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// The Ceph clusters to census.
    #[serde(default)]
    pub clusters: Vec<ClusterConfig>,
    /// The GCE projects to census.
    #[serde(default)]
    pub(crate) gce: Vec<GceSection>,
    /// The EBS regions to census.
    #[serde(default)]
    pub(crate) ebs: Vec<EbsSection>,
    /// The Azure subscriptions' resource groups to census.
    #[serde(default)]
    pub(crate) azure: Vec<AzureSection>,
}

impl CensusConfig {
    /// Parses and checks the file's text.
    pub fn parse(text: &str) -> Result<CensusConfig, String> {
        let c: CensusConfig = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        if c.clusters.is_empty() && c.gce.is_empty() && c.ebs.is_empty() && c.azure.is_empty() {
            return Err(
                "no clusters, gce projects, ebs regions or azure subscriptions: nothing to census"
                    .into(),
            );
        }
        crate::census::ceph::config::check(&c.clusters)?;
        crate::census::gce::config::check(&c.gce)?;
        crate::census::ebs::config::check(&c.ebs)?;
        crate::census::azure::config::check(&c.azure, c.cluster_name.as_deref())?;
        Ok(c)
    }

    /// The census before any listing: every scope known up front (each Ceph pool, each
    /// configured GCE location, each EBS region, the snapshots of each section that asks for
    /// them) answers Unknown; the scopes of an aggregated GCE listing join as they are listed.
    /// Each cloud section's `clusterName` names this cluster in its scopes (else the file's).
    pub fn census(&self, image_grace: Duration) -> Census {
        let mut c = Census::new(
            self.pools()
                .map(Scope::from)
                .chain(self.sections().flat_map(|s| s.scopes_up_front())),
            self.cluster_name.as_deref(),
            image_grace,
        );
        for section in self.sections() {
            let name = section.cluster_name();
            for s in section.scopes_up_front() {
                c.name_cluster(&s, name);
            }
            for whole in section.wholes() {
                c.open_whole(whole, name);
            }
        }
        c
    }

    /// Every cloud backend's sections: one line per backend.
    fn sections(&self) -> impl Iterator<Item = &dyn Section> + '_ {
        let gce = self.gce.iter().map(|s| s as &dyn Section);
        let ebs = self.ebs.iter().map(|s| s as &dyn Section);
        let azure = self.azure.iter().map(|s| s as &dyn Section);
        gce.chain(ebs).chain(azure)
    }

    /// Every Ceph pool, keyed.
    pub fn pools(&self) -> impl Iterator<Item = PoolKey> + '_ {
        self.clusters.iter().flat_map(|c| {
            c.pools
                .iter()
                .map(|p| PoolKey::new(&c.cluster_id, &p.name, p.rados_namespace.as_deref()))
        })
    }
}
