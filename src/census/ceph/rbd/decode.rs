//! Pure decoding: librbd's NUL-separated buffers and the category of a Ceph error code
//! (ceph-csi's names and handles are in [`crate::model::csi`]). No I/O; never panics on any input.

use std::fmt;

/// Splits a buffer of NUL-terminated strings (librbd's `keys`/`values` of `rbd_metadata_list`,
/// `rbd_namespace_list`) into its strings, keeping empty ones: `b"a\0\0b\0"` is
/// `["a", "", "b"]`. Bytes after the last NUL (there should be none) are one more string.
pub(crate) fn split_nul_terminated(buf: &[u8]) -> Vec<String> {
    let body = buf.strip_suffix(b"\0").unwrap_or(buf);
    if buf.is_empty() {
        return Vec::new();
    }
    body.split(|&c| c == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// Pairs the two buffers of `rbd_metadata_list`. `None` when they hold different numbers of
/// strings (a value with a NUL byte inside: refused rather than mispaired).
pub(crate) fn pair_metadata(keys: &[u8], values: &[u8]) -> Option<Vec<(String, String)>> {
    let k = split_nul_terminated(keys);
    let v = split_nul_terminated(values);
    (k.len() == v.len()).then(|| k.into_iter().zip(v).collect())
}

/// A NUL-terminated C string in a fixed buffer (e.g. `rados_cluster_fsid`), lossy UTF-8.
pub(crate) fn c_buffer_str(buf: &[u8]) -> String {
    let end = buf.iter().position(|&c| c == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `CEPH_NOSNAP`: the snapshot id that names an image's head (its live data), not a snapshot.
pub(crate) const CEPH_NOSNAP: u64 = u64::MAX - 1;

/// The size in `rbd.get_size`'s reply: the object order (`u8`), then the size (`u64`, little
/// endian), as `cls_rbd` encodes them. `None` for a reply of another length.
pub(crate) fn get_size_reply(reply: &[u8]) -> Option<u64> {
    let [_order, size @ ..] = reply else {
        return None;
    };
    Some(u64::from_le_bytes(size.try_into().ok()?))
}

/// What kind of failure a Ceph error code is. Stable; see [`super::RbdError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// No answer within the timeout, or no connection: Ceph is unavailable, nothing is known.
    Unavailable,
    /// The user may not do this (cephx caps), or its key was refused.
    Forbidden,
    /// The pool or namespace does not exist.
    NotFound,
    /// librbd/librados could not be loaded (not installed, or too old).
    LibraryMissing,
    /// The configuration given is unusable (a missing keyring or config file, a bad option).
    Config,
    /// Any other error code.
    Other,
}

impl Category {
    /// Stable short name, for metric labels and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Category::Unavailable => "unavailable",
            Category::Forbidden => "forbidden",
            Category::NotFound => "not_found",
            Category::LibraryMissing => "library_missing",
            Category::Config => "config",
            Category::Other => "other",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Linux errno values Ceph returns (negated).
pub mod errno {
    pub(crate) const EPERM: i32 = 1;
    pub(crate) const ENOENT: i32 = 2;
    pub(crate) const EIO: i32 = 5;
    pub(crate) const EACCES: i32 = 13;
    pub(crate) const EINVAL: i32 = 22;
    pub(crate) const ERANGE: i32 = 34;
    pub(crate) const EBADMSG: i32 = 74;
    pub(crate) const ENETDOWN: i32 = 100;
    pub(crate) const ENETUNREACH: i32 = 101;
    pub(crate) const ECONNABORTED: i32 = 103;
    pub(crate) const ECONNRESET: i32 = 104;
    pub(crate) const ENOTCONN: i32 = 107;
    pub(crate) const ESHUTDOWN: i32 = 108;
    pub(crate) const ETIMEDOUT: i32 = 110;
    pub(crate) const ECONNREFUSED: i32 = 111;
    pub(crate) const EHOSTDOWN: i32 = 112;
    pub(crate) const EHOSTUNREACH: i32 = 113;
}

/// The category of the (negative) code `call` returned. `ENOENT` means a missing pool or
/// namespace only from the calls that name one; from `rados_connect` or `rados_conf_read_file`
/// it is a missing keyring or configuration file.
pub(crate) fn categorize(call: &str, code: i32) -> Category {
    use errno::*;
    match code.checked_neg().unwrap_or(i32::MAX) {
        ETIMEDOUT | ECONNREFUSED | ENOTCONN | ESHUTDOWN | ECONNRESET | ECONNABORTED | ENETDOWN
        | ENETUNREACH | EHOSTDOWN | EHOSTUNREACH => Category::Unavailable,
        EPERM | EACCES => Category::Forbidden,
        ENOENT => match call {
            "rados_connect" | "rados_conf_read_file" => Category::Config,
            "rados_pool_lookup" | "rados_ioctx_create" | "rbd_namespace_exists" => {
                Category::NotFound
            }
            _ => Category::Other,
        },
        EINVAL
            if matches!(
                call,
                "rados_conf_set" | "rados_conf_read_file" | "rados_create2"
            ) =>
        {
            Category::Config
        }
        _ => Category::Other,
    }
}

/// `strerror` of a (negative) code without Rust's " (os error N)" suffix.
pub(crate) fn strerror(code: i32) -> String {
    let text = std::io::Error::from_raw_os_error(code.checked_neg().unwrap_or(0)).to_string();
    match text.rfind(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// A whole number of seconds for Ceph's timeout options (their type is integer seconds; `0`
/// means "wait forever", so anything below one second becomes one).
pub(crate) fn timeout_secs(timeout: std::time::Duration) -> u64 {
    let s = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
    s.max(1)
}
