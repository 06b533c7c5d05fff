//! The CSI drivers of the backends the census knows, by name: what a PV's `spec.csi.driver`
//! says, and what an in-tree volume source migrates to (csi-translation-lib), which prices it.
//! How each driver's handles name a disk is its backend's (`src/census/<backend>/handle.rs`).

/// The GCE persistent disk CSI driver.
pub(crate) const GCE_PD_CSI_DRIVER: &str = "pd.csi.storage.gke.io";
/// The AWS EBS CSI driver.
pub(crate) const EBS_CSI_DRIVER: &str = "ebs.csi.aws.com";

/// The Azure Disk CSI driver.
pub(crate) const AZURE_DISK_CSI_DRIVER: &str = "disk.csi.azure.com";

/// The node-affinity (and label) keys that carry a volume's zone: the current one, the
/// deprecated one the in-tree plugins wrote, and the GCE and EBS CSI drivers' own.
pub(crate) const ZONE_KEYS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.gke.io/zone",
    "topology.ebs.csi.aws.com/zone",
];

/// The ceph-csi RBD driver's name (also the suffix of a renamed one, `<prefix>.rbd.csi.ceph.com`).
pub const RBD_CSI_DRIVER: &str = "rbd.csi.ceph.com";
