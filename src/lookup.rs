//! What classification may ask about claims and StorageClasses, and the facts it gets back.
//! Pure: no client, no clock.
//!
//! Both the operator (over its reflector stores) and `scan` (over paginated lists) implement
//! [`Lookup`]; the facts are built from API objects by the same functions here, so the two can
//! never disagree about what a claim or a class says.

use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What is known about a claim, looked up by namespace and name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimFacts {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
}

/// What is known about a StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassFacts {
    /// `reclaimPolicy`, defaulted to Delete as the API server does.
    pub reclaim_policy: String,
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

pub use crate::census::ImageFound;

/// Read access to claims, StorageClasses and the storage backend's census.
pub trait Lookup {
    /// The claim `namespace/name`.
    fn claim(&self, namespace: &str, name: &str) -> Found<ClaimFacts>;
    /// The StorageClass `name`.
    fn class(&self, name: &str) -> Found<ClassFacts>;
    /// What the census says about the image behind `source`, for a volume created at
    /// `created`. Without a census: not censused.
    fn image(
        &self,
        source: &crate::crd::VolumeSourceInfo,
        created: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    ) -> ImageFound {
        let _ = (source, created);
        ImageFound::NotCensused
    }
}

/// The facts classification needs from a claim's metadata.
pub fn claim_facts(meta: &ObjectMeta) -> ClaimFacts {
    ClaimFacts {
        uid: meta.uid.clone().unwrap_or_default(),
        terminating: meta.deletion_timestamp.is_some(),
    }
}

/// The facts classification needs from a StorageClass.
pub fn class_facts(c: &StorageClass) -> ClassFacts {
    ClassFacts {
        // The API server defaults an unset reclaimPolicy to Delete.
        reclaim_policy: c.reclaim_policy.clone().unwrap_or_else(|| "Delete".into()),
    }
}
