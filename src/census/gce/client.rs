//! The GCE client: what the census asks of the service, and how its answers and failures
//! are read (the folder's doc is in `mod.rs`).

use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use google_cloud_auth::credentials::{self, Credentials, service_account};
use google_cloud_compute_v1::client::{Disks, RegionDisks, Snapshots};
use google_cloud_compute_v1::model::disks_scoped_list::warning::Code as ScopeWarning;
use google_cloud_gax::error::Error as GaxError;
use google_cloud_gax::exponential_backoff::ExponentialBackoffBuilder;
use google_cloud_gax::paginator::Paginator;
use google_cloud_gax::retry_policy::{LimitedAttemptCount, RetryPolicy};
use google_cloud_gax::retry_result::RetryResult;
use google_cloud_gax::retry_state::RetryState;

pub use super::facts::{
    ErrorCategory, GKE_CLUSTER_LABEL, GceCreatedFor, GceDisk, GceScope, GceSnapshot, ListError,
    Location,
};

/// The OAuth scope the census asks for: read-only Compute.
pub(crate) const READ_ONLY_SCOPE: &str = "https://www.googleapis.com/auth/compute.readonly";

/// Where the census's credentials come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CredentialSource {
    /// Application Default Credentials: `GOOGLE_APPLICATION_CREDENTIALS`, gcloud's file, or the
    /// metadata server (GKE Workload Identity).
    Default,
    /// A service-account key file (JSON, as a Secret holds it).
    KeyFile(PathBuf),
}

/// Which locations of the project to list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Locations {
    /// Every zone and region, in one aggregated listing.
    All,
    /// These zones and regions, each listed on its own.
    Only {
        /// Zone names (`us-central1-a`).
        zones: Vec<String>,
        /// Region names (`us-central1`).
        regions: Vec<String>,
    },
}

/// What to list and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GceConfig {
    /// The project id.
    pub project: String,
    /// Which locations.
    pub locations: Locations,
    /// The credentials.
    pub credentials: CredentialSource,
    /// The label naming the cluster that owns a disk (`None`: `goog-k8s-cluster-name`; set it
    /// to the key given to the driver's `--extra-labels`).
    pub cluster_label: Option<String>,
    /// The Compute endpoint (`None`: Google's); the tests name their own server.
    pub endpoint: Option<String>,
    /// The bound of each request (each attempt).
    pub attempt_timeout: Duration,
    /// Attempts per request (1: no retry).
    pub attempts: u32,
    /// The first retry's delay; each next one doubles, up to ten times this.
    pub backoff: Duration,
    /// The bound of one scope's whole listing, retries and pages included.
    pub deadline: Duration,
    /// Disks per page (`maxResults`, at most 500).
    pub page_size: u32,
}

impl GceConfig {
    /// A configuration with the census's defaults: every location, ADC, 30 s per request,
    /// 3 attempts from 1 s, 120 s per scope, 500 per page.
    pub fn new(project: impl Into<String>) -> GceConfig {
        GceConfig {
            project: project.into(),
            locations: Locations::All,
            credentials: CredentialSource::Default,
            cluster_label: None,
            endpoint: None,
            attempt_timeout: Duration::from_secs(30),
            attempts: 3,
            backoff: Duration::from_secs(1),
            deadline: Duration::from_secs(120),
            page_size: 500,
        }
    }
}

/// One scope's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocationListing {
    /// The scope ([`Location::All`] only for an aggregated listing that failed as a whole).
    pub scope: GceScope,
    /// Every disk of the scope, or why the scope is unknown.
    pub result: Result<Vec<GceDisk>, ListError>,
}

/// A listing of one project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectListing {
    /// Each scope's answer, in scope order.
    pub scopes: Vec<LocationListing>,
    /// Pages requested (retries not counted: they happen inside the client).
    pub pages: u64,
}

/// A listing of one project's snapshots that the PD CSI driver cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotListing {
    /// Every such snapshot (the others left out), or why they are unknown.
    pub result: Result<Vec<GceSnapshot>, ListError>,
    /// Pages requested (retries not counted).
    pub pages: u64,
}

/// The Compute clients for one project.
#[derive(Clone, Debug)]
pub struct GceLister {
    config: GceConfig,
    disks: Disks,
    region_disks: RegionDisks,
    snapshots: Snapshots,
}

/// rustls's process default is ring (kube's), installed once: google-cloud-auth signs with the
/// process default provider (its own default, aws-lc-rs, is a C build the project avoids).
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: a provider is installed already (the process's choice stands).
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// The credentials `source` names, scoped to read-only Compute.
fn credentials_of(source: &CredentialSource) -> Result<Credentials, ListError> {
    let auth = |e: &dyn std::fmt::Display| ListError::new(ErrorCategory::Auth, e.to_string());
    match source {
        CredentialSource::Default => credentials::Builder::default()
            .with_scopes([READ_ONLY_SCOPE])
            .build()
            .map_err(|e| auth(&format!("application default credentials: {e}"))),
        CredentialSource::KeyFile(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| auth(&format!("cannot read the key file {}: {e}", path.display())))?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| auth(&format!("the key file {} is not JSON: {e}", path.display())))?;
            service_account::Builder::new(json)
                .with_access_specifier(service_account::AccessSpecifier::from_scopes([
                    READ_ONLY_SCOPE,
                ]))
                .build()
                .map_err(|e| auth(&format!("the key file {}: {e}", path.display())))
        }
    }
}

/// Retries what may pass: rate limits, server errors, timeouts, I/O. A 401/403 or a bad request
/// will not change on the next attempt. (The client's default, AIP-194, retries 503 only.)
#[derive(Debug)]
struct Transient;

impl RetryPolicy for Transient {
    fn on_error(&self, _state: &RetryState, error: GaxError) -> RetryResult {
        let transient = error.is_timeout()
            || error.is_io()
            || error.is_transient_and_before_rpc()
            || error
                .http_status_code()
                .is_some_and(|s| s == 429 || (500..600).contains(&s));
        if transient {
            RetryResult::Continue(error)
        } else {
            RetryResult::Permanent(error)
        }
    }
}

/// The client errors in `e`'s chain, outermost first (a retry loop that gave up wraps the
/// last attempt's error).
fn client_errors(e: &GaxError) -> impl Iterator<Item = &GaxError> + Clone {
    std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |e| {
        e.source()
    })
    .filter_map(|e| e.downcast_ref::<GaxError>())
}

/// The category of a client error: the first error in its chain that says.
fn categorize(e: &GaxError) -> ErrorCategory {
    for g in client_errors(e) {
        if g.is_authentication() {
            return ErrorCategory::Auth;
        }
        if let Some(c) = g.http_status_code().and_then(ErrorCategory::of_status) {
            return c;
        }
        if g.is_timeout() {
            return ErrorCategory::Timeout;
        }
    }
    ErrorCategory::Other
}

/// A client error, readable, in the shape of the EBS census's: an answer as Compute's status
/// code name, the HTTP status and Compute's own message (`PERMISSION_DENIED (HTTP 403):
/// Required 'compute.disks.list' permission for 'projects/p'`: it names the missing
/// permission); an answer that is not Google's error (a proxy's page) as its status and body;
/// no answer as what failed and the innermost cause's text. Not the client's own `Display`,
/// which says "the service reports an error with code PERMISSION_DENIED described as: …" or
/// quotes a whole body.
fn describe(e: &GaxError) -> String {
    for g in client_errors(e) {
        if let Some(s) = g.status() {
            return crate::census::service_line(
                Some(s.code.name()),
                g.http_status_code(),
                Some(&s.message),
            );
        }
        if let Some(status) = g.http_status_code() {
            let body = g
                .http_payload()
                .map(|p| String::from_utf8_lossy(p).into_owned());
            return crate::census::service_line(None, Some(status), body.as_deref());
        }
    }
    let any = |is: fn(&GaxError) -> bool| client_errors(e).any(is);
    let what = if any(GaxError::is_authentication) {
        "no usable credentials"
    } else if any(GaxError::is_timeout) {
        "timed out"
    } else if any(GaxError::is_connect) {
        "could not connect"
    } else if any(GaxError::is_io) {
        "the request could not be sent"
    } else if any(GaxError::is_deserialization) {
        "the answer could not be read"
    } else if any(GaxError::is_serialization) || any(GaxError::is_binding) {
        "the request could not be made"
    } else {
        "the request failed"
    };
    format!("{what}: {}", crate::census::innermost(e))
}

/// `what`: `the disks of <scope>`, `the snapshots of <project>`.
fn list_error(what: &str, e: &GaxError) -> ListError {
    ListError::new(categorize(e), format!("listing {what}: {}", describe(e)))
}

impl GceLister {
    /// Builds the clients: reads the credentials (a key file now; ADC finds its source now and
    /// fetches tokens on the first request). No request is made.
    pub async fn new(config: GceConfig) -> Result<GceLister, ListError> {
        install_crypto_provider();
        let creds = credentials_of(&config.credentials)?;
        let backoff = || {
            ExponentialBackoffBuilder::new()
                .with_initial_delay(config.backoff)
                .with_maximum_delay(config.backoff * 10)
                .with_scaling(2.0)
                .build()
                .map_err(|e| ListError::new(ErrorCategory::Other, format!("backoff: {e}")))
        };
        let build_err = |e: google_cloud_gax::client_builder::Error| {
            let category = if e.is_default_credentials() {
                ErrorCategory::Auth
            } else {
                ErrorCategory::Other
            };
            ListError::new(category, format!("building the Compute client: {e}"))
        };
        macro_rules! client {
            ($t:ty) => {{
                let mut b = <$t>::builder()
                    .with_credentials(creds.clone())
                    .with_attempt_timeout(config.attempt_timeout)
                    .with_retry_policy(LimitedAttemptCount::custom(Transient, config.attempts))
                    .with_backoff_policy(backoff()?);
                if let Some(ep) = &config.endpoint {
                    b = b.with_endpoint(ep.clone());
                }
                b.build().await.map_err(build_err)?
            }};
        }
        let disks = client!(Disks);
        let region_disks = client!(RegionDisks);
        let snapshots = client!(Snapshots);
        Ok(GceLister {
            config,
            disks,
            region_disks,
            snapshots,
        })
    }

    /// Lists the project's snapshots once (`snapshots.list`: they are global), every page
    /// within the deadline, and keeps those the PD CSI driver cut (its description says so).
    /// Needs `compute.snapshots.list`; a page that fails fails the whole listing.
    pub async fn list_snapshots(&self) -> SnapshotListing {
        let mut pages = 0;
        let what = format!("the snapshots of projects/{}", self.config.project);
        let result = bounded(
            self.config.deadline,
            &what,
            self.snapshot_pages(&what, &mut pages),
        )
        .await;
        SnapshotListing { result, pages }
    }

    async fn snapshot_pages(
        &self,
        what: &str,
        pages: &mut u64,
    ) -> Result<Vec<GceSnapshot>, ListError> {
        let label = self.config.cluster_label.as_deref();
        let mut out = Vec::new();
        let mut paginator = self
            .snapshots
            .list()
            .set_project(&self.config.project)
            .set_max_results(self.config.page_size)
            .by_page();
        while let Some(page) = paginator.next().await {
            *pages += 1;
            let page = page.map_err(|e| list_error(what, &e))?;
            for s in page.items {
                let facts = super::facts::snapshot_facts_of(s, label).map_err(|e| {
                    ListError::new(e.category, format!("listing {what}: {}", e.message))
                })?;
                out.extend(facts);
            }
        }
        Ok(out)
    }

    /// Lists the configured locations of the project once.
    pub async fn list(&self) -> ProjectListing {
        let mut pages = 0;
        let mut scopes = match &self.config.locations {
            Locations::All => {
                let scope = self.scope(Location::All);
                match bounded(
                    self.config.deadline,
                    format!("the disks of {scope}"),
                    self.aggregated(&mut pages),
                )
                .await
                {
                    Ok(scopes) => scopes,
                    Err(e) => vec![LocationListing {
                        scope,
                        result: Err(e),
                    }],
                }
            }
            Locations::Only { zones, regions } => {
                let mut out = Vec::new();
                let wanted = zones
                    .iter()
                    .map(|z| Location::Zone(z.clone()))
                    .chain(regions.iter().map(|r| Location::Region(r.clone())));
                for location in wanted {
                    let scope = self.scope(location);
                    let result = bounded(
                        self.config.deadline,
                        format!("the disks of {scope}"),
                        self.one_location(&scope, &mut pages),
                    )
                    .await;
                    out.push(LocationListing { scope, result });
                }
                out
            }
        };
        scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
        ProjectListing { scopes, pages }
    }

    fn scope(&self, location: Location) -> GceScope {
        GceScope {
            project: self.config.project.clone(),
            location,
        }
    }

    /// Every scope of the aggregated listing, all pages; any failed page fails it all.
    async fn aggregated(&self, pages: &mut u64) -> Result<Vec<LocationListing>, ListError> {
        let all = self.scope(Location::All);
        let mut by_scope: std::collections::BTreeMap<Location, Result<Vec<GceDisk>, ListError>> =
            Default::default();
        let mut paginator = self
            .disks
            .aggregated_list()
            .set_project(&self.config.project)
            .set_max_results(self.config.page_size)
            .by_page();
        while let Some(page) = paginator.next().await {
            *pages += 1;
            let page = page.map_err(|e| list_error(&format!("the disks of {all}"), &e))?;
            if let Some(w) = &page.warning
                && w.code.as_ref().and_then(|c| c.name()) != Some("NO_RESULTS_ON_PAGE")
            {
                return Err(ListError::new(
                    ErrorCategory::Other,
                    format!(
                        "listing the disks of {all}: {}: {}",
                        w.code.as_ref().and_then(|c| c.name()).unwrap_or("warning"),
                        w.message.as_deref().unwrap_or("")
                    ),
                ));
            }
            for unreachable in &page.unreachables {
                let location = Location::parse_scope(unreachable)
                    .ok_or_else(|| unknown_scope(&all, unreachable))?;
                let scope = self.scope(location.clone());
                by_scope.insert(
                    location,
                    Err(ListError::new(
                        ErrorCategory::Server,
                        format!("listing the disks of {scope}: unreachable"),
                    )),
                );
            }
            for (key, scoped) in page.items {
                let location =
                    Location::parse_scope(&key).ok_or_else(|| unknown_scope(&all, &key))?;
                let scope = self.scope(location.clone());
                let entry = by_scope.entry(location.clone()).or_insert(Ok(Vec::new()));
                let Ok(list) = entry else { continue };
                match &scoped.warning {
                    Some(w) if !matches!(w.code, Some(ScopeWarning::NoResultsOnPage)) => {
                        let category = if matches!(w.code, Some(ScopeWarning::Unreachable)) {
                            ErrorCategory::Server
                        } else {
                            ErrorCategory::Other
                        };
                        *entry = Err(ListError::new(
                            category,
                            format!(
                                "listing the disks of {scope}: {}: {}",
                                w.code.as_ref().and_then(|c| c.name()).unwrap_or("warning"),
                                w.message.as_deref().unwrap_or("")
                            ),
                        ));
                        continue;
                    }
                    _ => {}
                }
                for d in scoped.disks {
                    match super::facts::facts_of(d, &location, self.config.cluster_label.as_deref())
                    {
                        Ok(f) => list.push(f),
                        Err(e) => {
                            *entry = Err(ListError::new(
                                e.category,
                                format!("listing the disks of {scope}: {}", e.message),
                            ));
                            break;
                        }
                    }
                }
            }
        }
        Ok(by_scope
            .into_iter()
            .map(|(location, result)| LocationListing {
                scope: self.scope(location),
                result,
            })
            .collect())
    }

    /// Every page of one zone's or region's list.
    async fn one_location(
        &self,
        scope: &GceScope,
        pages: &mut u64,
    ) -> Result<Vec<GceDisk>, ListError> {
        let label = self.config.cluster_label.as_deref();
        let mut out = Vec::new();
        macro_rules! drain {
            ($paginator:expr) => {{
                let mut p = $paginator;
                while let Some(page) = p.next().await {
                    *pages += 1;
                    let page =
                        page.map_err(|e| list_error(&format!("the disks of {scope}"), &e))?;
                    for d in page.items {
                        out.push(super::facts::facts_of(d, &scope.location, label).map_err(
                            |e| {
                                ListError::new(
                                    e.category,
                                    format!("listing the disks of {scope}: {}", e.message),
                                )
                            },
                        )?);
                    }
                }
            }};
        }
        match &scope.location {
            Location::Zone(z) => drain!(
                self.disks
                    .list()
                    .set_project(&self.config.project)
                    .set_zone(z)
                    .set_max_results(self.config.page_size)
                    .by_page()
            ),
            Location::Region(r) => drain!(
                self.region_disks
                    .list()
                    .set_project(&self.config.project)
                    .set_region(r)
                    .set_max_results(self.config.page_size)
                    .by_page()
            ),
            Location::All => {
                return Err(ListError::new(
                    ErrorCategory::Other,
                    "all locations are listed by the aggregated listing",
                ));
            }
        }
        Ok(out)
    }
}

fn unknown_scope(all: &GceScope, key: &str) -> ListError {
    ListError::new(
        ErrorCategory::Other,
        format!("listing the disks of {all}: unknown scope {key:?}"),
    )
}

/// `work`, or a timeout error once `deadline` has passed.
async fn bounded<T>(
    deadline: Duration,
    what: impl std::fmt::Display,
    work: impl Future<Output = Result<T, ListError>>,
) -> Result<T, ListError> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or_else(|_| {
            Err(ListError::new(
                ErrorCategory::Timeout,
                format!(
                    "listing {what} took longer than {:.1}s; it is abandoned",
                    deadline.as_secs_f64()
                ),
            ))
        })
}
