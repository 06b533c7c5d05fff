//! The HTTP endpoints `/healthz`, `/readyz` and `/metrics`.
//! I/O: serves HTTP; never talks to the API server.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::telemetry::health::Health;
use crate::telemetry::metrics::Metrics;

#[derive(Clone)]
struct Shared {
    health: Arc<Health>,
    metrics: Arc<Metrics>,
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener` until `shutdown` resolves.
pub(crate) async fn serve(
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
    s.metrics.ready(s.health.report().0);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}
