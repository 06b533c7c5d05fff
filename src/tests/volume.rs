//! The lean forms the stores keep: what is shared, what is boxed, what is kept.

use std::sync::Arc;

use super::fixtures::*;
use crate::decide::lookup::{Claim, ClaimObject};
use crate::model::intern::{CAP, intern};
use crate::model::volume::Volume;

#[test]
fn interned_strings_are_one_allocation_shared() {
    let a = intern("interned-test-standard");
    let b = intern(&String::from("interned-test-standard"));
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(&*a, "interned-test-standard");
}

#[test]
fn the_interner_stays_bounded_and_still_answers_when_full() {
    // Far more distinct strings than the cap, none held elsewhere: the set prunes what nobody
    // holds, and every answer is the string asked for.
    let held: Vec<Arc<str>> = (0..CAP / 2).map(|i| intern(&format!("held-{i}"))).collect();
    for i in 0..CAP * 2 {
        let s = format!("transient-{i}");
        assert_eq!(&*intern(&s), s);
        assert!(
            crate::model::intern::len() <= CAP,
            "the set grew past its cap"
        );
    }
    // What is held is still shared.
    assert!(Arc::ptr_eq(&held[0], &intern("held-0")));
}

/// The mariadb PV under another name.
fn mariadb_named(name: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
    let mut p = mariadb_pv();
    p.metadata.name = Some(name.into());
    p
}

#[test]
fn volumes_share_their_repeated_strings() {
    let (a, b) = (
        Volume::from(&mariadb_named("mariadb-pv")),
        Volume::from(&mariadb_named("other-pv")),
    );
    let (sa, sb) = (a.spec.as_ref().unwrap(), b.spec.as_ref().unwrap());
    let class = |s: &crate::model::volume::VolumeSpec| s.storage_class_name.clone().unwrap();
    assert!(Arc::ptr_eq(&class(sa), &class(sb)));
    let ns = |s: &crate::model::volume::VolumeSpec| {
        s.claim_ref.as_ref().unwrap().namespace.clone().unwrap()
    };
    assert!(Arc::ptr_eq(&ns(sa), &ns(sb)));
    let phase = |v: &Volume| v.status.as_ref().unwrap().phase.clone().unwrap();
    assert!(Arc::ptr_eq(&phase(&a), &phase(&b)));
}

#[test]
fn a_csi_volume_has_no_in_tree_box_and_an_in_tree_one_has_it() {
    let csi = Volume::from(&pv("a").csi("rbd.csi.ceph.com", "0001-handle", []));
    assert!(csi.spec.as_ref().unwrap().in_tree.is_none());
    let nfs = Volume::from(&pv("b").nfs("nfs.example", "/exports/b"));
    let t = nfs
        .spec
        .as_ref()
        .unwrap()
        .in_tree
        .as_deref()
        .expect("boxed");
    assert_eq!(
        t.nfs.as_ref().map(|n| n.server.as_str()),
        Some("nfs.example")
    );
}

#[test]
fn a_claim_keeps_the_facts_scan_reads() {
    let mut meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        namespace: Some("mariadb".into()),
        name: Some("mariadb".into()),
        uid: Some("uid-1".into()),
        ..Default::default()
    };
    let c = Claim::of(&meta.clone().into());
    assert_eq!(
        c.facts(),
        crate::decide::lookup::claim_facts(&meta.clone().into())
    );
    assert!(!c.terminating);
    meta.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        jiff::Timestamp::UNIX_EPOCH,
    ));
    assert!(Claim::of(&meta.into()).terminating);
}

/// A claim as the API server sends it, Bound, asking for `requested` and having `capacity`, with
/// these status fields besides.
fn sized_claim(requested: &str, capacity: &str, status: serde_json::Value) -> ClaimObject {
    let mut s = serde_json::json!({"phase": "Bound", "capacity": {"storage": capacity}});
    for (k, v) in status.as_object().into_iter().flatten() {
        s[k] = v.clone();
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "team-a", "uid": "u-1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                 "resources": {"requests": {"storage": requested}}, "volumeName": "pv-1"},
        "status": s,
    }))
    .expect("a claim")
}

#[test]
fn a_claim_keeps_its_expansion_only_while_it_asks_for_more_than_it_has() {
    use crate::model::expansion::{ClaimSize, ResizeStep, Uncomparable};
    let settled = Claim::of(&sized_claim("10Gi", "10Gi", serde_json::json!({})));
    assert_eq!(settled.size, ClaimSize::Settled);
    // A backend that rounds up gives more than asked: not an expansion.
    let rounded = Claim::of(&sized_claim("10G", "10Gi", serde_json::json!({})));
    assert_eq!(rounded.size, ClaimSize::Settled);
    // Written differently, the same size.
    let same = Claim::of(&sized_claim("10240Mi", "10Gi", serde_json::json!({})));
    assert_eq!(same.size, ClaimSize::Settled);

    let raised = Claim::of(&sized_claim("20Gi", "10Gi", serde_json::json!({})));
    let ClaimSize::Expanding(e) = &raised.size else {
        panic!("{:?}", raised.size)
    };
    assert_eq!(
        (
            &*e.requested,
            e.requested_bytes,
            &*e.capacity,
            e.capacity_bytes
        ),
        ("20Gi", 20 << 30, "10Gi", 10 << 30)
    );
    assert_eq!(e.step, ResizeStep::NotStarted);
    assert_eq!(e.since(), None);
    assert_eq!(
        Claim::of(&sized_claim("20Gi", "10Gi", serde_json::json!({}))).facts(),
        raised.facts()
    );

    let infeasible = Claim::of(&sized_claim(
        "20Gi",
        "10Gi",
        serde_json::json!({
            "allocatedResources": {"storage": "20Gi"},
            "allocatedResourceStatuses": {"storage": "ControllerResizeInfeasible"},
            "conditions": [
                {"type": "ControllerResizeError", "status": "True",
                 "lastTransitionTime": "2026-12-01T10:00:00Z", "message": "no room"},
                {"type": "ModifyVolumeError", "status": "True",
                 "lastTransitionTime": "2026-11-01T10:00:00Z", "message": "not a resize"},
                {"type": "Resizing", "status": "False",
                 "lastTransitionTime": "2026-11-01T10:00:00Z"},
            ],
        }),
    ));
    let ClaimSize::Expanding(e) = &infeasible.size else {
        panic!("{:?}", infeasible.size)
    };
    assert_eq!(e.step, ResizeStep::ControllerInfeasible);
    assert_eq!(e.allocated.as_deref(), Some("20Gi"));
    assert_eq!(
        e.conditions.iter().map(|c| &*c.kind).collect::<Vec<_>>(),
        ["ControllerResizeError"],
        "only resize conditions that hold"
    );
    assert_eq!(
        e.since().map(|t| t.0.to_string()).as_deref(),
        Some("2026-12-01T10:00:00Z")
    );

    let steps = [
        (
            "ControllerResizeInProgress",
            None,
            ResizeStep::ControllerInProgress,
        ),
        (
            "ControllerResizeInProgress",
            Some("ControllerResizeError"),
            ResizeStep::ControllerFailed,
        ),
        (
            "NodeResizePending",
            Some("FileSystemResizePending"),
            ResizeStep::NodePending,
        ),
        ("NodeResizeInProgress", None, ResizeStep::NodeInProgress),
        (
            "NodeResizeInProgress",
            Some("NodeResizeError"),
            ResizeStep::NodeFailed,
        ),
        (
            "NodeResizeInfeasible",
            Some("NodeResizeError"),
            ResizeStep::NodeInfeasible,
        ),
        ("", Some("FileSystemResizePending"), ResizeStep::NodePending),
        ("", Some("Resizing"), ResizeStep::ControllerInProgress),
        ("", Some("NodeResizeError"), ResizeStep::NodeFailed),
    ];
    for (status, condition, want) in steps {
        let mut s = serde_json::json!({});
        if !status.is_empty() {
            s["allocatedResourceStatuses"] = serde_json::json!({"storage": status});
        }
        if let Some(c) = condition {
            s["conditions"] = serde_json::json!([{"type": c, "status": "True"}]);
        }
        let c = Claim::of(&sized_claim("20Gi", "10Gi", s));
        let ClaimSize::Expanding(e) = &c.size else {
            panic!("{:?}", c.size)
        };
        assert_eq!(e.step, want, "{status} {condition:?}");
    }

    // Sizes that cannot be compared are never an expansion.
    let odd = Claim::of(&sized_claim("20Qi", "10Gi", serde_json::json!({})));
    assert_eq!(odd.size, ClaimSize::Uncomparable(Uncomparable::Request));
    let huge = Claim::of(&sized_claim(
        "20Gi",
        "99999999999999999999Ei",
        serde_json::json!({}),
    ));
    assert_eq!(huge.size, ClaimSize::Uncomparable(Uncomparable::Capacity));
    let mut no_capacity = sized_claim("20Gi", "10Gi", serde_json::json!({}));
    no_capacity.status.as_mut().unwrap().capacity = None;
    assert_eq!(
        Claim::of(&no_capacity).size,
        ClaimSize::Uncomparable(Uncomparable::NoCapacity)
    );
    // A claim not (yet) Bound has no expansion.
    let mut pending = sized_claim("20Gi", "10Gi", serde_json::json!({}));
    pending.status.as_mut().unwrap().phase = Some("Pending".into());
    assert_eq!(Claim::of(&pending).size, ClaimSize::Settled);
}

/// Metadata as the API server sends it, with everything `crate::model::meta::lean` reads and the two
/// parts it skips.
fn full_metadata() -> serde_json::Value {
    serde_json::json!({
        "name": "data", "namespace": "team-a", "uid": "u-1", "resourceVersion": "42",
        "generation": 3, "creationTimestamp": "2026-01-02T03:04:05Z",
        "deletionTimestamp": "2026-01-03T03:04:05Z", "deletionGracePeriodSeconds": 0,
        "finalizers": ["kubernetes.io/pvc-protection"], "labels": {"app": "db"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolume", "name": "pv-1",
                             "uid": "u-pv"}],
        "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                           "apiVersion": "v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:annotations": {}}}}],
        "generateName": "data-", "selfLink": "/api/v1/x",
    })
}

#[test]
fn lean_metadata_keeps_what_is_read_and_skips_managed_fields_and_annotations() {
    use crate::decide::lookup::ClaimObject;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    let full: ObjectMeta = serde_json::from_value(full_metadata()).unwrap();
    let claim: ClaimObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": full_metadata(),
        "spec": {"volumeName": "pv-1", "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Bound"},
    }))
    .unwrap();
    let lean = claim.metadata;
    assert_eq!(lean.managed_fields, None);
    assert_eq!(lean.annotations, None);
    assert_eq!(lean.generate_name, None);
    // Every other field as the full metadata has it.
    let expected = ObjectMeta {
        managed_fields: None,
        annotations: None,
        generate_name: None,
        self_link: None,
        ..full
    };
    assert_eq!(lean, expected);
    assert_eq!(lean.labels.unwrap()["app"], "db");

    // A volume's metadata too; and an object without metadata reads as empty metadata.
    let pv: crate::model::volume::VolumeObject = serde_json::from_value(serde_json::json!({
        "metadata": full_metadata(), "spec": {"persistentVolumeReclaimPolicy": "Retain"},
    }))
    .unwrap();
    assert_eq!(pv.metadata, expected);
    let bare: ClaimObject = serde_json::from_value(serde_json::json!({"spec": {}})).unwrap();
    assert_eq!(bare.metadata, ObjectMeta::default());
    let null: ClaimObject = serde_json::from_value(serde_json::json!({"metadata": null})).unwrap();
    assert_eq!(null.metadata, ObjectMeta::default());
}

#[test]
fn a_volume_leftover_read_leanly_is_the_object_without_managed_fields_and_annotations() {
    use crate::model::crd::VolumeLeftover;
    use crate::model::leftover::LeftoverObject;

    let o = crate::decide::plan::desired(&mariadb_finding(), None, &now(), &now(), None)
        .stored_as("uid");
    let mut v = serde_json::to_value(o).unwrap();
    v["metadata"]["annotations"] = serde_json::json!({"note": "x"});
    v["metadata"]["managedFields"] = full_metadata()["managedFields"].clone();
    let lean: VolumeLeftover = serde_json::from_value::<LeftoverObject>(v.clone())
        .unwrap()
        .into();
    let mut full: VolumeLeftover = serde_json::from_value(v).unwrap();
    full.metadata.annotations = None;
    full.metadata.managed_fields = None;
    assert_eq!(
        serde_json::to_value(lean).unwrap(),
        serde_json::to_value(full).unwrap()
    );
}

#[test]
fn canonical_uids_are_kept_as_16_bytes_and_read_back_exactly() {
    use crate::model::uid::Uid;
    let text = "0f8e2c4a-9b1d-4e6f-8a2b-3c4d5e6f7a8b";
    let u = Uid::new(text);
    assert!(matches!(u, Uid::Uuid(_)));
    assert_eq!(u.to_string(), text);
    assert!(u == *text);
    assert!(u != *"0f8e2c4a-9b1d-4e6f-8a2b-3c4d5e6f7a8c");
    assert_eq!(format!("{u:?}"), format!("{text:?}"));
    let read: Uid = serde_json::from_str(&format!("\"{text}\"")).unwrap();
    assert_eq!(read, u);
    // Anything that would not read back byte for byte is kept as written.
    for other in [
        "",
        "uid",
        "0F8E2C4A-9B1D-4E6F-8A2B-3C4D5E6F7A8B",
        "0f8e2c4a9b1d4e6f8a2b3c4d5e6f7a8b",
        "0f8e2c4a-9b1d-4e6f-8a2b-3c4d5e6f7a8",
        "0f8e2c4a-9b1d-4e6f-8a2b-3c4d5e6f7a8bb",
        "0f8e2c4a+9b1d-4e6f-8a2b-3c4d5e6f7a8b",
        "0f8e2c4g-9b1d-4e6f-8a2b-3c4d5e6f7a8b",
        "0f8e2c4a-9b1d-4e6f-8a2b-3c4d5e6f7a8é",
    ] {
        let u = Uid::new(other);
        assert!(matches!(u, Uid::Other(_)), "{other:?}");
        assert_eq!(u.to_string(), other);
        assert!(u == *other);
        assert_eq!(u.is_empty(), other.is_empty());
    }
    // A canonical uid never equals its upper-case spelling: uids compare as text.
    assert!(Uid::new(text) != *text.to_uppercase().as_str());
}

#[test]
fn a_volume_keeps_its_uids_and_shares_its_lists() {
    let (a, b) = (
        Volume::from(&mariadb_named("mariadb-pv")),
        Volume::from(&mariadb_named("other-pv")),
    );
    let modes = |v: &Volume| v.spec.as_ref().unwrap().access_modes.clone().unwrap();
    assert!(Arc::ptr_eq(&modes(&a), &modes(&b)));
    assert_eq!(
        modes(&a).iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        mariadb_pv().spec.unwrap().access_modes.unwrap()
    );
    let uid = mariadb_pv().metadata.uid.unwrap();
    assert_eq!(a.metadata.uid.as_ref().unwrap().to_string(), uid);
    let claim_uid = mariadb_pv().spec.unwrap().claim_ref.unwrap().uid.unwrap();
    let r = a.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(r.uid.as_ref().unwrap().to_string(), claim_uid);
}

#[test]
fn finalizer_lists_are_shared_whole() {
    let with = |name: &str| {
        let mut p = mariadb_named(name);
        p.metadata.finalizers = Some(vec![
            "kubernetes.io/pv-protection".into(),
            "external-attacher/rbd-csi-ceph-com".into(),
        ]);
        Volume::from(&p)
    };
    let (a, b) = (with("a"), with("b"));
    let (fa, fb) = (
        a.metadata.finalizers.clone().unwrap(),
        b.metadata.finalizers.clone().unwrap(),
    );
    assert!(Arc::ptr_eq(&fa, &fb));
    assert_eq!(&*fa[1], "external-attacher/rbd-csi-ceph-com");
}

#[test]
fn phases_and_reclaim_policies_read_from_their_api_strings() {
    use crate::model::phase::{Phase, ReclaimPolicy};
    let phases = [
        ("Released", Phase::Released),
        ("Bound", Phase::Bound),
        ("Failed", Phase::Failed),
        ("Available", Phase::Unbound),
        ("Pending", Phase::Unbound),
        ("", Phase::Other),
        ("released", Phase::Other),
        ("Lost", Phase::Other),
    ];
    for (s, p) in phases {
        assert_eq!(Phase::of(s), p, "{s:?}");
    }
    let policies = [
        ("Delete", ReclaimPolicy::Delete),
        ("Retain", ReclaimPolicy::Retain),
        ("Recycle", ReclaimPolicy::Recycle),
        ("", ReclaimPolicy::Other),
        ("delete", ReclaimPolicy::Other),
    ];
    for (s, p) in policies {
        assert_eq!(ReclaimPolicy::of(s), p, "{s:?}");
    }
}
