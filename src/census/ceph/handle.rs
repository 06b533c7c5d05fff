//! ceph-csi's words: how its volume handles, image names and image metadata name an RBD image,
//! and the keys of a censused pool and of the image a volume names. Pure; never panics on any
//! input.

use std::fmt;

use crate::model::crd::VolumeSourceInfo;
use crate::model::csi::RBD_CSI_DRIVER;

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

/// One censused pool (one namespace of it) of one Ceph cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PoolKey {
    /// ceph-csi's cluster id.
    pub(crate) cluster_id: String,
    /// The pool.
    pub(crate) pool: String,
    /// The RADOS namespace (empty: the default one).
    pub(crate) namespace: String,
}

impl PoolKey {
    /// A key.
    pub fn new(cluster_id: &str, pool: &str, namespace: Option<&str>) -> PoolKey {
        PoolKey {
            cluster_id: cluster_id.to_string(),
            pool: pool.to_string(),
            namespace: namespace.unwrap_or_default().to_string(),
        }
    }
}

impl fmt::Display for PoolKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.cluster_id, self.pool)
        } else {
            write!(f, "{}/{}/{}", self.cluster_id, self.pool, self.namespace)
        }
    }
}

/// The RBD image a volume names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageRef {
    /// ceph-csi's cluster id (`None`: an in-tree volume, which does not say).
    pub(crate) cluster_id: Option<String>,
    /// The pool's name, when the volume says it.
    pub(crate) pool: Option<String>,
    /// The pool's id, from a ceph-csi volume handle.
    pub(crate) pool_id: Option<i64>,
    /// The RADOS namespace (empty: the default one).
    pub(crate) namespace: String,
    /// The image's name.
    pub name: String,
}
