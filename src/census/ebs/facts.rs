//! Pure: the facts of one EBS volume or snapshot as the census keeps them, what their tags say
//! (the PV and claim, or the VolumeSnapshotContent and VolumeSnapshot, the EBS CSI driver
//! recorded; which cluster they belong to), and the category of an EC2 error. No I/O, no SDK types: [`super`] maps the SDK's answer into these.

use std::collections::BTreeMap;

use jiff::Timestamp;

/// Tag the EBS CSI driver sets to the PV name it created the volume for.
pub(crate) const TAG_CSI_VOLUME_NAME: &str = "CSIVolumeName";
/// Tag the EBS CSI driver (with `--extra-tags`' defaults) and the in-tree plugin set to the PV name.
pub(crate) const TAG_PV_NAME: &str = "kubernetes.io/created-for/pv/name";
/// Tag set to the claim's name.
pub(crate) const TAG_PVC_NAME: &str = "kubernetes.io/created-for/pvc/name";
/// Tag set to the claim's namespace.
pub(crate) const TAG_PVC_NAMESPACE: &str = "kubernetes.io/created-for/pvc/namespace";
/// `kubernetes.io/cluster/<name>` (value `owned` or `shared`): the cluster `<name>` uses it
/// (the driver's `--k8s-tag-cluster-id`, the in-tree plugin, eksctl).
pub(crate) const TAG_CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";
/// The legacy in-tree plugin's cluster tag (`KubernetesCluster=<name>`), also set by the driver
/// with `--k8s-tag-cluster-id`.
pub(crate) const TAG_KUBERNETES_CLUSTER: &str = "KubernetesCluster";
/// `ebs.csi.aws.com/cluster=true`: the EBS CSI driver created the volume. It names no cluster:
/// the driver writes `true` whatever the cluster, so it proves the driver, not the owner.
pub(crate) const TAG_EBS_CSI_CLUSTER: &str = "ebs.csi.aws.com/cluster";

/// Tag the EBS CSI driver sets on every snapshot it cuts: the VolumeSnapshotContent's name
/// (`snapcontent-<uid>`). The snapshot census lists only the snapshots that carry it.
pub(crate) const TAG_CSI_SNAPSHOT_NAME: &str = "CSIVolumeSnapshotName";
/// The external-snapshotter's `--extra-create-metadata` tags (the driver turns the parameters
/// into tags): the VolumeSnapshotContent's name ...
pub(crate) const TAG_SNAPSHOT_CONTENT_NAME: &str =
    "kubernetes.io/created-for/volumesnapshotcontent/name";
/// ... the VolumeSnapshot's name ...
pub(crate) const TAG_SNAPSHOT_NAME: &str = "kubernetes.io/created-for/volumesnapshot/name";
/// ... and its namespace.
pub(crate) const TAG_SNAPSHOT_NAMESPACE: &str =
    "kubernetes.io/created-for/volumesnapshot/namespace";
/// The volume id EC2 (and moto) report as the source of a snapshot that was copied, not cut
/// from a volume: it names no volume.
pub(crate) const PLACEHOLDER_VOLUME_ID: &str = "vol-ffffffff";

/// One EBS volume as `DescribeVolumes` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EbsVolume {
    /// `vol-…`, what an `ebs.csi.aws.com` PV's `volumeHandle` names.
    pub id: String,
    /// Size in bytes (EC2 reports whole GiB).
    pub size_bytes: Option<u64>,
    /// `gp3`, `gp2`, `io2`, `st1`, …
    pub volume_type: Option<String>,
    /// When it was created.
    pub created: Option<Timestamp>,
    /// `creating`, `available`, `in-use`, `deleting`, `deleted`, `error`.
    pub state: Option<String>,
    /// The availability zone it lives in.
    pub availability_zone: Option<String>,
    /// The snapshot it was restored from, if any (still a disk that bills).
    pub(crate) snapshot_id: Option<String>,
    /// Its attachments. Any attachment means the volume is in use (a hint, never an orphan).
    pub attachments: Vec<EbsAttachment>,
    /// Every tag, key to value.
    pub tags: BTreeMap<String, String>,
}

/// One EBS snapshot as `DescribeSnapshots` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EbsSnapshot {
    /// `snap-…`, what an `ebs.csi.aws.com` VolumeSnapshotContent's `snapshotHandle` names.
    pub id: String,
    /// The volume it was cut from (`vol-…`; [`PLACEHOLDER_VOLUME_ID`] for a copy).
    pub volume_id: Option<String>,
    /// The size of that volume in bytes (EC2 reports whole GiB).
    pub size_bytes: Option<u64>,
    /// When it was started (EC2's `StartTime`: a snapshot has no other creation time).
    pub start_time: Option<Timestamp>,
    /// `pending`, `completed`, `error`, `recoverable`, `recovering`.
    pub state: Option<String>,
    /// Every tag, key to value.
    pub tags: BTreeMap<String, String>,
}

/// One attachment of a volume to an instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EbsAttachment {
    /// `i-…`
    pub instance_id: Option<String>,
    /// The device name (`/dev/xvdba`).
    pub device: Option<String>,
    /// `attaching`, `attached`, `detaching`, `detached`, `busy`.
    pub(crate) state: Option<String>,
    /// When it was attached.
    pub(crate) attached: Option<Timestamp>,
}

/// What the EBS CSI driver recorded about the PV and claim a volume was created for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CsiTags {
    /// `CSIVolumeName`.
    pub volume_name: Option<String>,
    /// `kubernetes.io/created-for/pv/name`.
    pub pv_name: Option<String>,
    /// `kubernetes.io/created-for/pvc/name`.
    pub pvc_name: Option<String>,
    /// `kubernetes.io/created-for/pvc/namespace`.
    pub pvc_namespace: Option<String>,
}

/// What the EBS CSI driver recorded about the VolumeSnapshotContent and VolumeSnapshot a
/// snapshot was cut for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotCsiTags {
    /// `CSIVolumeSnapshotName`: the VolumeSnapshotContent's name, always set by the driver.
    pub snapshot_name: Option<String>,
    /// `kubernetes.io/created-for/volumesnapshotcontent/name` (extra create metadata).
    pub content_name: Option<String>,
    /// `kubernetes.io/created-for/volumesnapshot/name`.
    pub volume_snapshot_name: Option<String>,
    /// `kubernetes.io/created-for/volumesnapshot/namespace`.
    pub volume_snapshot_namespace: Option<String>,
}

/// Which clusters a volume's tags attribute it to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Cluster names from `kubernetes.io/cluster/<name>`, `KubernetesCluster` and the configured
    /// tag key, sorted, without duplicates. Empty: nothing says whose it is.
    pub clusters: Vec<String>,
    /// `ebs.csi.aws.com/cluster=true`: the EBS CSI driver created it.
    pub created_by_csi_driver: bool,
}

impl EbsVolume {
    /// Whether any attachment holds it (EC2 reports no `detached` attachments, but a stale
    /// answer might: those do not count).
    pub fn attached(&self) -> bool {
        self.attachments
            .iter()
            .any(|a| a.state.as_deref() != Some("detached"))
    }

    /// The PV and claim the EBS CSI driver recorded in its tags.
    pub fn csi_tags(&self) -> CsiTags {
        let tag = |k: &str| self.tags.get(k).filter(|v| !v.is_empty()).cloned();
        CsiTags {
            volume_name: tag(TAG_CSI_VOLUME_NAME),
            pv_name: tag(TAG_PV_NAME),
            pvc_name: tag(TAG_PVC_NAME),
            pvc_namespace: tag(TAG_PVC_NAMESPACE),
        }
    }

    /// Which clusters the tags attribute it to; `cluster_tag_key` is an operator-configured tag
    /// whose value is a cluster name.
    pub fn attribution(&self, cluster_tag_key: Option<&str>) -> Attribution {
        attribution(&self.tags, cluster_tag_key)
    }
}

impl EbsSnapshot {
    /// The VolumeSnapshotContent and VolumeSnapshot the driver recorded in its tags.
    pub fn csi_tags(&self) -> SnapshotCsiTags {
        let tag = |k: &str| self.tags.get(k).filter(|v| !v.is_empty()).cloned();
        SnapshotCsiTags {
            snapshot_name: tag(TAG_CSI_SNAPSHOT_NAME),
            content_name: tag(TAG_SNAPSHOT_CONTENT_NAME),
            volume_snapshot_name: tag(TAG_SNAPSHOT_NAME),
            volume_snapshot_namespace: tag(TAG_SNAPSHOT_NAMESPACE),
        }
    }

    /// The volume it was cut from, as an `ebs.csi.aws.com` volume handle names it: `None` for
    /// a copy (EC2's placeholder id) or anything that is no volume id.
    pub fn source_volume(&self) -> Option<&str> {
        self.volume_id
            .as_deref()
            .filter(|v| *v != PLACEHOLDER_VOLUME_ID && super::handle::is_ebs_volume_id(v))
    }

    /// Which clusters the tags attribute it to, as for a volume (the driver copies
    /// `--extra-tags` and the cluster tags onto its snapshots).
    pub fn attribution(&self, cluster_tag_key: Option<&str>) -> Attribution {
        attribution(&self.tags, cluster_tag_key)
    }
}

/// Which clusters `tags` attribute a volume or snapshot to.
fn attribution(tags: &BTreeMap<String, String>, cluster_tag_key: Option<&str>) -> Attribution {
    let mut clusters: Vec<String> = Vec::new();
    for (k, v) in tags {
        let name = if let Some(name) = k.strip_prefix(TAG_CLUSTER_PREFIX) {
            Some(name)
        } else if k == TAG_KUBERNETES_CLUSTER || Some(k.as_str()) == cluster_tag_key {
            Some(v.as_str())
        } else {
            None
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            clusters.push(name.to_string());
        }
    }
    clusters.sort();
    clusters.dedup();
    Attribution {
        clusters,
        created_by_csi_driver: tags
            .get(TAG_EBS_CSI_CLUSTER)
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    }
}

/// The tags that attribute a volume or snapshot, sorted by key: those naming a cluster
/// (`kubernetes.io/cluster/<name>`, `KubernetesCluster`, `cluster_tag_key`), the EBS CSI
/// driver's own, and those naming what it was created for. What a finding shows a person looking
/// for its owner; the others (a `Name`, cost tags) stay in EC2.
pub(crate) fn attributing_tags(
    tags: &BTreeMap<String, String>,
    cluster_tag_key: Option<&str>,
) -> Vec<(String, String)> {
    const KEYS: [&str; 10] = [
        TAG_CSI_VOLUME_NAME,
        TAG_PV_NAME,
        TAG_PVC_NAME,
        TAG_PVC_NAMESPACE,
        TAG_KUBERNETES_CLUSTER,
        TAG_EBS_CSI_CLUSTER,
        TAG_CSI_SNAPSHOT_NAME,
        TAG_SNAPSHOT_CONTENT_NAME,
        TAG_SNAPSHOT_NAME,
        TAG_SNAPSHOT_NAMESPACE,
    ];
    tags.iter()
        .filter(|(k, _)| {
            KEYS.contains(&k.as_str())
                || k.starts_with(TAG_CLUSTER_PREFIX)
                || Some(k.as_str()) == cluster_tag_key
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Whole GiB (EC2's unit for a volume's size) as bytes.
pub fn gib_to_bytes(gib: i32) -> Option<u64> {
    u64::try_from(gib).ok()?.checked_mul(1 << 30)
}

/// What kind of failure a listing met. Stable; [`ErrorCategory::as_str`] is its metric label.
/// Every one of them means the scope's listing is unknown, never empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCategory {
    /// No credentials, or credentials AWS refused (unknown key, bad signature, expired token).
    Auth,
    /// The identity may not call `DescribeVolumes` here (`UnauthorizedOperation`, 403, an
    /// account not opted in to the region).
    Forbidden,
    /// Throttled (`RequestLimitExceeded`, 429), after the retries.
    Throttling,
    /// A server error (5xx), after the retries.
    Server,
    /// No answer within the bounds (a request, or the listing as a whole).
    Timeout,
    /// The endpoint could not be reached (refused connection, DNS, TLS).
    Unreachable,
    /// Anything else (an answer that could not be read, a bad request, a bad configuration).
    Other,
}

impl ErrorCategory {
    /// Stable short name, for metric labels and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::Auth => "auth",
            ErrorCategory::Forbidden => "forbidden",
            ErrorCategory::Throttling => "throttling",
            ErrorCategory::Server => "server",
            ErrorCategory::Timeout => "timeout",
            ErrorCategory::Unreachable => "unreachable",
            ErrorCategory::Other => "other",
        }
    }
}

/// The category of an error answer from EC2: by its code first (EC2's codes are specific:
/// <https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html>), then by its
/// HTTP status.
pub fn category_of_answer(code: Option<&str>, status: u16) -> ErrorCategory {
    match code.unwrap_or("") {
        "AuthFailure"
        | "InvalidClientTokenId"
        | "SignatureDoesNotMatch"
        | "IncompleteSignature"
        | "MissingAuthenticationToken"
        | "ExpiredToken"
        | "RequestExpired"
        | "UnrecognizedClientException" => ErrorCategory::Auth,
        "UnauthorizedOperation"
        | "AccessDenied"
        | "AccessDeniedException"
        | "OptInRequired"
        | "Blocked" => ErrorCategory::Forbidden,
        "RequestLimitExceeded"
        | "Throttling"
        | "ThrottlingException"
        | "TooManyRequestsException"
        | "RequestThrottled" => ErrorCategory::Throttling,
        "InternalError" | "InternalFailure" | "ServiceUnavailable" | "Unavailable" => {
            ErrorCategory::Server
        }
        _ => match status {
            401 => ErrorCategory::Auth,
            403 => ErrorCategory::Forbidden,
            429 => ErrorCategory::Throttling,
            500..=599 => ErrorCategory::Server,
            _ => ErrorCategory::Other,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(tags: &[(&str, &str)]) -> EbsVolume {
        EbsVolume {
            id: "vol-1".into(),
            size_bytes: gib_to_bytes(8),
            volume_type: Some("gp3".into()),
            created: None,
            state: Some("available".into()),
            availability_zone: Some("eu-west-1a".into()),
            snapshot_id: None,
            attachments: Vec::new(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn csi_tags_are_read_and_empty_values_are_none() {
        let v = volume(&[
            (TAG_CSI_VOLUME_NAME, "pvc-1"),
            (TAG_PV_NAME, "pvc-1"),
            (TAG_PVC_NAME, "data"),
            (TAG_PVC_NAMESPACE, ""),
        ]);
        assert_eq!(
            v.csi_tags(),
            CsiTags {
                volume_name: Some("pvc-1".into()),
                pv_name: Some("pvc-1".into()),
                pvc_name: Some("data".into()),
                pvc_namespace: None,
            }
        );
    }

    #[test]
    fn attribution_reads_every_cluster_tag_and_the_driver_flag() {
        let v = volume(&[
            ("kubernetes.io/cluster/prod", "owned"),
            (TAG_KUBERNETES_CLUSTER, "prod"),
            ("team/cluster", "staging"),
            (TAG_EBS_CSI_CLUSTER, "true"),
        ]);
        assert_eq!(
            v.attribution(Some("team/cluster")),
            Attribution {
                clusters: vec!["prod".into(), "staging".into()],
                created_by_csi_driver: true,
            }
        );
        // Without the configured key, its value names nothing.
        assert_eq!(v.attribution(None).clusters, vec!["prod".to_string()]);
        // The driver's flag names no cluster.
        let driver_only = volume(&[(TAG_EBS_CSI_CLUSTER, "true")]);
        assert_eq!(driver_only.attribution(None).clusters, Vec::<String>::new());
        assert!(driver_only.attribution(None).created_by_csi_driver);
    }

    #[test]
    fn attached_counts_every_attachment_but_a_detached_one() {
        let mut v = volume(&[]);
        assert!(!v.attached());
        v.attachments.push(EbsAttachment {
            instance_id: Some("i-1".into()),
            device: None,
            state: Some("detached".into()),
            attached: None,
        });
        assert!(!v.attached());
        v.attachments[0].state = Some("attached".into());
        assert!(v.attached());
    }

    #[test]
    fn sizes_are_gib() {
        assert_eq!(gib_to_bytes(1), Some(1_073_741_824));
        assert_eq!(gib_to_bytes(16_384), Some(16_384 * 1_073_741_824));
        assert_eq!(gib_to_bytes(-1), None);
    }

    #[test]
    fn answers_are_categorised_by_code_then_status() {
        use ErrorCategory::*;
        for (code, status, want) in [
            (Some("AuthFailure"), 401, Auth),
            (Some("UnauthorizedOperation"), 403, Forbidden),
            (Some("RequestLimitExceeded"), 503, Throttling),
            (Some("InternalError"), 500, Server),
            (Some("Unavailable"), 503, Server),
            (Some("InvalidParameterValue"), 400, Other),
            (None, 401, Auth),
            (None, 403, Forbidden),
            (None, 429, Throttling),
            (None, 502, Server),
            (None, 404, Other),
        ] {
            assert_eq!(category_of_answer(code, status), want, "{code:?} {status}");
        }
    }
}
