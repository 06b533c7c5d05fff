//! The Azure backend's [`Lister`]: lists one section's resource groups (their disks, and their
//! snapshots when asked) and hands each scope's result (a complete [`ScopeListing`], or why
//! there is none) to the census loop as a [`CensusReport`].
//!
//! **I/O: reads Resource Manager through [`ArmClient`]; writes nothing.** The mapping from
//! the client's answers to the neutral census types ([`report_of`]) is pure.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::arm::{ArmClient, ArmConfig, Credential, GroupListing, Kind, endpoint_of};
use super::config::AzureSection;
use super::facts::{Attribution, AzureDisk, disk_facts, made_by_the_driver, snapshot_facts};
use crate::census::backend::{Lister, Reading};
use crate::census::{CensusFailure, CensusReport, CensusSettings};
use crate::decide::census::{DiskFacts, Scope, ScopeListing, Seen};
use crate::engine::clock::wall_clock;
use crate::model::listing::FailureCategory;

/// The report of one resource group's listing of disks or snapshots: every item by its
/// lower-cased name, with what the decisions read of it (`facts`).
pub(crate) fn report_of(
    key: Scope,
    listing: GroupListing,
    facts: impl Fn(&AzureDisk) -> DiskFacts,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    let result = listing.result.map(|items| ScopeListing {
        started,
        scope_id: None,
        images: items
            .iter()
            .map(|d| {
                (
                    d.key.clone(),
                    Seen {
                        id: d.id.clone(),
                        detail: Some(Box::new(facts(d))),
                        size_only: None,
                        users_only: 0,
                    },
                )
            })
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    });
    CensusReport {
        key,
        result,
        requests: listing.pages,
        elapsed,
    }
}

/// The report of one resource group's listing of disks, as the lister hands it to the loop
/// (for the benchmarks, which list with the client themselves).
pub fn disks_report_of(
    key: Scope,
    listing: GroupListing,
    attribution: &Attribution,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    report_of(
        key,
        listing,
        |d| disk_facts(d, attribution),
        started,
        elapsed,
    )
}

/// The lister of one `azure` section: each of its resource groups' disks, then with
/// `snapshots: true` their snapshots that the Azure Disk CSI driver cut (each listing succeeds
/// or fails on its own: a role without `Microsoft.Compute/snapshots/read` fails only the
/// snapshots). A client that cannot be made (credentials) is tried again at the next listing,
/// and its failure reported for every scope of the section; after a refused sign-in the client
/// is made again, so that a rotated secret is read.
pub(crate) struct AzureSubscriptionLister {
    section: AzureSection,
    attribution: Attribution,
    timeout: Duration,
    deadline: Duration,
    client: Option<ArmClient>,
}

/// One lister per `azure` section, each request bounded by the census's timeout and each
/// resource group's listing by its deadline.
pub(crate) fn listers(settings: &CensusSettings) -> Vec<Box<dyn Lister>> {
    settings
        .config
        .azure
        .iter()
        .map(|s| {
            Box::new(AzureSubscriptionLister {
                attribution: Attribution {
                    cluster_tag: s.cluster_tag.clone(),
                    node_resource_group: s.node_resource_group,
                    ours: s
                        .cluster_name
                        .clone()
                        .or_else(|| settings.config.cluster_name.clone())
                        .filter(|n| !n.is_empty()),
                },
                section: s.clone(),
                timeout: settings.timeout,
                deadline: settings.deadline,
                client: None,
            }) as Box<dyn Lister>
        })
        .collect()
}

impl Lister for AzureSubscriptionLister {
    fn scopes(&self) -> Vec<Scope> {
        let mut s = self.section.scopes();
        s.extend(self.section.snapshot_scopes());
        s
    }

    fn list<'a>(&'a mut self, _reading: Reading<'a>) -> BoxFuture<'a, Vec<CensusReport>> {
        Box::pin(self.turn())
    }
}

impl AzureSubscriptionLister {
    /// The client's configuration, the credential chosen from the section and the process's
    /// environment.
    fn config(&self) -> Result<ArmConfig, CensusFailure> {
        let credential = Credential::choose(&self.section, |k| {
            std::env::var(k).ok().filter(|v| !v.is_empty())
        })
        .map_err(|e| {
            CensusFailure::new(
                FailureCategory::Auth,
                format!("no usable Azure credentials: {e}"),
            )
        })?;
        Ok(ArmConfig {
            subscription: self.section.subscription.clone(),
            credential,
            authority_host: self.section.authority_host.clone(),
            endpoint: endpoint_of(self.section.endpoint.as_deref()),
            ca_file: self.section.ca_file.clone(),
            attempt_timeout: self.timeout,
            retries: 2,
            backoff: Duration::from_secs(1),
            deadline: self.deadline,
        })
    }

    async fn turn(&mut self) -> Vec<CensusReport> {
        let started = Instant::now();
        if self.client.is_none() {
            match self.config().and_then(ArmClient::new) {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    return self
                        .scopes()
                        .into_iter()
                        .map(|key| CensusReport {
                            key,
                            result: Err(e.clone()),
                            requests: 0,
                            elapsed: started.elapsed(),
                        })
                        .collect();
                }
            }
        }
        let Some(client) = &self.client else {
            return Vec::new();
        };
        let a = &self.attribution;
        let mut reports = Vec::new();
        for rg in &self.section.resource_groups {
            let (started, at) = (Instant::now(), wall_clock());
            let listing = client.list(rg, Kind::Disks).await;
            reports.push(report_of(
                self.section.scope_of(rg),
                listing,
                |d| disk_facts(d, a),
                at,
                started.elapsed(),
            ));
            let Some(snapshots) = self.section.snapshot_scope_of(rg) else {
                continue;
            };
            let (started, at) = (Instant::now(), wall_clock());
            let mut listing = client.list(rg, Kind::Snapshots).await;
            // Only what the driver cut: a content can name nothing else.
            if let Ok(items) = &mut listing.result {
                items.retain(made_by_the_driver);
            }
            reports.push(report_of(
                snapshots,
                listing,
                |s| snapshot_facts(s, a),
                at,
                started.elapsed(),
            ));
        }
        // A refused sign-in: the next turn makes the client again, reading the credential anew
        // (a rotated client secret, a re-projected token file).
        if reports.iter().any(|r| {
            r.result
                .as_ref()
                .is_err_and(|e| e.kind.category() == FailureCategory::Auth)
        }) {
            self.client = None;
        }
        reports
    }
}
