//! Properties over generated PVs, claims and classes: classification never panics, never says
//! more than its inputs show, and the same input gives byte-identical output; a published
//! finding re-planned against itself writes nothing.

use std::collections::HashMap;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::fixtures::{lean, now};
use crate::decide::classify::{classify, tombstone_of};
use crate::decide::lookup::{ClaimFacts, ClassFacts, Found, Lookup};
use crate::decide::plan::{Action, desired, gone, plan};
use crate::model::crd::{Hint, Reason, Tristate, VolumeLeftover};
use crate::model::finding::Verdict;
use crate::model::image::ImageFound;
use crate::model::leftover::{Keep, Leftover, digest, needs_record};
use crate::model::volume::Volume;

/// A generated world: claims and classes, each readable, forbidden or stale.
#[derive(Clone, Debug)]
struct World {
    claims: Option<HashMap<(String, String), ClaimFacts>>,
    classes: Option<HashMap<String, ClassFacts>>,
    claims_stale: bool,
    classes_stale: bool,
}

impl Lookup for World {
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts> {
        if self.claims_stale {
            return Found::Stale;
        }
        match &self.claims {
            None => Found::Unknown,
            Some(m) => m
                .get(&(namespace.into(), name.into()))
                .cloned()
                .map_or(Found::Absent, Found::Yes),
        }
    }
    fn class(&self, name: &str) -> Found<ClassFacts> {
        if self.classes_stale {
            return Found::Stale;
        }
        match &self.classes {
            None => Found::Unknown,
            Some(m) => m.get(name).cloned().map_or(Found::Absent, Found::Yes),
        }
    }
}

fn opt_str(choices: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        Just(None),
        proptest::sample::select(choices).prop_map(|s| Some(s.to_string())),
    ]
}

fn claim_ref() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        1 => Just(None),
        4 => (
            opt_str(&["PersistentVolumeClaim", "Pod", ""]),
            opt_str(&["ns", "other", ""]),
            opt_str(&["c", "d", ""]),
            opt_str(&["u1", "u2", ""]),
        )
            .prop_map(|(kind, ns, name, uid)| {
                let mut r = json!({});
                for (k, v) in [("kind", kind), ("namespace", ns), ("name", name), ("uid", uid)] {
                    if let Some(v) = v {
                        r[k] = json!(v);
                    }
                }
                Some(r)
            }),
    ]
}

fn source() -> impl Strategy<Value = (String, Value)> {
    proptest::sample::select(vec![
        ("hostPath", json!({"path": "/x"})),
        ("nfs", json!({"server": "s", "path": "/p"})),
        (
            "csi",
            json!({"driver": "rbd.csi.ceph.com", "volumeHandle": "h", "volumeAttributes": {"pool": "p", "imageName": "i"}}),
        ),
        ("rbd", json!({"monitors": ["m"], "image": "img"})),
        ("gcePersistentDisk", json!({"pdName": "d"})),
        ("iscsi", json!({"targetPortal": "t", "iqn": "q", "lun": 0})),
        ("flexVolume", json!({"driver": "x"})),
        ("csi", json!({"driver": "", "volumeHandle": ""})),
    ])
    .prop_map(|(k, v)| (k.to_string(), v))
}

fn pv() -> impl Strategy<Value = Value> {
    (
        opt_str(&["a", ""]),
        opt_str(&["uid-a", ""]),
        opt_str(&[
            "Available",
            "Bound",
            "Released",
            "Failed",
            "Pending",
            "",
            "Lost",
        ]),
        opt_str(&["Retain", "Delete", "Recycle", ""]),
        opt_str(&["standard", "gone", "", "fast"]),
        claim_ref(),
        any::<bool>(),
        opt_str(&["1Gi", "21474836480", ""]),
        source(),
        opt_str(&["message"]),
        any::<bool>(),
    )
        .prop_map(
            |(name, uid, phase, policy, class, cref, deleting, cap, (sk, sv), msg, since)| {
                let mut v = json!({"metadata": {}, "spec": {}, "status": {}});
                if let Some(n) = name {
                    v["metadata"]["name"] = json!(n);
                }
                if let Some(u) = uid {
                    v["metadata"]["uid"] = json!(u);
                }
                if deleting {
                    v["metadata"]["deletionTimestamp"] = json!("2026-02-28T00:00:00Z");
                    v["metadata"]["finalizers"] = json!(["kubernetes.io/pv-protection"]);
                }
                if let Some(p) = phase {
                    v["status"]["phase"] = json!(p);
                }
                if since {
                    v["status"]["lastPhaseTransitionTime"] = json!("2026-02-27T09:15:00Z");
                }
                if let Some(m) = msg {
                    v["status"]["message"] = json!(m);
                }
                if let Some(p) = policy {
                    v["spec"]["persistentVolumeReclaimPolicy"] = json!(p);
                }
                if let Some(c) = class {
                    v["spec"]["storageClassName"] = json!(c);
                }
                if let Some(r) = cref {
                    v["spec"]["claimRef"] = r;
                }
                if let Some(c) = cap {
                    v["spec"]["capacity"] = json!({"storage": c});
                }
                v["spec"][sk] = sv;
                v
            },
        )
}

fn world() -> impl Strategy<Value = World> {
    let claim = (
        proptest::sample::select(vec!["ns", "other"]),
        proptest::sample::select(vec!["c", "d"]),
        proptest::sample::select(vec!["u1", "u2"]),
        any::<bool>(),
    );
    (
        prop_oneof![
            1 => Just(None),
            4 => proptest::collection::vec(claim, 0..4).prop_map(|cs| Some(
                cs.into_iter()
                    .map(|(ns, n, u, t)| ((ns.to_string(), n.to_string()), ClaimFacts { uid: u.into(), terminating: t, size: Default::default() }))
                    .collect()
            )),
        ],
        prop_oneof![
            1 => Just(None),
            4 => proptest::collection::vec(
                (proptest::sample::select(vec!["standard", "fast"]), proptest::sample::select(vec!["Retain", "Delete"])),
                0..3
            ).prop_map(|cs| Some(cs.into_iter().map(|(n, p)| (n.to_string(), ClassFacts { reclaim_policy: p.into(), ..ClassFacts::default() })).collect())),
        ],
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(claims, classes, claims_stale, classes_stale)| World {
            claims,
            classes,
            claims_stale,
            classes_stale,
        })
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str().filter(|s| !s.is_empty())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn classification_says_no_more_than_its_inputs_show(v in pv(), w in world()) {
        let volume: Volume = serde_json::from_value(v.clone()).expect("generated JSON reads as a Volume");
        let verdict = classify(&volume, &w, now());
        // The same input gives the same answer, to the byte.
        let again = classify(&volume, &w, now());
        prop_assert_eq!(&verdict, &again);

        let phase = text(&v, &["status", "phase"]).unwrap_or("");
        let cref = v["spec"].get("claimRef");
        let ns = cref.and_then(|r| text(r, &["namespace"]));
        let name = cref.and_then(|r| text(r, &["name"]));
        let lookup = match (ns, name) {
            (Some(ns), Some(n)) => Some(w.claim(ns, n)),
            _ => None,
        };
        let identified = text(&v, &["metadata", "name"]).is_some() && text(&v, &["metadata", "uid"]).is_some();
        if lookup == Some(Found::Stale) && identified {
            // Nothing is concluded from a stale store.
            prop_assert!(matches!(verdict, Verdict::Undecided(_)), "{:?}", verdict);
        }
        if !identified {
            prop_assert!(matches!(verdict, Verdict::Skip(_)), "{:?}", verdict);
        }
        let Verdict::Leftover(f) = &verdict else { return Ok(()); };
        let a = serde_json::to_vec(&f.status).expect("json");
        let b = serde_json::to_vec(&match again { Verdict::Leftover(g) => g.status, _ => unreachable!() }).expect("json");
        prop_assert_eq!(a, b);
        let s = &f.status;
        prop_assert_eq!(s.phase.as_str(), phase);
        match (s.claim.as_ref(), &lookup) {
            (Some(c), Some(Found::Absent)) => prop_assert_eq!(c.missing, Tristate::True),
            (Some(c), Some(Found::Yes(_))) => prop_assert_eq!(c.missing, Tristate::False),
            (Some(c), Some(Found::Unknown)) => prop_assert_eq!(c.missing, Tristate::Unknown),
            (Some(c), None) => prop_assert_eq!(c.missing, Tristate::False, "nothing was looked up"),
            (None, _) => prop_assert!(cref.is_none()),
            (Some(_), Some(Found::Stale)) => prop_assert!(false, "a finding from a stale store"),
        }
        match s.reason {
            Reason::ClaimDeleted => {
                prop_assert_eq!(phase, "Released");
                prop_assert_eq!(lookup, Some(Found::Absent));
            }
            Reason::ClaimRecreated | Reason::ClaimStillPresent => {
                prop_assert_eq!(phase, "Released");
                prop_assert!(matches!(lookup, Some(Found::Yes(_))));
            }
            Reason::ClaimUnknown => {
                prop_assert_eq!(phase, "Released");
                prop_assert_eq!(lookup, Some(Found::Unknown));
            }
            Reason::ClaimRefInvalid => prop_assert!(matches!(phase, "Released" | "Failed")),
            Reason::ReleasedWithoutClaim => {
                prop_assert_eq!(phase, "Released");
                prop_assert!(cref.is_none());
            }
            Reason::BoundClaimMissing => {
                prop_assert_eq!(phase, "Bound");
                prop_assert!(matches!(lookup, Some(Found::Absent | Found::Yes(_))));
            }
            Reason::PreboundClaimMissing => {
                prop_assert!(!matches!(phase, "Bound" | "Released" | "Failed"));
                prop_assert_eq!(lookup, Some(Found::Absent));
            }
            Reason::ReclaimFailed => prop_assert_eq!(phase, "Failed"),
            Reason::ExpansionStuck => {
                prop_assert_eq!(phase, "Bound");
                prop_assert!(matches!(lookup, Some(Found::Yes(_))));
                prop_assert!(s.claim.as_ref().is_some_and(|c| c.expansion.is_some()));
            }
            Reason::DiskSizeMismatch => prop_assert!(false, "a census finding without a census"),
            Reason::VolumeDeleted => prop_assert!(false, "a tombstone from a live volume"),
            Reason::DiskWithoutVolume | Reason::VolumeWithoutDisk | Reason::SnapshotWithoutContent => {
                prop_assert!(false, "a census finding without a census")
            }
            Reason::SnapshotDeleted
            | Reason::SnapshotRecreated
            | Reason::SnapshotDeleteStuck
            | Reason::ContentNeverBound
            | Reason::SnapshotContentMissing
            | Reason::ContentDeleted => prop_assert!(false, "a snapshot finding from a volume"),
        }
        let class = text(&v, &["spec", "storageClassName"]);
        let class_found = class.map(|c| w.class(c));
        prop_assert_eq!(s.hints.contains(&Hint::StorageClassMissing), class_found == Some(Found::Absent));
        prop_assert_eq!(s.hints.contains(&Hint::StorageClassUnknown), class_found == Some(Found::Unknown));
        prop_assert_eq!(
            s.hints.contains(&Hint::VolumeTerminating),
            v["metadata"].get("deletionTimestamp").is_some()
        );
        if s.hints.contains(&Hint::ReclaimPolicyDelete) {
            prop_assert_eq!(s.reclaim_policy.as_str(), "Delete");
            prop_assert!(matches!(phase, "Released" | "Failed"));
        }
        let mut sorted = s.hints.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&sorted, &s.hints);
    }

    #[test]
    fn a_published_finding_re_planned_against_itself_writes_nothing(v in pv(), w in world()) {
        let volume: Volume = serde_json::from_value(v).expect("Volume");
        let verdict = classify(&volume, &w, now());
        let Verdict::Leftover(f) = &verdict else { return Ok(()); };
        let name = f.volume_name.clone();
        let first = desired(f, None, &now(), &now(), None);
        // As the API server gives it back: through JSON, with a uid and resourceVersion.
        let mut stored: VolumeLeftover =
            serde_json::from_slice(&serde_json::to_vec(&first).expect("json")).expect("parse");
        stored.metadata.uid = Some("vl-uid".into());
        stored.metadata.resource_version = Some("7".into());
        stored.metadata.generation = Some(1);
        prop_assert_eq!(
            serde_json::to_vec(&first).expect("json"),
            serde_json::to_vec(&desired(f, None, &now(), &now(), None)).expect("json")
        );
        prop_assert!(matches!(plan(&name, Some(&verdict), Some(&lean(&stored)), &now(), &now(), None), Action::Nothing));
    }

    #[test]
    fn the_lean_form_keeps_what_its_finding_needs_again(v in pv(), w in world(), report in any::<bool>()) {
        let volume: Volume = serde_json::from_value(v).expect("Volume");
        let Verdict::Leftover(f) = classify(&volume, &w, now()) else { return Ok(()); };
        let mut stored: VolumeLeftover = serde_json::from_slice(
            &serde_json::to_vec(&desired(&f, None, &now(), &now(), None)).expect("json"),
        )
        .expect("parse");
        stored.metadata.uid = Some("vl-uid".into());
        let status = stored.status.clone().expect("status");
        let l = Leftover::new(stored.clone(), Keep { report, ..Keep::default() });
        let kept = l.status.as_ref().expect("status");
        prop_assert_eq!(kept.digest, digest(&status));
        prop_assert_eq!(kept.reason, status.reason);
        prop_assert_eq!(kept.state, status.state);
        prop_assert_eq!(&kept.first_seen, &status.first_seen);
        prop_assert_eq!(l.own_labels(), stored.metadata.labels.clone().unwrap_or_default());
        // The facts, where kept, are the status's but for what every write recomputes.
        match kept.record() {
            Some(r) => {
                let mut want = status.clone();
                want.conditions.clear();
                want.observed_generation = None;
                if !report && status.reason != Reason::VolumeDeleted {
                    want.message.clear();
                }
                prop_assert_eq!(
                    serde_json::to_value(&r).expect("json"),
                    serde_json::to_value(&want).expect("json")
                );
            }
            None => {
                let keep = Keep { report, ..Keep::default() };
                prop_assert!(!needs_record(&status, keep));
            }
        }
        // A volume gone while nothing watched: the same tombstone (or delete) as from the whole
        // object.
        let name = f.volume_name.clone();
        let action = gone(&name, None, Some(&l), &now(), None, &ImageFound::NotCensused, None);
        match tombstone_of(&status, &stored.spec.volume_name, &stored.spec.volume_uid, &now()) {
            Some(t) => match action {
                Action::Apply { object, .. } => prop_assert_eq!(
                    serde_json::to_value(&object).expect("json"),
                    serde_json::to_value(desired(&t, Some(&l), &now(), &now(), None)).expect("json")
                ),
                other => prop_assert!(false, "expected Apply, got {:?}", other),
            },
            None => prop_assert!(matches!(action, Action::Delete { .. }), "{:?}", action),
        }
    }
}
