//! The commands `explain` prints for an EBS volume or snapshot: the AWS CLI's, with the volume's
//! id, region and zone as the finding records them.

use super::handle::{aws_region_of, parse_ebs_volume_id};
use crate::model::backend::{DiskRecord, SnapshotRecord};

use crate::model::csi::EBS_CSI_DRIVER;
use crate::model::runbook::{
    Blanks, DiskRunbook, Line, PvSource, SnapshotAsk, SnapshotRunbook, ask, nonempty, opt, run, say,
};

/// An EBS volume, as far as the finding says.
pub(super) struct Volume {
    /// `vol-…`.
    id: Option<String>,
    /// Its availability zone.
    zone: Option<String>,
    /// Its region.
    region: Option<String>,
}

impl Volume {
    /// The census's record first, then the volume's id (an in-tree id may carry its zone), then
    /// the PV's one zone.
    pub(super) fn of(disk: DiskRecord<'_>) -> Volume {
        let src = disk.source;
        let (id, region) = match disk.named {
            Some(r) => (Some(r.name().to_string()), r.part(0).map(str::to_string)),
            None => (None, None),
        };
        let in_id_zone = src
            .disk_name
            .as_deref()
            .and_then(parse_ebs_volume_id)
            .and_then(|(_, z)| z);
        let one_zone = match &src.zones[..] {
            [z] => Some(z.clone()),
            _ => None,
        };
        let image = disk.image;
        let zone = image
            .and_then(|i| nonempty(i.zone.as_deref()))
            .or(in_id_zone)
            .or(one_zone);
        let region = image
            .and_then(|i| nonempty(i.region.as_deref()))
            .or(region)
            .or_else(|| zone.as_deref().and_then(aws_region_of));
        Volume {
            id: id.or_else(|| image.and_then(|i| nonempty(Some(&i.name)))),
            zone,
            region,
        }
    }

    fn id(&self, blanks: &Blanks) -> String {
        blanks.or(self.id.as_deref(), "volume-id")
    }

    fn region(&self, blanks: &Blanks) -> String {
        blanks.or(self.region.as_deref(), "region")
    }
}

impl DiskRunbook for Volume {
    fn sentence(&self, via: &str) -> String {
        format!(
            "Disk: the EBS volume {} in {}{} ({via}).",
            self.id.as_deref().unwrap_or("(not recorded)"),
            self.region
                .as_deref()
                .map_or("a region the finding does not record".into(), |r| format!(
                    "region {r}"
                )),
            self.zone
                .as_deref()
                .map_or(String::new(), |z| format!(", availability zone {z}")),
        )
    }

    fn look(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "aws ec2 describe-volumes {} {}",
            opt("--volume-ids", &self.id(blanks)),
            opt("--region", &self.region(blanks))
        ))]
    }

    fn in_use(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "aws ec2 describe-volumes {} {} {}",
            opt("--volume-ids", &self.id(blanks)),
            opt("--region", &self.region(blanks)),
            opt("--query", "Volumes[0].Attachments")
        ))]
    }

    fn snapshot(&self, blanks: &Blanks, ask_for: SnapshotAsk<'_>) -> Vec<Line> {
        vec![
            say("Snapshot the volume, and wait until the snapshot is complete:"),
            run(format!(
                "aws ec2 create-snapshot {} {} {} --query SnapshotId --output text",
                opt("--volume-id", &self.id(blanks)),
                opt("--region", &self.region(blanks)),
                opt("--description", ask_for.description)
            )),
            run(format!(
                "aws ec2 wait snapshot-completed {} {}",
                opt("--snapshot-ids", &ask("snapshot id printed above")),
                opt("--region", &self.region(blanks))
            )),
        ]
    }

    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "aws ec2 delete-volume {} {}",
            opt("--volume-id", &self.id(blanks)),
            opt("--region", &self.region(blanks))
        ))]
    }

    fn restore(&self, blanks: &Blanks, _in_trash: bool) -> Vec<Line> {
        let region = self.region(blanks);
        vec![
            say("Find a snapshot of the volume, and create a volume from it in the same zone:"),
            run(format!(
                "aws ec2 describe-snapshots {} {}",
                opt("--region", &region),
                opt(
                    "--filters",
                    &format!("Name=volume-id,Values={}", self.id(blanks))
                )
            )),
            run(format!(
                "aws ec2 create-volume {} {} {}",
                opt("--snapshot-id", &ask("snapshot")),
                opt(
                    "--availability-zone",
                    &blanks.or(self.zone.as_deref(), "zone")
                ),
                opt("--region", &region)
            )),
            say(
                "The new volume has a new id: the PV names the old one, and a PV's source cannot \
                 be changed. Record this PV, delete it (below) and create one naming the new id.",
            ),
        ]
    }

    fn pv_source(&self, blanks: &Blanks) -> Option<PvSource> {
        Some(PvSource {
            driver: EBS_CSI_DRIVER.to_string(),
            handle: self.id(blanks),
            attributes: Vec::new(),
            affinity: Some((
                "topology.kubernetes.io/zone",
                vec![blanks.or(self.zone.as_deref(), "zone")],
            )),
            node_stage_secret: false,
            notes: Vec::new(),
        })
    }
}

/// An EBS snapshot, as far as the finding says.
pub(super) struct Snapshot {
    /// `snap-…`.
    id: Option<String>,
    /// Its region.
    region: Option<String>,
}

impl Snapshot {
    /// The content's handle, else the census's record.
    pub(super) fn of(snapshot: SnapshotRecord<'_>) -> Snapshot {
        let image = snapshot.image;
        let named = snapshot.named;
        Snapshot {
            id: match named {
                Some(r) => Some(r.name().to_string()),
                None => image.and_then(|i| nonempty(Some(&i.name))),
            },
            region: image.and_then(|i| nonempty(i.region.as_deref())),
        }
    }
}

impl SnapshotRunbook for Snapshot {
    fn delete(&self, blanks: &Blanks) -> Vec<Line> {
        vec![run(format!(
            "aws ec2 delete-snapshot {} {}",
            opt(
                "--snapshot-id",
                &blanks.or(self.id.as_deref(), "snapshot-id")
            ),
            opt("--region", &blanks.or(self.region.as_deref(), "region"))
        ))]
    }
}
