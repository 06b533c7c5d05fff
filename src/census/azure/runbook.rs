//! The commands `explain` prints for an Azure managed disk or snapshot: `az`'s, naming the disk
//! by its resource id as the PV spells it (what `az` and the portal print back).

use super::handle::parse_azure_id;
use crate::model::backend::{DiskRecord, SnapshotRecord};

use crate::model::csi::AZURE_DISK_CSI_DRIVER;
use crate::model::runbook::{
    Blanks, DiskRunbook, Line, PvSource, SnapshotAsk, SnapshotRunbook, ask, nonempty, opt, run, say,
};

/// A managed disk, as far as the finding says.
pub(super) struct Disk {
    /// Its resource id, as the PV spells it (else built from the finding, lower-cased).
    id: Option<String>,
    name: Option<String>,
    resource_group: Option<String>,
    /// Its zone (`westeurope-1`), where recorded.
    zone: Option<String>,
}

impl Disk {
    /// What the PV's source says, then the census's record.
    pub(super) fn of(disk: DiskRecord<'_>) -> Disk {
        let src = disk.source;
        // Azure's parts: the subscription, the resource group.
        let (mut sub, mut rg, mut name) = match disk.named {
            Some(r) => (
                r.part(0).map(str::to_string),
                r.part(1).map(str::to_string),
                Some(r.name().to_string()),
            ),
            None => (None, None, None),
        };
        if let Some(i) = disk.image {
            sub = sub.or_else(|| nonempty(i.account.as_deref()).map(|s| s.to_ascii_lowercase()));
            rg = rg
                .or_else(|| nonempty(i.resource_group.as_deref()).map(|g| g.to_ascii_lowercase()));
            name = name.or_else(|| nonempty(Some(&i.name)));
        }
        let spelled = src
            .volume_handle
            .clone()
            .filter(|_| src.kind == "csi")
            .or_else(|| src.disk_uri.clone())
            .filter(|h| parse_azure_id(h, "disks").is_some());
        let built = match (&sub, &rg, &name) {
            (Some(s), Some(g), Some(n)) => Some(format!(
                "/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.Compute/disks/{n}"
            )),
            _ => None,
        };
        Disk {
            id: spelled.or(built),
            name,
            resource_group: rg,
            zone: disk.image.and_then(|i| nonempty(i.zone.as_deref())),
        }
    }

    fn id(&self, blanks: &Blanks) -> String {
        blanks.or(self.id.as_deref(), "disk-id")
    }

    fn resource_group(&self, blanks: &Blanks) -> String {
        blanks.or(self.resource_group.as_deref(), "resource-group")
    }
}

impl DiskRunbook for Disk {
    fn sentence(&self, via: &str) -> String {
        format!(
            "Disk: the Azure managed disk {} in resource group {}{} ({via}).",
            self.name.as_deref().unwrap_or("(not recorded)"),
            self.resource_group.as_deref().unwrap_or("(not recorded)"),
            self.zone
                .as_deref()
                .map_or(String::new(), |z| format!(", zone {z}")),
        )
    }

    fn look(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "az disk show {}",
            opt("--ids", &self.id(blanks))
        ))]
    }

    fn in_use(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "az disk show {} {}",
            opt("--ids", &self.id(blanks)),
            opt("--query", "{managedBy: managedBy, diskState: diskState}")
        ))]
    }

    fn snapshot(&self, blanks: &Blanks, ask_for: SnapshotAsk<'_>) -> Vec<Line> {
        vec![
            say("Snapshot the disk (an incremental snapshot, in the disk's resource group):"),
            run(format!(
                "az snapshot create {} {} {} --incremental true {}",
                opt("--resource-group", &self.resource_group(blanks)),
                opt("--name", ask_for.name),
                opt("--source", &self.id(blanks)),
                opt("--tags", &format!("note={}", ask_for.description))
            )),
        ]
    }

    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "az disk delete {}",
            opt("--ids", &self.id(blanks))
        ))]
    }

    fn restore(&self, blanks: &Blanks, _in_trash: bool) -> Vec<Line> {
        let rg = self.resource_group(blanks);
        vec![
            say(
                "Find a snapshot of the disk, and create the disk from it under the same name and \
                 resource group (the PV names it by its resource id):",
            ),
            run(format!(
                "az snapshot list {} {}",
                opt("--resource-group", &rg),
                opt(
                    "--query",
                    &format!("[?creationData.sourceResourceId=='{}'].id", self.id(blanks))
                )
            )),
            run(format!(
                "az disk create {} {} {}",
                opt("--resource-group", &rg),
                opt("--name", &blanks.or(self.name.as_deref(), "disk")),
                opt("--source", &ask("snapshot id"))
            )),
        ]
    }

    fn pv_source(&self, blanks: &Blanks) -> Option<PvSource> {
        Some(PvSource {
            driver: AZURE_DISK_CSI_DRIVER.to_string(),
            handle: self.id(blanks),
            attributes: Vec::new(),
            affinity: self
                .zone
                .clone()
                .map(|z| ("topology.disk.csi.azure.com/zone", vec![z])),
            node_stage_secret: false,
            notes: Vec::new(),
        })
    }
}

/// An Azure snapshot, by its resource id.
pub(super) struct Snapshot {
    id: Option<String>,
}

impl Snapshot {
    /// The content's handle (the snapshot's resource id), else the id the census's record
    /// builds.
    pub(super) fn of(snapshot: SnapshotRecord<'_>) -> Snapshot {
        // A handle this backend read (the runbook of the backend that read it is the one asked).
        let handle = snapshot
            .handle
            .filter(|_| snapshot.named.is_some())
            .map(str::to_string);
        let recorded = snapshot.image.and_then(|i| {
            Some(format!(
                "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/snapshots/{}",
                nonempty(i.account.as_deref())?,
                nonempty(i.resource_group.as_deref())?,
                nonempty(Some(&i.name))?
            ))
        });
        Snapshot {
            id: handle.or(recorded),
        }
    }
}

impl SnapshotRunbook for Snapshot {
    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "az snapshot delete {}",
            opt("--ids", &blanks.or(self.id.as_deref(), "snapshot-id"))
        ))]
    }
}
