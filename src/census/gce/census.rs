//! The GCE backend's [`Lister`]: lists one project and hands each scope's result (a complete
//! [`ScopeListing`], or why there is none) to the census loop as a [`CensusReport`].
//!
//! **I/O: reads Compute Engine through [`GceLister`]; writes nothing.** The mapping from the
//! lister's answers to the neutral census types ([`snapshot_of`], [`scope_of`], the failure
//! kinds) is pure.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{
    CredentialSource, GceConfig, GceDisk, GceLister, GceScope, GceSnapshot, ListError, Location,
    Locations, ProjectListing, SnapshotListing,
};
use crate::census::backend::{Lister, Reading};
use crate::census::gce::config::{GceLocation, GceSection};
use crate::census::{CensusFailure, CensusReport, CensusSettings};
use crate::decide::census::{CreatedFor, DiskFacts, Scope, ScopeListing, Seen};
use crate::engine::clock::wall_clock;

use super::vocabulary;

/// The neutral scope of a listed zone or region, or of the project for [`Location::All`] (the
/// answer of an aggregated listing that failed as a whole).
pub(crate) fn scope_of(s: &GceScope) -> Scope {
    match &s.location {
        Location::Zone(l) | Location::Region(l) => vocabulary::location(&s.project, l),
        Location::All => vocabulary::project(&s.project),
    }
}

/// What the decisions read of one disk.
pub(crate) fn facts_of(d: &GceDisk) -> DiskFacts {
    let mut in_use = d.users.clone();
    in_use.sort();
    let c = &d.created_for;
    let recorded = c.pv_name.is_some() || c.pvc_name.is_some() || c.pvc_namespace.is_some();
    DiskFacts {
        size: d.size_bytes,
        created: d.created,
        kind: Some(d.disk_type.clone()).filter(|k| !k.is_empty()),
        in_use,
        last_detached: d.last_detach,
        created_for: recorded.then(|| CreatedFor {
            pv: c.pv_name.clone(),
            pvc: c.pvc_name.clone(),
            pvc_namespace: c.pvc_namespace.clone(),
        }),
        cluster: d.cluster.clone().filter(|c| !c.is_empty()),
        replica_zones: d.replica_zones.clone(),
        source_disk: None,
        // A zonal disk's zone is its scope's.
        zone: None,
        region: None,
        // GCE labels are few and short (GKE's `goog-k8s-cluster-name`, the class's `labels`):
        // all of them.
        tags: d
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}

/// What the decisions read of one snapshot: the size of its disk, its creation, the disk it was
/// cut from, the VolumeSnapshotContent (as `pv`) and VolumeSnapshot (as `pvc`) its description
/// names, the cluster its labels name. Nothing holds a snapshot: `in_use` is empty.
pub(crate) fn snapshot_facts_of(s: &GceSnapshot) -> DiskFacts {
    let c = &s.created_for;
    let recorded = c.pv_name.is_some() || c.pvc_name.is_some() || c.pvc_namespace.is_some();
    DiskFacts {
        size: s.size_bytes,
        created: s.created,
        kind: None,
        in_use: Vec::new(),
        last_detached: None,
        created_for: recorded.then(|| CreatedFor {
            pv: c.pv_name.clone(),
            pvc: c.pvc_name.clone(),
            pvc_namespace: c.pvc_namespace.clone(),
        }),
        cluster: s.cluster.clone().filter(|c| !c.is_empty()),
        replica_zones: Vec::new(),
        source_disk: s.source_disk.clone(),
        zone: None,
        region: None,
        tags: Vec::new(),
    }
}

/// The report of one listing of a project's snapshots ([`vocabulary::snapshots`]): every
/// snapshot the driver cut, by name (what a VolumeSnapshotContent's handle names), its numeric
/// id as the id.
pub fn snapshots_report_of(
    listing: SnapshotListing,
    project: &str,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    let result = listing
        .result
        .map(|snapshots| ScopeListing {
            started,
            scope_id: None,
            images: snapshots
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        Seen {
                            size_only: None,
                            users_only: 0,
                            id: s.id.to_string(),
                            detail: Some(Box::new(snapshot_facts_of(s))),
                        },
                    )
                })
                .collect(),
            recoverable: Default::default(),
            unread: Default::default(),
        })
        .map_err(failure);
    CensusReport {
        key: vocabulary::snapshots(project),
        result,
        requests: listing.pages,
        elapsed,
    }
}

/// One scope's complete list of disks as a census snapshot: every disk with its details (the
/// listing has them all at no extra cost), no trash, nothing unread.
pub(crate) fn snapshot_of(disks: &[GceDisk], started: Time) -> ScopeListing {
    ScopeListing {
        started,
        scope_id: None,
        images: disks
            .iter()
            .map(|d| {
                (
                    d.name.clone(),
                    Seen {
                        size_only: None,
                        users_only: 0,
                        id: d.id.to_string(),
                        detail: Some(Box::new(facts_of(d))),
                    },
                )
            })
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

/// A GCE listing's error as the shared failure, the one place it becomes one: its category
/// (mapped once, above) and its line (what was listed, in which scope, and Compute's status,
/// HTTP status and message), one line and bounded as every backend's is.
pub(crate) fn failure(e: ListError) -> CensusFailure {
    CensusFailure::caused(e.category, None, e)
}

/// The reports of one listing, one per scope. An aggregated listing that failed as a whole
/// fails every scope in `known` (the project's own, [`vocabulary::project`], and the zones and
/// regions it listed before); the scopes of `known` a successful aggregated listing does not
/// name (no disks left, or the project's own) are complete and empty. `known` gains the scopes
/// this listing names.
pub fn reports_of(
    listing: ProjectListing,
    project: &str,
    known: &mut BTreeSet<Scope>,
    started: Time,
    elapsed: Duration,
) -> Vec<CensusReport> {
    let requests = listing.pages;
    let mut out: HashMap<Scope, Result<ScopeListing, CensusFailure>> = HashMap::new();
    let mut whole_failure = None;
    for s in listing.scopes {
        if s.scope.location == Location::All {
            whole_failure = s.result.as_ref().err().cloned();
        }
        let r = s
            .result
            .map(|disks| snapshot_of(&disks, started.clone()))
            .map_err(failure);
        out.insert(scope_of(&s.scope), r);
    }
    for scope in known.iter() {
        // The project's own scope and its zones' and regions': the same first part, of
        // every kind but its snapshots.
        if scope.holds_snapshots() || scope.part(0) != project || out.contains_key(scope) {
            continue;
        }
        let r = match &whole_failure {
            Some(e) => Err(failure(e.clone())),
            None => Ok(snapshot_of(&[], started.clone())),
        };
        out.insert(scope.clone(), r);
    }
    known.extend(out.keys().cloned());
    let mut reports: Vec<CensusReport> = out
        .into_iter()
        .map(|(key, result)| CensusReport {
            key,
            result,
            requests,
            elapsed,
        })
        .collect();
    reports.sort_by(|a, b| a.key.cmp(&b.key));
    reports
}

/// The lister of one `gce` section: its project's disks, every zone and region it names (or all
/// of them in one aggregated listing), then with `snapshots: true` the project's snapshots (each
/// listing succeeds or fails on its own: a role without `compute.snapshots.list` fails only the
/// snapshots). `known` starts with the configured scopes (the project's own for an aggregated
/// listing) and gains those a listing names. A client that cannot be made (credentials) is
/// tried again at the next listing, and its failure reported for the known scopes and the
/// snapshots'.
pub(crate) struct GceProjectLister {
    config: GceConfig,
    known: BTreeSet<Scope>,
    snapshots: bool,
    lister: Option<GceLister>,
}

/// One lister per `gce` section, each request bounded by the census's timeout and each scope's
/// listing by its deadline.
pub(crate) fn listers(settings: &CensusSettings) -> Vec<Box<dyn Lister>> {
    settings
        .config
        .gce
        .iter()
        .map(|s| {
            Box::new(GceProjectLister {
                config: config_of(s, settings.timeout, settings.deadline),
                known: s.scopes().into_iter().collect(),
                snapshots: s.snapshots,
                lister: None,
            }) as Box<dyn Lister>
        })
        .collect()
}

impl Lister for GceProjectLister {
    fn scopes(&self) -> Vec<Scope> {
        self.known
            .iter()
            .cloned()
            .chain(self.snapshot_scope())
            .collect()
    }

    fn list<'a>(&'a mut self, _reading: Reading<'a>) -> BoxFuture<'a, Vec<CensusReport>> {
        Box::pin(self.turn())
    }
}

impl GceProjectLister {
    fn snapshot_scope(&self) -> Option<Scope> {
        self.snapshots
            .then(|| vocabulary::snapshots(&self.config.project))
    }

    async fn turn(&mut self) -> Vec<CensusReport> {
        let started = Instant::now();
        let at = wall_clock();
        if self.lister.is_none() {
            match GceLister::new(self.config.clone()).await {
                Ok(l) => self.lister = Some(l),
                Err(e) => {
                    return self
                        .scopes()
                        .into_iter()
                        .map(|key| CensusReport {
                            key,
                            result: Err(failure(e.clone())),
                            requests: 0,
                            elapsed: started.elapsed(),
                        })
                        .collect();
                }
            }
        }
        let Some(l) = &self.lister else {
            return Vec::new();
        };
        let project = self.config.project.clone();
        let listing = l.list().await;
        let mut reports = reports_of(listing, &project, &mut self.known, at, started.elapsed());
        if self.snapshots {
            let started = Instant::now();
            let at = wall_clock();
            let listing = l.list_snapshots().await;
            reports.push(snapshots_report_of(
                listing,
                &project,
                at,
                started.elapsed(),
            ));
        }
        reports
    }
}

/// The lister's configuration for one `gce` section of the census file: its project,
/// locations, credentials, cluster label and endpoint; each request (attempt) bounded by
/// `timeout`, each scope's whole listing by `deadline`.
pub(crate) fn config_of(section: &GceSection, timeout: Duration, deadline: Duration) -> GceConfig {
    let mut c = GceConfig::new(section.project.clone());
    if let Some(locations) = section.locations() {
        let (mut zones, mut regions) = (Vec::new(), Vec::new());
        for l in locations {
            match l {
                GceLocation::Zone(z) => zones.push(z),
                GceLocation::Region(r) => regions.push(r),
            }
        }
        c.locations = Locations::Only { zones, regions };
    }
    if let Some(k) = &section.key_file {
        c.credentials = CredentialSource::KeyFile(k.clone());
    }
    c.cluster_label = section.cluster_label.clone();
    c.endpoint = section.endpoint.clone();
    c.attempt_timeout = timeout;
    c.deadline = deadline;
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::gce::{ErrorCategory, GceCreatedFor, LocationListing};
    use crate::decide::census::FailureCategory;
    use crate::decide::census::Owner;

    fn disk(name: &str, location: Location) -> GceDisk {
        GceDisk {
            name: name.into(),
            id: 42,
            location,
            size_bytes: 10 << 30,
            disk_type: "pd-balanced".into(),
            created: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            users: vec!["z/instances/b".into(), "z/instances/a".into()],
            last_detach: Some("2026-01-02T00:00:00Z".parse().unwrap()),
            replica_zones: vec!["europe-west1-b".into(), "europe-west1-c".into()],
            labels: Default::default(),
            created_for: GceCreatedFor {
                pv_name: Some("pvc-1".into()),
                pvc_name: Some("data".into()),
                pvc_namespace: Some("team".into()),
            },
            cluster: Some("prod".into()),
            source: None,
        }
    }

    fn scope(project: &str, location: Location) -> GceScope {
        GceScope {
            project: project.into(),
            location,
        }
    }

    fn neutral(location: &str) -> Scope {
        crate::census::gce::vocabulary::location("p", location)
    }

    #[test]
    fn a_disk_maps_to_the_neutral_facts() {
        let f = facts_of(&disk("d", Location::Region("europe-west1".into())));
        assert_eq!(f.size, 10 << 30);
        assert_eq!(f.kind.as_deref(), Some("pd-balanced"));
        assert_eq!(f.in_use, ["z/instances/a", "z/instances/b"], "sorted");
        assert_eq!(
            f.last_detached,
            Some("2026-01-02T00:00:00Z".parse().unwrap())
        );
        assert_eq!(f.replica_zones, ["europe-west1-b", "europe-west1-c"]);
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: Some("pvc-1".into()),
                pvc: Some("data".into()),
                pvc_namespace: Some("team".into()),
            })
        );
        assert_eq!(f.owner(Some("prod")), Owner::Ours);
        assert_eq!(f.owner(Some("other")), Owner::OtherCluster("prod".into()));

        let mut bare = disk("d", Location::Zone("europe-west1-b".into()));
        bare.created_for = GceCreatedFor::default();
        bare.cluster = None;
        let f = facts_of(&bare);
        assert_eq!(f.created_for, None, "nothing recorded");
        assert_eq!(
            f.owner(Some("prod")),
            Owner::Unknown,
            "an OwnerUnknown hint"
        );
    }

    #[test]
    fn each_scope_reports_once_and_a_failed_aggregated_listing_fails_the_known_ones() {
        let started = Time(jiff::Timestamp::UNIX_EPOCH);
        let listing = ProjectListing {
            scopes: vec![
                LocationListing {
                    scope: scope("p", Location::Region("europe-west1".into())),
                    result: Ok(vec![disk("r", Location::Region("europe-west1".into()))]),
                },
                LocationListing {
                    scope: scope("p", Location::Zone("europe-west1-b".into())),
                    result: Err(ListError::new(ErrorCategory::Forbidden, "403")),
                },
            ],
            pages: 2,
        };
        let project = crate::census::gce::vocabulary::project("p");
        let mut known = BTreeSet::from([project.clone(), neutral("europe-west1-c")]);
        let reports = reports_of(listing, "p", &mut known, started.clone(), Duration::ZERO);
        let keys: Vec<String> = reports.iter().map(|r| r.key.to_string()).collect();
        assert_eq!(
            keys,
            [
                "gce:p/europe-west1",
                "gce:p/europe-west1-b",
                "gce:p/europe-west1-c",
                "gce:p"
            ]
        );
        let (whole, reports) = reports.split_last().unwrap();
        assert!(
            whole.result.as_ref().unwrap().images.is_empty(),
            "the project's own scope is complete and holds no disk"
        );
        let r = reports[0].result.as_ref().unwrap();
        assert_eq!(r.images["r"].id, "42");
        assert!(r.images["r"].detail.is_some());
        let f = reports[1].result.as_ref().unwrap_err();
        assert_eq!(f.category(), FailureCategory::Forbidden);
        assert!(
            reports[2].result.as_ref().unwrap().images.is_empty(),
            "a scope the complete aggregated listing no longer names has no disks"
        );
        assert_eq!(known.len(), 4);

        let failed = ProjectListing {
            scopes: vec![LocationListing {
                scope: scope("p", Location::All),
                result: Err(ListError::new(ErrorCategory::Auth, "401")),
            }],
            pages: 0,
        };
        let reports = reports_of(
            failed.clone(),
            "p",
            &mut known,
            started.clone(),
            Duration::ZERO,
        );
        assert_eq!(
            reports.len(),
            4,
            "every known scope fails, the project's own too"
        );
        for r in &reports {
            let f = r.result.as_ref().unwrap_err();
            assert_eq!(f.category(), FailureCategory::Auth);
        }

        // Before any zone is known (a first listing refused), the project's own scope says so.
        let mut fresh = BTreeSet::from([project.clone()]);
        let reports = reports_of(failed, "p", &mut fresh, started, Duration::ZERO);
        assert_eq!(reports.len(), 1);
        assert_eq!(reports[0].key, project);
        assert!(reports[0].result.is_err());
    }

    #[test]
    fn a_snapshot_listing_is_one_report_keyed_by_name() {
        let started = Time(jiff::Timestamp::UNIX_EPOCH);
        let snap = GceSnapshot {
            name: "snapshot-1".into(),
            id: 77,
            size_bytes: 10 << 30,
            created: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            source_disk: Some("projects/p/zones/z/disks/d".into()),
            created_for: GceCreatedFor {
                pv_name: Some("snapcontent-1".into()),
                pvc_name: Some("nightly".into()),
                pvc_namespace: Some("shop".into()),
            },
            cluster: Some("prod".into()),
        };
        let ok = SnapshotListing {
            result: Ok(vec![snap]),
            pages: 3,
        };
        let r = snapshots_report_of(ok, "p", started.clone(), Duration::ZERO);
        assert_eq!(r.key, crate::census::gce::vocabulary::snapshots("p"));
        assert_eq!(r.requests, 3);
        let census = r.result.unwrap();
        let seen = &census.images["snapshot-1"];
        assert_eq!(seen.id, "77");
        let f = seen.detail.as_deref().unwrap();
        assert_eq!(f.source_disk.as_deref(), Some("projects/p/zones/z/disks/d"));
        assert_eq!(f.size, 10 << 30);
        assert!(f.in_use.is_empty());
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: Some("snapcontent-1".into()),
                pvc: Some("nightly".into()),
                pvc_namespace: Some("shop".into()),
            })
        );
        assert_eq!(f.owner(Some("prod")), Owner::Ours);
        let failed = SnapshotListing {
            result: Err(ListError::new(ErrorCategory::Forbidden, "403")),
            pages: 1,
        };
        let r = snapshots_report_of(failed, "p", started, Duration::ZERO);
        assert_eq!(r.result.unwrap_err().category(), FailureCategory::Forbidden);
    }
}
