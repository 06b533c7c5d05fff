//! What a census listing says, for every backend: the listing of one scope ([`ScopeListing`]),
//! what it read of each disk ([`Seen`], [`DiskFacts`]), whose a disk is ([`Owner`]), and why a
//! listing failed ([`FailureKind`]). Plain data, written by the backends under
//! [`crate::census`] and read by the decisions in [`crate::decide::census`].

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::model::crd::ImageOwner;

/// What the census learned of one image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its id.
    pub(crate) id: String,
    /// Its details, when they were read (boxed: most images' are not, and a snapshot holds one
    /// entry per image).
    pub(crate) detail: Option<Box<DiskFacts>>,
    /// Its provisioned size in bytes when only that was read (an RBD image a volume names) or
    /// kept (a named disk's, its details forgotten: [`Seen::forget_details`]); a disk read in
    /// full has it in its details. See [`Seen::size`].
    pub(crate) size_only: Option<u64>,
    /// How many use it, when its details were forgotten (see [`Seen::users`]).
    pub(crate) users_only: u32,
}

impl Seen {
    /// Its provisioned size in bytes, when the listing read it.
    pub(crate) fn size(&self) -> Option<u64> {
        self.detail.as_ref().map(|d| d.size).or(self.size_only)
    }

    /// How many use it now (watchers, attached instances), as far as the listing read.
    pub(crate) fn users(&self) -> usize {
        self.detail
            .as_ref()
            .map_or(self.users_only as usize, |d| d.in_use.len())
    }

    /// Keeps of its details only what is read of a disk a volume names: its size and how many
    /// use it. The rest (owner, record, labels, when it was attached) is what a finding about a
    /// disk nothing names shows, and most disks are named.
    pub(crate) fn forget_details(&mut self) {
        if let Some(d) = self.detail.take() {
            self.size_only = Some(d.size);
            self.users_only = u32::try_from(d.in_use.len()).unwrap_or(u32::MAX);
        }
    }
}

/// What a census read of one disk or image, for any backend: read only for disks no volume
/// names, and what the decisions about them use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct DiskFacts {
    /// Provisioned size in bytes.
    pub(crate) size: u64,
    /// When it was created (not recorded by RBD images older than Mimic).
    pub(crate) created: Option<jiff::Timestamp>,
    /// Its type (`pd-balanced`, `gp3`), where the backend has one.
    pub(crate) kind: Option<String>,
    /// What uses it now, sorted: an RBD image's watchers, a GCE disk's `users`, the instances
    /// an EBS volume is attached to. Not empty: in use, never a plain orphan.
    pub(crate) in_use: Vec<String>,
    /// When it was last detached, where the backend records it (GCE `lastDetachTimestamp`).
    pub(crate) last_detached: Option<jiff::Timestamp>,
    /// The PV and claim its provisioner recorded it for (ceph-csi's image metadata; the GCE
    /// description's or EBS tags' `kubernetes.io/created-for/...`), when it recorded any.
    pub(crate) created_for: Option<CreatedFor>,
    /// The Kubernetes cluster the disk names as its owner (ceph-csi's `csi.ceph.com/cluster/name`,
    /// GKE's `goog-k8s-cluster-name`, EBS `kubernetes.io/cluster/<name>`, ...).
    pub(crate) cluster: Option<String>,
    /// A regional disk's replica zones.
    pub(crate) replica_zones: Vec<String>,
    /// A backend snapshot's source disk, as a CSI volume handle names it (GCE
    /// `projects/p/zones/z/disks/d`, EBS `vol-...`), when the backend records it.
    pub(crate) source_disk: Option<String>,
    /// Its zone, where the listing says (an EBS volume's availability zone; a zonal GCE disk's
    /// zone is its scope's).
    pub(crate) zone: Option<String>,
    /// Its region, where the listing says and the scope does not (an Azure disk's location).
    pub(crate) region: Option<String>,
    /// The labels or tags that attribute it (the cluster's, and those naming what it was
    /// created for), sorted by key: what a finding shows a person looking for its owner.
    pub(crate) tags: Vec<(String, String)>,
}

/// The PV and claim a provisioner recorded a disk for; for a backend snapshot, the
/// VolumeSnapshotContent (in `pv`) and VolumeSnapshot (in `pvc`, `pvc_namespace`) the CSI
/// driver recorded it for (`kubernetes.io/created-for/volumesnapshot...`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CreatedFor {
    /// The PV's name (a snapshot's: the VolumeSnapshotContent's).
    pub(crate) pv: Option<String>,
    /// The claim's name (a snapshot's: the VolumeSnapshot's).
    pub(crate) pvc: Option<String>,
    /// The claim's namespace (a snapshot's: the VolumeSnapshot's).
    pub(crate) pvc_namespace: Option<String>,
}

/// Whose a disk is, as far as it says and this operator's cluster name allows to tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// This cluster's (or, with no cluster named on either side, the provisioner recorded it
    /// and nothing says it is another's).
    Ours,
    /// Another cluster's: not a finding.
    OtherCluster(String),
    /// Cannot be told: a finding that says so, never a plain orphan.
    Unknown,
}

impl DiskFacts {
    /// The facts of an RBD image as the Ceph census reads them: its watchers' addresses and
    /// ceph-csi's ownership metadata.
    pub(crate) fn ceph(
        size: u64,
        created: Option<jiff::Timestamp>,
        mut watchers: Vec<String>,
        owner: Option<ImageOwner>,
    ) -> DiskFacts {
        watchers.sort();
        DiskFacts {
            size,
            created,
            in_use: watchers,
            cluster: owner.as_ref().and_then(|o| o.cluster_name.clone()),
            created_for: owner.map(|o| CreatedFor {
                pv: o.volume_name,
                pvc: o.claim_name,
                pvc_namespace: o.claim_namespace,
            }),
            ..DiskFacts::default()
        }
    }

    /// Whose it is, `ours` being this cluster's name (when configured).
    pub(crate) fn owner(&self, ours: Option<&str>) -> Owner {
        match (self.cluster.as_deref(), ours) {
            (Some(theirs), Some(ours)) if theirs != ours => Owner::OtherCluster(theirs.into()),
            (Some(_), Some(_)) => Owner::Ours,
            (None, None) if self.created_for.is_some() => Owner::Ours,
            _ => Owner::Unknown,
        }
    }

    /// The ownership as the CRD's `image.owner` says it.
    pub(crate) fn image_owner(&self) -> Option<ImageOwner> {
        self.created_for.as_ref().map(|c| ImageOwner {
            volume_name: c.pv.clone(),
            claim_namespace: c.pvc_namespace.clone(),
            claim_name: c.pvc.clone(),
            cluster_name: self.cluster.clone(),
        })
    }
}

/// One complete listing of one scope (a Ceph pool, a GCE zone or region, an EBS region, a
/// snapshot scope), as every backend hands it to the decisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScopeListing {
    /// When its listing began.
    pub(crate) started: Time,
    /// The number by which volume handles may name the scope instead of its name (a Ceph pool's
    /// id, which ceph-csi encodes in its handles); `None` where handles name it by name.
    pub scope_id: Option<i64>,
    /// Every disk (image, snapshot), by name.
    pub(crate) images: HashMap<String, Seen>,
    /// The names of disks deleted but still recoverable, holding their data (RBD's trash): a
    /// volume's disk found here is missing, and says where it is.
    pub(crate) recoverable: HashSet<String>,
    /// The images whose details were asked for and could not be read, with why: what is
    /// published about them stays as it is (nothing made, nothing cleared).
    pub(crate) unread: BTreeMap<String, String>,
}

/// What stopped a census, for any backend: each backend maps its own errors (librados codes, an
/// SDK's HTTP statuses) to one of these once, where it meets them.
#[cfg_attr(
    not(all(feature = "gce", feature = "ebs")),
    allow(
        dead_code,
        reason = "only the cloud backends meet refused credentials, quotas and 5xx"
    )
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureCategory {
    /// No usable credentials, or they were refused (GCE/AWS 401, an expired token).
    Auth,
    /// The credentials may not do this (a 403, cephx caps).
    Forbidden,
    /// A rate or quota limit (429, `RequestLimitExceeded`).
    Quota,
    /// The service failed (5xx).
    Server,
    /// No answer in time, or no connection: the service is unavailable.
    Timeout,
    /// Anything else (a missing pool, an unusable configuration, a library that cannot load).
    Other,
}

impl FailureCategory {
    /// Stable short name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailureCategory::Auth => "auth",
            FailureCategory::Forbidden => "forbidden",
            FailureCategory::Quota => "quota",
            FailureCategory::Server => "server",
            FailureCategory::Timeout => "timeout",
            FailureCategory::Other => "other",
        }
    }

    /// The category of an HTTP status a cloud service answered with, if it has one.
    #[cfg(any(feature = "gce", feature = "azure"))]
    pub(crate) fn of_status(status: u16) -> Option<FailureCategory> {
        match status {
            401 => Some(FailureCategory::Auth),
            403 => Some(FailureCategory::Forbidden),
            429 => Some(FailureCategory::Quota),
            500..=599 => Some(FailureCategory::Server),
            _ => None,
        }
    }
}

impl std::fmt::Display for FailureCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<FailureCategory> for FailureKind {
    /// A category without a finer name: the cloud backends', whose categories are these.
    fn from(c: FailureCategory) -> FailureKind {
        FailureKind::of(c)
    }
}

/// A census failure's kind: the neutral category, and the backend's own finer name for it (Ceph:
/// `unavailable`, `not_found`, `config`, ...), which the logs print and by which one problem
/// is told from another (a pool that goes from a refused key to a missing pool is news, though
/// both may be [`FailureCategory::Other`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FailureKind {
    /// The category.
    pub(crate) category: FailureCategory,
    /// The backend's stable short name for it.
    pub(crate) name: &'static str,
}

impl FailureKind {
    /// Its neutral category.
    pub fn category(&self) -> FailureCategory {
        self.category
    }

    /// A kind whose backend has no finer name than the category's.
    pub(crate) fn of(category: FailureCategory) -> FailureKind {
        FailureKind {
            category,
            name: category.as_str(),
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}
