//! A fault-injecting HTTP proxy between the operator and the real API server, for the faults a
//! real server will not produce on demand: a 503 on one resource, a request that hangs, a
//! connection reset, a delay, a watch stream that breaks, per path and verb.
//!
//! The operator talks plain HTTP to the proxy with its own bearer token; the proxy forwards each
//! request over TLS to the API server (trusting the test CA) with the operator's headers, and
//! streams the response back (watches included). Everything else is the real server.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use kube::Client;

use crate::support::ControlPlane;

/// What to do to a matching request.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer with this status and a Kubernetes Status body.
    Status(u16),
    /// Forward after this delay.
    Delay(Duration),
    /// Never answer.
    Hang,
    /// Close the connection without an answer.
    Reset,
}

/// Which requests a fault applies to.
#[derive(Clone, Debug)]
pub struct Rule {
    /// `watch`, `read` (get and list), `create`, `patch`, `update`, `delete`; `None`: any.
    pub verb: Option<&'static str>,
    /// A substring of the path (`/persistentvolumeclaims`, `/volumeleftovers`).
    pub path: String,
    /// The fault.
    pub fault: Fault,
    /// Applies this many times, then no more; `None`: until cleared.
    pub times: Option<u32>,
}

impl Rule {
    pub fn new(verb: Option<&'static str>, path: &str, fault: Fault) -> Rule {
        Rule {
            verb,
            path: path.into(),
            fault,
            times: None,
        }
    }

    pub fn times(mut self, n: u32) -> Rule {
        self.times = Some(n);
        self
    }
}

/// A request the proxy saw.
#[derive(Clone, Debug)]
pub struct Seen {
    pub verb: &'static str,
    pub path: String,
    /// The fault applied, if any.
    pub faulted: bool,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    seen: Vec<Seen>,
    /// Open response streams: (path, generation at start).
    generation: u64,
}

/// The running proxy.
pub struct FaultProxy {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    /// (generation, path, freeze): open streams of that path started before the generation
    /// break (or, with freeze, fall silent).
    breaker: tokio::sync::watch::Sender<(u64, String, bool)>,
    task: tokio::task::JoinHandle<()>,
}

fn verb_of(req: &Request<Incoming>) -> &'static str {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *req.method() {
        hyper::Method::GET if watch => "watch",
        hyper::Method::GET => "read",
        hyper::Method::POST => "create",
        hyper::Method::PATCH => "patch",
        hyper::Method::PUT => "update",
        hyper::Method::DELETE => "delete",
        _ => "other",
    }
}

fn status_body(code: u16) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("injected by the test proxy: {code}"),
            "reason": if code == 503 { "ServiceUnavailable" } else { "InternalError" },
            "code": code,
        })
        .to_string(),
    )
}

type ProxyBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>;

fn full(b: Bytes) -> ProxyBody {
    http_body_util::Full::new(b)
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

impl FaultProxy {
    /// A proxy in front of `cp`'s API server.
    pub async fn start(cp: &ControlPlane) -> FaultProxy {
        // The admin kubeconfig's cluster (URL and CA) without its identity: the operator's own
        // token is forwarded.
        let mut config = cp.config("admin").await;
        config.auth_info = Default::default();
        config.default_retry = false;
        config.read_timeout = None;
        let upstream = Client::try_from(config).expect("upstream client");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state: Arc<Mutex<State>> = Arc::default();
        let (breaker, _) = tokio::sync::watch::channel((0u64, String::new(), false));
        let task = {
            let state = state.clone();
            let breaker = breaker.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (state, upstream, breaker) =
                        (state.clone(), upstream.clone(), breaker.clone());
                    tokio::spawn(async move {
                        let svc = service_fn(move |req| {
                            handle(req, state.clone(), upstream.clone(), breaker.subscribe())
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
            })
        };
        FaultProxy {
            addr,
            state,
            breaker,
            task,
        }
    }

    pub fn add(&self, rule: Rule) {
        self.state.lock().unwrap().rules.push(rule);
    }

    pub fn clear(&self) {
        self.state.lock().unwrap().rules.clear();
    }

    /// Breaks every open response stream whose path contains `path` (a watch connection that
    /// dies mid-stream).
    pub fn break_streams(&self, path: &str) {
        self.signal_streams(path, false);
    }

    /// Makes every open response stream whose path contains `path` fall silent, the connection
    /// open and no error: a watch that hangs (a stuck load balancer, a half-dead connection).
    pub fn freeze_streams(&self, path: &str) {
        self.signal_streams(path, true);
    }

    fn signal_streams(&self, path: &str, freeze: bool) {
        let g = {
            let mut s = self.state.lock().unwrap();
            s.generation += 1;
            s.generation
        };
        let _ = self.breaker.send((g, path.to_string(), freeze));
    }

    /// Requests seen so far with `verb` (any if `None`) on a path containing `path`.
    pub fn count(&self, verb: Option<&str>, path: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| verb.is_none_or(|v| v == s.verb) && s.path.contains(path))
            .count()
    }

    /// Faulted requests so far on a path containing `path`.
    pub fn faulted(&self, path: &str) -> usize {
        self.state
            .lock()
            .unwrap()
            .seen
            .iter()
            .filter(|s| s.faulted && s.path.contains(path))
            .count()
    }

    /// A client with the operator's identity that reaches the API server through this proxy,
    /// tuned for `test_settings()`'s watch timeout.
    pub async fn operator_client(&self, cp: &ControlPlane) -> Client {
        self.operator_client_for(cp, Duration::from_secs(20)).await
    }

    /// The same, tuned for this watch timeout (as the binary tunes its client).
    pub async fn operator_client_for(&self, cp: &ControlPlane, watch_timeout: Duration) -> Client {
        let mut config = cp.config("operator").await;
        config.cluster_url = format!("http://{}", self.addr).parse().expect("url");
        config.root_cert = None;
        volume_leftovers::watch::client::tune(&mut config, watch_timeout);
        Client::try_from(config).expect("client")
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<State>>,
    upstream: Client,
    mut breaker: tokio::sync::watch::Receiver<(u64, String, bool)>,
) -> Result<Response<ProxyBody>, std::io::Error> {
    let verb = verb_of(&req);
    let path = req.uri().path().to_string();
    let fault = {
        let mut s = state.lock().unwrap();
        let hit = s.rules.iter_mut().find(|r| {
            r.verb.is_none_or(|v| v == verb)
                && path.contains(&r.path)
                && r.times.is_none_or(|n| n > 0)
        });
        let fault = hit.map(|r| {
            if let Some(n) = r.times.as_mut() {
                *n -= 1;
            }
            r.fault.clone()
        });
        s.seen.push(Seen {
            verb,
            path: path.clone(),
            faulted: fault.is_some(),
        });
        fault
    };
    match fault {
        Some(Fault::Status(code)) => {
            return Ok(Response::builder()
                .status(code)
                .header("content-type", "application/json")
                .body(full(status_body(code)))
                .unwrap());
        }
        Some(Fault::Hang) => {
            std::future::pending::<()>().await;
        }
        Some(Fault::Reset) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "injected reset",
            ));
        }
        Some(Fault::Delay(d)) => tokio::time::sleep(d).await,
        None => {}
    }

    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let mut builder = Request::builder()
        .method(parts.method)
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (k, v) in &parts.headers {
        if k != hyper::header::HOST && k != hyper::header::CONNECTION {
            builder = builder.header(k, v);
        }
    }
    let out = builder
        .body(kube::client::Body::from(body.to_vec()))
        .map_err(std::io::Error::other)?;
    let resp = match upstream.send(out).await {
        Ok(r) => r,
        Err(e) => {
            return Ok(Response::builder()
                .status(502)
                .body(full(Bytes::from(e.to_string())))
                .unwrap());
        }
    };
    let (parts, body) = resp.into_parts();
    let start = breaker.borrow().0;
    let watched = path.clone();
    let broken = async move {
        loop {
            if breaker.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            let (g, p, freeze) = breaker.borrow().clone();
            if g > start && watched.contains(&p) {
                return freeze;
            }
        }
    };
    // A broken stream ends with an error, so the client sees a dead connection, not a clean end.
    let body = http_body_util::BodyStream::new(body)
        .map(|r| r.map_err(std::io::Error::other))
        .boxed();
    let frames = futures::stream::unfold(Some((body, Box::pin(broken))), |st| async move {
        let (mut body, mut broken) = st?;
        tokio::select! {
            item = body.next() => item.map(|f| (f, Some((body, broken)))),
            freeze = &mut broken => {
                if freeze {
                    // Keeps the body (the connection) open and says nothing more.
                    std::future::pending::<()>().await;
                }
                Some((Err(std::io::Error::other("injected break")), None))
            }
        }
    });
    let mut resp = Response::from_parts(parts, BodyExt::boxed_unsync(StreamBody::new(frames)));
    resp.headers_mut().remove(hyper::header::CONTENT_LENGTH);
    Ok(resp)
}
