//! What the census can say about the image (or disk) a volume names. The disk a volume names,
//! [`DiskRef`], and the key of a listing, [`Scope`], are in [`crate::model::backend`].
//!
//! [`DiskRef`]: crate::model::backend::DiskRef
//! [`Scope`]: crate::model::backend::Scope

/// What the census says about a volume's image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageFound {
    /// The volume's image is not in a censused pool (or the volume names no RBD image).
    NotCensused,
    /// Cannot be said now: the pool's census failed or has not run, or the image was missed
    /// once and awaits the next census.
    Unknown,
    /// The image exists; this many watchers have it open.
    Present {
        /// Number of watchers.
        watchers: usize,
    },
    /// Two censuses in a row did not list it, and the volume is older than both.
    Missing {
        /// It is in the pool's trash (deleted, restorable until purged).
        in_trash: bool,
    },
}
