//! The Azure census: lists the managed disks (and, when asked, the snapshots the Azure Disk
//! CSI driver cut) of the resource groups an `azure` section names, read-only, with
//! Microsoft's own crates: `azure_identity` for the token (AKS Workload Identity, a client
//! secret, or a managed identity) and `azure_core`'s HTTP pipeline (retries, `Retry-After`).
//!
//! **I/O: reads Resource Manager (`Microsoft.Compute/disks/read`; `Microsoft.Compute/
//! snapshots/read` for the snapshots, nothing else) and Microsoft Entra's token endpoint;
//! writes nothing.** A custom role with those two actions, assigned on the resource groups, is
//! all it needs (the built-in Reader grants every read in the scope).
//!
//! Each resource group is a scope ([`vocabulary::resource_group`]):
//! its listing is complete (every page) or failed with its category, never partial. A disk
//! keyed by its lower-cased name, its facts from the answer itself ([`facts`]); a snapshot
//! only when the driver's tag says it cut it.
//!
//! Folder: [`config`] (the section) and [`vocabulary`] (its words for the decisions), both
//! compiled in every build; [`arm`] (the client), [`facts`]
//! (what an answer says, pure), [`census`] (the [`Lister`](crate::census::backend::Lister)).

#[cfg(feature = "azure")]
pub mod arm;
#[cfg(feature = "azure")]
pub mod census;
pub mod config;
#[cfg(feature = "azure")]
pub mod facts;
pub mod handle;
mod runbook;
pub mod vocabulary;

/// Azure's registration ([`crate::census::Registration`]).
pub const REGISTRATION: crate::census::Registration = crate::census::Registration {
    words: &vocabulary::AZURE,
    #[cfg(feature = "azure")]
    listers: census::listers,
    #[cfg(not(feature = "azure"))]
    listers: |_| Vec::new(),
    released: None,
};
