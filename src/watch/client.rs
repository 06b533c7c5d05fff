//! The Kubernetes client: its configuration, timeouts and identity in the API server's logs.

use std::time::Duration;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No usable kubeconfig or in-cluster configuration.
    #[error("no Kubernetes client configuration (set KUBECONFIG, or run in a pod): {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration.
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
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
pub(crate) fn name_client(config: &mut kube::Config, identity: &str) {
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
pub async fn client(watch_timeout: Duration) -> Result<(kube::Client, String), ClientError> {
    let mut config = kube::Config::infer().await.map_err(ClientError::Config)?;
    tune(&mut config, watch_timeout);
    name_client(&mut config, &identity());
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config).map_err(ClientError::Client)?;
    Ok((client, server.trim_end_matches('/').to_string()))
}

/// The credentials a client built by [`client`] presents, for a message when they are rejected
/// (401: the server does not say whose they were): the kubeconfig's user and context, or the
/// pod's ServiceAccount token.
pub(crate) fn credentials() -> String {
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

/// This replica's identity in the election: its pod name (downward API), else the host name.
pub(crate) fn identity() -> String {
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
