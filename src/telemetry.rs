//! Readiness, metrics and the HTTP endpoints that show them (`/healthz`, `/readyz`, `/metrics`).
//! I/O: serves HTTP; never talks to the API server.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::crd::Reason;

/// The four watched kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Kind {
    /// PersistentVolumes.
    persistentvolumes,
    /// PersistentVolumeClaims (metadata only).
    persistentvolumeclaims,
    /// StorageClasses.
    storageclasses,
    /// VolumeLeftovers.
    volumeleftovers,
}

impl Kind {
    /// All kinds, in display order.
    pub const ALL: [Kind; 4] = [
        Kind::persistentvolumes,
        Kind::persistentvolumeclaims,
        Kind::storageclasses,
        Kind::volumeleftovers,
    ];

    /// Resource name, as RBAC and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::persistentvolumes => "persistentvolumes",
            Kind::persistentvolumeclaims => "persistentvolumeclaims",
            Kind::storageclasses => "storageclasses",
            Kind::volumeleftovers => "volumeleftovers",
        }
    }

    fn idx(self) -> usize {
        self as usize
    }
}

/// What the operator knows about one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StoreState {
    /// The initial list has not completed.
    Pending = 0,
    /// Listed and watching.
    Synced = 1,
    /// The API answered 403: objects of this kind cannot be read.
    Forbidden = 2,
}

/// Shared readiness state, written by the controller loop, read by `/readyz` and `/metrics`.
#[derive(Debug, Default)]
pub struct Health {
    stores: [AtomicU8; 4],
    last_error: [Mutex<Option<String>>; 4],
    shutting_down: AtomicBool,
}

impl Health {
    /// Records a store state.
    pub fn set(&self, kind: Kind, state: StoreState) {
        self.stores[kind.idx()].store(state as u8, Ordering::Relaxed);
        if state == StoreState::Synced {
            self.set_error(kind, None);
        }
    }

    /// The state of a store.
    pub fn get(&self, kind: Kind) -> StoreState {
        match self.stores[kind.idx()].load(Ordering::Relaxed) {
            1 => StoreState::Synced,
            2 => StoreState::Forbidden,
            _ => StoreState::Pending,
        }
    }

    /// Records the last error of a watch, shown by `/readyz`.
    pub fn set_error(&self, kind: Kind, err: Option<String>) {
        if let Ok(mut e) = self.last_error[kind.idx()].lock() {
            *e = err;
        }
    }

    /// Marks the process as stopping (readiness goes false).
    pub fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
    }

    /// Ready when every store is synced. A forbidden claim or class store keeps the operator
    /// unready on purpose: findings are still published, with `claimMissing: Unknown`, but the
    /// Deployment shows that something is wrong.
    pub fn report(&self) -> (bool, String) {
        let mut ok = !self.shutting_down.load(Ordering::Relaxed);
        let mut body = String::new();
        if !ok {
            body.push_str("shutting down\n");
        }
        for k in Kind::ALL {
            let state = self.get(k);
            ok &= state == StoreState::Synced;
            let _ = write!(body, "{}: {:?}", k.as_str(), state);
            if state != StoreState::Synced
                && let Ok(e) = self.last_error[k.idx()].lock()
                && let Some(e) = e.as_deref()
            {
                let _ = write!(body, " ({e})");
            }
            body.push('\n');
        }
        (ok, body)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabel {
    resource: Kind,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabel {
    op: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

/// Prometheus metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    watch_errors: Family<KindLabel, Counter>,
    relists: Family<KindLabel, Counter>,
    store_state: Family<KindLabel, Gauge>,
    writes: Family<WriteLabel, Counter>,
    findings: Family<ReasonLabel, Gauge>,
    skipped: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("volume_leftovers");
        let watch_errors = Family::<KindLabel, Counter>::default();
        registry.register(
            "watch_errors",
            "Errors from the watches (410 Gone, 403, outages)",
            watch_errors.clone(),
        );
        let relists = Family::<KindLabel, Counter>::default();
        registry.register(
            "relists",
            "Completed lists (initial and after a 410)",
            relists.clone(),
        );
        let store_state = Family::<KindLabel, Gauge>::default();
        registry.register(
            "store_state",
            "0 pending, 1 synced, 2 forbidden (403)",
            store_state.clone(),
        );
        let writes = Family::<WriteLabel, Counter>::default();
        registry.register(
            "writes",
            "Writes to VolumeLeftovers by operation and result",
            writes.clone(),
        );
        let findings = Family::<ReasonLabel, Gauge>::default();
        registry.register(
            "findings",
            "Published findings by reason, as last computed by a sweep",
            findings.clone(),
        );
        let skipped = Counter::default();
        registry.register(
            "skipped_volumes",
            "PersistentVolumes too odd to classify (logged)",
            skipped.clone(),
        );
        Metrics {
            registry,
            watch_errors,
            relists,
            store_state,
            writes,
            findings,
            skipped,
        }
    }
}

impl Metrics {
    /// Counts a watch error.
    pub fn watch_error(&self, kind: Kind) {
        self.watch_errors
            .get_or_create(&KindLabel { resource: kind })
            .inc();
    }

    /// Counts a completed list.
    pub fn relisted(&self, kind: Kind) {
        self.relists
            .get_or_create(&KindLabel { resource: kind })
            .inc();
    }

    /// Exposes a store state.
    pub fn store_state(&self, kind: Kind, state: StoreState) {
        self.store_state
            .get_or_create(&KindLabel { resource: kind })
            .set(state as i64);
    }

    /// Counts a write.
    pub fn write(&self, op: &'static str, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.writes.get_or_create(&WriteLabel { op, result }).inc();
    }

    /// Sets the number of findings per reason.
    pub fn findings(&self, counts: &[(Reason, i64)]) {
        for (reason, n) in counts {
            self.findings
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .set(*n);
        }
    }

    /// Counts a skipped volume.
    pub fn skipped(&self) {
        self.skipped.inc();
    }

    /// The metrics in the text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[derive(Clone)]
struct Shared {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = axum::Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_handler))
        .with_state(Shared { health, metrics });
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    }
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn readyz(State(s): State<Shared>) -> impl IntoResponse {
    let (ok, body) = s.health.report();
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, body)
}

async fn metrics_handler(State(s): State<Shared>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}
