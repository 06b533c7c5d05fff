//! The EBS client: what the census asks of the service, and how its answers and failures
//! are read (the folder's doc is in `mod.rs`).

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_ec2::config::http::HttpResponse;
use aws_sdk_ec2::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_ec2::operation::describe_snapshots::DescribeSnapshotsOutput;
use aws_sdk_ec2::operation::describe_volumes::DescribeVolumesOutput;
use aws_sdk_ec2::types::{Filter, Snapshot, Volume};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
use futures::{Stream, StreamExt};
use jiff::Timestamp;

pub use super::facts::{
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
///
/// Its [`Display`](fmt::Display) is what failed and why, readable (`listing EBS volumes in
/// 123456789012/eu-west-1: UnauthorizedOperation (HTTP 403): You are not authorized to perform
/// this operation.`); the category is a field, which whoever prints the line prints beside it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("listing EBS {resource} in {scope}: {message}")]
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
    /// Why, readable: EC2's code, the HTTP status and EC2's message, or what failed before an
    /// answer and its innermost cause (`describe`). Never the SDK's debug form.
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
            key: super::facts::TAG_CSI_SNAPSHOT_NAME.to_string(),
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
                let page = page.map_err(|e| page_error(&e, resource, self.config.scope(), read))?;
                read += 1;
                page.items_into(&mut items);
                if let Some(token) = page.next_token().filter(|t| !t.is_empty())
                    && !tokens.insert(token.to_string())
                {
                    return Err(self.error(
                        resource,
                        ErrorCategory::Other,
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
                read,
                format!(
                    "the listing did not finish within its deadline of {}s",
                    self.config.deadline.as_secs_f64()
                ),
            )),
        }
    }

    /// A failure of the listing itself (no answer to quote): a repeated token, the deadline.
    fn error(
        &self,
        resource: Resource,
        category: ErrorCategory,
        pages: u32,
        message: String,
    ) -> ListError {
        ListError {
            category,
            resource,
            scope: self.config.scope(),
            code: None,
            status: None,
            pages,
            message,
        }
    }
}

/// A failed page of `resource` in `scope` as a [`ListError`], `pages` read before it: its
/// category, EC2's code and HTTP status, and why, readable ([`describe`]).
fn page_error<E>(
    err: &SdkError<E, HttpResponse>,
    resource: Resource,
    scope: String,
    pages: u32,
) -> ListError
where
    E: ProvideErrorMetadata + StdError + 'static,
{
    let status = err.raw_response().map(|r| r.status().as_u16());
    let (category, code, status) = categorise(err, status);
    ListError {
        category,
        resource,
        scope,
        code,
        status,
        pages,
        message: describe(err, status),
    }
}

/// Why a request failed, readable: an answer as EC2's code, the HTTP status and EC2's message
/// (`UnauthorizedOperation (HTTP 403): You are not authorized to perform this operation.`);
/// no answer as what failed and the innermost cause's text (`could not connect: Connection
/// refused (os error 111)`). Never `DisplayErrorContext` nor `{:?}`: they add the SDK's debug
/// form, the raw response with its headers and body, and say the message three times.
fn describe<E, R>(err: &SdkError<E, R>, status: Option<u16>) -> String
where
    E: ProvideErrorMetadata + StdError + 'static,
    R: fmt::Debug + 'static,
{
    if let SdkError::ServiceError(s) = err {
        let e = s.err();
        return crate::census::service_line(e.code(), status, e.message());
    }
    let what = if credentials_failed(err) {
        "no usable credentials"
    } else {
        match err {
            SdkError::TimeoutError(_) => "timed out",
            SdkError::DispatchFailure(d) if d.is_timeout() => "timed out",
            SdkError::DispatchFailure(d) if d.is_io() => "could not connect",
            SdkError::DispatchFailure(_) => "the request could not be sent",
            SdkError::ResponseError(_) => "the answer could not be read",
            SdkError::ConstructionFailure(_) => "the request could not be made",
            _ => "the request failed",
        }
    };
    let cause = crate::census::innermost(err);
    match status {
        Some(s) => format!("{what} (HTTP {s}): {cause}"),
        None => format!("{what}: {cause}"),
    }
}

/// Whether credentials could not be found or loaded: that fails before any request is sent,
/// as a dispatch or construction failure whose cause is the credential provider's.
fn credentials_failed(err: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(err);
    while let Some(e) = source {
        if e.downcast_ref::<CredentialsError>().is_some() {
            return true;
        }
        source = e.source();
    }
    false
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
    if credentials_failed(err) {
        return (ErrorCategory::Auth, None, None);
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

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::error::{ConnectorError, ErrorMetadata};
    use aws_sdk_ec2::operation::describe_volumes::DescribeVolumesError;

    use super::*;
    use crate::census::LINE_BOUND;
    use crate::census::ebs::census::failure;

    /// EC2's answer to a caller without `ec2:DescribeVolumes`, as the SDK hands it over: the
    /// parsed code and message, and the raw response with its headers and XML body (which the
    /// SDK's debug form prints in full).
    fn refused(message: &str) -> SdkError<DescribeVolumesError, HttpResponse> {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>\
             <Code>UnauthorizedOperation</Code><Message>{message}</Message></Error></Errors>\
             <RequestID>5a7b2e1c-0000-4000-8000-000000000000</RequestID></Response>"
        );
        let mut raw = HttpResponse::new(403.try_into().unwrap(), body.into());
        raw.headers_mut()
            .insert("x-amzn-requestid", "5a7b2e1c-0000-4000-8000-000000000000");
        let meta = ErrorMetadata::builder()
            .code("UnauthorizedOperation")
            .message(message)
            .build();
        SdkError::service_error(DescribeVolumesError::generic(meta), raw)
    }

    /// The line the logs and `scan` print for a failed page of volumes in `123456789012/eu-west-1`.
    fn line_of<E>(e: &SdkError<E, HttpResponse>) -> String
    where
        E: ProvideErrorMetadata + StdError + Send + Sync + 'static,
    {
        let scope = "123456789012/eu-west-1".to_string();
        failure(page_error(e, Resource::Volumes, scope, 0)).to_string()
    }

    #[test]
    fn a_refused_page_is_one_line_with_ec2s_code_status_and_message() {
        let message = "You are not authorized to perform this operation.";
        let e = refused(message);
        let err = page_error(&e, Resource::Volumes, "123456789012/eu-west-1".into(), 0);
        assert_eq!(err.category, ErrorCategory::Forbidden);
        assert_eq!(err.code.as_deref(), Some("UnauthorizedOperation"));
        assert_eq!(err.status, Some(403));
        let line = line_of(&e);
        assert_eq!(
            line,
            "listing EBS volumes in 123456789012/eu-west-1: UnauthorizedOperation (HTTP 403): \
             You are not authorized to perform this operation."
        );
        assert_eq!(line.matches("UnauthorizedOperation").count(), 1, "{line}");
        assert_eq!(line.matches(message).count(), 1, "{line}");
        for debug in [
            "Response {",
            "headers",
            "x-amzn-requestid",
            "<?xml",
            "SdkBody",
        ] {
            assert!(!line.contains(debug), "{debug} in {line}");
        }
    }

    #[test]
    fn a_long_or_multi_line_message_is_one_bounded_line() {
        // An encoded authorization message runs to kilobytes; a proxy's may have newlines.
        let message = format!(
            "You are not authorized to perform this operation.\nEncoded authorization \
             failure message: {}",
            "ü".repeat(2_000)
        );
        let line = line_of(&refused(&message));
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(line.chars().count(), LINE_BOUND, "{line}");
        assert!(line.ends_with('…'), "{line}");
        assert!(
            line.contains("UnauthorizedOperation (HTTP 403): You are not authorized to perform this operation. Encoded"),
            "{line}"
        );
    }

    #[test]
    fn no_answer_is_what_failed_and_its_innermost_cause() {
        let refused = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let e: SdkError<DescribeVolumesError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io(Box::new(refused)));
        assert_eq!(
            line_of(&e),
            "listing EBS volumes in 123456789012/eu-west-1: could not connect: \
             Connection refused (os error 111)"
        );
        let e: SdkError<DescribeVolumesError, HttpResponse> =
            SdkError::timeout_error(std::io::Error::other(
                "operation timeout (all attempts including retries) occurred after 60s",
            ));
        assert_eq!(
            line_of(&e),
            "listing EBS volumes in 123456789012/eu-west-1: timed out: operation timeout \
             (all attempts including retries) occurred after 60s"
        );
        let e: SdkError<DescribeVolumesError, HttpResponse> = SdkError::construction_failure(
            CredentialsError::not_loaded("no providers in chain provided credentials"),
        );
        let err = page_error(&e, Resource::Volumes, "eu-west-1".into(), 0);
        assert_eq!(err.category, ErrorCategory::Auth);
        assert_eq!(
            err.message,
            "no usable credentials: no providers in chain provided credentials"
        );
    }
}
