//! `explain`: what a person can do about one finding, as the exact commands to review and run.
//! Printed, never run. Pure: a function of the VolumeLeftover (its name, spec and status) and of
//! where it came from (`Origin`); no client, no clock.
//!
//! Every finding gets the same three choices, in the words of its reason: **reuse** (let a claim
//! bind the volume, or the disk, or the snapshot, again), **abandon** (record, snapshot, delete,
//! in an order that never loses the record of which disk was whose) and **keep** (acknowledge).
//! What makes a choice unsafe comes first (a Delete reclaim policy, a claim that still exists, a
//! PV being deleted, a disk in use or maybe another cluster's), with what to do about it.
//!
//! The names in the commands are the finding's own facts (`status.source`, `status.image`,
//! `status.claim`, `status.snapshot`); a fact the finding lacks is a placeholder in angle
//! brackets (`<zone>`), listed in `Explanation::missing`, never a guess. Every word taken from
//! the finding is shell-quoted (`quote`); a placeholder is quoted too, so that a command run
//! without filling it in fails instead of redirecting to a file.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use crate::model::backend::Backend;

use crate::model::crd::{Hint, Reason, Tristate, VolumeLeftover, VolumeLeftoverStatus};
use crate::model::csi::{
    EBS_CSI_DRIVER, GCE_PD_CSI_DRIVER, GceLocation, aws_region_of, parse_ebs_volume_id,
    parse_volume_handle,
};

/// Where the finding came from: what records which disk was whose once its PV is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The VolumeLeftover the operator publishes: the operator runs, and deleting a Retain PV
    /// leaves its `VolumeDeleted` tombstone, which keeps the record.
    Operator,
    /// One scan's finding, with no VolumeLeftover object: the PV (or content) is the only
    /// record, so the disk (or backend snapshot) goes first.
    Scan,
}

/// One of the choices, or what comes before them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Choice {
    /// What to know or do before choosing: what makes a choice unsafe, and how to look.
    First,
    /// Let it be used again.
    Reuse,
    /// Let it go: record, snapshot, delete.
    Abandon,
    /// Let a stopped operation complete (an expansion).
    Finish,
    /// Take a stopped operation back (an expansion's request lowered back).
    Revert,
    /// Keep it as it is, on purpose.
    Keep,
}

impl Choice {
    /// The heading's first word.
    fn word(self) -> &'static str {
        match self {
            Choice::First => "Before you choose",
            Choice::Reuse => "Reuse",
            Choice::Abandon => "Abandon",
            Choice::Finish => "Finish",
            Choice::Revert => "Revert",
            Choice::Keep => "Keep",
        }
    }
}

/// One line of a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A sentence.
    Say(String),
    /// What makes a choice unsafe.
    Warn(String),
    /// A command, shell-quoted, to review and run (a here-document spans several lines).
    Run(String),
}

/// A choice and its steps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// Which choice.
    pub(crate) choice: Choice,
    /// The heading after the choice's word.
    pub(crate) title: String,
    /// The steps.
    pub(crate) lines: Vec<Line>,
}

/// What `explain` prints about one finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Explanation {
    /// What the finding is, one fact a line.
    pub(crate) head: Vec<String>,
    /// Before choosing, then the choices.
    pub(crate) blocks: Vec<Block>,
    /// The facts the finding lacks, printed as placeholders (`zone` for `<zone>`).
    pub(crate) missing: BTreeSet<&'static str>,
}

#[cfg(test)]
impl Explanation {
    /// The commands of one choice, in order.
    pub(crate) fn commands(&self, choice: Choice) -> Vec<&str> {
        self.blocks
            .iter()
            .filter(|b| b.choice == choice)
            .flat_map(|b| &b.lines)
            .filter_map(|l| match l {
                Line::Run(c) => Some(c.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Every sentence and warning of one choice, in order.
    pub(crate) fn sentences(&self, choice: Choice) -> Vec<&str> {
        self.blocks
            .iter()
            .filter(|b| b.choice == choice)
            .flat_map(|b| &b.lines)
            .filter_map(|l| match l {
                Line::Say(s) | Line::Warn(s) => Some(s.as_str()),
                Line::Run(_) => None,
            })
            .collect()
    }

    /// Every warning, in order.
    pub(crate) fn warnings(&self) -> Vec<&str> {
        self.blocks
            .iter()
            .flat_map(|b| &b.lines)
            .filter_map(|l| match l {
                Line::Warn(s) => Some(s.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// The width prose is wrapped at; commands are never wrapped.
const WIDTH: usize = 100;

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut head = self.head.iter();
        if let Some(first) = head.next() {
            write_wrapped(f, first, "", "  ")?;
        }
        for h in head {
            write_wrapped(f, h, "  ", "    ")?;
        }
        writeln!(f)?;
        write_wrapped(
            f,
            "Nothing here has been run: every command is printed for you to review and run yourself, \
             one at a time, in order. Words in <angle brackets> are facts this finding does not \
             have, or choices that are yours: fill them in first.",
            "",
            "",
        )?;
        for b in &self.blocks {
            writeln!(f)?;
            writeln!(f, "# {}: {}", b.choice.word(), b.title)?;
            for l in &b.lines {
                match l {
                    Line::Say(s) => write_wrapped(f, s, "", "  ")?,
                    Line::Warn(s) => write_wrapped(f, &format!("WARNING: {s}"), "", "  ")?,
                    Line::Run(c) => writeln!(f, "$ {c}")?,
                }
            }
        }
        Ok(())
    }
}

/// Writes `text` wrapped at [`WIDTH`], the first line after `first`, the others after `rest`.
fn write_wrapped(f: &mut fmt::Formatter<'_>, text: &str, first: &str, rest: &str) -> fmt::Result {
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.len() + 1 + word.len() > WIDTH {
            writeln!(f, "{line}")?;
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    writeln!(f, "{line}")
}

/// One word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a single quote inside as `'\''`).
pub(crate) fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./_-".contains(&b));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// A scalar for a YAML manifest: plain when it cannot be read as anything but that string, else
/// a JSON string (which YAML reads as the same string).
fn yaml(value: &str) -> String {
    // A leading digit is plain only in a quantity (`250Mi`): anything else that starts with
    // one may read as a number or a date.
    let quantity = |v: &str| {
        let letters = v.trim_start_matches(|c: char| c.is_ascii_digit());
        letters.len() < v.len() && letters.bytes().all(|b| b.is_ascii_alphabetic())
    };
    let plain = !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"./_-".contains(&b))
        && !value.starts_with(['-', '.'])
        && (!value.starts_with(|c: char| c.is_ascii_digit()) || quantity(value))
        && value.parse::<f64>().is_err()
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n"
        );
    if plain {
        value.to_string()
    } else {
        serde_json::Value::String(value.to_string()).to_string()
    }
}

/// `--flag=value`, the value quoted.
fn flag(name: &str, value: &str) -> String {
    format!("{name}={}", quote(value))
}

/// `--option value`, the value quoted (the AWS CLI's form).
fn opt(name: &str, value: &str) -> String {
    format!("{name} {}", quote(value))
}

/// A placeholder for something the person chooses or looks up (not a fact of the finding).
fn ask(what: &str) -> String {
    format!("<{what}>")
}

/// Where a disk lives, as far as the finding says.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Disk {
    /// A Ceph RBD image.
    Rbd {
        /// ceph-csi's cluster id.
        cluster_id: Option<String>,
        /// The pool's name.
        pool: Option<String>,
        /// The pool's id (a ceph-csi handle's), when its name is not known.
        pool_id: Option<i64>,
        /// The RADOS namespace, when not the default one.
        namespace: Option<String>,
        /// The image.
        image: Option<String>,
    },
    /// A GCE persistent disk.
    Gce {
        /// The project.
        project: Option<String>,
        /// A zonal disk's zone.
        zone: Option<String>,
        /// A regional disk's region.
        region: Option<String>,
        /// A regional disk's two zones, where known.
        replica_zones: Vec<String>,
        /// The disk's name.
        name: Option<String>,
    },
    /// An AWS EBS volume.
    Ebs {
        /// `vol-…`.
        id: Option<String>,
        /// Its availability zone.
        zone: Option<String>,
        /// Its region.
        region: Option<String>,
    },
    /// An Azure managed disk.
    Azure {
        /// Its resource id, as the PV spells it (else built from the finding, lower-cased).
        id: Option<String>,
        /// Its name.
        name: Option<String>,
        /// Its resource group.
        resource_group: Option<String>,
        /// Its zone (`westeurope-1`), where recorded.
        zone: Option<String>,
    },
    /// A backend volume-leftovers does not census: what the source says is all there is.
    Other,
}

/// The finding and what is known about it, and the placeholders printed so far.
struct Cx<'a> {
    /// The VolumeLeftover's name.
    name: &'a str,
    /// Its status.
    s: &'a VolumeLeftoverStatus,
    /// The PersistentVolume it is about, when one exists (or existed, for a tombstone).
    pv: Option<&'a str>,
    origin: Origin,
    /// `spec.acknowledgement`, when someone wrote one.
    acknowledgement: Option<&'a crate::model::crd::Acknowledgement>,
    disk: Disk,
    /// Every backend's words: which disk or snapshot a source or handle names.
    backends: &'a [&'static dyn Backend],
    missing: RefCell<BTreeSet<&'static str>>,
}

fn nonempty(v: Option<&str>) -> Option<String> {
    v.filter(|v| !v.is_empty()).map(str::to_string)
}

impl Cx<'_> {
    /// `value`, or the placeholder `<what>`, noted as missing.
    fn or(&self, value: Option<&str>, what: &'static str) -> String {
        match value.filter(|v| !v.is_empty()) {
            Some(v) => v.to_string(),
            None => {
                self.missing.borrow_mut().insert(what);
                format!("<{what}>")
            }
        }
    }

    fn has(&self, h: Hint) -> bool {
        self.s.hints.contains(&h)
    }

    fn pv_name(&self) -> String {
        self.or(self.pv, "pv")
    }

    fn claim_ns(&self) -> Option<&str> {
        self.s.claim.as_ref().and_then(|c| c.namespace.as_deref())
    }

    fn claim_name(&self) -> Option<&str> {
        self.s.claim.as_ref().and_then(|c| c.name.as_deref())
    }

    fn claim_uid(&self) -> Option<&str> {
        self.s.claim.as_ref().and_then(|c| c.uid.as_deref())
    }

    fn class(&self) -> Option<&str> {
        self.s.storage_class.as_ref().map(|c| c.name.as_str())
    }

    fn is_tombstone(&self) -> bool {
        matches!(
            self.s.reason,
            Reason::VolumeDeleted | Reason::ContentDeleted
        )
    }

    fn snapshot(&self) -> Option<&crate::model::crd::SnapshotInfo> {
        self.s.snapshot.as_ref()
    }
}

/// What a person can do about the finding `o`, which came from `origin`.
pub(crate) fn explain(
    o: &VolumeLeftover,
    origin: Origin,
    backends: &[&'static dyn Backend],
) -> Explanation {
    let name = o.metadata.name.as_deref().unwrap_or_default();
    let Some(s) = o.status.as_ref() else {
        return Explanation {
            head: vec![format!(
                "{name}: no status yet: the operator has created the object and not yet written \
                 what it found. Run explain again in a moment."
            )],
            blocks: Vec::new(),
            missing: BTreeSet::new(),
        };
    };
    let cx = Cx {
        name,
        s,
        pv: Some(o.spec.volume_name.as_str()).filter(|v| !v.is_empty()),
        origin,
        acknowledgement: o.spec.acknowledgement.as_ref(),
        disk: disk_of(s, backends),
        backends,
        missing: RefCell::new(BTreeSet::new()),
    };
    let head = head(&cx);
    let blocks = match s.reason {
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimStillPresent
        | Reason::ClaimUnknown
        | Reason::ClaimRefInvalid
        | Reason::ReleasedWithoutClaim
        | Reason::BoundClaimMissing
        | Reason::PreboundClaimMissing
        | Reason::ReclaimFailed => volume(&cx),
        Reason::ExpansionStuck => expansion(&cx),
        Reason::DiskSizeMismatch => size_mismatch(&cx),
        Reason::VolumeDeleted => tombstone(&cx),
        Reason::VolumeWithoutDisk => without_disk(&cx),
        Reason::DiskWithoutVolume => without_volume(&cx),
        Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound => content(&cx),
        Reason::SnapshotContentMissing => content_missing(&cx),
        Reason::ContentDeleted => content_tombstone(&cx),
        Reason::SnapshotWithoutContent => backend_snapshot(&cx),
    };
    let blocks = blocks.into_iter().filter(|b| !b.lines.is_empty()).collect();
    Explanation {
        head,
        blocks,
        missing: cx.missing.into_inner(),
    }
}

// --- where the disk is ------------------------------------------------------------------------

/// The disk the finding names: from its source (the PV's, or the one a disk finding records),
/// with what the census recorded of where it is (`status.image`) taking precedence.
fn disk_of(s: &VolumeLeftoverStatus, backends: &[&'static dyn Backend]) -> Disk {
    let src = &s.source;
    let driver = src.driver.as_deref().unwrap_or_default();
    // Where the census recorded the disk: a disk's image block, not a backend snapshot's.
    let image = s
        .image
        .as_ref()
        .filter(|_| s.reason != Reason::SnapshotWithoutContent);
    // Before `image.backend` was recorded, a cloud disk's project or account was written in
    // `clusterID`, its zone or region in `pool`.
    let legacy = image.is_some_and(|i| i.backend.is_none());
    let recorded = |new: Option<&String>, old: Option<&String>| {
        nonempty(new.or(old.filter(|_| legacy)).map(String::as_str))
    };
    // The backend the census recorded, else the one whose source it is.
    let backend = match s.image.as_ref().and_then(|i| i.backend.as_ref()) {
        Some(b) => Some(b.as_str()),
        None => backends
            .iter()
            .find(|b| b.names_source(&src.kind, driver))
            .map(|b| b.name()),
    };
    // The disk the source names, its parts in its backend's order (read below per backend: the
    // runbooks are still written here, not with each backend's words).
    let named = backends.iter().find_map(|b| b.disk_ref(src));
    match backend {
        Some("ceph") => {
            let handle = src
                .volume_handle
                .as_deref()
                .and_then(|h| parse_volume_handle(h).ok());
            let key = image;
            let image = named.as_ref().map(|r| r.name().to_string());
            let pool = nonempty(src.pool.as_deref())
                .or_else(|| key.and_then(|k| nonempty(k.pool.as_deref())));
            Disk::Rbd {
                cluster_id: nonempty(src.cluster_id.as_deref())
                    .or_else(|| key.and_then(|k| nonempty(k.cluster_id.as_deref())))
                    .or_else(|| handle.as_ref().map(|h| h.cluster_id.clone())),
                pool_id: handle
                    .as_ref()
                    .map(|h| h.pool_id)
                    .filter(|_| pool.is_none()),
                pool,
                namespace: nonempty(src.rados_namespace.as_deref())
                    .or_else(|| key.and_then(|k| nonempty(k.rados_namespace.as_deref()))),
                image: image.or_else(|| s.image.as_ref().and_then(|i| nonempty(Some(&i.name)))),
            }
        }
        Some("gce") => {
            // GCE's parts: the project, the zone or region.
            let (mut project, mut location, mut name) = match &named {
                Some(r) => (
                    r.part(0).map(str::to_string),
                    r.part(1).map(str::to_string),
                    Some(r.name().to_string()),
                ),
                None => (None, None, None),
            };
            if let Some(i) = image {
                project = recorded(i.account.as_ref(), i.cluster_id.as_ref()).or(project);
                location =
                    recorded(i.zone.as_ref().or(i.region.as_ref()), i.pool.as_ref()).or(location);
            }
            if let Some(i) = &s.image {
                name = nonempty(Some(&i.name)).or(name);
            }
            let (zone, region) = match location.as_deref().and_then(GceLocation::parse) {
                Some(GceLocation::Zone(z)) => (Some(z), None),
                Some(GceLocation::Region(r)) => (None, Some(r)),
                None => (None, None),
            };
            let replica_zones = match s.image.as_ref().map(|i| &i.replica_zones) {
                Some(z) if !z.is_empty() => z.clone(),
                _ if region.is_some() => src.zones.clone(),
                _ => Vec::new(),
            };
            Disk::Gce {
                project,
                zone,
                region,
                replica_zones,
                name,
            }
        }
        Some("ebs") => {
            // EBS's part: the region.
            let (id, region) = match &named {
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
            let image = s.image.as_ref();
            let zone = image
                .and_then(|i| nonempty(i.zone.as_deref()))
                .or(in_id_zone)
                .or(one_zone);
            let region = image
                .and_then(|i| nonempty(i.region.as_deref()))
                .or(region)
                .or_else(|| zone.as_deref().and_then(aws_region_of));
            Disk::Ebs {
                id: id.or_else(|| image.and_then(|i| nonempty(Some(&i.name)))),
                zone,
                region,
            }
        }
        Some("azure") => {
            // Azure's parts: the subscription, the resource group.
            let (mut sub, mut rg, mut name) = match &named {
                Some(r) => (
                    r.part(0).map(str::to_string),
                    r.part(1).map(str::to_string),
                    Some(r.name().to_string()),
                ),
                None => (None, None, None),
            };
            let image = s.image.as_ref();
            if let Some(i) = image {
                sub =
                    sub.or_else(|| nonempty(i.account.as_deref()).map(|s| s.to_ascii_lowercase()));
                rg = rg.or_else(|| {
                    nonempty(i.resource_group.as_deref()).map(|g| g.to_ascii_lowercase())
                });
            }
            name = name.or_else(|| image.and_then(|i| nonempty(Some(&i.name))));
            // The id as the PV spells it: what `az` and the portal print back.
            let spelled = src
                .volume_handle
                .clone()
                .filter(|_| src.kind == "csi")
                .or_else(|| src.disk_uri.clone())
                .filter(|h| crate::model::csi::parse_azure_id(h, "disks").is_some());
            let built = match (&sub, &rg, &name) {
                (Some(s), Some(g), Some(n)) => Some(format!(
                    "/subscriptions/{s}/resourceGroups/{g}/providers/Microsoft.Compute/disks/{n}"
                )),
                _ => None,
            };
            Disk::Azure {
                id: spelled.or(built),
                name,
                resource_group: rg,
                zone: image.and_then(|i| nonempty(i.zone.as_deref())),
            }
        }
        // A backend whose runbook is not written here (or none).
        _ => Disk::Other,
    }
}

/// The RBD image spec `pool/[namespace/]image`.
fn rbd_spec(cx: &Cx) -> String {
    let Disk::Rbd {
        pool,
        namespace,
        image,
        ..
    } = &cx.disk
    else {
        return String::new();
    };
    let pool = cx.or(pool.as_deref(), "pool");
    let image = cx.or(image.as_deref(), "image");
    match namespace {
        Some(ns) => format!("{pool}/{ns}/{image}"),
        None => format!("{pool}/{image}"),
    }
}

/// `--zone=Z` or `--region=R` (with `prefix`: `--source-disk-zone=Z`), and `--project=P`.
fn gce_where(cx: &Cx, prefix: &str) -> String {
    let Disk::Gce {
        project,
        zone,
        region,
        ..
    } = &cx.disk
    else {
        return String::new();
    };
    let at = match (zone, region) {
        (_, Some(r)) => flag(&format!("--{prefix}region"), r),
        (Some(z), None) => flag(&format!("--{prefix}zone"), z),
        (None, None) => flag(&format!("--{prefix}zone"), &cx.or(None, "zone")),
    };
    format!(
        "{at} {}",
        flag("--project", &cx.or(project.as_deref(), "project"))
    )
}

/// One sentence on where the disk is.
fn disk_sentence(cx: &Cx) -> String {
    let src = &cx.s.source;
    let via = match (src.kind.as_str(), src.driver.as_deref()) {
        ("csi", Some(d)) => format!(
            "CSI driver {d}, volume handle {}",
            src.volume_handle.as_deref().unwrap_or("(none)")
        ),
        (kind, _) => format!("volume source {kind}"),
    };
    match &cx.disk {
        Disk::Rbd {
            cluster_id,
            pool,
            pool_id,
            namespace,
            image,
        } => {
            let mut at = format!(
                "the Ceph RBD image {} in pool {}",
                image.as_deref().unwrap_or("(not recorded)"),
                match (pool, pool_id) {
                    (Some(p), _) => p.clone(),
                    (None, Some(id)) => format!("with id {id} (its name is not recorded)"),
                    (None, None) => "(not recorded)".into(),
                }
            );
            if let Some(ns) = namespace {
                at.push_str(&format!(", RADOS namespace {ns}"));
            }
            if let Some(c) = cluster_id {
                at.push_str(&format!(", of the Ceph cluster ceph-csi calls {c}"));
            }
            format!("Disk: {at} ({via}).")
        }
        Disk::Gce {
            project,
            zone,
            region,
            replica_zones,
            name,
        } => {
            let at = match (zone, region) {
                (_, Some(r)) if !replica_zones.is_empty() => {
                    format!(
                        "regional, in region {r} (zones {})",
                        replica_zones.join(", ")
                    )
                }
                (_, Some(r)) => format!("regional, in region {r}"),
                (Some(z), None) => format!("in zone {z}"),
                (None, None) => "in a zone the finding does not record".into(),
            };
            format!(
                "Disk: the GCE persistent disk {} {at}, project {} ({via}).",
                name.as_deref().unwrap_or("(not recorded)"),
                project.as_deref().unwrap_or("(not recorded)")
            )
        }
        Disk::Ebs { id, zone, region } => format!(
            "Disk: the EBS volume {} in {}{} ({via}).",
            id.as_deref().unwrap_or("(not recorded)"),
            region
                .as_deref()
                .map_or("a region the finding does not record".into(), |r| format!(
                    "region {r}"
                )),
            zone.as_deref()
                .map_or(String::new(), |z| format!(", availability zone {z}")),
        ),
        Disk::Azure {
            name,
            resource_group,
            zone,
            ..
        } => format!(
            "Disk: the Azure managed disk {} in resource group {}{} ({via}).",
            name.as_deref().unwrap_or("(not recorded)"),
            resource_group.as_deref().unwrap_or("(not recorded)"),
            zone.as_deref()
                .map_or(String::new(), |z| format!(", zone {z}")),
        ),
        Disk::Other => {
            let mut what = format!("Disk: {via}");
            if let Some(p) = &src.path {
                what.push_str(&format!(", path {p}"));
            }
            if let Some(d) = &src.disk_name {
                what.push_str(&format!(", disk {d}"));
            }
            what.push_str(
                ". Not a backend volume-leftovers knows (Ceph RBD, GCE, EBS): the commands for \
                 its disk are that storage system's own, or its CSI driver's.",
            );
            what
        }
    }
}

// --- the head -----------------------------------------------------------------------------------

fn head(cx: &Cx) -> Vec<String> {
    let s = cx.s;
    let from = match cx.origin {
        Origin::Operator => "from the VolumeLeftover the operator publishes",
        Origin::Scan => "from a scan: no VolumeLeftover object holds it",
    };
    let mut out = vec![format!(
        "{}: {} ({}), {from}.",
        cx.name,
        s.reason.as_str(),
        s.state.as_str()
    )];
    if let Some(pv) = cx.pv {
        let gone = if cx.s.reason == Reason::VolumeDeleted {
            " (deleted)"
        } else {
            ""
        };
        let mut facts = vec![];
        if !s.phase.is_empty() {
            facts.push(s.phase.clone());
        }
        if !s.reclaim_policy.is_empty() {
            facts.push(format!("reclaim policy {}", s.reclaim_policy));
        }
        if let Some(c) = &s.capacity {
            facts.push(c.clone());
        }
        if let Some(c) = cx.class() {
            facts.push(format!("class {c}"));
        }
        out.push(format!(
            "PersistentVolume {pv}{gone}: {}.",
            facts.join(", ")
        ));
    }
    if let Some(c) = &s.claim {
        let uid = c
            .uid
            .as_deref()
            .map_or(String::new(), |u| format!(" (uid {u})"));
        let now = match (c.missing, &c.current_uid) {
            (Tristate::True, _) => "is gone".to_string(),
            (Tristate::False, Some(cur)) => format!("exists now as another claim (uid {cur})"),
            (Tristate::False, None) if c.namespace.is_some() && c.name.is_some() => {
                "still exists".into()
            }
            (Tristate::False, None) => "cannot be looked up".into(),
            (Tristate::Unknown, _) => "may or may not exist: claims could not be read".into(),
        };
        out.push(format!("Its claim {}{uid} {now}.", c.reference));
        if let Some(e) = &c.expansion {
            let status = e
                .resize_status
                .as_deref()
                .map_or(String::new(), |r| format!(", resize status {r}"));
            out.push(format!(
                "It asks for {} and has {}; its resize stopped at {}{status}.",
                e.requested,
                e.capacity,
                e.stopped_at.as_str()
            ));
        }
    }
    if !s.reason.is_snapshot() && s.reason != Reason::SnapshotWithoutContent {
        out.push(disk_sentence(cx));
    }
    if let Some(sn) = cx.snapshot() {
        let mut facts = vec![];
        if let Some(c) = &sn.content {
            facts.push(format!("VolumeSnapshotContent {c}"));
        }
        if let Some(v) = &sn.snapshot {
            facts.push(format!("VolumeSnapshot {v}"));
        }
        if let Some(p) = &sn.deletion_policy {
            facts.push(format!("deletionPolicy {p}"));
        }
        if let Some(h) = &sn.snapshot_handle {
            facts.push(format!("backend snapshot {h}"));
        }
        if let Some(d) = &s.source.driver {
            facts.push(format!("CSI driver {d}"));
        }
        out.push(format!("Snapshot: {}.", facts.join(", ")));
    }
    if let Some(a) = cx.acknowledgement {
        let mut said = Vec::new();
        for (what, v) in [("by", &a.by), ("ticket", &a.ticket), ("reason", &a.reason)] {
            if let Some(v) = v {
                said.push(format!("{what} {v}"));
            }
        }
        if let Some(u) = &a.until {
            said.push(format!("until {}", u.0.strftime("%Y-%m-%dT%H:%M:%SZ")));
        }
        out.push(format!("Acknowledged: {}.", said.join(", ")));
    }
    if !s.hints.is_empty() {
        let hints: Vec<&str> = s.hints.iter().map(|h| h.as_str()).collect();
        out.push(format!("Hints: {}.", hints.join(", ")));
    }
    if !s.message.is_empty() {
        out.push(format!("Message: {}", s.message));
    }
    out
}

// --- commands shared by the reasons -------------------------------------------------------------

fn block(choice: Choice, title: impl Into<String>, lines: Vec<Line>) -> Block {
    Block {
        choice,
        title: title.into(),
        lines,
    }
}

fn say(s: impl Into<String>) -> Line {
    Line::Say(s.into())
}

fn warn(s: impl Into<String>) -> Line {
    Line::Warn(s.into())
}

fn run(s: impl Into<String>) -> Line {
    Line::Run(s.into())
}

/// `kubectl patch pv PV -p JSON` (a strategic merge patch: `null` removes a field).
fn patch_pv(pv: &str, patch: serde_json::Value) -> Line {
    run(format!(
        "kubectl patch pv {} -p {}",
        quote(pv),
        quote(&patch.to_string())
    ))
}

fn retain_patch(pv: &str) -> Line {
    patch_pv(
        pv,
        serde_json::json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}}),
    )
}

fn remove_claim_ref(pv: &str) -> Line {
    patch_pv(pv, serde_json::json!({"spec": {"claimRef": null}}))
}

fn remove_claim_uid(pv: &str) -> Line {
    patch_pv(
        pv,
        serde_json::json!({"spec": {"claimRef": {"uid": null, "resourceVersion": null}}}),
    )
}

/// `kubectl get KIND NAME -o yaml > FILE`.
fn record(kind: &str, name: &str, namespace: Option<&str>, file: &str) -> Line {
    let ns = namespace.map_or(String::new(), |n| format!(" -n {}", quote(n)));
    run(format!(
        "kubectl get {kind}{ns} {} -o yaml > {}",
        quote(name),
        quote(file)
    ))
}

/// The record of the finding itself, where there is an object.
fn record_finding(cx: &Cx) -> Option<Line> {
    (cx.origin == Origin::Operator)
        .then(|| record("vl", cx.name, None, &format!("{}.vl.yaml", cx.name)))
}

/// A claim of `namespace/name` naming the volume `pv`, as a here-document for `kubectl create`.
fn claim_manifest(cx: &Cx, namespace: &str, name: &str, pv: &str) -> Line {
    let modes = access_modes(cx);
    let volume_mode = nonempty(Some(&cx.s.volume_mode)).unwrap_or_else(|| "Filesystem".into());
    run(format!(
        "kubectl create -f - <<'EOF'\n\
         apiVersion: v1\n\
         kind: PersistentVolumeClaim\n\
         metadata:\n  \
           name: {}\n  \
           namespace: {}\n\
         spec:\n  \
           storageClassName: {}\n  \
           volumeName: {}\n  \
           accessModes: [{}]\n  \
           volumeMode: {}\n  \
           resources:\n    \
             requests:\n      \
               storage: {}\n\
         EOF",
        yaml(name),
        yaml(namespace),
        // A PV without a class binds only a claim that asks for none (`""`, not unset: an unset
        // class is the default class's).
        match cx.class() {
            Some(c) => yaml(c),
            None => "\"\"".into(),
        },
        yaml(pv),
        modes,
        yaml(&volume_mode),
        yaml(&cx.or(cx.s.capacity.as_deref(), "size")),
    ))
}

/// The access modes of a new claim or PV: the finding's, or, for a disk no PV named,
/// ReadWriteOnce (the one mode every block disk here supports).
fn access_modes(cx: &Cx) -> String {
    if cx.s.access_modes.is_empty() {
        return "ReadWriteOnce".into();
    }
    let modes: Vec<String> = cx.s.access_modes.iter().map(|m| yaml(m)).collect();
    modes.join(", ")
}

/// The acknowledgement patch, or what keeping means without an object.
fn keep(cx: &Cx, label: Option<(&str, String)>) -> Block {
    let mut lines = Vec::new();
    match cx.origin {
        Origin::Operator => {
            lines.push(say(if cx.is_tombstone() {
                "Acknowledge it, with the ticket: a tombstone acknowledged ends, and the record of \
                 whose disk (or snapshot) this was then lives in your ticket. Where the census \
                 covers it, it stays Acknowledged until the census no longer finds it."
            } else {
                "Acknowledge it, with a ticket and an end: its state turns Acknowledged and it \
                 stops alerting until `until` passes (then Expired); a change of the finding makes \
                 it Superseded. The operator never writes spec.acknowledgement."
            }));
            let ack = serde_json::json!({"spec": {"acknowledgement": {
                "by": ask("you"),
                "ticket": ask("ticket"),
                "reason": ask("why it is kept"),
                "until": ask("YYYY-MM-DDT00:00:00Z"),
            }}});
            lines.push(run(format!(
                "kubectl patch vl {} --type merge -p {}",
                quote(cx.name),
                quote(&ack.to_string())
            )));
        }
        Origin::Scan => {
            lines.push(say(
                "No VolumeLeftover holds this finding (no operator): there is nothing to \
                 acknowledge. Record the decision in your ticket.",
            ));
            if let Some((kind, name)) = label {
                let what = match kind {
                    "pv" => "PV",
                    _ => "VolumeSnapshotContent",
                };
                lines.push(say(format!(
                    "To keep scan and the operator from reporting it, label the {what}:"
                )));
                lines.push(run(format!(
                    "kubectl label {kind} {} {}=true",
                    quote(&name),
                    crate::model::exclude::IGNORE_LABEL
                )));
            }
        }
    }
    block(Choice::Keep, "acknowledge it", lines)
}

/// The sentence on the order of the deletes of a disk and of its PV.
fn disk_then_pv(cx: &Cx) -> Line {
    match cx.origin {
        Origin::Operator => say(
            "Delete the disk, then the PV. The operator runs here (this finding is its \
             VolumeLeftover): deleting a PV whose reclaim policy is Retain leaves its VolumeDeleted \
             tombstone, which keeps the record of which disk was whose, so either order is safe; \
             disk first is safe without the operator too.",
        ),
        Origin::Scan => say(
            "Delete the disk first, then the PV. This finding came from a scan, not from an \
             operator's VolumeLeftover: nothing but the PV records which disk was whose (the PV \
             is the record), so it goes last, once the disk is gone.",
        ),
    }
}

/// Snapshot commands of the disk, for the data someone may still need.
fn snapshot_disk(cx: &Cx) -> Vec<Line> {
    let snap = snapshot_name(cx.name);
    let description = format!(
        "volume-leftovers: {} before abandoning it{}",
        cx.name,
        cx.s.claim
            .as_ref()
            .map_or(String::new(), |c| format!(" (claim {})", c.reference))
    );
    match &cx.disk {
        Disk::Rbd { cluster_id, .. } => {
            let mut lines = vec![say(format!(
                "Snapshot the image{}, as a Ceph user allowed to write to the pool (the census's \
                 user is read-only):",
                cluster_id.as_deref().map_or(String::new(), |c| format!(
                    " on the Ceph cluster ceph-csi calls {c}"
                ))
            ))];
            lines.push(run(format!(
                "rbd snap create {}",
                quote(&format!("{}@{snap}", rbd_spec(cx)))
            )));
            lines.push(say(
                "An RBD snapshot lives in its image: it survives the trash below, not a purge. \
                 To keep the data past one, export it:",
            ));
            lines.push(run(format!(
                "rbd export {} {}",
                quote(&format!("{}@{snap}", rbd_spec(cx))),
                quote(&format!("{}.img", cx.name))
            )));
            lines
        }
        Disk::Gce { .. } => vec![
            say("Snapshot the disk:"),
            run(format!(
                "gcloud compute snapshots create {} {} {} {}",
                quote(&snap),
                flag("--source-disk", &gce_name(cx)),
                gce_where(cx, "source-disk-"),
                flag("--description", &description)
            )),
        ],
        Disk::Ebs { id, region, .. } => vec![
            say("Snapshot the volume, and wait until the snapshot is complete:"),
            run(format!(
                "aws ec2 create-snapshot {} {} {} --query SnapshotId --output text",
                opt("--volume-id", &cx.or(id.as_deref(), "volume-id")),
                opt("--region", &cx.or(region.as_deref(), "region")),
                opt("--description", &description)
            )),
            run(format!(
                "aws ec2 wait snapshot-completed {} {}",
                opt("--snapshot-ids", &ask("snapshot id printed above")),
                opt("--region", &cx.or(region.as_deref(), "region"))
            )),
        ],
        Disk::Azure { resource_group, .. } => vec![
            say("Snapshot the disk (an incremental snapshot, in the disk's resource group):"),
            run(format!(
                "az snapshot create {} {} {} --incremental true {}",
                opt(
                    "--resource-group",
                    &cx.or(resource_group.as_deref(), "resource-group")
                ),
                opt("--name", &snap),
                opt("--source", &azure_id(cx)),
                opt("--tags", &format!("note={description}"))
            )),
        ],
        Disk::Other => vec![say(
            "Snapshot it with the storage system's own tools, or its CSI driver's (a \
             VolumeSnapshot of a claim bound to it, where the driver supports snapshots).",
        )],
    }
}

/// The delete commands of the disk.
fn delete_disk(cx: &Cx) -> Vec<Line> {
    match &cx.disk {
        Disk::Rbd { .. } => vec![
            say(
                "Move the image to the pool's trash (restorable with `rbd trash restore` until \
                 purged):",
            ),
            run(format!("rbd trash mv {}", quote(&rbd_spec(cx)))),
            say(
                "Or remove it for good (an image with snapshots cannot be removed: purge them \
                 first, the one above included):",
            ),
            run(format!("rbd snap purge {}", quote(&rbd_spec(cx)))),
            run(format!("rbd rm {}", quote(&rbd_spec(cx)))),
        ],
        Disk::Gce { .. } => vec![run(format!(
            "gcloud compute disks delete {} {}",
            quote(&gce_name(cx)),
            gce_where(cx, "")
        ))],
        Disk::Ebs { id, region, .. } => vec![run(format!(
            "aws ec2 delete-volume {} {}",
            opt("--volume-id", &cx.or(id.as_deref(), "volume-id")),
            opt("--region", &cx.or(region.as_deref(), "region"))
        ))],
        Disk::Azure { .. } => vec![run(format!(
            "az disk delete {}",
            opt("--ids", &azure_id(cx))
        ))],
        Disk::Other => vec![say(
            "Delete the disk with the storage system's own tools: the finding records no more of \
             it than the source above.",
        )],
    }
}

/// For a disk of another backend under a Released CSI PV: the driver's own delete, instead of
/// deleting the disk and the PV by hand.
fn driver_delete(cx: &Cx) -> Vec<Line> {
    let csi = cx.s.source.kind == "csi";
    if !(matches!(cx.disk, Disk::Other) && csi && cx.pv.is_some() && cx.s.phase == "Released") {
        return Vec::new();
    }
    vec![
        say(format!(
            "Or, instead of both deletes, let the CSI driver delete the disk, if it provisioned \
             it (the PV's annotation pv.kubernetes.io/provisioned-by names {}): the provisioner \
             deletes a Released PV whose reclaim policy is Delete, disk first, then the PV. Only \
             after the snapshot:",
            cx.s.source.driver.as_deref().unwrap_or("the driver")
        )),
        patch_pv(
            &cx.pv_name(),
            serde_json::json!({"spec": {"persistentVolumeReclaimPolicy": "Delete"}}),
        ),
    ]
}

/// What shows who uses a disk right now.
fn in_use(cx: &Cx) -> Vec<Line> {
    match &cx.disk {
        Disk::Rbd { .. } => vec![run(format!("rbd status {}", quote(&rbd_spec(cx))))],
        Disk::Gce { .. } => vec![run(format!(
            "gcloud compute disks describe {} {} {}",
            quote(&gce_name(cx)),
            gce_where(cx, ""),
            flag("--format", "value(users)")
        ))],
        Disk::Ebs { id, region, .. } => vec![run(format!(
            "aws ec2 describe-volumes {} {} {}",
            opt("--volume-ids", &cx.or(id.as_deref(), "volume-id")),
            opt("--region", &cx.or(region.as_deref(), "region")),
            opt("--query", "Volumes[0].Attachments")
        ))],
        Disk::Azure { .. } => vec![run(format!(
            "az disk show {} {}",
            opt("--ids", &azure_id(cx)),
            opt("--query", "{managedBy: managedBy, diskState: diskState}")
        ))],
        Disk::Other => Vec::new(),
    }
}

/// The Azure disk's resource id, or a placeholder.
fn azure_id(cx: &Cx) -> String {
    match &cx.disk {
        Disk::Azure { id, .. } => cx.or(id.as_deref(), "disk-id"),
        _ => String::new(),
    }
}

fn gce_name(cx: &Cx) -> String {
    match &cx.disk {
        Disk::Gce { name, .. } => cx.or(name.as_deref(), "disk"),
        _ => String::new(),
    }
}

/// A snapshot name every backend takes (GCE's is the strictest: a lower-case letter, then
/// letters, digits and hyphens, at most 63, not ending in a hyphen).
fn snapshot_name(of: &str) -> String {
    let clean: String = of
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let mut name = format!("vl-{clean}");
    name.truncate(63);
    name.trim_end_matches('-').to_string()
}

/// The warnings about the disk itself: in use, maybe another cluster's.
fn disk_warnings(cx: &Cx) -> Vec<Line> {
    let mut lines = Vec::new();
    if cx.has(Hint::OwnerUnknown) {
        lines.push(warn(
            "Nothing on the disk says it is this cluster's: it may be another cluster's sharing \
             the pool, project or account. Find its owner (its labels or tags, its creation) \
             before reusing or deleting it.",
        ));
    }
    if cx.has(Hint::DiskInUse) {
        lines.push(warn(
            "It is in use right now (attached, or open by a client): do not delete it, and \
             find out who uses it first:",
        ));
        lines.extend(in_use(cx));
    }
    lines
}

// --- a finding about a live PV ------------------------------------------------------------------

fn volume(cx: &Cx) -> Vec<Block> {
    let pv = cx.pv_name();
    let s = cx.s;
    let mut first = Vec::new();
    let reclaim = s.reclaim_policy.as_str();
    if !reclaim.is_empty() && reclaim != "Retain" {
        let what = match reclaim {
            "Delete" => {
                "the provisioner deletes the disk once the PV is released, and has not here \
                 (its delete hung or failed, or is about to run)"
            }
            "Recycle" => "the recycler wipes the volume once it is released",
            _ => "the PV controller treats it as it treats no Retain volume",
        };
        first.push(warn(format!(
            "Its reclaim policy is {reclaim}: {what}. Set Retain first, whichever you choose, so \
             that nothing deletes or wipes the disk behind your back (and a reused volume does \
             not go with its next claim):"
        )));
        first.push(retain_patch(&pv));
    }
    if cx.has(Hint::VolumeTerminating) {
        first.push(warn(
            "The PV is being deleted (deletionTimestamp set, held by finalizers): no patch stops \
             that, so it cannot be reused. Look at what holds it; once it is gone, a Retain \
             volume's finding becomes its VolumeDeleted tombstone (explain that then):",
        ));
        first.push(run(format!(
            "kubectl get pv {} {}",
            quote(&pv),
            quote("-o=jsonpath={.metadata.deletionTimestamp} {.metadata.finalizers}")
        )));
    }
    if s.phase == "Bound" {
        first.push(warn(
            "The PV is Bound: the PV controller should have released it once its claim went. \
             Until it does, a patch races with the controller.",
        ));
    }
    let (ns, claim) = (cx.claim_ns(), cx.claim_name());
    let look_claim = |jsonpath: &str| {
        run(format!(
            "kubectl get pvc -n {} {} {}",
            quote(&cx.or(ns, "namespace")),
            quote(&cx.or(claim, "claim")),
            quote(&format!("-o=jsonpath={jsonpath}"))
        ))
    };
    match s.reason {
        Reason::ClaimStillPresent => {
            first.push(warn(format!(
                "Its claim {} still exists with the uid the PV names: its delete has not \
                 completed. Change nothing on the PV or the disk until it is gone; look at what \
                 holds it:",
                s.claim.as_ref().map_or("", |c| c.reference.as_str())
            )));
            first.push(look_claim(
                "{.metadata.deletionTimestamp} {.metadata.finalizers}",
            ));
        }
        Reason::ClaimUnknown => {
            first.push(warn(
                "Whether its claim still exists is not known: claims could not be read. Look \
                 yourself before choosing, and compare the uid with the PV's:",
            ));
            first.push(look_claim("{.metadata.uid}"));
            first.push(say(format!(
                "NotFound: the claim is gone, reuse as below. Another uid than {}: a new claim of \
                 that name, which binds the volume once the uid is removed (as for \
                 ClaimRecreated). The same uid: the claim still exists, wait for its delete.",
                cx.or(cx.claim_uid(), "claim-uid")
            )));
        }
        Reason::ClaimRecreated => first.push(say(format!(
            "A new claim of that name exists (uid {}) and stays Pending while the PV's claimRef \
             names the old uid {}.",
            s.claim
                .as_ref()
                .and_then(|c| c.current_uid.as_deref())
                .unwrap_or("?"),
            cx.or(cx.claim_uid(), "claim-uid")
        ))),
        Reason::ClaimRefInvalid => {
            first.push(say(
                "Its claimRef does not identify a claim (see the hints). What it says:",
            ));
            first.push(run(format!(
                "kubectl get pv {} {}",
                quote(&pv),
                quote("-o=jsonpath={.spec.claimRef}")
            )));
        }
        Reason::ReclaimFailed => {
            first.push(say(format!(
                "Its {} reclaim failed{}. Find why in the controller's (or provisioner's) \
                 logs, and the PV's events:",
                if reclaim.is_empty() { "?" } else { reclaim },
                s.phase_message
                    .as_deref()
                    .map_or(String::new(), |m| format!(": {m}"))
            )));
            first.push(run(format!("kubectl describe pv {}", quote(&pv))));
        }
        _ => {}
    }
    if cx.has(Hint::StorageClassMissing) {
        first.push(say(format!(
            "Its StorageClass {} no longer exists: a claim still binds the volume by that name, \
             but nothing provisions for it.",
            cx.class().unwrap_or("?")
        )));
    }
    first.extend(disk_warnings(cx));

    let reuse = reuse_volume(cx, &pv);
    let abandon = if s.reason == Reason::ClaimStillPresent {
        block(
            Choice::Abandon,
            "not yet",
            vec![say(
                "Not while the claim exists. Once it is gone, this finding becomes ClaimDeleted \
                 (Retain); explain it again then.",
            )],
        )
    } else {
        abandon_volume(cx, &pv)
    };
    vec![
        block(Choice::First, "what makes a choice unsafe here", first),
        reuse,
        abandon,
        keep(cx, Some(("pv", pv.clone()))),
    ]
}

fn reuse_volume(cx: &Cx, pv: &str) -> Block {
    let s = cx.s;
    let (ns, claim) = (cx.claim_ns(), cx.claim_name());
    let mut lines = Vec::new();
    let available_then_claim = |lines: &mut Vec<Line>, claim_ns: &str, claim_name: &str| {
        lines.push(say(
            "1. Remove the claimRef: the PV controller makes the volume Available (the finding \
             clears).",
        ));
        lines.push(remove_claim_ref(pv));
        lines.push(say(format!(
            "2. Create the claim that should have it, naming the volume (until it exists, any \
             claim of class {} that fits may bind the Available volume: create it right away; \
             change the namespace and name for another claim):",
            cx.class().unwrap_or("\"\"")
        )));
        lines.push(claim_manifest(cx, claim_ns, claim_name, pv));
    };
    let title = match s.reason {
        Reason::ClaimStillPresent => {
            lines.push(say(
                "Not while the claim exists: the PV controller releases the volume only once the \
                 claim is gone. Explain it again then.",
            ));
            "not yet"
        }
        Reason::ClaimRecreated => {
            lines.push(say(format!(
                "Remove the old uid (and resourceVersion) from the claimRef: the volume is then \
                 pre-bound to {}, and the new claim binds it if its request fits (class {}, at \
                 most {}, access modes {}):",
                s.claim.as_ref().map_or("?", |c| c.reference.as_str()),
                cx.class().unwrap_or("\"\""),
                s.capacity.as_deref().unwrap_or("?"),
                s.access_modes.join(", ")
            )));
            lines.push(remove_claim_uid(pv));
            lines.push(say("Then see it bind:"));
            lines.push(run(format!(
                "kubectl get pvc -n {} {}",
                quote(&cx.or(ns, "namespace")),
                quote(&cx.or(claim, "claim"))
            )));
            "let the new claim bind the volume"
        }
        Reason::PreboundClaimMissing => {
            let (n, c) = (cx.or(ns, "namespace"), cx.or(claim, "claim"));
            lines.push(say(format!(
                "It waits for the claim {n}/{c}: create it, naming the volume:"
            )));
            lines.push(claim_manifest(cx, &n, &c, pv));
            lines.push(say("Or free it for another claim: remove the claimRef."));
            lines.push(remove_claim_ref(pv));
            "create the claim it waits for"
        }
        Reason::ReleasedWithoutClaim => {
            lines.push(say(
                "It has no claimRef: the PV controller normally makes such a volume Available at \
                 once, and has not (is kube-controller-manager's PV binder running?). Once it is \
                 Available, a claim naming it binds it:",
            ));
            lines.push(claim_manifest(cx, &ask("namespace"), &ask("claim"), pv));
            "create a claim naming it"
        }
        Reason::ClaimUnknown => {
            let (n, c) = (cx.or(ns, "namespace"), cx.or(claim, "claim"));
            lines.push(say(
                "If the claim is gone (look first, above): as for ClaimDeleted.",
            ));
            available_then_claim(&mut lines, &n, &c);
            lines.push(say(
                "If a claim of that name exists with another uid: remove only the uid, and it \
                 binds the volume.",
            ));
            lines.push(remove_claim_uid(pv));
            "let a claim bind the volume again"
        }
        Reason::ClaimDeleted
        | Reason::ClaimRefInvalid
        | Reason::BoundClaimMissing
        | Reason::ReclaimFailed => {
            let (n, c) = match (ns, claim) {
                (Some(n), Some(c)) if s.reason != Reason::ClaimRefInvalid => {
                    (n.to_string(), c.to_string())
                }
                _ => (ask("namespace"), ask("claim")),
            };
            available_then_claim(&mut lines, &n, &c);
            if s.reason == Reason::ClaimDeleted {
                lines.push(say(format!(
                    "Or keep it for {n}/{c} alone instead of step 1: remove only the uid, and the \
                     volume waits, pre-bound, for a claim of that name (PreboundClaimMissing if \
                     none comes):"
                )));
                lines.push(remove_claim_uid(pv));
            }
            "let a claim bind the volume again"
        }
        // Not a live PV's reason: `volume` is not called for them.
        Reason::VolumeDeleted
        | Reason::ExpansionStuck
        | Reason::DiskSizeMismatch
        | Reason::DiskWithoutVolume
        | Reason::VolumeWithoutDisk
        | Reason::SnapshotDeleted
        | Reason::SnapshotRecreated
        | Reason::SnapshotDeleteStuck
        | Reason::ContentNeverBound
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted
        | Reason::SnapshotWithoutContent => "",
    };
    if cx.has(Hint::VolumeTerminating) {
        lines.insert(
            0,
            warn("The PV is being deleted: reuse is not possible (see above)."),
        );
    }
    block(Choice::Reuse, title, lines)
}

fn abandon_volume(cx: &Cx, pv: &str) -> Block {
    let mut lines = vec![say(
        "1. Record what the PV says (its claim, its disk, its capacity): the record of whose disk \
         this is.",
    )];
    lines.push(record("pv", pv, None, &format!("{pv}.pv.yaml")));
    lines.extend(record_finding(cx));
    lines.push(say("2. Keep the data someone may still need."));
    lines.extend(snapshot_disk(cx));
    lines.push(say("3. Delete the disk and the PV."));
    lines.push(disk_then_pv(cx));
    lines.extend(delete_disk(cx));
    lines.push(run(format!("kubectl delete pv {}", quote(pv))));
    lines.extend(driver_delete(cx));
    if cx.s.reason == Reason::ClaimRecreated {
        lines.push(say(format!(
            "The new claim {} stays Pending (or binds another volume): tell its owner.",
            cx.s.claim.as_ref().map_or("?", |c| c.reference.as_str())
        )));
    }
    if cx.origin == Origin::Operator {
        lines.push(say(
            "A Retain PV deleted leaves its VolumeDeleted tombstone: with the census it closes \
             once two listings no longer find the disk; without it, acknowledge it with the \
             ticket (below), which ends it.",
        ));
    }
    block(Choice::Abandon, "record, snapshot, delete", lines)
}

// --- a deleted PV's tombstone ---------------------------------------------------------------------

fn tombstone(cx: &Cx) -> Vec<Block> {
    let mut first = vec![say(
        "The PV was deleted; its disk was not (reclaim policy Retain or Recycle, or a failed \
         delete). This object is the last record of which disk was whose. Without the census, \
         nothing has checked that the disk still exists: look first.",
    )];
    first.extend(look_disk(cx));
    first.extend(disk_warnings(cx));
    let pv = cx.pv_name();
    let mut reuse = vec![say(
        "Re-create a PV for the disk from the record, pre-bound to its claim (reclaim policy \
         Retain), then the claim:",
    )];
    let (n, c) = (
        cx.or(cx.claim_ns(), "namespace"),
        cx.or(cx.claim_name(), "claim"),
    );
    reuse.extend(pv_manifest(cx, &pv, Some((&n, &c))));
    reuse.push(claim_manifest(cx, &n, &c, &pv));
    let mut abandon = vec![say("1. Record it:")];
    abandon.extend(record_finding(cx));
    abandon.push(say("2. Keep the data someone may still need."));
    abandon.extend(snapshot_disk(cx));
    abandon.push(say(
        "3. Delete the disk. The PV is already gone: this tombstone is the record, so \
         acknowledge it (below) only once the disk is deleted.",
    ));
    abandon.extend(delete_disk(cx));
    vec![
        block(Choice::First, "is the disk still there?", first),
        block(Choice::Reuse, "a PV for the disk again", reuse),
        block(
            Choice::Abandon,
            "record, snapshot, delete the disk",
            abandon,
        ),
        keep(cx, None),
    ]
}

/// What shows that the disk exists.
fn look_disk(cx: &Cx) -> Vec<Line> {
    match &cx.disk {
        Disk::Rbd { .. } => vec![run(format!("rbd info {}", quote(&rbd_spec(cx))))],
        Disk::Gce { .. } => vec![run(format!(
            "gcloud compute disks describe {} {}",
            quote(&gce_name(cx)),
            gce_where(cx, "")
        ))],
        Disk::Ebs { id, region, .. } => vec![run(format!(
            "aws ec2 describe-volumes {} {}",
            opt("--volume-ids", &cx.or(id.as_deref(), "volume-id")),
            opt("--region", &cx.or(region.as_deref(), "region"))
        ))],
        Disk::Azure { .. } => vec![run(format!("az disk show {}", opt("--ids", &azure_id(cx))))],
        Disk::Other => Vec::new(),
    }
}

/// The CSI source of a PV for a disk.
struct Csi {
    driver: String,
    handle: String,
    attributes: Vec<(&'static str, String)>,
    /// The node-affinity key and the zones the disk can be attached in.
    affinity: Option<(&'static str, Vec<String>)>,
}

/// A PV for the disk, for its CSI driver, as a here-document for `kubectl create`; with
/// `claim`, pre-bound to it. A sentence instead for a source that has no CSI driver here.
fn pv_manifest(cx: &Cx, pv: &str, claim: Option<(&str, &str)>) -> Vec<Line> {
    let s = cx.s;
    let src = &s.source;
    let mut notes = Vec::new();
    let Csi {
        driver,
        handle,
        attributes,
        affinity,
    } = match &cx.disk {
        Disk::Rbd {
            cluster_id,
            pool,
            namespace,
            image,
            ..
        } => {
            let driver = match (src.kind.as_str(), &src.driver) {
                ("csi", Some(d)) => d.clone(),
                _ => crate::model::csi::RBD_CSI_DRIVER.to_string(),
            };
            let mut attrs = vec![("clusterID", cx.or(cluster_id.as_deref(), "clusterID"))];
            attrs.push(("pool", cx.or(pool.as_deref(), "pool")));
            if let Some(ns) = namespace {
                attrs.push(("radosNamespace", ns.clone()));
            }
            let ceph_csi_handle = src
                .volume_handle
                .as_deref()
                .filter(|h| src.kind == "csi" && parse_volume_handle(h).is_ok());
            let handle = match ceph_csi_handle {
                // ceph-csi finds the image of its own handle in the pool's journal.
                Some(h) => {
                    attrs.push(("imageName", cx.or(image.as_deref(), "image")));
                    h.to_string()
                }
                // A static volume: the handle is the image's name.
                None => {
                    attrs.push(("staticVolume", "true".into()));
                    attrs.push(("imageFeatures", ask("image features, from rbd info")));
                    cx.or(image.as_deref(), "image")
                }
            };
            notes.push(say("ceph-csi needs the secrets its StorageClass named \
                     (csi.storage.k8s.io/node-stage-secret-name and -namespace): the record does \
                     not have them."));
            Csi {
                driver,
                handle,
                attributes: attrs,
                affinity: None,
            }
        }
        Disk::Gce {
            project,
            zone,
            region,
            replica_zones,
            name,
        } => {
            let project = cx.or(project.as_deref(), "project");
            let name = cx.or(name.as_deref(), "disk");
            let (handle, zones) = match (zone, region) {
                (_, Some(r)) => (
                    format!("projects/{project}/regions/{r}/disks/{name}"),
                    replica_zones.clone(),
                ),
                (Some(z), None) => (
                    format!("projects/{project}/zones/{z}/disks/{name}"),
                    vec![z.clone()],
                ),
                (None, None) => {
                    let z = cx.or(None, "zone");
                    (
                        format!("projects/{project}/zones/{z}/disks/{name}"),
                        vec![z],
                    )
                }
            };
            let affinity = (!zones.is_empty()).then_some(("topology.gke.io/zone", zones));
            Csi {
                driver: GCE_PD_CSI_DRIVER.to_string(),
                handle,
                attributes: Vec::new(),
                affinity,
            }
        }
        Disk::Azure { zone, .. } => Csi {
            driver: crate::model::csi::AZURE_DISK_CSI_DRIVER.to_string(),
            handle: azure_id(cx),
            attributes: Vec::new(),
            affinity: zone
                .clone()
                .map(|z| ("topology.disk.csi.azure.com/zone", vec![z])),
        },
        Disk::Ebs { id, zone, .. } => Csi {
            driver: EBS_CSI_DRIVER.to_string(),
            handle: cx.or(id.as_deref(), "volume-id"),
            attributes: Vec::new(),
            affinity: Some((
                "topology.kubernetes.io/zone",
                vec![cx.or(zone.as_deref(), "zone")],
            )),
        },
        Disk::Other => match (src.kind.as_str(), &src.driver, &src.volume_handle) {
            ("csi", Some(d), Some(h)) => {
                notes.push(say(format!(
                    "{d}'s volumeAttributes and secrets are not in the record: copy them \
                         from a PV of the same class."
                )));
                Csi {
                    driver: d.clone(),
                    handle: h.clone(),
                    attributes: Vec::new(),
                    affinity: None,
                }
            }
            _ => {
                return vec![say(format!(
                    "A {} volume: re-create it as it was, from the record (`kubectl get vl {} \
                         -o yaml` has everything the PV said).",
                    src.kind, cx.name
                ))];
            }
        },
    };
    let mut yaml_text = format!(
        "kubectl create -f - <<'EOF'\n\
         apiVersion: v1\n\
         kind: PersistentVolume\n\
         metadata:\n  \
           name: {}\n\
         spec:\n  \
           capacity:\n    \
             storage: {}\n  \
           accessModes: [{}]\n  \
           volumeMode: {}\n  \
           persistentVolumeReclaimPolicy: Retain\n  \
           storageClassName: {}\n",
        yaml(pv),
        yaml(&cx.or(s.capacity.as_deref(), "size")),
        access_modes(cx),
        yaml(&nonempty(Some(&s.volume_mode)).unwrap_or_else(|| "Filesystem".into())),
        cx.class().map_or("\"\"".to_string(), yaml),
    );
    if let Some((n, c)) = claim {
        yaml_text.push_str(&format!(
            "  claimRef:\n    namespace: {}\n    name: {}\n",
            yaml(n),
            yaml(c)
        ));
    }
    yaml_text.push_str(&format!(
        "  csi:\n    driver: {}\n    volumeHandle: {}\n",
        yaml(&driver),
        yaml(&handle)
    ));
    if !attributes.is_empty() {
        yaml_text.push_str("    volumeAttributes:\n");
        for (k, v) in &attributes {
            yaml_text.push_str(&format!("      {k}: {}\n", yaml(v)));
        }
    }
    if matches!(cx.disk, Disk::Rbd { .. }) {
        yaml_text.push_str(&format!(
            "    nodeStageSecretRef:\n      name: {}\n      namespace: {}\n",
            yaml(&ask("node-stage-secret-name")),
            yaml(&ask("node-stage-secret-namespace"))
        ));
    }
    if let Some((key, zones)) = affinity {
        let zones: Vec<String> = zones.iter().map(|z| yaml(z)).collect();
        yaml_text.push_str(&format!(
            "  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      - matchExpressions:\n        - key: {key}\n          operator: In\n          values: [{}]\n",
            zones.join(", ")
        ));
    }
    yaml_text.push_str("EOF");
    let mut lines = notes;
    lines.push(run(yaml_text));
    lines
}

// --- the census's disk findings -------------------------------------------------------------------

fn without_disk(cx: &Cx) -> Vec<Block> {
    let s = cx.s;
    let pv = cx.pv_name();
    let mut first = vec![warn(
        "The disk this PV names is gone from its backend (two listings in a row did not find it).",
    )];
    if s.phase == "Bound" {
        first.push(warn(format!(
            "The PV is Bound{}: its data is lost unless the disk is restored, and pods using the \
             claim cannot mount it.",
            s.claim
                .as_ref()
                .map_or(String::new(), |c| format!(" to {}", c.reference))
        )));
    }
    let mut reuse = Vec::new();
    let trash = cx.has(Hint::DiskInTrash);
    match &cx.disk {
        Disk::Rbd {
            pool, namespace, ..
        } if trash => {
            let pool = match namespace {
                Some(ns) => format!("{}/{ns}", cx.or(pool.as_deref(), "pool")),
                None => cx.or(pool.as_deref(), "pool"),
            };
            reuse.push(say(format!(
                "It is in the pool's trash: find the id of {} there and restore it (under its \
                 name):",
                image_name(cx)
            )));
            reuse.push(run(format!("rbd trash ls --long {}", quote(&pool))));
            reuse.push(run(format!(
                "rbd trash restore {}",
                quote(&format!("{pool}/{}", ask("image id from the list")))
            )));
        }
        Disk::Rbd { .. } => reuse.push(say(
            "Restore the image, under the same pool and name, from your Ceph backups (an RBD \
             image's snapshots went with it).",
        )),
        Disk::Gce { .. } => {
            reuse.push(say(
                "Find a snapshot of the disk, and create the disk again from it, under the same \
                 name and location (the PV names the disk by them):",
            ));
            reuse.push(run(format!(
                "gcloud compute snapshots list {} {}",
                flag(
                    "--project",
                    &cx.or(
                        match &cx.disk {
                            Disk::Gce { project, .. } => project.as_deref(),
                            _ => None,
                        },
                        "project"
                    )
                ),
                flag("--filter", &format!("sourceDisk~/disks/{}$", gce_name(cx)))
            )));
            reuse.push(run(format!(
                "gcloud compute disks create {} {} {}",
                quote(&gce_name(cx)),
                flag("--source-snapshot", &ask("snapshot")),
                gce_where(cx, "")
            )));
        }
        Disk::Ebs { id, zone, region } => {
            let region = cx.or(region.as_deref(), "region");
            reuse.push(say(
                "Find a snapshot of the volume, and create a volume from it in the same zone:",
            ));
            reuse.push(run(format!(
                "aws ec2 describe-snapshots {} {}",
                opt("--region", &region),
                opt(
                    "--filters",
                    &format!(
                        "Name=volume-id,Values={}",
                        cx.or(id.as_deref(), "volume-id")
                    )
                )
            )));
            reuse.push(run(format!(
                "aws ec2 create-volume {} {} {}",
                opt("--snapshot-id", &ask("snapshot")),
                opt("--availability-zone", &cx.or(zone.as_deref(), "zone")),
                opt("--region", &region)
            )));
            reuse.push(say(
                "The new volume has a new id: the PV names the old one, and a PV's source cannot \
                 be changed. Record this PV, delete it (below) and create one naming the new id.",
            ));
        }
        Disk::Azure {
            name,
            resource_group,
            ..
        } => {
            let rg = cx.or(resource_group.as_deref(), "resource-group");
            reuse.push(say(
                "Find a snapshot of the disk, and create the disk from it under the same name and \
                 resource group (the PV names it by its resource id):",
            ));
            reuse.push(run(format!(
                "az snapshot list {} {}",
                opt("--resource-group", &rg),
                opt(
                    "--query",
                    &format!("[?creationData.sourceResourceId=='{}'].id", azure_id(cx))
                )
            )));
            reuse.push(run(format!(
                "az disk create {} {} {}",
                opt("--resource-group", &rg),
                opt("--name", &cx.or(name.as_deref(), "disk")),
                opt("--source", &ask("snapshot id"))
            )));
        }
        Disk::Other => reuse.push(say(
            "Restore the disk from the storage system's backups, under what the PV names.",
        )),
    }
    let mut abandon = vec![say("1. Record what the PV says:")];
    abandon.push(record("pv", &pv, None, &format!("{pv}.pv.yaml")));
    abandon.extend(record_finding(cx));
    abandon.push(say(
        "2. Delete the dangling claim and PV. The disk is already gone: no record of it can be \
         lost, whatever the order.",
    ));
    if let (Some(n), Some(c)) = (cx.claim_ns(), cx.claim_name())
        && s.phase == "Bound"
    {
        abandon.push(run(format!(
            "kubectl delete pvc -n {} {}",
            quote(n),
            quote(c)
        )));
    }
    abandon.push(run(format!("kubectl delete pv {}", quote(&pv))));
    if cx.origin == Origin::Operator {
        abandon.push(say(
            "The PV's tombstone then closes at once (its disk is gone), unless the disk sits in \
             the RBD trash.",
        ));
    }
    vec![
        block(Choice::First, "the disk is gone", first),
        block(Choice::Reuse, "restore the disk", reuse),
        block(Choice::Abandon, "delete the dangling PV", abandon),
        keep(cx, Some(("pv", pv))),
    ]
}

fn image_name(cx: &Cx) -> String {
    match &cx.disk {
        Disk::Rbd { image, .. } => cx.or(image.as_deref(), "image"),
        _ => String::new(),
    }
}

fn without_volume(cx: &Cx) -> Vec<Block> {
    let s = cx.s;
    let owner = s.image.as_ref().and_then(|i| i.owner.as_ref());
    let mut first = disk_warnings(cx);
    if let Some(o) = owner {
        let mut said = Vec::new();
        if let Some(v) = &o.volume_name {
            said.push(format!("PV {v}"));
        }
        if let (Some(n), Some(c)) = (&o.claim_namespace, &o.claim_name) {
            said.push(format!("claim {n}/{c}"));
        }
        if let Some(c) = &o.cluster_name {
            said.push(format!("cluster {c}"));
        }
        if !said.is_empty() {
            first.push(say(format!(
                "The provisioner recorded it for {}.",
                said.join(", ")
            )));
        }
    }
    let tags = s.image.as_ref().map(|i| &i.tags).filter(|t| !t.is_empty());
    if let Some(t) = tags {
        let t: Vec<String> = t.iter().map(|(k, v)| format!("{k}={v}")).collect();
        first.push(say(format!("Its labels or tags: {}.", t.join(", "))));
    }
    let pv =
        nonempty(owner.and_then(|o| o.volume_name.as_deref())).unwrap_or_else(|| ask("pv-name"));
    let (n, c) = match owner.map(|o| (&o.claim_namespace, &o.claim_name)) {
        Some((Some(n), Some(c))) => (n.clone(), c.clone()),
        _ => (ask("namespace"), ask("claim")),
    };
    let mut reuse = vec![say(
        "No PV names it: create one for its CSI driver (a static PV, reclaim policy Retain), \
         pre-bound to the claim that should have it, then that claim:",
    )];
    reuse.extend(pv_manifest(cx, &pv, Some((&n, &c))));
    reuse.push(claim_manifest(cx, &n, &c, &pv));
    let mut abandon = vec![match cx.origin {
        Origin::Operator => {
            say("1. Record it: no PV names this disk, so this finding is its only record.")
        }
        Origin::Scan => say(
            "1. Record it: no PV names this disk, and no object holds this finding: keep this \
             output with your ticket.",
        ),
    }];
    abandon.extend(record_finding(cx));
    abandon.push(say("2. Keep the data someone may still need."));
    abandon.extend(snapshot_disk(cx));
    abandon.push(say("3. Delete the disk (there is no PV to delete):"));
    abandon.extend(delete_disk(cx));
    if cx.origin == Origin::Operator {
        abandon.push(say(
            "The finding goes once a listing of the census no longer has the disk.",
        ));
    }
    vec![
        block(Choice::First, "whose disk is it?", first),
        block(Choice::Reuse, "a PV for the disk", reuse),
        block(
            Choice::Abandon,
            "record, snapshot, delete the disk",
            abandon,
        ),
        keep(cx, None),
    ]
}

// --- snapshots ------------------------------------------------------------------------------------

/// A backend snapshot, as far as the finding says.
enum BackendSnapshot {
    Gce {
        project: Option<String>,
        name: Option<String>,
    },
    Ebs {
        id: Option<String>,
        region: Option<String>,
    },
    /// An Azure snapshot, by its resource id.
    Azure { id: Option<String> },
    /// Another driver's (ceph-csi's among them): its handle is the driver's own.
    Other,
}

fn backend_snapshot_of(cx: &Cx) -> BackendSnapshot {
    let handle = cx.snapshot().and_then(|sn| sn.snapshot_handle.as_deref());
    let image = cx.s.image.as_ref();
    let region = image.and_then(|i| nonempty(i.region.as_deref()));
    let named = handle.and_then(|h| cx.backends.iter().find_map(|b| b.snapshot_ref(h)));
    match named {
        // GCE's part: the project.
        Some(r) if r.backend().csi_driver() == GCE_PD_CSI_DRIVER => BackendSnapshot::Gce {
            project: r.part(0).map(str::to_string),
            name: Some(r.name().to_string()),
        },
        Some(r) if r.backend().csi_driver() == EBS_CSI_DRIVER => BackendSnapshot::Ebs {
            id: Some(r.name().to_string()),
            region,
        },
        Some(r) if r.backend().csi_driver() == crate::model::csi::AZURE_DISK_CSI_DRIVER => {
            BackendSnapshot::Azure {
                id: handle.map(str::to_string),
            }
        }
        Some(_) => BackendSnapshot::Other,
        None => match cx.s.source.driver.as_deref() {
            Some(GCE_PD_CSI_DRIVER) => BackendSnapshot::Gce {
                project: image.and_then(|i| nonempty(i.account.as_deref())),
                name: image.and_then(|i| nonempty(Some(&i.name))),
            },
            Some(EBS_CSI_DRIVER) => BackendSnapshot::Ebs {
                id: image.and_then(|i| nonempty(Some(&i.name))),
                region,
            },
            Some(crate::model::csi::AZURE_DISK_CSI_DRIVER) => BackendSnapshot::Azure {
                id: image.and_then(|i| {
                    Some(format!(
                        "/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/snapshots/{}",
                        nonempty(i.account.as_deref())?,
                        nonempty(i.resource_group.as_deref())?,
                        nonempty(Some(&i.name))?
                    ))
                }),
            },
            _ => BackendSnapshot::Other,
        },
    }
}

/// The delete command of the backend snapshot.
fn delete_backend_snapshot(cx: &Cx) -> Vec<Line> {
    match backend_snapshot_of(cx) {
        BackendSnapshot::Gce { project, name } => vec![run(format!(
            "gcloud compute snapshots delete {} {}",
            quote(&cx.or(name.as_deref(), "snapshot")),
            flag("--project", &cx.or(project.as_deref(), "project"))
        ))],
        BackendSnapshot::Ebs { id, region } => vec![run(format!(
            "aws ec2 delete-snapshot {} {}",
            opt("--snapshot-id", &cx.or(id.as_deref(), "snapshot-id")),
            opt("--region", &cx.or(region.as_deref(), "region"))
        ))],
        BackendSnapshot::Azure { id } => vec![run(format!(
            "az snapshot delete {}",
            opt("--ids", &cx.or(id.as_deref(), "snapshot-id"))
        ))],
        BackendSnapshot::Other => vec![say(format!(
            "Delete the backend snapshot {} with the storage system's own tools: the handle is \
             {}'s own{}.",
            cx.snapshot()
                .and_then(|sn| sn.snapshot_handle.as_deref())
                .unwrap_or("(not recorded)"),
            cx.s.source.driver.as_deref().unwrap_or("the CSI driver"),
            ceph_snapshot_image(cx)
        ))],
    }
}

/// For a ceph-csi snapshot handle: the RBD image that holds the snapshot.
fn ceph_snapshot_image(cx: &Cx) -> String {
    cx.snapshot()
        .and_then(|sn| sn.snapshot_handle.as_deref())
        .and_then(|h| parse_volume_handle(h).ok())
        .map_or(String::new(), |h| {
            format!(
                " (ceph-csi: the image {} in the pool with id {} of the cluster it calls {})",
                h.image_name_with_prefix(crate::model::csi::CSI_SNAPSHOT_PREFIX),
                h.pool_id,
                h.cluster_id
            )
        })
}

/// `(namespace, name)` of `namespace/name`.
fn split_ref(r: Option<&str>) -> (Option<&str>, Option<&str>) {
    match r.and_then(|r| r.split_once('/')) {
        Some((n, m)) => (Some(n), Some(m)),
        None => (None, None),
    }
}

/// A VolumeSnapshot of `namespace/name` bound to the content `content`, for `kubectl create`.
fn snapshot_manifest(cx: &Cx, namespace: &str, name: &str, content: &str) -> Line {
    let class = cx
        .snapshot()
        .and_then(|sn| sn.snapshot_class.as_deref())
        .map_or(String::new(), |c| {
            format!("  volumeSnapshotClassName: {}\n", yaml(c))
        });
    run(format!(
        "kubectl create -f - <<'EOF'\n\
         apiVersion: snapshot.storage.k8s.io/v1\n\
         kind: VolumeSnapshot\n\
         metadata:\n  \
           name: {}\n  \
           namespace: {}\n\
         spec:\n\
         {class}  \
           source:\n    \
             volumeSnapshotContentName: {}\n\
         EOF",
        yaml(name),
        yaml(namespace),
        yaml(content)
    ))
}

/// A VolumeSnapshotContent importing the backend snapshot, pre-bound to `namespace/name`.
fn content_manifest(cx: &Cx, content: &str, namespace: &str, name: &str) -> Line {
    let handle = cx.or(
        cx.snapshot().and_then(|sn| sn.snapshot_handle.as_deref()),
        "snapshot-handle",
    );
    let driver = cx.or(cx.s.source.driver.as_deref(), "driver");
    run(format!(
        "kubectl create -f - <<'EOF'\n\
         apiVersion: snapshot.storage.k8s.io/v1\n\
         kind: VolumeSnapshotContent\n\
         metadata:\n  \
           name: {}\n\
         spec:\n  \
           deletionPolicy: Retain\n  \
           driver: {}\n  \
           source:\n    \
             snapshotHandle: {}\n  \
           volumeSnapshotRef:\n    \
             namespace: {}\n    \
             name: {}\n\
         EOF",
        yaml(content),
        yaml(&driver),
        yaml(&handle),
        yaml(namespace),
        yaml(name)
    ))
}

/// The sentence on the order of the deletes of a backend snapshot and of its content.
fn snapshot_then_content(cx: &Cx) -> Line {
    match cx.origin {
        Origin::Operator => say(
            "Delete the backend snapshot, then the content. The operator runs here: deleting a \
             Retain content leaves its ContentDeleted tombstone, which keeps the record, so either \
             order is safe; backend snapshot first is safe without the operator too.",
        ),
        Origin::Scan => say(
            "Delete the backend snapshot first, then the content. This finding came from a scan: \
             nothing but the content records which snapshot was whose, so it goes last.",
        ),
    }
}

fn content(cx: &Cx) -> Vec<Block> {
    let s = cx.s;
    let sn = cx.snapshot();
    let content = cx.or(sn.and_then(|sn| sn.content.as_deref()), "content");
    let (ns, name) = split_ref(sn.and_then(|sn| sn.snapshot.as_deref()));
    let mut first = vec![say("What the content says now:")];
    first.push(run(format!(
        "kubectl get volumesnapshotcontent {} {}",
        quote(&content),
        quote("-o=jsonpath={.spec.volumeSnapshotRef} {.status.error}")
    )));
    let mut reuse = Vec::new();
    let reuse_title = match s.reason {
        Reason::SnapshotDeleteStuck => {
            first.push(warn(
                "Its deletionPolicy is Delete and its delete hung: the CSI driver's \
                 csi-snapshotter has not deleted the backend snapshot. Its logs say why.",
            ));
            reuse.push(say(
                "A content on its way out is not reused: restore from the backend snapshot \
                 directly if you need it, before it goes.",
            ));
            "not while it is being deleted"
        }
        Reason::ContentNeverBound => {
            let (n, m) = (cx.or(ns, "namespace"), cx.or(name, "snapshot"));
            reuse.push(say(format!(
                "Create the VolumeSnapshot it names, {n}/{m}, naming it back:"
            )));
            reuse.push(snapshot_manifest(cx, &n, &m, &content));
            "create the snapshot it waits for"
        }
        Reason::SnapshotDeleted | Reason::SnapshotRecreated => {
            // A Retain content bound to a gone snapshot.
            let recreated = s.reason == Reason::SnapshotRecreated;
            let n = cx.or(ns, "namespace");
            let m = if recreated {
                ask("new snapshot name")
            } else {
                cx.or(name, "snapshot")
            };
            reuse.push(say(format!(
                "The snapshot-controller never rebinds a content that names another uid: point \
                 its volumeSnapshotRef at {}, without the old uid, then create that \
                 VolumeSnapshot naming the content:",
                if recreated {
                    "a new name (the old one is taken by another snapshot)"
                } else {
                    "the snapshot of that name"
                }
            )));
            reuse.push(run(format!(
                "kubectl patch volumesnapshotcontent {} --type merge -p {}",
                quote(&content),
                quote(
                    &serde_json::json!({"spec": {"volumeSnapshotRef": {
                        "namespace": n, "name": m, "uid": null, "resourceVersion": null
                    }}})
                    .to_string()
                )
            )));
            reuse.push(snapshot_manifest(cx, &n, &m, &content));
            "bind a new VolumeSnapshot to it"
        }
        // Not a content's reason: `content` is not called for them.
        Reason::ClaimDeleted
        | Reason::ClaimRecreated
        | Reason::ClaimStillPresent
        | Reason::ClaimUnknown
        | Reason::ClaimRefInvalid
        | Reason::ReleasedWithoutClaim
        | Reason::BoundClaimMissing
        | Reason::PreboundClaimMissing
        | Reason::ReclaimFailed
        | Reason::ExpansionStuck
        | Reason::DiskSizeMismatch
        | Reason::VolumeDeleted
        | Reason::DiskWithoutVolume
        | Reason::VolumeWithoutDisk
        | Reason::SnapshotContentMissing
        | Reason::ContentDeleted
        | Reason::SnapshotWithoutContent => "",
    };
    let mut abandon = vec![say("1. Record it:")];
    abandon.push(record(
        "volumesnapshotcontent",
        &content,
        None,
        &format!("{content}.vsc.yaml"),
    ));
    abandon.extend(record_finding(cx));
    if s.reason == Reason::SnapshotDeleteStuck {
        abandon.push(say(
            "2. The driver retries its delete: once the backend snapshot is gone (deleted by \
             hand, if that is what fails), its next try succeeds and the content goes.",
        ));
        abandon.extend(delete_backend_snapshot(cx));
    } else {
        abandon.push(say("2. Delete the backend snapshot and the content."));
        abandon.push(snapshot_then_content(cx));
        abandon.extend(delete_backend_snapshot(cx));
        abandon.push(run(format!(
            "kubectl delete volumesnapshotcontent {}",
            quote(&content)
        )));
        abandon.push(say(
            "Only the driver's csi-snapshotter removes a content's finalizer: where it does not \
             run, the delete hangs until the finalizer is removed by hand \
             (docs/snapshot-controller-notes.md).",
        ));
        if cx.origin == Origin::Operator {
            abandon.push(say(
                "A Retain content deleted leaves its ContentDeleted tombstone: with the census of \
                 its snapshots it closes once two listings no longer find the snapshot; without \
                 it, acknowledge it with the ticket, which ends it.",
            ));
        }
    }
    vec![
        block(Choice::First, "look at the content", first),
        block(Choice::Reuse, reuse_title, reuse),
        block(Choice::Abandon, "record, delete", abandon),
        keep(cx, Some(("volumesnapshotcontent", content))),
    ]
}

/// A claim whose expansion stopped: look at what the claim and its events say, let the step
/// complete (what that step needs), or lower the request back (above the capacity, as the API
/// server demands; the size cannot be taken below what the claim has), or acknowledge it.
fn expansion(cx: &Cx) -> Vec<Block> {
    use crate::model::expansion::ResizeStep;
    let e = cx.s.claim.as_ref().and_then(|c| c.expansion.as_ref());
    let (ns, claim) = (
        cx.or(cx.claim_ns(), "namespace"),
        cx.or(cx.claim_name(), "claim"),
    );
    let requested = cx.or(e.map(|e| e.requested.as_str()), "requested size");
    let capacity = cx.or(e.map(|e| e.capacity.as_str()), "capacity");
    let step = e.map_or(ResizeStep::NotStarted, |e| e.stopped_at);
    let first = vec![
        say(format!(
            "The claim {ns}/{claim} asks for {requested} and has {capacity}: its expansion              stopped {}. Nothing is lost; the application may run out of space. What the claim              and its events say:",
            step.stopped_where()
        )),
        run(format!(
            "kubectl get pvc -n {} {} {}",
            quote(&ns),
            quote(&claim),
            quote(
                "-o=jsonpath={.status.allocatedResources} {.status.allocatedResourceStatuses}                  {.status.conditions}"
            )
        )),
        run(format!(
            "kubectl get events -n {} --field-selector {}",
            quote(&ns),
            quote(&format!(
                "involvedObject.kind=PersistentVolumeClaim,involvedObject.name={claim}"
            ))
        )),
    ];
    let mut finish = vec![say(format!(
        "{}.",
        crate::model::text::upper_first(step.advice())
    ))];
    if step == ResizeStep::NodePending {
        finish.push(say(
            "Which pods mount it now (`Used By`; <none>: start one that does, and the kubelet \
             grows the filesystem as it mounts the claim):",
        ));
        finish.push(run(format!(
            "kubectl describe pvc -n {} {}",
            quote(&ns),
            quote(&claim)
        )));
    }
    let size = ask("a size above the capacity");
    let lower = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
    let revert = vec![
        say(format!(
            "Lower the request back to a size the backend can give, above {capacity} (the API              server refuses one at or below the capacity; a volume never shrinks). The resizer              then grows it to that size instead:"
        )),
        run(format!(
            "kubectl patch pvc -n {} {} --type merge -p {}",
            quote(&ns),
            quote(&claim),
            quote(&lower.to_string())
        )),
    ];
    vec![
        block(Choice::First, "look at the resize", first),
        block(Choice::Finish, "let the resize complete", finish),
        block(Choice::Revert, "lower the request back", revert),
        keep(cx, Some(("pv", cx.pv_name()))),
    ]
}

/// A disk whose size differs from its PV's capacity: look at both, bring the cluster to the
/// disk's size through the claim (a resize to a size the disk already has changes nothing in the
/// backend and updates the PV and the filesystem), or acknowledge it.
fn size_mismatch(cx: &Cx) -> Vec<Block> {
    let s = cx.s;
    let pv = cx.pv_name();
    let disk = s.disk_size_bytes.map(crate::model::quantity::format_bytes);
    let disk = cx.or(disk.as_deref(), "disk size");
    let capacity = cx.or(s.capacity.as_deref(), "capacity");
    let mut first = vec![say(format!(
        "The PV {pv} says {capacity}; the census lists its disk at {disk}. Look at both:"
    ))];
    first.extend(look_disk(cx));
    first.push(run(format!(
        "kubectl get pv {} {}",
        quote(&pv),
        quote("-o=jsonpath={.spec.capacity.storage}")
    )));
    let (ns, claim) = (
        cx.or(cx.claim_ns(), "namespace"),
        cx.or(cx.claim_name(), "claim"),
    );
    let larger = matches!(
        (s.disk_size_bytes, s.capacity_bytes),
        (Some(d), Some(c)) if d > c
    );
    let finish = if larger {
        let grow = serde_json::json!({"spec": {"resources": {"requests": {"storage": disk}}}});
        vec![
            say(format!(
                "The disk is larger and bills for {disk}. To let the volume use it, raise the \
                 claim's request to the disk's size: the resizer finds the disk already that large, \
                 and the PV and the filesystem follow (the class must allow expansion):"
            )),
            run(format!(
                "kubectl patch pvc -n {} {} --type merge -p {}",
                quote(&ns),
                quote(&claim),
                quote(&grow.to_string())
            )),
        ]
    } else {
        vec![say(format!(
            "The disk is smaller than the PV says: the application can use only {disk}. Grow it \
             through the claim (an expansion to more than {capacity} reaches the disk), or with \
             the backend's own resize and then the claim; never shrink the PV's capacity by hand."
        ))]
    };
    vec![
        block(Choice::First, "compare the sizes", first),
        block(Choice::Finish, "make the sizes agree", finish),
        keep(cx, Some(("pv", pv))),
    ]
}

fn content_missing(cx: &Cx) -> Vec<Block> {
    let sn = cx.snapshot();
    let (ns, name) = split_ref(sn.and_then(|sn| sn.snapshot.as_deref()));
    let (n, m) = (cx.or(ns, "namespace"), cx.or(name, "snapshot"));
    let content = cx.or(sn.and_then(|sn| sn.content.as_deref()), "content");
    let first = vec![
        warn(format!(
            "The VolumeSnapshot {n}/{m} is bound to the content {content}, which is gone: \
             restores from it fail. Its backend snapshot may remain."
        )),
        run(format!(
            "kubectl get volumesnapshot -n {} {} -o yaml",
            quote(&n),
            quote(&m)
        )),
    ];
    let reuse = vec![
        say(format!(
            "Import the backend snapshot again: a content of the same name, naming it and \
             {n}/{m}:"
        )),
        content_manifest(cx, &content, &n, &m),
    ];
    let mut abandon = vec![say("Delete the VolumeSnapshot:")];
    abandon.push(run(format!(
        "kubectl delete volumesnapshot -n {} {}",
        quote(&n),
        quote(&m)
    )));
    abandon.push(say(
        "If its backend snapshot remains, delete it too (the census reports one no content names \
         as SnapshotWithoutContent):",
    ));
    abandon.extend(delete_backend_snapshot(cx));
    vec![
        block(Choice::First, "restores from it fail", first),
        block(Choice::Reuse, "a content for it again", reuse),
        block(Choice::Abandon, "delete it", abandon),
        keep(cx, None),
    ]
}

fn content_tombstone(cx: &Cx) -> Vec<Block> {
    let sn = cx.snapshot();
    let content = cx.or(sn.and_then(|sn| sn.content.as_deref()), "content");
    let (ns, name) = split_ref(sn.and_then(|sn| sn.snapshot.as_deref()));
    let (n, m) = (
        ns.map_or_else(|| ask("namespace"), str::to_string),
        name.map_or_else(|| ask("snapshot"), str::to_string),
    );
    let first = vec![say(
        "The Retain content was deleted; its backend snapshot was not. This object is the last \
         record of it.",
    )];
    let reuse = vec![
        say(
            "Import the backend snapshot again: a content naming it, and a VolumeSnapshot naming the content:",
        ),
        content_manifest(cx, &content, &n, &m),
        snapshot_manifest(cx, &n, &m, &content),
    ];
    let mut abandon = vec![say("1. Record it:")];
    abandon.extend(record_finding(cx));
    abandon.push(say(
        "2. Delete the backend snapshot. This tombstone is its record: acknowledge it (below) \
         only once the snapshot is deleted.",
    ));
    abandon.extend(delete_backend_snapshot(cx));
    vec![
        block(Choice::First, "its content is gone", first),
        block(Choice::Reuse, "import it again", reuse),
        block(
            Choice::Abandon,
            "record, delete the backend snapshot",
            abandon,
        ),
        keep(cx, None),
    ]
}

fn backend_snapshot(cx: &Cx) -> Vec<Block> {
    let sn = cx.snapshot();
    let mut first = disk_warnings(cx);
    if let (Some(c), Some(v)) = (
        sn.and_then(|sn| sn.content.as_deref()),
        sn.and_then(|sn| sn.snapshot.as_deref()),
    ) {
        first.push(say(format!(
            "The CSI driver cut it for VolumeSnapshot {v} (VolumeSnapshotContent {c})."
        )));
    }
    let (ns, name) = split_ref(sn.and_then(|sn| sn.snapshot.as_deref()));
    let (n, m) = (
        ns.map_or_else(|| ask("namespace"), str::to_string),
        name.map_or_else(|| ask("snapshot"), str::to_string),
    );
    let content = sn
        .and_then(|sn| nonempty(sn.content.as_deref()))
        .unwrap_or_else(|| ask("content name"));
    let reuse = vec![
        say("Import it: a content naming it, and a VolumeSnapshot naming the content:"),
        content_manifest(cx, &content, &n, &m),
        snapshot_manifest(cx, &n, &m, &content),
    ];
    let mut abandon = vec![match cx.origin {
        Origin::Operator => {
            say("1. Record it: no content names it, so this finding is its only record.")
        }
        Origin::Scan => say(
            "1. Record it: no content names it, and no object holds this finding: keep this \
             output with your ticket.",
        ),
    }];
    abandon.extend(record_finding(cx));
    abandon.push(say("2. Delete it (there is no content to delete):"));
    abandon.extend(delete_backend_snapshot(cx));
    vec![
        block(Choice::First, "whose snapshot is it?", first),
        block(Choice::Reuse, "import it", reuse),
        block(Choice::Abandon, "record, delete", abandon),
        keep(cx, None),
    ]
}
