//! volume-leftovers: reports PersistentVolumes that survived their claims.
//!
//! Pure modules ([`classify`], [`plan`], [`index`], [`crd`]) decide; [`controller`] and [`scan`]
//! do the I/O. Only [`controller`]'s writer writes, and only VolumeLeftovers.

pub mod classify;
pub mod cli;
pub mod controller;
pub mod crd;
pub mod index;
pub mod plan;
pub mod scan;
pub mod telemetry;
#[cfg(test)]
mod tests;
pub mod volume;

use std::sync::Arc;

use kube::CustomResourceExt;

use crate::cli::RunArgs;
use crate::telemetry::{Health, Metrics};

/// The CRD as YAML, exactly as committed in `crds/volumeleftovers.yaml`.
pub fn crd_yaml() -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(&crd::VolumeLeftover::crd())
}

/// Errors that end the process.
#[derive(Debug, thiserror::Error)]
pub enum FatalError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("no Kubernetes client configuration (set KUBECONFIG, or run in a pod): {0}")]
    Client(#[source] kube::Error),
    /// The health endpoint could not listen.
    #[error("serving /healthz, /readyz and /metrics on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// Installing the signal handler failed.
    #[error("installing the SIGTERM handler: {0}")]
    Signal(#[source] std::io::Error),
    /// Scan failed.
    #[error(transparent)]
    Scan(#[from] scan::ScanError),
    /// The CRD could not be rendered.
    #[error("rendering the CRD as YAML: {0}")]
    Crd(#[from] serde_saphyr::ser::Error),
}

/// Builds a client from `$KUBECONFIG`, `~/.kube/config` or the in-cluster environment.
pub async fn client() -> Result<kube::Client, FatalError> {
    kube::Client::try_default()
        .await
        .map_err(FatalError::Client)
}

/// Runs the operator until SIGTERM or SIGINT.
pub async fn run(args: RunArgs) -> Result<(), FatalError> {
    let client = client().await?;
    let health = Arc::new(Health::default());
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
    let settings = controller::Settings {
        concurrency: usize::from(args.concurrency),
        resync: args.resync,
        bound_grace: args.bound_grace,
        page_size: args.page_size,
    };
    let mut rx = stop_rx;
    let controller = controller::run(client, settings, health, metrics, async move {
        let _ = rx.wait_for(|s| *s).await;
    });
    tokio::pin!(controller);
    tokio::select! {
        () = signals => {
            tracing::info!("signal received; shutting down");
            let _ = stop_tx.send(true);
            controller.await;
        }
        () = &mut controller => {}
    }
    let _ = stop_tx.send(true);
    match server.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "health server ended with an error"),
        Err(e) => tracing::warn!(error = %e, "health server task failed"),
    }
    Ok(())
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
