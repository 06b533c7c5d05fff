//! The commands `explain` prints for a GCE persistent disk or snapshot: `gcloud`'s, with the
//! disk's project and zone (or region, for a regional disk) as the finding records them.

use super::handle::GceLocation;
use crate::model::backend::{DiskRecord, SnapshotRecord};

use crate::model::csi::GCE_PD_CSI_DRIVER;
use crate::model::runbook::{
    Blanks, DiskRunbook, Line, PvSource, SnapshotAsk, SnapshotRunbook, ask, flag, nonempty, quote,
    run, say,
};

/// A persistent disk, as far as the finding says.
pub(super) struct Disk {
    project: Option<String>,
    /// A zonal disk's zone.
    zone: Option<String>,
    /// A regional disk's region.
    region: Option<String>,
    /// A regional disk's two zones, where known.
    replica_zones: Vec<String>,
    name: Option<String>,
}

impl Disk {
    /// The census's record first, then what the PV's source says.
    pub(super) fn of(disk: DiskRecord<'_>) -> Disk {
        let src = disk.source;
        // GCE's parts: the project, the zone or region.
        let (mut project, mut location, mut name) = match disk.named {
            Some(r) => (
                r.part(0).map(str::to_string),
                r.part(1).map(str::to_string),
                Some(r.name().to_string()),
            ),
            None => (None, None, None),
        };
        if let Some(i) = disk.image {
            // Before `image.backend` was recorded, the project was written in `clusterID`, the
            // zone or region in `pool`.
            let legacy = i.backend.is_none();
            let recorded = |new: Option<&String>, old: Option<&String>| {
                nonempty(new.or(old.filter(|_| legacy)).map(String::as_str))
            };
            project = recorded(i.account.as_ref(), i.cluster_id.as_ref()).or(project);
            location =
                recorded(i.zone.as_ref().or(i.region.as_ref()), i.pool.as_ref()).or(location);
            name = nonempty(Some(&i.name)).or(name);
        }
        let (zone, region) = match location.as_deref().and_then(GceLocation::parse) {
            Some(GceLocation::Zone(z)) => (Some(z), None),
            Some(GceLocation::Region(r)) => (None, Some(r)),
            None => (None, None),
        };
        let replica_zones = match disk.image.map(|i| &i.replica_zones) {
            Some(z) if !z.is_empty() => z.clone(),
            _ if region.is_some() => src.zones.clone(),
            _ => Vec::new(),
        };
        Disk {
            project,
            zone,
            region,
            replica_zones,
            name,
        }
    }

    fn name(&self, blanks: &Blanks) -> String {
        blanks.or(self.name.as_deref(), "disk")
    }

    /// `--zone=Z` or `--region=R` (with `prefix`: `--source-disk-zone=Z`), and `--project=P`.
    fn at(&self, blanks: &Blanks, prefix: &str) -> String {
        let at = match (&self.zone, &self.region) {
            (_, Some(r)) => flag(&format!("--{prefix}region"), r),
            (Some(z), None) => flag(&format!("--{prefix}zone"), z),
            (None, None) => flag(&format!("--{prefix}zone"), &blanks.or(None, "zone")),
        };
        format!(
            "{at} {}",
            flag("--project", &blanks.or(self.project.as_deref(), "project"))
        )
    }
}

impl DiskRunbook for Disk {
    fn sentence(&self, via: &str) -> String {
        let at = match (&self.zone, &self.region) {
            (_, Some(r)) if !self.replica_zones.is_empty() => {
                format!(
                    "regional, in region {r} (zones {})",
                    self.replica_zones.join(", ")
                )
            }
            (_, Some(r)) => format!("regional, in region {r}"),
            (Some(z), None) => format!("in zone {z}"),
            (None, None) => "in a zone the finding does not record".into(),
        };
        format!(
            "Disk: the GCE persistent disk {} {at}, project {} ({via}).",
            self.name.as_deref().unwrap_or("(not recorded)"),
            self.project.as_deref().unwrap_or("(not recorded)")
        )
    }

    fn look(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "gcloud compute disks describe {} {}",
            quote(&self.name(blanks)),
            self.at(blanks, "")
        ))]
    }

    fn in_use(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "gcloud compute disks describe {} {} {}",
            quote(&self.name(blanks)),
            self.at(blanks, ""),
            flag("--format", "value(users)")
        ))]
    }

    fn snapshot(&self, blanks: &Blanks, ask_for: SnapshotAsk<'_>) -> Vec<Line> {
        vec![
            say("Snapshot the disk:"),
            run(format!(
                "gcloud compute snapshots create {} {} {} {}",
                quote(ask_for.name),
                flag("--source-disk", &self.name(blanks)),
                self.at(blanks, "source-disk-"),
                flag("--description", ask_for.description)
            )),
        ]
    }

    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "gcloud compute disks delete {} {}",
            quote(&self.name(blanks)),
            self.at(blanks, "")
        ))]
    }

    fn restore(&self, blanks: &Blanks, _in_trash: bool) -> Vec<Line> {
        vec![
            say(
                "Find a snapshot of the disk, and create the disk again from it, under the same \
                 name and location (the PV names the disk by them):",
            ),
            run(format!(
                "gcloud compute snapshots list {} {}",
                flag("--project", &blanks.or(self.project.as_deref(), "project")),
                flag(
                    "--filter",
                    &format!("sourceDisk~/disks/{}$", self.name(blanks))
                )
            )),
            run(format!(
                "gcloud compute disks create {} {} {}",
                quote(&self.name(blanks)),
                flag("--source-snapshot", &ask("snapshot")),
                self.at(blanks, "")
            )),
        ]
    }

    fn pv_source(&self, blanks: &Blanks) -> Option<PvSource> {
        let project = blanks.or(self.project.as_deref(), "project");
        let name = self.name(blanks);
        let (handle, zones) = match (&self.zone, &self.region) {
            (_, Some(r)) => (
                format!("projects/{project}/regions/{r}/disks/{name}"),
                self.replica_zones.clone(),
            ),
            (Some(z), None) => (
                format!("projects/{project}/zones/{z}/disks/{name}"),
                vec![z.clone()],
            ),
            (None, None) => {
                let z = blanks.or(None, "zone");
                (
                    format!("projects/{project}/zones/{z}/disks/{name}"),
                    vec![z],
                )
            }
        };
        Some(PvSource {
            driver: GCE_PD_CSI_DRIVER.to_string(),
            handle,
            attributes: Vec::new(),
            affinity: (!zones.is_empty()).then_some(("topology.gke.io/zone", zones)),
            node_stage_secret: false,
            notes: Vec::new(),
        })
    }
}

/// A GCE snapshot, as far as the finding says.
pub(super) struct Snapshot {
    project: Option<String>,
    name: Option<String>,
}

impl Snapshot {
    /// The content's handle, else the census's record.
    pub(super) fn of(snapshot: SnapshotRecord<'_>) -> Snapshot {
        let image = snapshot.image;
        match snapshot.named {
            // GCE's part: the project.
            Some(r) => Snapshot {
                project: r.part(0).map(str::to_string),
                name: Some(r.name().to_string()),
            },
            None => Snapshot {
                project: image.and_then(|i| nonempty(i.account.as_deref())),
                name: image.and_then(|i| nonempty(Some(&i.name))),
            },
        }
    }
}

impl SnapshotRunbook for Snapshot {
    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "gcloud compute snapshots delete {} {}",
            quote(&blanks.or(self.name.as_deref(), "snapshot")),
            flag("--project", &blanks.or(self.project.as_deref(), "project"))
        ))]
    }
}
