//! `explain`: for every reason and every backend, the commands a person reviews and runs carry
//! the finding's own names, a fact the finding lacks is a placeholder (and only then), the order
//! of the deletes follows where the finding came from, and what makes a choice unsafe is said
//! first. docs/explain.md is what this code prints.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::decide::explain::{Choice, Explanation, Origin, explain};
use crate::model::crd::{
    ClaimInfo, DiskBackend, Hint, ImageInfo, ImageOwner, Reason, SnapshotInfo, State,
    StorageClassInfo, Subject, Tristate, VolumeLeftover, VolumeLeftoverSpec, VolumeLeftoverStatus,
    VolumeSourceInfo,
};
use crate::model::runbook::quote;
use crate::tests::fixtures::now;

/// Where a finding's disk lives, as the volume sources and the census write it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    CephCsi,
    Rbd,
    GceCsi,
    Gce,
    EbsCsi,
    Ebs,
    AzureCsi,
    Azure,
    Other,
}

impl Backend {
    const ALL: [Backend; 9] = [
        Backend::CephCsi,
        Backend::Rbd,
        Backend::GceCsi,
        Backend::Gce,
        Backend::EbsCsi,
        Backend::Ebs,
        Backend::AzureCsi,
        Backend::Azure,
        Backend::Other,
    ];

    fn title(self) -> &'static str {
        match self {
            Backend::CephCsi => "Ceph RBD, ceph-csi",
            Backend::Rbd => "Ceph RBD, in-tree rbd",
            Backend::GceCsi => "GCE persistent disk, PD CSI driver",
            Backend::Gce => "GCE persistent disk, in-tree gcePersistentDisk",
            Backend::EbsCsi => "AWS EBS, EBS CSI driver",
            Backend::Ebs => "AWS EBS, in-tree awsElasticBlockStore",
            Backend::AzureCsi => "Azure managed disk, Azure Disk CSI driver",
            Backend::Azure => "Azure managed disk, in-tree azureDisk",
            Backend::Other => "another backend (an NFS CSI driver)",
        }
    }

    /// The backends a reason can have: a census finding is about a disk or snapshot one of its
    /// backends listed; a snapshot is a CSI driver's.
    fn of(reason: Reason) -> Vec<Backend> {
        match reason {
            Reason::DiskWithoutVolume => {
                vec![Backend::Rbd, Backend::Gce, Backend::Ebs, Backend::Azure]
            }
            Reason::SnapshotWithoutContent => {
                vec![Backend::GceCsi, Backend::EbsCsi, Backend::AzureCsi]
            }
            r if r.is_snapshot() => vec![
                Backend::CephCsi,
                Backend::GceCsi,
                Backend::EbsCsi,
                Backend::AzureCsi,
                Backend::Other,
            ],
            _ => Backend::ALL.to_vec(),
        }
    }

    fn driver(self) -> &'static str {
        match self {
            Backend::CephCsi | Backend::Rbd => "rbd.csi.ceph.com",
            Backend::GceCsi | Backend::Gce => "pd.csi.storage.gke.io",
            Backend::EbsCsi | Backend::Ebs => "ebs.csi.aws.com",
            Backend::AzureCsi | Backend::Azure => "disk.csi.azure.com",
            Backend::Other => "nfs.csi.k8s.io",
        }
    }
}

const PV: &str = "pvc-6f1c0b7e";
const CEPH_CLUSTER: &str = "4a7d1c2e-0f2b-4b8e-9d1a-3c5e7f9a1b2d";
const CEPH_UUID: &str = "5f6c7d8e-9a0b-11ee-b962-0242ac120002";
const CEPH_IMAGE: &str = "csi-vol-5f6c7d8e-9a0b-11ee-b962-0242ac120002";
const RBD_IMAGE: &str = "kubernetes-dynamic-pvc-6b1f";
const GCE_DISK: &str = "pvc-3f1e2d4c";
const GCE_LEGACY_DISK: &str = "legacy-data";
const EBS_VOLUME: &str = "vol-0a1b2c3d4e5f60718";
const EBS_LEGACY_VOLUME: &str = "vol-0fedcba9876543210";
const AZURE_SUB: &str = "0a1b2c3d-0000-0000-0000-00000000a2b3";
const AZURE_RG: &str = "mc_shop_aks_westeurope";
const AZURE_DISK: &str = "pvc-9c2d7e18";
const AZURE_LEGACY_DISK: &str = "legacy-azure";

fn azure_id(kind: &str, name: &str) -> String {
    format!(
        "/subscriptions/{AZURE_SUB}/resourceGroups/{AZURE_RG}/providers/Microsoft.Compute/{kind}/{name}"
    )
}

fn ceph_handle(uuid_prefix_free: &str) -> String {
    format!("0001-0024-{CEPH_CLUSTER}-0000000000000002-{uuid_prefix_free}")
}

/// The source a PV of `backend` records (`status.source`).
fn source(backend: Backend) -> VolumeSourceInfo {
    let csi = |driver: &str, handle: &str| VolumeSourceInfo {
        kind: "csi".into(),
        driver: Some(driver.into()),
        volume_handle: Some(handle.into()),
        ..VolumeSourceInfo::default()
    };
    match backend {
        Backend::CephCsi => VolumeSourceInfo {
            cluster_id: Some(CEPH_CLUSTER.into()),
            pool: Some("replicapool".into()),
            rados_namespace: Some("team-a".into()),
            image_name: Some(CEPH_IMAGE.into()),
            ..csi(backend.driver(), &ceph_handle(CEPH_UUID))
        },
        Backend::Rbd => VolumeSourceInfo {
            kind: "rbd".into(),
            pool: Some("kube".into()),
            image_name: Some(RBD_IMAGE.into()),
            ..VolumeSourceInfo::default()
        },
        Backend::GceCsi => VolumeSourceInfo {
            zones: vec!["europe-west1-b".into()],
            ..csi(
                backend.driver(),
                &format!("projects/acme-prod/zones/europe-west1-b/disks/{GCE_DISK}"),
            )
        },
        Backend::Gce => VolumeSourceInfo {
            kind: "gcePersistentDisk".into(),
            disk_name: Some(GCE_LEGACY_DISK.into()),
            zones: vec!["europe-west1-c".into()],
            ..VolumeSourceInfo::default()
        },
        Backend::EbsCsi => VolumeSourceInfo {
            zones: vec!["eu-west-1a".into()],
            ..csi(backend.driver(), EBS_VOLUME)
        },
        Backend::Ebs => VolumeSourceInfo {
            kind: "awsElasticBlockStore".into(),
            disk_name: Some(format!("aws://eu-west-1b/{EBS_LEGACY_VOLUME}")),
            zones: vec!["eu-west-1b".into()],
            ..VolumeSourceInfo::default()
        },
        Backend::AzureCsi => csi(backend.driver(), &azure_id("disks", AZURE_DISK)),
        Backend::Azure => VolumeSourceInfo {
            kind: "azureDisk".into(),
            disk_name: Some(AZURE_LEGACY_DISK.into()),
            disk_uri: Some(azure_id("disks", AZURE_LEGACY_DISK)),
            ..VolumeSourceInfo::default()
        },
        Backend::Other => csi(backend.driver(), "nfs.example.com#/exports#pvc-6f1c0b7e##"),
    }
}

/// Where the census found (or looked for) the disk (`status.image`), as it writes it.
fn image(backend: Backend) -> Option<ImageInfo> {
    let at = |b: DiskBackend, account: Option<&str>, region: &str, zone: Option<&str>| ImageInfo {
        backend: Some(b),
        account: account.map(Into::into),
        region: Some(region.into()),
        zone: zone.map(Into::into),
        ..ImageInfo::default()
    };
    Some(match backend {
        Backend::CephCsi => ImageInfo {
            backend: Some(DiskBackend::named("ceph")),
            cluster_id: Some(CEPH_CLUSTER.into()),
            pool: Some("replicapool".into()),
            rados_namespace: Some("team-a".into()),
            name: CEPH_IMAGE.into(),
            ..ImageInfo::default()
        },
        Backend::Rbd => ImageInfo {
            backend: Some(DiskBackend::named("ceph")),
            cluster_id: Some(CEPH_CLUSTER.into()),
            pool: Some("kube".into()),
            name: RBD_IMAGE.into(),
            ..ImageInfo::default()
        },
        Backend::GceCsi => ImageInfo {
            name: GCE_DISK.into(),
            ..at(
                DiskBackend::named("gce"),
                Some("acme-prod"),
                "europe-west1",
                Some("europe-west1-b"),
            )
        },
        Backend::Gce => ImageInfo {
            name: GCE_LEGACY_DISK.into(),
            ..at(
                DiskBackend::named("gce"),
                Some("acme-prod"),
                "europe-west1",
                Some("europe-west1-c"),
            )
        },
        Backend::EbsCsi => ImageInfo {
            name: EBS_VOLUME.into(),
            ..at(
                DiskBackend::named("ebs"),
                Some("123456789012"),
                "eu-west-1",
                Some("eu-west-1a"),
            )
        },
        Backend::Ebs => ImageInfo {
            name: EBS_LEGACY_VOLUME.into(),
            ..at(
                DiskBackend::named("ebs"),
                Some("123456789012"),
                "eu-west-1",
                Some("eu-west-1b"),
            )
        },
        Backend::AzureCsi => ImageInfo {
            name: AZURE_DISK.into(),
            resource_group: Some(AZURE_RG.into()),
            ..at(
                DiskBackend::named("azure"),
                Some(AZURE_SUB),
                "westeurope",
                Some("westeurope-1"),
            )
        },
        Backend::Azure => ImageInfo {
            name: AZURE_LEGACY_DISK.into(),
            resource_group: Some(AZURE_RG.into()),
            ..at(
                DiskBackend::named("azure"),
                Some(AZURE_SUB),
                "westeurope",
                Some("westeurope-2"),
            )
        },
        Backend::Other => return None,
    })
}

/// The backend snapshot a content of `backend`'s driver names.
fn snapshot_handle(backend: Backend) -> String {
    match backend {
        Backend::GceCsi | Backend::Gce => {
            "projects/acme-prod/global/snapshots/snapshot-7d2a".into()
        }
        Backend::EbsCsi | Backend::Ebs => "snap-0123456789abcdef0".into(),
        Backend::AzureCsi | Backend::Azure => azure_id("snapshots", "snapshot-7d2a"),
        Backend::CephCsi | Backend::Rbd => ceph_handle("7e8f9a0b-1c2d-11ee-b962-0242ac120002"),
        Backend::Other => "nfs.example.com#/exports#snapshot-7d2a".into(),
    }
}

fn claim(missing: Tristate) -> ClaimInfo {
    ClaimInfo {
        reference: "shop/data".into(),
        namespace: Some("shop".into()),
        name: Some("data".into()),
        uid: Some("0c1d2e3f-old".into()),
        missing,
        current_uid: None,
        expansion: None,
    }
}

/// A finding of `reason` about a disk of `backend`, as the operator publishes it.
fn finding(reason: Reason, backend: Backend) -> VolumeLeftover {
    let mut s = VolumeLeftoverStatus {
        reason,
        state: State::Open,
        observed_generation: None,
        conditions: Vec::new(),
        acknowledged: None,
        message: String::new(),
        hints: Vec::new(),
        phase: "Released".into(),
        phase_since: None,
        phase_message: None,
        reclaim_policy: "Retain".into(),
        storage_class: Some(StorageClassInfo {
            name: "standard-rwo".into(),
            reclaim_policy: Some("Retain".into()),
            missing: Tristate::False,
            disk_type: None,
            replication_type: None,
        }),
        claim: Some(claim(Tristate::True)),
        capacity: Some("20Gi".into()),
        capacity_bytes: Some(20 << 30),
        disk_size_bytes: None,
        access_modes: vec!["ReadWriteOnce".into()],
        volume_mode: "Filesystem".into(),
        source: source(backend),
        first_seen: now(),
        subject: Subject::Volume,
        deleted_at: None,
        image: None,
        cost: None,
        snapshot: None,
    };
    let mut name = PV.to_string();
    let mut volume = PV.to_string();
    match reason {
        Reason::ClaimDeleted => {}
        Reason::ClaimRecreated => {
            s.claim = Some(ClaimInfo {
                current_uid: Some("9a8b7c6d-new".into()),
                ..claim(Tristate::False)
            })
        }
        Reason::ClaimStillPresent => s.claim = Some(claim(Tristate::False)),
        Reason::ClaimUnknown => s.claim = Some(claim(Tristate::Unknown)),
        Reason::ClaimRefInvalid => {
            s.claim = Some(ClaimInfo {
                reference: "/data".into(),
                namespace: None,
                ..claim(Tristate::False)
            });
            s.hints = vec![Hint::ClaimRefIncomplete];
        }
        Reason::ReleasedWithoutClaim => s.claim = None,
        Reason::BoundClaimMissing => s.phase = "Bound".into(),
        Reason::ExpansionStuck => {
            s.phase = "Bound".into();
            s.claim = Some(ClaimInfo {
                expansion: Some(crate::model::crd::ExpansionInfo {
                    requested: "20Gi".into(),
                    requested_bytes: 20 << 30,
                    capacity: "10Gi".into(),
                    capacity_bytes: 10 << 30,
                    allocated: Some("20Gi".into()),
                    resize_status: Some("ControllerResizeInfeasible".into()),
                    stopped_at: crate::model::expansion::ResizeStep::ControllerInfeasible,
                    conditions: vec![crate::model::crd::ExpansionCondition {
                        type_: "ControllerResizeError".into(),
                        message: Some("the pool has no room for 20Gi".into()),
                        last_transition_time: Some(now()),
                    }],
                }),
                ..claim(Tristate::False)
            });
        }
        Reason::PreboundClaimMissing => s.phase = "Available".into(),
        Reason::DiskSizeMismatch => {
            s.phase = "Bound".into();
            s.claim = Some(claim(Tristate::False));
            s.disk_size_bytes = s.capacity_bytes.map(|c| c * 2);
            s.hints = vec![];
        }
        Reason::ReclaimFailed => {
            s.phase = "Failed".into();
            s.reclaim_policy = "Delete".into();
            s.phase_message = Some("error deleting volume: the disk is in use".into());
            s.hints = vec![Hint::ReclaimPolicyDelete, Hint::ReclaimPolicyMismatch];
        }
        Reason::VolumeDeleted => {
            s.subject = Subject::Disk;
            s.deleted_at = Some(now());
        }
        Reason::VolumeWithoutDisk => {
            s.subject = Subject::VolumeAndDisk;
            s.phase = "Bound".into();
            s.claim = Some(claim(Tristate::False));
            s.image = image(backend);
        }
        Reason::DiskWithoutVolume => {
            let image = image(backend).expect("a censused backend");
            let (scope, source) =
                match backend {
                    Backend::Rbd | Backend::CephCsi => (
                        crate::model::backend::Scope::from(
                            crate::census::ceph::handle::PoolKey::new(CEPH_CLUSTER, "kube", None),
                        ),
                        VolumeSourceInfo {
                            kind: "rbd".into(),
                            cluster_id: Some(CEPH_CLUSTER.into()),
                            pool: Some("kube".into()),
                            image_name: Some(image.name.clone()),
                            ..VolumeSourceInfo::default()
                        },
                    ),
                    Backend::Gce | Backend::GceCsi => (
                        crate::census::gce::vocabulary::location("acme-prod", "europe-west1-c"),
                        VolumeSourceInfo {
                            kind: "gcePersistentDisk".into(),
                            disk_name: Some(image.name.clone()),
                            ..VolumeSourceInfo::default()
                        },
                    ),
                    Backend::Azure | Backend::AzureCsi => (
                        crate::census::azure::vocabulary::resource_group(AZURE_SUB, AZURE_RG),
                        VolumeSourceInfo {
                            kind: "azureDisk".into(),
                            disk_name: Some(image.name.clone()),
                            disk_uri: Some(azure_id("disks", &image.name)),
                            ..VolumeSourceInfo::default()
                        },
                    ),
                    Backend::Ebs | Backend::EbsCsi | Backend::Other => (
                        crate::census::ebs::vocabulary::region(Some("123456789012"), "eu-west-1"),
                        VolumeSourceInfo {
                            kind: "awsElasticBlockStore".into(),
                            disk_name: Some(image.name.clone()),
                            ..VolumeSourceInfo::default()
                        },
                    ),
                };
            name = crate::decide::census::disk_leftover_name(&scope, &image.name);
            volume = String::new();
            s.subject = Subject::Disk;
            s.phase = String::new();
            s.reclaim_policy = String::new();
            s.storage_class = None;
            s.claim = None;
            s.access_modes = Vec::new();
            s.volume_mode = String::new();
            s.source = source;
            s.image = Some(ImageInfo {
                owner: Some(ImageOwner {
                    volume_name: Some("pvc-0d9e8f7a".into()),
                    claim_namespace: Some("shop".into()),
                    claim_name: Some("data-old".into()),
                    cluster_name: None,
                }),
                ..image
            });
            s.hints = vec![Hint::OwnerUnknown];
        }
        Reason::SnapshotWithoutContent => {
            let image = image(backend).expect("a censused backend");
            let id = snapshot_handle(backend);
            let short = id.rsplit('/').next().unwrap_or(&id).to_string();
            let scope = match backend {
                Backend::GceCsi | Backend::Gce => {
                    crate::census::gce::vocabulary::snapshots("acme-prod")
                }
                _ => crate::census::ebs::vocabulary::snapshots(Some("123456789012"), "eu-west-1"),
            };
            name = crate::decide::census::disk_leftover_name(&scope, &short);
            volume = String::new();
            s.subject = Subject::BackendSnapshot;
            s.phase = String::new();
            s.reclaim_policy = String::new();
            s.storage_class = None;
            s.claim = None;
            s.access_modes = Vec::new();
            s.volume_mode = String::new();
            s.source = VolumeSourceInfo {
                kind: "csi".into(),
                driver: Some(backend.driver().into()),
                ..VolumeSourceInfo::default()
            };
            s.image = Some(ImageInfo {
                name: short,
                zone: None,
                ..image
            });
            s.snapshot = Some(SnapshotInfo {
                content: Some("snapcontent-0b1c2d3e".into()),
                snapshot: Some("shop/nightly".into()),
                snapshot_handle: Some(id),
                ..SnapshotInfo::default()
            });
        }
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted => {
            let content = "snapcontent-0b1c2d3e";
            name = match reason {
                Reason::SnapshotContentMissing => {
                    crate::decide::snapshot::snapshot_leftover_name("shop", "nightly")
                }
                _ => crate::decide::snapshot::content_leftover_name(content),
            };
            volume = String::new();
            s.subject = match reason {
                Reason::SnapshotContentMissing => Subject::Snapshot,
                _ => Subject::SnapshotContent,
            };
            s.phase = String::new();
            s.reclaim_policy = String::new();
            s.storage_class = None;
            s.claim = None;
            s.access_modes = Vec::new();
            s.volume_mode = String::new();
            s.source = VolumeSourceInfo {
                kind: "csi".into(),
                driver: Some(backend.driver().into()),
                volume_handle: source(backend).volume_handle,
                ..VolumeSourceInfo::default()
            };
            s.snapshot = Some(SnapshotInfo {
                content: Some(content.into()),
                snapshot: Some("shop/nightly".into()),
                snapshot_uid: Some("5e6f7a8b-old".into()),
                current_uid: (reason == Reason::SnapshotRecreated).then(|| "1a2b3c4d-new".into()),
                deletion_policy: Some(
                    if reason == Reason::SnapshotDeleteStuck {
                        "Delete"
                    } else {
                        "Retain"
                    }
                    .into(),
                ),
                // A VolumeSnapshot whose content is gone does not say the backend snapshot.
                snapshot_handle: (reason != Reason::SnapshotContentMissing)
                    .then(|| snapshot_handle(backend)),
                snapshot_class: Some("csi-snapclass".into()),
                ..SnapshotInfo::default()
            });
            if reason == Reason::ContentDeleted {
                s.deleted_at = Some(now());
            }
        }
    }
    s.message = message(reason, &name);
    let mut o = VolumeLeftover::new(
        &name,
        VolumeLeftoverSpec {
            volume_name: volume.clone(),
            volume_uid: if volume.is_empty() {
                String::new()
            } else {
                "pv-uid-1".into()
            },
            acknowledgement: None,
        },
    );
    o.metadata = ObjectMeta {
        name: Some(name),
        ..ObjectMeta::default()
    };
    o.status = Some(s);
    o
}

/// A short message in the operator's words (the real ones are tested where they are made).
fn message(reason: Reason, name: &str) -> String {
    format!("{name}: a {} finding.", reason.as_str())
}

/// The facts a finding of `reason` about `backend` does not have, and so the placeholders its
/// explanation must print: the project of an in-tree GCE disk (its PV does not say it; the
/// census's `VolumeWithoutDisk` does), the secrets and features a static RBD PV needs, the
/// region of an EBS snapshot a content names (its id is unique across regions), and whatever a
/// VolumeSnapshot whose content is gone no longer says.
fn expected_missing(reason: Reason, backend: Backend) -> BTreeSet<&'static str> {
    let mut m = BTreeSet::new();
    let census = matches!(
        reason,
        Reason::VolumeWithoutDisk | Reason::DiskWithoutVolume
    );
    // A claim that still exists (or is expanding): no disk command.
    if backend == Backend::Gce
        && !census
        && !reason.is_snapshot()
        && reason != Reason::ClaimStillPresent
        && reason != Reason::ExpansionStuck
    {
        m.insert("project");
    }
    if backend == Backend::Rbd && reason == Reason::VolumeDeleted {
        // An in-tree rbd volume names monitors, not ceph-csi's cluster id.
        m.insert("clusterID");
    }
    if reason.is_snapshot()
        && reason != Reason::SnapshotContentMissing
        && backend == Backend::EbsCsi
    {
        m.insert("region");
    }
    if reason == Reason::SnapshotContentMissing {
        m.insert("snapshot-handle");
        match backend {
            Backend::GceCsi => {
                m.insert("project");
                m.insert("snapshot");
            }
            Backend::EbsCsi => {
                m.insert("region");
                m.insert("snapshot-id");
            }
            Backend::AzureCsi => {
                m.insert("snapshot-id");
            }
            _ => {}
        }
    }
    m
}

/// The disk commands of `backend` with the finding's names: snapshot, delete.
fn disk_commands(reason: Reason, backend: Backend) -> Vec<String> {
    let snap = |name: &str| format!("vl-{name}");
    let name = match reason {
        Reason::DiskWithoutVolume => finding(reason, backend).metadata.name.unwrap(),
        _ => PV.to_string(),
    };
    match backend {
        Backend::CephCsi => vec![
            format!(
                "rbd snap create replicapool/team-a/{CEPH_IMAGE}@{}",
                snap(&name)
            ),
            format!("rbd trash mv replicapool/team-a/{CEPH_IMAGE}"),
        ],
        Backend::Rbd => vec![
            format!("rbd snap create kube/{RBD_IMAGE}@{}", snap(&name)),
            format!("rbd trash mv kube/{RBD_IMAGE}"),
        ],
        Backend::GceCsi => vec![
            format!(
                "gcloud compute snapshots create {} --source-disk={GCE_DISK} \
                 --source-disk-zone=europe-west1-b --project=acme-prod",
                snap(&name)
            ),
            format!(
                "gcloud compute disks delete {GCE_DISK} --zone=europe-west1-b --project=acme-prod"
            ),
        ],
        Backend::Gce => {
            let project = if reason == Reason::DiskWithoutVolume {
                "--project=acme-prod".to_string()
            } else {
                "--project='<project>'".to_string()
            };
            vec![
                format!(
                    "gcloud compute snapshots create {} --source-disk={GCE_LEGACY_DISK} \
                     --source-disk-zone=europe-west1-c {project}",
                    snap(&name)
                ),
                format!(
                    "gcloud compute disks delete {GCE_LEGACY_DISK} --zone=europe-west1-c \
                     {project}"
                ),
            ]
        }
        Backend::EbsCsi => vec![
            format!("aws ec2 create-snapshot --volume-id {EBS_VOLUME} --region eu-west-1"),
            format!("aws ec2 delete-volume --volume-id {EBS_VOLUME} --region eu-west-1"),
        ],
        Backend::Ebs => vec![
            format!("aws ec2 create-snapshot --volume-id {EBS_LEGACY_VOLUME} --region eu-west-1"),
            format!("aws ec2 delete-volume --volume-id {EBS_LEGACY_VOLUME} --region eu-west-1"),
        ],
        Backend::AzureCsi | Backend::Azure => {
            let disk = if backend == Backend::AzureCsi {
                AZURE_DISK
            } else {
                AZURE_LEGACY_DISK
            };
            vec![
                format!(
                    "az snapshot create --resource-group {AZURE_RG} --name {} --source {} --incremental true",
                    snap(&name),
                    azure_id("disks", disk)
                ),
                format!("az disk delete --ids {}", azure_id("disks", disk)),
            ]
        }
        Backend::Other => Vec::new(),
    }
}

/// The backend snapshot's delete command with the finding's names.
fn snapshot_delete(backend: Backend, region_known: bool) -> Option<String> {
    match backend {
        Backend::GceCsi => {
            Some("gcloud compute snapshots delete snapshot-7d2a --project=acme-prod".to_string())
        }
        Backend::EbsCsi => Some(format!(
            "aws ec2 delete-snapshot --snapshot-id snap-0123456789abcdef0 --region {}",
            if region_known {
                "eu-west-1"
            } else {
                "'<region>'"
            }
        )),
        Backend::AzureCsi => Some(format!(
            "az snapshot delete --ids {}",
            azure_id("snapshots", "snapshot-7d2a")
        )),
        _ => None,
    }
}

fn position(commands: &[&str], prefix: &str) -> Option<usize> {
    commands.iter().position(|c| c.starts_with(prefix))
}

/// The words of a command's first line as a POSIX shell splits them (single quotes only, as
/// [`quote`] writes them); panics on an unbalanced quote. Outside quotes, `<` appears only in a
/// here-document's `<<'EOF'`: a placeholder is always quoted.
fn words(command: &str) -> Vec<String> {
    let line = command.lines().next().unwrap_or_default();
    let (mut out, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            '<' if !quoted => {
                assert_eq!(chars.next(), Some('<'), "an unquoted '<' in {command:?}");
                word.push_str("<<");
                any = true;
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    assert!(!quoted, "an unbalanced quote in {command:?}");
    if any {
        out.push(word);
    }
    out
}

fn explained(reason: Reason, backend: Backend, origin: Origin) -> Explanation {
    explain(
        &finding(reason, backend),
        origin,
        &crate::census::vocabularies(),
    )
}

#[test]
fn every_reason_and_backend_prints_the_findings_own_names_and_placeholders_only_for_what_it_lacks()
{
    let mut cases = 0;
    for reason in Reason::ALL {
        for backend in Backend::of(reason) {
            for origin in [Origin::Operator, Origin::Scan] {
                cases += 1;
                let e = explained(reason, backend, origin);
                let at = format!("{reason:?} on {backend:?} from {origin:?}");
                let text = e.to_string();

                // Placeholders for exactly the facts the finding lacks.
                let expected = expected_missing(reason, backend);
                assert_eq!(e.missing, expected, "{at}: missing facts\n{text}");
                for m in &e.missing {
                    assert!(text.contains(&format!("<{m}>")), "{at}: <{m}> not printed");
                }

                // Every command parses as shell words, placeholders quoted.
                for choice in [
                    Choice::First,
                    Choice::Reuse,
                    Choice::Abandon,
                    Choice::Finish,
                    Choice::Revert,
                    Choice::Keep,
                ] {
                    for c in e.commands(choice) {
                        let w = words(c);
                        assert!(!w.is_empty(), "{at}: an empty command");
                    }
                }
                // Three choices for every finding, after what to know first: of a stopped
                // expansion, to let it finish or take it back; of anything else, to reuse or
                // abandon what is left.
                let choices: &[Choice] = match reason {
                    Reason::ExpansionStuck => &[Choice::Finish, Choice::Revert, Choice::Keep],
                    // Nothing is left over to reuse or abandon: the sizes are made to agree.
                    Reason::DiskSizeMismatch => &[Choice::Finish, Choice::Keep],
                    _ => &[Choice::Reuse, Choice::Abandon, Choice::Keep],
                };
                for &choice in choices {
                    assert!(
                        e.blocks.iter().any(|b| b.choice == choice),
                        "{at}: no {choice:?} block\n{text}"
                    );
                }
                if reason == Reason::DiskSizeMismatch {
                    let finish = e.commands(Choice::Finish);
                    assert!(
                        finish
                            .iter()
                            .any(|c| c.starts_with("kubectl patch pvc -n shop data ")
                                && c.contains(
                                    r#"{"spec":{"resources":{"requests":{"storage":"40Gi"}}}}"#
                                )),
                        "{at}: no request raised to the disk's size in {finish:#?}\n{text}"
                    );
                    assert!(
                        !text.contains("kubectl delete"),
                        "{at}: a delete for a size\n{text}"
                    );
                }
                if reason == Reason::ExpansionStuck {
                    let revert = e.commands(Choice::Revert);
                    assert!(
                        revert.iter().any(|c| c.starts_with("kubectl patch pvc -n shop data ")
                            && c.contains(r#"{"spec":{"resources":{"requests":{"storage":"<a size above the capacity>"}}}}"#)),
                        "{at}: no request lowered back in {revert:#?}"
                    );
                    assert!(text.contains("asks for 20Gi and has 10Gi"), "{at}\n{text}");
                    assert!(
                        !text.contains("kubectl delete"),
                        "{at}: a delete for an expansion\n{text}"
                    );
                }

                let abandon = e.commands(Choice::Abandon);
                let said = e.sentences(Choice::Abandon).join(" ");
                let live_pv = !matches!(
                    reason,
                    Reason::VolumeDeleted | Reason::DiskWithoutVolume | Reason::VolumeWithoutDisk
                ) && !reason.is_snapshot()
                    && reason != Reason::SnapshotWithoutContent;

                // The disk's own commands, with its real names, the disk before the PV.
                let disk_gone = reason == Reason::VolumeWithoutDisk;
                let snapshots = reason.is_snapshot() || reason == Reason::SnapshotWithoutContent;
                let expansion = matches!(reason, Reason::ExpansionStuck | Reason::DiskSizeMismatch);
                if !disk_gone && !snapshots && !expansion && reason != Reason::ClaimStillPresent {
                    let cmds = disk_commands(reason, backend);
                    for want in &cmds {
                        assert!(
                            abandon.iter().any(|c| c.starts_with(want.as_str())),
                            "{at}: no `{want}` in {abandon:#?}"
                        );
                    }
                    if backend == Backend::Other {
                        assert!(
                            said.contains("storage system's own tools"),
                            "{at}: says the backend's tools are its own\n{text}"
                        );
                    }
                    if live_pv {
                        let pv = position(&abandon, &format!("kubectl delete pv {PV}"))
                            .unwrap_or_else(|| panic!("{at}: no delete of the PV\n{text}"));
                        assert!(
                            position(&abandon, &format!("kubectl get pv {PV} -o yaml > ")).unwrap()
                                < pv,
                            "{at}: the PV is recorded first"
                        );
                        if let Some(disk) = cmds.get(1) {
                            let d = position(&abandon, disk).unwrap();
                            assert!(d < pv, "{at}: the disk is deleted before the PV");
                        }
                        let order = match origin {
                            Origin::Operator => "either order is safe",
                            Origin::Scan => "Delete the disk first, then the PV",
                        };
                        assert!(said.contains(order), "{at}: no {order:?} in {said}");
                        let other = match origin {
                            Origin::Operator => "Delete the disk first",
                            Origin::Scan => "either order",
                        };
                        assert!(!said.contains(other), "{at}: {other:?} in {said}");
                    }
                }
                if snapshots
                    && reason != Reason::SnapshotDeleteStuck
                    && reason.is_snapshot()
                    && reason != Reason::SnapshotContentMissing
                    && reason != Reason::ContentDeleted
                {
                    let order = match origin {
                        Origin::Operator => "either order is safe",
                        Origin::Scan => "Delete the backend snapshot first, then the content",
                    };
                    assert!(said.contains(order), "{at}: no {order:?} in {said}");
                    let content = position(&abandon, "kubectl delete volumesnapshotcontent")
                        .unwrap_or_else(|| panic!("{at}: no delete of the content\n{text}"));
                    if let Some(del) = snapshot_delete(backend, false) {
                        let d = position(&abandon, &del)
                            .unwrap_or_else(|| panic!("{at}: no `{del}` in {abandon:#?}"));
                        assert!(d < content, "{at}: backend snapshot first");
                    }
                }
                if matches!(
                    reason,
                    Reason::SnapshotWithoutContent | Reason::ContentDeleted
                ) {
                    let del = snapshot_delete(backend, reason == Reason::SnapshotWithoutContent);
                    if let Some(del) = del {
                        assert!(
                            position(&abandon, &del).is_some(),
                            "{at}: no `{del}` in {abandon:#?}"
                        );
                    }
                }

                // Keep: the acknowledgement where there is an object, never without one.
                let keep = e.commands(Choice::Keep);
                let ack = format!(
                    "kubectl patch vl {} --type merge -p ",
                    finding(reason, backend).metadata.name.unwrap()
                );
                match origin {
                    Origin::Operator => assert!(
                        keep.iter().any(|c| c.starts_with(&ack)
                            && c.contains(r#"{"spec":{"acknowledgement":{"by":"<you>""#)),
                        "{at}: no acknowledgement in {keep:#?}"
                    ),
                    Origin::Scan => assert!(
                        !text.contains("kubectl patch vl"),
                        "{at}: an acknowledgement without an object"
                    ),
                }

                // A Delete reclaim policy: Retain first.
                let reclaim = finding(reason, backend).status.unwrap().reclaim_policy;
                if reclaim == "Delete" {
                    assert!(
                        e.warnings()
                            .iter()
                            .any(|w| w.contains("reclaim policy is Delete")),
                        "{at}: no warning about the Delete policy"
                    );
                    assert!(
                        e.commands(Choice::First).contains(
                            &format!(
                                r#"kubectl patch pv {PV} -p '{{"spec":{{"persistentVolumeReclaimPolicy":"Retain"}}}}'"#
                            )
                            .as_str()
                        ),
                        "{at}: no Retain patch first"
                    );
                }
            }
        }
    }
    assert_eq!(
        cases,
        2 * (13 * 9 + 4 + 3 + 6 * 5),
        "every reason and backend"
    );
}

#[test]
fn claim_deleted_reuse_removes_the_claim_ref_then_creates_the_claim_naming_the_volume() {
    for backend in Backend::ALL {
        let e = explained(Reason::ClaimDeleted, backend, Origin::Operator);
        let reuse = e.commands(Choice::Reuse);
        assert_eq!(
            reuse[0],
            format!(r#"kubectl patch pv {PV} -p '{{"spec":{{"claimRef":null}}}}'"#),
            "{backend:?}"
        );
        let claim = reuse[1];
        assert!(
            claim.starts_with("kubectl create -f - <<'EOF'\n"),
            "{claim}"
        );
        assert!(claim.ends_with("\nEOF"), "{claim}");
        for line in [
            "kind: PersistentVolumeClaim",
            "  name: data",
            "  namespace: shop",
            "  storageClassName: standard-rwo",
            &format!("  volumeName: {PV}"),
            "  accessModes: [ReadWriteOnce]",
            "      storage: 20Gi",
        ] {
            assert!(claim.lines().any(|l| l == line), "{line:?} in\n{claim}");
        }
        // Or pre-bound to that claim alone.
        assert_eq!(
            reuse[2],
            format!(
                r#"kubectl patch pv {PV} -p '{{"spec":{{"claimRef":{{"resourceVersion":null,"uid":null}}}}}}'"#
            )
        );
    }
}

#[test]
fn claim_recreated_reuse_removes_only_the_old_uid() {
    let e = explained(Reason::ClaimRecreated, Backend::GceCsi, Origin::Operator);
    assert_eq!(
        e.commands(Choice::Reuse)[0],
        format!(
            r#"kubectl patch pv {PV} -p '{{"spec":{{"claimRef":{{"resourceVersion":null,"uid":null}}}}}}'"#
        )
    );
    let first = e.sentences(Choice::First).join(" ");
    assert!(
        first.contains("9a8b7c6d-new") && first.contains("0c1d2e3f-old"),
        "{first}"
    );
}

#[test]
fn a_claim_that_still_exists_or_a_volume_being_deleted_says_so_before_anything() {
    let e = explained(
        Reason::ClaimStillPresent,
        Backend::CephCsi,
        Origin::Operator,
    );
    assert!(
        e.warnings().iter().any(|w| w.contains("still exists")),
        "{e}"
    );
    assert!(
        e.commands(Choice::Reuse).is_empty(),
        "no reuse while the claim exists"
    );
    assert!(
        e.commands(Choice::Abandon).is_empty(),
        "no delete while the claim exists"
    );
    assert_eq!(
        e.commands(Choice::First),
        [
            r"kubectl get pvc -n shop data '-o=jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}'"
        ]
    );

    let mut o = finding(Reason::ClaimDeleted, Backend::EbsCsi);
    o.status
        .as_mut()
        .unwrap()
        .hints
        .push(Hint::VolumeTerminating);
    let e = explain(&o, Origin::Operator, &crate::census::vocabularies());
    assert!(
        e.warnings().iter().any(|w| w.contains("being deleted")),
        "{e}"
    );
    assert!(
        e.sentences(Choice::Reuse)[0].contains("reuse is not possible"),
        "{e}"
    );

    let mut o = finding(Reason::BoundClaimMissing, Backend::GceCsi);
    o.status.as_mut().unwrap().reclaim_policy = "Delete".into();
    let e = explain(&o, Origin::Scan, &crate::census::vocabularies());
    let w = e.warnings().join(" ");
    assert!(
        w.contains("reclaim policy is Delete") && w.contains("The PV is Bound"),
        "{w}"
    );
    let text = e.to_string();
    let retain = text
        .find("persistentVolumeReclaimPolicy\":\"Retain")
        .unwrap();
    assert!(retain < text.find("# Reuse").unwrap(), "Retain comes first");
}

#[test]
fn a_disk_in_use_or_maybe_another_clusters_is_said_with_the_command_that_shows_it() {
    let mut o = finding(Reason::DiskWithoutVolume, Backend::Ebs);
    o.status.as_mut().unwrap().hints = vec![Hint::DiskInUse, Hint::OwnerUnknown];
    let e = explain(&o, Origin::Operator, &crate::census::vocabularies());
    let w = e.warnings().join(" ");
    assert!(
        w.contains("another cluster's") && w.contains("in use right now"),
        "{w}"
    );
    assert!(
        e.commands(Choice::First).contains(
            &"aws ec2 describe-volumes --volume-ids vol-0fedcba9876543210 --region eu-west-1 --query 'Volumes[0].Attachments'"
        ),
        "{e}"
    );
}

#[test]
fn a_disk_without_a_volume_gets_a_static_pv_for_its_driver_pre_bound_to_the_claim_it_was_for() {
    let e = explained(Reason::DiskWithoutVolume, Backend::Ebs, Origin::Operator);
    let reuse = e.commands(Choice::Reuse);
    let pv = reuse[0];
    for line in [
        "kind: PersistentVolume",
        "  name: pvc-0d9e8f7a",
        "  persistentVolumeReclaimPolicy: Retain",
        "    namespace: shop",
        "    name: data-old",
        "    driver: ebs.csi.aws.com",
        "    volumeHandle: vol-0fedcba9876543210",
        "        - key: topology.kubernetes.io/zone",
        "          values: [eu-west-1b]",
    ] {
        assert!(pv.lines().any(|l| l == line), "{line:?} in\n{pv}");
    }
    assert!(
        reuse[1].contains("  volumeName: pvc-0d9e8f7a"),
        "{}",
        reuse[1]
    );
}

#[test]
fn a_missing_zone_is_a_placeholder_never_a_guess() {
    let mut o = finding(Reason::ClaimDeleted, Backend::Gce);
    o.status.as_mut().unwrap().source.zones.clear();
    let e = explain(&o, Origin::Operator, &crate::census::vocabularies());
    assert!(e.missing.contains("zone"), "{:?}", e.missing);
    assert!(
        e.commands(Choice::Abandon).iter().any(|c| c.starts_with(
            "gcloud compute disks delete legacy-data --zone='<zone>' --project='<project>'"
        )),
        "{e}"
    );
}

#[test]
fn quoting_keeps_every_word_one_word() {
    assert_eq!(quote("pvc-1"), "pvc-1");
    assert_eq!(quote("a b"), "'a b'");
    assert_eq!(quote("it's"), r"'it'\''s'");
    assert_eq!(quote("<zone>"), "'<zone>'");
    assert_eq!(quote(""), "''");
    assert_eq!(quote("$(rm -rf /)"), "'$(rm -rf /)'");
    // A name the API would never accept is still quoted, never run.
    let mut o = finding(Reason::ClaimDeleted, Backend::Other);
    o.spec.volume_name = "pv; rm -rf /".into();
    let e = explain(&o, Origin::Scan, &crate::census::vocabularies());
    assert!(
        e.commands(Choice::Abandon)
            .contains(&"kubectl delete pv 'pv; rm -rf /'"),
        "{e}"
    );
}

#[test]
fn an_acknowledged_finding_says_by_whom_and_until_when() {
    let mut o = finding(Reason::VolumeDeleted, Backend::GceCsi);
    o.spec.acknowledgement = Some(crate::model::crd::Acknowledgement {
        by: Some("alice".into()),
        ticket: Some("OPS-123".into()),
        reason: None,
        until: Some(crate::tests::fixtures::time("2027-03-01T00:00:00Z")),
    });
    o.status.as_mut().unwrap().state = State::Acknowledged;
    let text = explain(&o, Origin::Operator, &crate::census::vocabularies()).to_string();
    assert!(
        text.starts_with(&format!("{PV}: VolumeDeleted (Acknowledged)")),
        "{text}"
    );
    assert!(
        text.contains("Acknowledged: by alice, ticket OPS-123, until 2027-03-01T00:00:00Z."),
        "{text}"
    );
}

#[test]
fn a_finding_without_status_says_to_look_again() {
    let mut o = finding(Reason::ClaimDeleted, Backend::CephCsi);
    o.status = None;
    let e = explain(&o, Origin::Operator, &crate::census::vocabularies());
    assert!(e.blocks.is_empty());
    assert!(e.to_string().contains("no status yet"), "{e}");
}

/// docs/explain.md: one section per reason, one example finding per backend.
fn explain_md() -> String {
    let mut out = String::from(
        "# What to do about a finding: `explain`\n\n\
         <!-- Generated by src/tests/explain.rs from src/decide/explain.rs; a test fails when this \
         page differs from what the code prints. Rewrite it with\n\
         VL_WRITE_EXPLAIN_MD=1 cargo test --no-default-features --lib explain -->\n\n\
         `volume-leftovers explain NAME` (also `kubectl leftovers explain NAME`) prints, for one \
         finding, the commands a person can review and run to **reuse** it, **abandon** it or \
         **keep** it, and what makes a choice unsafe first. It runs none of them: it reads the \
         VolumeLeftover NAME (one list by name), or, where there is none (no operator, or no CRD), \
         runs one scan with the flags `scan` takes and explains its finding NAME. A name that is \
         not a finding is one line on stderr and exit code 1 ([configuration.md](configuration.md#commands)).\n\n\
         The names in the commands are the finding's own (`status.source`, `status.image`, \
         `status.claim`, `status.snapshot`, its hints); a fact the finding does not have is a \
         placeholder in angle brackets (`<zone>`), never a guess, and every word is shell-quoted. \
         Command lines start with `$ ` (so that the output piped into a shell runs nothing).\n\n\
         **The order of the deletes.** The PV is the record of which disk was whose: without the \
         operator (a finding of `scan`), the disk goes first and the PV last. Where the operator \
         runs (the finding is its VolumeLeftover), deleting a Retain PV leaves its `VolumeDeleted` \
         tombstone, which keeps that record, so either order is safe; the output says which \
         applies. The same holds for a backend snapshot and its VolumeSnapshotContent \
         (`ContentDeleted`). The examples below are the operator's findings, but for the first, \
         shown from a scan too.\n\n\
         How each finding ends once acted on is in [reasons.md](reasons.md#how-a-finding-ends).\n",
    );
    for reason in Reason::ALL {
        out.push_str(&format!("\n## {}\n", reason.as_str()));
        let mut examples: Vec<(Backend, Origin)> = Backend::of(reason)
            .into_iter()
            .map(|b| (b, Origin::Operator))
            .collect();
        if reason == Reason::ClaimDeleted {
            examples.insert(1, (Backend::CephCsi, Origin::Scan));
        }
        for (backend, origin) in examples {
            let from = match origin {
                Origin::Operator => "",
                Origin::Scan => ", from a scan (no operator)",
            };
            out.push_str(&format!(
                "\n<details><summary>{}{from}</summary>\n\n```text\n{}```\n\n</details>\n",
                backend.title(),
                explained(reason, backend, origin)
            ));
        }
    }
    out
}

#[test]
fn docs_explain_md_is_what_the_code_prints() {
    let generated = explain_md();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/explain.md");
    if std::env::var_os("VL_WRITE_EXPLAIN_MD").is_some() {
        std::fs::write(path, &generated).expect("write docs/explain.md");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        generated == committed,
        "docs/explain.md is stale: run `VL_WRITE_EXPLAIN_MD=1 cargo test --no-default-features \
         --lib explain` and commit it"
    );
}
