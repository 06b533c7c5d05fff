//! The cluster of issue 10, as objects: realistic CSI PersistentVolumes (Ceph RBD through
//! rook-ceph's `rbd.csi.ceph.com` and GCE PD through `pd.csi.storage.gke.io`, with the volume
//! attributes, secret references, node affinity, labels, annotations and finalizers their
//! provisioners write), the claims bound to them, their StorageClasses and namespaces.
//!
//! Shared by `examples/memory.rs` (in process) and `examples/fleet.rs` (a real control plane), so
//! both measure the same objects. Deterministic: object `i` is always the same.
//!
//! Shape: `pvs` volumes, of which `leftovers` are Released Retain volumes whose claim is gone
//! (ClaimDeleted, published at once) spread evenly through the names; every other volume is Bound
//! to an existing claim of the same index (so `claims = pvs - leftovers`).

#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Namespace, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, SecretReference, VolumeNodeAffinity, VolumeResourceRequirements,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How many of what.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// PersistentVolumes.
    pub pvs: usize,
    /// Of which leftovers (Released, Retain, claim gone).
    pub leftovers: usize,
}

impl Shape {
    /// The issue's cluster: 50,000 PVs, 40,000 claims, 10,000 leftovers.
    pub const ISSUE: Shape = Shape {
        pvs: 50_000,
        leftovers: 10_000,
    };

    /// Claims (one per volume that is not a leftover).
    pub fn claims(&self) -> usize {
        self.pvs - self.leftovers
    }

    /// Whether volume `i` is a leftover (spread evenly: Bresenham).
    pub fn is_leftover(&self, i: usize) -> bool {
        let (l, p) = (self.leftovers as u128, self.pvs.max(1) as u128);
        ((i as u128 + 1) * l) / p > (i as u128 * l) / p
    }

    /// Objects the operator caches: PVs + claims + VolumeLeftovers (classes are a handful).
    pub fn cached_objects(&self) -> usize {
        self.pvs + self.claims() + self.leftovers
    }
}

/// Namespaces the claims live in.
pub const NAMESPACES: usize = 240;
const TEAMS: [&str; 12] = [
    "payments",
    "checkout",
    "search",
    "identity",
    "ledger",
    "catalog",
    "billing",
    "ml-features",
    "observability",
    "messaging",
    "inventory",
    "analytics",
];
const ENVS: [&str; 4] = ["prod", "staging", "dev", "perf"];
const APPS: [&str; 10] = [
    "postgres",
    "mysql",
    "redis",
    "kafka",
    "elasticsearch",
    "zookeeper",
    "mongodb",
    "rabbitmq",
    "minio",
    "cassandra",
];
const ZONES: [&str; 3] = ["europe-west1-b", "europe-west1-c", "europe-west1-d"];
const SIZES: [&str; 6] = ["8Gi", "10Gi", "20Gi", "50Gi", "100Gi", "500Gi"];

/// `(name, provisioner, reclaim policy)` of the classes; volumes are spread over them.
pub const CLASSES: [(&str, &str, &str); 4] = [
    ("ceph-block", "rook-ceph.rbd.csi.ceph.com", "Retain"),
    ("ceph-block-delete", "rook-ceph.rbd.csi.ceph.com", "Delete"),
    ("premium-rwo", "pd.csi.storage.gke.io", "Retain"),
    ("standard-rwo", "pd.csi.storage.gke.io", "Delete"),
];

/// A deterministic UUID-shaped string for `(kind, i)`.
pub fn uuid(kind: u64, i: usize) -> String {
    let mut x = (i as u64)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(kind.wrapping_mul(0xbf58_476d_1ce4_e5b9));
    let mut next = || {
        x ^= x >> 30;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x ^= x >> 27;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^= x >> 31;
        x
    };
    let (a, b) = (next(), next());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// The namespace of claim `i`.
pub fn namespace(i: usize) -> String {
    let n = i % NAMESPACES;
    format!(
        "{}-{}-{:02}",
        TEAMS[n % TEAMS.len()],
        ENVS[(n / TEAMS.len()) % ENVS.len()],
        n / (TEAMS.len() * ENVS.len())
    )
}

/// Every namespace.
pub fn namespaces() -> Vec<Namespace> {
    (0..NAMESPACES)
        .map(|n| Namespace {
            metadata: ObjectMeta {
                name: Some(namespace(n)),
                labels: Some(BTreeMap::from([(
                    "kubernetes.io/metadata.name".to_string(),
                    namespace(n),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        })
        .collect()
}

fn app(i: usize) -> &'static str {
    APPS[(i / NAMESPACES) % APPS.len()]
}

/// The claim's name: a StatefulSet's `data-<app>-<instance>-<ordinal>` (the instance grows with
/// `i`, so names stay unique in a namespace at any fleet size).
pub fn claim_name(i: usize) -> String {
    format!("data-{}-{}-{}", app(i), i / 7, i % 7)
}

/// The PV's name: what the external provisioner names it, `pvc-<uuid>`.
pub fn pv_name(i: usize) -> String {
    format!("pvc-{}", uuid(1, i))
}

/// The class of volume `i`. Leftovers are Retain (they are published at once).
pub fn class_of(shape: &Shape, i: usize) -> usize {
    let ceph = i % 5 < 3; // 60 % Ceph RBD, 40 % GCE PD
    let retain = shape.is_leftover(i) || i.is_multiple_of(2);
    match (ceph, retain) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    }
}

/// The StorageClasses, as an admin writes them.
pub fn classes() -> Vec<StorageClass> {
    CLASSES
        .iter()
        .map(|(name, provisioner, policy)| {
            let ceph = provisioner.contains("ceph");
            let parameters: Vec<(&str, &str)> = if ceph {
                vec![
                    ("clusterID", "rook-ceph"),
                    ("pool", "replicapool"),
                    ("imageFormat", "2"),
                    (
                        "imageFeatures",
                        "layering,fast-diff,object-map,deep-flatten,exclusive-lock",
                    ),
                    (
                        "csi.storage.k8s.io/provisioner-secret-name",
                        "rook-csi-rbd-provisioner",
                    ),
                    (
                        "csi.storage.k8s.io/provisioner-secret-namespace",
                        "rook-ceph",
                    ),
                    (
                        "csi.storage.k8s.io/controller-expand-secret-name",
                        "rook-csi-rbd-provisioner",
                    ),
                    (
                        "csi.storage.k8s.io/controller-expand-secret-namespace",
                        "rook-ceph",
                    ),
                    (
                        "csi.storage.k8s.io/node-stage-secret-name",
                        "rook-csi-rbd-node",
                    ),
                    (
                        "csi.storage.k8s.io/node-stage-secret-namespace",
                        "rook-ceph",
                    ),
                    ("csi.storage.k8s.io/fstype", "ext4"),
                ]
            } else if name.starts_with("premium") {
                vec![("type", "pd-ssd")]
            } else {
                vec![("type", "pd-balanced")]
            };
            let parameters: BTreeMap<String, String> = parameters
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            StorageClass {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    labels: Some(BTreeMap::from([(
                        "addonmanager.kubernetes.io/mode".to_string(),
                        "EnsureExists".to_string(),
                    )])),
                    ..ObjectMeta::default()
                },
                provisioner: provisioner.to_string(),
                reclaim_policy: Some(policy.to_string()),
                volume_binding_mode: Some(
                    if ceph {
                        "Immediate"
                    } else {
                        "WaitForFirstConsumer"
                    }
                    .into(),
                ),
                allow_volume_expansion: Some(true),
                parameters: Some(parameters),
                ..StorageClass::default()
            }
        })
        .collect()
}

/// Claim `i` (bound to volume `i`), as a StatefulSet and the PV controller leave it.
pub fn claim(shape: &Shape, i: usize) -> PersistentVolumeClaim {
    let (class, provisioner, _) = CLASSES[class_of(shape, i)];
    let app = app(i);
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim_name(i)),
            namespace: Some(namespace(i)),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/name".to_string(), app.to_string()),
                (
                    "app.kubernetes.io/instance".to_string(),
                    format!("{app}-{}", (i / 7) % 1000),
                ),
                ("app.kubernetes.io/component".to_string(), "database".into()),
                ("app.kubernetes.io/part-of".to_string(), namespace(i)),
            ])),
            annotations: Some(BTreeMap::from([
                ("pv.kubernetes.io/bind-completed".to_string(), "yes".into()),
                (
                    "pv.kubernetes.io/bound-by-controller".to_string(),
                    "yes".into(),
                ),
                (
                    "volume.beta.kubernetes.io/storage-provisioner".to_string(),
                    provisioner.to_string(),
                ),
                (
                    "volume.kubernetes.io/storage-provisioner".to_string(),
                    provisioner.to_string(),
                ),
            ])),
            finalizers: Some(vec!["kubernetes.io/pvc-protection".into()]),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            storage_class_name: Some(class.into()),
            volume_mode: Some("Filesystem".into()),
            volume_name: Some(pv_name(i)),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(SIZES[i % SIZES.len()].into()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The status the PV controller writes on a bound claim (a merge patch of the status).
pub fn claim_status(i: usize) -> serde_json::Value {
    serde_json::json!({"status": {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": SIZES[i % SIZES.len()]},
    }})
}

/// Volume `i`, as its CSI provisioner creates it, bound to claim `i` (`claim_uid`: the claim's
/// uid; any uid for a leftover, whose claim does not exist).
pub fn volume(shape: &Shape, i: usize, claim_uid: &str) -> PersistentVolume {
    let (class, driver, policy) = CLASSES[class_of(shape, i)];
    let ceph = driver.contains("ceph");
    let name = pv_name(i);
    let ns = namespace(i);
    let claim = claim_name(i);
    let zone = ZONES[i % ZONES.len()];
    let id = uuid(2, i);
    let mut annotations = BTreeMap::from([(
        "pv.kubernetes.io/provisioned-by".to_string(),
        driver.to_string(),
    )]);
    let mut labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), app(i).to_string()),
        (
            "team".to_string(),
            TEAMS[(i % NAMESPACES) % TEAMS.len()].to_string(),
        ),
    ]);
    let csi = if ceph {
        annotations.insert(
            "volume.kubernetes.io/provisioner-deletion-secret-name".into(),
            "rook-csi-rbd-provisioner".into(),
        );
        annotations.insert(
            "volume.kubernetes.io/provisioner-deletion-secret-namespace".into(),
            "rook-ceph".into(),
        );
        CSIPersistentVolumeSource {
            driver: driver.into(),
            fs_type: Some("ext4".into()),
            volume_handle: format!("0001-0009-rook-ceph-0000000000000002-{id}"),
            controller_expand_secret_ref: Some(SecretReference {
                name: Some("rook-csi-rbd-provisioner".into()),
                namespace: Some("rook-ceph".into()),
            }),
            node_stage_secret_ref: Some(SecretReference {
                name: Some("rook-csi-rbd-node".into()),
                namespace: Some("rook-ceph".into()),
            }),
            volume_attributes: Some(BTreeMap::from([
                ("clusterID".to_string(), "rook-ceph".to_string()),
                (
                    "imageFeatures".to_string(),
                    "layering,fast-diff,object-map,deep-flatten,exclusive-lock".to_string(),
                ),
                ("imageFormat".to_string(), "2".to_string()),
                ("imageName".to_string(), format!("csi-vol-{id}")),
                ("journalPool".to_string(), "replicapool".to_string()),
                ("pool".to_string(), "replicapool".to_string()),
                ("csi.storage.k8s.io/pv/name".to_string(), name.clone()),
                ("csi.storage.k8s.io/pvc/name".to_string(), claim.clone()),
                ("csi.storage.k8s.io/pvc/namespace".to_string(), ns.clone()),
                (
                    "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                    format!("1718000000000-{}-{driver}", 1000 + i % 3),
                ),
            ])),
            ..CSIPersistentVolumeSource::default()
        }
    } else {
        annotations.insert(
            "volume.kubernetes.io/provisioner-deletion-secret-name".into(),
            String::new(),
        );
        annotations.insert(
            "volume.kubernetes.io/provisioner-deletion-secret-namespace".into(),
            String::new(),
        );
        labels.insert(
            "topology.kubernetes.io/region".into(),
            "europe-west1".into(),
        );
        labels.insert("topology.kubernetes.io/zone".into(), zone.into());
        CSIPersistentVolumeSource {
            driver: driver.into(),
            fs_type: Some("ext4".into()),
            volume_handle: format!("projects/{GCE_PROJECT}/zones/{zone}/disks/{name}"),
            volume_attributes: Some(BTreeMap::from([(
                "storage.kubernetes.io/csiProvisionerIdentity".to_string(),
                format!("1718000000000-{}-{driver}", 1000 + i % 3),
            )])),
            ..CSIPersistentVolumeSource::default()
        }
    };
    let node_affinity = (!ceph).then(|| VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "topology.gke.io/zone".into(),
                    operator: "In".into(),
                    values: Some(vec![zone.into()]),
                }]),
                match_fields: None,
            }],
        }),
    });
    let mut finalizers = vec!["kubernetes.io/pv-protection".to_string()];
    if !ceph {
        finalizers.push("external-attacher/pd-csi-storage-gke-io".into());
    }
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: Some(annotations),
            finalizers: Some(finalizers),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec {
            access_modes: Some(vec!["ReadWriteOnce".into()]),
            capacity: Some(BTreeMap::from([(
                "storage".to_string(),
                Quantity(SIZES[i % SIZES.len()].into()),
            )])),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: Some(ns),
                name: Some(claim),
                uid: Some(claim_uid.into()),
                resource_version: Some(format!("{}", 100_000 + i * 3)),
                ..ObjectReference::default()
            }),
            csi: Some(csi),
            node_affinity,
            persistent_volume_reclaim_policy: Some(policy.into()),
            storage_class_name: Some(class.into()),
            volume_mode: Some("Filesystem".into()),
            ..PersistentVolumeSpec::default()
        }),
        status: None,
    }
}

/// The phase the PV controller leaves volume `i` in.
pub fn phase(shape: &Shape, i: usize) -> &'static str {
    if shape.is_leftover(i) {
        "Released"
    } else {
        "Bound"
    }
}

/// The uid a leftover's claimRef names (its claim is gone).
pub fn gone_claim_uid(i: usize) -> String {
    uuid(3, i)
}

// --- snapshots and disks (examples/fleet.rs: the snapshot stores and the census) --------------

/// Whether volume `i` has a snapshot when one volume in `every` has one (0: none): a scheduler's
/// daily VolumeSnapshot of the claim, kept after the claim is gone, as backups are.
pub fn has_snapshot(every: usize, i: usize) -> bool {
    every > 0 && i.is_multiple_of(every)
}

/// How many of `shape`'s volumes have a snapshot.
pub fn snapshots(shape: &Shape, every: usize) -> usize {
    (0..shape.pvs).filter(|&i| has_snapshot(every, i)).count()
}

/// `(name, driver, deletion policy)` of the VolumeSnapshotClasses, one per driver, as their
/// installs write them.
pub const SNAPSHOT_CLASSES: [(&str, &str, &str); 2] = [
    (
        "csi-rbdplugin-snapclass",
        "rook-ceph.rbd.csi.ceph.com",
        "Delete",
    ),
    ("csi-gce-pd-snapclass", "pd.csi.storage.gke.io", "Delete"),
];

/// The VolumeSnapshotClasses.
pub fn snapshot_classes() -> Vec<serde_json::Value> {
    SNAPSHOT_CLASSES
        .iter()
        .map(|(name, driver, policy)| {
            let mut c = serde_json::json!({
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshotClass",
                "metadata": {"name": name},
                "driver": driver,
                "deletionPolicy": policy,
            });
            if driver.contains("ceph") {
                c["parameters"] = serde_json::json!({
                    "clusterID": "rook-ceph",
                    "csi.storage.k8s.io/snapshotter-secret-name": "rook-csi-rbd-provisioner",
                    "csi.storage.k8s.io/snapshotter-secret-namespace": "rook-ceph",
                });
            }
            c
        })
        .collect()
}

fn snapshot_class_of(shape: &Shape, i: usize) -> (&'static str, &'static str) {
    let (_, driver, _) = CLASSES[class_of(shape, i)];
    let (name, driver, _) = SNAPSHOT_CLASSES
        .iter()
        .find(|(_, d, _)| *d == driver)
        .expect("a snapshot class per driver");
    (name, driver)
}

/// The name of volume `i`'s VolumeSnapshot (in the claim's namespace).
pub fn snapshot_name(i: usize) -> String {
    format!("{}-daily", claim_name(i))
}

/// The name the snapshot-controller gives the content of the snapshot with uid `uid`.
pub fn content_name(uid: &str) -> String {
    format!("snapcontent-{uid}")
}

fn restore_bytes(i: usize) -> u64 {
    let size = SIZES[i % SIZES.len()];
    size.trim_end_matches("Gi").parse::<u64>().expect("Gi") << 30
}

/// Volume `i`'s VolumeSnapshot, as a snapshot scheduler creates it (its status comes after).
pub fn volume_snapshot(shape: &Shape, i: usize) -> serde_json::Value {
    let (class, _) = snapshot_class_of(shape, i);
    serde_json::json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": snapshot_name(i),
            "namespace": namespace(i),
            // SnapScheduler's (backube/snapscheduler): plain CSI snapshots on a schedule, which
            // the operator decides on (Velero's are kept out of the report by default).
            "labels": {
                "snapscheduler.backube/schedule": "daily",
                "app.kubernetes.io/name": app(i),
            },
            "finalizers": [
                "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection",
                "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection",
            ],
        },
        "spec": {
            "source": {"persistentVolumeClaimName": claim_name(i)},
            "volumeSnapshotClassName": class,
        },
    })
}

/// The status the snapshot-controller writes on a ready snapshot (a merge patch).
pub fn volume_snapshot_status(i: usize, content: &str) -> serde_json::Value {
    serde_json::json!({"status": {
        "boundVolumeSnapshotContentName": content,
        "creationTime": "2026-12-06T02:00:07Z",
        "readyToUse": true,
        "restoreSize": SIZES[i % SIZES.len()],
    }})
}

/// The content the snapshot-controller makes for volume `i`'s snapshot (uid `snapshot_uid`).
pub fn snapshot_content(shape: &Shape, i: usize, snapshot_uid: &str) -> serde_json::Value {
    let (class, driver) = snapshot_class_of(shape, i);
    let pv = volume(shape, i, "");
    let handle = pv
        .spec
        .and_then(|s| s.csi)
        .map(|c| c.volume_handle)
        .unwrap_or_default();
    let mut c = serde_json::json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": {
            "name": content_name(snapshot_uid),
            "finalizers": ["snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"],
        },
        "spec": {
            "deletionPolicy": "Delete",
            "driver": driver,
            "source": {"volumeHandle": handle},
            "sourceVolumeMode": "Filesystem",
            "volumeSnapshotClassName": class,
            "volumeSnapshotRef": {
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshot",
                "name": snapshot_name(i),
                "namespace": namespace(i),
                "uid": snapshot_uid,
                "resourceVersion": format!("{}", 500_000 + i * 3),
            },
        },
    });
    if driver.contains("ceph") {
        c["metadata"]["annotations"] = serde_json::json!({
            "snapshot.storage.kubernetes.io/deletion-secret-name": "rook-csi-rbd-provisioner",
            "snapshot.storage.kubernetes.io/deletion-secret-namespace": "rook-ceph",
        });
    }
    c
}

/// The status the csi-snapshotter sidecar writes on a ready content (a merge patch).
pub fn snapshot_content_status(shape: &Shape, i: usize) -> serde_json::Value {
    let (_, driver) = snapshot_class_of(shape, i);
    let handle = if driver.contains("ceph") {
        format!("0001-0009-rook-ceph-0000000000000002-{}", uuid(4, i))
    } else {
        format!(
            "projects/{GCE_PROJECT}/global/snapshots/snapshot-{}",
            uuid(4, i)
        )
    };
    serde_json::json!({"status": {
        "creationTime": 1_765_000_807_000_000_000u64,
        "readyToUse": true,
        "restoreSize": restore_bytes(i),
        "snapshotHandle": handle,
    }})
}

/// The GCE project of the fleet's PD volumes.
pub const GCE_PROJECT: &str = "acme-prod-4471";

/// The GKE cluster's name, as Compute's `goog-k8s-cluster-name` label gives it.
pub const GKE_CLUSTER: &str = "acme-prod-europe";

/// Volume `i`'s persistent disk as Compute lists it (None for a Ceph volume): the PD CSI
/// driver's created-for record and the cluster's label; a bound volume's disk attached to a
/// node, a leftover's detached. Its size is the PV's, so no size differs.
pub fn gce_disk(shape: &Shape, i: usize) -> Option<serde_json::Value> {
    let (class, driver, _) = CLASSES[class_of(shape, i)];
    if driver.contains("ceph") {
        return None;
    }
    let zone = ZONES[i % ZONES.len()];
    let name = pv_name(i);
    let mut d = serde_json::json!({
        "name": name,
        "id": (4_000_000_000_000_000_000u64 + i as u64).to_string(),
        "zone": zone,
        "sizeGb": (restore_bytes(i) >> 30).to_string(),
        "type": if class.starts_with("premium") { "pd-ssd" } else { "pd-balanced" },
        "creationTimestamp": "2026-01-15T10:00:00.000-08:00",
        "status": "READY",
        "labels": {"goog-k8s-cluster-name": GKE_CLUSTER},
        "description": serde_json::json!({
            "kubernetes.io/created-for/pv/name": name,
            "kubernetes.io/created-for/pvc/name": claim_name(i),
            "kubernetes.io/created-for/pvc/namespace": namespace(i),
            "storage.gke.io/created-by": driver,
        })
        .to_string(),
    });
    if shape.is_leftover(i) {
        d["lastAttachTimestamp"] = serde_json::json!("2026-01-15T10:01:00.000-08:00");
        d["lastDetachTimestamp"] = serde_json::json!("2026-11-02T09:30:00.000-08:00");
    } else {
        d["lastAttachTimestamp"] = serde_json::json!("2026-01-15T10:01:00.000-08:00");
        d["users"] = serde_json::json!([format!(
            "https://www.googleapis.com/compute/v1/projects/{GCE_PROJECT}/zones/{zone}/instances/gke-{GKE_CLUSTER}-pool-{}",
            i % 300
        )]);
    }
    Some(d)
}

/// The test Compute server's state holding every PD volume's disk (`disks: false`: none yet).
pub fn gce_state(shape: &Shape, disks: bool) -> serde_json::Value {
    let disks: Vec<serde_json::Value> = if disks {
        (0..shape.pvs).filter_map(|i| gce_disk(shape, i)).collect()
    } else {
        Vec::new()
    };
    serde_json::json!({
        "project": GCE_PROJECT,
        "zones": ZONES,
        "regions": ["europe-west1"],
        "disks": disks,
    })
}

// --- what the API server adds (for the in-process benchmark) ------------------------------------

/// `managedFields.fieldsV1` for the fields of `v`, in the API server's shape (`f:` per field, `.`
/// for each object, `v:`/`k:` for list items): what a real object carries for each manager.
pub fn fields_v1(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::{Map, Value};
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            if !m.is_empty() {
                out.insert(".".into(), Value::Object(Map::new()));
            }
            for (k, v) in m {
                out.insert(format!("f:{k}"), fields_v1(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            let mut out = Map::new();
            out.insert(".".into(), Value::Object(Map::new()));
            for item in items {
                let key = match item {
                    Value::Object(o) => format!(
                        "k:{}",
                        Value::Object(
                            o.iter()
                                .take(1)
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect()
                        )
                    ),
                    other => format!("v:{other}"),
                };
                out.insert(key, fields_v1(item));
            }
            Value::Object(out)
        }
        _ => Value::Object(Map::new()),
    }
}

/// Adds what the API server stores with an object: uid, resourceVersion, creationTimestamp and
/// one managedFields entry per `(manager, operation, subresource, fields)`.
pub fn served(
    mut v: serde_json::Value,
    uid: &str,
    rv: u64,
    managers: &[(&str, &str, Option<&str>, serde_json::Value)],
) -> serde_json::Value {
    let meta = v["metadata"].as_object_mut().expect("metadata");
    meta.insert("uid".into(), uid.into());
    meta.insert("resourceVersion".into(), rv.to_string().into());
    meta.insert("creationTimestamp".into(), "2025-06-10T08:14:27Z".into());
    let entries: Vec<serde_json::Value> = managers
        .iter()
        .map(|(manager, op, sub, fields)| {
            let mut e = serde_json::json!({
                "manager": manager,
                "operation": op,
                "apiVersion": "v1",
                "time": "2025-06-10T08:14:27Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": fields_v1(fields),
            });
            if let Some(s) = sub {
                e["subresource"] = (*s).into();
            }
            e
        })
        .collect();
    meta.insert("managedFields".into(), entries.into());
    v
}

/// Volume `i` as a list returns it: the provisioner's create, the PV controller's binding and
/// status, and the server's metadata.
pub fn served_volume(shape: &Shape, i: usize) -> serde_json::Value {
    let claim_uid = if shape.is_leftover(i) {
        gone_claim_uid(i)
    } else {
        uuid(4, i)
    };
    let pv = serde_json::to_value(volume(shape, i, &claim_uid)).expect("serialize");
    let status = serde_json::json!({
        "phase": phase(shape, i),
        "lastPhaseTransitionTime": "2025-06-10T08:14:29Z",
    });
    let mut created = pv.clone();
    created["spec"]
        .as_object_mut()
        .map(|s| s.remove("claimRef"));
    let mut v = served(
        pv.clone(),
        &uuid(5, i),
        1_000_000 + i as u64,
        &[
            ("csi-provisioner", "Update", None, created),
            (
                "kube-controller-manager",
                "Update",
                None,
                serde_json::json!({"spec": {"claimRef": pv["spec"]["claimRef"].clone()}}),
            ),
            (
                "kube-controller-manager",
                "Update",
                Some("status"),
                serde_json::json!({"status": status.clone()}),
            ),
        ],
    );
    v["status"] = status;
    v["apiVersion"] = "v1".into();
    v["kind"] = "PersistentVolume".into();
    v
}

/// Claim `i`'s metadata as a metadata-only list (`PartialObjectMetadata`) returns it.
pub fn served_claim_meta(shape: &Shape, i: usize) -> serde_json::Value {
    let c = serde_json::to_value(claim(shape, i)).expect("serialize");
    let full = served(
        c.clone(),
        &uuid(4, i),
        2_000_000 + i as u64,
        &[
            ("kube-controller-manager", "Update", None, c.clone()),
            (
                "kube-controller-manager",
                "Update",
                Some("status"),
                claim_status(i),
            ),
        ],
    );
    serde_json::json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": full["metadata"].clone(),
    })
}
