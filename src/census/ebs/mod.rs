//! The AWS EBS census, I/O: lists the EBS volumes of one account's region with the official SDK
//! (`aws-sdk-ec2`, `DescribeVolumes` through its paginator) and returns every volume's facts
//! ([`EbsVolume`]), or why there is no list ([`ListError`]).
//!
//! **I/O: reads EC2 (`ec2:DescribeVolumes`; `ec2:DescribeSnapshots` for the CSI driver's
//! snapshots ([`Ebs::list_snapshots`]), `docs/iam/ebs-census-policy.json`); writes nothing.** Credentials come from `aws-config`'s default chain (environment keys, IRSA's web
//! identity token, EKS Pod Identity, the instance profile) or from keys given
//! ([`CredentialSource::Keys`], e.g. from a Secret). Every request is bounded
//! ([`EbsConfig::attempt_timeout`] per attempt, [`EbsConfig::request_timeout`] per page with its
//! retries), retries back off (the SDK's standard mode, at most [`EbsConfig::max_attempts`]),
//! and the listing as a whole is bounded by [`EbsConfig::deadline`].
//!
//! A listing is complete or it is an error: a page that fails after its retries, a deadline
//! passed, or a page token that repeats (a server that would make the paginator stop early) ends
//! it with a [`ListError`] and no volumes, so that the caller answers Unknown for the scope and
//! never "the disk is gone".

pub mod census;
pub mod facts;

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::operation::describe_snapshots::DescribeSnapshotsOutput;
use aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput;
use aws_sdk_ec2::types::{Filter, Snapshot, Volume};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use futures::{Stream, StreamExt};
use jiff::Timestamp;

pub use facts::{
    Attribution, CsiTags, EbsAttachment, EbsSnapshot, EbsVolume, ErrorCategory, SnapshotCsiTags,
    category_of_answer, gib_to_bytes,
};

/// Where the census's credentials come from.
#[derive(Clone, PartialEq, Eq)]
pub enum CredentialSource {
    /// `aws-config`'s default chain: `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`, the shared
    /// config files, IRSA (`AWS_WEB_IDENTITY_TOKEN_FILE` + `AWS_ROLE_ARN`), EKS Pod Identity
    /// (`AWS_CONTAINER_CREDENTIALS_FULL_URI`), the instance profile.
    DefaultChain,
    /// Keys given explicitly (a Secret's).
    Keys {
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
    },
}

impl fmt::Debug for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::DefaultChain => f.write_str("DefaultChain"),
            CredentialSource::Keys { access_key_id, .. } => f
                .debug_struct("Keys")
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &"<redacted>")
                .finish(),
        }
    }
}

/// A server-side filter on a tag: `tag:<key>` with `values` (any of them), or `tag-key` when
/// `values` is empty (the tag is present). Filters are ANDed by EC2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagFilter {
    pub key: String,
    pub values: Vec<String>,
}

/// One scope of the census: an account's region, and how to read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EbsConfig {
    /// The region (`eu-west-1`).
    pub region: String,
    /// The account, as a label of the scope (the credentials decide which account is read).
    pub account: Option<String>,
    /// Where the credentials come from.
    pub credentials: CredentialSource,
    /// Another endpoint than the region's (a VPC endpoint; the tests' moto).
    pub endpoint_url: Option<String>,
    /// Server-side filters, to narrow the listing to this cluster's volumes.
    pub tag_filters: Vec<TagFilter>,
    /// `MaxResults` of each page (EC2 accepts 5 to 500).
    pub page_size: i32,
    /// The bound of connecting.
    pub connect_timeout: Duration,
    /// The bound of one attempt of one request.
    pub attempt_timeout: Duration,
    /// The bound of one request (one page) with its retries.
    pub request_timeout: Duration,
    /// The bound of the whole listing.
    pub deadline: Duration,
    /// Attempts per request, the first included (the SDK's standard retry mode, exponential
    /// backoff with jitter, throttling and 5xx answers retried).
    pub max_attempts: u32,
    /// The first retry's backoff (doubling up to `max_backoff`).
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
}

impl EbsConfig {
    /// A region read with the default credential chain and the default bounds.
    pub fn new(region: impl Into<String>) -> EbsConfig {
        EbsConfig {
            region: region.into(),
            account: None,
            credentials: CredentialSource::DefaultChain,
            endpoint_url: None,
            tag_filters: Vec::new(),
            page_size: 500,
            connect_timeout: Duration::from_secs(5),
            attempt_timeout: Duration::from_secs(20),
            request_timeout: Duration::from_secs(60),
            deadline: Duration::from_secs(300),
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(20),
        }
    }

    /// The scope's name in logs and errors: `<account>/<region>`, or the region.
    pub(crate) fn scope(&self) -> String {
        match &self.account {
            Some(a) => format!("{a}/{}", self.region),
            None => self.region.clone(),
        }
    }
}

/// A complete listing of one scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Every volume, in EC2's order.
    pub volumes: Vec<EbsVolume>,
    /// Pages read (one request each, retries not counted).
    pub pages: u32,
}

/// A complete listing of one scope's snapshots that the EBS CSI driver cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotListing {
    /// Every such snapshot, in EC2's order.
    pub snapshots: Vec<EbsSnapshot>,
    /// Pages read (one request each, retries not counted).
    pub pages: u32,
}

/// What a listing reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// `DescribeVolumes`.
    Volumes,
    /// `DescribeSnapshots`.
    Snapshots,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Volumes => "volumes",
            Resource::Snapshots => "snapshots",
        })
    }
}

/// A paginator's pages as a [`Stream`] (the SDK's own stream type is in a crate this one does
/// not depend on; its `next` is all a listing needs).
macro_rules! stream {
    ($pages:expr) => {
        futures::stream::unfold(
            $pages,
            |mut p| async move { p.next().await.map(|x| (x, p)) },
        )
    };
}

/// One page of a Describe call: its items' facts and the next page's token.
trait Page {
    /// The facts of one item.
    type Item;
    /// Appends the page's items' facts to `out`.
    fn items_into(&self, out: &mut Vec<Self::Item>);
    /// The next page's token.
    fn next_token(&self) -> Option<&str>;
}

impl Page for DescribeVolumesOutput {
    type Item = EbsVolume;
    fn items_into(&self, out: &mut Vec<EbsVolume>) {
        out.extend(self.volumes().iter().map(volume_facts));
    }
    fn next_token(&self) -> Option<&str> {
        DescribeVolumesOutput::next_token(self)
    }
}

impl Page for DescribeSnapshotsOutput {
    type Item = EbsSnapshot;
    fn items_into(&self, out: &mut Vec<EbsSnapshot>) {
        out.extend(self.snapshots().iter().map(snapshot_facts));
    }
    fn next_token(&self) -> Option<&str> {
        DescribeSnapshotsOutput::next_token(self)
    }
}

/// Why a scope could not be listed. Nothing of a failed listing is returned.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("listing EBS {resource} in {scope}: {category:?}: {message}")]
pub struct ListError {
    /// What kind of problem it is.
    pub category: ErrorCategory,
    /// What was being listed.
    pub resource: Resource,
    /// The scope (`<account>/<region>`).
    pub(crate) scope: String,
    /// EC2's error code, when it answered one (`UnauthorizedOperation`).
    pub code: Option<String>,
    /// The HTTP status, when there was an answer.
    pub status: Option<u16>,
    /// Pages read before it failed.
    pub pages: u32,
    /// What failed, in one line (the SDK's error with its causes).
    pub message: String,
}

/// A client for one scope.
#[derive(Clone, Debug)]
pub struct Ebs {
    client: aws_sdk_ec2::Client,
    config: EbsConfig,
}

impl Ebs {
    /// Builds the client. No request is made (credentials are resolved on the first).
    pub async fn connect(config: EbsConfig) -> Ebs {
        // One HTTPS client on rustls with ring (kube's provider too): no aws-lc build. It is
        // also the client of the credential providers (STS for IRSA, the Pod Identity agent).
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(config.region.clone()))
            .http_client(http)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(config.connect_timeout)
                    .operation_attempt_timeout(config.attempt_timeout)
                    .operation_timeout(config.request_timeout)
                    .build(),
            )
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(config.max_attempts.max(1))
                    .with_initial_backoff(config.initial_backoff)
                    .with_max_backoff(config.max_backoff),
            );
        if let Some(url) = &config.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let CredentialSource::Keys {
            access_key_id,
            secret_access_key,
            session_token,
        } = &config.credentials
        {
            loader = loader.credentials_provider(aws_sdk_ec2::config::Credentials::new(
                access_key_id,
                secret_access_key,
                session_token.clone(),
                None,
                "volume-leftovers-keys",
            ));
        }
        let sdk = loader.load().await;
        Ebs {
            client: aws_sdk_ec2::Client::new(&sdk),
            config,
        }
    }

    /// Lists every volume of the scope (the tag filters applied): all pages, or an error.
    pub async fn list(&self) -> Result<Listing, ListError> {
        let pages = self
            .client
            .describe_volumes()
            .set_filters(self.filters(&[]))
            .into_paginator()
            .page_size(self.config.page_size.clamp(5, 500))
            // The paginator would end quietly on a repeated token: a partial list that looks
            // complete. It goes on instead, and the repeat is caught in `read_pages`.
            .stop_on_duplicate_token(false)
            .send();
        let (volumes, pages) = self.read_pages(Resource::Volumes, stream!(pages)).await?;
        Ok(Listing { volumes, pages })
    }

    /// Lists the scope's snapshots that the EBS CSI driver cut (this account's own, tagged
    /// `CSIVolumeSnapshotName`, the tag filters applied): all pages, or an error.
    /// `ec2:DescribeSnapshots` is the one permission it needs.
    pub async fn list_snapshots(&self) -> Result<SnapshotListing, ListError> {
        let csi = TagFilter {
            key: facts::TAG_CSI_SNAPSHOT_NAME.to_string(),
            values: Vec::new(),
        };
        let pages = self
            .client
            .describe_snapshots()
            // Without it EC2 lists every public snapshot and those shared with the account
            // too: millions, none of them this cluster's.
            .owner_ids("self")
            .set_filters(self.filters(&[csi]))
            .into_paginator()
            // EC2 accepts 5 to 1,000 snapshots a page; the volumes' bound keeps one setting.
            .page_size(self.config.page_size.clamp(5, 500))
            .stop_on_duplicate_token(false)
            .send();
        let (snapshots, pages) = self.read_pages(Resource::Snapshots, stream!(pages)).await?;
        Ok(SnapshotListing { snapshots, pages })
    }

    /// The configured tag filters and `extra` as EC2 filters (`None`: none at all).
    fn filters(&self, extra: &[TagFilter]) -> Option<Vec<Filter>> {
        let filters: Vec<Filter> = self
            .config
            .tag_filters
            .iter()
            .chain(extra)
            .map(|f| {
                if f.values.is_empty() {
                    Filter::builder().name("tag-key").values(&f.key).build()
                } else {
                    Filter::builder()
                        .name(format!("tag:{}", f.key))
                        .set_values(Some(f.values.clone()))
                        .build()
                }
            })
            .collect();
        (!filters.is_empty()).then_some(filters)
    }

    /// Every page of one paginated Describe call (`pages`: the paginator's stream), within the
    /// listing's deadline: every item and the pages read, or an error and nothing.
    async fn read_pages<P, E>(
        &self,
        resource: Resource,
        pages: impl Stream<Item = Result<P, SdkError<E, HttpResponse>>>,
    ) -> Result<(Vec<P::Item>, u32), ListError>
    where
        P: Page,
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    {
        let mut read = 0u32;
        let all = async {
            let mut pages = std::pin::pin!(pages);
            let mut items = Vec::new();
            let mut tokens = std::collections::HashSet::new();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| {
                    let status = e.raw_response().map(|r| r.status().as_u16());
                    let (category, code, status) = categorise(&e, status);
                    let message = DisplayErrorContext(&e).to_string();
                    self.error(resource, category, code, status, read, message)
                })?;
                read += 1;
                page.items_into(&mut items);
                if let Some(token) = page.next_token().filter(|t| !t.is_empty())
                    && !tokens.insert(token.to_string())
                {
                    return Err(self.error(
                        resource,
                        ErrorCategory::Other,
                        None,
                        None,
                        read,
                        format!("page {read} repeated an earlier page token"),
                    ));
                }
            }
            Ok(items)
        };
        match tokio::time::timeout(self.config.deadline, all).await {
            Ok(items) => Ok((items?, read)),
            Err(_) => Err(self.error(
                resource,
                ErrorCategory::Timeout,
                None,
                None,
                read,
                format!(
                    "the listing did not finish within its deadline of {:?}",
                    self.config.deadline
                ),
            )),
        }
    }

    fn error(
        &self,
        resource: Resource,
        category: ErrorCategory,
        code: Option<String>,
        status: Option<u16>,
        pages: u32,
        message: String,
    ) -> ListError {
        ListError {
            category,
            resource,
            scope: self.config.scope(),
            code,
            status,
            pages,
            message,
        }
    }
}

/// A failed page as a [`ListError`]'s category, EC2 error code and HTTP status (`status`: of
/// the answer, when there was one).
fn categorise<E, R>(
    err: &SdkError<E, R>,
    status: Option<u16>,
) -> (ErrorCategory, Option<String>, Option<u16>)
where
    E: ProvideErrorMetadata + StdError + 'static,
    R: fmt::Debug + 'static,
{
    // Credentials that could not be found or loaded fail before any request is sent, as a
    // dispatch or construction failure whose cause is the credential provider's.
    let mut source: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<CredentialsError>().is_some() {
            return (ErrorCategory::Auth, None, None);
        }
        source = e.source();
    }
    match err {
        SdkError::ServiceError(s) => {
            let code = s.err().code().map(str::to_string);
            let category = category_of_answer(code.as_deref(), status.unwrap_or(0));
            (category, code, status)
        }
        SdkError::TimeoutError(_) => (ErrorCategory::Timeout, None, None),
        SdkError::DispatchFailure(d) if d.is_timeout() => (ErrorCategory::Timeout, None, None),
        SdkError::DispatchFailure(d) if d.is_io() => (ErrorCategory::Unreachable, None, None),
        // An answer that could not be read: its status says what it was (a proxy's 503 page).
        SdkError::ResponseError(_) => (category_of_answer(None, status.unwrap_or(0)), None, status),
        _ => (ErrorCategory::Other, None, status),
    }
}

fn timestamp(t: &aws_sdk_ec2::primitives::DateTime) -> Option<Timestamp> {
    Timestamp::new(t.secs(), i32::try_from(t.subsec_nanos()).ok()?).ok()
}

/// The facts of one volume of a page.
fn volume_facts(v: &Volume) -> EbsVolume {
    EbsVolume {
        id: v.volume_id().unwrap_or_default().to_string(),
        size_bytes: v.size().and_then(gib_to_bytes),
        volume_type: v.volume_type().map(|t| t.as_str().to_string()),
        created: v.create_time().and_then(timestamp),
        state: v.state().map(|s| s.as_str().to_string()),
        availability_zone: v.availability_zone().map(str::to_string),
        snapshot_id: v
            .snapshot_id()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        attachments: v
            .attachments()
            .iter()
            .map(|a| EbsAttachment {
                instance_id: a.instance_id().map(str::to_string),
                device: a.device().map(str::to_string),
                state: a.state().map(|s| s.as_str().to_string()),
                attached: a.attach_time().and_then(timestamp),
            })
            .collect(),
        tags: v
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
            .collect(),
    }
}

/// The facts of one snapshot of a page.
fn snapshot_facts(s: &Snapshot) -> EbsSnapshot {
    EbsSnapshot {
        id: s.snapshot_id().unwrap_or_default().to_string(),
        volume_id: s.volume_id().filter(|v| !v.is_empty()).map(str::to_string),
        size_bytes: s.volume_size().and_then(gib_to_bytes),
        start_time: s.start_time().and_then(timestamp),
        state: s.state().map(|s| s.as_str().to_string()),
        tags: s
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
            .collect(),
    }
}
