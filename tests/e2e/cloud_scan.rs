//! `scan --census-config` with the cloud sections, end to end: the binary against the real
//! control plane and the cloud test servers, as the operator's identity. GCE: the project's own
//! Compute server (tests/fake-gce-compute/server.py, validated against Google's discovery
//! document; the real Google client signs its requests with a generated key). EBS: moto's EC2
//! server, the real `aws-sdk-ec2` from the default credential chain (the environment's keys),
//! moto checking them against IAM users.
//!
//! Each way one finding: a disk no PV names (with what names it), a PV whose disk two listings
//! did not find; beside them what is not reported (another cluster's disk, a disk a PV names, a
//! PV whose disk is in a scope the census does not know); and a scope answering 403 → exit 4
//! naming it and its category, nothing said about its disks.
//!
//! When a cloud test server cannot be had, the test skips (fails with `CI=true`), as
//! tests/gce.rs and tests/ebs.rs do.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume};
use kube::Api;
use serde_json::{Value, json};
use volume_leftovers::decide::census::disk_leftover_name;
use volume_leftovers::model::crd::VolumeLeftover;

use crate::support::*;

/// A part that cannot be had: a failure in CI, a loud skip elsewhere.
fn unavailable(what: &str, why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} cannot be started (CI=true, so this fails): {why}");
    }
    eprintln!("SKIPPED: {what} cannot be started: {why}");
}

/// A child process killed on drop, with a directory removed then.
struct Server {
    child: Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique(name));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `volume-leftovers scan --census-config FILE` as the operator's identity, with `env`.
fn scan(config: &str, dir: &Path, env: &[(&str, &str)]) -> Output {
    let file = dir.join("census.yaml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"));
    cmd.args(["scan", "--census-image-grace", "0s", "--census-config"])
        .arg(&file)
        .env("KUBECONFIG", cp().kubeconfig("operator"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// The JSON line named `name`, parsed.
fn line(stdout: &str, name: &str) -> Option<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .find(|v| v["name"] == name)
}

/// Creates the PVs and waits until each is Available (a PV the controller-manager has not
/// looked at yet has no phase, and is not classified), and until the operator's identity can
/// list VolumeLeftovers (a control plane just started answers 429 while its storage for the CRD
/// initializes; `scan` lists the tombstones), and into the next second.
async fn ready(pvs: &Api<PersistentVolume>, volumes: &[PersistentVolume]) {
    for p in volumes {
        create(pvs, p).await;
    }
    for p in volumes {
        wait_pv_phase(pvs, p.metadata.name.as_deref().unwrap(), "Available").await;
    }
    let leftovers = Api::<VolumeLeftover>::all(cp().operator_client().await);
    wait_for(
        "VolumeLeftovers to be listable",
        Duration::from_secs(60),
        || {
            let leftovers = leftovers.clone();
            async move { leftovers.list(&Default::default()).await.ok() }
        },
    )
    .await;
    // A PV counts as missing only when it was created before the first listing began, and both
    // times are whole seconds (what the API server keeps): a listing in the second the PVs were
    // made would rightly leave them Unknown. So the clock (the API server's, on this machine)
    // moves on to the next second first.
    let into_second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    tokio::time::sleep(
        Duration::from_nanos(1_000_000_000 - u64::from(into_second)) + Duration::from_millis(20),
    )
    .await;
}

/// A PV naming a cloud disk by its CSI driver's handle.
fn csi_pv(name: &str, driver: &str, handle: &str) -> PersistentVolume {
    let mut p = pv(name, "", "1Gi", "Retain");
    let spec = p.spec.as_mut().unwrap();
    spec.host_path = None;
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: driver.into(),
        volume_handle: handle.into(),
        ..CSIPersistentVolumeSource::default()
    });
    p
}

// --- GCE -------------------------------------------------------------------------------------

/// The Compute test server holding `state`, with its trusted key in `dir/keys/key.json`.
fn compute_server(state: &Value) -> Option<(Server, String)> {
    let py = match Command::new(repo().join("scripts/gce-python.sh"))
        .stderr(Stdio::inherit())
        .output()
    {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        other => {
            unavailable(
                "the Compute test server",
                &format!("scripts/gce-python.sh: {other:?}"),
            );
            return None;
        }
    };
    let doc = Command::new(&py)
        .args(["-c", "import googleapiclient, pathlib; print(pathlib.Path(googleapiclient.__file__).parent / 'discovery_cache/documents/compute.v1.json')"])
        .output()
        .unwrap();
    let doc = PathBuf::from(String::from_utf8_lossy(&doc.stdout).trim());
    let dir = scratch("fake-gce");
    std::fs::File::create(dir.join("state.json"))
        .unwrap()
        .write_all(state.to_string().as_bytes())
        .unwrap();
    let child = Command::new(py)
        .arg(repo().join("tests/fake-gce-compute/server.py"))
        .arg("--discovery")
        .arg(doc)
        .arg("--state")
        .arg(dir.join("state.json"))
        .arg("--write-keys")
        .arg(dir.join("keys"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Killed and waited for on drop, whatever happens next.
    let mut server = Server { child, dir };
    let mut first = String::new();
    let _ = BufReader::new(server.child.stdout.take().unwrap()).read_line(&mut first);
    let Some(port) = first.trim().strip_prefix("listening ").map(str::to_string) else {
        unavailable("the Compute test server", &format!("it said {first:?}"));
        return None;
    };
    Some((server, format!("http://127.0.0.1:{port}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reports_gce_disks_and_pvs_that_lost_each_other_and_exits_4_naming_a_forbidden_zone() {
    let project = "p-e2e";
    let disk = |zone: &str, name: &str, labels: Value| {
        json!({"zone": zone, "name": name, "id": "4711", "sizeGb": "10", "type": "pd-balanced",
               "creationTimestamp": "2026-03-01T10:00:00.000-08:00", "status": "READY",
               "labels": labels})
    };
    let kept = unique("kept");
    // A disk grown in the console to 30 GB under a PV that says 10Gi.
    let grown = unique("grown");
    let mut grown_disk = disk(
        "europe-west1-b",
        &grown,
        json!({"goog-k8s-cluster-name": "e2e"}),
    );
    grown_disk["sizeGb"] = json!("30");
    let state = json!({
        "project": project,
        "zones": ["europe-west1-b", "europe-west1-c"], "regions": ["europe-west1"],
        "disks": [
            disk("europe-west1-b", "unlabelled", json!({})),
            disk("europe-west1-b", "theirs", json!({"goog-k8s-cluster-name": "another"})),
            disk("europe-west1-b", &kept, json!({"goog-k8s-cluster-name": "e2e"})),
            grown_disk,
            {"region": "europe-west1", "name": "regional", "id": "4712", "sizeGb": "20",
             "type": "pd-ssd", "replicaZones": ["europe-west1-b", "europe-west1-c"],
             "creationTimestamp": "2026-03-01T10:00:00.000-08:00", "status": "READY",
             "users": [format!("projects/{project}/zones/europe-west1-b/instances/vm-1")],
             "labels": {"goog-k8s-cluster-name": "e2e"}},
        ],
        "errors": {"zones/europe-west1-c": {"status": 403}},
    });
    let Some((server, endpoint)) = compute_server(&state) else {
        return;
    };
    let admin = cp().admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let handle = |zone: &str, disk: &str| format!("projects/{project}/zones/{zone}/disks/{disk}");
    let (ghost, named, hidden, sized) = (
        unique("gce-ghost"),
        unique("gce-kept"),
        unique("gce-hidden"),
        unique("gce-sized"),
    );
    const DRIVER: &str = "pd.csi.storage.gke.io";
    // The size the disk has (10 GB, in GiB as GCE counts): not a finding.
    let with_capacity = |mut p: PersistentVolume, size: &str| {
        p.spec.as_mut().unwrap().capacity = Some(
            [(
                "storage".to_string(),
                k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
            )]
            .into(),
        );
        p
    };
    let volumes = [
        csi_pv(&ghost, DRIVER, &handle("europe-west1-b", "ghost")),
        with_capacity(
            csi_pv(&named, DRIVER, &handle("europe-west1-b", &kept)),
            "10Gi",
        ),
        csi_pv(&hidden, DRIVER, &handle("europe-west1-c", "hidden")),
        with_capacity(
            csi_pv(&sized, DRIVER, &handle("europe-west1-b", &grown)),
            "10Gi",
        ),
    ];
    ready(&pvs, &volumes).await;

    let config = |locations: &str| {
        format!(
            "clusterName: e2e\ngce:\n  - project: {project}\n    locations: [{locations}]\n    keyFile: {}\n    endpoint: {endpoint}\n",
            server.dir.join("keys/key.json").display()
        )
    };
    let zone = volume_leftovers::census::gce::vocabulary::location(project, "europe-west1-b");

    // Two listings of each configured location, then the PVs; a size that differs is reported
    // at once (the expansion grace 0s: by default it is held back, as below).
    let out = scan(
        &config("europe-west1-b, europe-west1"),
        &server.dir,
        &[("VL_EXPANSION_GRACE", "0s")],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "leftovers found: {stderr}");
    let orphan = line(&stdout, &disk_leftover_name(&zone, "unlabelled"))
        .unwrap_or_else(|| panic!("no line for the unlabelled disk:\n{stdout}"));
    assert_eq!(orphan["reason"], "DiskWithoutVolume");
    assert_eq!(orphan["hints"], json!(["OwnerUnknown"]));
    assert_eq!(orphan["backend"], "gce");
    assert_eq!(orphan["scope"], "gce:p-e2e/europe-west1-b");
    assert_eq!(
        (&orphan["project"], &orphan["zone"], &orphan["region"]),
        (
            &json!(project),
            &json!("europe-west1-b"),
            &json!("europe-west1")
        )
    );
    assert_eq!(orphan["disk_name"], "unlabelled");
    assert_eq!(orphan["size_bytes"], 10u64 << 30);
    assert_eq!(orphan["disk_type"], "pd-balanced");
    assert_eq!(orphan["owner"], "unknown");
    let regional = line(
        &stdout,
        &disk_leftover_name(
            &volume_leftovers::census::gce::vocabulary::location(project, "europe-west1"),
            "regional",
        ),
    )
    .unwrap_or_else(|| panic!("no line for the regional disk:\n{stdout}"));
    assert_eq!(regional["hints"], json!(["DiskInUse"]), "attached: in use");
    assert_eq!(regional["region"], "europe-west1");
    assert_eq!(regional["owner"], "ours");
    assert_eq!(
        regional["replica_zones"],
        json!(["europe-west1-b", "europe-west1-c"])
    );
    let lost = line(&stdout, &ghost).unwrap_or_else(|| panic!("no line for {ghost}:\n{stdout}"));
    assert_eq!(lost["reason"], "VolumeWithoutDisk");
    assert_eq!(lost["scope"], "gce:p-e2e/europe-west1-b");
    let drift = line(&stdout, &sized).unwrap_or_else(|| panic!("no line for {sized}:\n{stdout}"));
    assert_eq!(drift["reason"], "DiskSizeMismatch", "{drift}");
    assert_eq!(drift["disk_size_bytes"], 30u64 << 30, "{drift}");
    assert_eq!(drift["capacity"], "10Gi", "{drift}");
    for absent in ["theirs", kept.as_str(), named.as_str(), hidden.as_str()] {
        assert!(!stdout.contains(absent), "{absent} reported:\n{stdout}");
    }

    // The zone that answers 403, configured too: exit 4 naming it; nothing said about it.
    let out = scan(
        &config("europe-west1-b, europe-west1, europe-west1-c"),
        &server.dir,
        &[],
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the GCE census of gce:p-e2e/europe-west1-c failed (forbidden)"),
        "{stderr}"
    );
    assert!(
        !stdout.contains(&hidden),
        "a PV of an Unknown zone is not missing:\n{stdout}"
    );
    assert!(
        line(&stdout, &ghost).is_some(),
        "the other zones count:\n{stdout}"
    );
    assert!(
        line(&stdout, &sized).is_none()
            && stderr.contains(&sized)
            && stderr.contains("--expansion-grace 3600s"),
        "by default the size is held back and named:\n{stdout}\n{stderr}"
    );
    for pv in [&ghost, &named, &hidden, &sized] {
        delete(&pvs, pv).await;
    }
}

/// A Delete PV goes only once its driver deleted the disk, and a listing that began before may
/// still hold the disk: a PV deleted while `scan` lists (its zone answers slowly here, the
/// disk listed both times) still names its disk. No DiskWithoutVolume for a state only passing
/// through: `scan` reads the PVs before its listings as well as after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pv_deleted_while_scan_lists_still_names_its_disk() {
    let project = "p-race";
    let disk = unique("passing");
    let state = json!({
        "project": project,
        "zones": ["europe-west1-b"],
        "disks": [{"zone": "europe-west1-b", "name": disk, "id": "4801", "sizeGb": "10",
                   "type": "pd-balanced", "creationTimestamp": "2026-03-01T10:00:00.000-08:00",
                   "status": "READY", "labels": {"goog-k8s-cluster-name": "e2e"}}],
        "errors": {"zones/europe-west1-b": {"delay": 4}},
    });
    let Some((server, endpoint)) = compute_server(&state) else {
        return;
    };
    let admin = cp().admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let name = unique("gce-passing");
    let handle = format!("projects/{project}/zones/europe-west1-b/disks/{disk}");
    ready(&pvs, &[csi_pv(&name, "pd.csi.storage.gke.io", &handle)]).await;
    let file = server.dir.join("census.yaml");
    std::fs::write(
        &file,
        format!(
            "clusterName: e2e\ngce:\n  - project: {project}\n    locations: [europe-west1-b]\n    keyFile: {}\n    endpoint: {endpoint}\n",
            server.dir.join("keys/key.json").display()
        ),
    )
    .unwrap();
    let scan = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "--census-image-grace", "0s", "--census-config"])
        .arg(&file)
        .env("KUBECONFIG", cp().kubeconfig("operator"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The first listing has begun (after the first read of the PVs): the PV goes.
    wait_for("scan's first listing", Duration::from_secs(60), || async {
        let (_, body) = http_get(&format!("{endpoint}/_fake/requests"))?;
        body.contains("zones/europe-west1-b/disks").then_some(())
    })
    .await;
    delete(&pvs, &name).await;
    wait_for("the PV to be gone", Duration::from_secs(30), || {
        let pvs = pvs.clone();
        let name = name.clone();
        async move { pvs.get_opt(&name).await.ok()?.is_none().then_some(()) }
    })
    .await;
    let out = scan.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let zone = volume_leftovers::census::gce::vocabulary::location(project, "europe-west1-b");
    assert!(
        line(&stdout, &disk_leftover_name(&zone, &disk)).is_none(),
        "the disk of a PV deleted during the listings is no leftover:\n{stdout}\n{stderr}"
    );
    // Other tests' volumes on the shared control plane may be findings (3); nothing unknown.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{:?}: {stdout}\n{stderr}",
        out.status
    );
}

// --- EBS -------------------------------------------------------------------------------------

/// moto's EC2 server with IAM users made from `docs/iam/ebs-census-policy.json`'s neighbours:
/// `admin` may do anything, `nobody` nothing; the server, its URL and each user's keys.
fn moto_with_users() -> Option<(Server, String, Value)> {
    let out = Command::new(repo().join("scripts/moto.sh"))
        .stderr(Stdio::inherit())
        .output();
    let server = match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        other => {
            unavailable("moto", &format!("scripts/moto.sh: {other:?}"));
            return None;
        }
    };
    let port = free_port();
    // The first 5 requests (the users and keys below) are not checked; every later one is.
    let child = Command::new(&server)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .env("INITIAL_NO_AUTH_ACTION_COUNT", "5")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let moto = Server {
        child,
        dir: scratch("moto"),
    };
    let url = format!("http://127.0.0.1:{port}");
    let until = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "moto did not listen within 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let script = r#"
import json, sys, boto3
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="x", aws_secret_access_key="x")
admin = json.dumps({"Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]})
out = {}
for user, policy in [("admin", admin), ("nobody", None)]:
    iam.create_user(UserName=user)
    if policy:
        iam.put_user_policy(UserName=user, PolicyName="p", PolicyDocument=policy)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    out[user] = [key["AccessKeyId"], key["SecretAccessKey"]]
print(json.dumps(out))
"#;
    let out = Command::new(server.with_file_name("python"))
        .args(["-c", script, &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((moto, url, serde_json::from_slice(&out.stdout).unwrap()))
}

/// Creates a volume in moto as `admin`, with these tags; its id.
fn create_volume(url: &str, admin: &Value, tags: &[(&str, &str)]) -> String {
    let script = r#"
import json, sys, boto3
ec2 = boto3.client("ec2", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3])
tags = [{"Key": k, "Value": v} for k, v in json.loads(sys.argv[4]).items()]
spec = [{"ResourceType": "volume", "Tags": tags}] if tags else []
print(ec2.create_volume(AvailabilityZone="us-east-1a", Size=8, VolumeType="gp3",
                        TagSpecifications=spec)["VolumeId"])
"#;
    let tags: serde_json::Map<String, Value> = tags
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    let server = String::from_utf8(
        Command::new(repo().join("scripts/moto.sh"))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let out = Command::new(Path::new(server.trim()).with_file_name("python"))
        .args([
            "-c",
            script,
            url,
            admin[0].as_str().unwrap(),
            admin[1].as_str().unwrap(),
            &Value::Object(tags).to_string(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reports_ebs_volumes_and_pvs_that_lost_each_other_and_exits_4_naming_a_forbidden_region()
 {
    let Some((moto, url, users)) = moto_with_users() else {
        return;
    };
    let admin_keys = &users["admin"];
    let unlabelled = create_volume(&url, admin_keys, &[]);
    let theirs = create_volume(
        &url,
        admin_keys,
        &[("kubernetes.io/cluster/another", "owned")],
    );
    let kept = create_volume(
        &url,
        admin_keys,
        &[
            ("kubernetes.io/cluster/e2e", "owned"),
            ("CSIVolumeName", "x"),
        ],
    );
    let admin = cp().admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    const DRIVER: &str = "ebs.csi.aws.com";
    let (ghost, named) = (unique("ebs-ghost"), unique("ebs-kept"));
    let volumes = [
        csi_pv(&ghost, DRIVER, "vol-0123456789abcdef0"),
        csi_pv(&named, DRIVER, &kept),
    ];
    ready(&pvs, &volumes).await;

    let config = format!(
        "clusterName: e2e\nebs:\n  - region: us-east-1\n    account: \"123456789012\"\n    endpoint: {url}\n"
    );
    let as_user = |keys: &Value| {
        scan(
            &config,
            &moto.dir,
            &[
                ("AWS_ACCESS_KEY_ID", keys[0].as_str().unwrap()),
                ("AWS_SECRET_ACCESS_KEY", keys[1].as_str().unwrap()),
                ("AWS_EC2_METADATA_DISABLED", "true"),
            ],
        )
    };
    let scope =
        volume_leftovers::census::ebs::vocabulary::region(Some("123456789012"), "us-east-1");

    let out = as_user(admin_keys);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(3), "leftovers found: {stderr}");
    let orphan = line(&stdout, &disk_leftover_name(&scope, &unlabelled))
        .unwrap_or_else(|| panic!("no line for {unlabelled}:\n{stdout}"));
    assert_eq!(orphan["reason"], "DiskWithoutVolume");
    assert_eq!(orphan["hints"], json!(["OwnerUnknown"]));
    assert_eq!(orphan["backend"], "ebs");
    assert_eq!(orphan["scope"], "ebs:123456789012/us-east-1");
    assert_eq!(
        (&orphan["account"], &orphan["region"]),
        (&json!("123456789012"), &json!("us-east-1"))
    );
    assert_eq!(orphan["disk_name"], json!(unlabelled));
    assert_eq!(orphan["disk_type"], "gp3");
    assert_eq!(orphan["size_bytes"], 8u64 << 30);
    let lost = line(&stdout, &ghost).unwrap_or_else(|| panic!("no line for {ghost}:\n{stdout}"));
    assert_eq!(lost["reason"], "VolumeWithoutDisk");
    assert_eq!(lost["scope"], "ebs:123456789012/us-east-1");
    for absent in [&theirs, &kept, &named] {
        assert!(
            !stdout.contains(absent.as_str()),
            "{absent} reported:\n{stdout}"
        );
    }

    // Keys without DescribeVolumes: 403, exit 4 naming the region; nothing said about it.
    let out = as_user(&users["nobody"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains("the EBS census of ebs:123456789012/us-east-1 failed (forbidden)"),
        "{stderr}"
    );
    assert!(
        !stdout.contains(&ghost) && !stdout.contains(&unlabelled),
        "nothing is said about an Unknown region:\n{stdout}"
    );
    for pv in [&ghost, &named] {
        delete(&pvs, pv).await;
    }
}
