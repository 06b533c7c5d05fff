//! Findings a ticketing system can trust, on the real control plane: states that only pass
//! through are never published, a store whose watch fails is never believed, and faults end in
//! one clear condition that recovers.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Namespace, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use volume_leftovers::model::crd::{Hint, Reason, Tristate, VolumeLeftover};
use volume_leftovers::model::labels::MANAGED_BY;
use volume_leftovers::run::settings::Settings;
use volume_leftovers::telemetry::{Kind, StoreState};

use crate::fault::{Fault, FaultProxy, Rule};
use crate::support::*;

/// A CSI volume of an external provisioner (nothing here deletes it unless the test does), its
/// class (Immediate) and a claim that the controller-manager binds.
async fn csi_claimed(client: &Client, prefix: &str, reclaim: &str) -> Claimed {
    let class_name = unique(&format!("{prefix}-sc"));
    let ns = unique(&format!("{prefix}-ns"));
    let pv_name = unique(&format!("{prefix}-pv"));
    let mut sc = class(&class_name, reclaim);
    sc.provisioner = "example.csi.leftovers.dev".into();
    create(&Api::<StorageClass>::all(client.clone()), &sc).await;
    create_ns(client, &ns).await;
    let mut volume = pv(&pv_name, &class_name, "1Gi", reclaim);
    volume.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_string(),
            "example.csi.leftovers.dev".to_string(),
        )]
        .into(),
    );
    let spec = volume.spec.as_mut().unwrap();
    spec.host_path = None;
    spec.csi = Some(CSIPersistentVolumeSource {
        driver: "example.csi.leftovers.dev".into(),
        volume_handle: format!("handle-{pv_name}"),
        ..Default::default()
    });
    create(&Api::<PersistentVolume>::all(client.clone()), &volume).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
    let claim = create(&claims, &pvc(&ns, "data", &class_name, "1Gi")).await;
    Claimed {
        pv: pv_name,
        ns,
        class: class_name,
        claim,
    }
}

/// Removes a bound volume made by `claimed_volume`: its claim first (a bound PV is held by its
/// protection finalizer), then the volume, its class and namespace.
async fn remove_claimed(client: &Client, c: &Claimed) {
    delete(
        &Api::<PersistentVolumeClaim>::namespaced(client.clone(), &c.ns),
        "data",
    )
    .await;
    cleanup(client, c).await;
}

async fn cleanup(client: &Client, c: &Claimed) {
    delete(&Api::<PersistentVolume>::all(client.clone()), &c.pv).await;
    delete(&Api::<StorageClass>::all(client.clone()), &c.class).await;
    delete(&Api::<Namespace>::all(client.clone()), &c.ns).await;
}

fn pending(reason: Reason) -> String {
    format!(
        r#"volume_leftovers_pending_findings{{reason="{}"}}"#,
        reason.as_str()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_dynamic_delete_is_never_a_finding() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let recorder = Recorder::start(admin.clone()).await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_synced().await;

    let c = csi_claimed(&admin, "dyn", "Delete").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    wait_pv_phase(&pvs, &c.pv, "Bound").await;
    delete(
        &Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &c.ns),
        "data",
    )
    .await;
    wait_pv_phase(&pvs, &c.pv, "Released").await;
    // The operator has seen it and holds it back (this is what makes the absence below mean
    // something).
    wait_metric(&operator.metrics, &pending(Reason::ClaimDeleted), |v| {
        v >= 1.0
    })
    .await;
    // The provisioner deletes it within its usual time, well inside the delete grace.
    tokio::time::sleep(Duration::from_secs(2)).await;
    delete(&pvs, &c.pv).await;
    wait_for("the PV to be gone", Duration::from_secs(30), || async {
        matches!(pvs.get_opt(&c.pv).await, Ok(None)).then_some(())
    })
    .await;
    wait_metric(&operator.metrics, &pending(Reason::ClaimDeleted), |v| {
        v == 0.0
    })
    .await;

    assert_eq!(
        recorder.of(&c.pv),
        vec![],
        "no VolumeLeftover at any moment"
    );
    assert_eq!(cp.operator_writes(&c.pv), 0, "not one write request");
    recorder.stop();
    operator.stop().await;
    cleanup(&admin, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_pre_bound_to_a_claim_that_never_comes_is_reported_after_the_grace() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let class_name = unique("pre-sc");
    let ns = unique("pre-ns");
    let pv_name = unique("pre-pv");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &class(&class_name, "Retain"),
    )
    .await;
    create_ns(&admin, &ns).await;
    // What the usual "reuse" patch leaves: a claimRef by name, no uid.
    let mut p = pv(&pv_name, &class_name, "1Gi", "Retain");
    p.spec.as_mut().unwrap().claim_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(ns.clone()),
        name: Some("later".into()),
        ..Default::default()
    });
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    create(&pvs, &p).await;
    wait_pv_phase(&pvs, &pv_name, "Available").await;

    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_synced().await;
    let synced = Instant::now();
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, &pv_name, "PreboundClaimMissing", |o| {
        reason(o) == Some(Reason::PreboundClaimMissing)
    })
    .await;
    let grace = test_settings().graces.grace;
    assert!(
        synced.elapsed() >= grace - Duration::from_millis(500),
        "published before the grace"
    );
    let s = vl.status.unwrap();
    assert_eq!(s.phase, "Available");
    let claim = s.claim.unwrap();
    assert_eq!(claim.missing, Tristate::True);
    assert_eq!(claim.uid, None);

    // The claim finally comes: the binder binds it and the finding clears.
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    create(&claims, &pvc(&ns, "later", &class_name, "1Gi")).await;
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    wait_leftover_gone(&leftovers, &pv_name).await;
    operator.stop().await;
    delete(&claims, "later").await;
    delete(&pvs, &pv_name).await;
    delete(&Api::<StorageClass>::all(admin.clone()), &class_name).await;
    delete(&Api::<Namespace>::all(admin), &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_being_deleted_says_so_and_what_holds_it() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let r = released_volume(&admin, "term", "Retain").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    wait_pv_phase(&pvs, &r.pv, "Released").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    // Someone's finalizer holds the volume; then it is deleted.
    pvs.patch(
        &r.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["leftovers.dev/test-hold"]}})),
    )
    .await
    .unwrap();
    delete(&pvs, &r.pv).await;
    let vl = wait_leftover(&leftovers, &r.pv, "VolumeTerminating", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.hints.contains(&Hint::VolumeTerminating))
    })
    .await;
    let m = vl.status.unwrap().message;
    assert!(
        m.contains("It is being deleted since") && m.contains("leftovers.dev/test-hold"),
        "{m}"
    );
    // The finalizer goes: the volume goes; its disk (Retain) stays, and the finding becomes its
    // tombstone, dated by the delete request, no longer saying it is being deleted.
    let requested = pvs
        .get(&r.pv)
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .unwrap();
    pvs.patch(
        &r.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    let vl = wait_leftover(&leftovers, &r.pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let s = vl.status.unwrap();
    assert_eq!(s.deleted_at, Some(requested));
    assert!(!s.hints.contains(&Hint::VolumeTerminating), "{:?}", s.hints);
    assert!(!s.message.contains("being deleted"), "{}", s.message);
    operator.stop().await;
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_claims_watch_never_yields_bound_claim_missing_and_turns_readyz_503() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let proxy = FaultProxy::start(cp).await;
    let recorder = Recorder::start(admin.clone()).await;
    let operator = Operator::start(proxy.operator_client(cp).await, test_settings());
    operator.wait_synced().await;

    // The claims watch dies and every claims request now fails.
    proxy.add(Rule::new(
        None,
        "/persistentvolumeclaims",
        Fault::Status(503),
    ));
    proxy.break_streams("/persistentvolumeclaims");
    wait_for(
        "the claim store to be degraded",
        Duration::from_secs(30),
        || {
            let s = operator.health.get(Kind::persistentvolumeclaims);
            async move { (s == StoreState::Degraded).then_some(()) }
        },
    )
    .await;

    // A new volume and claim are bound for real; the frozen claim cache lacks the claim.
    let c = claimed_volume(&admin, "frozen", "Retain").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    wait_pv_phase(&pvs, &c.pv, "Bound").await;
    // The operator evaluated it and could not decide.
    wait_metric(
        &operator.metrics,
        "volume_leftovers_undecided_volumes",
        |v| v >= 1.0,
    )
    .await;
    let (ready, report) = operator.health.report();
    assert!(!ready, "{report}");
    assert!(
        report.contains("persistentvolumeclaims: Degraded") && report.contains("stale"),
        "names the store: {report}"
    );
    assert!(report.contains("503"), "and the error: {report}");
    // Well past the grace: still nothing.
    tokio::time::sleep(test_settings().graces.grace + Duration::from_secs(2)).await;
    assert_eq!(
        recorder.of(&c.pv),
        vec![],
        "no BoundClaimMissing from a stale cache"
    );

    // The server answers again: the store relists, the volume is decided healthy.
    proxy.clear();
    operator.wait_synced().await;
    wait_metric(
        &operator.metrics,
        "volume_leftovers_undecided_volumes",
        |v| v == 0.0,
    )
    .await;
    assert!(operator.health.report().0);
    assert_eq!(recorder.of(&c.pv), vec![]);
    assert!(
        proxy.faulted("/persistentvolumeclaims") >= 1,
        "the fault was exercised"
    );
    recorder.stop();
    operator.stop().await;
    remove_claimed(&admin, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silently_stalled_claims_watch_is_noticed_before_the_grace_publishes_from_it() {
    // A watch that falls silent (no error, the connection open: a stuck load balancer) keeps
    // the store looking synced. kube-runtime takes a watch silent for its timeout + 5 s as dead
    // and resumes it from its last version, which replays what it missed; the grace must be
    // longer than that (`cli::silent_watch_bound`, as the defaults are: cli tests), or a claim
    // the silent cache lacks would become a false BoundClaimMissing.
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let proxy = FaultProxy::start(cp).await;
    let recorder = Recorder::start(admin.clone()).await;
    let mut settings = test_settings();
    settings.watch_timeout = 10;
    let bound = volume_leftovers::run::cli::silent_watch_bound(Duration::from_secs(10));
    settings.graces.grace = bound + Duration::from_secs(15);
    let client = proxy.operator_client_for(cp, Duration::from_secs(10)).await;
    let operator = Operator::start(client, settings.clone());
    operator.wait_synced().await;
    let claims = "/persistentvolumeclaims";
    let watches = proxy.count(Some("watch"), claims);
    let relists = r#"volume_leftovers_relists_total{resource="persistentvolumeclaims"}"#;
    let listed = metric(&operator.metrics, relists);

    proxy.freeze_streams(claims);
    let frozen = Instant::now();
    // A new volume and claim are bound for real; the silent claim cache lacks the claim, and
    // the operator holds a BoundClaimMissing for it in the grace: the danger is real.
    let c = claimed_volume(&admin, "silent", "Retain").await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    wait_pv_phase(&pvs, &c.pv, "Bound").await;
    wait_metric(
        &operator.metrics,
        &pending(Reason::BoundClaimMissing),
        |v| v >= 1.0,
    )
    .await;
    // The silence is noticed within the bound: the watch is resumed and brings the claim.
    wait_metric(
        &operator.metrics,
        &pending(Reason::BoundClaimMissing),
        |v| v == 0.0,
    )
    .await;
    let noticed = frozen.elapsed();
    assert!(
        noticed >= Duration::from_secs(10) && noticed < settings.graces.grace,
        "noticed after {noticed:?}; the bound is {bound:?}, the grace {:?}",
        settings.graces.grace
    );
    assert!(
        proxy.count(Some("watch"), claims) > watches,
        "a new watch request resumed the stream"
    );
    assert_eq!(
        metric(&operator.metrics, relists),
        listed,
        "resumed from its version, not relisted"
    );
    operator.wait_idle().await;
    // Past the time the grace would have published it: nothing, at any moment.
    let until = settings.graces.grace + Duration::from_secs(2);
    if let Some(rest) = until.checked_sub(frozen.elapsed()) {
        tokio::time::sleep(rest).await;
    }
    operator.wait_idle().await;
    assert_eq!(
        recorder.of(&c.pv),
        vec![],
        "no BoundClaimMissing from a silent cache"
    );
    recorder.stop();
    operator.stop().await;
    remove_claimed(&admin, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_write_is_abandoned_and_retried_and_the_finding_lands() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let proxy = FaultProxy::start(cp).await;
    // The first create hangs (never reaches the server); the second is slow and reaches the
    // server after the operator gave up on it (then the retry meets "already exists").
    proxy.add(Rule::new(Some("create"), "/volumeleftovers", Fault::Hang).times(1));
    proxy.add(
        Rule::new(
            Some("create"),
            "/volumeleftovers",
            Fault::Delay(Duration::from_secs(5)),
        )
        .times(1),
    );
    // One slot: a slot the abandoned write kept would stop every later write (at 4, three
    // leaked slots would go unnoticed).
    let settings = Settings {
        concurrency: 1,
        ..test_settings()
    };
    let operator = Operator::start(proxy.operator_client(cp).await, settings);
    operator.wait_synced().await;
    let r = released_volume(&admin, "hung", "Retain").await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    assert!(vl.status.is_some());
    let timeouts = metric(
        &operator.metrics,
        r#"volume_leftovers_writes_total{op="create",result="timeout"}"#,
    );
    assert!(timeouts >= 1.0, "{}", operator.metrics.encode());
    assert_eq!(proxy.faulted("/volumeleftovers"), 2, "both faults were hit");
    // The slot was freed: another finding meanwhile lands promptly.
    let r2 = released_volume(&admin, "after-hung", "Retain").await;
    wait_leftover(&leftovers, &r2.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    operator.stop().await;
    r.cleanup(&admin).await;
    r2.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_refused_by_someone_elses_new_object_leaves_it_alone_and_loses_nothing() {
    // Between the operator's decision and its create reaching the server, another client
    // creates an object of the same name (the store has not seen it): the create is answered
    // 409. The operator must not take that object for its own (it is not labelled as the
    // operator's), must not count it, and must publish its finding once the name is free.
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let proxy = FaultProxy::start(cp).await;
    proxy.add(
        Rule::new(
            Some("create"),
            "/volumeleftovers",
            Fault::Delay(Duration::from_secs(4)),
        )
        .times(1),
    );
    // The delayed create is answered, not abandoned.
    let settings = Settings {
        request_timeout: Duration::from_secs(15),
        ..test_settings()
    };
    let operator = Operator::start(proxy.operator_client(cp).await, settings);
    operator.wait_synced().await;
    let r = released_volume(&admin, "raced", "Retain").await;
    wait_for(
        "the operator's create to be held by the proxy",
        Duration::from_secs(60),
        || async { (proxy.faulted("/volumeleftovers") == 1).then_some(()) },
    )
    .await;
    let mut theirs = VolumeLeftover::new(
        &r.pv,
        volume_leftovers::model::crd::VolumeLeftoverSpec {
            volume_name: r.pv.clone(),
            volume_uid: "made-by-someone-else".into(),
            acknowledgement: None,
        },
    );
    theirs.metadata.labels = Some([("team".to_string(), "storage".to_string())].into());
    let theirs = create(&leftovers, &theirs).await;
    wait_metric(
        &operator.metrics,
        r#"volume_leftovers_writes_total{op="create",result="outdated"}"#,
        |v| v >= 1.0,
    )
    .await;
    operator.wait_idle().await;
    let creates: Vec<i64> = cp
        .audit()
        .iter()
        .filter(|e| {
            e["user"]["username"] == OPERATOR_USER
                && e["objectRef"]["resource"] == "volumeleftovers"
                && e["verb"] == "create"
                && e["stage"] == "ResponseComplete"
                && e["objectRef"]["name"] == r.pv.as_str()
        })
        .filter_map(|e| e["responseStatus"]["code"].as_i64())
        .collect();
    assert_eq!(creates, vec![409], "one create, answered 409");
    assert_eq!(cp.operator_writes(&r.pv), 1, "nothing but that create");
    let still = leftovers.get(&r.pv).await.unwrap();
    assert_eq!(
        still.resource_version(),
        theirs.resource_version(),
        "never touched"
    );
    assert!(still.status.is_none());
    assert_eq!(
        metric_or_zero(
            &operator.metrics,
            &format!(
                r#"volume_leftovers_findings{{reason="ClaimDeleted",storage_class="{}",state="Open"}}"#,
                r.class
            )
        ),
        0.0,
        "someone else's object is not counted as a finding"
    );
    // Its owner removes it: the finding it stood in the way of is published, once.
    delete(&leftovers, &r.pv).await;
    let vl = wait_leftover(&leftovers, &r.pv, "the operator's own ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
            && o.labels().get(MANAGED_BY).map(String::as_str) == Some("volume-leftovers")
    })
    .await;
    assert_ne!(vl.uid(), theirs.uid());
    operator.wait_idle().await;
    assert_eq!(
        metric(
            &operator.metrics,
            &format!(
                r#"volume_leftovers_findings{{reason="ClaimDeleted",storage_class="{}",state="Open"}}"#,
                r.class
            )
        ),
        1.0
    );
    assert_eq!(
        cp.operator_writes(&r.pv),
        3,
        "the refused create, then a create and its status"
    );
    operator.stop().await;
    r.cleanup(&admin).await;
}

/// A ValidatingAdmissionPolicy that refuses every create and update of VolumeLeftovers.
async fn freeze_leftovers(admin: &Client, name: &str) {
    let policy = ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec!["leftovers.dev".into()]),
                    api_versions: Some(vec!["*".into()]),
                    resources: Some(vec!["volumeleftovers".into()]),
                    operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            validations: Some(vec![Validation {
                expression: "false".into(),
                message: Some("VolumeLeftovers are frozen by a test policy".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    create(&Api::all(admin.clone()), &policy).await;
    let binding = ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name.into()),
            validation_actions: Some(vec!["Deny".into()]),
            ..Default::default()
        }),
    };
    create(&Api::all(admin.clone()), &binding).await;
    // Policies take a moment to load: wait until an admin create is refused.
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let probe = unique("freeze-probe");
    wait_for(
        "the policy to refuse writes",
        Duration::from_secs(30),
        || async {
            let o = VolumeLeftover::new(
                &probe,
                volume_leftovers::model::crd::VolumeLeftoverSpec {
                    volume_name: probe.clone(),
                    volume_uid: "x".into(),
                    acknowledgement: None,
                },
            );
            match leftovers.create(&Default::default(), &o).await {
                Err(_) => Some(()),
                Ok(_) => {
                    delete(&leftovers, &probe).await;
                    None
                }
            }
        },
    )
    .await;
}

/// Deletes a freeze policy and its binding when dropped (a test that fails before it thaws).
struct Thaw {
    cp: &'static ControlPlane,
    name: String,
}

impl Drop for Thaw {
    fn drop(&mut self) {
        let _ = self.cp.kubectl(&[
            "delete",
            "validatingadmissionpolicybinding,validatingadmissionpolicy",
            &self.name,
            "--ignore-not-found",
            "--wait=false",
        ]);
    }
}

async fn thaw_leftovers(admin: &Client, name: &str) {
    delete(
        &Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone()),
        name,
    )
    .await;
    delete(&Api::<ValidatingAdmissionPolicy>::all(admin.clone()), name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_rejecting_every_write_is_one_condition_logged_once_and_recovers() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let policy = unique("freeze");
    freeze_leftovers(&admin, &policy).await;
    // Should this test fail before it thaws, the policy must not stay behind: every other test on
    // this control plane would find its writes refused.
    let _thaw = Thaw {
        cp,
        name: policy.clone(),
    };

    let port = free_port();
    let log = cp.dir.join(format!("{policy}.log"));
    let child = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args([
            "run",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--resync",
            "2s",
            "--request-timeout",
            "3s",
        ])
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running(child);

    let volumes: Vec<Released> = {
        let mut v = Vec::new();
        for i in 0..4 {
            v.push(released_volume(&admin, &format!("frozen{i}"), "Retain").await);
        }
        v
    };
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    let ready = format!("http://127.0.0.1:{port}/readyz");
    wait_for("writes to be blocked", Duration::from_secs(60), || async {
        http_get(&metrics).filter(|(_, b)| b.contains("volume_leftovers_writes_blocked 1"))
    })
    .await;
    let (code, body) = http_get(&ready).unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("writes: blocked") && body.contains("frozen by a test policy"),
        "{body}"
    );
    // While blocked, findings are decided again (their retries and the probes; the sweeps every
    // 2 s mark the parked ones, which wait for a probe): at least one decision per finding and
    // three sweeps' time pass before the log is read. (Three decisions per finding took from 20
    // to over 60 s, the probes' backoff growing: too slow to wait for.)
    let decisions = |m: &str| {
        m.lines()
            .find(|l| l.starts_with("volume_leftovers_decisions_total "))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let blocked_at = Instant::now();
    let start = decisions(&http_get(&metrics).unwrap().1);
    wait_for(
        "every finding decided again while blocked",
        Duration::from_secs(60),
        || async {
            let now = decisions(&http_get(&metrics)?.1);
            (now >= start + volumes.len() as f64).then_some(())
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(7).saturating_sub(blocked_at.elapsed())).await;
    let text = std::fs::read_to_string(&log).unwrap();
    let condition = text.matches("failing as a whole").count();
    let per_finding = text.matches("write failed; retrying").count();
    assert_eq!(condition, 1, "one line for the condition:\n{text}");
    assert!(
        per_finding <= 3,
        "no warning per finding per sweep ({per_finding}):\n{text}"
    );

    thaw_leftovers(&admin, &policy).await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    for v in &volumes {
        wait_leftover(&leftovers, &v.pv, "published after recovery", |o| {
            reason(o) == Some(Reason::ClaimDeleted)
        })
        .await;
    }
    wait_for("/readyz to turn 200", Duration::from_secs(30), || async {
        http_get(&ready).filter(|(c, _)| *c == 200)
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text.matches("work again").count(), 1, "{text}");
    running.stop();
    for v in &volumes {
        delete(&leftovers, &v.pv).await;
        v.cleanup(&admin).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crd_deleted_while_running_turns_readyz_503_and_findings_come_back_with_their_first_seen()
 {
    // Its own control plane: deleting the CRD would disturb every other test.
    let cp = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let admin = cp.admin().await;
    let r = released_volume(&admin, "crd", "Retain").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let before = wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let first_seen = before.status.unwrap().first_seen;

    cp.kubectl_ok(&[
        "delete",
        "crd",
        "volumeleftovers.leftovers.dev",
        "--wait=true",
    ])
    .unwrap();
    let report = wait_for("/readyz to name the fix", Duration::from_secs(60), || {
        let (ready, report) = operator.health.report();
        async move { (!ready && report.contains("kubectl apply -f crds/")).then_some(report) }
    })
    .await;
    assert!(report.contains("volumeleftovers:"), "{report}");

    cp.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("crds/volumeleftovers.yaml").to_str().unwrap(),
    ])
    .unwrap();
    let applied = Instant::now();
    let after = wait_leftover(&leftovers, &r.pv, "back", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    assert!(
        applied.elapsed() < Duration::from_secs(20),
        "back within seconds, not at the next resync: {:?}",
        applied.elapsed()
    );
    assert_eq!(
        after.status.unwrap().first_seen,
        first_seen,
        "the original firstSeen, from the volume's phase transition time"
    );
    wait_for("ready again", Duration::from_secs(30), || {
        let ok = operator.health.report().0;
        async move { ok.then_some(()) }
    })
    .await;
    operator.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_api_server_is_retried_with_backoff_not_a_log_flood() {
    // Once the server answers, this operator writes like any other: one at a time.
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let proxy = proxy_to(cp).await;
    proxy.cut();
    let kubeconfig = kubeconfig_via(cp, "operator", &format!("https://{}", proxy.addr));
    let port = free_port();
    let log = cp.dir.join(format!("{}.log", unique("dead")));
    let child = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let mut running = Running(child);
    tokio::time::sleep(Duration::from_secs(20)).await;
    let text = std::fs::read_to_string(&log).unwrap();
    let lines = text.lines().count();
    // One line per store when it starts failing, a few for start-up; the old behaviour was about
    // one line per store per second (80 here).
    assert!(lines <= 12, "{lines} lines in 20 s:\n{text}");
    let attempts = proxy.accepted();
    assert!(
        attempts <= 40,
        "{attempts} connection attempts in 20 s: the retries back off"
    );
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let (code, body) = http_get(&ready).unwrap();
    assert_eq!(code, 503, "{body}");
    proxy.resume();
    wait_for("/readyz to turn 200", Duration::from_secs(60), || async {
        http_get(&ready).filter(|(c, _)| *c == 200)
    })
    .await;
    running.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_never_waits_on_a_hung_write_past_its_bound() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let proxy = FaultProxy::start(cp).await;
    proxy.add(Rule::new(Some("create"), "/volumeleftovers", Fault::Hang));
    let settings = volume_leftovers::run::settings::Settings {
        // Longer than the shutdown bound: only the bound can end the wait.
        request_timeout: Duration::from_secs(60),
        ..test_settings()
    };
    let grace = settings.shutdown_grace;
    let operator = Operator::start(proxy.operator_client(cp).await, settings);
    operator.wait_synced().await;
    let r = released_volume(&admin, "stuck", "Retain").await;
    wait_metric(
        &operator.metrics,
        "volume_leftovers_writes_in_flight",
        |v| v >= 1.0,
    )
    .await;
    let start = Instant::now();
    operator.stop().await;
    let took = start.elapsed();
    assert!(
        took >= grace - Duration::from_millis(200) && took < grace + Duration::from_secs(3),
        "stopped after {took:?}; the bound is {grace:?}"
    );
    r.cleanup(&admin).await;
}
