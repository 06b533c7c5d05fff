//! Azure's words for the decisions ([`Backend`]): a scope is the managed disks of one resource
//! group of a subscription (AKS keeps a cluster's disks in its node resource group), or its
//! snapshots that the Azure Disk CSI driver cut. Both parts are case-insensitive in Azure and
//! kept lower-cased, so that a volume handle naming them in any case finds its scope. Pure;
//! compiled in every build, with or without the `azure` feature.

use super::handle::parse_azure_id;
use crate::model::backend::{
    Backend, DiskRecord, DiskRef, Recorder, Scope, ScopeKind, SnapshotHandleRef, SnapshotRecord,
};
use crate::model::crd::{DiskBackend, ImageInfo, VolumeSourceInfo};

use crate::model::csi::AZURE_DISK_CSI_DRIVER;
use crate::model::listing::ScopeListing;
use crate::model::runbook::{DiskRunbook, SnapshotRunbook};
use crate::model::size::GIB;

/// Azure managed disks and their snapshots.
pub struct Azure;

/// Azure's words.
pub static AZURE: Azure = Azure;

/// The managed disks of one resource group.
pub fn resource_group(subscription: &str, resource_group: &str) -> Scope {
    Scope::new(
        &AZURE,
        ScopeKind::Disks,
        [
            subscription.to_ascii_lowercase(),
            resource_group.to_ascii_lowercase(),
        ],
    )
}

/// The snapshots of one resource group that the Azure Disk CSI driver cut.
pub fn snapshots(subscription: &str, resource_group: &str) -> Scope {
    Scope::new(
        &AZURE,
        ScopeKind::Snapshots,
        [
            subscription.to_ascii_lowercase(),
            resource_group.to_ascii_lowercase(),
        ],
    )
}

/// The managed disk `name` of a resource group (every part lower-cased, as the census keys them).
pub fn disk(subscription: &str, resource_group: &str, name: &str) -> DiskRef {
    DiskRef::new(
        &AZURE,
        name.to_ascii_lowercase(),
        [
            Some(subscription.to_ascii_lowercase()),
            Some(resource_group.to_ascii_lowercase()),
        ],
    )
}

/// An Azure resource id, as the Azure Disk CSI driver's handles carry it (lower-cased: the
/// census keys every part so).
pub(crate) fn resource_id(
    subscription: &str,
    resource_group: &str,
    kind: &str,
    name: &str,
) -> String {
    format!(
        "/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Compute/{kind}/{name}"
    )
}

/// Whether `r` names `scope`'s subscription and resource group.
fn in_group(scope: &Scope, r: &DiskRef) -> bool {
    r.part(0) == Some(scope.part(0)) && r.part(1) == Some(scope.part(1))
}

impl Backend for Azure {
    fn name(&self) -> &'static str {
        "azure"
    }

    fn title(&self) -> &'static str {
        "Azure"
    }

    fn location(&self, scope: &Scope) -> ImageInfo {
        ImageInfo {
            backend: Some(DiskBackend::named(self.name())),
            account: Some(scope.part(0).to_string()),
            resource_group: Some(scope.part(1).to_string()),
            ..ImageInfo::default()
        }
    }

    /// The in-tree source's `diskURI` is what names the disk (and where it is).
    fn source(&self, scope: &Scope, name: &str) -> VolumeSourceInfo {
        VolumeSourceInfo {
            kind: "azureDisk".into(),
            disk_name: Some(name.to_string()),
            disk_uri: Some(resource_id(scope.part(0), scope.part(1), "disks", name)),
            ..VolumeSourceInfo::default()
        }
    }

    fn describe(&self, scope: &Scope, name: &str) -> String {
        let what = match scope.kind() {
            ScopeKind::Snapshots => "Azure snapshot",
            ScopeKind::Disks | ScopeKind::Whole => "Azure managed disk",
        };
        format!(
            "{what} {name} (subscription {}, resource group {})",
            scope.part(0),
            scope.part(1)
        )
    }

    fn csi_driver(&self) -> &'static str {
        AZURE_DISK_CSI_DRIVER
    }

    fn recorder(&self) -> Recorder {
        Recorder {
            who: "Azure Disk CSI driver",
            subject: "The Azure Disk CSI driver",
            shared: "resource group",
        }
    }

    fn snapshot_handle(&self, scope: &Scope, name: &str) -> String {
        resource_id(scope.part(0), scope.part(1), "snapshots", name)
    }

    fn recorded_scope(&self, i: &ImageInfo, _legacy: bool, snapshot: bool) -> Scope {
        let subscription = i.account.as_deref().unwrap_or_default();
        let group = i.resource_group.as_deref().unwrap_or_default();
        if snapshot {
            snapshots(subscription, group)
        } else {
            resource_group(subscription, group)
        }
    }

    fn names_source(&self, kind: &str, driver: &str) -> bool {
        kind == "azureDisk" || (kind == "csi" && driver == AZURE_DISK_CSI_DRIVER)
    }

    /// The Azure Disk CSI driver's handle or the in-tree `azureDisk`'s `diskURI`: the disk's
    /// resource id, in any case. Parts: the subscription and the resource group, lower-cased
    /// (the name too).
    fn disk_ref(&self, s: &VolumeSourceInfo) -> Option<DiskRef> {
        let id = match s.kind.as_str() {
            "csi" if s.driver.as_deref() == Some(AZURE_DISK_CSI_DRIVER) => {
                s.volume_handle.as_deref()
            }
            "azureDisk" => s.disk_uri.as_deref(),
            _ => None,
        }?;
        let (subscription, group, name) = parse_azure_id(id, "disks")?;
        Some(disk(&subscription, &group, &name))
    }

    /// A snapshot's resource id.
    fn snapshot_ref(&self, handle: &str) -> Option<SnapshotHandleRef> {
        let (subscription, group, name) = parse_azure_id(handle, "snapshots")?;
        Some(DiskRef::new(
            &AZURE,
            name,
            [Some(subscription), Some(group)],
        ))
    }

    fn granularity(&self) -> u64 {
        GIB
    }

    /// A disk's resource id names its subscription and resource group.
    fn holds(&self, scope: &Scope, _listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool> {
        Some(r.is_of(self) && scope.kind() == ScopeKind::Disks && in_group(scope, r))
    }

    fn snapshot_name_in<'a>(&self, scope: &Scope, r: &'a SnapshotHandleRef) -> Option<&'a str> {
        (r.is_of(self) && scope.kind() == ScopeKind::Snapshots && in_group(scope, r))
            .then(|| r.name())
    }

    fn cloud_keys(&self, scope: &Scope) -> Option<(Option<String>, Option<String>)> {
        Some((None, Some(scope.part(0).to_string())))
    }

    fn disk_runbook(&self, disk: DiskRecord<'_>) -> Box<dyn DiskRunbook> {
        Box::new(super::runbook::Disk::of(disk))
    }

    fn snapshot_runbook(&self, snapshot: SnapshotRecord<'_>) -> Box<dyn SnapshotRunbook> {
        Box::new(super::runbook::Snapshot::of(snapshot))
    }
}
