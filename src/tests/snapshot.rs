//! Snapshot leftovers: reading VolumeSnapshotContents and VolumeSnapshots from the API's JSON,
//! the exclusions, every reason of `decide::snapshot`, its graces, the forbidden and stale
//! stores, and the transient states of a normal snapshot delete.
//!
//! The fixtures are shaped like the objects docs/snapshot-controller-notes.md shows
//! (snapshot-controller v8.7.0) and like a dynamic snapshot of the CSI hostpath driver.

use std::time::Duration;

use kube::Resource;
use kube::runtime::reflector::Lookup as _;
use serde_json::{Value, json};

use super::fixtures::{now, now_plus};
use crate::decide::lookup::Found;
use crate::decide::plan::Graces;
use crate::decide::snapshot::{
    ContentFacts, ContentLookup, GraceKind, SnapshotClock, SnapshotFacts, SnapshotFinding,
    SnapshotLookup, SnapshotReason, SnapshotSubject, SnapshotUndecided, SnapshotVerdict,
    classify_content, classify_snapshot, content_facts, grace_kind, grace_of, snapshot_facts,
    tombstone,
};
use crate::model::selector::Selector;
use crate::model::snapshot::{
    DeletionPolicy, Snapshot, SnapshotContent, SnapshotExclusion, SnapshotExclusions,
    VolumeSnapshotContentObject, VolumeSnapshotObject,
};

pub(super) const SNAP_UID: &str = "a352fa3e-3f10-4410-963a-84aea62390fa";
pub(super) const NEW_UID: &str = "0f1fbfa5-813f-4eb8-baf0-abb9c4f16da7";
pub(super) const DYN_SNAP_UID: &str = "2f2c6f3e-5a8e-4c55-9c1e-3d2b1f0a9e77";

fn graces() -> Graces {
    Graces {
        grace: Duration::from_secs(600),
        delete_grace: Duration::from_secs(1800),
        expansion_grace: Duration::from_secs(600),
    }
}

// ---- Fixtures ----

/// `pre-content` of the notes after the controller bound it: Retain, pre-provisioned, bound to
/// `default/pre-snap` by uid, with the bound-protection finalizer, created an hour before `now`.
pub(super) fn pre_content() -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": {
            "name": "pre-content",
            "uid": "5d0b7c1e-8f7e-4b8e-a1b2-0c9d8e7f6a5b",
            "resourceVersion": "4711",
            "generation": 1,
            "creationTimestamp": "2026-03-01T11:00:00Z",
            "finalizers": ["snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"],
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"snapshot.storage.k8s.io/v1\"}\n"
            },
            "managedFields": [{
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:deletionPolicy": {}}},
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "time": "2026-03-01T11:00:00Z"
            }]
        },
        "spec": {
            "deletionPolicy": "Retain",
            "driver": "example.csi.invalid",
            "source": {"snapshotHandle": "snap-handle-1"},
            "volumeSnapshotRef": {
                "name": "pre-snap",
                "namespace": "default",
                "uid": SNAP_UID
            }
        }
    })
}

/// The same content after `kubectl delete volumesnapshot pre-snap`: the controller's
/// being-deleted annotation, the rest unchanged.
pub(super) fn pre_content_after_snapshot_delete() -> Value {
    let mut v = pre_content();
    v["metadata"]["annotations"]["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"] =
        json!("yes");
    v
}

/// A dynamic content as the controller and the hostpath driver's sidecar leave it: Delete,
/// from a volume handle, with a full status.
pub(super) fn dynamic_content() -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshotContent",
        "metadata": {
            "name": format!("snapcontent-{DYN_SNAP_UID}"),
            "uid": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
            "resourceVersion": "5120",
            "generation": 1,
            "creationTimestamp": "2026-03-01T10:00:00Z",
            "finalizers": ["snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"]
        },
        "spec": {
            "deletionPolicy": "Delete",
            "driver": "hostpath.csi.k8s.io",
            "source": {"volumeHandle": "0c9e4f2a-7b1d-11f0-9a3c-0242ac120002"},
            "sourceVolumeMode": "Filesystem",
            "volumeSnapshotClassName": "csi-hostpath-snapclass",
            "volumeSnapshotRef": {
                "apiVersion": "snapshot.storage.k8s.io/v1",
                "kind": "VolumeSnapshot",
                "name": "new-snapshot-demo",
                "namespace": "default",
                "resourceVersion": "5101",
                "uid": DYN_SNAP_UID
            }
        },
        "status": {
            "creationTime": 1772362800000000000i64,
            "readyToUse": true,
            "restoreSize": 1073741824,
            "snapshotHandle": "7bdd0de3-7b1e-11f0-9a3c-0242ac120002"
        }
    })
}

/// The dynamic snapshot bound to [`dynamic_content`], with the controller's finalizers.
pub(super) fn dynamic_snapshot() -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": "new-snapshot-demo",
            "namespace": "default",
            "uid": DYN_SNAP_UID,
            "resourceVersion": "5130",
            "generation": 1,
            "creationTimestamp": "2026-03-01T10:00:00Z",
            "finalizers": [
                "snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection",
                "snapshot.storage.kubernetes.io/volumesnapshot-bound-protection"
            ]
        },
        "spec": {
            "source": {"persistentVolumeClaimName": "hpvc"},
            "volumeSnapshotClassName": "csi-hostpath-snapclass"
        },
        "status": {
            "boundVolumeSnapshotContentName": format!("snapcontent-{DYN_SNAP_UID}"),
            "creationTime": "2026-03-01T10:00:01Z",
            "readyToUse": true,
            "restoreSize": "1Gi"
        }
    })
}

pub(super) fn content_of(v: Value) -> SnapshotContent {
    content_with(v, &SnapshotExclusions::default())
}

fn content_with(v: Value, exclusions: &SnapshotExclusions) -> SnapshotContent {
    let o: VolumeSnapshotContentObject =
        serde_json::from_value(v).expect("a VolumeSnapshotContent reads");
    SnapshotContent::read(o, exclusions)
}

pub(super) fn snapshot_of(v: Value) -> Snapshot {
    let o: VolumeSnapshotObject = serde_json::from_value(v).expect("a VolumeSnapshot reads");
    Snapshot::read(o, &SnapshotExclusions::default())
}

/// A lookup that knows one object and answers `other` for every other name.
struct One<T> {
    namespace: Option<&'static str>,
    name: String,
    answer: Found<T>,
    other: Found<T>,
}

/// The snapshot `default/name` answers `answer`; every other one is absent.
fn snapshots(name: &str, answer: Found<SnapshotFacts>) -> One<SnapshotFacts> {
    One {
        namespace: Some("default"),
        name: name.into(),
        answer,
        other: Found::Absent,
    }
}

/// Every snapshot lookup answers `answer` (a stale or forbidden store).
fn every_snapshot(answer: Found<SnapshotFacts>) -> One<SnapshotFacts> {
    One {
        namespace: None,
        name: String::new(),
        answer: answer.clone(),
        other: answer,
    }
}

fn contents(name: &str, answer: Found<ContentFacts>) -> One<ContentFacts> {
    One {
        namespace: None,
        name: name.into(),
        answer,
        other: Found::Absent,
    }
}

fn every_content(answer: Found<ContentFacts>) -> One<ContentFacts> {
    One {
        namespace: None,
        name: String::new(),
        answer: answer.clone(),
        other: answer,
    }
}

impl SnapshotLookup for One<SnapshotFacts> {
    fn snapshot(&self, namespace: &str, name: &str) -> Found<SnapshotFacts> {
        if self.namespace == Some(namespace) && self.name == name {
            self.answer.clone()
        } else {
            self.other.clone()
        }
    }
}

impl ContentLookup for One<ContentFacts> {
    fn content(&self, name: &str) -> Found<ContentFacts> {
        if self.name == name {
            self.answer.clone()
        } else {
            self.other.clone()
        }
    }
}

fn alive(uid: &str) -> Found<SnapshotFacts> {
    Found::Yes(SnapshotFacts {
        uid: uid.into(),
        deleting_since: None,
        source_content: None,
    })
}

fn deleting(uid: &str, since: i64) -> Found<SnapshotFacts> {
    Found::Yes(SnapshotFacts {
        uid: uid.into(),
        deleting_since: Some(now_plus(since)),
        source_content: None,
    })
}

#[track_caller]
fn leftover(v: SnapshotVerdict) -> SnapshotFinding {
    match v {
        SnapshotVerdict::Leftover(f) => *f,
        other => panic!("expected a finding, got {other:?}"),
    }
}

#[track_caller]
fn waiting(
    v: SnapshotVerdict,
) -> (
    SnapshotReason,
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) {
    match v {
        SnapshotVerdict::Waiting { reason, until } => (reason, until),
        other => panic!("expected a held-back state, got {other:?}"),
    }
}

// ---- Reading the API's JSON ----

#[test]
fn a_bound_pre_provisioned_content_reads_as_the_notes_show_it() {
    let c = content_of(pre_content_after_snapshot_delete());
    assert_eq!(&*c.metadata.name, "pre-content");
    assert_eq!(c.metadata.namespace, None);
    assert_eq!(
        c.metadata.uid.as_ref().map(ToString::to_string).as_deref(),
        Some("5d0b7c1e-8f7e-4b8e-a1b2-0c9d8e7f6a5b")
    );
    assert!(c.metadata.snapshot_being_deleted);
    assert_eq!(c.spec.deletion_policy, Some(DeletionPolicy::Retain));
    assert_eq!(c.spec.driver.as_deref(), Some("example.csi.invalid"));
    assert_eq!(
        c.spec.source.snapshot_handle.as_deref(),
        Some("snap-handle-1")
    );
    assert_eq!(c.spec.source.volume_handle, None);
    let r = &c.spec.volume_snapshot_ref;
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref()),
        (Some("default"), Some("pre-snap"))
    );
    assert_eq!(
        r.uid.as_ref().map(ToString::to_string).as_deref(),
        Some(SNAP_UID)
    );
    // No sidecar ran: the content has no status.
    assert_eq!(c.status, None);
    assert_eq!(c.excluded, None);
}

#[test]
fn only_the_annotations_read_are_kept() {
    let o: VolumeSnapshotContentObject =
        serde_json::from_value(pre_content_after_snapshot_delete()).unwrap();
    let kept: Vec<&str> = o
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(
        kept,
        ["snapshot.storage.kubernetes.io/volumesnapshot-being-deleted"]
    );
    assert_eq!(o.metadata.managed_fields, None);
    // Without the annotation, no annotation map at all.
    let o: VolumeSnapshotContentObject = serde_json::from_value(pre_content()).unwrap();
    assert_eq!(o.metadata.annotations, None);
    assert!(
        !SnapshotContent::read(o, &SnapshotExclusions::default())
            .metadata
            .snapshot_being_deleted
    );
}

#[test]
fn a_dynamic_content_reads_its_status() {
    let c = content_of(dynamic_content());
    assert_eq!(c.spec.deletion_policy, Some(DeletionPolicy::Delete));
    assert_eq!(
        c.spec.source.volume_handle.as_deref(),
        Some("0c9e4f2a-7b1d-11f0-9a3c-0242ac120002")
    );
    assert_eq!(c.spec.source_volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(
        c.spec.volume_snapshot_class_name.as_deref(),
        Some("csi-hostpath-snapclass")
    );
    let s = c.status.as_ref().expect("status");
    assert_eq!(s.restore_size, Some(1_073_741_824));
    assert_eq!(s.ready_to_use, Some(true));
    assert_eq!(s.creation_time, Some(1_772_362_800_000_000_000));
    assert_eq!(
        s.snapshot_handle.as_deref(),
        Some("7bdd0de3-7b1e-11f0-9a3c-0242ac120002")
    );
    assert_eq!(
        c.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string())
            .as_deref(),
        Some("2026-03-01T10:00:00Z")
    );
}

#[test]
fn a_snapshot_reads_its_source_and_status() {
    let s = snapshot_of(dynamic_snapshot());
    assert_eq!(&*s.metadata.name, "new-snapshot-demo");
    assert_eq!(s.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        s.spec.source.persistent_volume_claim_name.as_deref(),
        Some("hpvc")
    );
    assert_eq!(s.spec.source.volume_snapshot_content_name, None);
    assert_eq!(
        s.spec.volume_snapshot_class_name.as_deref(),
        Some("csi-hostpath-snapclass")
    );
    let st = s.status.as_ref().expect("status");
    assert_eq!(
        st.bound_volume_snapshot_content_name.as_deref(),
        Some(format!("snapcontent-{DYN_SNAP_UID}").as_str())
    );
    assert_eq!(st.restore_size.as_deref(), Some("1Gi"));
    assert_eq!(st.ready_to_use, Some(true));
}

#[test]
fn a_snapshot_restore_size_may_be_an_integer() {
    // `restoreSize` is int-or-string in the VolumeSnapshot CRD.
    let mut v = dynamic_snapshot();
    v["status"]["restoreSize"] = json!(1_073_741_824);
    let s = snapshot_of(v);
    assert_eq!(
        s.status.unwrap().restore_size.as_deref(),
        Some("1073741824")
    );
}

#[test]
fn a_pre_provisioned_snapshot_and_an_unknown_policy_read() {
    let s = snapshot_of(json!({
        "metadata": {"name": "pre-snap", "namespace": "default", "uid": SNAP_UID},
        "spec": {"source": {"volumeSnapshotContentName": "pre-content"}}
    }));
    assert_eq!(
        s.spec.source.volume_snapshot_content_name.as_deref(),
        Some("pre-content")
    );
    assert_eq!(s.status, None);
    let mut v = pre_content();
    v["spec"]["deletionPolicy"] = json!("Recycle");
    assert_eq!(
        content_of(v).spec.deletion_policy,
        Some(DeletionPolicy::Other)
    );
}

#[test]
fn the_kinds_are_served_where_the_crds_say() {
    assert_eq!(
        VolumeSnapshotContentObject::url_path(&(), None),
        "/apis/snapshot.storage.k8s.io/v1/volumesnapshotcontents"
    );
    assert_eq!(
        VolumeSnapshotObject::url_path(&(), Some("default")),
        "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots"
    );
    assert_eq!(
        <VolumeSnapshotContentObject as Resource>::kind(&()),
        "VolumeSnapshotContent"
    );
    assert_eq!(
        <VolumeSnapshotObject as Resource>::kind(&()),
        "VolumeSnapshot"
    );
    assert_eq!(
        <VolumeSnapshotObject as Resource>::api_version(&()),
        "snapshot.storage.k8s.io/v1"
    );
    let o: VolumeSnapshotContentObject = serde_json::from_value(pre_content()).unwrap();
    assert_eq!(o.meta().name.as_deref(), Some("pre-content"));
    // The lean forms are keyed by name (and namespace), without resourceVersion or uid.
    let c = content_of(pre_content());
    assert_eq!(c.name().as_deref(), Some("pre-content"));
    assert_eq!(c.namespace(), None);
    assert_eq!(c.uid(), None);
    let s = snapshot_of(dynamic_snapshot());
    assert_eq!(s.namespace().as_deref(), Some("default"));
    assert_eq!(s.name().as_deref(), Some("new-snapshot-demo"));
}

#[test]
fn the_lookup_facts_come_from_the_stored_objects() {
    let s = snapshot_of(dynamic_snapshot());
    assert_eq!(
        snapshot_facts(&s),
        SnapshotFacts {
            uid: DYN_SNAP_UID.into(),
            deleting_since: None,
            source_content: None,
        }
    );
    // A pre-provisioned snapshot's content, which binding reads.
    assert_eq!(
        snapshot_facts(&snapshot_of(pre_snapshot_naming("pre-content"))).source_content,
        Some("pre-content".into())
    );
    let mut v = dynamic_snapshot();
    v["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
    assert_eq!(
        snapshot_facts(&snapshot_of(v)).deleting_since,
        Some(now_plus(-60))
    );
    assert_eq!(
        content_facts(&content_of(dynamic_content())).uid,
        "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
    );
}

// ---- Exclusions ----

pub(super) fn velero_labelled(mut v: Value) -> Value {
    v["metadata"]["labels"] = json!({"velero.io/backup-name": "nightly-20260301"});
    v
}

#[test]
fn velero_contents_and_snapshots_are_excluded_by_default() {
    let c = content_of(velero_labelled(pre_content_after_snapshot_delete()));
    assert_eq!(c.excluded, Some(SnapshotExclusion::Selector));
    // Excluded before anything is looked up: even a stale store does not matter.
    assert_eq!(
        classify_content(&c, &every_snapshot(Found::Stale), now(), graces()),
        SnapshotVerdict::Excluded(SnapshotExclusion::Selector)
    );
    let s = snapshot_of(velero_labelled(dynamic_snapshot()));
    assert_eq!(
        classify_snapshot(&s, &every_content(Found::Absent), now()),
        SnapshotVerdict::Excluded(SnapshotExclusion::Selector)
    );
}

#[test]
fn the_exclusion_selector_is_configurable() {
    let none = SnapshotExclusions { selector: None };
    let c = content_with(velero_labelled(pre_content_after_snapshot_delete()), &none);
    assert_eq!(c.excluded, None);
    assert_eq!(
        leftover(classify_content(
            &c,
            &snapshots("x", Found::Absent),
            now(),
            graces()
        ))
        .reason,
        SnapshotReason::SnapshotDeleted
    );
    let kasten = SnapshotExclusions {
        selector: Some(Selector::parse("k10.kasten.io/backup").unwrap()),
    };
    let mut v = pre_content();
    v["metadata"]["labels"] = json!({"k10.kasten.io/backup": "x"});
    assert_eq!(
        content_with(v, &kasten).excluded,
        Some(SnapshotExclusion::Selector)
    );
    assert_eq!(
        content_with(velero_labelled(pre_content()), &kasten).excluded,
        None
    );
}

#[test]
fn the_ignore_label_excludes_whatever_the_selector() {
    let mut v = pre_content();
    v["metadata"]["labels"] = json!({"leftovers.dev/ignore": "true"});
    let c = content_with(v, &SnapshotExclusions { selector: None });
    assert_eq!(c.excluded, Some(SnapshotExclusion::IgnoreLabel));
}

// ---- Content reasons ----

#[test]
fn retain_content_whose_snapshot_was_deleted_is_snapshot_deleted() {
    let c = content_of(pre_content_after_snapshot_delete());
    let f = leftover(classify_content(
        &c,
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleted);
    assert_eq!(
        f.subject,
        SnapshotSubject::Content {
            name: "pre-content".into(),
            uid: "5d0b7c1e-8f7e-4b8e-a1b2-0c9d8e7f6a5b".into()
        }
    );
    assert_eq!(f.snapshot_ref.as_deref(), Some("default/pre-snap"));
    assert_eq!(f.snapshot_uid.as_deref(), Some(SNAP_UID));
    assert_eq!(f.snapshot_uid_now, None);
    assert_eq!(f.deletion_policy, Some(DeletionPolicy::Retain));
    assert_eq!(f.driver.as_deref(), Some("example.csi.invalid"));
    // Pre-provisioned, no status: the handle is the source's.
    assert_eq!(f.snapshot_handle.as_deref(), Some("snap-handle-1"));
    assert!(f.snapshot_delete_seen);
    assert_eq!(
        f.message,
        format!(
            "VolumeSnapshotContent pre-content (Retain) is bound to VolumeSnapshot default/pre-snap (uid {SNAP_UID}), which no longer exists; backend snapshot snap-handle-1 of driver example.csi.invalid"
        )
    );
    // The annotation proves the delete: published at once.
    assert_eq!(grace_kind(&f), GraceKind::None);
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::ZERO, SnapshotClock::Observed)
    );
}

#[test]
fn retain_content_whose_snapshot_is_not_seen_waits_the_grace() {
    // No annotation: the snapshot store may only not have seen a new snapshot yet.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let f = leftover(classify_content(
        &content_of(v),
        &snapshots("new-snapshot-demo", Found::Absent),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleted);
    assert!(!f.snapshot_delete_seen);
    assert_eq!(grace_kind(&f), GraceKind::Grace);
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::from_secs(600), SnapshotClock::Observed)
    );
    // The facts a status carries.
    assert_eq!(
        f.snapshot_handle.as_deref(),
        Some("7bdd0de3-7b1e-11f0-9a3c-0242ac120002")
    );
    assert_eq!(
        f.source_volume_handle.as_deref(),
        Some("0c9e4f2a-7b1d-11f0-9a3c-0242ac120002")
    );
    assert_eq!(f.restore_size_bytes, Some(1_073_741_824));
    assert_eq!(f.class.as_deref(), Some("csi-hostpath-snapclass"));
    assert_eq!(f.driver.as_deref(), Some("hostpath.csi.k8s.io"));
    assert_eq!(f.ready_to_use, Some(true));
}

#[test]
fn retain_content_whose_snapshot_name_has_another_uid_is_snapshot_recreated() {
    // The notes' second run: a new pre-snap, refused by the controller.
    let c = content_of(pre_content_after_snapshot_delete());
    let f = leftover(classify_content(
        &c,
        &snapshots("pre-snap", alive(NEW_UID)),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotRecreated);
    assert_eq!(f.snapshot_uid.as_deref(), Some(SNAP_UID));
    assert_eq!(f.snapshot_uid_now.as_deref(), Some(NEW_UID));
    assert!(
        f.message.contains(SNAP_UID) && f.message.contains(NEW_UID),
        "{}",
        f.message
    );
    assert_eq!(grace_kind(&f), GraceKind::None);
    // Without the annotation, the grace.
    let f = leftover(classify_content(
        &content_of(pre_content()),
        &snapshots("pre-snap", alive(NEW_UID)),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotRecreated);
    assert_eq!(grace_kind(&f), GraceKind::Grace);
}

#[test]
fn delete_content_whose_snapshot_is_gone_is_snapshot_delete_stuck_after_the_delete_grace() {
    let c = content_of(dynamic_content());
    let f = leftover(classify_content(
        &c,
        &snapshots("new-snapshot-demo", Found::Absent),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleteStuck);
    assert_eq!(f.since, None);
    // Not dated by the objects: the caller holds it for the delete grace from first sight.
    assert_eq!(grace_kind(&f), GraceKind::DeleteGrace);
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::from_secs(1800), SnapshotClock::Observed)
    );
    assert_eq!(
        f.message,
        format!(
            "VolumeSnapshotContent snapcontent-{DYN_SNAP_UID} (Delete) whose VolumeSnapshot default/new-snapshot-demo (uid {DYN_SNAP_UID}) is gone; it is not being deleted, and the snapshot-controller never deletes a content whose snapshot is gone; backend snapshot 7bdd0de3-7b1e-11f0-9a3c-0242ac120002 of driver hostpath.csi.k8s.io"
        )
    );
}

#[test]
fn delete_content_being_deleted_is_held_until_the_delete_grace_from_its_deletion() {
    // A normal delete in progress: the controller annotated and deleted the content, the
    // sidecar is deleting the backend snapshot; the snapshot store already lost the snapshot.
    let mut v = dynamic_content();
    v["metadata"]["annotations"] =
        json!({"snapshot.storage.kubernetes.io/volumesnapshot-being-deleted": "yes"});
    v["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
    let c = content_of(v);
    let lookup = snapshots("new-snapshot-demo", Found::Absent);
    let (reason, until) = waiting(classify_content(&c, &lookup, now(), graces()));
    assert_eq!(reason, SnapshotReason::SnapshotDeleteStuck);
    assert_eq!(until, now_plus(-60 + 1800));
    // Still held one second before; a finding at the deadline, dated by the deletion.
    assert!(matches!(
        classify_content(&c, &lookup, now_plus(1739), graces()),
        SnapshotVerdict::Waiting { .. }
    ));
    let f = leftover(classify_content(&c, &lookup, now_plus(1740), graces()));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleteStuck);
    assert_eq!(f.since, Some(now_plus(-60)));
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::from_secs(1800), SnapshotClock::At(now_plus(-60)))
    );
    assert!(
        f.message
            .contains("is being deleted since 2026-03-01T11:59:00Z"),
        "{}",
        f.message
    );
}

#[test]
fn delete_content_whose_snapshot_is_terminating_is_held_from_the_snapshot_deletion() {
    // The backend delete hangs: the snapshot keeps its bound-protection finalizer and stays
    // Terminating; the content is annotated but (in this moment) not yet deleted.
    let mut v = dynamic_content();
    v["metadata"]["annotations"] =
        json!({"snapshot.storage.kubernetes.io/volumesnapshot-being-deleted": "yes"});
    let c = content_of(v);
    let recent = snapshots("new-snapshot-demo", deleting(DYN_SNAP_UID, -120));
    assert_eq!(
        waiting(classify_content(&c, &recent, now(), graces())),
        (SnapshotReason::SnapshotDeleteStuck, now_plus(-120 + 1800))
    );
    let long_ago = snapshots("new-snapshot-demo", deleting(DYN_SNAP_UID, -7200));
    let f = leftover(classify_content(&c, &long_ago, now(), graces()));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleteStuck);
    assert_eq!(f.since, Some(now_plus(-7200)));
    assert!(
        f.message.contains("is being deleted since"),
        "{}",
        f.message
    );
}

#[test]
fn delete_content_of_a_snapshot_held_as_a_restore_source_is_healthy() {
    // A PVC is being restored from the snapshot: the controller keeps the snapshot
    // (as-source-protection) and has neither annotated nor deleted the content, however long
    // the restore takes.
    let c = content_of(dynamic_content());
    let held = snapshots("new-snapshot-demo", deleting(DYN_SNAP_UID, -86_400));
    assert_eq!(
        classify_content(&c, &held, now(), graces()),
        SnapshotVerdict::Healthy
    );
}

#[test]
fn delete_content_whose_snapshot_name_has_another_uid_is_snapshot_delete_stuck_with_both_uids() {
    let c = content_of(dynamic_content());
    let f = leftover(classify_content(
        &c,
        &snapshots("new-snapshot-demo", alive(NEW_UID)),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotDeleteStuck);
    assert_eq!(f.snapshot_uid.as_deref(), Some(DYN_SNAP_UID));
    assert_eq!(f.snapshot_uid_now.as_deref(), Some(NEW_UID));
}

#[test]
fn pre_provisioned_content_never_bound_is_a_finding_after_the_grace_from_its_creation() {
    // As applied in the notes, before the controller bound it: no uid in the ref.
    let mut v = pre_content();
    v["spec"]["volumeSnapshotRef"] = json!({"name": "pre-snap", "namespace": "default"});
    let c = content_of(v);
    // Created at now-3600: long past the grace, and no snapshot names it back.
    let f = leftover(classify_content(
        &c,
        &every_snapshot(Found::Absent),
        now(),
        graces(),
    ));
    assert_eq!(f.reason, SnapshotReason::ContentNeverBound);
    assert_eq!(f.snapshot_uid, None);
    assert_eq!(f.since, Some(now_plus(-3600)));
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::from_secs(600), SnapshotClock::At(now_plus(-3600)))
    );
    assert_eq!(
        f.message,
        "pre-provisioned VolumeSnapshotContent pre-content (Retain) names VolumeSnapshot default/pre-snap, which has never bound it, created 2026-03-01T11:00:00Z; backend snapshot snap-handle-1 of driver example.csi.invalid"
    );
    // Within the grace after its creation it is only waiting to be bound.
    assert_eq!(
        waiting(classify_content(
            &c,
            &every_snapshot(Found::Absent),
            now_plus(-3300),
            graces()
        )),
        (SnapshotReason::ContentNeverBound, now_plus(-3000))
    );
}

/// `pre-content` as applied, before the controller bound it: its ref has no uid.
fn unbound_pre_content() -> Value {
    let mut v = pre_content();
    v["spec"]["volumeSnapshotRef"] = json!({"name": "pre-snap", "namespace": "default"});
    v
}

/// `default/pre-snap` as applied with [`unbound_pre_content`], naming `content`, not bound yet
/// (the controller has not got to it: a backlog of bindings).
fn pre_snapshot_naming(content: &str) -> Value {
    json!({
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": "pre-snap",
            "namespace": "default",
            "uid": SNAP_UID,
            "creationTimestamp": "2026-03-01T11:00:00Z"
        },
        "spec": {"source": {"volumeSnapshotContentName": content}}
    })
}

/// A VolumeSnapshot store holding these objects, answering with [`snapshot_facts`] as the
/// operator's store and `scan`'s listing do.
struct Stored(Vec<Snapshot>);

impl SnapshotLookup for Stored {
    fn snapshot(&self, namespace: &str, name: &str) -> Found<SnapshotFacts> {
        self.0
            .iter()
            .find(|s| {
                s.metadata.namespace.as_deref() == Some(namespace) && &*s.metadata.name == name
            })
            .map_or(Found::Absent, |s| Found::Yes(snapshot_facts(s)))
    }
}

/// Issue 33: 30 pre-provisioned pairs applied at once, bound by the controller over 31 s. A
/// content whose snapshot names it back is being bound, however long the controller takes: no
/// finding, within the grace or long after it.
#[test]
fn a_pre_provisioned_content_its_snapshot_names_is_binding_not_never_bound() {
    let c = content_of(unbound_pre_content());
    let store = Stored(vec![snapshot_of(pre_snapshot_naming("pre-content"))]);
    // Created at now-3600: within the grace at now-3300, long past it at now.
    for at in [now_plus(-3300), now(), now_plus(86_400)] {
        assert_eq!(
            classify_content(&c, &store, at.clone(), graces()),
            SnapshotVerdict::Healthy,
            "at {}",
            at.0
        );
    }
}

/// The snapshot the content names exists but names another content (or a claim, or is being
/// deleted): the content is never bound by it, a finding after the grace as before.
#[test]
fn a_pre_provisioned_content_whose_snapshot_names_something_else_is_never_bound() {
    let c = content_of(unbound_pre_content());
    let of_claim = {
        let mut v = pre_snapshot_naming("pre-content");
        v["spec"]["source"] = json!({"persistentVolumeClaimName": "data"});
        v
    };
    let being_deleted = {
        let mut v = pre_snapshot_naming("pre-content");
        v["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:30:00Z");
        v
    };
    for (case, snapshot) in [
        (
            "names another content",
            pre_snapshot_naming("other-content"),
        ),
        ("of a claim", of_claim),
        ("being deleted", being_deleted),
    ] {
        let store = Stored(vec![snapshot_of(snapshot)]);
        let f = leftover(classify_content(&c, &store, now(), graces()));
        assert_eq!(f.reason, SnapshotReason::ContentNeverBound, "{case}");
        assert_eq!(f.since, Some(now_plus(-3600)), "{case}");
        assert_eq!(
            waiting(classify_content(&c, &store, now_plus(-3300), graces())),
            (SnapshotReason::ContentNeverBound, now_plus(-3000)),
            "{case}"
        );
    }
    // No snapshot of that name at all.
    assert_eq!(
        leftover(classify_content(&c, &Stored(Vec::new()), now(), graces())).reason,
        SnapshotReason::ContentNeverBound
    );
    // In another namespace, a snapshot of that name naming the content does not count.
    let mut elsewhere = pre_snapshot_naming("pre-content");
    elsewhere["metadata"]["namespace"] = json!("other");
    let store = Stored(vec![snapshot_of(elsewhere)]);
    assert_eq!(
        leftover(classify_content(&c, &store, now(), graces())).reason,
        SnapshotReason::ContentNeverBound
    );
}

/// Past the grace, a snapshot store that cannot say whether the snapshot names the content
/// back concludes nothing (within the grace the content is only waiting, as before).
#[test]
fn a_stale_or_forbidden_snapshot_store_decides_nothing_about_an_unbound_content() {
    let c = content_of(unbound_pre_content());
    for (answer, stale) in [(Found::Stale, true), (Found::Unknown, false)] {
        let undecided = classify_content(&c, &every_snapshot(answer.clone()), now(), graces());
        let expected = if stale {
            SnapshotUndecided::SnapshotStoreStale {
                content: "pre-content".into(),
            }
        } else {
            SnapshotUndecided::SnapshotsForbidden {
                content: "pre-content".into(),
            }
        };
        assert_eq!(undecided, SnapshotVerdict::Undecided(expected));
        assert_eq!(
            waiting(classify_content(
                &c,
                &every_snapshot(answer),
                now_plus(-3300),
                graces()
            )),
            (SnapshotReason::ContentNeverBound, now_plus(-3000))
        );
    }
}

/// The pair names each other: the snapshot's source is the content, and the uid the content's
/// ref carries, when it has one, is the snapshot's.
#[test]
fn binding_is_a_mutual_reference_with_a_fitting_uid() {
    use crate::decide::snapshot::binding;
    let facts = |source: Option<&str>, uid: &str, deleting: bool| SnapshotFacts {
        uid: uid.into(),
        deleting_since: deleting.then(now),
        source_content: source.map(str::to_string),
    };
    let unbound = content_of(unbound_pre_content());
    let bound = content_of(pre_content());
    assert!(binding(
        &unbound,
        &facts(Some("pre-content"), SNAP_UID, false)
    ));
    assert!(binding(
        &unbound,
        &facts(Some("pre-content"), NEW_UID, false)
    ));
    assert!(binding(
        &bound,
        &facts(Some("pre-content"), SNAP_UID, false)
    ));
    assert!(
        !binding(&bound, &facts(Some("pre-content"), NEW_UID, false)),
        "bound to another uid: the controller refuses the new snapshot"
    );
    assert!(!binding(
        &unbound,
        &facts(Some("other-content"), SNAP_UID, false)
    ));
    assert!(!binding(&unbound, &facts(None, SNAP_UID, false)));
    assert!(
        !binding(&unbound, &facts(Some("pre-content"), SNAP_UID, true)),
        "a snapshot being deleted binds nothing"
    );
}

#[test]
fn retain_bound_content_whose_snapshot_is_alive_or_being_deleted_is_healthy() {
    let c = content_of(pre_content());
    for answer in [alive(SNAP_UID), deleting(SNAP_UID, -7200)] {
        assert_eq!(
            classify_content(&c, &snapshots("pre-snap", answer), now(), graces()),
            SnapshotVerdict::Healthy
        );
    }
}

#[test]
fn delete_bound_content_whose_snapshot_is_alive_is_healthy() {
    let c = content_of(dynamic_content());
    assert_eq!(
        classify_content(
            &c,
            &snapshots("new-snapshot-demo", alive(DYN_SNAP_UID)),
            now(),
            graces()
        ),
        SnapshotVerdict::Healthy
    );
}

#[test]
fn a_snapshot_of_the_same_name_in_another_namespace_does_not_count() {
    let c = content_of(pre_content_after_snapshot_delete());
    let elsewhere = One {
        namespace: Some("other"),
        name: "pre-snap".into(),
        answer: alive(SNAP_UID),
        other: Found::Absent,
    };
    assert_eq!(
        leftover(classify_content(&c, &elsewhere, now(), graces())).reason,
        SnapshotReason::SnapshotDeleted
    );
}

// ---- Tombstones ----

#[test]
fn a_deleted_retain_content_leaves_a_tombstone_with_its_backend_snapshot() {
    // The notes' `kubectl delete volumesnapshotcontent pre-content`, once its finalizer went.
    let c = content_of(pre_content_after_snapshot_delete());
    let f = tombstone(&c, now_plus(-30)).expect("a tombstone");
    assert_eq!(f.reason, SnapshotReason::ContentDeleted);
    assert_eq!(f.snapshot_handle.as_deref(), Some("snap-handle-1"));
    assert_eq!(f.driver.as_deref(), Some("example.csi.invalid"));
    assert_eq!(f.snapshot_uid.as_deref(), Some(SNAP_UID));
    assert_eq!(f.since, Some(now_plus(-30)));
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::ZERO, SnapshotClock::At(now_plus(-30)))
    );
    assert_eq!(
        f.message,
        format!(
            "VolumeSnapshotContent pre-content (Retain), bound to VolumeSnapshot default/pre-snap (uid {SNAP_UID}), was deleted at 2026-03-01T11:59:30Z; its backend snapshot was kept; backend snapshot snap-handle-1 of driver example.csi.invalid"
        )
    );
    // A dynamic Retain content keeps its size, class and source volume.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let f = tombstone(&content_of(v), now()).expect("a tombstone");
    assert_eq!(f.restore_size_bytes, Some(1_073_741_824));
    assert_eq!(f.class.as_deref(), Some("csi-hostpath-snapclass"));
    assert_eq!(
        f.source_volume_handle.as_deref(),
        Some("0c9e4f2a-7b1d-11f0-9a3c-0242ac120002")
    );
}

#[test]
fn deleting_a_delete_content_an_excluded_one_or_one_without_a_handle_leaves_no_tombstone() {
    // The sidecar deletes a Delete content's backend snapshot before the content goes.
    assert_eq!(tombstone(&content_of(dynamic_content()), now()), None);
    assert_eq!(
        tombstone(&content_of(velero_labelled(pre_content())), now()),
        None
    );
    // A Retain content whose snapshot was never cut names no backend snapshot.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    v.as_object_mut().unwrap().remove("status");
    assert_eq!(tombstone(&content_of(v), now()), None);
}

// ---- Forbidden and stale stores ----

#[test]
fn a_forbidden_or_stale_snapshot_store_decides_nothing_about_a_bound_content() {
    for v in [pre_content_after_snapshot_delete(), dynamic_content()] {
        let c = content_of(v);
        let name = c.metadata.name.to_string();
        assert_eq!(
            classify_content(&c, &every_snapshot(Found::Unknown), now(), graces()),
            SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotsForbidden {
                content: name.clone()
            })
        );
        assert_eq!(
            classify_content(&c, &every_snapshot(Found::Stale), now(), graces()),
            SnapshotVerdict::Undecided(SnapshotUndecided::SnapshotStoreStale { content: name })
        );
    }
}

#[test]
fn a_forbidden_or_stale_content_store_decides_nothing_about_a_snapshot() {
    let s = snapshot_of(dynamic_snapshot());
    let key = "default/new-snapshot-demo".to_string();
    assert_eq!(
        classify_snapshot(&s, &every_content(Found::Unknown), now()),
        SnapshotVerdict::Undecided(SnapshotUndecided::ContentsForbidden {
            snapshot: key.clone()
        })
    );
    assert_eq!(
        classify_snapshot(&s, &every_content(Found::Stale), now()),
        SnapshotVerdict::Undecided(SnapshotUndecided::ContentStoreStale { snapshot: key })
    );
}

#[test]
fn the_undecided_sentences_name_the_object() {
    let s = SnapshotUndecided::SnapshotsForbidden {
        content: "pre-content".into(),
    }
    .to_string();
    assert!(
        s.contains("VolumeSnapshots cannot be read") && s.contains("pre-content"),
        "{s}"
    );
}

// ---- Snapshot reasons ----

#[test]
fn bound_snapshot_whose_content_is_gone_is_snapshot_content_missing() {
    let s = snapshot_of(dynamic_snapshot());
    let content = format!("snapcontent-{DYN_SNAP_UID}");
    let f = leftover(classify_snapshot(
        &s,
        &contents(&content, Found::Absent),
        now(),
    ));
    assert_eq!(f.reason, SnapshotReason::SnapshotContentMissing);
    assert_eq!(
        f.subject,
        SnapshotSubject::Snapshot {
            namespace: "default".into(),
            name: "new-snapshot-demo".into(),
            uid: DYN_SNAP_UID.into()
        }
    );
    assert_eq!(f.content_name.as_deref(), Some(content.as_str()));
    assert_eq!(f.source_claim.as_deref(), Some("hpvc"));
    assert_eq!(f.restore_size_bytes, Some(1_073_741_824));
    assert_eq!(f.class.as_deref(), Some("csi-hostpath-snapclass"));
    assert_eq!(
        f.message,
        format!(
            "VolumeSnapshot default/new-snapshot-demo is bound to VolumeSnapshotContent {content}, which no longer exists"
        )
    );
    assert_eq!(
        grace_of(&f, graces()),
        (Duration::from_secs(600), SnapshotClock::Observed)
    );
}

#[test]
fn bound_snapshot_whose_content_exists_is_healthy() {
    let s = snapshot_of(dynamic_snapshot());
    let content = format!("snapcontent-{DYN_SNAP_UID}");
    let facts = Found::Yes(ContentFacts {
        uid: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d".into(),
    });
    assert_eq!(
        classify_snapshot(&s, &contents(&content, facts), now()),
        SnapshotVerdict::Healthy
    );
}

#[test]
fn a_snapshot_not_bound_yet_is_healthy() {
    // Just created: no status yet; or refused by the controller (the notes' second run).
    let fresh = snapshot_of(json!({
        "metadata": {"name": "pre-snap", "namespace": "default", "uid": NEW_UID},
        "spec": {"source": {"volumeSnapshotContentName": "pre-content"}}
    }));
    let refused = snapshot_of(json!({
        "metadata": {"name": "pre-snap", "namespace": "default", "uid": NEW_UID},
        "spec": {"source": {"volumeSnapshotContentName": "pre-content"}},
        "status": {
            "error": {
                "message": "VolumeSnapshotContent [pre-content] is bound to a different snapshot",
                "time": "2026-03-01T11:59:57Z"
            },
            "readyToUse": false
        }
    }));
    for s in [fresh, refused] {
        assert_eq!(
            classify_snapshot(&s, &every_content(Found::Absent), now()),
            SnapshotVerdict::Healthy
        );
    }
}

// ---- Transient states of a normal delete ----

#[test]
fn a_snapshot_being_deleted_is_never_a_finding() {
    // Its content goes first; whatever the content store says, nothing is published.
    let mut v = dynamic_snapshot();
    v["metadata"]["deletionTimestamp"] = json!("2026-03-01T09:00:00Z");
    let s = snapshot_of(v);
    for answer in [Found::Absent, Found::Stale, Found::Unknown] {
        assert_eq!(
            classify_snapshot(&s, &every_content(answer), now()),
            SnapshotVerdict::Healthy
        );
    }
}

#[test]
fn every_step_of_a_normal_delete_publishes_nothing() {
    // A Delete snapshot deleted at `now`, each step a few seconds apart, each seen with the
    // snapshot store either up to date or one step behind.
    let content_name = format!("snapcontent-{DYN_SNAP_UID}");
    let mut annotated = dynamic_content();
    annotated["metadata"]["annotations"] =
        json!({"snapshot.storage.kubernetes.io/volumesnapshot-being-deleted": "yes"});
    let mut content_deleting = annotated.clone();
    content_deleting["metadata"]["deletionTimestamp"] = json!("2026-03-01T12:00:01Z");
    let mut snap_deleting = dynamic_snapshot();
    snap_deleting["metadata"]["deletionTimestamp"] = json!("2026-03-01T12:00:00Z");

    let alive_snap = alive(DYN_SNAP_UID);
    let deleting_snap = deleting(DYN_SNAP_UID, 0);
    let steps: [(Option<Value>, Found<SnapshotFacts>); 5] = [
        (Some(dynamic_content()), deleting_snap.clone()),
        (Some(annotated.clone()), deleting_snap.clone()),
        (Some(content_deleting.clone()), deleting_snap.clone()),
        (Some(content_deleting.clone()), alive_snap),
        // The snapshot store saw the snapshot go before the content store saw the content go.
        (Some(content_deleting), Found::Absent),
    ];
    for (at, (content, snapshot)) in steps.into_iter().enumerate() {
        let t = now_plus(at as i64 * 5);
        if let Some(c) = content {
            let v = classify_content(
                &content_of(c),
                &snapshots("new-snapshot-demo", snapshot),
                t.clone(),
                graces(),
            );
            assert!(
                matches!(
                    v,
                    SnapshotVerdict::Healthy | SnapshotVerdict::Waiting { .. }
                ),
                "step {at}: {v:?}"
            );
        }
        // The snapshot, terminating throughout, with its content present or gone.
        let s = snapshot_of(snap_deleting.clone());
        for answer in [Found::Absent, Found::Yes(ContentFacts { uid: "x".into() })] {
            assert_eq!(
                classify_snapshot(&s, &contents(&content_name, answer), t.clone()),
                SnapshotVerdict::Healthy,
                "step {at}"
            );
        }
    }
}

// ---- Skips ----

#[test]
fn odd_contents_are_skipped() {
    let mut no_uid = pre_content();
    no_uid["metadata"].as_object_mut().unwrap().remove("uid");
    let mut no_policy = pre_content();
    no_policy["spec"]
        .as_object_mut()
        .unwrap()
        .remove("deletionPolicy");
    let mut no_ref = pre_content();
    no_ref["spec"]
        .as_object_mut()
        .unwrap()
        .remove("volumeSnapshotRef");
    let mut dynamic_unbound = dynamic_content();
    dynamic_unbound["spec"]["volumeSnapshotRef"]
        .as_object_mut()
        .unwrap()
        .remove("uid");
    for (v, mentions) in [
        (no_uid, "no metadata.uid"),
        (no_policy, "deletionPolicy"),
        (no_ref, "volumeSnapshotRef"),
        (dynamic_unbound, "neither a snapshotHandle"),
    ] {
        match classify_content(
            &content_of(v),
            &every_snapshot(Found::Absent),
            now(),
            graces(),
        ) {
            SnapshotVerdict::Skip(why) => assert!(why.contains(mentions), "{why}"),
            other => panic!("expected a skip mentioning {mentions:?}, got {other:?}"),
        }
    }
}

#[test]
fn the_reason_names_read_like_the_volume_reasons() {
    let names: Vec<&str> = [
        SnapshotReason::SnapshotDeleted,
        SnapshotReason::SnapshotRecreated,
        SnapshotReason::SnapshotDeleteStuck,
        SnapshotReason::ContentNeverBound,
        SnapshotReason::SnapshotContentMissing,
        SnapshotReason::ContentDeleted,
    ]
    .iter()
    .map(|r| r.as_str())
    .collect();
    assert_eq!(
        names,
        [
            "SnapshotDeleted",
            "SnapshotRecreated",
            "SnapshotDeleteStuck",
            "ContentNeverBound",
            "SnapshotContentMissing",
            "ContentDeleted"
        ]
    );
    assert_eq!(
        SnapshotReason::SnapshotDeleted.to_string(),
        "SnapshotDeleted"
    );
}

// ---- What `scan` prints of a snapshot finding ----

fn snapshot_prices() -> crate::model::price::PriceTable {
    crate::model::price::PriceTable::parse(
        "currency: USD\nsnapshots:\n  - driver: hostpath.csi.k8s.io\n    perGiBMonth: \"0.05\"\n",
    )
    .expect("a table")
}

fn line_of(f: &SnapshotFinding, cost: Option<&crate::model::crd::CostEstimate>) -> Value {
    let mut out = Vec::new();
    let row = crate::scan::snapshots::SnapshotRow {
        finding: f.clone(),
        cost: cost.cloned(),
    };
    crate::scan::snapshots::write(&mut out, &[row], crate::scan::Format::Jsonl).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.ends_with('\n') && text.matches('\n').count() == 1,
        "{text}"
    );
    // The original tool's separators, as the volume lines have them.
    assert!(
        text.contains("\"kind\": \"VolumeSnapshotContent\"")
            || text.contains("\"kind\": \"VolumeSnapshot\""),
        "{text}"
    );
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_scan_line_names_the_content_its_snapshot_and_the_backend_snapshot() {
    let c = content_of(pre_content_after_snapshot_delete());
    let f = leftover(classify_content(
        &c,
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    let v = line_of(&f, None);
    let mut text = Vec::new();
    let row = crate::scan::snapshots::SnapshotRow {
        finding: f.clone(),
        cost: None,
    };
    crate::scan::snapshots::write(&mut text, &[row], crate::scan::Format::Jsonl).unwrap();
    let text = String::from_utf8(text).unwrap();
    // The keys in the order they are printed.
    let mut keys: Vec<(usize, &str)> = v
        .as_object()
        .unwrap()
        .keys()
        .map(|k| (text.find(&format!("\"{k}\": ")).expect(k), k.as_str()))
        .collect();
    keys.sort();
    let keys: Vec<&str> = keys.into_iter().map(|(_, k)| k).collect();
    assert_eq!(
        keys,
        [
            "name",
            "kind",
            "reason",
            "uid",
            "content",
            "snapshot",
            "snapshot_uid",
            "snapshot_current_uid",
            "deletion_policy",
            "driver",
            "snapshot_handle",
            "volume_handle",
            "source_claim",
            "restore_size_bytes",
            "snapshot_class",
            "ready_to_use",
            "since",
            "message"
        ]
    );
    assert_eq!(v["name"], "pre-content");
    assert_eq!(v["reason"], "SnapshotDeleted");
    assert_eq!(v["snapshot"], "default/pre-snap");
    assert_eq!(v["snapshot_uid"], SNAP_UID);
    assert_eq!(v["deletion_policy"], "Retain");
    assert_eq!(v["snapshot_handle"], "snap-handle-1");
    assert_eq!(v["since"], Value::Null);
    assert_eq!(v["message"], json!(f.message));
}

#[test]
fn a_scan_line_of_a_snapshot_goes_by_namespace_and_name() {
    let s = snapshot_of(dynamic_snapshot());
    let f = leftover(classify_snapshot(
        &s,
        &contents(&format!("snapcontent-{DYN_SNAP_UID}"), Found::Absent),
        now(),
    ));
    let v = line_of(&f, None);
    assert_eq!(v["name"], "default/new-snapshot-demo");
    assert_eq!(v["kind"], "VolumeSnapshot");
    assert_eq!(v["reason"], "SnapshotContentMissing");
    assert_eq!(v["source_claim"], "hpvc");
    assert_eq!(v["restore_size_bytes"], 1_073_741_824i64);
    assert_eq!(v["content"], format!("snapcontent-{DYN_SNAP_UID}"));
}

#[test]
fn a_snapshot_is_priced_by_its_driver_and_accrues_only_from_a_date_the_objects_carry() {
    let table = snapshot_prices();
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let c = content_of(v);
    // A tombstone is dated by its delete: 1 GiB at 0.05 a month, 30 whole days of it.
    let f = tombstone(&c, now_plus(-30 * 86_400 - 60)).expect("a tombstone");
    let cost = crate::scan::snapshots::snapshot_cost(&f, &table, &now()).expect("priced");
    assert_eq!(cost.monthly_minor_units, 5);
    // 5 cents × 30 × 24 h / 730 h = 4.93 cents: 5.
    assert_eq!(cost.accrued_minor_units, 5);
    assert_eq!(cost.priced_by, "driver hostpath.csi.k8s.io");
    let line = line_of(&f, Some(&cost));
    assert_eq!(line["monthly_cost_minor_units"], 5);
    assert_eq!(line["accrued_cost_minor_units"], 5);
    assert_eq!(line["cost_since"], "2026-01-30T11:59:00Z");
    // A SnapshotDeleted the objects do not date: the monthly amount only.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let f = leftover(classify_content(
        &content_of(v),
        &snapshots("new-snapshot-demo", Found::Absent),
        now(),
        graces(),
    ));
    assert_eq!(f.since, None);
    let cost = crate::scan::snapshots::snapshot_cost(&f, &table, &now()).expect("priced");
    assert_eq!(cost.display, "0.05 USD/month");
    let line = line_of(&f, Some(&cost));
    assert_eq!(line["monthly_cost_minor_units"], 5);
    assert!(line.get("accrued_cost_minor_units").is_none(), "{line}");
    assert!(line.get("cost_since").is_none(), "{line}");
    // No row for the driver, or no size: no cost.
    let mut other = f.clone();
    other.driver = Some("ebs.csi.aws.com".into());
    assert_eq!(
        crate::scan::snapshots::snapshot_cost(&other, &table, &now()),
        None
    );
    let mut sizeless = f.clone();
    sizeless.restore_size_bytes = None;
    assert_eq!(
        crate::scan::snapshots::snapshot_cost(&sizeless, &table, &now()),
        None
    );
}

#[test]
fn a_scan_looks_again_only_at_states_the_objects_do_not_date() {
    use crate::scan::snapshots::needs_second_look;
    // Not seen deleted: could be a snapshot created after the scan listed the snapshots.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let f = leftover(classify_content(
        &content_of(v),
        &snapshots("new-snapshot-demo", Found::Absent),
        now(),
        graces(),
    ));
    assert!(needs_second_look(&f, graces()), "{f:?}");
    // The being-deleted annotation proves the delete: no second look.
    let f = leftover(classify_content(
        &content_of(pre_content_after_snapshot_delete()),
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    assert!(!needs_second_look(&f, graces()));
    // A content whose snapshot is gone: the content's finding can be a delete just done.
    let s = snapshot_of(dynamic_snapshot());
    let f = leftover(classify_snapshot(
        &s,
        &contents(&format!("snapcontent-{DYN_SNAP_UID}"), Found::Absent),
        now(),
    ));
    assert!(needs_second_look(&f, graces()));
    // A tombstone is dated.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let f = tombstone(&content_of(v), now()).expect("a tombstone");
    assert!(!needs_second_look(&f, graces()));
}

#[test]
fn a_scan_table_of_snapshots_is_printed_only_when_there_is_one() {
    let mut out = Vec::new();
    crate::scan::snapshots::write(&mut out, &[], crate::scan::Format::Table).unwrap();
    assert!(out.is_empty());
    let c = content_of(pre_content_after_snapshot_delete());
    let f = leftover(classify_content(
        &c,
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    let row = crate::scan::snapshots::SnapshotRow {
        finding: f,
        cost: None,
    };
    crate::scan::snapshots::write(&mut out, &[row], crate::scan::Format::Table).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "", "a blank line after the volumes' table");
    assert!(lines[1].starts_with("SNAPSHOT-OBJECT   KIND"), "{text}");
    assert!(
        lines[2].starts_with("pre-content       VolumeSnapshotContent   SnapshotDeleted   Retain   default/pre-snap   example.csi.invalid   <none>"),
        "{text}"
    );
}

#[test]
fn a_scan_with_a_snapshot_finding_found_one_and_a_failed_second_look_makes_it_incomplete() {
    use crate::scan::{Outcome, ScanResult};
    let mut report = ScanResult::default();
    assert_eq!(Outcome::of(&report), Outcome::Clean);
    let f = leftover(classify_content(
        &content_of(pre_content_after_snapshot_delete()),
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    report
        .snapshots
        .findings
        .push(crate::scan::snapshots::SnapshotRow {
            finding: f,
            cost: None,
        });
    assert_eq!(Outcome::of(&report), Outcome::Found, "exit 3");
    report
        .snapshots
        .unknown
        .push("second look at VolumeSnapshot snaps/x failed".into());
    assert_eq!(Outcome::of(&report), Outcome::Incomplete, "exit 4");
}

// ---- A snapshot finding as a VolumeLeftover ----

#[test]
fn a_snapshot_finding_becomes_a_volumeleftover_status_with_its_objects() {
    use crate::decide::snapshot::as_finding;
    use crate::model::crd::{Reason, Subject};
    let f = leftover(classify_content(
        &content_of(pre_content_after_snapshot_delete()),
        &snapshots("pre-snap", Found::Absent),
        now(),
        graces(),
    ));
    let vl = as_finding(&f, &now());
    assert_eq!(vl.name(), PRE_CONTENT_LEFTOVER);
    assert_eq!(vl.volume_name, "", "no volume");
    let s = &vl.status;
    assert_eq!(s.reason, Reason::SnapshotDeleted);
    assert_eq!(s.subject, Subject::SnapshotContent);
    assert_eq!(s.message, f.message);
    assert_eq!(s.first_seen, now());
    assert_eq!(s.deleted_at, None);
    assert_eq!(s.source.kind, "csi");
    assert_eq!(s.source.driver.as_deref(), Some("example.csi.invalid"));
    let info = s.snapshot.as_ref().expect("status.snapshot");
    assert_eq!(info.content.as_deref(), Some("pre-content"));
    assert_eq!(info.snapshot.as_deref(), Some("default/pre-snap"));
    assert_eq!(info.snapshot_uid.as_deref(), Some(SNAP_UID));
    assert_eq!(info.deletion_policy.as_deref(), Some("Retain"));
    assert_eq!(info.snapshot_handle.as_deref(), Some("snap-handle-1"));
    // The status serializes with the CRD's names.
    let json = serde_json::to_value(s).unwrap();
    assert_eq!(json["subject"], "SnapshotContent");
    assert_eq!(json["snapshot"]["snapshotUID"], SNAP_UID);
    assert_eq!(json["snapshot"]["snapshotHandle"], "snap-handle-1");

    // A tombstone is dated by its delete, and priced from then by the driver's snapshot row.
    let mut v = dynamic_content();
    v["spec"]["deletionPolicy"] = json!("Retain");
    let t = tombstone(&content_of(v), now_plus(-30 * 86_400 - 60)).expect("a tombstone");
    let vl = as_finding(&t, &now());
    assert_eq!(vl.status.reason, Reason::ContentDeleted);
    assert_eq!(vl.status.deleted_at, Some(now_plus(-30 * 86_400 - 60)));
    assert_eq!(vl.status.capacity.as_deref(), Some("1Gi"));
    assert_eq!(
        vl.status.source.volume_handle.as_deref(),
        Some("0c9e4f2a-7b1d-11f0-9a3c-0242ac120002")
    );
    let cost = crate::decide::cost::estimate(&vl.status, &snapshot_prices(), &now())
        .expect("priced by the driver's snapshot row");
    assert_eq!(
        Some(cost),
        crate::scan::snapshots::snapshot_cost(&t, &snapshot_prices(), &now()),
        "the operator's estimate and scan's agree"
    );
}

/// The name of `pre-content`'s finding: pinned, since a VolumeLeftover's name must never change.
const PRE_CONTENT_LEFTOVER: &str = "vsc-cc5c394b7cd7ec36-pre-content";

#[test]
fn snapshot_findings_are_named_apart_from_volumes_and_from_each_other() {
    use crate::decide::snapshot::leftover_name;
    let content = |name: &str| SnapshotSubject::Content {
        name: name.into(),
        uid: "u".into(),
    };
    let snapshot = |ns: &str, name: &str| SnapshotSubject::Snapshot {
        namespace: ns.into(),
        name: name.into(),
        uid: "u".into(),
    };
    assert_eq!(leftover_name(&content("pre-content")), PRE_CONTENT_LEFTOVER);
    let a = leftover_name(&snapshot("a-b", "c"));
    let b = leftover_name(&snapshot("a", "b-c"));
    assert!(a.starts_with("vs-") && a.ends_with("-a-b-c"), "{a}");
    assert_ne!(a, b, "the namespace is hashed apart from the name");
    assert_ne!(
        leftover_name(&content("x")),
        leftover_name(&snapshot("default", "x"))
    );
}
