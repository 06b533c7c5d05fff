//! What the operator keeps of each of its VolumeLeftovers: the type of its reflector store. Pure.
//!
//! The store is read to decide and to compare before writing, never to show the object again, so
//! it keeps only what those need ([`Leftover::read`] makes one from the object the API server sent):
//! - identity and version: name, uid (the delete precondition), resourceVersion (the echo of our
//!   own writes, the merge patch's precondition), generation (`observedGeneration`);
//! - ownership and the parts of metadata and spec the operator owns, as they are: the managed-by
//!   flag, its own labels (compactly encoded; compared key by key, so that a label of ours that no
//!   longer applies is removed and nobody else's is named), ownerReferences only when one names a
//!   PersistentVolume (an earlier version's, which the patch removes), `spec.volumeName` and
//!   `spec.volumeUID`;
//! - what people own and the operator reads: `spec.acknowledgement`, whole;
//! - of the status: what decisions and metrics read (reason, state, subject, firstSeen,
//!   deletedAt, capacityBytes, the StorageClass's name, the cost's currency, monthly amount and
//!   the day its accrued amount moves), what the next status is computed from
//!   (what the acknowledgement covered, the two conditions' status and lastTransitionTime), and a
//!   128-bit digest of the whole status ([`digest`]), which the digest of the desired status is
//!   compared with: equal means nothing is written, exactly as comparing the objects did;
//! - the status's facts ([`Status::record`]), only where a decision may need them again: for a
//!   finding about a volume that would leave its disk behind, until its volume is seen in the PV
//!   store (if the volume vanished while the operator was down, the finding becomes its
//!   tombstone, [`crate::decide::classify::tombstone_of`]; once the volume is seen, its disappearance is
//!   seen with its last object: a delete event, or a relist that no longer finds it), for
//!   tombstones (re-published as they are; their image is censused), for images without a volume
//!   (their pool), and for every finding when the OpenReports mirror is on (it shows them).
//!   The conditions, the message (except for tombstones and the mirror) and the parts recomputed
//!   on every write are left out of it; it is kept as one block of JSON.

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::Resource;
use kube::runtime::reflector::Lookup;

use crate::model::crd::{
    AcknowledgedFinding, Acknowledgement, ConditionStatus, Reason, State, Subject, VolumeLeftover,
    VolumeLeftoverSpec, VolumeLeftoverStatus, noting_old_names,
};
use crate::model::finding::leaves_a_disk;
use crate::model::labels::{HINT_LABEL_PREFIX, MANAGED_BY, MANAGED_BY_VALUE, is_own_label};
use crate::model::phase::{Phase, ReclaimPolicy};

/// What the lean form keeps beyond what decisions need.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Keep {
    /// The facts and message of every finding, for the OpenReports mirror.
    pub report: bool,
    /// The finding's volume (same name and uid) is in the PV store: its facts are not kept for
    /// a tombstone, as its disappearance will be seen with its last object ([`Status::shed`]).
    pub volume_seen: bool,
}

/// A VolumeLeftover as the VolumeLeftover feed reads it: without `managedFields` and
/// `annotations` ([`crate::model::meta`]), which the lean form does not keep.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct LeftoverObject {
    /// The metadata that is read.
    #[serde(default, deserialize_with = "crate::model::meta::lean")]
    pub(crate) metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    /// `spec`.
    pub(crate) spec: VolumeLeftoverSpec,
    /// `status`.
    #[serde(default)]
    pub(crate) status: Option<ReadStatus>,
}

/// A status as read, and whether it spelled a reason, hint or subject by the name an earlier
/// version wrote ([`crate::model::crd::Vocabulary`]): the operator rewrites such an object once.
#[derive(Clone, Debug)]
pub(crate) struct ReadStatus {
    /// The status, old names read as their new values.
    pub(crate) status: VolumeLeftoverStatus,
    /// Whether it had an old name.
    pub(crate) old_names: bool,
}

impl<'de> serde::Deserialize<'de> for ReadStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (status, old_names) =
            noting_old_names(|| <VolumeLeftoverStatus as serde::Deserialize>::deserialize(d));
        Ok(ReadStatus {
            status: status?,
            old_names,
        })
    }
}

impl From<LeftoverObject> for VolumeLeftover {
    fn from(o: LeftoverObject) -> Self {
        VolumeLeftover {
            metadata: o.metadata,
            spec: o.spec,
            status: o.status.map(|s| s.status),
        }
    }
}

impl Resource for LeftoverObject {
    type DynamicType = ();
    type Scope = kube::core::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::version(&())
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::api_version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::plural(&())
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.metadata
    }
}

/// A VolumeLeftover as the operator caches it.
#[derive(Clone, Debug, PartialEq)]
pub struct Leftover {
    /// `metadata.name`.
    pub name: Box<str>,
    /// `metadata.uid`.
    pub(crate) uid: Option<Box<str>>,
    /// `metadata.resourceVersion`.
    pub(crate) resource_version: Option<Box<str>>,
    /// `metadata.generation`.
    pub(crate) generation: Option<i64>,
    /// Whether it carries the operator's managed-by label.
    pub(crate) managed: bool,
    /// The operator's own labels, encoded ([`encode_labels`]).
    labels: Box<str>,
    /// `metadata.ownerReferences`, only when one of them names a PersistentVolume.
    pv_owners: Option<Box<[OwnerReference]>>,
    /// `spec.volumeName`, when it is not the object's name.
    volume_name: Option<Box<str>>,
    /// `spec.volumeUID`.
    pub(crate) volume_uid: Box<str>,
    /// `spec.acknowledgement`.
    pub(crate) acknowledgement: Option<Box<Acknowledgement>>,
    /// What is kept of the status.
    pub status: Option<Status>,
}

/// What is kept of a VolumeLeftover's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    /// `reason`.
    pub reason: Reason,
    /// `state`.
    pub state: State,
    /// `subject`.
    pub(crate) subject: Subject,
    /// `firstSeen`.
    pub first_seen: Time,
    /// `deletedAt`.
    pub(crate) deleted_at: Option<Time>,
    /// `capacityBytes`.
    pub capacity_bytes: Option<i64>,
    /// `storageClass.name`.
    pub storage_class: Option<Box<str>>,
    /// `cost`: what the metrics add up and when it next moves.
    pub(crate) cost: Option<Box<KeptCost>>,
    /// `acknowledged`.
    pub(crate) acknowledged: Option<Box<AcknowledgedFinding>>,
    /// The first condition of type `Acknowledged`.
    pub(crate) acknowledged_condition: Option<Cond>,
    /// The first condition of type `Open`.
    pub(crate) open_condition: Option<Cond>,
    /// [`digest`] of the whole status.
    pub(crate) digest: u128,
    /// Whether the object spells a reason, hint or subject by an earlier version's name
    /// ([`ReadStatus`]): its digest is that of the status with the current names, so this is
    /// what says it must be written again.
    pub(crate) old_names: bool,
    /// The facts, as JSON of a [`VolumeLeftoverStatus`] without conditions, acknowledged,
    /// observedGeneration and state (and, but for tombstones and the mirror, message).
    record: Record,
}

/// What is kept of a status's cost estimate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptCost {
    /// `currency`.
    pub currency: Box<str>,
    /// `monthlyMinorUnits`.
    pub monthly_minor_units: i64,
    /// `accruedThrough`.
    pub(crate) accrued_through: Time,
}

/// What is kept of a condition: its status and when it last changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cond {
    /// `status`.
    pub(crate) status: ConditionStatus,
    /// `lastTransitionTime`.
    pub(crate) last_transition_time: Time,
}

impl Cond {
    /// Whether the condition's status is `st`.
    pub(crate) fn is(&self, st: ConditionStatus) -> bool {
        self.status == st
    }
}

/// Whether a status needs its facts kept (see the module's documentation).
pub(crate) fn needs_record(s: &VolumeLeftoverStatus, keep: Keep) -> bool {
    keep.report
        || matches!(
            s.reason,
            Reason::VolumeDeleted
                | Reason::DiskWithoutVolume
                | Reason::SnapshotWithoutContent
                | Reason::ContentDeleted
        )
        || (may_become_tombstone(s) && !keep.volume_seen)
}

/// Whether the finding is about a volume that would leave its disk behind if it vanished: the
/// facts that become its tombstone are needed only until its volume is seen.
fn may_become_tombstone(s: &VolumeLeftoverStatus) -> bool {
    s.subject == Subject::Volume
        && s.reason != Reason::VolumeDeleted
        && leaves_a_disk(ReclaimPolicy::of(&s.reclaim_policy), Phase::of(&s.phase))
}

/// The facts of a status as JSON, which can be dropped while the object is shared by the store
/// ([`Status::shed`]).
#[derive(Debug, Default)]
struct Record {
    bytes: std::sync::Mutex<Option<Box<[u8]>>>,
    /// Whether they are kept only for a tombstone (not for the mirror, not a tombstone's or an
    /// image's own).
    sheddable: bool,
}

impl Record {
    fn get(&self) -> std::sync::MutexGuard<'_, Option<Box<[u8]>>> {
        // A poisoned lock only means a panic elsewhere while it was held; the bytes are whole.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clone for Record {
    fn clone(&self) -> Self {
        Record {
            bytes: std::sync::Mutex::new(self.get().clone()),
            sheddable: self.sheddable,
        }
    }
}

impl PartialEq for Record {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
            || (self.sheddable == other.sheddable && *self.get() == *other.get())
    }
}

impl Eq for Record {}

impl Leftover {
    /// The lean form of an object as the VolumeLeftover feed reads it.
    pub(crate) fn read(o: LeftoverObject, keep: Keep) -> Leftover {
        let old_names = o.status.as_ref().is_some_and(|s| s.old_names);
        Leftover::with_old_names(o.into(), old_names, keep)
    }

    /// The lean form of `o`.
    pub fn new(o: VolumeLeftover, keep: Keep) -> Leftover {
        Leftover::with_old_names(o, false, keep)
    }

    fn with_old_names(o: VolumeLeftover, old_names: bool, keep: Keep) -> Leftover {
        let VolumeLeftover {
            metadata: m,
            spec,
            status,
        } = o;
        let name: Box<str> = m.name.unwrap_or_default().into();
        let managed = m
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .is_some_and(|v| v == MANAGED_BY_VALUE);
        let labels = encode_labels(m.labels.iter().flatten());
        let pv_owners = m
            .owner_references
            .filter(|o| o.iter().any(names_a_volume))
            .map(Vec::into_boxed_slice);
        let VolumeLeftoverSpec {
            volume_name,
            volume_uid,
            acknowledgement,
        } = spec;
        Leftover {
            volume_name: (volume_name.as_str() != &*name).then(|| volume_name.into()),
            name,
            uid: m.uid.map(Into::into),
            resource_version: m.resource_version.map(Into::into),
            generation: m.generation,
            managed,
            labels,
            pv_owners,
            volume_uid: volume_uid.into(),
            acknowledgement: acknowledgement.map(Box::new),
            status: status.map(|s| Status::new(s, old_names, keep)),
        }
    }

    /// `spec.volumeName`.
    pub(crate) fn volume_name(&self) -> &str {
        self.volume_name.as_deref().unwrap_or(&self.name)
    }

    /// The operator's own labels, as the object has them.
    pub(crate) fn own_labels(&self) -> BTreeMap<String, String> {
        decode_labels(&self.labels)
    }

    /// `metadata.ownerReferences`, when one of them names a PersistentVolume (else there is
    /// nothing to remove, and the list is not kept).
    pub(crate) fn pv_owner_references(&self) -> Option<&[OwnerReference]> {
        self.pv_owners.as_deref()
    }

    /// The object as far as the lean form can tell it: identity, managed-by label, spec and the
    /// status of [`Status::record`] (with its state and firstSeen). Enough for the OpenReports
    /// mirror when the facts are kept for it.
    pub(crate) fn to_object(&self) -> VolumeLeftover {
        let mut o = VolumeLeftover::new(
            &self.name,
            VolumeLeftoverSpec {
                volume_name: self.volume_name().to_string(),
                volume_uid: self.volume_uid.to_string(),
                acknowledgement: self.acknowledgement.as_deref().cloned(),
            },
        );
        o.metadata.uid = self.uid.as_deref().map(Into::into);
        o.metadata.resource_version = self.resource_version.as_deref().map(Into::into);
        o.metadata.generation = self.generation;
        o.metadata.labels = Some(self.own_labels());
        o.status = self.status.as_ref().and_then(Status::record);
        o
    }
}

fn names_a_volume(o: &OwnerReference) -> bool {
    o.api_version == "v1" && o.kind == "PersistentVolume"
}

impl Status {
    fn new(s: VolumeLeftoverStatus, old_names: bool, keep: Keep) -> Status {
        let digest = digest(&s);
        let condition = |type_: &str| {
            s.conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| Cond {
                    status: c.status,
                    last_transition_time: c.last_transition_time.clone(),
                })
        };
        let acknowledged_condition = condition("Acknowledged");
        let open_condition = condition("Open");
        let record = needs_record(&s, keep).then(|| {
            let mut r = s.clone();
            r.conditions = Vec::new();
            r.acknowledged = None;
            r.observed_generation = None;
            r.state = State::Open;
            if !keep.report && !matches!(r.reason, Reason::VolumeDeleted | Reason::ContentDeleted) {
                r.message = String::new();
            }
            serde_json::to_vec(&r)
                .unwrap_or_default()
                .into_boxed_slice()
        });
        let record = Record {
            sheddable: !keep.report && may_become_tombstone(&s),
            bytes: std::sync::Mutex::new(record),
        };
        Status {
            reason: s.reason,
            state: s.state,
            subject: s.subject,
            first_seen: s.first_seen,
            deleted_at: s.deleted_at,
            capacity_bytes: s.capacity_bytes,
            storage_class: s.storage_class.map(|c| c.name.into()),
            cost: s.cost.map(|c| {
                Box::new(KeptCost {
                    currency: c.currency.into(),
                    monthly_minor_units: c.monthly_minor_units,
                    accrued_through: c.accrued_through,
                })
            }),
            acknowledged: s.acknowledged.map(Box::new),
            acknowledged_condition,
            open_condition,
            digest,
            old_names,
            record,
        }
    }

    /// Drops the facts kept only for a tombstone: called once the finding's volume is seen in
    /// the PV store, after which its disappearance is seen with its last object (a watched
    /// delete, or the objects a relist no longer finds). Returns whether any were dropped.
    pub(crate) fn shed(&self) -> bool {
        self.record.sheddable && self.record.get().take().is_some()
    }

    /// Whether the facts are kept.
    pub fn has_record(&self) -> bool {
        self.record.get().is_some()
    }

    /// The status's facts, when they are kept: the status as published, but without its
    /// conditions and observedGeneration, and without its message unless it is a tombstone's or
    /// the mirror keeps it. State, acknowledged and firstSeen are the published ones.
    pub(crate) fn record(&self) -> Option<VolumeLeftoverStatus> {
        let mut s: VolumeLeftoverStatus =
            serde_json::from_slice(self.record.get().as_deref()?).ok()?;
        s.state = self.state;
        s.acknowledged = self.acknowledged.as_deref().cloned();
        s.first_seen = self.first_seen.clone();
        Some(s)
    }
}

impl Lookup for Leftover {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::kind(&())
    }
    fn group(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::group(&())
    }
    fn version(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::version(&())
    }
    fn plural(_: &()) -> Cow<'_, str> {
        <VolumeLeftover as Resource>::plural(&())
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        None
    }
    // Kept out of the store's keys (ObjectRef), which would copy them again.
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// A 128-bit digest of a status: FNV-1a over its JSON (the bytes a write would send; fields in a
/// fixed order, no maps), so the same status gives the same digest in every process.
pub(crate) fn digest(s: &VolumeLeftoverStatus) -> u128 {
    let mut h = Fnv(FNV_OFFSET);
    // Writing to a hasher cannot fail; a status always serializes.
    let _ = serde_json::to_writer(&mut h, s);
    h.0
}

const FNV_OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
const FNV_PRIME: u128 = 0x0000000001000000000000000000013b;

struct Fnv(u128);

impl std::io::Write for Fnv {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for b in buf {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(FNV_PRIME);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// Label keys and values are validated by the API server: no control characters, so these mark
// the common prefixes and separate the fields.
const SEP: char = '\0';
const KEY_MANAGED_BY: char = '\u{1}';
const PREFIX_HINT: char = '\u{2}';
const PREFIX_OWN: char = '\u{3}';
const VALUE_MANAGED_BY: char = '\u{4}';
const OWN_PREFIX: &str = "leftovers.dev/";

/// The operator's own labels among `labels`, as one string: `key SEP value SEP key SEP value`,
/// the common prefixes and values as one character each.
pub(crate) fn encode_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Box<str> {
    let mut out = String::new();
    for (k, v) in labels.into_iter().filter(|(k, _)| is_own_label(k)) {
        if !out.is_empty() {
            out.push(SEP);
        }
        if k == MANAGED_BY {
            out.push(KEY_MANAGED_BY);
        } else if let Some(rest) = k.strip_prefix(HINT_LABEL_PREFIX) {
            out.push(PREFIX_HINT);
            out.push_str(rest);
        } else if let Some(rest) = k.strip_prefix(OWN_PREFIX) {
            out.push(PREFIX_OWN);
            out.push_str(rest);
        } else {
            out.push_str(k);
        }
        out.push(SEP);
        if v == MANAGED_BY_VALUE {
            out.push(VALUE_MANAGED_BY);
        } else {
            out.push_str(v);
        }
    }
    out.into_boxed_str()
}

/// The labels [`encode_labels`] encoded.
pub(crate) fn decode_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if s.is_empty() {
        return out;
    }
    let mut parts = s.split(SEP);
    while let (Some(k), Some(v)) = (parts.next(), parts.next()) {
        let key = if let Some(rest) = k.strip_prefix(KEY_MANAGED_BY) {
            format!("{MANAGED_BY}{rest}")
        } else if let Some(rest) = k.strip_prefix(PREFIX_HINT) {
            format!("{HINT_LABEL_PREFIX}{rest}")
        } else if let Some(rest) = k.strip_prefix(PREFIX_OWN) {
            format!("{OWN_PREFIX}{rest}")
        } else {
            k.to_string()
        };
        let value = if v.len() == 1 && v.starts_with(VALUE_MANAGED_BY) {
            MANAGED_BY_VALUE.to_string()
        } else {
            v.to_string()
        };
        out.insert(key, value);
    }
    out
}
