//! The AWS EBS census (`src/census/ebs/`) against moto's EC2 endpoint (`scripts/moto.sh`):
//! the real `aws-sdk-ec2` signs and sends real requests to a real EC2 implementation on
//! 127.0.0.1. The test writes to moto through the SDK's own CreateVolume/RunInstances/
//! AttachVolume; the census only reads.
//!
//! What moto does not do is proven through a small proxy in front of it ([`Proxy`]): moto
//! ignores `MaxResults`/`NextToken`, so the proxy cuts moto's answer into pages of its own and
//! follows the tokens; and it answers the faults moto will not produce on demand (a throttled
//! 503, a 403, a 500, a request that never answers).
//!
//! When moto cannot be installed or started the tests skip, except in CI (`CI=true`), where
//! they fail.

use std::convert::Infallible;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use volume_leftovers::census::ebs::census::{report_of, snapshots_report_of};
use volume_leftovers::census::ebs::{
    CredentialSource, Ebs, EbsConfig, ErrorCategory, ListError, TagFilter,
};

/// moto's standalone server on a free port of 127.0.0.1, stopped on drop.
struct Moto {
    child: Child,
    url: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts moto (`env`: extra environment, e.g. its IAM check). `None` (the test skips) when it
/// cannot, outside CI.
fn moto(env: &[(&str, &str)]) -> Option<Moto> {
    match start_moto(env) {
        Ok(m) => Some(m),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("moto could not be started (CI=true: failing, not skipping): {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED: moto could not be started: {e}");
            None
        }
    }
}

fn start_moto(env: &[(&str, &str)]) -> Result<Moto, String> {
    let server = match std::env::var("VL_MOTO_SERVER") {
        Ok(p) => p,
        Err(_) => {
            let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/moto.sh"))
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| format!("scripts/moto.sh: {e}"))?;
            if !out.status.success() {
                return Err(format!("scripts/moto.sh failed: {}", out.status));
            }
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        }
    };
    let port = free_port();
    let mut cmd = Command::new(&server);
    cmd.args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd.spawn().map_err(|e| format!("{server}: {e}"))?;
    let mut moto = Moto {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let until = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(status)) = moto.child.try_wait() {
            return Err(format!("moto_server exited: {status}"));
        }
        if Instant::now() > until {
            return Err("moto_server did not listen within 60 s".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(moto)
}

fn test_keys() -> CredentialSource {
    CredentialSource::Keys {
        access_key_id: "AKIATESTTESTTEST".into(),
        secret_access_key: "test-secret".into(),
        session_token: None,
    }
}

/// The census's configuration for a test endpoint: fast retries, and bounds that a moto on a
/// loaded 2-core machine (several test binaries, six motos starting) stays well inside.
fn config(url: &str, region: &str) -> EbsConfig {
    EbsConfig {
        credentials: test_keys(),
        endpoint_url: Some(url.to_string()),
        connect_timeout: Duration::from_secs(5),
        attempt_timeout: Duration::from_secs(15),
        request_timeout: Duration::from_secs(40),
        deadline: Duration::from_secs(60),
        max_attempts: 3,
        initial_backoff: Duration::from_millis(50),
        max_backoff: Duration::from_millis(200),
        ..EbsConfig::new(region)
    }
}

/// A plain SDK client, for the test's own writes to moto.
async fn writer(url: &str, region: &str) -> aws_sdk_ec2::Client {
    let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_string()))
        .endpoint_url(url)
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "AKIATESTTESTTEST",
            "test-secret",
            None,
            None,
            "test",
        ))
        .load()
        .await;
    aws_sdk_ec2::Client::new(&sdk)
}

/// Creates a volume with these tags; returns its id.
async fn create_volume(
    ec2: &aws_sdk_ec2::Client,
    az: &str,
    gib: i32,
    tags: &[(&str, &str)],
) -> String {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Volume);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let mut req = ec2
        .create_volume()
        .availability_zone(az)
        .size(gib)
        .volume_type(aws_sdk_ec2::types::VolumeType::Gp3);
    if !tags.is_empty() {
        req = req.tag_specifications(spec.build());
    }
    req.send()
        .await
        .expect("CreateVolume")
        .volume_id()
        .expect("an id")
        .to_string()
}

#[tokio::test]
async fn volumes_are_listed_with_their_tags_attachments_and_csi_names() {
    let Some(moto) = moto(&[]) else { return };
    let region = "us-east-1";
    let ec2 = writer(&moto.url, region).await;
    let csi = create_volume(
        &ec2,
        "us-east-1a",
        10,
        &[
            ("CSIVolumeName", "pvc-1111"),
            ("kubernetes.io/created-for/pv/name", "pvc-1111"),
            ("kubernetes.io/created-for/pvc/name", "data"),
            ("kubernetes.io/created-for/pvc/namespace", "shop"),
            ("kubernetes.io/cluster/prod", "owned"),
            ("ebs.csi.aws.com/cluster", "true"),
        ],
    )
    .await;
    let other = create_volume(&ec2, "us-east-1b", 20, &[("team/cluster", "staging")]).await;
    let bare = create_volume(&ec2, "us-east-1a", 1, &[]).await;

    // Attach `bare` to an instance moto runs.
    let image = ec2
        .describe_images()
        .send()
        .await
        .expect("DescribeImages")
        .images()
        .first()
        .and_then(|i| i.image_id().map(str::to_string))
        .expect("moto has images");
    let run = ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .placement(
            aws_sdk_ec2::types::Placement::builder()
                .availability_zone("us-east-1a")
                .build(),
        )
        .send()
        .await
        .expect("RunInstances");
    let instance = run.instances()[0].instance_id().unwrap().to_string();
    ec2.attach_volume()
        .volume_id(&bare)
        .instance_id(&instance)
        .device("/dev/sdf")
        .send()
        .await
        .expect("AttachVolume");

    let mut cfg = config(&moto.url, region);
    cfg.account = Some("123456789012".into());
    let listing = Ebs::connect(cfg.clone())
        .await
        .list()
        .await
        .expect("a listing");
    let by_id = |id: &str| {
        listing
            .volumes
            .iter()
            .find(|v| v.id == id)
            .unwrap_or_else(|| panic!("{id} listed: {:?}", listing.volumes))
    };

    let v = by_id(&csi);
    assert_eq!(v.size_bytes, Some(10 << 30));
    assert_eq!(v.volume_type.as_deref(), Some("gp3"));
    assert_eq!(v.availability_zone.as_deref(), Some("us-east-1a"));
    assert_eq!(v.state.as_deref(), Some("available"));
    assert!(v.created.is_some(), "{v:?}");
    assert!(!v.attached());
    let tags = v.csi_tags();
    assert_eq!(tags.volume_name.as_deref(), Some("pvc-1111"));
    assert_eq!(tags.pv_name.as_deref(), Some("pvc-1111"));
    assert_eq!(tags.pvc_name.as_deref(), Some("data"));
    assert_eq!(tags.pvc_namespace.as_deref(), Some("shop"));
    let who = v.attribution(None);
    assert_eq!(who.clusters, vec!["prod".to_string()]);
    assert!(who.created_by_csi_driver);

    let v = by_id(&other);
    assert_eq!(v.size_bytes, Some(20 << 30));
    assert_eq!(v.attribution(None).clusters, Vec::<String>::new());
    assert_eq!(
        v.attribution(Some("team/cluster")).clusters,
        vec!["staging".to_string()]
    );

    let v = by_id(&bare);
    assert!(v.attached(), "{v:?}");
    assert_eq!(v.attachments.len(), 1);
    assert_eq!(
        v.attachments[0].instance_id.as_deref(),
        Some(instance.as_str())
    );
    assert_eq!(v.attachments[0].device.as_deref(), Some("/dev/sdf"));
    assert!(v.tags.is_empty());

    // Everything else moto lists is the instance's root volume, attached to it.
    for v in &listing.volumes {
        if ![&csi, &other, &bare].contains(&&v.id) {
            assert_eq!(
                v.attachments.first().and_then(|a| a.instance_id.as_deref()),
                Some(instance.as_str()),
                "{v:?}"
            );
        }
    }

    // A server-side tag filter narrows the listing to the tagged volume.
    cfg.tag_filters = vec![TagFilter {
        key: "kubernetes.io/cluster/prod".into(),
        values: vec![],
    }];
    let filtered = Ebs::connect(cfg.clone())
        .await
        .list()
        .await
        .expect("a listing");
    let ids: Vec<&str> = filtered.volumes.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, vec![csi.as_str()]);
    cfg.tag_filters = vec![TagFilter {
        key: "team/cluster".into(),
        values: vec!["staging".into(), "qa".into()],
    }];
    let filtered = Ebs::connect(cfg).await.list().await.expect("a listing");
    let ids: Vec<&str> = filtered.volumes.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(ids, vec![other.as_str()]);
}

#[tokio::test]
async fn an_empty_region_is_an_empty_listing() {
    let Some(moto) = moto(&[]) else { return };
    // Another region of the same endpoint has a volume; this one has none.
    create_volume(&writer(&moto.url, "us-east-1").await, "us-east-1a", 1, &[]).await;
    let listing = Ebs::connect(config(&moto.url, "ap-south-1"))
        .await
        .list()
        .await
        .expect("a listing");
    assert_eq!(listing.volumes, vec![]);
    assert_eq!(listing.pages, 1);
}

#[tokio::test]
async fn refused_credentials_are_an_auth_error_not_an_empty_list() {
    // moto checks access keys against its IAM users from the first request on.
    let Some(moto) = moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]) else {
        return;
    };
    let err = Ebs::connect(config(&moto.url, "us-east-1"))
        .await
        .list()
        .await
        .expect_err("unknown keys are refused");
    assert_eq!(err.category, ErrorCategory::Auth, "{err}");
    assert_eq!(err.pages, 0);
}

/// The child half of [`missing_credentials_are_an_auth_error`]: runs only in the child process
/// that test starts, whose environment has no credentials at all.
#[tokio::test]
async fn child_default_chain_without_credentials() {
    let Ok(url) = std::env::var("VL_EBS_CHILD_ENDPOINT") else {
        return;
    };
    let cfg = EbsConfig {
        credentials: CredentialSource::DefaultChain,
        ..config(&url, "us-east-1")
    };
    let err = Ebs::connect(cfg)
        .await
        .list()
        .await
        .expect_err("no credentials");
    assert_eq!(err.category, ErrorCategory::Auth, "{err}");
    let line = failure_line(err, false);
    assert!(
        line.starts_with("listing EBS volumes in us-east-1: no usable credentials: "),
        "{line}"
    );
    println!("child: {line}");
}

#[tokio::test]
async fn missing_credentials_are_an_auth_error() {
    let Some(moto) = moto(&[]) else { return };
    // The default chain reads the process's environment and home directory: run it in a child
    // process with neither (and no instance metadata), so that it finds nothing.
    let home = std::env::temp_dir().join(format!("vl-ebs-home-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_default_chain_without_credentials",
            "--nocapture",
        ])
        .env_clear()
        .env("HOME", &home)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("VL_EBS_CHILD_ENDPOINT", &moto.url)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("child: ") && stdout.contains("1 passed"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the proxy does with each request.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Forwards to moto and answers `size` volumes at a time, with its own page tokens.
    Pages { size: usize },
    /// Answers this status with this EC2 error code.
    Error(u16, &'static str),
    /// Never answers.
    Hang,
}

/// A proxy in front of moto (see the file's doc).
struct Proxy {
    url: String,
    /// Each request's form body, in order.
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn proxy(upstream: Option<&str>, mode: Mode) -> Proxy {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let upstream = upstream.map(|u| u.trim_start_matches("http://").to_string());
    let s = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let (seen, upstream) = (s.clone(), upstream.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let (seen, upstream) = (seen.clone(), upstream.clone());
                    async move { Ok::<_, Infallible>(answer(req, mode, upstream, seen).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Proxy {
        url: format!("http://{addr}"),
        seen,
        task,
    }
}

fn form_value<'a>(form: &'a str, key: &str) -> Option<&'a str> {
    form.split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

async fn answer(
    req: Request<Incoming>,
    mode: Mode,
    upstream: Option<String>,
    seen: Arc<Mutex<Vec<String>>>,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    let form = String::from_utf8_lossy(&body).to_string();
    seen.lock().unwrap().push(form.clone());
    match mode {
        Mode::Hang => std::future::pending().await,
        Mode::Error(status, code) => Response::builder()
            .status(status)
            .header("content-type", "text/xml")
            .body(Full::new(Bytes::from(format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
                 <Message>{}</Message></Error></Errors>\
                 <RequestID>00000000-0000-0000-0000-000000000000</RequestID></Response>",
                ec2_message(code)
            ))))
            .unwrap(),
        Mode::Pages { size } => {
            let upstream = upstream.expect("an upstream");
            let stream = tokio::net::TcpStream::connect(&upstream).await.unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let mut fwd = Request::builder().method(parts.method).uri(parts.uri);
            for (k, v) in &parts.headers {
                fwd = fwd.header(k, v);
            }
            let resp = send.send_request(fwd.body(Full::new(body)).unwrap()).await.unwrap();
            let status = resp.status();
            let whole = resp.into_body().collect().await.unwrap().to_bytes();
            let whole = String::from_utf8_lossy(&whole).to_string();
            let start: usize = form_value(&form, "NextToken").map_or(0, |t| t.parse().unwrap());
            Response::builder()
                .status(status)
                .header("content-type", "text/xml")
                .body(Full::new(Bytes::from(page_of(&whole, start, size))))
                .unwrap()
        }
    }
}

/// The message EC2 sends with `code` (the proxy's own words for the codes it fakes otherwise).
fn ec2_message(code: &str) -> &'static str {
    match code {
        "UnauthorizedOperation" => "You are not authorized to perform this operation.",
        _ => "injected by the test proxy",
    }
}

/// The longest failure line the operator logs and `scan` prints (`census::LINE_BOUND`).
const LINE_BOUND: usize = 300;

/// The line of a failed listing of `resource` as the operator logs it and `scan` prints it
/// (the census's report of it), checked for what every failure line is: one line, bounded,
/// none of the SDK's debug form of the answer (its raw response, headers, XML body).
fn failure_line(err: ListError, snapshots: bool) -> String {
    let config = EbsConfig::new("us-east-1");
    let at = Time(jiff::Timestamp::UNIX_EPOCH);
    let report = if snapshots {
        snapshots_report_of(Err(err), &config, None, None, at, Duration::ZERO)
    } else {
        report_of(Err(err), &config, None, None, at, Duration::ZERO)
    };
    let line = report.result.expect_err("a failure").to_string();
    assert!(!line.contains('\n'), "one line: {line}");
    assert!(line.chars().count() <= LINE_BOUND, "bounded: {line}");
    for debug in [
        "Response {",
        "headers",
        "<?xml",
        "<Response>",
        "SdkBody",
        "Error {",
    ] {
        assert!(!line.contains(debug), "{debug:?} in {line}");
    }
    line
}

/// Volumes `start..start + size` of moto's whole DescribeVolumes answer, with a `nextToken`
/// (the next start) when more follow.
fn page_of(whole: &str, start: usize, size: usize) -> String {
    let open = whole.find("<volumeSet>").expect("a volumeSet") + "<volumeSet>".len();
    let close = whole.rfind("</volumeSet>").expect("a volumeSet");
    // The volumes are the volumeSet's top-level <item>s (attachments and tags nest their own).
    let inner = &whole[open..close];
    let mut items = Vec::new();
    let (mut depth, mut at, mut begin) = (0usize, 0usize, 0usize);
    while at < inner.len() {
        let rest = &inner[at..];
        if rest.starts_with("<item>") {
            if depth == 0 {
                begin = at;
            }
            depth += 1;
            at += "<item>".len();
        } else if rest.starts_with("</item>") {
            depth -= 1;
            at += "</item>".len();
            if depth == 0 {
                items.push(&inner[begin..at]);
            }
        } else {
            at += rest.chars().next().unwrap().len_utf8();
        }
    }
    let end = (start + size).min(items.len());
    let token = if end < items.len() {
        format!("<nextToken>{end}</nextToken>")
    } else {
        String::new()
    };
    let tail = whole[close..].replace(
        "</DescribeVolumesResponse>",
        &format!("{token}</DescribeVolumesResponse>"),
    );
    format!("{}{}{tail}", &whole[..open], items[start..end].concat())
}

#[tokio::test]
async fn every_page_is_read() {
    let Some(moto) = moto(&[]) else { return };
    let region = "eu-west-1";
    let ec2 = writer(&moto.url, region).await;
    let mut created = Vec::new();
    for n in 0..7 {
        created.push(create_volume(&ec2, "eu-west-1a", n + 1, &[("n", &n.to_string())]).await);
    }
    let proxy = proxy(Some(&moto.url), Mode::Pages { size: 3 }).await;
    let mut cfg = config(&proxy.url, region);
    cfg.page_size = 5;
    let listing = Ebs::connect(cfg).await.list().await.expect("a listing");
    let mut ids: Vec<String> = listing.volumes.iter().map(|v| v.id.clone()).collect();
    ids.sort();
    created.sort();
    assert_eq!(ids, created);
    assert_eq!(listing.pages, 3);
    let seen = proxy.seen.lock().unwrap().clone();
    let tokens: Vec<Option<&str>> = seen.iter().map(|f| form_value(f, "NextToken")).collect();
    assert_eq!(tokens, vec![None, Some("3"), Some("6")], "{seen:?}");
    assert!(
        seen.iter()
            .all(|f| form_value(f, "MaxResults") == Some("5")),
        "{seen:?}"
    );
    // The tags came through the cut pages too.
    assert!(listing.volumes.iter().all(|v| v.tags.contains_key("n")));
}

/// Lists through a proxy answering `mode` to every request; returns the error, how long it
/// took, and how many requests the proxy saw.
async fn failed_listing(mode: Mode) -> (ListError, Duration, usize) {
    let proxy = proxy(None, mode).await;
    let started = Instant::now();
    // Short bounds: the proxy answers at once, or never.
    let cfg = EbsConfig {
        attempt_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(10),
        deadline: Duration::from_secs(20),
        ..config(&proxy.url, "us-east-1")
    };
    let err = Ebs::connect(cfg)
        .await
        .list()
        .await
        .expect_err("the listing fails");
    let n = proxy.seen.lock().unwrap().len();
    (err, started.elapsed(), n)
}

#[tokio::test]
async fn throttling_is_retried_with_backoff_then_a_throttling_error() {
    let (err, took, requests) = failed_listing(Mode::Error(503, "RequestLimitExceeded")).await;
    assert_eq!(err.category, ErrorCategory::Throttling, "{err}");
    assert_eq!(err.code.as_deref(), Some("RequestLimitExceeded"));
    assert_eq!(err.status, Some(503));
    assert_eq!(requests, 3, "max_attempts requests");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_403_is_forbidden_and_not_retried() {
    let (err, _, requests) = failed_listing(Mode::Error(403, "UnauthorizedOperation")).await;
    assert_eq!(err.category, ErrorCategory::Forbidden, "{err}");
    assert_eq!(err.code.as_deref(), Some("UnauthorizedOperation"));
    assert_eq!(requests, 1);
    // What a person reads: EC2's code, the status and EC2's message, each once.
    assert_eq!(
        failure_line(err, false),
        "listing EBS volumes in us-east-1: UnauthorizedOperation (HTTP 403): \
         You are not authorized to perform this operation."
    );
}

#[tokio::test]
async fn a_500_is_a_server_error() {
    let (err, _, requests) = failed_listing(Mode::Error(500, "InternalError")).await;
    assert_eq!(err.category, ErrorCategory::Server, "{err}");
    assert_eq!(requests, 3);
}

#[tokio::test]
async fn a_hanging_answer_is_a_timeout_within_the_bounds() {
    let (err, took, requests) = failed_listing(Mode::Hang).await;
    assert_eq!(err.category, ErrorCategory::Timeout, "{err}");
    let line = failure_line(err, false);
    assert!(
        line.starts_with("listing EBS volumes in us-east-1: timed out: "),
        "{line}"
    );
    // attempt_timeout 2 s, request_timeout 10 s: the request's bound ends it.
    assert!(took < Duration::from_secs(12), "{took:?}");
    assert!(requests >= 1);
}

#[tokio::test]
async fn a_closed_port_is_unreachable() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let err = Ebs::connect(config(&url, "us-east-1"))
        .await
        .list()
        .await
        .expect_err("nothing listens");
    assert_eq!(err.category, ErrorCategory::Unreachable, "{err}");
    let line = failure_line(err, false);
    assert!(
        line.starts_with("listing EBS volumes in us-east-1: could not connect: "),
        "what failed and its innermost cause: {line}"
    );
}

/// Creates IAM users in moto with boto3 (moto's venv has it) and returns each one's keys:
/// `admin` may do anything, `census` has only the policy of `docs/iam/ebs-census-policy.json`,
/// `nobody` has no policy. Eight requests, which moto serves unchecked when started with
/// `INITIAL_NO_AUTH_ACTION_COUNT=8`; every later request is checked against these policies.
fn iam_users(moto: &Moto) -> std::collections::HashMap<String, CredentialSource> {
    let server = std::env::var("VL_MOTO_SERVER").unwrap_or_else(|_| {
        let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/moto.sh"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    });
    let python = std::path::Path::new(&server).with_file_name("python");
    let policy = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/iam/ebs-census-policy.json"
    );
    let script = r#"
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="x", aws_secret_access_key="x")
admin = json.dumps({"Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
census = open(sys.argv[2]).read()
out = {}
for user, policy in [("admin", admin), ("census", census), ("nobody", None)]:
    iam.create_user(UserName=user)
    if policy:
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=policy)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    out[user] = [key["AccessKeyId"], key["SecretAccessKey"]]
print(json.dumps(out))
"#;
    let out = Command::new(python)
        .args(["-c", script, &moto.url, policy])
        .output()
        .expect("moto's python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let users: std::collections::HashMap<String, (String, String)> =
        serde_json::from_slice(&out.stdout).expect("keys");
    users
        .into_iter()
        .map(|(u, (id, secret))| {
            (
                u,
                CredentialSource::Keys {
                    access_key_id: id,
                    secret_access_key: secret,
                    session_token: None,
                },
            )
        })
        .collect()
}

#[tokio::test]
async fn the_documented_policy_is_enough_and_no_more() {
    let Some(moto) = moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "8")]) else {
        return;
    };
    let users = iam_users(&moto);
    let keys = |u: &str| users[u].clone();
    let client = |creds: CredentialSource| {
        let url = moto.url.clone();
        async move {
            let CredentialSource::Keys {
                access_key_id,
                secret_access_key,
                ..
            } = creds
            else {
                unreachable!()
            };
            let sdk = aws_config::defaults(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new("us-east-1"))
                .endpoint_url(url)
                .http_client(aws_smithy_http_client::Builder::new().build_http())
                .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                    access_key_id,
                    secret_access_key,
                    None,
                    None,
                    "test",
                ))
                .load()
                .await;
            aws_sdk_ec2::Client::new(&sdk)
        }
    };
    let id = client(keys("admin"))
        .await
        .create_volume()
        .availability_zone("us-east-1a")
        .size(1)
        .send()
        .await
        .expect("admin may create")
        .volume_id()
        .unwrap()
        .to_string();

    // The census's policy lists it ...
    let cfg = EbsConfig {
        credentials: keys("census"),
        ..config(&moto.url, "us-east-1")
    };
    let census = Ebs::connect(cfg).await;
    let listing = census.list().await.expect("a listing");
    // ... and its snapshots (the policy's second statement, for `snapshots: true`) ...
    census.list_snapshots().await.expect("a snapshot listing");
    assert_eq!(
        listing
            .volumes
            .iter()
            .map(|v| v.id.as_str())
            .collect::<Vec<_>>(),
        vec![id.as_str()]
    );
    // ... and allows nothing else.
    let denied = client(keys("census"))
        .await
        .create_volume()
        .availability_zone("us-east-1a")
        .size(1)
        .send()
        .await
        .expect_err("the census policy may not create");
    // EC2 says UnauthorizedOperation; moto says AccessDenied (both 403).
    assert_eq!(
        aws_sdk_ec2::error::ProvideErrorMetadata::code(&denied),
        Some("AccessDenied"),
        "{denied:?}"
    );

    // Without the policy, the census is Forbidden, not an empty list.
    let cfg = EbsConfig {
        credentials: keys("nobody"),
        ..config(&moto.url, "us-east-1")
    };
    let err = Ebs::connect(cfg).await.list().await.expect_err("no policy");
    assert_eq!(err.category, ErrorCategory::Forbidden, "{err}");
    assert_eq!(err.code.as_deref(), Some("AccessDenied"));
    assert_eq!(err.status, Some(403));
    // moto's own answer, read as a person reads it: its code and status once, then its
    // message (which names the action refused).
    let line = failure_line(err, false);
    let message = line
        .strip_prefix("listing EBS volumes in us-east-1: AccessDenied (HTTP 403): ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(message.contains("DescribeVolumes"), "{line}");
    assert_eq!(line.matches("AccessDenied").count(), 1, "{line}");
}

/// Cuts a snapshot of `volume` with these tags; returns its id.
async fn create_snapshot(ec2: &aws_sdk_ec2::Client, volume: &str, tags: &[(&str, &str)]) -> String {
    let mut spec = TagSpecification::builder().resource_type(ResourceType::Snapshot);
    for (k, v) in tags {
        spec = spec.tags(Tag::builder().key(*k).value(*v).build());
    }
    let mut req = ec2.create_snapshot().volume_id(volume);
    if !tags.is_empty() {
        req = req.tag_specifications(spec.build());
    }
    req.send()
        .await
        .expect("CreateSnapshot")
        .snapshot_id()
        .expect("an id")
        .to_string()
}

#[tokio::test]
async fn only_the_csi_drivers_snapshots_are_listed_with_their_facts() {
    let Some(moto) = moto(&[]) else { return };
    let region = "eu-west-1";
    let ec2 = writer(&moto.url, region).await;
    let volume = create_volume(&ec2, "eu-west-1a", 12, &[("CSIVolumeName", "pvc-1")]).await;
    let csi = create_snapshot(
        &ec2,
        &volume,
        &[
            ("CSIVolumeSnapshotName", "snapcontent-1"),
            (
                "kubernetes.io/created-for/volumesnapshotcontent/name",
                "snapcontent-1",
            ),
            ("kubernetes.io/created-for/volumesnapshot/name", "nightly"),
            ("kubernetes.io/created-for/volumesnapshot/namespace", "shop"),
            ("kubernetes.io/cluster/prod", "owned"),
        ],
    )
    .await;
    // Cut by hand (or by a backup tool): not the driver's, not listed.
    let _by_hand = create_snapshot(&ec2, &volume, &[("team", "ops")]).await;

    let listing = Ebs::connect(config(&moto.url, region))
        .await
        .list_snapshots()
        .await
        .expect("a listing");
    assert_eq!(listing.pages, 1);
    let [s] = &listing.snapshots[..] else {
        panic!("exactly the driver's snapshot: {listing:?}")
    };
    assert_eq!(s.id, csi);
    assert_eq!(s.volume_id.as_deref(), Some(volume.as_str()));
    assert_eq!(s.source_volume(), Some(volume.as_str()));
    assert_eq!(s.size_bytes, Some(12 << 30));
    assert!(s.start_time.is_some());
    let tags = s.csi_tags();
    assert_eq!(tags.content_name.as_deref(), Some("snapcontent-1"));
    assert_eq!(tags.volume_snapshot_name.as_deref(), Some("nightly"));
    assert_eq!(tags.volume_snapshot_namespace.as_deref(), Some("shop"));
    assert_eq!(s.attribution(None).clusters, vec!["prod".to_string()]);

    // The volumes' listing is unchanged by the snapshots.
    let volumes = Ebs::connect(config(&moto.url, region))
        .await
        .list()
        .await
        .unwrap();
    assert_eq!(volumes.volumes.len(), 1);
}

#[tokio::test]
async fn a_403_on_describe_snapshots_is_forbidden() {
    let proxy = proxy(None, Mode::Error(403, "UnauthorizedOperation")).await;
    let err = Ebs::connect(config(&proxy.url, "us-east-1"))
        .await
        .list_snapshots()
        .await
        .expect_err("the listing fails");
    assert_eq!(err.category, ErrorCategory::Forbidden, "{err}");
    assert_eq!(err.code.as_deref(), Some("UnauthorizedOperation"));
    assert!(err.to_string().contains("EBS snapshots"), "{err}");
    assert_eq!(
        failure_line(err, true),
        "listing EBS snapshots in us-east-1: UnauthorizedOperation (HTTP 403): \
         You are not authorized to perform this operation."
    );
    let seen = proxy.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "not retried: {seen:?}");
    // The request asked for this account's own snapshots, the driver's tag present.
    assert_eq!(form_value(&seen[0], "Action"), Some("DescribeSnapshots"));
    assert_eq!(form_value(&seen[0], "Owner.1"), Some("self"), "{seen:?}");
    assert!(
        seen[0].contains("Filter.1.Name=tag-key&Filter.1.Value.1=CSIVolumeSnapshotName"),
        "{seen:?}"
    );
}
