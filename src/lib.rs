//! volume-leftovers: reports PersistentVolumes that survived their claims.
//!
//! Pure modules ([`classify`], [`plan`], [`leftover`], [`index`], [`lookup`], [`category`], [`backoff`],
//! [`crd`], [`cli`]) decide; [`schedule`] is the loop's state machine (no I/O, tokio's clock);
//! [`feed`], [`controller`] and [`scan`] do the I/O. Only [`writer`] writes, and only
//! VolumeLeftovers.

pub mod census;
pub mod decide;
pub mod engine;
pub mod model;
pub mod publish;
pub mod run;
pub mod scan;
pub mod telemetry;
#[cfg(test)]
mod tests;
pub mod watch;

use std::time::Duration;

use std::sync::Arc;

use kube::CustomResourceExt;

use crate::run::cli::RunArgs;
use crate::telemetry::{Health, Metrics};

/// The CRD as YAML, exactly as committed in `crds/volumeleftovers.yaml`.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(&model::crd::VolumeLeftover::crd())
}

/// Errors that end the process.
#[derive(Debug, thiserror::Error)]
pub enum FatalError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("no Kubernetes client configuration (set KUBECONFIG, or run in a pod): {0}")]
    Config(String),
    /// The client could not be built from the configuration.
    #[error("building the Kubernetes client: {0}")]
    Client(String),
    /// The health endpoint could not listen.
    #[error("serving /healthz, /readyz and /metrics on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// This replica lost its Lease; it exits so that a fresh process starts as standby.
    #[error("lost the leader election Lease; exiting so that a fresh process starts as standby")]
    LostLease,
    /// Installing the signal handler failed.
    #[error("installing the SIGTERM handler: {0}")]
    Signal(#[source] std::io::Error),
    /// Scan failed.
    #[error(transparent)]
    Scan(#[from] scan::ScanError),
    /// The CRD could not be rendered.
    #[error("rendering the CRD as YAML: {0}")]
    Crd(#[from] serde_saphyr::ser::Error),
    /// The census configuration is unusable.
    #[error("{0}")]
    Census(String),
    /// The async runtime could not be built.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// Bounds every request of a client: connecting, reading (a little longer than the server's
/// watch timeout, so a healthy quiet watch never trips it, while a request that hangs does), and
/// turns off kube's built-in retry of 429/503/504 (up to 15 retries with delays of up to 1,000 s:
/// a hang in practice), because every caller here retries with its own backoff.
pub fn tune(config: &mut kube::Config, watch_timeout: Duration) {
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = Some(watch_timeout + Duration::from_secs(15));
    config.reset_reader_on_write = true;
    config.write_timeout = Some(Duration::from_secs(30));
    config.default_retry = false;
}

/// Names this process in every request's User-Agent (`volume-leftovers/<version> (<identity>)`),
/// so the API server's audit log tells replicas apart.
pub fn name_client(config: &mut kube::Config, identity: &str) {
    let ua = format!(
        "volume-leftovers/{} ({identity})",
        env!("CARGO_PKG_VERSION")
    );
    if let Ok(v) = axum::http::HeaderValue::from_str(&ua) {
        config.headers.push((axum::http::header::USER_AGENT, v));
    }
}

/// Builds a client from `$KUBECONFIG`, `~/.kube/config` or the in-cluster environment, tuned
/// with [`tune`]. Returns the API server's URL too, for messages.
pub async fn client(watch_timeout: Duration) -> Result<(kube::Client, String), FatalError> {
    let mut config = kube::Config::infer()
        .await
        .map_err(|e| FatalError::Config(e.to_string()))?;
    tune(&mut config, watch_timeout);
    name_client(&mut config, &identity());
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(|e| FatalError::Client(e.to_string()))?;
    Ok((client, server.trim_end_matches('/').to_string()))
}

/// The credentials a client built by [`client`] presents, for a message when they are rejected
/// (401: the server does not say whose they were): the kubeconfig's user and context, or the
/// pod's ServiceAccount token.
pub fn credentials() -> String {
    match kube::config::Kubeconfig::read() {
        Ok(k) => {
            let context = k.current_context.clone().unwrap_or_default();
            let user = k
                .contexts
                .iter()
                .find(|c| c.name == context)
                .and_then(|c| c.context.as_ref()?.user.clone())
                .unwrap_or_default();
            format!("the kubeconfig's user {user:?} (context {context:?})")
        }
        Err(_) => "the pod's ServiceAccount token".to_string(),
    }
}

/// The loop's settings from the flags of `run`.
pub fn settings(args: &RunArgs) -> run::controller::Settings {
    run::controller::Settings {
        concurrency: usize::from(args.concurrency),
        resync: args.resync,
        graces: decide::plan::Graces {
            grace: args.grace,
            delete_grace: args.delete_grace,
        },
        page_size: args.page_size,
        watch_timeout: u32::try_from(args.watch_timeout.as_secs()).unwrap_or(30),
        request_timeout: args.request_timeout,
        leader: args.leader_elect.then(|| publish::leader::LeaderSettings {
            lease_name: args.lease_name.clone(),
            namespace: args.lease_namespace.clone().unwrap_or_else(own_namespace),
            identity: identity(),
            duration: args.lease_duration,
            renew_every: publish::leader::renew_every(args.lease_duration),
        }),
        exclusions: args.exclude.exclusions(),
        events: args.events.then(identity),
        openreports: args.openreports,
        tombstone_ttl: args.tombstone_ttl,
        ..run::controller::Settings::default()
    }
}

/// This replica's identity in the election: its pod name (downward API), else the host name.
pub fn identity() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| format!("volume-leftovers-{}", std::process::id()))
}

/// The namespace this process runs in: `POD_NAMESPACE` (downward API), the service account's
/// namespace file, else `default`.
pub fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
                .ok()
                .map(|n| n.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "default".into())
}

/// Runs the operator until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> Result<(), FatalError> {
    let census = args.census.settings().map_err(FatalError::Census)?;
    let (client, server) = client(args.watch_timeout).await?;
    tracing::info!(%server, "starting");
    if let Some(risk) = args.silent_watch_risk() {
        tracing::warn!("{risk}");
    }
    let health = Arc::new(Health::new(args.stale_after));
    let metrics = Arc::new(Metrics::default());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signals = shutdown_signal().map_err(FatalError::Signal)?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|source| FatalError::Listen {
            addr: args.listen,
            source,
        })?;
    let server = {
        let mut rx = stop_rx.clone();
        tokio::spawn(telemetry::serve(
            listener,
            health.clone(),
            metrics.clone(),
            async move {
                let _ = rx.wait_for(|s| *s).await;
            },
        ))
    };
    let mut settings = settings(&args);
    if let Some(c) = &census {
        tracing::info!(pools = %c.config.pools().map(|k| k.to_string()).collect::<Vec<_>>().join(","), interval_s = c.interval.as_secs(), "Ceph RBD census on");
    }
    settings.census = census;
    if let Some(l) = &settings.leader {
        tracing::info!(lease = %format!("{}/{}", l.namespace, l.lease_name), identity = %l.identity, "leader election on");
    }
    let mut rx = stop_rx;
    let controller = run::controller::run(client, settings, health, metrics, async move {
        let _ = rx.wait_for(|s| *s).await;
    });
    tokio::pin!(controller);
    let ended = tokio::select! {
        () = signals => {
            tracing::info!("signal received; shutting down");
            let _ = stop_tx.send(true);
            controller.await
        }
        ended = &mut controller => ended,
    };
    let _ = stop_tx.send(true);
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "health server ended with an error"),
        Err(e) => tracing::warn!(error = %e, "health server task failed"),
    }
    match ended {
        run::controller::Ended::Stopped => Ok(()),
        run::controller::Ended::LostLease => Err(FatalError::LostLease),
    }
}

fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}
