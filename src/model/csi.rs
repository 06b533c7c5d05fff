//! How CSI drivers name a volume's disk or image: ceph-csi's volume handles, image names and
//! image metadata keys. Pure; never panics on any input.

use std::fmt;

use crate::model::crd::VolumeSourceInfo;
use crate::model::image::ImageRef;

/// The image name prefix ceph-csi uses unless a StorageClass sets `volumeNamePrefix`.
pub const CSI_VOLUME_PREFIX: &str = "csi-vol-";
/// The prefix of the images behind ceph-csi's snapshots (`snapshotNamePrefix`).
pub const CSI_SNAPSHOT_PREFIX: &str = "csi-snap-";

/// The metadata keys ceph-csi writes on the images it provisions.
pub const META_PV_NAME: &str = "csi.storage.k8s.io/pv/name";
pub const META_PVC_NAME: &str = "csi.storage.k8s.io/pvc/name";
pub const META_PVC_NAMESPACE: &str = "csi.storage.k8s.io/pvc/namespace";
pub const META_CLUSTER_NAME: &str = "csi.ceph.com/cluster/name";

/// A ceph-csi volume handle (`spec.csi.volumeHandle` of a PV it provisioned), version 1:
///
/// ```text
/// 0001-0024-8f4a1a5c-7f2e-11ee-b962-0242ac120002-0000000000000003-5f6c7d8e-9a0b-11ee-b962-0242ac120002
/// ^ver ^len ^clusterID (len bytes, may contain '-')  ^pool id (16 hex) ^object uuid (36)
/// ```
///
/// The image is `<volumeNamePrefix><uuid>`, `csi-vol-<uuid>` by default, in the pool with that id
/// (the `imageName` volume attribute names it directly when present).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeHandle {
    /// The encoding version (only 1 exists).
    pub(crate) version: u16,
    /// ceph-csi's `clusterID`: a key of its config map, usually the cluster's fsid.
    pub cluster_id: String,
    /// The pool's id in the cluster (`ceph osd pool ls detail`).
    pub pool_id: i64,
    /// The object's uuid: the image name's suffix.
    pub(crate) uuid: String,
}

impl VolumeHandle {
    /// The image name with ceph-csi's default prefix (`csi-vol-<uuid>`).
    pub fn image_name(&self) -> String {
        self.image_name_with_prefix(CSI_VOLUME_PREFIX)
    }

    /// The image name with a StorageClass's own `volumeNamePrefix`.
    pub(crate) fn image_name_with_prefix(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.uuid)
    }
}

/// Why a string is not a ceph-csi volume handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandleError {
    /// Shorter than the fixed fields (64 bytes plus the cluster id).
    TooShort,
    /// The version field is not 4 hex digits.
    BadVersion,
    /// A version this decoder does not know.
    UnsupportedVersion(u16),
    /// A field is not followed by `-` where the layout puts one (byte offset).
    BadSeparator(usize),
    /// The cluster id length is not 4 hex digits, or runs past the end.
    BadClusterIdLength,
    /// The cluster id is not valid text at the given length (it cuts a character).
    BadClusterId,
    /// The pool id is not 16 hex digits.
    BadPoolId,
    /// The remainder is not a 36-character uuid.
    BadUuid,
}

impl fmt::Display for HandleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandleError::TooShort => f.write_str("too short for a ceph-csi volume handle"),
            HandleError::BadVersion => f.write_str("the version field is not 4 hex digits"),
            HandleError::UnsupportedVersion(v) => write!(f, "unknown handle version {v}"),
            HandleError::BadSeparator(at) => write!(f, "expected '-' at byte {at}"),
            HandleError::BadClusterIdLength => {
                f.write_str("the cluster id length is not 4 hex digits within the handle")
            }
            HandleError::BadClusterId => f.write_str("the cluster id is not valid text"),
            HandleError::BadPoolId => f.write_str("the pool id is not 16 hex digits"),
            HandleError::BadUuid => f.write_str("the object uuid is not a 36-character uuid"),
        }
    }
}

impl std::error::Error for HandleError {}

/// Parses a ceph-csi (RBD or CephFS) volume handle, version 1, as ceph-csi's
/// `DecomposeCSIID` does, but stricter: every numeric field must be plain hex digits (no sign)
/// and the uuid must look like one.
pub fn parse_volume_handle(handle: &str) -> Result<VolumeHandle, HandleError> {
    const UUID_LEN: usize = 36;
    // 4 version, '-', 4 length, '-', cluster id, '-', 16 pool id, '-', 36 uuid.
    const FIXED: usize = 4 + 1 + 4 + 1 + 1 + 16 + 1 + UUID_LEN;
    let b = handle.as_bytes();
    if b.len() < FIXED {
        return Err(HandleError::TooShort);
    }
    let version = hex_u64(&b[0..4]).ok_or(HandleError::BadVersion)? as u16;
    if version != 1 {
        return Err(HandleError::UnsupportedVersion(version));
    }
    sep(b, 4)?;
    let len = hex_u64(&b[5..9]).ok_or(HandleError::BadClusterIdLength)? as usize;
    sep(b, 9)?;
    if b.len() != FIXED + len {
        return Err(if b.len() < FIXED + len {
            HandleError::BadClusterIdLength
        } else {
            // The only variable field is the cluster id: any other surplus means the uuid
            // (the last field) is not 36 bytes.
            HandleError::BadUuid
        });
    }
    let cluster_id = handle.get(10..10 + len).ok_or(HandleError::BadClusterId)?;
    let pool_at = 10 + len + 1;
    sep(b, pool_at - 1)?;
    let pool_id = hex_u64(&b[pool_at..pool_at + 16]).ok_or(HandleError::BadPoolId)?;
    sep(b, pool_at + 16)?;
    let uuid = handle
        .get(pool_at + 17..)
        .filter(|u| is_uuid(u))
        .ok_or(HandleError::BadUuid)?;
    Ok(VolumeHandle {
        version,
        cluster_id: cluster_id.to_string(),
        // ceph-csi writes the int64 pool id as a big-endian uint64.
        pool_id: pool_id as i64,
        uuid: uuid.to_string(),
    })
}

fn sep(b: &[u8], at: usize) -> Result<(), HandleError> {
    if b.get(at) == Some(&b'-') {
        Ok(())
    } else {
        Err(HandleError::BadSeparator(at))
    }
}

/// Plain hex digits (no sign, no prefix) of at most 16 digits.
fn hex_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &c| {
        let d = (c as char).to_digit(16)?;
        Some(acc << 4 | u64::from(d))
    })
}

/// `8-4-4-4-12` hex digits with dashes (either case), as ceph-csi's uuids are.
pub fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The uuid of an image named `<prefix><uuid>`, e.g. `csi-vol-<uuid>` with
/// [`CSI_VOLUME_PREFIX`]; `None` for any other name.
pub fn image_uuid<'a>(image: &'a str, prefix: &str) -> Option<&'a str> {
    image.strip_prefix(prefix).filter(|u| is_uuid(u))
}

/// The uuid of a ceph-csi volume image with the default prefix (`csi-vol-<uuid>`).
pub fn csi_volume_uuid(image: &str) -> Option<&str> {
    image_uuid(image, CSI_VOLUME_PREFIX)
}

/// The GCE persistent disk CSI driver.
pub(crate) const GCE_PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";
/// The AWS EBS CSI driver.
pub(crate) const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// The Azure Disk CSI driver.
pub(crate) const AZURE_DISK_CSI_DRIVER: &str = "disk.csi.azure.com";

/// The subscription, resource group and name of an Azure resource id of `kind` (`disks`,
/// `snapshots`): `/subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/<kind>/NAME`,
/// every part compared and returned lower-cased (Azure treats resource ids case-insensitively,
/// and the Azure Disk CSI driver writes them as ARM returned them, often in another case than
/// the portal's). `None` for anything else (never panics).
pub(crate) fn parse_azure_id(id: &str, kind: &str) -> Option<(String, String, String)> {
    let lower = id.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('/').collect();
    let [
        "",
        "subscriptions",
        sub,
        "resourcegroups",
        rg,
        "providers",
        "microsoft.compute",
        k,
        name,
    ] = parts[..]
    else {
        return None;
    };
    if k != kind || [sub, rg, name].iter().any(|p| p.is_empty()) {
        return None;
    }
    Some((sub.to_string(), rg.to_string(), name.to_string()))
}

/// The node-affinity (and label) keys that carry a volume's zone: the current one, the
/// deprecated one the in-tree plugins wrote, and the GCE and EBS CSI drivers' own.
pub(crate) const ZONE_KEYS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.gke.io/zone",
    "topology.ebs.csi.aws.com/zone",
];

/// What the project of a migrated in-tree disk's handle says when the PV did not name one
/// (csi-translation-lib's `UnspecifiedValue`).
const UNSPECIFIED: &str = "UNSPECIFIED";

/// A GCE PD CSI volume handle: `projects/P/zones/Z/disks/D` (a zonal disk) or
/// `projects/P/regions/R/disks/D` (a regional one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct GceHandle {
    /// The project (`None` for `UNSPECIFIED`, which csi-translation-lib writes for migrated
    /// in-tree volumes).
    pub(crate) project: Option<String>,
    /// The zone or the region.
    pub(crate) location: String,
    /// Whether `location` is a region (the disk is a regional PD).
    pub(crate) regional: bool,
    /// The disk's name.
    pub(crate) name: String,
}

/// Parses a GCE PD CSI volume handle; `None` for anything else (never panics).
pub(crate) fn parse_gce_handle(handle: &str) -> Option<GceHandle> {
    let parts: Vec<&str> = handle.split('/').collect();
    let ["projects", project, kind, location, "disks", name] = parts[..] else {
        return None;
    };
    let regional = match kind {
        "zones" => false,
        "regions" => true,
        _ => return None,
    };
    if [project, location, name].iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(GceHandle {
        project: (project != UNSPECIFIED).then(|| project.to_string()),
        location: location.to_string(),
        regional,
        name: name.to_string(),
    })
}

/// Where an in-tree GCE disk is, from the zones its PV's node affinity lists (or a label
/// value with `__` between zones): one zone is a zonal disk's; two or more zones of one region
/// are a regional disk's, and its location is that region (csi-translation-lib's
/// `getRegionFromZones`: a zone is `{locale}-{region}-{zone}`). Anything else: `None`.
pub(crate) fn gce_location(zones: &[&str]) -> Option<String> {
    let mut all: Vec<&str> = zones
        .iter()
        .flat_map(|z| z.split("__"))
        .filter(|z| !z.is_empty())
        .collect();
    all.sort_unstable();
    all.dedup();
    match all[..] {
        [] => None,
        [one] => Some(one.to_string()),
        _ => {
            let mut regions = all.iter().map(|z| gce_region_of(z));
            let first = regions.next()??;
            regions
                .all(|r| r.as_deref() == Some(first.as_str()))
                .then_some(first)
        }
    }
}

/// A GCE location: a zone or a region (as the census configuration and the scopes name them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GceLocation {
    /// `{locale}-{region}-{zone}`: `europe-west1-b`.
    Zone(String),
    /// `{locale}-{region}`: `europe-west1`.
    Region(String),
}

impl GceLocation {
    /// Tells a zone from a region by its shape; `None` for anything else.
    pub(crate) fn parse(s: &str) -> Option<GceLocation> {
        let parts: Vec<&str> = s.split('-').collect();
        if parts.iter().any(|p| {
            p.is_empty()
                || !p
                    .bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        }) {
            return None;
        }
        match parts.len() {
            2 => Some(GceLocation::Region(s.into())),
            3 => Some(GceLocation::Zone(s.into())),
            _ => None,
        }
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        match self {
            GceLocation::Zone(n) | GceLocation::Region(n) => n,
        }
    }

    /// Its zone (a zone's own name) and its region (a zone's region, or the region itself).
    pub(crate) fn zone_and_region(&self) -> (Option<String>, Option<String>) {
        match self {
            GceLocation::Zone(z) => (Some(z.clone()), gce_region_of(z)),
            GceLocation::Region(r) => (None, Some(r.clone())),
        }
    }
}

/// The region of a GCE zone `{locale}-{region}-{zone}` (`us-central1-a` → `us-central1`).
fn gce_region_of(zone: &str) -> Option<String> {
    let parts: Vec<&str> = zone.split('-').collect();
    match parts[..] {
        [locale, region, z] if ![locale, region, z].contains(&"") => {
            Some(format!("{locale}-{region}"))
        }
        _ => None,
    }
}

/// An EBS volume id (`vol-` and hex digits: `vol-12345678` or `vol-0123456789abcdef0`).
pub(crate) fn is_ebs_volume_id(id: &str) -> bool {
    id.strip_prefix("vol-")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
}

/// The volume id and zone of an in-tree `awsElasticBlockStore.volumeID`: `aws://ZONE/vol-…`,
/// `aws:///vol-…` or a bare `vol-…` (csi-translation-lib's `KubernetesVolumeIDToEBSVolumeID`).
pub(crate) fn parse_ebs_volume_id(id: &str) -> Option<(String, Option<String>)> {
    let (zone, vol) = match id.strip_prefix("aws://") {
        Some(rest) => {
            let (zone, vol) = rest.split_once('/')?;
            (Some(zone).filter(|z| !z.is_empty()), vol.trim_matches('/'))
        }
        None => (None, id),
    };
    is_ebs_volume_id(vol).then(|| (vol.to_string(), zone.map(str::to_string)))
}

/// The region of an AWS availability zone: the zone up to its first numeric part, without the
/// zone letter (`us-east-1a` → `us-east-1`, `us-gov-west-1b` → `us-gov-west-1`, a Local Zone
/// `us-west-2-lax-1a` → `us-west-2`). `None` for what is not shaped like a zone.
pub(crate) fn aws_region_of(zone: &str) -> Option<String> {
    let parts: Vec<&str> = zone.split('-').collect();
    let at = parts
        .iter()
        .position(|p| p.starts_with(|c: char| c.is_ascii_digit()))?;
    if at < 2 || parts[..at].iter().any(|p| p.is_empty()) {
        return None;
    }
    let num = parts[at];
    let digits = num.trim_end_matches(|c: char| c.is_ascii_lowercase());
    if digits.is_empty()
        || !digits.bytes().all(|c| c.is_ascii_digit())
        || num.len() - digits.len() > 1
    {
        return None;
    }
    // A region's own name has no zone letter: `us-east-1` is a region, not a zone.
    if at + 1 == parts.len() && num.len() == digits.len() {
        return None;
    }
    Some(format!("{}-{digits}", parts[..at].join("-")))
}

// ---- which disk a volume's source names, for every backend ----

/// The ceph-csi RBD driver's name (also the suffix of a renamed one, `<prefix>.rbd.csi.ceph.com`).
pub const RBD_CSI_DRIVER: &str = "rbd.csi.ceph.com";

/// The RBD image a volume's source names, if it names one.
pub fn image_ref(s: &VolumeSourceInfo) -> Option<ImageRef> {
    let nonempty = |v: &Option<String>| v.clone().filter(|v| !v.is_empty());
    match s.kind.as_str() {
        "csi"
            if s.driver
                .as_deref()
                .is_some_and(|d| d.ends_with(RBD_CSI_DRIVER)) =>
        {
            let handle = s
                .volume_handle
                .as_deref()
                .and_then(|h| parse_volume_handle(h).ok());
            let name =
                nonempty(&s.image_name).or_else(|| handle.as_ref().map(|h| h.image_name()))?;
            let pool = nonempty(&s.pool);
            let pool_id = handle.as_ref().map(|h| h.pool_id);
            if pool.is_none() && pool_id.is_none() {
                return None;
            }
            Some(ImageRef {
                cluster_id: nonempty(&s.cluster_id).or_else(|| handle.map(|h| h.cluster_id)),
                pool,
                pool_id,
                namespace: nonempty(&s.rados_namespace).unwrap_or_default(),
                name,
            })
        }
        "rbd" => Some(ImageRef {
            cluster_id: None,
            pool: nonempty(&s.pool),
            pool_id: None,
            namespace: String::new(),
            name: nonempty(&s.image_name)?,
        }),
        _ => None,
    }
}
