//! The Azure census's Resource Manager client: lists one resource group's managed disks (and
//! snapshots), every page, read-only, through `azure_core`'s HTTP pipeline with a token from
//! `azure_identity`.
//!
//! **I/O: `GET …/providers/Microsoft.Compute/disks` and `…/snapshots` of a resource group
//! (`Microsoft.Compute/disks/read`, `Microsoft.Compute/snapshots/read`), and Microsoft Entra's
//! token endpoint; writes nothing.**
//!
//! The pipeline retries 408, 429 and 5xx (and connection and I/O errors) with exponential
//! backoff, honouring `Retry-After`; each attempt is bounded by the HTTP client's timeout and
//! each resource group's whole listing, retries and pages included, by the census deadline.
//! The pages are followed here rather than by `azure_core`'s `Pager`, to refuse what a pager
//! would follow: a `nextLink` that repeats a page read before (the listing would never end)
//! or that points at another host than the endpoint (the bearer token would go with it).

use std::collections::HashSet;
use std::sync::{Arc, Once};
use std::time::Duration;

use azure_core::cloud::{CloudConfiguration, CustomConfiguration};
use azure_core::credentials::{Secret, TokenCredential};
use azure_core::error::ErrorKind;
use azure_core::http::policies::Policy;
use azure_core::http::policies::auth::BearerTokenAuthorizationPolicy;
use azure_core::http::{
    ClientOptions, Context, ExponentialRetryOptions, Method, Pipeline, Request, RetryOptions,
    Transport, Url,
};
use azure_identity::{
    ClientAssertionCredentialOptions, ClientSecretCredential, ClientSecretCredentialOptions,
    ManagedIdentityCredential, ManagedIdentityCredentialOptions, UserAssignedId,
    WorkloadIdentityCredential, WorkloadIdentityCredentialOptions,
};

use super::facts::{ArmResource, AzureDisk, Page};
use crate::census::CensusFailure;
use crate::model::listing::FailureCategory;

/// The `Microsoft.Compute` API version whose answers the census reads (and whose published
/// models the tests' server validates its answers against).
pub(crate) const API_VERSION: &str = "2024-03-02";
/// Resource Manager's public endpoint.
pub(crate) const PUBLIC_ENDPOINT: &str = "https://management.azure.com";
/// The token scope: Resource Manager.
pub(crate) const ARM_SCOPE: &str = "https://management.azure.com/.default";

/// Which credential signs the census in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    /// A client secret, read from a file (a mounted Secret) when the client is made.
    ClientSecret {
        /// The tenant.
        tenant_id: String,
        /// The application (client) id.
        client_id: String,
        /// The file holding the secret.
        secret_file: std::path::PathBuf,
    },
    /// AKS Workload Identity: the pod's service account token, exchanged for an Entra token
    /// (what is not given comes from the webhook's `AZURE_*` environment).
    Workload {
        /// The tenant.
        tenant_id: Option<String>,
        /// The application (client) id.
        client_id: Option<String>,
        /// The token file.
        token_file: Option<std::path::PathBuf>,
    },
    /// The managed identity of the node or pod (a user-assigned one by its client id).
    Managed {
        /// A user-assigned identity's client id.
        client_id: Option<String>,
    },
}

impl Credential {
    /// The credential a section names, the environment filling in what it does not: a client
    /// secret file (with a tenant and client id); else a federated token file, the section's
    /// or `AZURE_FEDERATED_TOKEN_FILE` (AKS Workload Identity); else the managed identity.
    /// A client secret without its tenant or client id is an error saying which.
    pub(crate) fn choose(
        section: &super::config::AzureSection,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Credential, String> {
        let tenant = section.tenant_id.clone().or_else(|| env("AZURE_TENANT_ID"));
        let client = section.client_id.clone().or_else(|| env("AZURE_CLIENT_ID"));
        if let Some(secret_file) = &section.client_secret_file {
            let need = |v: Option<String>, field: &str, var: &str| {
                v.filter(|v| !v.is_empty()).ok_or_else(|| {
                    format!("clientSecretFile needs {field} (in the section, or {var})")
                })
            };
            return Ok(Credential::ClientSecret {
                tenant_id: need(tenant, "tenantId", "AZURE_TENANT_ID")?,
                client_id: need(client, "clientId", "AZURE_CLIENT_ID")?,
                secret_file: secret_file.clone(),
            });
        }
        let token_file = section
            .federated_token_file
            .clone()
            .or_else(|| env("AZURE_FEDERATED_TOKEN_FILE").map(Into::into));
        if token_file.is_some() {
            return Ok(Credential::Workload {
                tenant_id: tenant,
                client_id: client,
                token_file,
            });
        }
        Ok(Credential::Managed { client_id: client })
    }
}

/// How to reach Resource Manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArmConfig {
    /// The subscription.
    pub subscription: String,
    /// The credential.
    pub credential: Credential,
    /// Entra's sign-in host (`None`: the credential's own default).
    pub authority_host: Option<String>,
    /// Resource Manager's endpoint, without a trailing slash.
    pub endpoint: String,
    /// Extra certificate authorities (PEM).
    pub ca_file: Option<std::path::PathBuf>,
    /// The bound of each request (each attempt).
    pub attempt_timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// The first retry's delay; each next one doubles, up to ten times this.
    pub backoff: Duration,
    /// The bound of one resource group's whole listing.
    pub deadline: Duration,
}

/// One resource group's listing: every item, or why there is none; and the pages it read.
#[derive(Debug)]
pub struct GroupListing {
    /// Every disk (or snapshot), or why the group's listing failed.
    pub result: Result<Vec<AzureDisk>, CensusFailure>,
    /// Pages requested (retries not counted: they happen in the pipeline).
    pub pages: u64,
}

/// What to list of a resource group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Managed disks (`Microsoft.Compute/disks`).
    Disks,
    /// Snapshots (`Microsoft.Compute/snapshots`).
    Snapshots,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Disks => "disks",
            Kind::Snapshots => "snapshots",
        }
    }

    fn item(self) -> &'static str {
        match self {
            Kind::Disks => "disk",
            Kind::Snapshots => "snapshot",
        }
    }
}

/// A Resource Manager client for one subscription.
pub struct ArmClient {
    config: ArmConfig,
    pipeline: Pipeline,
}

impl std::fmt::Debug for ArmClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArmClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// rustls's process default is ring (kube's), installed once: reqwest is built without a
/// provider of its own (its default, aws-lc-rs, is a C build the project avoids).
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: a provider is installed already (the process's choice stands).
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client failure of `category` saying `what`.
fn failed(category: FailureCategory, what: String) -> CensusFailure {
    CensusFailure::new(category, what)
}

/// The HTTP client every request goes through (tokens and listings): bounded per attempt,
/// never following a redirect, trusting `ca_file`'s authorities besides the system's.
fn http_client(config: &ArmConfig) -> Result<reqwest::Client, CensusFailure> {
    let mut b = reqwest::Client::builder()
        .timeout(config.attempt_timeout)
        .connect_timeout(config.attempt_timeout.min(Duration::from_secs(10)))
        .redirect(reqwest::redirect::Policy::none());
    if let Some(path) = &config.ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            failed(
                FailureCategory::Other,
                format!("cannot read caFile {}: {e}", path.display()),
            )
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            failed(
                FailureCategory::Other,
                format!("caFile {} holds no PEM certificate: {e}", path.display()),
            )
        })?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build().map_err(|e| {
        failed(
            FailureCategory::Other,
            format!("building the HTTP client: {e}"),
        )
    })
}

/// The credential `config` names, its token requests through `transport`.
fn credential_of(
    config: &ArmConfig,
    transport: Transport,
) -> Result<Arc<dyn TokenCredential>, CensusFailure> {
    let mut client_options = ClientOptions {
        transport: Some(transport),
        ..ClientOptions::default()
    };
    if let Some(host) = &config.authority_host {
        let mut custom = CustomConfiguration::default();
        custom.authority_host = host.clone();
        client_options.cloud = Some(Arc::new(CloudConfiguration::from(custom)));
    }
    let auth = |e: &dyn std::fmt::Display| {
        failed(
            FailureCategory::Auth,
            format!("no usable Azure credentials: {e}"),
        )
    };
    Ok(match &config.credential {
        Credential::ClientSecret {
            tenant_id,
            client_id,
            secret_file,
        } => {
            let secret = std::fs::read_to_string(secret_file).map_err(|e| {
                auth(&format!(
                    "cannot read the client secret file {}: {e}",
                    secret_file.display()
                ))
            })?;
            ClientSecretCredential::new(
                tenant_id,
                client_id.clone(),
                Secret::new(secret.trim().to_string()),
                Some(ClientSecretCredentialOptions { client_options }),
            )
            .map_err(|e| auth(&e))?
        }
        Credential::Workload {
            tenant_id,
            client_id,
            token_file,
        } => WorkloadIdentityCredential::new(Some(WorkloadIdentityCredentialOptions {
            credential_options: ClientAssertionCredentialOptions { client_options },
            client_id: client_id.clone(),
            tenant_id: tenant_id.clone(),
            token_file_path: token_file.clone(),
        }))
        .map_err(|e| auth(&e))?,
        Credential::Managed { client_id } => {
            ManagedIdentityCredential::new(Some(ManagedIdentityCredentialOptions {
                user_assigned_id: client_id.clone().map(UserAssignedId::ClientId),
                client_options,
            }))
            .map_err(|e| auth(&e))?
        }
    })
}

/// The innermost reqwest error in `e`'s chain, if any.
fn reqwest_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a reqwest::Error> {
    std::iter::successors(Some(e), |e| e.source()).find_map(|e| e.downcast_ref())
}

/// The category and line of a pipeline error: an answer by its status, ARM's code and
/// message (`AuthorizationFailed (HTTP 403): The client '…' does not have authorization to
/// perform action 'Microsoft.Compute/disks/read' …`); a refused or failed sign-in as an auth
/// problem, with Entra's own words; no answer as what failed and the innermost cause.
fn categorize(e: &azure_core::Error) -> (FailureCategory, String) {
    if let ErrorKind::HttpResponse {
        status, error_code, ..
    } = e.kind()
    {
        let status = u16::from(*status);
        let category = FailureCategory::of_status(status).unwrap_or(FailureCategory::Other);
        let line =
            crate::census::service_line(error_code.as_deref(), Some(status), Some(&e.to_string()));
        return (category, line);
    }
    let cause = reqwest_cause(e);
    let timed_out = cause.is_some_and(|r| r.is_timeout());
    let unreachable = cause.is_some_and(|r| r.is_connect());
    match e.kind() {
        ErrorKind::Credential if timed_out => (
            FailureCategory::Timeout,
            format!("signing in to Microsoft Entra timed out: {e}"),
        ),
        ErrorKind::Credential => (
            FailureCategory::Auth,
            format!("signing in: {}", chain_text(e)),
        ),
        _ if timed_out => (
            FailureCategory::Timeout,
            format!("timed out: {}", crate::census::innermost(e)),
        ),
        ErrorKind::Io | ErrorKind::Connection => (
            FailureCategory::Timeout,
            format!(
                "{}: {}",
                if unreachable {
                    "could not connect"
                } else {
                    "the request failed"
                },
                crate::census::innermost(e)
            ),
        ),
        ErrorKind::DataConversion => (
            FailureCategory::Other,
            format!("the answer could not be read: {e}"),
        ),
        _ => (FailureCategory::Other, e.to_string()),
    }
}

/// The distinct texts of `e`'s chain, outermost first, without the pipeline's own wrapping
/// ("non-transport error occurred which will not be retried"): what the credential and Entra
/// said.
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in std::iter::successors(Some(e), |e| e.source()) {
        let text = e.to_string();
        if text.contains("will not be retried") || parts.iter().any(|p| p.contains(&text)) {
            continue;
        }
        parts.push(text);
    }
    parts.join(": ")
}

impl ArmClient {
    /// Makes the client: the HTTP client, the credential (a client secret is read now) and the
    /// pipeline. No request is made.
    pub fn new(config: ArmConfig) -> Result<ArmClient, CensusFailure> {
        install_crypto_provider();
        let http = Arc::new(http_client(&config)?);
        let transport = || Transport::new(http.clone());
        let credential = credential_of(&config, transport())?;
        let options = ClientOptions {
            retry: RetryOptions::exponential(ExponentialRetryOptions {
                initial_delay: azure_core::time::Duration::try_from(config.backoff)
                    .unwrap_or(azure_core::time::Duration::SECOND),
                max_retries: config.retries,
                max_total_elapsed: azure_core::time::Duration::try_from(config.deadline)
                    .unwrap_or(azure_core::time::Duration::MINUTE),
                max_delay: azure_core::time::Duration::try_from(config.backoff * 10)
                    .unwrap_or(azure_core::time::Duration::SECOND),
            }),
            transport: Some(transport()),
            ..ClientOptions::default()
        };
        let auth: Arc<dyn Policy> =
            Arc::new(BearerTokenAuthorizationPolicy::new(credential, [ARM_SCOPE]));
        let pipeline = Pipeline::new(
            Some(env!("CARGO_PKG_NAME")),
            Some(env!("CARGO_PKG_VERSION")),
            options,
            Vec::new(),
            vec![auth],
            None,
        );
        Ok(ArmClient { config, pipeline })
    }

    /// The first page's URL of `kind` in `resource_group`.
    fn first_page(&self, resource_group: &str, kind: Kind) -> String {
        format!(
            "{}/subscriptions/{}/resourceGroups/{}/providers/Microsoft.Compute/{}?api-version={API_VERSION}",
            self.config.endpoint,
            self.config.subscription,
            resource_group,
            kind.path()
        )
    }

    /// Lists `kind` in `resource_group`, every page within the deadline: all of it, or why not.
    pub async fn list(&self, resource_group: &str, kind: Kind) -> GroupListing {
        let mut pages = 0;
        // The subscription is in the scope every line is printed with.
        let what = format!("the {} of resource group {resource_group}", kind.path());
        let result = match tokio::time::timeout(
            self.config.deadline,
            self.pages(resource_group, kind, &what, &mut pages),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(failed(
                FailureCategory::Timeout,
                format!(
                    "listing {what}: no complete answer within {}s",
                    self.config.deadline.as_secs()
                ),
            )),
        };
        GroupListing { result, pages }
    }

    async fn pages(
        &self,
        resource_group: &str,
        kind: Kind,
        what: &str,
        pages: &mut u64,
    ) -> Result<Vec<AzureDisk>, CensusFailure> {
        let failure = |category, why: String| failed(category, format!("listing {what}: {why}"));
        let endpoint = Url::parse(&self.config.endpoint).map_err(|e| {
            failure(
                FailureCategory::Other,
                format!("endpoint {}: {e}", self.config.endpoint),
            )
        })?;
        let mut next = Some(self.first_page(resource_group, kind));
        let mut read = HashSet::new();
        let mut out = Vec::new();
        while let Some(link) = next.take() {
            let url = Url::parse(&link).map_err(|e| {
                failure(
                    FailureCategory::Other,
                    format!("the answer's nextLink {link:?} is not a URL: {e}"),
                )
            })?;
            if url.origin() != endpoint.origin() {
                return Err(failure(
                    FailureCategory::Other,
                    format!(
                        "the answer's nextLink points at {}, not at {}: not followed (the token would go with it)",
                        url.origin().ascii_serialization(),
                        endpoint.origin().ascii_serialization()
                    ),
                ));
            }
            if !read.insert(link.clone()) {
                return Err(failure(
                    FailureCategory::Other,
                    format!(
                        "the answer's nextLink repeats a page already read after {} pages: the listing would never end",
                        *pages
                    ),
                ));
            }
            *pages += 1;
            let page = self
                .get(url, kind)
                .await
                .map_err(|(category, line)| failure(category, line))?;
            for item in page.value {
                let d = AzureDisk::of(item, kind.item()).map_err(|why| {
                    failure(FailureCategory::Other, format!("a bad answer: {why}"))
                })?;
                out.push(d);
            }
            next = page.next_link.filter(|l| !l.is_empty());
        }
        Ok(out)
    }

    /// One GET of a page of `kind` through the pipeline, its body read.
    async fn get(
        &self,
        url: Url,
        kind: Kind,
    ) -> Result<Page<ArmResource>, (FailureCategory, String)> {
        let mut request = Request::new(url, Method::Get);
        request.insert_header("accept", "application/json");
        let response = self
            .pipeline
            .send(&Context::new(), &mut request, None)
            .await
            .map_err(|e| categorize(&e))?;
        let body = response.into_body();
        serde_json::from_slice(&body).map_err(|e| {
            (
                FailureCategory::Other,
                format!("a bad answer: not a page of {}: {e}", kind.path()),
            )
        })
    }
}

/// The endpoint without its trailing slash (`None`: the public one).
pub(crate) fn endpoint_of(endpoint: Option<&str>) -> String {
    endpoint
        .unwrap_or(PUBLIC_ENDPOINT)
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::azure::config::AzureSection;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_credential_is_chosen_from_the_section_then_the_environment() {
        let section = AzureSection {
            subscription: "s".into(),
            resource_groups: vec!["rg".into()],
            ..AzureSection::default()
        };
        assert_eq!(
            Credential::choose(&section, env(&[])).unwrap(),
            Credential::Managed { client_id: None },
            "nothing given: the managed identity"
        );
        assert_eq!(
            Credential::choose(
                &section,
                env(&[
                    ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
                    ("AZURE_CLIENT_ID", "c"),
                    ("AZURE_TENANT_ID", "t")
                ])
            )
            .unwrap(),
            Credential::Workload {
                tenant_id: Some("t".into()),
                client_id: Some("c".into()),
                token_file: Some("/var/run/token".into()),
            },
            "AKS Workload Identity's environment"
        );
        let secret = AzureSection {
            client_secret_file: Some("/s".into()),
            tenant_id: Some("t".into()),
            ..section.clone()
        };
        let e = Credential::choose(&secret, env(&[])).unwrap_err();
        assert!(e.contains("clientId"), "{e}");
        assert_eq!(
            Credential::choose(&secret, env(&[("AZURE_CLIENT_ID", "c")])).unwrap(),
            Credential::ClientSecret {
                tenant_id: "t".into(),
                client_id: "c".into(),
                secret_file: "/s".into(),
            }
        );
    }
}
