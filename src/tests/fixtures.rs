//! Builders that read like the scenario, and a fake [`Lookup`].
//!
//! `pv("mariadb-pv").retain().released().claim("mariadb", "mariadb", "uid-1")` is a
//! `PersistentVolume` at every step: each method sets one field and hands the object back.

use std::collections::{BTreeMap, HashMap};

use jiff::SignedDuration;
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, CSIPersistentVolumeSource, GCEPersistentDiskVolumeSource,
    HostPathVolumeSource, ISCSIPersistentVolumeSource, NFSVolumeSource, ObjectReference,
    PersistentVolume, PersistentVolumeSpec, PersistentVolumeStatus, RBDPersistentVolumeSource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::decide::classify::{ClaimFacts, ClassFacts, classify};
use crate::model::crd::VolumeLeftover;
use crate::model::finding::{Finding, Verdict};
use crate::model::volume::Volume;
use crate::scan::Facts;

/// The fixed "now" of every test, to the second (as the API server stores times).
pub fn now() -> Time {
    time("2026-03-01T12:00:00Z")
}

/// `now()` shifted by a signed number of seconds.
pub fn now_plus(seconds: i64) -> Time {
    Time(now().0 + SignedDuration::from_secs(seconds))
}

/// A time from RFC 3339.
pub fn time(rfc3339: &str) -> Time {
    Time(rfc3339.parse().expect("fixture time is RFC 3339"))
}

/// When the mariadb PV entered Released.
pub fn released_at() -> Time {
    time("2026-02-27T09:15:00Z")
}

/// A PersistentVolume named `name` with uid `pv-uid-<name>`, an empty spec and no status.
pub fn pv(name: &str) -> PersistentVolume {
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            uid: Some(format!("pv-uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeSpec::default()),
        status: None,
    }
}

/// The leftover of the seed's Q1: Retain, Released, claim `mariadb/mariadb` gone, class
/// `standard`, 250Mi, a Ceph RBD CSI volume.
pub fn mariadb_pv() -> PersistentVolume {
    pv("mariadb-pv")
        .retain()
        .released()
        .since(released_at())
        .claim("mariadb", "mariadb", "uid-mariadb-1")
        .class("standard")
        .capacity("250Mi")
        .access_modes(["ReadWriteOnce"])
        .csi(
            "rbd.csi.ceph.com",
            "0001-0009-rook-ceph-0000000000000002-mariadb",
            [("pool", "replicapool"), ("imageName", "csi-vol-mariadb")],
        )
}

/// One-field setters on a [`PersistentVolume`].
pub trait PvBuilder: Sized {
    /// Sets `metadata.uid`.
    fn uid(self, uid: &str) -> Self;
    /// Clears `metadata.uid`.
    fn no_uid(self) -> Self;
    /// Clears `metadata.name`.
    fn no_name(self) -> Self;
    /// Clears `spec`.
    fn no_spec(self) -> Self;
    /// Clears `status`.
    fn no_status(self) -> Self;
    /// Sets `status.phase`.
    fn phase(self, phase: &str) -> Self;
    /// Sets `status.lastPhaseTransitionTime`.
    fn since(self, t: Time) -> Self;
    /// Sets `status.message`.
    fn status_message(self, m: &str) -> Self;
    /// Sets `spec.persistentVolumeReclaimPolicy`.
    fn reclaim(self, policy: &str) -> Self;
    /// Sets `spec.claimRef`.
    fn claim_ref(self, r: ObjectReference) -> Self;
    /// Sets `spec.claimRef.kind`.
    fn claim_kind(self, kind: &str) -> Self;
    /// Sets `spec.storageClassName`.
    fn class(self, name: &str) -> Self;
    /// Sets `spec.capacity.storage`.
    fn capacity(self, q: &str) -> Self;
    /// Sets `spec.accessModes`.
    fn access_modes<const N: usize>(self, modes: [&str; N]) -> Self;
    /// Sets `spec.volumeMode`.
    fn volume_mode(self, mode: &str) -> Self;
    /// Sets `spec.csi`.
    fn csi<const N: usize>(self, driver: &str, handle: &str, attrs: [(&str, &str); N]) -> Self;
    /// Sets an in-tree `spec.rbd`.
    fn rbd(self, pool: Option<&str>, image: &str) -> Self;
    /// Sets `spec.gcePersistentDisk`.
    fn gce_pd(self, pd_name: &str) -> Self;
    /// Sets `spec.awsElasticBlockStore`.
    fn aws_ebs(self, volume_id: &str) -> Self;
    /// Sets `spec.nfs`.
    fn nfs(self, server: &str, path: &str) -> Self;
    /// Sets `spec.hostPath`.
    fn host_path(self, path: &str) -> Self;
    /// Sets `spec.iscsi`.
    fn iscsi(self, iqn: &str) -> Self;
    /// Node affinity requiring `topology.kubernetes.io/zone In zones` (where a cloud disk is).
    fn zones<const N: usize>(self, zones: [&str; N]) -> Self;
    /// Sets `metadata.deletionTimestamp` and the finalizers that hold the object.
    fn terminating<const N: usize>(self, since: Time, finalizers: [&str; N]) -> Self;

    /// Reclaim policy Retain.
    fn retain(self) -> Self {
        self.reclaim("Retain")
    }
    /// Reclaim policy Delete.
    fn delete(self) -> Self {
        self.reclaim("Delete")
    }
    /// Phase Released.
    fn released(self) -> Self {
        self.phase("Released")
    }
    /// Phase Bound.
    fn bound(self) -> Self {
        self.phase("Bound")
    }
    /// Phase Available.
    fn available(self) -> Self {
        self.phase("Available")
    }
    /// Phase Pending.
    fn pending(self) -> Self {
        self.phase("Pending")
    }
    /// Phase Failed.
    fn failed(self) -> Self {
        self.phase("Failed")
    }
    /// A claimRef to PersistentVolumeClaim `namespace/name` with `uid`.
    fn claim(self, namespace: &str, name: &str, uid: &str) -> Self {
        self.claim_ref(ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            uid: Some(uid.into()),
            resource_version: Some("4242".into()),
            field_path: None,
        })
    }
    /// A claimRef by name only (a pre-binding: no uid yet).
    fn claim_by_name(self, namespace: &str, name: &str) -> Self {
        self.claim_ref(ObjectReference {
            kind: Some("PersistentVolumeClaim".into()),
            namespace: Some(namespace.into()),
            name: Some(name.into()),
            ..ObjectReference::default()
        })
    }
}

impl PvBuilder for PersistentVolume {
    fn terminating<const N: usize>(mut self, since: Time, finalizers: [&str; N]) -> Self {
        self.metadata.deletion_timestamp = Some(since);
        self.metadata.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
        self
    }
    fn uid(mut self, uid: &str) -> Self {
        self.metadata.uid = Some(uid.into());
        self
    }
    fn no_uid(mut self) -> Self {
        self.metadata.uid = None;
        self
    }
    fn no_name(mut self) -> Self {
        self.metadata.name = None;
        self
    }
    fn no_spec(mut self) -> Self {
        self.spec = None;
        self
    }
    fn no_status(mut self) -> Self {
        self.status = None;
        self
    }
    fn phase(mut self, phase: &str) -> Self {
        status(&mut self).phase = Some(phase.into());
        self
    }
    fn since(mut self, t: Time) -> Self {
        status(&mut self).last_phase_transition_time = Some(t);
        self
    }
    fn status_message(mut self, m: &str) -> Self {
        status(&mut self).message = Some(m.into());
        self
    }
    fn reclaim(mut self, policy: &str) -> Self {
        spec(&mut self).persistent_volume_reclaim_policy = Some(policy.into());
        self
    }
    fn claim_ref(mut self, r: ObjectReference) -> Self {
        spec(&mut self).claim_ref = Some(r);
        self
    }
    fn claim_kind(mut self, kind: &str) -> Self {
        spec(&mut self)
            .claim_ref
            .get_or_insert_with(ObjectReference::default)
            .kind = Some(kind.into());
        self
    }
    fn class(mut self, name: &str) -> Self {
        spec(&mut self).storage_class_name = Some(name.into());
        self
    }
    fn capacity(mut self, q: &str) -> Self {
        spec(&mut self).capacity = Some(BTreeMap::from([(
            "storage".to_string(),
            Quantity(q.to_string()),
        )]));
        self
    }
    fn access_modes<const N: usize>(mut self, modes: [&str; N]) -> Self {
        spec(&mut self).access_modes = Some(modes.iter().map(|m| m.to_string()).collect());
        self
    }
    fn volume_mode(mut self, mode: &str) -> Self {
        spec(&mut self).volume_mode = Some(mode.into());
        self
    }
    fn csi<const N: usize>(mut self, driver: &str, handle: &str, attrs: [(&str, &str); N]) -> Self {
        spec(&mut self).csi = Some(CSIPersistentVolumeSource {
            driver: driver.into(),
            volume_handle: handle.into(),
            volume_attributes: Some(
                attrs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..CSIPersistentVolumeSource::default()
        });
        self
    }
    fn rbd(mut self, pool: Option<&str>, image: &str) -> Self {
        spec(&mut self).rbd = Some(RBDPersistentVolumeSource {
            image: image.into(),
            monitors: vec!["10.0.0.1:6789".into()],
            pool: pool.map(str::to_string),
            ..RBDPersistentVolumeSource::default()
        });
        self
    }
    fn gce_pd(mut self, pd_name: &str) -> Self {
        spec(&mut self).gce_persistent_disk = Some(GCEPersistentDiskVolumeSource {
            pd_name: pd_name.into(),
            ..GCEPersistentDiskVolumeSource::default()
        });
        self
    }
    fn aws_ebs(mut self, volume_id: &str) -> Self {
        spec(&mut self).aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
            volume_id: volume_id.into(),
            ..AWSElasticBlockStoreVolumeSource::default()
        });
        self
    }
    fn nfs(mut self, server: &str, path: &str) -> Self {
        spec(&mut self).nfs = Some(NFSVolumeSource {
            server: server.into(),
            path: path.into(),
            read_only: None,
        });
        self
    }
    fn host_path(mut self, path: &str) -> Self {
        spec(&mut self).host_path = Some(HostPathVolumeSource {
            path: path.into(),
            type_: None,
        });
        self
    }
    fn zones<const N: usize>(mut self, zones: [&str; N]) -> Self {
        use k8s_openapi::api::core::v1::{
            NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, VolumeNodeAffinity,
        };
        spec(&mut self).node_affinity = Some(VolumeNodeAffinity {
            required: Some(NodeSelector {
                node_selector_terms: vec![NodeSelectorTerm {
                    match_expressions: Some(vec![NodeSelectorRequirement {
                        key: "topology.kubernetes.io/zone".into(),
                        operator: "In".into(),
                        values: Some(zones.iter().map(|z| z.to_string()).collect()),
                    }]),
                    match_fields: None,
                }],
            }),
        });
        self
    }
    fn iscsi(mut self, iqn: &str) -> Self {
        spec(&mut self).iscsi = Some(ISCSIPersistentVolumeSource {
            iqn: iqn.into(),
            lun: 0,
            target_portal: "10.0.0.2:3260".into(),
            ..ISCSIPersistentVolumeSource::default()
        });
        self
    }
}

fn spec(pv: &mut PersistentVolume) -> &mut PersistentVolumeSpec {
    pv.spec.get_or_insert_with(PersistentVolumeSpec::default)
}

fn status(pv: &mut PersistentVolume) -> &mut PersistentVolumeStatus {
    pv.status
        .get_or_insert_with(PersistentVolumeStatus::default)
}

/// Claims and StorageClasses as the classifier sees them: `scan`'s own [`Facts`], so the tests
/// exercise a production lookup. Both kinds start readable and empty; either can be made
/// unreadable (a 403).
pub type FakeLookup = Facts;

/// A lookup where claims and classes are readable and none exists.
pub fn lookup() -> FakeLookup {
    Facts {
        claims: Some(HashMap::new()),
        classes: Some(HashMap::new()),
        census: None,
    }
}

/// A lookup whose claim store (or class store) is stale: the operator's view while a watch fails.
pub struct StaleLookup {
    /// Answers for what is not stale.
    pub inner: FakeLookup,
    /// Claims are stale.
    pub claims: bool,
    /// Classes are stale.
    pub classes: bool,
}

impl crate::decide::lookup::Lookup for StaleLookup {
    fn claim(&self, namespace: &str, name: &str) -> crate::decide::lookup::Found<ClaimFacts> {
        if self.claims {
            crate::decide::lookup::Found::Stale
        } else {
            self.inner.claim(namespace, name)
        }
    }
    fn class(&self, name: &str) -> crate::decide::lookup::Found<ClassFacts> {
        if self.classes {
            crate::decide::lookup::Found::Stale
        } else {
            self.inner.class(name)
        }
    }
}

impl Facts {
    /// A claim `namespace/name` with `uid` exists.
    pub fn with_claim(self, namespace: &str, name: &str, uid: &str) -> Self {
        self.put_claim(namespace, name, uid, false)
    }
    /// A claim `namespace/name` with `uid` exists and is being deleted.
    pub fn with_terminating_claim(self, namespace: &str, name: &str, uid: &str) -> Self {
        self.put_claim(namespace, name, uid, true)
    }
    /// A StorageClass `name` with reclaim policy `policy` exists.
    pub fn with_class(mut self, name: &str, policy: &str) -> Self {
        self.classes.get_or_insert_with(HashMap::new).insert(
            name.into(),
            ClassFacts {
                reclaim_policy: policy.into(),
                ..ClassFacts::default()
            },
        );
        self
    }
    /// Claims cannot be read (403).
    pub fn claims_forbidden(mut self) -> Self {
        self.claims = None;
        self
    }
    /// StorageClasses cannot be read (403).
    pub fn classes_forbidden(mut self) -> Self {
        self.classes = None;
        self
    }

    fn put_claim(mut self, namespace: &str, name: &str, uid: &str, terminating: bool) -> Self {
        self.claims.get_or_insert_with(HashMap::new).insert(
            (namespace.into(), name.into()),
            ClaimFacts {
                uid: uid.into(),
                terminating,
                size: Default::default(),
            },
        );
        self
    }
}

/// Classifies at [`now()`].
pub fn verdict(pv: &PersistentVolume, lookup: &FakeLookup) -> Verdict {
    classify(&Volume::from(pv), lookup, now())
}

/// Classifies at [`now()`] and expects a finding.
#[track_caller]
pub fn finding(pv: &PersistentVolume, lookup: &FakeLookup) -> Finding {
    match verdict(pv, lookup) {
        Verdict::Leftover(f) => *f,
        other => panic!("expected a finding, got {other:?}"),
    }
}

/// The mariadb finding: claim gone, class `standard` (Retain) exists.
pub fn mariadb_finding() -> Finding {
    finding(&mariadb_pv(), &lookup().with_class("standard", "Retain"))
}

/// Setters on a [`VolumeLeftover`] as another party (the API server, a human) would change it.
pub trait VlBuilder: Sized {
    /// Adds what the API server fills in: uid, resourceVersion, creationTimestamp, generation.
    fn stored_as(self, uid: &str) -> Self;
    /// Sets a label.
    fn label(self, key: &str, value: &str) -> Self;
    /// Removes a label.
    fn without_label(self, key: &str) -> Self;
}

impl VlBuilder for VolumeLeftover {
    fn stored_as(mut self, uid: &str) -> Self {
        self.metadata.uid = Some(uid.into());
        self.metadata.resource_version = Some("1001".into());
        self.metadata.generation = Some(1);
        self.metadata.creation_timestamp = Some(now_plus(-3600));
        self
    }
    fn label(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(key.into(), value.into());
        self
    }
    fn without_label(mut self, key: &str) -> Self {
        if let Some(l) = self.metadata.labels.as_mut() {
            l.remove(key);
        }
        self
    }
}

/// What the operator's store keeps of `o` (the real conversion, as the feed makes it).
pub fn lean(o: &VolumeLeftover) -> crate::model::leftover::Leftover {
    crate::model::leftover::Leftover::new(o.clone(), crate::model::leftover::Keep::default())
}
