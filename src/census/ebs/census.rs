//! The EBS backend's [`Lister`]: lists one region and hands its result (a complete
//! [`ScopeListing`], or why there is none) to the census loop as a [`CensusReport`].
//!
//! **I/O: reads EC2 through [`Ebs`]; writes nothing.** The mapping from the listing to the
//! neutral census types ([`snapshot_of`], the failure kinds) is pure.

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::facts::attributing_tags;
use super::{
    Ebs, EbsConfig, EbsSnapshot, EbsVolume, ErrorCategory, ListError, Listing, SnapshotListing,
};
use crate::census::backend::{Lister, Reading};
use crate::census::ebs::config::EbsSection;
use crate::census::{CensusFailure, CensusReport, CensusSettings};
use crate::decide::census::{
    CreatedFor, DiskFacts, FailureCategory, FailureKind, Scope, ScopeListing, Seen,
};
use crate::engine::clock::wall_clock;

impl From<ErrorCategory> for FailureKind {
    /// EC2's categories, mapped once; the finer names (`throttling`, `unreachable`) stay in
    /// the logs.
    fn from(c: ErrorCategory) -> FailureKind {
        let category = match c {
            ErrorCategory::Auth => FailureCategory::Auth,
            ErrorCategory::Forbidden => FailureCategory::Forbidden,
            ErrorCategory::Throttling => FailureCategory::Quota,
            ErrorCategory::Server => FailureCategory::Server,
            ErrorCategory::Timeout | ErrorCategory::Unreachable => FailureCategory::Timeout,
            ErrorCategory::Other => FailureCategory::Other,
        };
        FailureKind {
            category,
            name: c.as_str(),
        }
    }
}

/// The neutral scope of a configured region.
pub(crate) fn scope_of(config: &EbsConfig) -> Scope {
    super::vocabulary::region(config.account.as_deref(), &config.region)
}

/// The neutral scope of a configured region's snapshots.
pub(crate) fn snapshot_scope_of(config: &EbsConfig) -> Scope {
    super::vocabulary::snapshots(config.account.as_deref(), &config.region)
}

/// Of the clusters the tags name (sorted), `ours` when it is one of them (the disk is this
/// cluster's), else the first (another's).
fn cluster_of(clusters: Vec<String>, ours: Option<&str>) -> Option<String> {
    match ours {
        Some(o) if clusters.iter().any(|c| c == o) => Some(o.to_string()),
        _ => clusters.into_iter().next(),
    }
}

/// What the decisions read of one volume. `ours` is this cluster's name; `cluster_tag` the
/// configured extra tag naming a volume's cluster.
pub(crate) fn facts_of(v: &EbsVolume, ours: Option<&str>, cluster_tag: Option<&str>) -> DiskFacts {
    let mut in_use: Vec<String> = v
        .attachments
        .iter()
        .filter(|a| a.state.as_deref() != Some("detached"))
        .map(|a| a.instance_id.clone().unwrap_or_default())
        .collect();
    in_use.sort();
    let tags = v.csi_tags();
    let pv = tags.pv_name.or(tags.volume_name);
    let recorded = pv.is_some() || tags.pvc_name.is_some() || tags.pvc_namespace.is_some();
    let cluster = cluster_of(v.attribution(cluster_tag).clusters, ours);
    DiskFacts {
        size: v.size_bytes.unwrap_or(0),
        created: v.created,
        kind: v.volume_type.clone(),
        in_use,
        last_detached: None,
        created_for: recorded.then_some(CreatedFor {
            pv,
            pvc: tags.pvc_name,
            pvc_namespace: tags.pvc_namespace,
        }),
        cluster,
        replica_zones: Vec::new(),
        source_disk: None,
        zone: v.availability_zone.clone(),
        region: None,
        tags: attributing_tags(&v.tags, cluster_tag),
    }
}

/// What the decisions read of one snapshot: its volume's size, its start as its creation, the
/// volume it was cut from, the VolumeSnapshotContent (as `pv`) and VolumeSnapshot (as `pvc`)
/// its tags name, its cluster as for a volume. Nothing holds a snapshot the way an instance
/// holds a volume: `in_use` is empty.
pub(crate) fn snapshot_facts_of(
    s: &EbsSnapshot,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
) -> DiskFacts {
    let tags = s.csi_tags();
    // The extra metadata's content name first; the driver's own tag names the same content.
    let pv = tags.content_name.or(tags.snapshot_name);
    let recorded = pv.is_some()
        || tags.volume_snapshot_name.is_some()
        || tags.volume_snapshot_namespace.is_some();
    DiskFacts {
        size: s.size_bytes.unwrap_or(0),
        created: s.start_time,
        kind: None,
        in_use: Vec::new(),
        last_detached: None,
        created_for: recorded.then_some(CreatedFor {
            pv,
            pvc: tags.volume_snapshot_name,
            pvc_namespace: tags.volume_snapshot_namespace,
        }),
        cluster: cluster_of(s.attribution(cluster_tag).clusters, ours),
        replica_zones: Vec::new(),
        source_disk: s.source_volume().map(str::to_string),
        zone: None,
        region: None,
        tags: attributing_tags(&s.tags, cluster_tag),
    }
}

/// A complete listing as a census snapshot: every item by its id, with its details.
fn census_of(started: Time, items: impl Iterator<Item = (String, DiskFacts)>) -> ScopeListing {
    ScopeListing {
        started,
        scope_id: None,
        images: items
            .map(|(id, facts)| {
                (
                    id.clone(),
                    Seen {
                        size_only: None,
                        users_only: 0,
                        id,
                        detail: Some(Box::new(facts)),
                    },
                )
            })
            .collect(),
        recoverable: Default::default(),
        unread: Default::default(),
    }
}

/// A region's complete listing as a census snapshot: every volume, by id, with its details.
pub(crate) fn snapshot_of(
    listing: &Listing,
    started: Time,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
) -> ScopeListing {
    census_of(
        started,
        listing
            .volumes
            .iter()
            .map(|v| (v.id.clone(), facts_of(v, ours, cluster_tag))),
    )
}

/// A region's complete listing of the driver's snapshots as a census snapshot: every one, by
/// its id (`snap-…`, what a VolumeSnapshotContent's `snapshotHandle` names), with its details.
pub(crate) fn snapshots_census_of(
    listing: &SnapshotListing,
    started: Time,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
) -> ScopeListing {
    census_of(
        started,
        listing
            .snapshots
            .iter()
            .map(|s| (s.id.clone(), snapshot_facts_of(s, ours, cluster_tag))),
    )
}

/// An EBS listing's error as the shared failure, the one place it becomes one: its category
/// (mapped once, above) and its line (what was listed, in which scope, and EC2's code, status
/// and message: [`ListError`]'s `Display`), one line and bounded as every backend's is.
pub(crate) fn failure(e: ListError) -> CensusFailure {
    CensusFailure::caused(e.category, None, e)
}

/// The report of one listing for `key`: its census and pages, or its failure and the pages
/// read before it.
fn report(
    key: Scope,
    result: Result<(ScopeListing, u32), ListError>,
    elapsed: Duration,
) -> CensusReport {
    let (result, requests) = match result {
        Ok((census, pages)) => (Ok(census), u64::from(pages)),
        Err(e) => {
            let pages = u64::from(e.pages);
            (Err(failure(e)), pages)
        }
    };
    CensusReport {
        key,
        result,
        requests,
        elapsed,
    }
}

/// The report of one listing of the volumes.
pub fn report_of(
    result: Result<Listing, ListError>,
    config: &EbsConfig,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    let result = result.map(|l| (snapshot_of(&l, started, ours, cluster_tag), l.pages));
    report(scope_of(config), result, elapsed)
}

/// The report of one listing of the snapshots ([`super::vocabulary::snapshots`]).
pub fn snapshots_report_of(
    result: Result<SnapshotListing, ListError>,
    config: &EbsConfig,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    let result = result.map(|l| (snapshots_census_of(&l, started, ours, cluster_tag), l.pages));
    report(snapshot_scope_of(config), result, elapsed)
}

/// The lister of one `ebs` section: its region's volumes, then with `snapshots: true` the
/// driver's snapshots (each listing succeeds or fails on its own: a policy without
/// `ec2:DescribeSnapshots` fails only the snapshots). `ours` is the cluster its volumes' tags are
/// read against (the section's `clusterName`, else the file's).
pub(crate) struct EbsRegionLister {
    config: EbsConfig,
    ours: Option<String>,
    cluster_tag: Option<String>,
    snapshots: bool,
    ebs: Option<Ebs>,
}

/// One lister per `ebs` section, each attempt bounded by the census's timeout and the listing by
/// its deadline.
pub(crate) fn listers(settings: &CensusSettings) -> Vec<Box<dyn Lister>> {
    let config = &settings.config;
    config
        .ebs
        .iter()
        .map(|s| {
            Box::new(EbsRegionLister {
                config: config_of(s, settings.timeout, settings.deadline),
                ours: s
                    .cluster_name
                    .clone()
                    .or_else(|| config.cluster_name.clone()),
                cluster_tag: s.cluster_tag.clone(),
                snapshots: s.snapshots,
                ebs: None,
            }) as Box<dyn Lister>
        })
        .collect()
}

impl Lister for EbsRegionLister {
    fn scopes(&self) -> Vec<Scope> {
        std::iter::once(scope_of(&self.config))
            .chain(self.snapshots.then(|| snapshot_scope_of(&self.config)))
            .collect()
    }

    fn list<'a>(&'a mut self, _reading: Reading<'a>) -> BoxFuture<'a, Vec<CensusReport>> {
        Box::pin(self.turn())
    }
}

impl EbsRegionLister {
    async fn turn(&mut self) -> Vec<CensusReport> {
        if self.ebs.is_none() {
            self.ebs = Some(Ebs::connect(self.config.clone()).await);
        }
        let Some(ebs) = &self.ebs else {
            return Vec::new();
        };
        let (ours, cluster_tag) = (self.ours.as_deref(), self.cluster_tag.as_deref());
        let started = Instant::now();
        let at = wall_clock();
        let result = ebs.list().await;
        let mut reports = vec![report_of(
            result,
            &self.config,
            ours,
            cluster_tag,
            at,
            started.elapsed(),
        )];
        if self.snapshots {
            let started = Instant::now();
            let at = wall_clock();
            let result = ebs.list_snapshots().await;
            reports.push(snapshots_report_of(
                result,
                &self.config,
                ours,
                cluster_tag,
                at,
                started.elapsed(),
            ));
        }
        reports
    }
}

/// The listing's configuration for one `ebs` section of the census file: its region, account
/// label and endpoint; each attempt bounded by `timeout`, each page with its retries by four
/// times that, the whole listing by `deadline`. Credentials: `aws-config`'s default chain.
pub(crate) fn config_of(section: &EbsSection, timeout: Duration, deadline: Duration) -> EbsConfig {
    let mut c = EbsConfig::new(section.region.clone());
    c.account = section.account.clone();
    c.endpoint_url = section.endpoint.clone();
    c.attempt_timeout = timeout;
    c.request_timeout = timeout * 4;
    c.deadline = deadline;
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::ebs::EbsAttachment;
    use crate::decide::census::Owner;

    fn volume(tags: &[(&str, &str)], attachments: &[(&str, &str)]) -> EbsVolume {
        EbsVolume {
            id: "vol-0abc".into(),
            size_bytes: Some(8 << 30),
            volume_type: Some("gp3".into()),
            created: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            state: Some("available".into()),
            availability_zone: Some("eu-west-1a".into()),
            snapshot_id: None,
            attachments: attachments
                .iter()
                .map(|(i, s)| EbsAttachment {
                    instance_id: Some(i.to_string()),
                    device: None,
                    state: Some(s.to_string()),
                    attached: None,
                })
                .collect(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_volume_maps_to_the_neutral_facts() {
        let v = volume(
            &[
                ("CSIVolumeName", "pvc-1"),
                ("kubernetes.io/created-for/pvc/name", "data"),
                ("kubernetes.io/created-for/pvc/namespace", "team"),
                ("kubernetes.io/cluster/other", "owned"),
                ("kubernetes.io/cluster/prod", "owned"),
            ],
            &[
                ("i-2", "attached"),
                ("i-1", "attaching"),
                ("i-3", "detached"),
            ],
        );
        let f = facts_of(&v, Some("prod"), None);
        assert_eq!(f.size, 8 << 30);
        assert_eq!(f.kind.as_deref(), Some("gp3"));
        assert_eq!(f.in_use, ["i-1", "i-2"], "detached does not count; sorted");
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: Some("pvc-1".into()),
                pvc: Some("data".into()),
                pvc_namespace: Some("team".into()),
            })
        );
        assert_eq!(
            f.owner(Some("prod")),
            Owner::Ours,
            "one of its clusters is ours"
        );
        assert_eq!(f.zone, v.availability_zone, "its availability zone");
        assert_eq!(
            f.tags,
            [
                ("CSIVolumeName", "pvc-1"),
                ("kubernetes.io/cluster/other", "owned"),
                ("kubernetes.io/cluster/prod", "owned"),
                ("kubernetes.io/created-for/pvc/name", "data"),
                ("kubernetes.io/created-for/pvc/namespace", "team"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
            "the tags that attribute it, sorted"
        );
        let f = facts_of(&v, Some("third"), None);
        assert_eq!(f.owner(Some("third")), Owner::OtherCluster("other".into()));

        let v = volume(&[("team-cluster", "prod"), ("Name", "scratch")], &[]);
        assert_eq!(
            facts_of(&v, Some("prod"), Some("team-cluster")).owner(Some("prod")),
            Owner::Ours,
            "the configured tag names the cluster"
        );
        assert_eq!(
            facts_of(&v, Some("prod"), Some("team-cluster")).tags,
            [("team-cluster".to_string(), "prod".to_string())],
            "the configured tag attributes it; a Name does not"
        );
        let f = facts_of(&v, Some("prod"), None);
        assert_eq!(f.created_for, None);
        assert_eq!(
            f.owner(Some("prod")),
            Owner::Unknown,
            "an OwnerUnknown hint"
        );
    }

    #[test]
    fn a_listing_is_one_report_and_a_failure_keeps_its_category() {
        let mut config = EbsConfig::new("eu-west-1");
        config.account = Some("123456789012".into());
        let started = Time(jiff::Timestamp::UNIX_EPOCH);
        let ok = Listing {
            volumes: vec![volume(&[], &[])],
            pages: 3,
        };
        let r = report_of(Ok(ok), &config, None, None, started.clone(), Duration::ZERO);
        assert_eq!(r.key.to_string(), "ebs:123456789012/eu-west-1");
        assert_eq!(r.requests, 3);
        assert!(r.result.unwrap().images.contains_key("vol-0abc"));
        for (c, want) in [
            (ErrorCategory::Forbidden, FailureCategory::Forbidden),
            (ErrorCategory::Throttling, FailureCategory::Quota),
            (ErrorCategory::Unreachable, FailureCategory::Timeout),
        ] {
            let e = ListError {
                category: c,
                resource: crate::census::ebs::Resource::Volumes,
                scope: config.scope(),
                code: None,
                status: None,
                pages: 1,
                message: "no".into(),
            };
            let r = report_of(Err(e), &config, None, None, started.clone(), Duration::ZERO);
            let f = r.result.unwrap_err();
            assert_eq!(f.category(), want);
            assert_eq!(f.kind.name, c.as_str());
        }
    }

    fn snapshot(volume_id: Option<&str>, tags: &[(&str, &str)]) -> EbsSnapshot {
        EbsSnapshot {
            id: "snap-0abc".into(),
            volume_id: volume_id.map(str::to_string),
            size_bytes: Some(8 << 30),
            start_time: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            state: Some("completed".into()),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_snapshot_maps_to_the_neutral_facts() {
        let s = snapshot(
            Some("vol-0123abcd"),
            &[
                ("CSIVolumeSnapshotName", "snapcontent-1"),
                (
                    "kubernetes.io/created-for/volumesnapshotcontent/name",
                    "snapcontent-1",
                ),
                ("kubernetes.io/created-for/volumesnapshot/name", "nightly"),
                ("kubernetes.io/created-for/volumesnapshot/namespace", "shop"),
                ("kubernetes.io/cluster/prod", "owned"),
            ],
        );
        let f = snapshot_facts_of(&s, Some("prod"), None);
        assert_eq!(f.size, 8 << 30);
        assert_eq!(f.created, Some("2026-01-01T00:00:00Z".parse().unwrap()));
        assert_eq!(f.source_disk.as_deref(), Some("vol-0123abcd"));
        assert_eq!(f.kind, None);
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

        // A copy names EC2's placeholder volume; the driver's tag alone names the content.
        let s = snapshot(
            Some("vol-ffffffff"),
            &[("CSIVolumeSnapshotName", "snapcontent-2"), ("team", "prod")],
        );
        let f = snapshot_facts_of(&s, Some("prod"), Some("team"));
        assert_eq!(f.source_disk, None, "a copy's placeholder names no volume");
        assert_eq!(
            f.created_for,
            Some(CreatedFor {
                pv: Some("snapcontent-2".into()),
                pvc: None,
                pvc_namespace: None,
            })
        );
        assert_eq!(f.cluster.as_deref(), Some("prod"), "the configured tag");
        let f = snapshot_facts_of(&snapshot(None, &[]), None, None);
        assert_eq!(
            (f.source_disk, f.created_for, f.cluster),
            (None, None, None)
        );
    }

    #[test]
    fn a_snapshot_listing_is_its_own_report_keyed_by_snapshot_id() {
        let mut config = EbsConfig::new("eu-west-1");
        config.account = Some("123456789012".into());
        let started = Time(jiff::Timestamp::UNIX_EPOCH);
        let ok = SnapshotListing {
            snapshots: vec![snapshot(Some("vol-1"), &[])],
            pages: 2,
        };
        let r = snapshots_report_of(Ok(ok), &config, None, None, started.clone(), Duration::ZERO);
        assert_eq!(
            r.key,
            crate::census::ebs::vocabulary::snapshots(Some("123456789012"), "eu-west-1")
        );
        assert_eq!(r.requests, 2);
        let census = r.result.unwrap();
        assert_eq!(census.images["snap-0abc"].id, "snap-0abc");
        assert!(census.images["snap-0abc"].detail.is_some());
        let e = ListError {
            category: ErrorCategory::Forbidden,
            resource: crate::census::ebs::Resource::Snapshots,
            scope: config.scope(),
            code: Some("UnauthorizedOperation".into()),
            status: Some(403),
            pages: 0,
            message: "no".into(),
        };
        assert!(
            e.to_string()
                .starts_with("listing EBS snapshots in 123456789012/eu-west-1")
        );
        let r = snapshots_report_of(Err(e), &config, None, None, started, Duration::ZERO);
        assert_eq!(r.requests, 0);
        assert_eq!(r.result.unwrap_err().category(), FailureCategory::Forbidden);
    }
}
