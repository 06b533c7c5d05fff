//! EBS's words for the decisions ([`Backend`]): a scope is the volumes of one AWS region (of
//! one account, when the configuration names several), or its snapshots that the EBS CSI
//! driver cut. Pure; compiled in every build, with or without the `ebs` feature.

use crate::model::backend::{Backend, Recorder, Scope, ScopeKind};
use crate::model::crd::{DiskBackend, ImageInfo, VolumeSourceInfo};
use crate::model::csi::{EBS_CSI_DRIVER, SnapshotHandleRef};
use crate::model::image::DiskRef;
use crate::model::listing::ScopeListing;

/// AWS EBS volumes and their snapshots.
pub struct Ebs;

/// EBS's words.
pub static EBS: Ebs = Ebs;

/// The volumes of one region (`eu-west-1`), of `account` when the configuration names one.
pub fn region(account: Option<&str>, region: &str) -> Scope {
    Scope::new(
        &EBS,
        ScopeKind::Disks,
        [account.unwrap_or_default(), region],
    )
}

/// The snapshots the EBS CSI driver cut in one region (of `account`).
pub fn snapshots(account: Option<&str>, region: &str) -> Scope {
    Scope::new(
        &EBS,
        ScopeKind::Snapshots,
        [account.unwrap_or_default(), region],
    )
}

fn account(scope: &Scope) -> Option<String> {
    Some(scope.part(0).to_string()).filter(|a| !a.is_empty())
}

impl Backend for Ebs {
    fn name(&self) -> &'static str {
        "ebs"
    }

    fn title(&self) -> &'static str {
        "EBS"
    }

    fn disk_backend(&self) -> DiskBackend {
        DiskBackend::Ebs
    }

    fn location(&self, scope: &Scope) -> ImageInfo {
        ImageInfo {
            backend: Some(DiskBackend::Ebs),
            account: account(scope),
            region: Some(scope.part(1).to_string()),
            ..ImageInfo::default()
        }
    }

    fn source(&self, _scope: &Scope, name: &str) -> VolumeSourceInfo {
        VolumeSourceInfo {
            kind: "awsElasticBlockStore".into(),
            disk_name: Some(name.to_string()),
            ..VolumeSourceInfo::default()
        }
    }

    fn describe(&self, scope: &Scope, name: &str) -> String {
        let what = match scope.kind() {
            ScopeKind::Snapshots => "EBS snapshot",
            ScopeKind::Disks | ScopeKind::Whole => "EBS volume",
        };
        format!("{what} {name} ({})", scope.part(1))
    }

    fn csi_driver(&self) -> &'static str {
        EBS_CSI_DRIVER
    }

    fn recorder(&self) -> Recorder {
        Recorder {
            who: "EBS CSI driver",
            subject: "The EBS CSI driver",
            shared: "account",
        }
    }

    fn recorded_scope(&self, i: &ImageInfo, legacy: bool, snapshot: bool) -> Scope {
        // Before `backend`: the account in `clusterID`, the region in `pool`.
        let or_legacy = |new: Option<&String>, old: Option<&String>| {
            new.or(old.filter(|_| legacy))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        let account = or_legacy(i.account.as_ref(), i.cluster_id.as_ref());
        let place = or_legacy(i.region.as_ref(), i.pool.as_ref()).unwrap_or_default();
        if snapshot {
            snapshots(account.as_deref(), &place)
        } else {
            region(account.as_deref(), &place)
        }
    }

    fn names_source(&self, kind: &str, driver: &str) -> bool {
        kind == "awsElasticBlockStore" || (kind == "csi" && driver == EBS_CSI_DRIVER)
    }

    /// A volume is in the region its volume names; one that names none (no zone in its id or
    /// its node affinity) could be in any.
    fn holds(&self, scope: &Scope, _listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool> {
        Some(match r {
            DiskRef::Ebs { region, .. } if scope.kind() == ScopeKind::Disks => {
                region.as_deref().is_none_or(|r| r == scope.part(1))
            }
            _ => false,
        })
    }

    /// A snapshot id is unique across regions and accounts: it names a snapshot of whichever
    /// region holds it.
    fn snapshot_name_in<'a>(&self, scope: &Scope, r: &'a SnapshotHandleRef) -> Option<&'a str> {
        match r {
            SnapshotHandleRef::Ebs(id) if scope.kind() == ScopeKind::Snapshots => Some(id),
            _ => None,
        }
    }

    fn cloud_keys(&self, scope: &Scope) -> Option<(Option<String>, Option<String>)> {
        Some((None, account(scope)))
    }
}
