//! States no controller would keep, written as admin on the quiet control plane (no PV binder, no
//! garbage collector, no watch cache), and a real 410 after an etcd compaction.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use kube::{Api, ResourceExt};
use volume_leftovers::model::crd::{Reason, Tristate, VolumeLeftover};
use volume_leftovers::telemetry::{Kind, StoreState};

use crate::support::*;

/// A PV with no class whose claimRef names `ns/name` with `uid`, in `phase`.
async fn pv_in_phase(
    api: &Api<PersistentVolume>,
    name: &str,
    claim: Option<(&str, &str, &str)>,
    phase: &str,
) {
    let mut p = pv(name, "", "1Gi", "Retain");
    let spec = p.spec.as_mut().unwrap();
    spec.storage_class_name = None;
    spec.claim_ref = claim.map(|(ns, n, uid)| claim_ref(ns, n, uid));
    create(api, &p).await;
    set_pv_phase(api, name, phase).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_claim_missing_is_published_only_after_the_grace_period() {
    let lease = lease(Flavor::Quiet).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let ns = unique("bound-ns");
    create_ns(&admin, &ns).await;
    // A healthy pair: the claim exists with the uid the PV names.
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let present = create(&claims, &pvc(&ns, "present", "", "1Gi")).await;
    let healthy = unique("bound-ok");
    pv_in_phase(
        &pvs,
        &healthy,
        Some((&ns, "present", &present.uid().unwrap())),
        "Bound",
    )
    .await;
    let lying = unique("bound-missing");
    pv_in_phase(&pvs, &lying, Some((&ns, "gone", "3b1c-gone")), "Bound").await;

    let settings = test_settings();
    let grace = settings.graces.grace;
    let operator = Operator::start(cp.operator_client().await, settings);
    operator.wait_synced().await;
    let synced_at = Instant::now();
    let vl = wait_leftover(&leftovers, &lying, "BoundClaimMissing", |o| {
        reason(o) == Some(Reason::BoundClaimMissing)
    })
    .await;
    assert!(
        synced_at.elapsed() >= grace - Duration::from_millis(500),
        "published after {:?}, before the grace period of {grace:?}",
        synced_at.elapsed()
    );
    let claim = vl.status.unwrap().claim.unwrap();
    assert_eq!(claim.missing, Tristate::True);
    assert_eq!(claim.uid.as_deref(), Some("3b1c-gone"));
    assert!(
        leftovers.get_opt(&healthy).await.unwrap().is_none(),
        "a Bound PV whose claim exists is healthy"
    );

    // Deleting a Bound PV only marks it terminating (pv-protection keeps it while Bound): it
    // still exists, so it is still reported, and says what holds it.
    delete(&pvs, &lying).await;
    let vl = wait_leftover(&leftovers, &lying, "VolumeTerminating", |o| {
        o.status.as_ref().is_some_and(|s| {
            s.hints
                .contains(&volume_leftovers::model::crd::Hint::VolumeTerminating)
        })
    })
    .await;
    assert!(
        vl.status
            .unwrap()
            .message
            .contains("held by finalizer kubernetes.io/pv-protection"),
    );
    // Once it is no longer Bound, pv-protection lets it go. Its reclaim policy was Retain: its
    // disk is left, and the finding becomes the disk's last record, dated by the delete request.
    set_pv_phase(&pvs, &lying, "Available").await;
    wait_for("the PV to be gone", Duration::from_secs(30), || async {
        matches!(pvs.get_opt(&lying).await, Ok(None)).then_some(())
    })
    .await;
    let vl = wait_leftover(&leftovers, &lying, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let s = vl.status.unwrap();
    assert!(s.deleted_at.is_some());
    assert!(
        !s.hints
            .contains(&volume_leftovers::model::crd::Hint::VolumeTerminating),
        "{:?}",
        s.hints
    );
    operator.stop().await;
    delete(&pvs, &healthy).await;
    delete(&Api::<Namespace>::all(admin), &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_without_claim_and_claim_still_present_are_reported() {
    let lease = lease(Flavor::Quiet).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let ns = unique("still-ns");
    create_ns(&admin, &ns).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let claim = create(&claims, &pvc(&ns, "data", "", "1Gi")).await;
    let still = unique("still");
    pv_in_phase(
        &pvs,
        &still,
        Some((&ns, "data", &claim.uid().unwrap())),
        "Released",
    )
    .await;
    let bare = unique("bare");
    pv_in_phase(&pvs, &bare, None, "Released").await;

    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_synced().await;
    let synced = Instant::now();
    let grace = test_settings().graces.grace;
    // Both are states that normally only pass through: held for the grace period first.
    wait_metric(
        &operator.metrics,
        r#"volume_leftovers_pending_findings{reason="ReleasedWithoutClaim"}"#,
        |v| v >= 1.0,
    )
    .await;
    let vl = wait_leftover(&leftovers, &still, "ClaimStillPresent", |o| {
        reason(o) == Some(Reason::ClaimStillPresent)
    })
    .await;
    assert_eq!(vl.status.unwrap().claim.unwrap().missing, Tristate::False);
    let vl = wait_leftover(&leftovers, &bare, "ReleasedWithoutClaim", |o| {
        reason(o) == Some(Reason::ReleasedWithoutClaim)
    })
    .await;
    assert!(
        synced.elapsed() >= grace - Duration::from_millis(500),
        "ReleasedWithoutClaim published after {:?}, before the grace of {grace:?}",
        synced.elapsed()
    );
    let created = vl.metadata.creation_timestamp.clone().unwrap();
    assert!(vl.status.unwrap().claim.is_none());
    let still_vl = leftovers.get(&still).await.unwrap();
    let since = still_vl
        .status
        .as_ref()
        .and_then(|s| s.phase_since.clone())
        .expect("phaseSince");
    let still_created = still_vl.metadata.creation_timestamp.clone().unwrap();
    assert!(
        still_created.0.duration_since(since.0) >= jiff::SignedDuration::try_from(grace).unwrap(),
        "ClaimStillPresent created {still_created:?}, Released since {since:?}: inside the grace"
    );
    let _ = created;

    // The claim's delete lands: the same finding becomes ClaimDeleted.
    delete(&claims, "data").await;
    wait_leftover(
        &leftovers,
        &still,
        "ClaimDeleted after the claim is gone",
        |o| reason(o) == Some(Reason::ClaimDeleted),
    )
    .await;
    // Someone makes the bare one Available: the finding clears.
    set_pv_phase(&pvs, &bare, "Available").await;
    wait_leftover_gone(&leftovers, &bare).await;

    // The PV is deleted: its reclaim policy was Retain, so its disk outlives it and the finding
    // becomes the disk's last record.
    delete(&pvs, &still).await;
    let vl = wait_leftover(&leftovers, &still, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let s = vl.status.unwrap();
    assert_eq!(s.claim.unwrap().name.as_deref(), Some("data"));
    assert!(
        s.message
            .contains(&format!("the hostPath storage at /mnt/data/{still}")),
        "{}",
        s.message
    );
    operator.stop().await;
    delete(&pvs, &bare).await;
    delete(&Api::<Namespace>::all(admin), &ns).await;
}

/// Revision of etcd now, through its gRPC gateway.
fn etcd(cp: &ControlPlane, path: &str, body: &str) -> serde_json::Value {
    let url = format!("{}{path}", cp.env_value("ETCD_URL"));
    let out = std::process::Command::new("curl")
        .args(["-fsS", "-X", "POST", "-d", body, &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "etcd {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_after_410_clears_findings_whose_volume_vanished_in_the_gap_and_keeps_tombstones()
{
    let lease = lease(Flavor::Quiet).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vanishing = unique("vanish");
    pv_in_phase(
        &pvs,
        &vanishing,
        Some(("nowhere", "gone", "uid-gone")),
        "Released",
    )
    .await;
    // A Delete-policy volume whose delete hangs: published after the delete grace.
    let doomed = unique("doomed");
    let mut p = pv(&doomed, "", "1Gi", "Delete");
    let spec = p.spec.as_mut().unwrap();
    spec.storage_class_name = None;
    spec.claim_ref = Some(claim_ref("nowhere", "doomed", "uid-doomed"));
    create(&pvs, &p).await;
    set_pv_phase(&pvs, &doomed, "Released").await;
    // A Retain volume with no finding (Available, unclaimed): its delete leaves its disk too.
    let unclaimed = unique("unclaimed");
    pv_in_phase(&pvs, &unclaimed, None, "Available").await;

    let proxy = proxy_to(cp).await;
    let operator = Operator::start(operator_client_through(cp, &proxy).await, test_settings());
    for name in [&vanishing, &doomed] {
        wait_leftover(&leftovers, name, "ClaimDeleted", |o| {
            reason(o) == Some(Reason::ClaimDeleted)
        })
        .await;
    }

    // The operator loses its watches; meanwhile the PV is deleted and etcd compacts past it.
    proxy.cut();
    wait_for("the PV watch to fail", Duration::from_secs(30), || {
        let s = operator.health.get(Kind::persistentvolumes);
        async move { (s == StoreState::Degraded).then_some(()) }
    })
    .await;
    assert!(leftovers.get_opt(&unclaimed).await.unwrap().is_none());
    delete(&pvs, &vanishing).await;
    delete(&pvs, &doomed).await;
    delete(&pvs, &unclaimed).await;
    let rev = etcd(cp, "/v3/kv/range", r#"{"key":"AA=="}"#)["header"]["revision"]
        .as_str()
        .unwrap()
        .to_string();
    etcd(
        cp,
        "/v3/kv/compaction",
        &format!(r#"{{"revision":"{rev}","physical":true}}"#),
    );
    for name in [&vanishing, &doomed] {
        assert!(
            leftovers.get_opt(name).await.unwrap().is_some(),
            "nothing else removes it here (no garbage collector)"
        );
    }
    proxy.resume();

    // No Delete event can arrive for the PVs: only the relist after the 410 shows them gone.
    // The Delete-policy one took its disk with it: its finding is cleared.
    wait_leftover_gone(&leftovers, &doomed).await;
    // The Retain one left its disk: its finding becomes the disk's last record.
    let vl = wait_leftover(&leftovers, &vanishing, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let message = vl.status.unwrap().message;
    assert!(
        message.contains("was deleted while the operator was not watching"),
        "{message}"
    );
    // The one without a finding too, from what the store last had of it (as its watched
    // delete would have).
    let vl = wait_leftover(&leftovers, &unclaimed, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let message = vl.status.unwrap().message;
    assert!(
        message.contains(&format!("PersistentVolume {unclaimed} (uid "))
            && message.contains("was deleted while the operator was not watching"),
        "{message}"
    );
    let metrics = operator.metrics.encode();
    let relists = metrics
        .lines()
        .find(|l| l.starts_with(r#"volume_leftovers_relists_total{resource="persistentvolumes"}"#))
        .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(
        relists >= 2,
        "the PV store relisted after the gap:\n{metrics}"
    );
    operator.stop().await;
    delete(&leftovers, &unclaimed).await;
    delete(&leftovers, &vanishing).await;
}

/// `scan` looks again at a claim that seemed missing. When that second look is refused (403) or
/// hangs, the volume is neither dropped nor reported as missing its claim: its row says
/// `claim_missing: null`, stderr names the claim and the error, and the run exits 4 (incomplete),
/// never 0. A Bound volume whose claim the second look does find gone is still reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_reports_a_claim_it_cannot_read_again_as_unknown_and_exits_4() {
    use crate::fault::{Fault, FaultProxy, Rule};
    // No operator runs meanwhile: these volumes are not its to report.
    let lease = lease(Flavor::Quiet).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let ns = unique("recheck-ns");
    create_ns(&admin, &ns).await;
    let refused = unique("recheck-403");
    pv_in_phase(
        &pvs,
        &refused,
        Some((&ns, "refused", "uid-refused")),
        "Bound",
    )
    .await;
    let hung = unique("recheck-hang");
    pv_in_phase(&pvs, &hung, Some((&ns, "hung", "uid-hung")), "Bound").await;
    let gone = unique("recheck-gone");
    pv_in_phase(&pvs, &gone, Some((&ns, "gone", "uid-gone")), "Bound").await;

    let proxy = FaultProxy::start(cp).await;
    let claim_path = |name: &str| format!("/namespaces/{ns}/persistentvolumeclaims/{name}");
    proxy.add(Rule::new(
        Some("read"),
        &claim_path("refused"),
        Fault::Status(403),
    ));
    proxy.add(Rule::new(Some("read"), &claim_path("hung"), Fault::Hang));
    let kubeconfig = kubeconfig_via(cp, "operator", &format!("http://{}", proxy.addr));
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
            // The operator's grace would hold BoundClaimMissing back from one look: none here.
            .args(["scan", "--request-timeout", "3s", "--grace", "0s"])
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(4),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(
        proxy.faulted(&claim_path("refused")),
        1,
        "the 403 was served"
    );
    assert_eq!(proxy.faulted(&claim_path("hung")), 1, "the hang was served");
    let row = |pv: &str| -> serde_json::Value {
        stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v["name"] == pv)
            .unwrap_or_else(|| panic!("no row for {pv}:\n{stdout}\nstderr:\n{stderr}"))
    };
    for (pv, claim) in [(&refused, "refused"), (&hung, "hung")] {
        let r = row(pv);
        assert!(r["claim_missing"].is_null(), "{r}");
        assert_eq!(r["reason"], "ClaimUnknown", "{r}");
        assert_eq!(r["claim"], format!("{ns}/{claim}"), "{r}");
        assert!(
            stderr.contains(&format!("claim {ns}/{claim} of PersistentVolume {pv}")),
            "stderr names the claim: {stderr}"
        );
    }
    assert!(stderr.contains("403"), "stderr names the refusal: {stderr}");
    assert!(
        stderr.contains("no answer within 3s"),
        "stderr names the timeout: {stderr}"
    );
    let r = row(&gone);
    assert_eq!(r["claim_missing"], true, "{r}");
    assert_eq!(r["reason"], "BoundClaimMissing", "{r}");

    for pv in [&refused, &hung, &gone] {
        // pv-protection keeps a Bound volume until it is not.
        set_pv_phase(&pvs, pv, "Available").await;
        delete(&pvs, pv).await;
    }
    let _ = Api::<Namespace>::all(admin.clone())
        .delete(&ns, &Default::default())
        .await;
}
