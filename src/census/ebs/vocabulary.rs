//! EBS's words for the decisions ([`Backend`]): a scope is the volumes of one AWS region (of
//! one account, when the configuration names several), or its snapshots that the EBS CSI
//! driver cut. Pure; compiled in every build, with or without the `ebs` feature.

use super::handle::{aws_region_of, is_ebs_volume_id, parse_ebs_volume_id};
use crate::model::backend::{
    Backend, DiskRecord, DiskRef, Recorder, Scope, ScopeKind, SnapshotHandleRef, SnapshotRecord,
};
use crate::model::crd::{DiskBackend, ImageInfo, VolumeSourceInfo};

use crate::model::csi::EBS_CSI_DRIVER;
use crate::model::listing::ScopeListing;
use crate::model::runbook::{DiskRunbook, SnapshotRunbook};
use crate::model::size::GIB;

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

/// The EBS volume `id` (`vol-…`), in `region` when the volume tells it.
pub fn volume(id: &str, region: Option<&str>) -> DiskRef {
    DiskRef::new(&EBS, id, [region.map(str::to_string)])
}

impl Backend for Ebs {
    fn name(&self) -> &'static str {
        "ebs"
    }

    fn title(&self) -> &'static str {
        "EBS"
    }

    fn location(&self, scope: &Scope) -> ImageInfo {
        ImageInfo {
            backend: Some(DiskBackend::named(self.name())),
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

    /// The EBS CSI driver's handle (the volume id) or the in-tree `awsElasticBlockStore`'s
    /// volume id (`aws://ZONE/vol-…`). Its one part is its region, when the zone in its id or
    /// the zones its PV's node affinity requires name a single one.
    fn disk_ref(&self, s: &VolumeSourceInfo) -> Option<DiskRef> {
        let one_region = |zone: Option<&str>| {
            let mut regions: Vec<Option<String>> = match zone {
                Some(z) => vec![aws_region_of(z)],
                None => s.zones.iter().map(|z| aws_region_of(z)).collect(),
            };
            regions.dedup();
            match regions[..] {
                [Some(ref r)] => Some(r.clone()),
                _ => None,
            }
        };
        match s.kind.as_str() {
            "csi" if s.driver.as_deref() == Some(EBS_CSI_DRIVER) => {
                let id = s.volume_handle.as_deref()?;
                is_ebs_volume_id(id).then(|| volume(id, one_region(None).as_deref()))
            }
            "awsElasticBlockStore" => {
                let (id, zone) = parse_ebs_volume_id(s.disk_name.as_deref()?)?;
                Some(volume(&id, one_region(zone.as_deref()).as_deref()))
            }
            _ => None,
        }
    }

    /// `snap-…`: unique across regions and accounts, so it names a snapshot of whichever
    /// region holds it.
    fn snapshot_ref(&self, handle: &str) -> Option<SnapshotHandleRef> {
        let hex = handle.strip_prefix("snap-")?;
        (!hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| DiskRef::new(&EBS, handle, []))
    }

    fn granularity(&self) -> u64 {
        GIB
    }

    /// A volume is in the region its volume names; one that names none (no zone in its id or
    /// its node affinity) could be in any.
    fn holds(&self, scope: &Scope, _listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool> {
        Some(
            r.is_of(self)
                && scope.kind() == ScopeKind::Disks
                && r.part(0).is_none_or(|region| region == scope.part(1)),
        )
    }

    fn snapshot_name_in<'a>(&self, scope: &Scope, r: &'a SnapshotHandleRef) -> Option<&'a str> {
        (r.is_of(self) && scope.kind() == ScopeKind::Snapshots).then(|| r.name())
    }

    fn cloud_keys(&self, scope: &Scope) -> Option<(Option<String>, Option<String>)> {
        Some((None, account(scope)))
    }

    fn disk_runbook(&self, disk: DiskRecord<'_>) -> Box<dyn DiskRunbook> {
        Box::new(super::runbook::Volume::of(disk))
    }

    fn snapshot_runbook(&self, snapshot: SnapshotRecord<'_>) -> Box<dyn SnapshotRunbook> {
        Box::new(super::runbook::Snapshot::of(snapshot))
    }
}
