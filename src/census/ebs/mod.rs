//! The AWS EBS census, I/O: lists the EBS volumes of one account's region with the official SDK
//! (`aws-sdk-ec2`, `DescribeVolumes` through its paginator) and returns every volume's facts
//! ([`EbsVolume`]), or why there is no list ([`ListError`]).
//!
//! **I/O: reads EC2 (`ec2:DescribeVolumes`; `ec2:DescribeSnapshots` for the CSI driver's
//! snapshots ([`Ebs::list_snapshots`]), `docs/iam/ebs-census-policy.json`); writes nothing.** Credentials come from `aws-config`'s default chain (environment keys, IRSA's web
//! identity token, EKS Pod Identity, the instance profile) or from keys given
//! ([`CredentialSource::Keys`], e.g. from a Secret). Every request is bounded
//! ([`EbsConfig::attempt_timeout`] per attempt, [`EbsConfig::request_timeout`] per page with its
//! retries), retries back off (the SDK's standard mode, at most [`EbsConfig::max_attempts`]),
//! and the listing as a whole is bounded by [`EbsConfig::deadline`].
//!
//! A listing is complete or it is an error: a page that fails after its retries, a deadline
//! passed, or a page token that repeats (a server that would make the paginator stop early) ends
//! it with a [`ListError`] and no volumes, so that the caller answers Unknown for the scope and
//! never "the disk is gone".
//!
//! Folder: [`config`] (its section of the configuration file) and [`vocabulary`] (its words
//! for the decisions), both compiled in every build; `client` (the
//! service's client), `facts` (what an answer says, pure), `census` (the
//! [`Lister`](crate::census::backend::Lister)); the last three need the `ebs` feature.

#[cfg(feature = "ebs")]
pub mod census;
#[cfg(feature = "ebs")]
mod client;
pub mod config;
#[cfg(feature = "ebs")]
pub mod facts;
pub mod handle;
mod runbook;
pub mod vocabulary;

#[cfg(feature = "ebs")]
pub use client::*;

/// EBS's registration ([`crate::census::Registration`]).
pub const REGISTRATION: crate::census::Registration = crate::census::Registration {
    words: &vocabulary::EBS,
    #[cfg(feature = "ebs")]
    listers: census::listers,
    #[cfg(not(feature = "ebs"))]
    listers: |_| Vec::new(),
    released: None,
};
