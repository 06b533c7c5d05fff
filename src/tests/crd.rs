//! The CRD: the committed YAML matches the Rust types; names, scope, subresources, columns.

use kube::CustomResourceExt;

use crate::model::crd::{Reason, Tristate, VolumeLeftover};

const COMMITTED: &str = include_str!("../../crds/volumeleftovers.yaml");

#[test]
fn committed_crd_yaml_matches_the_rust_types() {
    let generated = crate::crd_yaml().expect("serialise the CRD");
    assert!(
        generated == COMMITTED,
        "crds/volumeleftovers.yaml is stale: run `cargo run -- crd > crds/volumeleftovers.yaml`\n\
         --- generated ---\n{generated}"
    );
}

#[test]
fn crd_names_group_and_plural() {
    let crd = VolumeLeftover::crd();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("volumeleftovers.leftovers.dev")
    );
    assert_eq!(crd.spec.group, crate::model::crd::GROUP);
    assert_eq!(crd.spec.names.kind, "VolumeLeftover");
    assert_eq!(crd.spec.names.plural, "volumeleftovers");
    assert_eq!(crd.spec.names.singular.as_deref(), Some("volumeleftover"));
}

#[test]
fn crd_is_cluster_scoped() {
    assert_eq!(VolumeLeftover::crd().spec.scope, "Cluster");
}

#[test]
fn crd_has_short_name_vl() {
    let names = VolumeLeftover::crd().spec.names;
    assert!(
        names
            .short_names
            .unwrap_or_default()
            .contains(&"vl".to_string()),
        "short names must contain vl"
    );
}

#[test]
fn crd_serves_one_stored_version_with_a_status_subresource() {
    let versions = VolumeLeftover::crd().spec.versions;
    assert_eq!(versions.len(), 1);
    let v = &versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(v.served && v.storage);
    let sub = v.subresources.as_ref().expect("subresources");
    assert!(sub.status.is_some(), "status subresource");
    assert!(sub.scale.is_none());
}

#[test]
fn crd_printer_columns_are_what_a_storage_admin_scans_first() {
    let crd = VolumeLeftover::crd();
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default();
    let default_view: Vec<(&str, &str, &str)> = columns
        .iter()
        .filter(|c| c.priority.unwrap_or(0) == 0)
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        default_view,
        vec![
            ("Reason", "string", ".status.reason"),
            ("State", "string", ".status.state"),
            ("Phase", "string", ".status.phase"),
            ("Reclaim", "string", ".status.reclaimPolicy"),
            ("Claim", "string", ".status.claim.ref"),
            ("Claim-Missing", "string", ".status.claim.missing"),
            ("Class", "string", ".status.storageClass.name"),
            ("Capacity", "string", ".status.capacity"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn crd_schema_describes_fields_for_kubectl_explain() {
    let json = serde_json::to_value(VolumeLeftover::crd()).expect("json");
    let props = &json["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"];
    for path in [
        &props["spec"]["properties"]["volumeUID"],
        &props["status"]["properties"]["reason"],
        &props["status"]["properties"]["firstSeen"],
        &props["status"]["properties"]["claim"]["properties"]["missing"],
    ] {
        let d = path["description"].as_str().unwrap_or_default();
        assert!(!d.is_empty(), "no description in {path}");
    }
}

#[test]
fn reason_as_str_is_its_serialised_form() {
    for r in Reason::ALL {
        assert_eq!(
            serde_json::to_value(r).expect("json"),
            serde_json::Value::String(r.as_str().into())
        );
    }
}

#[test]
fn reason_all_lists_every_reason_once() {
    // An exhaustive match: a new variant fails to compile here until it is placed in ALL.
    fn position(r: Reason) -> usize {
        match r {
            Reason::ClaimDeleted => 0,
            Reason::ClaimRecreated => 1,
            Reason::ClaimStillPresent => 2,
            Reason::ClaimUnknown => 3,
            Reason::ClaimRefInvalid => 4,
            Reason::ReleasedWithoutClaim => 5,
            Reason::BoundClaimMissing => 6,
            Reason::PreboundClaimMissing => 7,
            Reason::ReclaimFailed => 8,
            Reason::ExpansionStuck => 9,
            Reason::DiskSizeMismatch => 10,
            Reason::VolumeDeleted => 11,
            Reason::DiskWithoutVolume => 12,
            Reason::VolumeWithoutDisk => 13,
            Reason::SnapshotDeleted => 14,
            Reason::SnapshotRecreated => 15,
            Reason::SnapshotDeleteStuck => 16,
            Reason::ContentNeverBound => 17,
            Reason::SnapshotContentMissing => 18,
            Reason::ContentDeleted => 19,
            Reason::SnapshotWithoutContent => 20,
        }
    }
    for (i, r) in Reason::ALL.into_iter().enumerate() {
        assert_eq!(position(r), i, "{r:?}");
    }
}

#[test]
fn hint_and_subject_as_str_are_their_serialised_forms() {
    use crate::model::crd::{Hint, Subject};
    for h in Hint::ALL {
        assert_eq!(
            serde_json::to_value(h).unwrap(),
            serde_json::json!(h.as_str())
        );
    }
    for s in Subject::ALL {
        assert_eq!(
            serde_json::to_value(s).unwrap(),
            serde_json::json!(s.as_str())
        );
    }
}

#[test]
fn hint_and_subject_all_list_every_value_once() {
    use crate::model::crd::{Hint, Subject};
    // Exhaustive matches: a new variant fails to compile here until it is placed in ALL.
    fn hint(h: Hint) -> usize {
        match h {
            Hint::ReclaimPolicyDelete => 0,
            Hint::ReclaimPolicyMismatch => 1,
            Hint::StorageClassMissing => 2,
            Hint::StorageClassUnknown => 3,
            Hint::VolumeTerminating => 4,
            Hint::ClaimRefNotAClaim => 5,
            Hint::ClaimRefIncomplete => 6,
            Hint::PhaseUnknown => 7,
            Hint::DiskInUse => 8,
            Hint::OwnerUnknown => 9,
            Hint::DiskInTrash => 10,
            Hint::DiskSizeDiffers => 11,
        }
    }
    fn subject(s: Subject) -> usize {
        match s {
            Subject::Volume => 0,
            Subject::Disk => 1,
            Subject::VolumeAndDisk => 2,
            Subject::SnapshotContent => 3,
            Subject::Snapshot => 4,
            Subject::BackendSnapshot => 5,
        }
    }
    for (i, h) in Hint::ALL.into_iter().enumerate() {
        assert_eq!(hint(h), i, "{h:?}");
    }
    for (i, s) in Subject::ALL.into_iter().enumerate() {
        assert_eq!(subject(s), i, "{s:?}");
    }
}

/// The names before one vocabulary said "disk" for every backend.
const OLD_NAMES: [(&str, &str); 6] = [
    ("ImageWithoutVolume", "DiskWithoutVolume"),
    ("VolumeWithoutImage", "VolumeWithoutDisk"),
    ("ImageInUse", "DiskInUse"),
    ("ImageInTrash", "DiskInTrash"),
    ("Image", "Disk"),
    ("VolumeAndImage", "VolumeAndDisk"),
];

#[test]
fn an_old_name_reads_as_the_new_value_and_is_noted() {
    use crate::model::crd::{Hint, Subject, noting_old_names};
    fn read<T: serde::de::DeserializeOwned>(name: &str) -> Option<(T, bool)> {
        let (v, noted) = noting_old_names(|| serde_json::from_value::<T>(serde_json::json!(name)));
        v.ok().map(|v| (v, noted))
    }
    fn check<T>(old: &str, new: &str) -> bool
    where
        T: serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let Some((now, false)) = read::<T>(new) else {
            return false;
        };
        assert_eq!(read::<T>(old), Some((now, true)), "{old}");
        true
    }
    for (old, new) in OLD_NAMES {
        let readers = [
            check::<Reason>(old, new),
            check::<Hint>(old, new),
            check::<Subject>(old, new),
        ];
        assert_eq!(readers.iter().filter(|r| **r).count(), 1, "{new}");
    }
    // Only an old name is noted, and a noting scope leaves the enclosing one's note as it was.
    let (_, outer) = noting_old_names(|| {
        let (r, inner) = noting_old_names(|| serde_json::from_str::<Reason>("\"VolumeDeleted\""));
        assert!(!inner);
        r
    });
    assert!(!outer);
    let err = serde_json::from_str::<Reason>("\"DiskGone\"").unwrap_err();
    assert!(
        err.to_string().contains("unknown reason \"DiskGone\""),
        "{err}"
    );
}

#[test]
fn the_schema_admits_every_current_and_old_name() {
    let crd = serde_json::to_value(VolumeLeftover::crd()).unwrap();
    let status = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"];
    let admitted = |v: &serde_json::Value| -> Vec<String> {
        serde_json::from_value(v["enum"].clone()).expect("an enum")
    };
    let reasons = admitted(&status["reason"]);
    let hints = admitted(&status["hints"]["items"]);
    let subjects = admitted(&status["subject"]);
    let acknowledged = admitted(&status["acknowledged"]["properties"]["reason"]);
    assert_eq!(acknowledged, reasons);
    for r in Reason::ALL {
        assert!(reasons.contains(&r.as_str().to_string()), "{r:?}");
    }
    for (old, new) in OLD_NAMES {
        let list = [&reasons, &hints, &subjects]
            .into_iter()
            .find(|l| l.contains(&new.to_string()))
            .unwrap_or_else(|| panic!("{new} admitted"));
        assert!(
            list.contains(&old.to_string()),
            "{old} admitted beside {new}"
        );
    }
}

#[test]
fn tristate_known_maps_unknown_to_none() {
    assert_eq!(Tristate::True.known(), Some(true));
    assert_eq!(Tristate::False.known(), Some(false));
    assert_eq!(Tristate::Unknown.known(), None);
}

#[test]
fn tristate_from_bool() {
    assert_eq!(Tristate::from(true), Tristate::True);
    assert_eq!(Tristate::from(false), Tristate::False);
}

#[test]
fn condition_statuses_are_written_and_read_as_the_api_conventions_spell_them() {
    use crate::model::crd::ConditionStatus;
    for (st, text) in [
        (ConditionStatus::True, "True"),
        (ConditionStatus::False, "False"),
        (ConditionStatus::Unknown, "Unknown"),
    ] {
        assert_eq!(st.as_str(), text);
        assert_eq!(serde_json::to_value(st).unwrap(), serde_json::json!(text));
        assert_eq!(
            serde_json::from_value::<ConditionStatus>(serde_json::json!(text)).unwrap(),
            st
        );
    }
    assert_eq!(ConditionStatus::from(true), ConditionStatus::True);
    assert_eq!(ConditionStatus::from(false), ConditionStatus::False);
    // The schema's enum makes the API server refuse anything else, so nothing else is read.
    assert!(serde_json::from_value::<ConditionStatus>(serde_json::json!("true")).is_err());
}

#[test]
fn an_acknowledgement_until_any_date_the_schema_admits_is_read() {
    use crate::model::crd::Acknowledgement;
    let read = |until: &str| -> Acknowledgement {
        serde_json::from_value(serde_json::json!({"by": "ticket-bot", "until": until}))
            .unwrap_or_else(|e| panic!("until {until}: {e}"))
    };
    assert_eq!(
        read("2099-01-01T00:00:00Z").until.unwrap().0,
        "2099-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap()
    );
    // Beyond jiff's range, as a ticket bot's "forever": the latest instant there is.
    for forever in ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59.999999Z"] {
        assert_eq!(read(forever).until.unwrap().0, jiff::Timestamp::MAX);
    }
    assert!(
        serde_json::from_value::<Acknowledgement>(serde_json::json!({"until": "soon"})).is_err()
    );
    // And a whole list holding one such object still decodes (one object failed every list).
    let list = serde_json::json!({
        "apiVersion": "leftovers.dev/v1alpha1",
        "kind": "VolumeLeftover",
        "metadata": {"name": "pv-1"},
        "spec": {"volumeName": "pv-1", "volumeUID": "u", "acknowledgement": {"until": "9999-12-31T23:59:59Z"}},
    });
    let o: crate::model::crd::VolumeLeftover = serde_json::from_value(list).unwrap();
    assert!(o.spec.acknowledgement.unwrap().until.is_some());
}
