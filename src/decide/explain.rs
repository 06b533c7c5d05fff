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

use std::collections::BTreeSet;
use std::fmt;

use crate::model::backend::{Backend, DiskRecord, SnapshotRecord};
use crate::model::crd::{
    Hint, Reason, Tristate, VolumeLeftover, VolumeLeftoverStatus, VolumeSourceInfo,
};
pub(crate) use crate::model::runbook::Line;
use crate::model::runbook::{
    Blanks, DiskRunbook, PvSource, SnapshotAsk, ask, foreign_snapshot_delete, nonempty, quote, run,
    say, warn, yaml,
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
    /// The commands for its disk: its backend's runbook.
    disk: Box<dyn DiskRunbook>,
    /// Every backend's words: which disk or snapshot a source or handle names.
    backends: &'a [&'static dyn Backend],
    blanks: Blanks,
}

impl Cx<'_> {
    /// `value`, or the placeholder `<what>`, noted as missing.
    fn or(&self, value: Option<&str>, what: &'static str) -> String {
        self.blanks.or(value, what)
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
        blanks: Blanks::default(),
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
        missing: cx.blanks.into_missing(),
    }
}

// --- where the disk is ------------------------------------------------------------------------

/// The runbook of the disk the finding names: the backend the census recorded, else the one
/// whose source it is, reading what the finding records (the census's record of the disk first).
fn disk_of(s: &VolumeLeftoverStatus, backends: &[&'static dyn Backend]) -> Box<dyn DiskRunbook> {
    let src = &s.source;
    let driver = src.driver.as_deref().unwrap_or_default();
    let backend = match s.image.as_ref().and_then(|i| i.backend.as_ref()) {
        Some(b) => backends.iter().find(|k| k.name() == b.as_str()),
        None => backends.iter().find(|b| b.names_source(&src.kind, driver)),
    };
    match backend {
        Some(b) => b.disk_runbook(DiskRecord {
            source: src,
            named: b.disk_ref(src).as_ref(),
            // A backend snapshot's finding records the snapshot there, not a disk.
            image: s
                .image
                .as_ref()
                .filter(|_| s.reason != Reason::SnapshotWithoutContent),
        }),
        None => Box::new(Foreign {
            source: src.clone(),
            known: backends
                .iter()
                .map(|b| b.title())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// A disk of a backend volume-leftovers does not census: what the PV's source says is all there
/// is, and the commands are that storage system's own, or its CSI driver's.
struct Foreign {
    source: VolumeSourceInfo,
    /// The backends it knows, for the sentence.
    known: String,
}

impl DiskRunbook for Foreign {
    fn sentence(&self, via: &str) -> String {
        let src = &self.source;
        let mut what = format!("Disk: {via}");
        if let Some(p) = &src.path {
            what.push_str(&format!(", path {p}"));
        }
        if let Some(d) = &src.disk_name {
            what.push_str(&format!(", disk {d}"));
        }
        what.push_str(&format!(
            ". Not a backend volume-leftovers knows ({}): the commands for its disk are that \
             storage system's own, or its CSI driver's.",
            self.known
        ));
        what
    }

    fn look(&self, _: &Blanks) -> Vec<Line> {
        Vec::new()
    }

    fn in_use(&self, _: &Blanks) -> Vec<Line> {
        Vec::new()
    }

    fn snapshot(&self, _: &Blanks, _: SnapshotAsk<'_>) -> Vec<Line> {
        vec![say(
            "Snapshot it with the storage system's own tools, or its CSI driver's (a \
             VolumeSnapshot of a claim bound to it, where the driver supports snapshots).",
        )]
    }

    fn delete(&self, _: &Blanks) -> Vec<Line> {
        vec![say(
            "Delete the disk with the storage system's own tools: the finding records no more of \
             it than the source above.",
        )]
    }

    fn restore(&self, _: &Blanks, _: bool) -> Vec<Line> {
        vec![say(
            "Restore the disk from the storage system's backups, under what the PV names.",
        )]
    }

    fn pv_source(&self, _: &Blanks) -> Option<PvSource> {
        let src = &self.source;
        match (src.kind.as_str(), &src.driver, &src.volume_handle) {
            ("csi", Some(d), Some(h)) => Some(PvSource {
                driver: d.clone(),
                handle: h.clone(),
                attributes: Vec::new(),
                affinity: None,
                node_stage_secret: false,
                notes: vec![say(format!(
                    "{d}'s volumeAttributes and secrets are not in the record: copy them from a \
                     PV of the same class."
                ))],
            }),
            _ => None,
        }
    }

    fn driver_deletes(&self) -> bool {
        true
    }
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
    cx.disk.sentence(&via)
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
    let name = snapshot_name(cx.name);
    let description = format!(
        "volume-leftovers: {} before abandoning it{}",
        cx.name,
        cx.s.claim
            .as_ref()
            .map_or(String::new(), |c| format!(" (claim {})", c.reference))
    );
    cx.disk.snapshot(
        &cx.blanks,
        SnapshotAsk {
            finding: cx.name,
            name: &name,
            description: &description,
        },
    )
}

/// The delete commands of the disk.
fn delete_disk(cx: &Cx) -> Vec<Line> {
    cx.disk.delete(&cx.blanks)
}

/// For a disk of another backend under a Released CSI PV: the driver's own delete, instead of
/// deleting the disk and the PV by hand.
fn driver_delete(cx: &Cx) -> Vec<Line> {
    let csi = cx.s.source.kind == "csi";
    if !(cx.disk.driver_deletes() && csi && cx.pv.is_some() && cx.s.phase == "Released") {
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
    cx.disk.in_use(&cx.blanks)
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
    cx.disk.look(&cx.blanks)
}

/// A PV for the disk, for its CSI driver, as a here-document for `kubectl create`; with
/// `claim`, pre-bound to it. A sentence instead for a source that has no CSI driver here.
fn pv_manifest(cx: &Cx, pv: &str, claim: Option<(&str, &str)>) -> Vec<Line> {
    let s = cx.s;
    let src = &s.source;
    let Some(PvSource {
        driver,
        handle,
        attributes,
        affinity,
        node_stage_secret,
        notes,
    }) = cx.disk.pv_source(&cx.blanks)
    else {
        return vec![say(format!(
            "A {} volume: re-create it as it was, from the record (`kubectl get vl {} -o yaml` \
             has everything the PV said).",
            src.kind, cx.name
        ))];
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
    if node_stage_secret {
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
    reuse.extend(cx.disk.restore(&cx.blanks, cx.has(Hint::DiskInTrash)));
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

/// The delete command of the backend snapshot: its backend's (the one whose handle it is, else
/// the one of its CSI driver), else the storage system's own.
fn delete_backend_snapshot(cx: &Cx) -> Vec<Line> {
    let handle = cx.snapshot().and_then(|sn| sn.snapshot_handle.as_deref());
    let driver = cx.s.source.driver.as_deref();
    let named = handle.and_then(|h| cx.backends.iter().find_map(|b| b.snapshot_ref(h)));
    let backend = match &named {
        Some(r) => Some(r.backend()),
        None => cx
            .backends
            .iter()
            .copied()
            .find(|b| Some(b.csi_driver()) == driver),
    };
    match backend {
        Some(b) => b
            .snapshot_runbook(SnapshotRecord {
                handle,
                named: named.as_ref(),
                driver,
                image: cx.s.image.as_ref(),
            })
            .delete(&cx.blanks),
        None => vec![foreign_snapshot_delete(handle, driver, "")],
    }
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
