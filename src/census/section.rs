//! What the census reads of each backend's section of the configuration file (the section's own
//! settings are its backend's), and the checks every section shares.

use crate::decide::census::Scope;

/// What the census needs of one section of a backend's in the file (its own settings are the
/// backend's, read by its listers): its scopes and this cluster's name in them.
pub(crate) trait Section {
    /// The scopes known before any listing: disks and snapshots (a scope listed as a whole is
    /// one of them; the scopes within it join as its listings name them).
    fn scopes_up_front(&self) -> Vec<Scope>;

    /// The scopes listed as a whole ([`crate::decide::census::Census::open_whole`]).
    fn wholes(&self) -> Vec<Scope> {
        Vec::new()
    }

    /// This cluster's name in its scopes' ownership metadata (`None`: the file's
    /// `clusterName`).
    fn cluster_name(&self) -> Option<&str>;
}

/// An endpoint must be an http(s) URL.
pub(crate) fn check_endpoint(what: &str, e: &Option<String>) -> Result<(), String> {
    match e {
        Some(e) if !(e.starts_with("http://") || e.starts_with("https://")) => Err(format!(
            "{what}: endpoint {e:?} is not an http:// or https:// URL"
        )),
        _ => Ok(()),
    }
}

/// A key given must not be empty.
pub(crate) fn check_nonempty(what: &str, field: &str, v: &Option<String>) -> Result<(), String> {
    match v {
        Some(v) if v.is_empty() => Err(format!("{what}: {field} is empty")),
        _ => Ok(()),
    }
}
