//! The `gce` sections of the census configuration file: parsing and checking only (no client
//! is made here). Compiled whatever the build's features, so that a file naming GCE is read the
//! same by every build, and a build without the `gce` feature reports its scopes failed saying
//! so.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Deserialize;

pub(crate) use super::handle::GceLocation;
use super::vocabulary as gce;
use crate::census::section::{Section, check_endpoint, check_nonempty};
use crate::decide::census::Scope;

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

impl GceSection {
    /// The locations, when they are given (checked by [`CensusConfig::parse`]).
    pub(crate) fn locations(&self) -> Option<Vec<GceLocation>> {
        self.locations
            .as_ref()
            .map(|l| l.iter().filter_map(|s| GceLocation::parse(s)).collect())
    }

    /// The scopes known before any listing: one per given location; for an aggregated listing,
    /// the project's own ([`gce::project`]: its zones and regions join as they are listed).
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

impl Section for GceSection {
    fn scopes_up_front(&self) -> Vec<Scope> {
        let mut all = self.scopes();
        all.extend(self.snapshot_scope());
        all
    }

    /// An aggregated listing's project.
    fn wholes(&self) -> Vec<Scope> {
        match self.locations {
            None => vec![gce::project(&self.project)],
            Some(_) => Vec::new(),
        }
    }

    fn cluster_name(&self) -> Option<&str> {
        self.cluster_name.as_deref()
    }
}

/// Checks the `gce` sections: each names a project, once; its locations (when given) are zones
/// or regions, each once; the keys given are not empty and the endpoint is an http(s) URL.
pub(crate) fn check(sections: &[GceSection]) -> Result<(), String> {
    let mut projects = BTreeSet::new();
    for g in sections {
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
    Ok(())
}
