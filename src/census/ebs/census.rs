//! The EBS census task: lists one region every `interval` and hands its result (a complete
//! [`Snapshot`], or why there is none) to the loop as a [`CensusReport`].
//!
//! **I/O: reads EC2 through [`Ebs`]; writes nothing.** The mapping from the listing to the
//! neutral census types ([`snapshot_of`], the failure kinds) is pure.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::mpsc;

use super::{Ebs, EbsConfig, EbsVolume, ErrorCategory, ListError, Listing};
use crate::census::config::{CensusConfig, EbsSection};
use crate::census::{CensusFailure, CensusReport};
use crate::decide::census::{
    CreatedFor, DiskFacts, FailureCategory, FailureKind, Scope, Seen, Snapshot,
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
    Scope::Ebs {
        account: config.account.clone(),
        region: config.region.clone(),
    }
}

/// What the decisions read of one volume. `ours` is this cluster's name; `cluster_tag` the
/// configured extra tag naming a volume's cluster. Of the clusters the tags name, `ours` when
/// it is one of them (the volume is this cluster's), else the first (another's).
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
    let clusters = v.attribution(cluster_tag).clusters;
    let cluster = match ours {
        Some(o) if clusters.iter().any(|c| c == o) => Some(o.to_string()),
        _ => clusters.into_iter().next(),
    };
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
    }
}

/// A region's complete listing as a census snapshot: every volume, by id, with its details.
pub(crate) fn snapshot_of(
    listing: &Listing,
    started: Time,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
) -> Snapshot {
    Snapshot {
        started,
        pool_id: 0,
        images: listing
            .volumes
            .iter()
            .map(|v| {
                (
                    v.id.clone(),
                    Seen {
                        id: v.id.clone(),
                        detail: Some(Box::new(facts_of(v, ours, cluster_tag))),
                    },
                )
            })
            .collect(),
        trash: Default::default(),
        unread: Default::default(),
    }
}

/// The report of one listing.
pub fn report_of(
    result: Result<Listing, ListError>,
    config: &EbsConfig,
    ours: Option<&str>,
    cluster_tag: Option<&str>,
    started: Time,
    elapsed: Duration,
) -> CensusReport {
    let (result, requests) = match result {
        Ok(l) => (
            Ok(snapshot_of(&l, started, ours, cluster_tag)),
            u64::from(l.pages),
        ),
        Err(e) => {
            let pages = u64::from(e.pages);
            (Err(CensusFailure::caused(e.category, None, e)), pages)
        }
    };
    CensusReport {
        key: scope_of(config),
        result,
        requests,
        elapsed,
    }
}

/// Runs one region's census until `tx` is closed: lists every `interval` and sends its report.
pub(crate) async fn run(
    config: EbsConfig,
    ours: Option<String>,
    cluster_tag: Option<String>,
    interval: Duration,
    tx: mpsc::Sender<CensusReport>,
) {
    let ebs = Ebs::connect(config.clone()).await;
    loop {
        if tx.is_closed() {
            return;
        }
        let started = Instant::now();
        let at = wall_clock();
        let result = ebs.list().await;
        let report = report_of(
            result,
            &config,
            ours.as_deref(),
            cluster_tag.as_deref(),
            at,
            started.elapsed(),
        );
        if tx.send(report).await.is_err() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = tx.closed() => return,
        }
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

/// Every `ebs` section's census, each region listed on its own every `interval`, until `tx`
/// is closed. A section's `clusterName` (else the file's) is the cluster its volumes' tags are
/// read against.
pub(crate) async fn run_all(
    config: CensusConfig,
    interval: Duration,
    timeout: Duration,
    deadline: Duration,
    tx: mpsc::Sender<CensusReport>,
) {
    let regions = config.ebs.iter().map(|s| {
        run(
            config_of(s, timeout, deadline),
            s.cluster_name
                .clone()
                .or_else(|| config.cluster_name.clone()),
            s.cluster_tag.clone(),
            interval,
            tx.clone(),
        )
    });
    futures::future::join_all(regions).await;
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
        let f = facts_of(&v, Some("third"), None);
        assert_eq!(f.owner(Some("third")), Owner::OtherCluster("other".into()));

        let v = volume(&[("team-cluster", "prod")], &[]);
        assert_eq!(
            facts_of(&v, Some("prod"), Some("team-cluster")).owner(Some("prod")),
            Owner::Ours,
            "the configured tag names the cluster"
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
}
