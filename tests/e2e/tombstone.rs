//! Tombstones on the real control plane: a Retain volume deleted by `kubectl delete pv` leaves its
//! disk, and its VolumeLeftover becomes the last record of it (`VolumeDeleted`) until a person
//! acknowledges it or its TTL passes; one deleted while the operator was down becomes a tombstone
//! at start-up; nothing is invented for a volume that had no finding.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use volume_leftovers::model::crd::{Reason, State, Subject, Tristate, VolumeLeftover};
use volume_leftovers::model::labels::LABEL_REASON;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_retain_volume_leaves_a_tombstone_until_a_person_acknowledges_it() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "tomb", "Retain").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    let before = wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let pv_uid = pvs.get(&r.pv).await.unwrap().uid().unwrap();

    // `kubectl delete pv`: the PV controller does not touch the disk of a Retain volume.
    cp.kubectl_ok(&["delete", "pv", &r.pv]).unwrap();
    let vl = wait_leftover(&leftovers, &r.pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    assert!(pvs.get_opt(&r.pv).await.unwrap().is_none());
    assert_eq!(vl.uid(), before.uid(), "the same object, updated in place");
    assert_eq!(vl.spec.volume_uid, pv_uid);
    let s = vl.status.clone().unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.deleted_at.is_some());
    assert_eq!(
        s.first_seen,
        before.status.as_ref().unwrap().first_seen,
        "the finding began when the claim was deleted"
    );
    let claim = s.claim.clone().unwrap();
    assert_eq!(claim.uid.as_deref(), Some(r.claim_uid.as_str()));
    assert_eq!(claim.missing, Tristate::True);
    assert_eq!(s.reclaim_policy, "Retain");
    assert_eq!(s.capacity.as_deref(), Some("1Gi"));
    assert_eq!(
        s.source.path.as_deref(),
        Some(format!("/mnt/data/{}", r.pv).as_str())
    );
    assert!(
        s.message
            .contains("its reclaim policy was Retain, so Kubernetes did not delete")
            && s.message
                .ends_with("Not checked against the storage backend."),
        "{}",
        s.message
    );
    assert_eq!(
        vl.labels().get(LABEL_REASON).map(String::as_str),
        Some("VolumeDeleted")
    );
    let row = cp
        .kubectl_ok(&["get", "vl", &r.pv, "--no-headers"])
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &cols[..4],
        [r.pv.as_str(), "VolumeDeleted", "Open", "Released"]
    );

    // It stays: a restart writes nothing and deletes nothing.
    operator.wait_idle().await;
    operator.stop().await;
    let writes = cp.operator_writes(&r.pv);
    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_idle().await;
    let again = leftovers.get(&r.pv).await.unwrap();
    assert_eq!(again.resource_version(), vl.resource_version());
    assert_eq!(cp.operator_writes(&r.pv), writes, "no write after restart");

    // A person acknowledges it with a ticket: the record now lives in the ticket.
    let decided = metric(&operator.metrics, "volume_leftovers_decisions_total");
    leftovers
        .patch(
            &r.pv,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"acknowledgement": {"by": "alice", "ticket": "OPS-42"}}}),
            ),
        )
        .await
        .unwrap();
    wait_leftover_gone(&leftovers, &r.pv).await;
    // And it is not recreated: the name was decided on the acknowledgement and again on the
    // watch event of its own delete.
    wait_metric(&operator.metrics, "volume_leftovers_decisions_total", |v| {
        v >= decided + 2.0
    })
    .await;
    operator.wait_idle().await;
    assert!(leftovers.get_opt(&r.pv).await.unwrap().is_none());
    assert_eq!(
        cp.operator_writes(&r.pv),
        writes + 1,
        "only the delete after the acknowledgement"
    );
    operator.stop().await;
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retain_volume_deleted_while_the_operator_was_down_becomes_a_tombstone_at_start_up() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "down", "Retain").await;
    // A Retain volume that never had a finding (Available, never claimed).
    let quiet_class = unique("down-unused-sc");
    let unused = unique("down-unused-pv");
    create(&pvs, &pv(&unused, &quiet_class, "1Gi", "Retain")).await;
    wait_pv_phase(&pvs, &unused, "Available").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    operator.wait_idle().await;
    operator.stop().await;

    // Both deleted while no operator runs.
    delete(&pvs, &r.pv).await;
    delete(&pvs, &unused).await;
    wait_for("the PVs to be gone", Duration::from_secs(30), || async {
        (pvs.get_opt(&r.pv).await.unwrap().is_none()
            && pvs.get_opt(&unused).await.unwrap().is_none())
        .then_some(())
    })
    .await;

    let mut settings = test_settings();
    settings.tombstone_ttl = Some(Duration::from_secs(8));
    let operator = Operator::start(cp.operator_client().await, settings);
    let vl = wait_leftover(&leftovers, &r.pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let s = vl.status.unwrap();
    assert_eq!(s.state, State::Open);
    assert!(
        s.message
            .contains("was deleted while the operator was not watching"),
        "{}",
        s.message
    );
    assert!(
        leftovers.get_opt(&unused).await.unwrap().is_none(),
        "nothing is invented for a volume that had no finding"
    );
    // The TTL runs from the time it was seen gone.
    wait_leftover_gone(&leftovers, &r.pv).await;
    let gone_after = jiff::Timestamp::now().duration_since(s.deleted_at.unwrap().0);
    assert!(
        gone_after >= jiff::SignedDuration::from_secs(7),
        "deleted {gone_after:?} after it was seen gone, before the TTL of 8s"
    );
    operator.stop().await;
    r.cleanup(&admin).await;
}
