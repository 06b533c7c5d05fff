//! What classification may ask about claims and StorageClasses, and the facts it gets back.
//! Pure: no client, no clock.
//!
//! Both the operator (over its reflector stores) and `scan` (over paginated lists) implement
//! [`Lookup`]; the facts are built from API objects by the same functions here, so the two can
//! never disagree about what a claim or a class says.

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::model::expansion::{ClaimSize, ClaimSpecWire, ClaimStatusWire, claim_size};

/// What is known about a claim, looked up by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimFacts {
    /// `metadata.uid`.
    pub(crate) uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) terminating: bool,
    /// What its request and capacity say (an expansion under way or stopped).
    pub(crate) size: ClaimSize,
}

/// What is known about a StorageClass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassFacts {
    /// `reclaimPolicy`, defaulted to Delete as the API server does.
    pub(crate) reclaim_policy: String,
    /// `parameters.type`: the disk type (GCE and EBS drivers; what the price table may name).
    pub(crate) disk_type: Option<String>,
    /// `parameters.replication-type` (GCE: `regional-pd`).
    pub(crate) replication_type: Option<String>,
}

/// The answer of a lookup.
///
/// A 403 is [`Found::Unknown`], never [`Found::Absent`]; a store whose watch is failing answers
/// [`Found::Stale`], from which nothing at all may be concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found<T> {
    /// The object exists.
    Yes(T),
    /// The object does not exist (the store is synced, healthy and does not hold it).
    Absent,
    /// The objects of this kind cannot be read (forbidden).
    Unknown,
    /// The store may be out of date: its watch has been failing for longer than the bound.
    Stale,
}

pub(crate) use crate::model::image::ImageFound;

/// Read access to claims, StorageClasses and the storage backend's census.
///
/// A lookup only hands out what it holds; what the census says of a volume's disk is decided by
/// [`disk_found`], one function for every driver, so that `scan` and the operator cannot locate
/// a disk differently.
pub trait Lookup {
    /// The claim `namespace/name`.
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts>;
    /// The StorageClass `name`.
    fn class(&self, name: &str) -> Found<ClassFacts>;
    /// The storage backend's census, when it is on.
    fn census(&self) -> Option<&crate::decide::census::Census> {
        None
    }
}

/// What the census says about the disk behind `source` (located by the source alone: its
/// handle, or for an in-tree disk the zones it records), for a volume created at `created`.
/// Without a census, or for a source the census does not cover: not censused.
pub(crate) fn disk_found(
    lookup: &impl Lookup,
    source: &crate::model::crd::VolumeSourceInfo,
    created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> ImageFound {
    let Some(c) = lookup.census() else {
        return ImageFound::NotCensused;
    };
    match c.disk_ref(source) {
        Some(r) => c.image(&r, created),
        None => ImageFound::NotCensused,
    }
}

/// The size of the disk behind `source`, as the census last listed it (see
/// [`crate::decide::census::Census::disk_size`]), with the backend's size granularity.
pub(crate) fn disk_size(
    lookup: &impl Lookup,
    source: &crate::model::crd::VolumeSourceInfo,
) -> Option<crate::model::size::DiskSize> {
    let census = lookup.census()?;
    let r = census.disk_ref(source)?;
    let bytes = census.disk_size(&r)?;
    Some(crate::model::size::DiskSize::of(&r, bytes))
}

/// The facts classification needs from a claim.
pub(crate) fn claim_facts(c: &ClaimObject) -> ClaimFacts {
    ClaimFacts {
        uid: c.metadata.uid.clone().unwrap_or_default(),
        terminating: c.metadata.deletion_timestamp.is_some(),
        size: claim_size(c.spec.as_ref(), c.status.as_ref()),
    }
}

/// The facts classification needs from a StorageClass.
pub(crate) fn class_facts(c: &StorageClass) -> ClassFacts {
    ClassFacts {
        // The API server defaults an unset reclaimPolicy to Delete.
        reclaim_policy: c.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
        disk_type: parameter(c, "type"),
        replication_type: parameter(c, "replication-type"),
    }
}

/// A StorageClass parameter, its key compared without case (the GCE PD driver reads its
/// parameters so; the EBS driver's are lower case).
fn parameter(c: &StorageClass, key: &str) -> Option<String> {
    c.parameters
        .iter()
        .flatten()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// A PersistentVolumeClaim as the claim feed and `scan` read it: its metadata, without
/// `managedFields` and `annotations` ([`crate::model::meta`]), and of its spec and status only
/// what says its size ([`crate::model::expansion`]); the rest is skipped by the parser.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct ClaimObject {
    /// The metadata that is read.
    #[serde(default, deserialize_with = "crate::model::meta::lean")]
    pub metadata: ObjectMeta,
    /// `spec.resources.requests.storage`.
    #[serde(default)]
    pub spec: Option<ClaimSpecWire>,
    /// `status`: phase, capacity and the resize's status and conditions.
    #[serde(default)]
    pub status: Option<ClaimStatusWire>,
}

/// A claim of which only the metadata is known (its size settled).
impl From<ObjectMeta> for ClaimObject {
    fn from(metadata: ObjectMeta) -> Self {
        ClaimObject {
            metadata,
            ..ClaimObject::default()
        }
    }
}

impl kube::Resource for ClaimObject {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "PersistentVolumeClaim".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn api_version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "persistentvolumeclaims".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the operator keeps of a claim in its store: its key, uid, whether it is being deleted
/// and, only while its request exceeds its capacity, the expansion (about 350 bytes with the
/// store's key, against about 950 for its stripped metadata).
/// Its `resourceVersion` and uid stay out of the store's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// `metadata.namespace` (shared: few distinct values).
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Box<str>,
    /// `metadata.uid` (16 bytes when canonical, see [`crate::model::uid`]).
    pub(crate) uid: crate::model::uid::Uid,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) terminating: bool,
    /// What its request and capacity say.
    pub(crate) size: ClaimSize,
}

impl Claim {
    /// The lean form of a claim.
    pub fn of(c: &ClaimObject) -> Claim {
        // The same facts `scan` reads, through the same function.
        let ClaimFacts {
            uid,
            terminating,
            size,
        } = claim_facts(c);
        let meta = &c.metadata;
        Claim {
            namespace: crate::model::intern::intern(meta.namespace.as_deref().unwrap_or_default()),
            name: meta.name.as_deref().unwrap_or_default().into(),
            uid: crate::model::uid::Uid::new(&uid),
            terminating,
            size,
        }
    }

    /// The facts classification reads.
    pub(crate) fn facts(&self) -> ClaimFacts {
        ClaimFacts {
            uid: self.uid.to_string(),
            terminating: self.terminating,
            size: self.size.clone(),
        }
    }
}

impl kube::runtime::reflector::Lookup for Claim {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        "PersistentVolumeClaim".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "persistentvolumeclaims".into()
    }
    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.name))
    }
    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::Borrowed(&self.namespace))
    }
    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }
    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}
