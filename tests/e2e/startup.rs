//! The binary as people run it: missing CRD at start-up, readiness, metrics, SIGTERM; and an
//! identity that may not read claims.

use std::process::{Command, Stdio};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::ObjectMeta;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use volume_leftovers::model::crd::{Reason, Tristate, VolumeLeftover};
use volume_leftovers::telemetry::{Kind, StoreState};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crd_the_operator_waits_unready_then_recovers_and_stops_on_sigterm() {
    let cp = ControlPlane::start_bare(Flavor::Full);
    // `scan` needs no CRD; on a cluster without leftovers it prints nothing and exits 0.
    let scan = |format: &str| {
        Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
            .args(["scan", "-o", format])
            .env("KUBECONFIG", cp.kubeconfig("operator"))
            .output()
            .unwrap()
    };
    let out = scan("jsonl");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
    let out = scan("table");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "NAME",
            "REASON",
            "PHASE",
            "RECLAIM",
            "CLAIM",
            "CLAIM-MISSING",
            "CLASS",
            "CAPACITY"
        ]
    );

    let port = free_port();
    let log = cp.dir.join("operator-binary.log");
    let child = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    let ready = format!("http://127.0.0.1:{port}/readyz");

    let (code, body) = wait_for("/readyz to answer", Duration::from_secs(30), || async {
        http_get(&ready).filter(|(_, b)| {
            b.contains("volumeleftovers: Pending") && b.contains("kubectl apply -f crds/")
        })
    })
    .await;
    assert_eq!(code, 503, "not ready without the CRD: {body}");
    // It has failed to list VolumeLeftovers, and tried again: still the same process.
    let failures = || {
        let (_, metrics) = http_get(&format!("http://127.0.0.1:{port}/metrics"))?;
        Some(
            metrics
                .lines()
                .filter(|l| {
                    l.starts_with(
                        r#"volume_leftovers_watch_errors_total{resource="volumeleftovers","#,
                    )
                })
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>(),
        )
    };
    wait_for(
        "a second failed list of VolumeLeftovers",
        Duration::from_secs(30),
        || async { failures().filter(|n| *n >= 2.0) },
    )
    .await;
    assert!(
        running.0.try_wait().unwrap().is_none(),
        "no crash loop: the process keeps retrying"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("kubectl apply -f crds/volumeleftovers.yaml"),
        "the log names the fix:\n{text}"
    );
    assert_eq!(
        http_get(&format!("http://127.0.0.1:{port}/healthz"))
            .unwrap()
            .0,
        200
    );

    cp.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("crds/volumeleftovers.yaml").to_str().unwrap(),
    ])
    .unwrap();
    let (code, body) = wait_for("/readyz to turn 200", Duration::from_secs(90), || async {
        http_get(&ready).filter(|(c, _)| *c == 200)
    })
    .await;
    assert_eq!(code, 200, "{body}");
    let (_, metrics) = http_get(&format!("http://127.0.0.1:{port}/metrics")).unwrap();
    assert!(
        metrics.contains(r#"volume_leftovers_store_state{resource="volumeleftovers"} 1"#),
        "{metrics}"
    );

    // SIGTERM: a clean, prompt exit.
    let pid = running.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_for("exit after SIGTERM", Duration::from_secs(15), || {
        let s = running.0.try_wait().unwrap();
        async move { s }
    })
    .await;
    assert!(status.success(), "exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_claims_are_forbidden_claim_missing_is_unknown_never_true() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    // Everything deploy/ grants except claims.
    let role_name = unique("no-claims");
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| PolicyRule {
        api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
        resources: Some(resources.iter().map(|s| s.to_string()).collect()),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..PolicyRule::default()
    };
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            ..ObjectMeta::default()
        },
        rules: Some(vec![
            rule(&[""], &["persistentvolumes"], &["get", "list", "watch"]),
            rule(
                &["storage.k8s.io"],
                &["storageclasses"],
                &["get", "list", "watch"],
            ),
            rule(
                &["leftovers.dev"],
                &["volumeleftovers", "volumeleftovers/status"],
                &["get", "list", "watch", "create", "patch", "delete"],
            ),
        ]),
        ..ClusterRole::default()
    };
    create(&Api::<ClusterRole>::all(admin.clone()), &role).await;
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(role_name.clone()),
            ..ObjectMeta::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role_name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: RESTRICTED_USER.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Subject::default()
        }]),
    };
    create(&Api::<ClusterRoleBinding>::all(admin.clone()), &binding).await;

    let r = released_volume(&admin, "denied", "Retain").await;
    wait_pv_phase(
        &Api::<PersistentVolume>::all(admin.clone()),
        &r.pv,
        "Released",
    )
    .await;

    // Every status the object ever shows, from an admin watch that has listed before the
    // operator starts (so nothing it writes is missed).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let (listed_tx, listed) = tokio::sync::oneshot::channel();
    let pv_name = r.pv.clone();
    let watch = {
        let admin = admin.clone();
        tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            let mut s = watcher(
                Api::<VolumeLeftover>::all(admin),
                watcher::Config::default(),
            )
            .boxed();
            while let Some(Ok(ev)) = s.next().await {
                match ev {
                    watcher::Event::InitDone => {
                        if let Some(t) = listed_tx.take() {
                            let _ = t.send(());
                        }
                    }
                    watcher::Event::Apply(o) | watcher::Event::InitApply(o)
                        if o.name_any() == pv_name =>
                    {
                        let _ = tx.send(o);
                    }
                    _ => {}
                }
            }
        })
    };
    tokio::time::timeout(Duration::from_secs(30), listed)
        .await
        .expect("the admin watch to list within 30 s")
        .expect("the admin watch to keep running");

    let operator = Operator::start(cp.client("restricted").await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, &r.pv, "ClaimUnknown", |o| {
        o.status.as_ref().map(|s| s.reason) == Some(Reason::ClaimUnknown)
    })
    .await;
    let claim = vl.status.unwrap().claim.unwrap();
    assert_eq!(claim.missing, Tristate::Unknown, "a 403 is not a 404");
    assert_eq!(claim.uid.as_deref(), Some(r.claim_uid.as_str()));
    assert_eq!(
        operator.health.get(Kind::persistentvolumeclaims),
        StoreState::Forbidden
    );
    let (ready, report) = operator.health.report();
    assert!(!ready, "unready while claims are forbidden");
    assert!(
        report.contains("persistentvolumeclaims: Forbidden"),
        "{report}"
    );

    // The one-shot scan says the same: null, not true.
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .arg("scan")
        .env("KUBECONFIG", cp.kubeconfig("restricted"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "a distinct exit code: the census is incomplete"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the census is incomplete")
            && stderr.contains("list persistentvolumeclaims"),
        "{stderr}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&format!(r#"{{"name": "{}","#, r.pv)))
        .unwrap_or_else(|| panic!("no line for {} in\n{stdout}", r.pv));
    assert!(line.contains(r#""claim_missing": null"#), "{line}");

    operator.stop().await;
    watch.abort();
    while let Ok(o) = rx.try_recv() {
        let missing = o.status.and_then(|s| s.claim).map(|c| c.missing);
        assert_ne!(
            missing,
            Some(Tristate::True),
            "claimMissing was True at some moment"
        );
    }
    delete(&leftovers, &r.pv).await;
    r.cleanup(&admin).await;
    delete(&Api::<ClusterRoleBinding>::all(admin.clone()), &role_name).await;
    delete(&Api::<ClusterRole>::all(admin), &role_name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_outage_at_startup_keeps_the_operator_unready_until_the_server_answers() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let proxy = proxy_to(cp).await;
    proxy.cut();
    let operator = Operator::start(operator_client_through(cp, &proxy).await, test_settings());

    // Every store has tried and failed at least once.
    wait_for("every store to fail", Duration::from_secs(30), || {
        let failed = Kind::ALL
            .iter()
            .all(|k| operator.health.store(*k).error.is_some());
        async move { failed.then_some(()) }
    })
    .await;
    let (ready, report) = operator.health.report();
    assert!(!ready, "{report}");
    for k in Kind::ALL {
        assert_eq!(operator.health.get(k), StoreState::Pending, "{report}");
    }
    assert!(
        report.contains("persistentvolumes: Pending for") && report.contains('('),
        "the error is shown: {report}"
    );

    proxy.resume();
    operator.wait_synced().await;
    assert!(operator.health.report().0);
    operator.stop().await;
}

#[test]
fn scan_errors_are_one_line_naming_the_server_and_the_cause() {
    let cp = cp();
    let scan = |kubeconfig: &std::path::Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
            .arg("scan")
            .env("KUBECONFIG", kubeconfig)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            out.stdout.is_empty(),
        )
    };
    let one_line = |stderr: &str| {
        assert_eq!(stderr.lines().count(), 1, "one line:\n{stderr}");
        assert!(
            stderr.starts_with("volume-leftovers scan: cannot "),
            "{stderr}"
        );
    };

    // Nothing listens there.
    let port = free_port();
    let refused = kubeconfig_via(cp, "operator", &format!("https://127.0.0.1:{port}"));
    let (code, stderr, empty) = scan(&refused);
    assert_eq!(code, Some(1));
    assert!(empty);
    one_line(&stderr);
    assert!(
        stderr.contains(&format!("https://127.0.0.1:{port}")) && stderr.contains("refused"),
        "{stderr}"
    );

    // A token the server does not know.
    let text = std::fs::read_to_string(cp.kubeconfig("operator")).unwrap();
    let bogus = cp.dir.join(format!("{}.kubeconfig", unique("bogus")));
    let token_line = text.lines().find(|l| l.contains("token:")).unwrap();
    std::fs::write(&bogus, text.replace(token_line, "    token: not-a-token")).unwrap();
    let (code, stderr, _) = scan(&bogus);
    assert_eq!(code, Some(1));
    one_line(&stderr);
    assert!(stderr.contains("401"), "{stderr}");
    assert!(
        stderr.contains("the credentials of the kubeconfig's user"),
        "names whose credentials were rejected: {stderr}"
    );

    // A CA that did not sign the server's certificate.
    let wrong_ca = cp.dir.join(format!("{}.kubeconfig", unique("wrong-ca")));
    let ca_line = text
        .lines()
        .find(|l| l.contains("certificate-authority:"))
        .unwrap();
    std::fs::write(
        &wrong_ca,
        text.replace(
            ca_line,
            "    certificate-authority: /etc/ssl/certs/ca-certificates.crt",
        ),
    )
    .unwrap();
    let (code, stderr, _) = scan(&wrong_ca);
    assert_eq!(code, Some(1));
    one_line(&stderr);
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");

    // An identity that may read nothing: claims and classes are tolerated, PVs are not.
    let (code, stderr, _) = scan(&cp.kubeconfig("restricted"));
    assert_eq!(code, Some(1));
    one_line(&stderr);
    assert!(
        stderr.contains("cannot list persistentvolumes")
            && stderr.contains("403")
            && stderr.contains("vl-restricted"),
        "names the identity: {stderr}"
    );
}
