//! The `azure` sections of the census configuration file: parsing and checking only (no client
//! is made here). Compiled whatever the build's features, so that a file naming Azure is read
//! the same by every build, and a build without the `azure` feature reports its scopes failed
//! saying so.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;

use crate::decide::census::Scope;

/// One Azure subscription's resource groups.
///
/// ```yaml
/// azure:
///   - subscription: 00000000-0000-0000-0000-000000000000
///     resourceGroups: [MC_prod_aks_westeurope]   # AKS's node resource group holds its disks
///     nodeResourceGroup: true   # the groups are this cluster's own: their disks are ours
///     clusterName: prod-eu-1
///     clusterTag: cluster       # a tag key whose value names a disk's cluster
///     snapshots: true           # also the Azure Disk CSI driver's snapshots
///     # Credentials: AKS Workload Identity by default (the webhook's AZURE_* environment);
///     # a client secret with these three; else the pod's managed identity.
///     tenantId: 11111111-1111-1111-1111-111111111111
///     clientId: 22222222-2222-2222-2222-222222222222
///     clientSecretFile: /etc/volume-leftovers/azure/client-secret
/// ```
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct AzureSection {
    /// The subscription id.
    pub(crate) subscription: String,
    /// The resource groups whose disks are censused, each a scope of its own.
    pub(crate) resource_groups: Vec<String>,
    /// Whether the resource groups are this cluster's own (AKS's node resource group,
    /// `MC_<group>_<cluster>_<region>`): a disk in them that no tag says is another cluster's
    /// is this cluster's. Needs a `clusterName` (here or the file's). Off: a disk is this
    /// cluster's only when its tags say so, and `OwnerUnknown` when they say nothing.
    #[serde(default)]
    pub(crate) node_resource_group: bool,
    /// This cluster's name in the disks' cluster tag; absent: the top-level `clusterName`.
    #[serde(default)]
    pub(crate) cluster_name: Option<String>,
    /// The tag key whose value names a disk's cluster (the Azure Disk CSI driver records none
    /// of its own: a StorageClass's `tags` parameter can add one).
    #[serde(default)]
    pub(crate) cluster_tag: Option<String>,
    /// The Entra tenant of the client secret or workload identity; absent: `AZURE_TENANT_ID`.
    #[serde(default)]
    pub(crate) tenant_id: Option<String>,
    /// The application (client) id; absent: `AZURE_CLIENT_ID`.
    #[serde(default)]
    pub(crate) client_id: Option<String>,
    /// A file holding a client secret (a mounted Secret): the census signs in with it.
    #[serde(default)]
    pub(crate) client_secret_file: Option<PathBuf>,
    /// A file holding a federated (service account) token; absent: `AZURE_FEDERATED_TOKEN_FILE`,
    /// which AKS's Workload Identity webhook sets.
    #[serde(default)]
    pub(crate) federated_token_file: Option<PathBuf>,
    /// Microsoft Entra's sign-in host; absent: `AZURE_AUTHORITY_HOST`, else
    /// `https://login.microsoftonline.com`. HTTPS only.
    #[serde(default)]
    pub(crate) authority_host: Option<String>,
    /// Another Resource Manager endpoint than `https://management.azure.com` (the tests'
    /// server). HTTPS only.
    #[serde(default)]
    pub(crate) endpoint: Option<String>,
    /// A PEM file of certificate authorities to trust besides the system's (a TLS-inspecting
    /// proxy's; the tests' server).
    #[serde(default)]
    pub(crate) ca_file: Option<PathBuf>,
    /// Also census the resource groups' snapshots that the Azure Disk CSI driver made, against
    /// the VolumeSnapshotContents that name them (needs `Microsoft.Compute/snapshots/read`).
    /// Off by default: a role granted for the disks alone would fail it.
    #[serde(default)]
    pub(crate) snapshots: bool,
}

impl crate::census::section::Section for AzureSection {
    fn scopes_up_front(&self) -> Vec<Scope> {
        let mut all = self.scopes();
        all.extend(self.snapshot_scopes());
        all
    }

    fn cluster_name(&self) -> Option<&str> {
        self.cluster_name.as_deref()
    }
}

impl AzureSection {
    /// The scope of the disks of its resource group `rg`.
    pub(crate) fn scope_of(&self, rg: &str) -> Scope {
        super::vocabulary::resource_group(&self.subscription, rg)
    }

    /// The scope of the snapshots of its resource group `rg`, when they are censused.
    pub(crate) fn snapshot_scope_of(&self, rg: &str) -> Option<Scope> {
        self.snapshots
            .then(|| super::vocabulary::snapshots(&self.subscription, rg))
    }

    /// Its disk scopes, one per resource group.
    pub(crate) fn scopes(&self) -> Vec<Scope> {
        self.resource_groups
            .iter()
            .map(|rg| self.scope_of(rg))
            .collect()
    }

    /// The scopes of its snapshots, when they are censused.
    pub(crate) fn snapshot_scopes(&self) -> Vec<Scope> {
        self.resource_groups
            .iter()
            .filter_map(|rg| self.snapshot_scope_of(rg))
            .collect()
    }
}

/// Checks the `azure` sections: each names a subscription and resource groups, no resource
/// group is censused twice (in any case), endpoints are HTTPS (Microsoft's crates refuse
/// anything else), and a node resource group can name this cluster. `file_cluster_name` is
/// the file's top-level `clusterName`.
pub(crate) fn check(
    sections: &[AzureSection],
    file_cluster_name: Option<&str>,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for a in sections {
        if a.subscription.is_empty() {
            return Err("an azure section without subscription".into());
        }
        let what = format!("azure subscription {}", a.subscription);
        if a.resource_groups.is_empty() {
            return Err(format!(
                "{what}: resourceGroups is empty (name the groups whose disks to census: AKS's node resource group)"
            ));
        }
        for (rg, scope) in a.resource_groups.iter().zip(a.scopes()) {
            if rg.is_empty() {
                return Err(format!("{what}: a resource group is empty"));
            }
            if !seen.insert(scope) {
                return Err(format!("{what}: resource group {rg} is listed twice"));
            }
        }
        for (field, v) in [
            ("clusterName", &a.cluster_name),
            ("clusterTag", &a.cluster_tag),
            ("tenantId", &a.tenant_id),
            ("clientId", &a.client_id),
        ] {
            if v.as_ref().is_some_and(|v| v.is_empty()) {
                return Err(format!("{what}: {field} is empty"));
            }
        }
        for (field, v) in [
            ("endpoint", &a.endpoint),
            ("authorityHost", &a.authority_host),
        ] {
            if let Some(v) = v
                && !v.starts_with("https://")
            {
                return Err(format!(
                    "{what}: {field} {v:?} is not an https:// URL (Azure's clients refuse anything else)"
                ));
            }
        }
        if a.client_secret_file.is_some() && a.federated_token_file.is_some() {
            return Err(format!(
                "{what}: clientSecretFile and federatedTokenFile are two credentials: give one"
            ));
        }
        if a.node_resource_group
            && a.cluster_name.is_none()
            && file_cluster_name.is_none_or(str::is_empty)
        {
            return Err(format!(
                "{what}: nodeResourceGroup needs a clusterName (here or at the top of the file): it is the name its disks are attributed to"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(rgs: &[&str]) -> AzureSection {
        AzureSection {
            subscription: "SUB-1".into(),
            resource_groups: rgs.iter().map(|s| s.to_string()).collect(),
            ..AzureSection::default()
        }
    }

    #[test]
    fn scopes_are_lower_cased_one_per_resource_group() {
        let mut a = section(&["MC_prod_aks_westeurope", "other"]);
        assert_eq!(
            a.scopes().iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            ["azure:sub-1/mc_prod_aks_westeurope", "azure:sub-1/other"]
        );
        assert!(a.snapshot_scopes().is_empty(), "snapshots are opt-in");
        a.snapshots = true;
        assert_eq!(
            a.snapshot_scopes()[0].to_string(),
            "azure:sub-1/mc_prod_aks_westeurope/snapshots"
        );
    }

    #[test]
    fn bad_sections_are_refused_saying_why() {
        let refused = |a: AzureSection, why: &str| {
            let e = check(&[a], None).unwrap_err();
            assert!(e.contains(why), "{e}");
        };
        refused(section(&[]), "resourceGroups is empty");
        refused(section(&["rg", "RG"]), "resource group RG is listed twice");
        refused(
            AzureSection {
                endpoint: Some("http://127.0.0.1:1".into()),
                ..section(&["rg"])
            },
            "is not an https:// URL",
        );
        refused(
            AzureSection {
                node_resource_group: true,
                ..section(&["rg"])
            },
            "nodeResourceGroup needs a clusterName",
        );
        refused(
            AzureSection {
                client_secret_file: Some("a".into()),
                federated_token_file: Some("b".into()),
                ..section(&["rg"])
            },
            "give one",
        );
        assert!(
            check(
                &[AzureSection {
                    node_resource_group: true,
                    ..section(&["rg"])
                }],
                Some("prod")
            )
            .is_ok(),
            "the file's clusterName serves"
        );
        let twice = check(&[section(&["rg"]), section(&["Rg"])], None).unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
    }
}
