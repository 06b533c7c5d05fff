//! Wiring: the command line, settings, and the controller loop that joins watch, decide and
//! publish. Only this stage wires everything.

pub mod cli;
pub mod controller;
pub mod explain;
pub mod scheduling;
pub mod settings;
pub mod wiring;

use std::sync::Arc;

use crate::run::cli::RunArgs;
use crate::run::settings::{Settings, watch_timeout_secs};
use crate::telemetry::{Health, Metrics};
use crate::watch::client::{client, identity};

/// Errors that end the process.
#[derive(Debug, thiserror::Error)]
pub enum FatalError {
    /// No client: no configuration, or one it cannot be built from.
    #[error(transparent)]
    Client(#[from] crate::watch::client::ClientError),
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
    Scan(#[from] crate::scan::ScanError),
    /// The CRD could not be rendered.
    #[error("rendering the CRD as YAML: {0}")]
    Crd(#[from] serde_saphyr::ser::Error),
    /// The census configuration is unusable.
    #[error("{0}")]
    Census(String),
    /// The price table is unusable.
    #[error("{0}")]
    Prices(String),
    /// `explain` printed nothing.
    #[error(transparent)]
    Explain(#[from] crate::run::explain::ExplainError),
    /// The async runtime could not be built.
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// The loop's settings from the flags of `run`.
pub(crate) fn settings(args: &RunArgs) -> Settings {
    Settings {
        concurrency: usize::from(args.concurrency),
        resync: args.resync,
        graces: args.graces.graces(),
        page_size: args.page_size,
        watch_timeout: watch_timeout_secs(args.watch_timeout),
        request_timeout: args.request_timeout,
        leader: args
            .leader_elect
            .then(|| crate::publish::leader::LeaderSettings {
                lease_name: args.lease_name.clone(),
                namespace: args.lease_namespace.clone().unwrap_or_else(own_namespace),
                identity: identity(),
                duration: args.lease_duration,
                renew_every: crate::publish::leader::renew_every(args.lease_duration),
            }),
        exclusions: args.exclude.exclusions(),
        snapshot_exclusions: args.snapshots.exclusions(),
        events: args.events.then(identity),
        openreports: args.openreports,
        tombstone_ttl: args.tombstone_ttl,
        ..Settings::default()
    }
}

/// The namespace this process runs in: `POD_NAMESPACE` (downward API), the service account's
/// namespace file, else `default`.
pub(crate) fn own_namespace() -> String {
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
pub async fn operator(args: RunArgs) -> Result<(), FatalError> {
    let census = args.census.settings().map_err(FatalError::Census)?;
    let prices = args.pricing.prices().map_err(FatalError::Prices)?;
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
        tokio::spawn(crate::telemetry::serve(
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
        if !c.config.clusters.is_empty() {
            tracing::info!(pools = %c.config.pools().map(|k| k.to_string()).collect::<Vec<_>>().join(","), interval_s = c.interval.as_secs(), "Ceph RBD census on");
        }
        if !c.config.gce.is_empty() {
            tracing::info!(projects = %c.config.gce.iter().map(|g| g.project.as_str()).collect::<Vec<_>>().join(","), interval_s = c.interval.as_secs(), "GCE persistent disk census on");
        }
        if !c.config.ebs.is_empty() {
            tracing::info!(regions = %c.config.ebs.iter().map(|e| e.scope().to_string()).collect::<Vec<_>>().join(","), interval_s = c.interval.as_secs(), "EBS volume census on");
        }
    }
    settings.census = census;
    if let Some(t) = &prices {
        tracing::info!(currency = %t.currency, note = t.note.as_deref().unwrap_or(""), "cost estimates on (price table)");
    }
    settings.prices = prices;
    if let Some(l) = &settings.leader {
        tracing::info!(lease = %format!("{}/{}", l.namespace, l.lease_name), identity = %l.identity, "leader election on");
    }
    let mut rx = stop_rx;
    let controller = crate::run::controller::run(client, settings, health, metrics, async move {
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
        crate::run::controller::Ended::Stopped => Ok(()),
        crate::run::controller::Ended::LostLease => Err(FatalError::LostLease),
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
