//! The census configuration file (`--census-config`): which backends to census (Ceph clusters
//! and pools, GCE projects, EBS regions, Azure resource groups) and how to reach them. Parsing and checking only: no
//! client is made here.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::census::azure::config::AzureSection;
use crate::census::ceph::config::ClusterConfig;
use crate::census::{ebs::vocabulary as ebs, gce::vocabulary as gce};
use crate::decide::census::{Census, PoolKey, Scope};

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

/// One GCE project.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct GceSection {
    /// The project id.
    pub(crate) project: String,
    /// The zones (`europe-west1-b`) and regions (`europe-west1`) to list, each on its own;
    /// absent: every zone and region, in one aggregated listing (its scopes are known only
    /// once it has answered).
    #[serde(default)]
    pub(crate) locations: Option<Vec<String>>,
    /// This cluster's name in the disks' cluster label; absent: the top-level `clusterName`.
    #[serde(default)]
    pub(crate) cluster_name: Option<String>,
    /// The label naming a disk's cluster; absent: `goog-k8s-cluster-name`.
    #[serde(default)]
    pub(crate) cluster_label: Option<String>,
    /// A service-account key file (JSON); absent: Application Default Credentials.
    #[serde(default)]
    pub(crate) key_file: Option<PathBuf>,
    /// Another Compute endpoint than Google's (the tests' server).
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// Also census the project's snapshots that the PD CSI driver made, against the
    /// VolumeSnapshotContents that name them (needs `compute.snapshots.list`). Off by default:
    /// a role granted for the disks alone would fail it.
    #[serde(default)]
    pub(crate) snapshots: bool,
}

/// One EBS region (of one account).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct EbsSection {
    /// The region (`eu-west-1`).
    pub(crate) region: String,
    /// The account id, a label of the scope (the credentials decide which account is read).
    #[serde(default)]
    pub(crate) account: Option<String>,
    /// This cluster's name in the volumes' tags; absent: the top-level `clusterName`.
    #[serde(default)]
    pub(crate) cluster_name: Option<String>,
    /// An extra tag key whose value names a volume's cluster.
    #[serde(default)]
    pub(crate) cluster_tag: Option<String>,
    /// Another EC2 endpoint than the region's (a VPC endpoint; the tests' moto).
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// Also census the region's snapshots that the EBS CSI driver made (tag
    /// `CSIVolumeSnapshotName`), against the VolumeSnapshotContents that name them (needs
    /// `ec2:DescribeSnapshots`). Off by default: a policy granted for the volumes alone would
    /// fail it.
    #[serde(default)]
    pub(crate) snapshots: bool,
}

pub(crate) use crate::model::csi::GceLocation;

impl GceSection {
    /// The locations, when they are given (checked by [`CensusConfig::parse`]).
    pub(crate) fn locations(&self) -> Option<Vec<GceLocation>> {
        self.locations
            .as_ref()
            .map(|l| l.iter().filter_map(|s| GceLocation::parse(s)).collect())
    }

    /// The scopes known before any listing: one per given location; for an aggregated listing,
    /// the project's own ([`Scope::GceProject`]: its zones and regions join as they are listed).
    pub(crate) fn scopes(&self) -> Vec<Scope> {
        let Some(locations) = self.locations() else {
            return vec![gce::project(&self.project)];
        };
        locations
            .into_iter()
            .map(|l| gce::location(&self.project, l.name()))
            .collect()
    }

    /// The scope of its snapshots, when they are censused.
    pub(crate) fn snapshot_scope(&self) -> Option<Scope> {
        self.snapshots.then(|| gce::snapshots(&self.project))
    }
}

impl EbsSection {
    /// Its scope.
    pub(crate) fn scope(&self) -> Scope {
        ebs::region(self.account.as_deref(), &self.region)
    }

    /// The scope of its snapshots, when they are censused.
    pub(crate) fn snapshot_scope(&self) -> Option<Scope> {
        self.snapshots
            .then(|| ebs::snapshots(self.account.as_deref(), &self.region))
    }
}

/// An endpoint must be an http(s) URL.
fn check_endpoint(what: &str, e: &Option<String>) -> Result<(), String> {
    match e {
        Some(e) if !(e.starts_with("http://") || e.starts_with("https://")) => Err(format!(
            "{what}: endpoint {e:?} is not an http:// or https:// URL"
        )),
        _ => Ok(()),
    }
}

/// A key given must not be empty.
fn check_nonempty(what: &str, field: &str, v: &Option<String>) -> Result<(), String> {
    match v {
        Some(v) if v.is_empty() => Err(format!("{what}: {field} is empty")),
        _ => Ok(()),
    }
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
        let mut projects = BTreeSet::new();
        for g in &c.gce {
            if g.project.is_empty() {
                return Err("a gce section without project".into());
            }
            let what = format!("gce project {}", g.project);
            if !projects.insert(&g.project) {
                return Err(format!("{what} is listed twice"));
            }
            if let Some(locations) = &g.locations {
                if locations.is_empty() {
                    return Err(format!(
                        "{what}: locations is empty (leave it out to list every location)"
                    ));
                }
                let mut seen = BTreeSet::new();
                for l in locations {
                    if GceLocation::parse(l).is_none() {
                        return Err(format!(
                            "{what}: location {l:?} is neither a zone (europe-west1-b) nor a region (europe-west1)"
                        ));
                    }
                    if !seen.insert(l) {
                        return Err(format!("{what}: location {l} is listed twice"));
                    }
                }
            }
            check_nonempty(&what, "clusterName", &g.cluster_name)?;
            check_nonempty(&what, "clusterLabel", &g.cluster_label)?;
            check_endpoint(&what, &g.endpoint)?;
        }
        let mut scopes = BTreeSet::new();
        for e in &c.ebs {
            if e.region.is_empty() {
                return Err("an ebs section without region".into());
            }
            let what = e.scope().to_string();
            if !scopes.insert(e.scope()) {
                return Err(format!("{what} is listed twice"));
            }
            check_nonempty(&what, "account", &e.account)?;
            check_nonempty(&what, "clusterName", &e.cluster_name)?;
            check_nonempty(&what, "clusterTag", &e.cluster_tag)?;
            check_endpoint(&what, &e.endpoint)?;
        }
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
                .chain(self.gce.iter().flat_map(GceSection::scopes))
                .chain(self.gce.iter().filter_map(GceSection::snapshot_scope))
                .chain(self.ebs.iter().map(EbsSection::scope))
                .chain(self.ebs.iter().filter_map(EbsSection::snapshot_scope))
                .chain(self.azure.iter().flat_map(AzureSection::scopes))
                .chain(self.azure.iter().flat_map(AzureSection::snapshot_scopes)),
            self.cluster_name.as_deref(),
            image_grace,
        );
        for g in &self.gce {
            let name = g.cluster_name.as_deref();
            for s in g.scopes().into_iter().chain(g.snapshot_scope()) {
                c.name_cluster(&s, name);
            }
            if g.locations.is_none() {
                c.open_whole(gce::project(&g.project), name);
            }
        }
        for e in &self.ebs {
            for s in std::iter::once(e.scope()).chain(e.snapshot_scope()) {
                c.name_cluster(&s, e.cluster_name.as_deref());
            }
        }
        for a in &self.azure {
            for s in a.scopes().into_iter().chain(a.snapshot_scopes()) {
                c.name_cluster(&s, a.cluster_name.as_deref());
            }
        }
        c
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
