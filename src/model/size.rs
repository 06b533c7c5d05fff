//! A disk's size against its PersistentVolume's capacity. Pure.
//!
//! The census lists each cloud disk with its provisioned size; the PV says a capacity. The two
//! are compared at the backend's granularity, so that an exact match is never a finding: a
//! provisioner rounds a request up to what the backend allocates (a `10G` claim gets a 10 GiB EBS
//! volume or GCE disk, which bill by the GiB), and the PV may record either the request or the
//! allocated size.

use crate::model::backend::DiskRef;

pub(crate) const GIB: u64 = 1 << 30;
pub(crate) const MIB: u64 = 1 << 20;

/// The size of a disk as its backend allocates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSize {
    /// Bytes, as the census read them.
    pub bytes: u64,
    /// The backend's allocation unit: a size is rounded up to a whole number of these (GCE
    /// EBS and Azure: 1 GiB; ceph-csi: 1 MiB).
    pub granularity: u64,
}

impl DiskSize {
    /// The size of the disk `r` names, `bytes` long.
    pub fn of(r: &DiskRef, bytes: u64) -> DiskSize {
        DiskSize {
            bytes,
            granularity: r.backend().granularity(),
        }
    }

    /// How the disk compares with a PV capacity of `capacity` bytes (a capacity that is not a
    /// positive number of bytes is not compared).
    pub fn against(self, capacity: i64) -> Option<SizeDrift> {
        let capacity = u64::try_from(capacity).ok().filter(|c| *c > 0)?;
        let units = |b: u64| b.div_ceil(self.granularity);
        let (disk, pv) = (units(self.bytes), units(capacity));
        match disk.cmp(&pv) {
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(SizeDrift::DiskLarger),
            std::cmp::Ordering::Less => Some(SizeDrift::DiskSmaller),
        }
    }
}

/// How a disk's size differs from its PV's capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeDrift {
    /// The disk is larger: it bills more than the cluster shows (grown in the backend's console,
    /// or an expansion that grew the disk and stopped before the PV).
    DiskLarger,
    /// The disk is smaller: the PV says more than the disk has (its capacity edited by hand, or
    /// an expansion that never reached the disk).
    DiskSmaller,
}
