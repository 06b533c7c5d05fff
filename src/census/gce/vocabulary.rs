//! GCE's words for the decisions ([`Backend`]): a scope is a zone or a region of a project (a
//! disk's name is unique within its zone or region), a project listed as a whole (an
//! aggregated listing, whose zones and regions join as it names them), or a project's
//! snapshots (global). Pure; compiled in every build, with or without the `gce` feature.

use super::handle::{GceLocation, gce_location, parse_gce_handle};
use crate::model::backend::{
    Backend, DiskRecord, DiskRef, Recorder, Scope, ScopeKind, SnapshotHandleRef, SnapshotRecord,
};
use crate::model::crd::{DiskBackend, ImageInfo, VolumeSourceInfo};

use crate::model::csi::GCE_PD_CSI_DRIVER;
use crate::model::listing::ScopeListing;
use crate::model::runbook::{DiskRunbook, SnapshotRunbook};
use crate::model::size::GIB;

/// GCE persistent disks and their snapshots.
pub struct Gce;

/// GCE's words.
pub static GCE: Gce = Gce;

/// The disks of one zone (`us-central1-a`) or region (`us-central1`) of a project.
pub fn location(project: &str, location: &str) -> Scope {
    Scope::new(&GCE, ScopeKind::Disks, [project, location])
}

/// A project listed as a whole.
pub fn project(project: &str) -> Scope {
    Scope::new(&GCE, ScopeKind::Whole, [project])
}

/// The snapshots of a project that the PD CSI driver cut.
pub fn snapshots(project: &str) -> Scope {
    Scope::new(&GCE, ScopeKind::Snapshots, [project])
}

/// The persistent disk `name` in `location` (a zone or region) of `project`, as far as a volume
/// tells them (`project`: `None` for an in-tree volume, or a migrated one whose handle says
/// `UNSPECIFIED`; `location`: `None` when not told).
pub fn disk(project: Option<&str>, location: Option<&str>, name: &str) -> DiskRef {
    DiskRef::new(
        &GCE,
        name,
        [project.map(str::to_string), location.map(str::to_string)],
    )
}

impl Backend for Gce {
    fn name(&self) -> &'static str {
        "gce"
    }

    fn title(&self) -> &'static str {
        "GCE"
    }

    fn location(&self, scope: &Scope) -> ImageInfo {
        let project = Some(scope.part(0).to_string());
        if scope.kind() != ScopeKind::Disks {
            return ImageInfo {
                backend: Some(DiskBackend::named(self.name())),
                account: project,
                ..ImageInfo::default()
            };
        }
        let location = scope.part(1);
        let (zone, region) = GceLocation::parse(location)
            .map(|l| l.zone_and_region())
            .unwrap_or((None, Some(location.to_string())));
        ImageInfo {
            backend: Some(DiskBackend::named(self.name())),
            account: project,
            zone,
            region,
            ..ImageInfo::default()
        }
    }

    fn source(&self, _scope: &Scope, name: &str) -> VolumeSourceInfo {
        VolumeSourceInfo {
            kind: "gcePersistentDisk".into(),
            disk_name: Some(name.to_string()),
            ..VolumeSourceInfo::default()
        }
    }

    fn describe(&self, scope: &Scope, name: &str) -> String {
        let project = scope.part(0);
        match scope.kind() {
            ScopeKind::Disks => format!(
                "GCE persistent disk {name} (project {project}, {})",
                scope.part(1)
            ),
            ScopeKind::Whole => format!("GCE persistent disk {name} (project {project})"),
            ScopeKind::Snapshots => format!("GCE snapshot {name} (project {project})"),
        }
    }

    fn csi_driver(&self) -> &'static str {
        GCE_PD_CSI_DRIVER
    }

    fn recorder(&self) -> Recorder {
        Recorder {
            who: "GCE PD CSI driver",
            subject: "The GCE PD CSI driver",
            shared: "project",
        }
    }

    fn snapshot_handle(&self, scope: &Scope, name: &str) -> String {
        format!("projects/{}/global/snapshots/{name}", scope.part(0))
    }

    fn recorded_scope(&self, i: &ImageInfo, legacy: bool, snapshot: bool) -> Scope {
        // Before `backend`: the project in `clusterID`, the zone or region in `pool`.
        let or_legacy = |new: Option<&String>, old: Option<&String>| {
            new.or(old.filter(|_| legacy))
                .filter(|v| !v.is_empty())
                .cloned()
                .unwrap_or_default()
        };
        let project = or_legacy(i.account.as_ref(), i.cluster_id.as_ref());
        if snapshot {
            return snapshots(&project);
        }
        let place = or_legacy(i.zone.as_ref().or(i.region.as_ref()), i.pool.as_ref());
        location(&project, &place)
    }

    fn names_source(&self, kind: &str, driver: &str) -> bool {
        kind == "gcePersistentDisk" || (kind == "csi" && driver == GCE_PD_CSI_DRIVER)
    }

    /// The PD CSI driver's handle (`projects/P/zones/Z/disks/D`, or `regions/R`), or the
    /// in-tree `gcePersistentDisk` located by the zones its PV's node affinity requires
    /// (recorded in the source; a tombstone written before they were recorded has none, and its
    /// disk is not located). Parts: the project (`None`: an in-tree volume, or a migrated one
    /// whose handle says `UNSPECIFIED`), the zone or region (`None`: not told).
    fn disk_ref(&self, s: &VolumeSourceInfo) -> Option<DiskRef> {
        match s.kind.as_str() {
            "csi" if s.driver.as_deref() == Some(GCE_PD_CSI_DRIVER) => {
                let h = parse_gce_handle(s.volume_handle.as_deref()?)?;
                Some(disk(h.project.as_deref(), Some(&h.location), &h.name))
            }
            "gcePersistentDisk" => {
                let name = s
                    .disk_name
                    .clone()
                    .filter(|n| !n.is_empty() && !n.contains('/'))?;
                let zones: Vec<&str> = s.zones.iter().map(String::as_str).collect();
                Some(disk(None, gce_location(&zones).as_deref(), &name))
            }
            _ => None,
        }
    }

    /// `projects/<project>/global/snapshots/<name>`: global in its project.
    fn snapshot_ref(&self, handle: &str) -> Option<SnapshotHandleRef> {
        let rest = handle.strip_prefix("projects/")?;
        let (project, name) = rest.split_once("/global/snapshots/")?;
        (!project.is_empty() && !name.is_empty() && !name.contains('/'))
            .then(|| DiskRef::new(&GCE, name, [Some(project.to_string())]))
    }

    fn granularity(&self) -> u64 {
        GIB
    }

    /// A disk is in the zone or region its volume names, of the project it names (an in-tree
    /// volume names none: any project's).
    fn holds(&self, scope: &Scope, _listing: Option<&ScopeListing>, r: &DiskRef) -> Option<bool> {
        Some(
            r.is_of(self)
                && scope.kind() == ScopeKind::Disks
                && r.part(1) == Some(scope.part(1))
                && r.part(0).is_none_or(|p| p == scope.part(0)),
        )
    }

    fn unlisted_scope(&self, whole: &Scope, r: &DiskRef) -> Option<Scope> {
        let place = r.part(1).filter(|_| r.is_of(self))?;
        r.part(0)
            .is_none_or(|p| p == whole.part(0))
            .then(|| location(whole.part(0), place))
    }

    fn whole_of(&self, scope: &Scope) -> Option<Scope> {
        (scope.kind() == ScopeKind::Disks).then(|| project(scope.part(0)))
    }

    fn snapshot_name_in<'a>(&self, scope: &Scope, r: &'a SnapshotHandleRef) -> Option<&'a str> {
        (r.is_of(self) && scope.kind() == ScopeKind::Snapshots && r.part(0) == Some(scope.part(0)))
            .then(|| r.name())
    }

    fn cloud_keys(&self, scope: &Scope) -> Option<(Option<String>, Option<String>)> {
        Some((Some(scope.part(0).to_string()), None))
    }

    fn disk_runbook(&self, disk: DiskRecord<'_>) -> Box<dyn DiskRunbook> {
        Box::new(super::runbook::Disk::of(disk))
    }

    fn snapshot_runbook(&self, snapshot: SnapshotRecord<'_>) -> Box<dyn SnapshotRunbook> {
        Box::new(super::runbook::Snapshot::of(snapshot))
    }
}
