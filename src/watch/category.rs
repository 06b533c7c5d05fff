//! A stable category for every error that comes back from the API server. Pure.
//!
//! Errors are classified once, here, at the edge; logs, metrics, readiness and retry decisions
//! use the category, never raw HTTP codes.

use std::fmt;
use std::time::Duration;

/// What kind of failure an API request met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// 401: the credentials were rejected.
    Unauthorized,
    /// 403: the identity may not do this (RBAC), or an admission policy forbade it.
    Forbidden,
    /// 404: the object, or the resource type itself (a CRD that is not installed), is missing.
    NotFound,
    /// 409: already exists, or a precondition (uid, resourceVersion) failed.
    Conflict,
    /// 410: the resourceVersion is too old; the watcher relists.
    Expired,
    /// 400/422: the request was rejected as invalid (also by admission webhooks and policies).
    Invalid,
    /// 429/5xx, connection refused or reset, DNS: the server is not answering properly.
    Unavailable,
    /// The request took longer than its bound.
    Timeout,
    /// TLS: the server's certificate was not accepted, or the handshake failed.
    Tls,
    /// Anything else (a response that could not be read, a client-side error).
    Other,
}

impl Category {
    /// Stable short name, for metric labels and logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Category::Unauthorized => "unauthorized",
            Category::Forbidden => "forbidden",
            Category::NotFound => "not_found",
            Category::Conflict => "conflict",
            Category::Expired => "expired",
            Category::Invalid => "invalid",
            Category::Unavailable => "unavailable",
            Category::Timeout => "timeout",
            Category::Tls => "tls",
            Category::Other => "other",
        }
    }

    /// The category of an HTTP status code.
    pub(crate) fn of_code(code: u16) -> Category {
        match code {
            401 => Category::Unauthorized,
            403 => Category::Forbidden,
            404 => Category::NotFound,
            409 | 412 => Category::Conflict,
            410 => Category::Expired,
            400 | 422 => Category::Invalid,
            408 | 504 => Category::Timeout,
            429 | 500..=599 => Category::Unavailable,
            _ => Category::Other,
        }
    }

    /// The category of a client error.
    pub(crate) fn of(e: &kube::Error) -> Category {
        match e {
            kube::Error::Api(s) => Category::of_code(s.code),
            other => Category::of_chain(other),
        }
    }

    /// The category of a watcher error.
    pub(crate) fn of_watch(e: &kube::runtime::watcher::Error) -> Category {
        use kube::runtime::watcher::Error as W;
        match e {
            W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => Category::of(e),
            W::WatchError(s) => Category::of_code(s.code),
            W::NoResourceVersion => Category::Other,
        }
    }

    /// Walks the source chain of a transport error for the cause a person would name.
    fn of_chain(e: &(dyn std::error::Error + 'static)) -> Category {
        let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
        let mut found = Category::Other;
        while let Some(err) = cur {
            if let Some(io) = err.downcast_ref::<std::io::Error>() {
                found = match io.kind() {
                    std::io::ErrorKind::TimedOut => Category::Timeout,
                    std::io::ErrorKind::InvalidData => Category::Tls,
                    _ => Category::Unavailable,
                };
            }
            let text = err.to_string().to_ascii_lowercase();
            // A handshake cut short ("tls handshake eof") is a connection problem; a refused
            // certificate is a TLS problem.
            if text.contains("certificate")
                || text.contains("unknown issuer")
                || text.contains("unknownca")
                || (text.contains("tls") && !text.contains("eof"))
            {
                found = Category::Tls;
            } else if text.contains("timed out") || text.contains("timeout") {
                found = Category::Timeout;
            } else if found == Category::Other
                && (text.contains("connect") || text.contains("connection") || text.contains("dns"))
            {
                found = Category::Unavailable;
            }
            cur = err.source();
        }
        found
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line a person can act on: the innermost cause of a client error, without the
/// layers of wrapping ("HyperError: client error (Connect): tcp connect error: ...").
pub(crate) fn describe(e: &kube::Error) -> String {
    if let kube::Error::Api(s) = e {
        let reason = if s.reason.is_empty() {
            String::new()
        } else {
            format!(" {}", s.reason)
        };
        return format!("{}{reason}: {}", s.code, s.message);
    }
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    let mut last = e.to_string();
    while let Some(err) = cur {
        let text = err.to_string();
        if !text.is_empty() {
            last = text;
        }
        cur = err.source();
    }
    last
}

/// One request to the API server that failed: the client's error, kept whole as the source, or
/// no answer within the request's bound. Its [`category`](RequestError::category) is computed
/// from the cause when asked, never carried beside it.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The client's error: an API status, or the transport's. Shown as [`describe`] says.
    #[error("{}", describe(.0))]
    Client(#[source] kube::Error),
    /// No answer within the bound; the request was dropped.
    #[error("no answer within {}s", .0.as_secs_f32())]
    Timeout(Duration),
}

impl RequestError {
    /// What kind of failure it is.
    pub(crate) fn category(&self) -> Category {
        match self {
            RequestError::Client(e) => Category::of(e),
            RequestError::Timeout(_) => Category::Timeout,
        }
    }
}
