//! `scan`'s cloud census: each GCE project and EBS region of the census configuration (the
//! operator's file, the same sections) listed twice, recorded into the same [`Census`] as the
//! Ceph pools, and what a JSON line says of a cloud disk.
//!
//! **I/O: lists Compute Engine and EC2 through [`crate::census::gce`] and
//! [`crate::census::ebs`] (read-only); everything else here is pure.** As for Ceph, every scope
//! is listed twice before anything is classified: a disk counts as missing only when two
//! listings in a row lack it ([`Census::image`]). A scope whose listing failed either time is
//! reported ([`ScopeFailure`]: the scan exits 4); one that failed the second time is Unknown, so
//! nothing about its disks is concluded (no PV of it missing, no disk of it orphaned).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::census::CensusReport;
use crate::census::config::CensusConfig;
use crate::decide::census::{
    Census, DiskFacts, FailureKind, Owner, Resolved, Scope, Snapshot, disk_ref, recorded_scope,
};
use crate::model::crd::{Reason, Subject};
use crate::model::finding::Finding;

/// A cloud scope (a zone, a region, or a project listed as a whole) whose listing failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeFailure {
    /// The backend: `gce`, `ebs`.
    pub(crate) backend: &'static str,
    /// The scope (`gce:p/europe-west1-b`, `ebs:123456789012/eu-west-1`, or `gce:p` for the
    /// aggregated listing of a whole project).
    pub(crate) scope: String,
    /// What kind of problem it is.
    pub(crate) kind: FailureKind,
    /// What failed, in one line.
    pub(crate) message: String,
    /// What the scope holds, of which nothing is said: `disks` or `snapshots`.
    pub(crate) holds: &'static str,
}

impl std::fmt::Display for ScopeFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let backend = match self.backend {
            "gce" => "GCE",
            "ebs" => "EBS",
            other => other,
        };
        write!(
            f,
            "the {backend} census of {} failed ({}): {}; nothing is said about its {}",
            self.scope,
            self.kind.category.as_str(),
            self.message,
            self.holds
        )
    }
}

/// The failures of the scans' listings, by scope (the last one of each).
pub(crate) type Failures = BTreeMap<String, ScopeFailure>;

/// Records one listing's reports into `census` (adding the scopes an aggregated listing names
/// that the configuration did not), and each failure into `failed`. A failure is kept even when
/// the other listing of the scope worked: one listing is not two, and the scan is incomplete.
/// `section_cluster` is the section's own `clusterName`, when it differs from the file's: a disk
/// naming it is this cluster's ([`as_census_names`]).
pub(crate) fn record(
    census: &mut Census,
    reports: Vec<CensusReport>,
    section_cluster: Option<&str>,
    failed: &mut Failures,
) {
    for r in reports {
        let key = r.key;
        census.pools.entry(key.clone()).or_default();
        let result = match r.result {
            Ok(mut snap) => {
                as_census_names(&mut snap, section_cluster, census.cluster_name.as_deref());
                Ok(snap)
            }
            Err(f) => {
                failed.insert(
                    key.to_string(),
                    ScopeFailure {
                        backend: key.backend(),
                        scope: key.to_string(),
                        kind: f.kind,
                        message: f.message.clone(),
                        holds: if key.holds_snapshots() {
                            "snapshots"
                        } else {
                            "disks"
                        },
                    },
                );
                Err(f.message)
            }
        };
        census.record(&key, result);
    }
}

/// A section may name this cluster otherwise than the file's `clusterName` (GKE's cluster name
/// beside ceph-csi's): a disk naming the section's name is this cluster's, so it is recorded
/// under the census's name, which [`DiskFacts::owner`] compares with.
pub(crate) fn as_census_names(snap: &mut Snapshot, section: Option<&str>, census: Option<&str>) {
    let (Some(section), Some(census)) = (section, census) else {
        return;
    };
    if section == census {
        return;
    }
    for seen in snap.images.values_mut() {
        if let Some(d) = seen.detail.as_mut()
            && d.cluster.as_deref() == Some(section)
        {
            d.cluster = Some(census.to_string());
        }
    }
}

/// Lists every GCE project and EBS region of `config` twice, recording into `census`; returns
/// the scopes that failed.
pub(crate) async fn census_twice(config: &CensusConfig, census: &mut Census) -> Failures {
    let mut failed = Failures::new();
    for section in &config.gce {
        gce::twice(section, census, &mut failed).await;
    }
    for section in &config.ebs {
        ebs::twice(section, config.cluster_name.as_deref(), census, &mut failed).await;
    }
    failed
}

#[cfg(feature = "gce")]
mod gce {
    use std::collections::BTreeSet;
    use std::time::Instant;

    use super::{Failures, record};
    use crate::census::config::GceSection;
    use crate::census::gce::census::{self, reports_of, snapshots_report_of};
    use crate::census::gce::{GceConfig, GceLister};
    use crate::census::{CensusFailure, CensusReport};
    use crate::decide::census::{Census, Scope};
    use crate::engine::clock::wall_clock;

    /// The lister's configuration for a section: the operator's ([`census::config_of`]), with
    /// the listing's default bounds.
    pub(crate) fn config_of(section: &GceSection) -> GceConfig {
        let bounds = GceConfig::new(String::new());
        census::config_of(section, bounds.attempt_timeout, bounds.deadline)
    }

    /// One project, listed twice: its disks, then (with `snapshots: true`) its snapshots.
    pub(crate) async fn twice(section: &GceSection, census: &mut Census, failed: &mut Failures) {
        let project = section.project.clone();
        let mut known: BTreeSet<Scope> = section.scopes().into_iter().collect();
        // A lister that cannot be made fails the snapshots' scope too: none was listed.
        let unlisted: Vec<Scope> = section.snapshot_scope().into_iter().collect();
        let fail_known = |known: &BTreeSet<Scope>, e: CensusFailure| -> Vec<CensusReport> {
            known
                .iter()
                .chain(&unlisted)
                .map(|key| CensusReport {
                    key: key.clone(),
                    result: Err(e.clone()),
                    requests: 0,
                    elapsed: std::time::Duration::ZERO,
                })
                .collect()
        };
        let lister = match GceLister::new(config_of(section)).await {
            Ok(l) => l,
            Err(e) => {
                let f = CensusFailure::caused(e.category, None, e);
                record(census, fail_known(&known, f), None, failed);
                return;
            }
        };
        let ours = section.cluster_name.as_deref();
        for _ in 0..2 {
            let started = Instant::now();
            let at = wall_clock();
            let listing = lister.list().await;
            let reports = reports_of(listing, &project, &mut known, at, started.elapsed());
            record(census, reports, ours, failed);
            if section.snapshots {
                let started = Instant::now();
                let at = wall_clock();
                let listing = lister.list_snapshots().await;
                let report = snapshots_report_of(listing, &project, at, started.elapsed());
                record(census, vec![report], ours, failed);
            }
        }
    }
}

#[cfg(not(feature = "gce"))]
mod gce {
    use super::{Failures, record};
    use crate::census::config::GceSection;
    use crate::census::{CensusFailure, CensusReport};
    use crate::decide::census::{Census, FailureCategory, FailureKind};

    /// Without the `gce` feature no scope can be listed: each fails, named.
    pub(crate) async fn twice(section: &GceSection, census: &mut Census, failed: &mut Failures) {
        let message = "this build has no GCE census (the gce feature is off)".to_string();
        let f = CensusFailure::new(FailureKind::of(FailureCategory::Other), message.clone());
        let reports = section
            .scopes()
            .into_iter()
            .chain(section.snapshot_scope())
            .map(|key| CensusReport {
                key,
                result: Err(f.clone()),
                requests: 0,
                elapsed: std::time::Duration::ZERO,
            })
            .collect();
        record(census, reports, None, failed);
    }
}

#[cfg(feature = "ebs")]
mod ebs {
    use std::time::Instant;

    use super::{Failures, record};
    use crate::census::config::EbsSection;
    use crate::census::ebs::census::{self, report_of, snapshots_report_of};
    use crate::census::ebs::{Ebs, EbsConfig};
    use crate::decide::census::Census;
    use crate::engine::clock::wall_clock;

    /// The listing's configuration for a section: the operator's ([`census::config_of`]), with
    /// the listing's default bounds.
    pub(crate) fn config_of(section: &EbsSection) -> EbsConfig {
        let bounds = EbsConfig::new(String::new());
        census::config_of(section, bounds.attempt_timeout, bounds.deadline)
    }

    /// One region, listed twice: its volumes, then (with `snapshots: true`) the driver's
    /// snapshots. `top` is the file's `clusterName`.
    pub(crate) async fn twice(
        section: &EbsSection,
        top: Option<&str>,
        census: &mut Census,
        failed: &mut Failures,
    ) {
        let config = config_of(section);
        let ebs = Ebs::connect(config.clone()).await;
        let ours = section.cluster_name.as_deref().or(top);
        for _ in 0..2 {
            let started = Instant::now();
            let at = wall_clock();
            let listed = ebs.list().await;
            let report = report_of(
                listed,
                &config,
                ours,
                section.cluster_tag.as_deref(),
                at,
                started.elapsed(),
            );
            record(census, vec![report], ours, failed);
            if section.snapshots {
                let started = Instant::now();
                let at = wall_clock();
                let listed = ebs.list_snapshots().await;
                let report = snapshots_report_of(
                    listed,
                    &config,
                    ours,
                    section.cluster_tag.as_deref(),
                    at,
                    started.elapsed(),
                );
                record(census, vec![report], ours, failed);
            }
        }
    }
}

#[cfg(not(feature = "ebs"))]
mod ebs {
    use super::{Failures, record};
    use crate::census::config::EbsSection;
    use crate::census::{CensusFailure, CensusReport};
    use crate::decide::census::{Census, FailureCategory, FailureKind};

    /// Without the `ebs` feature the region cannot be listed: it fails, named.
    pub(crate) async fn twice(
        section: &EbsSection,
        _top: Option<&str>,
        census: &mut Census,
        failed: &mut Failures,
    ) {
        let f = CensusFailure::new(
            FailureKind::of(FailureCategory::Other),
            "this build has no EBS census (the ebs feature is off)".into(),
        );
        let reports = std::iter::once(section.scope())
            .chain(section.snapshot_scope())
            .map(|key| CensusReport {
                key,
                result: Err(f.clone()),
                requests: 0,
                elapsed: std::time::Duration::ZERO,
            })
            .collect();
        record(census, reports, None, failed);
    }
}

/// What a JSON line says of a cloud disk, after the keys every line has: which backend and
/// scope, and (for a disk no PV names) what the listing read of it. Absent from Ceph's and
/// other lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct DiskKeys {
    /// `gce` or `ebs`.
    pub(crate) backend: &'static str,
    /// The scope, as the stderr lines name it (`gce:p/europe-west1-b`, `ebs:eu-west-1`).
    pub(crate) scope: String,
    /// The GCE project.
    pub(crate) project: Option<String>,
    /// The GCE zone of a zonal disk.
    pub(crate) zone: Option<String>,
    /// The region of a regional GCE disk, or the EBS volume's.
    pub(crate) region: Option<String>,
    /// The AWS account, as configured.
    pub(crate) account: Option<String>,
    /// The disk's id (GCE's number; the EBS volume id). `disk_name` is the disk's name (GCE)
    /// or volume id (EBS).
    pub(crate) disk_id: Option<String>,
    /// Its size in bytes.
    pub(crate) size_bytes: Option<u64>,
    /// Its type (`pd-balanced`, `gp3`).
    pub(crate) disk_type: Option<String>,
    /// When it was created.
    pub(crate) created: Option<String>,
    /// The instances it is attached to (GCE `users`, EBS attachments): in use, never a plain
    /// orphan.
    pub(crate) attached_to: Vec<String>,
    /// When it was last detached (GCE).
    pub(crate) last_detached: Option<String>,
    /// A regional GCE disk's replica zones.
    pub(crate) replica_zones: Vec<String>,
    /// Whose it is: `ours` or `unknown` (another cluster's disk is never reported).
    pub(crate) owner: Option<&'static str>,
    /// The cluster it names.
    pub(crate) owner_cluster: Option<String>,
    /// The PV the CSI driver recorded it was created for.
    pub(crate) created_for_pv: Option<String>,
    /// The claim (`namespace/name`) it was created for.
    pub(crate) created_for_claim: Option<String>,
    /// A backend snapshot's: the handle a VolumeSnapshotContent would carry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) snapshot_handle: Option<String>,
    /// A backend snapshot's: the VolumeSnapshotContent the CSI driver recorded it was cut for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_for_content: Option<String>,
    /// A backend snapshot's: the VolumeSnapshot (`namespace/name`) it was cut for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) created_for_snapshot: Option<String>,
}

fn time(t: Option<jiff::Timestamp>) -> Option<String> {
    t.map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// The scope's keys, for any line about a disk in it; `None` for a Ceph pool.
fn scope_keys(scope: &Scope) -> Option<DiskKeys> {
    let (project, zone, region, account) = match scope {
        Scope::Ceph(_) => return None,
        Scope::Gce { project, location } => {
            let zonal = matches!(
                crate::census::config::GceLocation::parse(location),
                Some(crate::census::config::GceLocation::Zone(_))
            );
            let (zone, region) = if zonal {
                (Some(location.clone()), None)
            } else {
                (None, Some(location.clone()))
            };
            (Some(project.clone()), zone, region, None)
        }
        Scope::GceProject { project } | Scope::GceSnapshots { project } => {
            (Some(project.clone()), None, None, None)
        }
        Scope::Ebs { account, region } | Scope::EbsSnapshots { account, region } => {
            (None, None, Some(region.clone()), account.clone())
        }
    };
    Some(DiskKeys {
        backend: scope.backend(),
        scope: scope.to_string(),
        project,
        zone,
        region,
        account,
        ..DiskKeys::default()
    })
}

/// The details' keys.
fn with_facts(mut k: DiskKeys, id: &str, d: &DiskFacts, ours: Option<&str>) -> DiskKeys {
    k.disk_id = Some(id.to_string());
    k.size_bytes = Some(d.size);
    k.disk_type = d.kind.clone();
    k.created = time(d.created);
    k.attached_to = d.in_use.clone();
    k.last_detached = time(d.last_detached);
    k.replica_zones = d.replica_zones.clone();
    k.owner = match d.owner(ours) {
        Owner::Ours => Some("ours"),
        Owner::Unknown => Some("unknown"),
        Owner::OtherCluster(_) => Some("other"),
    };
    k.owner_cluster = d.cluster.clone();
    if let Some(c) = &d.created_for {
        k.created_for_pv = c.pv.clone();
        k.created_for_claim = match (&c.pvc_namespace, &c.pvc) {
            (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
            (None, Some(n)) => Some(n.clone()),
            _ => None,
        };
    }
    k
}

/// A backend snapshot's keys: the handle a content would carry, and what the driver recorded
/// of it as a content and a snapshot (not as a PV and a claim).
fn as_snapshot(mut k: DiskKeys, handle: Option<&str>) -> DiskKeys {
    k.snapshot_handle = handle.map(str::to_string);
    k.created_for_content = k.created_for_pv.take();
    k.created_for_snapshot = k.created_for_claim.take();
    k
}

/// The cloud keys of a finding's line, when it is about a cloud disk: a disk no PV names (its
/// scope and what the last listing read of it), or a PV whose disk the listings did not find
/// (its scope).
pub(crate) fn disk_keys(census: &Census, f: &Finding) -> Option<DiskKeys> {
    let s = &f.status;
    let unnamed = (s.subject == Subject::Disk && s.reason == Reason::DiskWithoutVolume)
        || (s.subject == Subject::BackendSnapshot && s.reason == Reason::SnapshotWithoutContent);
    if unnamed {
        let image = s.image.as_ref()?;
        let scope = recorded_scope(&s.source, image);
        let keys = scope_keys(&scope)?;
        let seen = census
            .pools
            .get(&scope)
            .and_then(|st| st.current.as_ref())
            .and_then(|snap| snap.images.get(&image.name));
        let keys = match seen.and_then(|seen| Some((seen, seen.detail.as_deref()?))) {
            Some((seen, d)) => with_facts(keys, &seen.id, d, census.cluster_name.as_deref()),
            None => keys,
        };
        return Some(match s.subject {
            Subject::BackendSnapshot => {
                let handle = s
                    .snapshot
                    .as_ref()
                    .and_then(|i| i.snapshot_handle.as_deref());
                as_snapshot(keys, handle)
            }
            _ => keys,
        });
    }
    if s.reason == Reason::VolumeWithoutDisk {
        // As the classification located it (no zones: see `Facts::image`).
        let r = disk_ref(&s.source)?;
        if let Resolved::In(scope) = census.resolve(&r) {
            return scope_keys(scope);
        }
    }
    None
}
