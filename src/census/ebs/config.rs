//! The `ebs` sections of the census configuration file: parsing and checking only (no client
//! is made here). Compiled whatever the build's features, so that a file naming EBS is read the
//! same by every build, and a build without the `ebs` feature reports its scopes failed saying
//! so.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::vocabulary as ebs;
use crate::census::section::{Section, check_endpoint, check_nonempty};
use crate::decide::census::Scope;

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

impl Section for EbsSection {
    fn scopes_up_front(&self) -> Vec<Scope> {
        std::iter::once(self.scope())
            .chain(self.snapshot_scope())
            .collect()
    }

    fn cluster_name(&self) -> Option<&str> {
        self.cluster_name.as_deref()
    }
}

/// Checks the `ebs` sections: each names a region, each region (of an account) once; the keys
/// given are not empty and the endpoint is an http(s) URL.
pub(crate) fn check(sections: &[EbsSection]) -> Result<(), String> {
    let mut scopes = BTreeSet::new();
    for e in sections {
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
    Ok(())
}
