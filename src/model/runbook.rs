//! A backend's runbook: the commands a person reviews and runs on one of its disks or backend
//! snapshots (look, snapshot, delete, restore, a PV for it again), as `explain` prints them.
//!
//! `explain` (`decide/explain.rs`) writes what every finding shares: the order of the steps,
//! what makes a choice unsafe, the Kubernetes objects. What differs per backend (`rbd`,
//! `gcloud`, `aws`, `az`, and where the disk is) each backend writes in its own folder under
//! `src/census/`, from what the finding records ([`crate::model::backend::Backend::disk_runbook`]).
//! Printed, never run: pure text, no client.

use std::cell::RefCell;
use std::collections::BTreeSet;

/// One line of a runbook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    /// A sentence.
    Say(String),
    /// What makes a choice unsafe.
    Warn(String),
    /// A command, shell-quoted, to review and run (a here-document spans several lines).
    Run(String),
}

/// A sentence.
pub fn say(s: impl Into<String>) -> Line {
    Line::Say(s.into())
}

/// A warning.
pub fn warn(s: impl Into<String>) -> Line {
    Line::Warn(s.into())
}

/// A command.
pub fn run(s: impl Into<String>) -> Line {
    Line::Run(s.into())
}

/// The placeholders a runbook prints: a fact the finding lacks is `<what>` in a command, never a
/// guess, and is noted here so that `explain` can list what to fill in.
#[derive(Debug, Default)]
pub struct Blanks {
    missing: RefCell<BTreeSet<&'static str>>,
}

impl Blanks {
    /// `value`, or the placeholder `<what>`, noted as missing.
    pub fn or(&self, value: Option<&str>, what: &'static str) -> String {
        match value.filter(|v| !v.is_empty()) {
            Some(v) => v.to_string(),
            None => {
                self.missing.borrow_mut().insert(what);
                format!("<{what}>")
            }
        }
    }

    /// What was printed as a placeholder.
    pub fn into_missing(self) -> BTreeSet<&'static str> {
        self.missing.into_inner()
    }
}

/// One word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a single quote inside as `'\''`).
pub fn quote(word: &str) -> String {
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
pub fn yaml(value: &str) -> String {
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
pub fn flag(name: &str, value: &str) -> String {
    format!("{name}={}", quote(value))
}

/// `--option value`, the value quoted (the AWS and Azure CLIs' form).
pub fn opt(name: &str, value: &str) -> String {
    format!("{name} {}", quote(value))
}

/// A placeholder for something the person chooses or looks up (not a fact of the finding).
pub fn ask(what: &str) -> String {
    format!("<{what}>")
}

/// `v`, when it is there and not empty.
pub fn nonempty(v: Option<&str>) -> Option<String> {
    v.filter(|v| !v.is_empty()).map(str::to_string)
}

/// What names the snapshot a person takes of a disk before abandoning it.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotAsk<'a> {
    /// The finding's name (a file name where the backend exports the data).
    pub finding: &'a str,
    /// The snapshot's name, valid in every backend.
    pub name: &'a str,
    /// Its description: whose disk it was.
    pub description: &'a str,
}

/// The CSI source of a PV made again for a disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PvSource {
    /// The CSI driver.
    pub driver: String,
    /// The volume handle.
    pub handle: String,
    /// `volumeAttributes`, in order.
    pub attributes: Vec<(&'static str, String)>,
    /// The node-affinity key and the zones the disk can be attached in.
    pub affinity: Option<(&'static str, Vec<String>)>,
    /// Whether the driver needs a `nodeStageSecretRef` (its StorageClass named one).
    pub node_stage_secret: bool,
    /// What the record lacks that the PV needs, said before the manifest.
    pub notes: Vec<Line>,
}

/// The commands for one disk, as far as its finding records where it is. Written per backend
/// (in its folder); every method prints, none runs.
pub trait DiskRunbook {
    /// Where the disk is, as the head's sentence: `Disk: the EBS volume vol-1 in region r
    /// ({via}).`, `via` being what the PV's source says.
    fn sentence(&self, via: &str) -> String;

    /// What shows that the disk exists.
    fn look(&self, blanks: &Blanks) -> Vec<Line>;

    /// What shows who uses it right now.
    fn in_use(&self, blanks: &Blanks) -> Vec<Line>;

    /// A snapshot of it, for the data someone may still need, before it is deleted.
    fn snapshot(&self, blanks: &Blanks, ask: SnapshotAsk<'_>) -> Vec<Line>;

    /// Its delete.
    fn delete(&self, blanks: &Blanks) -> Vec<Line>;

    /// How it comes back, once two listings found it gone (`in_trash`: the census found it in
    /// the backend's trash).
    fn restore(&self, blanks: &Blanks, in_trash: bool) -> Vec<Line>;

    /// The CSI source of a PV for it; `None` where no CSI source can be made from the record.
    fn pv_source(&self, blanks: &Blanks) -> Option<PvSource>;

    /// Whether its CSI driver's own delete (a Released PV's reclaim policy set to Delete) is
    /// the one the runbook offers, for a backend whose commands are not known here.
    fn driver_deletes(&self) -> bool {
        false
    }
}

/// The commands for one backend snapshot.
pub trait SnapshotRunbook {
    /// Its delete.
    fn delete(&self, blanks: &Blanks) -> Vec<Line>;
}

/// The delete of a backend snapshot whose commands are the storage system's own: its handle is
/// its driver's, with what the backend can add of where it is (`aside`).
pub fn foreign_snapshot_delete(handle: Option<&str>, driver: Option<&str>, aside: &str) -> Line {
    say(format!(
        "Delete the backend snapshot {} with the storage system's own tools: the handle is \
         {}'s own{aside}.",
        handle.unwrap_or("(not recorded)"),
        driver.unwrap_or("the CSI driver"),
    ))
}
