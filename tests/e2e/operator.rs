//! The operator on the full control plane, authenticated as the identity deploy/ grants.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use volume_leftovers::model::crd::{Hint, Reason, Tristate, VolumeLeftover};
use volume_leftovers::model::labels::{LABEL_REASON, MANAGED_BY};

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_scenario_released_recreated_restarted_reused() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), "mariadb");
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    cp.kubectl_ok(&[
        "apply",
        "-f",
        repo().join("scripts/demo-scenario.yaml").to_str().unwrap(),
    ])
    .unwrap();
    wait_pv_phase(&pvs, "mariadb-pv", "Bound").await;
    let recorder = Recorder::start(admin.clone()).await;

    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_idle().await;
    assert!(
        leftovers.get_opt("mariadb-pv").await.unwrap().is_none(),
        "a healthy Bound volume is not a finding"
    );
    // Without leader election this replica is the one that decides: the leader alerts read it.
    assert_eq!(metric(&operator.metrics, "volume_leftovers_leader"), 1.0);
    assert_eq!(
        metric(
            &operator.metrics,
            "volume_leftovers_leader_transitions_total"
        ),
        1.0
    );

    // The claim is deleted: the volume survives it.
    let old_uid = claims.get("mariadb").await.unwrap().uid().unwrap();
    delete(&claims, "mariadb").await;
    let pv = wait_pv_phase(&pvs, "mariadb-pv", "Released").await;
    let vl = wait_leftover(&leftovers, "mariadb-pv", "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let s = vl.status.clone().unwrap();
    let claim = s.claim.clone().unwrap();
    assert_eq!(claim.reference, "mariadb/mariadb");
    assert_eq!(claim.uid.as_deref(), Some(old_uid.as_str()));
    assert_eq!(claim.missing, Tristate::True);
    assert_eq!(claim.current_uid, None);
    assert_eq!(s.reclaim_policy, "Retain");
    let sc = s.storage_class.clone().unwrap();
    assert_eq!(
        (sc.name.as_str(), sc.reclaim_policy.as_deref(), sc.missing),
        ("standard", Some("Retain"), Tristate::False)
    );
    assert_eq!(s.capacity.as_deref(), Some("250Mi"));
    assert_eq!(s.phase, "Released");
    assert_eq!(
        s.phase_since,
        pv.status.as_ref().unwrap().last_phase_transition_time,
        "phaseSince is the PV's lastPhaseTransitionTime"
    );
    assert!(
        s.hints.is_empty(),
        "a Retain success carries no hint: {:?}",
        s.hints
    );
    assert_eq!(vl.spec.volume_uid, pv.uid().unwrap());
    assert_eq!(
        vl.metadata.owner_references, None,
        "no ownerReference: the garbage collector must not take the record with the volume"
    );
    let labels = vl.labels();
    assert_eq!(
        labels.get(MANAGED_BY).map(String::as_str),
        Some("volume-leftovers")
    );
    assert_eq!(
        labels.get(LABEL_REASON).map(String::as_str),
        Some("ClaimDeleted")
    );
    assert_eq!(
        labels
            .get("leftovers.dev/claim-namespace")
            .map(String::as_str),
        Some("mariadb")
    );
    assert_eq!(
        labels
            .get("leftovers.dev/storage-class")
            .map(String::as_str),
        Some("standard")
    );

    // What people type.
    let table = cp
        .kubectl_ok(&["get", "volumeleftovers", "mariadb-pv"])
        .unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REASON",
            "STATE",
            "PHASE",
            "RECLAIM",
            "CLAIM",
            "CLAIM-MISSING",
            "CLASS",
            "CAPACITY",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..9],
        [
            "mariadb-pv",
            "ClaimDeleted",
            "Open",
            "Released",
            "Retain",
            "mariadb/mariadb",
            "True",
            "standard",
            "250Mi"
        ]
    );
    let short = cp.kubectl_ok(&["get", "vl", "-o", "name"]).unwrap();
    assert!(
        short.contains("volumeleftover.leftovers.dev/mariadb-pv"),
        "{short}"
    );

    // The one-shot scan prints the original tool's line.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .arg("scan")
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "exit code 3: leftovers found");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let line = stdout
        .lines()
        .find(|l| l.starts_with(r#"{"name": "mariadb-pv","#))
        .unwrap_or_else(|| panic!("no mariadb-pv line in:\n{stdout}"));
    assert!(
        line.starts_with(r#"{"name": "mariadb-pv", "phase": "Released", "reclaim": "Retain", "claim": "mariadb/mariadb", "claim_missing": true, "storage_class": "standard", "capacity": "250Mi", "reason": "ClaimDeleted""#),
        "{line}"
    );

    // Same name, new claim: names are not identities.
    let new = create(&claims, &pvc("mariadb", "mariadb", "standard", "250Mi")).await;
    let vl2 = wait_leftover(&leftovers, "mariadb-pv", "ClaimRecreated", |o| {
        reason(o) == Some(Reason::ClaimRecreated)
    })
    .await;
    let s2 = vl2.status.clone().unwrap();
    let c2 = s2.claim.unwrap();
    assert_eq!(
        c2.uid.as_deref(),
        Some(old_uid.as_str()),
        "the old uid, from the claimRef"
    );
    assert_eq!(c2.current_uid, new.uid(), "the new claim's uid");
    assert_eq!(
        c2.missing,
        Tristate::False,
        "the original tool's meaning: a claim of that name exists"
    );
    assert_eq!(s2.first_seen, s.first_seen, "firstSeen is set once");
    assert_eq!(vl2.uid(), vl.uid(), "the same object, updated in place");

    // Restart on a converged cluster: nothing is written.
    operator.wait_idle().await;
    operator.stop().await;
    let before = leftovers.get("mariadb-pv").await.unwrap();
    let writes_before = cp.operator_writes("mariadb-pv");
    assert_eq!(
        writes_before, 4,
        "one apply and one status apply for ClaimDeleted, the same for ClaimRecreated; nothing else"
    );
    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_idle().await;
    let after = leftovers.get("mariadb-pv").await.unwrap();
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "no write after restart"
    );
    assert_eq!(
        cp.operator_writes("mariadb-pv"),
        writes_before,
        "no write request at all after restart"
    );

    // A human decides to reuse the volume: clears the claimRef. The PV turns Available (and the
    // waiting claim binds it); the finding clears.
    pvs.patch(
        "mariadb-pv",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    wait_leftover_gone(&leftovers, "mariadb-pv").await;
    // Clearing the claimRef makes the PV Released without a claimRef for a moment before the
    // binder turns it Available: never published as ReleasedWithoutClaim.
    assert_eq!(
        cp.operator_writes("mariadb-pv"),
        writes_before + 1,
        "only the delete"
    );
    let reasons = recorder.of("mariadb-pv");
    assert_eq!(
        reasons
            .iter()
            .filter(|r| r.is_some())
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [Some(Reason::ClaimDeleted), Some(Reason::ClaimRecreated)].into(),
        "{reasons:?}"
    );
    recorder.stop();

    operator.stop().await;
    delete(&claims, "mariadb").await;
    delete(&pvs, "mariadb-pv").await;
    delete(&Api::<Namespace>::all(admin.clone()), "mariadb").await;
    delete(&Api::<StorageClass>::all(admin), "standard").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_over_healthy_bound_volumes_creates_no_volume_leftover_at_any_moment() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let class_name = unique("healthy-sc");
    let ns = unique("healthy-ns");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &class(&class_name, "Retain"),
    )
    .await;
    create_ns(&admin, &ns).await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let names: Vec<String> = (0..8)
        .map(|i| format!("{}-{i}", unique("healthy-pv")))
        .collect();
    for (i, n) in names.iter().enumerate() {
        create(&pvs, &pv(n, &class_name, "1Gi", "Retain")).await;
        create(&claims, &pvc(&ns, &format!("c{i}"), &class_name, "1Gi")).await;
    }
    for n in &names {
        wait_pv_phase(&pvs, n, "Bound").await;
    }

    // Every VolumeLeftover event, from before the operator starts. (The earlier collector was
    // aborted before it was read, and an aborted task answers nothing: it saw no name, ever.)
    let recorder = Recorder::start(admin.clone()).await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    // Every volume decided (pages of 3: claims arrive after PVs), and nothing held in a grace:
    // a false BoundClaimMissing would be published by now.
    operator.wait_idle().await;
    operator.stop().await;
    for n in &names {
        assert_eq!(
            recorder.of(n),
            vec![],
            "a VolumeLeftover appeared for healthy {n}"
        );
    }
    recorder.stop();
    // Every PV was evaluated: the stores hold them.
    for i in 0..names.len() {
        delete(&claims, &format!("c{i}")).await;
    }
    for n in &names {
        delete(&pvs, n).await;
    }
    delete(&Api::<Namespace>::all(admin.clone()), &ns).await;
    delete(&Api::<StorageClass>::all(admin), &class_name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_identity_never_writes_volumes_claims_or_classes() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let r = released_volume(&admin, "audit", "Retain").await;
    let operator_client = cp.operator_client().await;
    let operator = Operator::start(operator_client.clone(), test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    wait_leftover(&leftovers, &r.pv, "published", |o| reason(o).is_some()).await;
    operator.stop().await;

    // With the deploy/ ClusterRole, every write on the volume side is refused.
    let pvs = Api::<PersistentVolume>::all(operator_client.clone());
    let err = pvs
        .patch(
            &r.pv,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"claimRef": null}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    let err = Api::<PersistentVolumeClaim>::namespaced(operator_client.clone(), &r.ns)
        .create(&Default::default(), &pvc(&r.ns, "sneaky", &r.class, "1Gi"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );
    let err = Api::<StorageClass>::all(operator_client.clone())
        .delete(&r.class, &Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403),
        "{err}"
    );

    let audit = cp.audit();
    let by_operator: Vec<&serde_json::Value> = audit
        .iter()
        .filter(|e| e["user"]["username"] == OPERATOR_USER)
        .collect();
    let mut verbs: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for e in &by_operator {
        let key = (
            e["objectRef"]["resource"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            e["verb"].as_str().unwrap_or("").to_string(),
        );
        verbs
            .entry(key)
            .or_default()
            .push(e["responseStatus"]["code"].as_u64().unwrap_or(0));
    }
    for resource in [
        "persistentvolumes",
        "persistentvolumeclaims",
        "storageclasses",
    ] {
        assert!(
            verbs.contains_key(&(resource.to_string(), "list".to_string()))
                && verbs.contains_key(&(resource.to_string(), "watch".to_string())),
            "the audit log shows the operator listing and watching {resource}: {verbs:?}"
        );
        for verb in ["create", "update", "patch", "delete", "deletecollection"] {
            if let Some(codes) = verbs.get(&(resource.to_string(), verb.to_string())) {
                assert!(
                    codes.iter().all(|c| *c == 403),
                    "the operator identity got {verb} {resource} through: {codes:?}"
                );
            }
        }
    }
    assert!(
        verbs.contains_key(&("volumeleftovers".to_string(), "patch".to_string())),
        "the audit log captures the operator's own writes: {verbs:?}"
    );
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edits_are_reverted_and_foreign_objects_left_alone() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let ours = released_volume(&admin, "edit", "Retain").await;
    let theirs = released_volume(&admin, "foreign", "Retain").await;
    // Someone's own object, named like a leftover PV, without the managed-by label.
    let mut foreign = VolumeLeftover::new(
        &theirs.pv,
        volume_leftovers::model::crd::VolumeLeftoverSpec {
            volume_name: theirs.pv.clone(),
            volume_uid: "hand-made".into(),
            acknowledgement: None,
        },
    );
    foreign.metadata.labels = Some([("team".to_string(), "storage".to_string())].into());
    let foreign = create(&leftovers, &foreign).await;

    let operator = Operator::start(cp.operator_client().await, test_settings());
    wait_leftover(&leftovers, &ours.pv, "published", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;

    leftovers
        .patch_status(
            &ours.pv,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"reason": "ReclaimFailed", "message": "edited"}})),
        )
        .await
        .unwrap();
    leftovers
        .patch(
            &ours.pv,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LABEL_REASON: "Edited", "team": "x"}}, "spec": {"volumeUid": "edited"}})),
        )
        .await
        .unwrap();
    let reverted = wait_leftover(&leftovers, &ours.pv, "hand edits reverted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
            && o.labels().get(LABEL_REASON).map(String::as_str) == Some("ClaimDeleted")
            && o.spec.volume_uid != "edited"
    })
    .await;
    assert_ne!(reverted.status.as_ref().unwrap().message, "edited");
    assert_eq!(
        reverted.labels().get("team").map(String::as_str),
        Some("x"),
        "a label that is not ours stays"
    );

    operator.wait_idle().await;
    let still = leftovers.get(&theirs.pv).await.unwrap();
    assert_eq!(
        still.resource_version(),
        foreign.resource_version(),
        "never touched"
    );
    assert!(still.status.is_none());
    operator.stop().await;

    // A status write decided on the operator's object never lands on an object someone made
    // under that name meanwhile (the write names the uid it was decided on).
    let decided = leftovers.get(&ours.pv).await.unwrap();
    delete(&leftovers, &ours.pv).await;
    let mut remade = VolumeLeftover::new(&ours.pv, decided.spec.clone());
    remade.spec.acknowledgement = None;
    let remade = create(&leftovers, &remade).await;
    let writer = volume_leftovers::publish::writer::Writer::new(
        Api::all(cp.operator_client().await),
        Duration::from_secs(10),
    );
    let written = writer
        .execute(volume_leftovers::decide::plan::Action::Apply {
            object: Box::new(decided.clone()),
            meta: None,
            status: true,
        })
        .await
        .expect("a refused write is an outdated decision, not an error");
    assert_eq!(
        written.outcome,
        volume_leftovers::publish::writer::Outcome::Outdated
    );
    let after = leftovers.get(&ours.pv).await.unwrap();
    assert_eq!(after.uid(), remade.uid());
    assert!(after.status.is_none(), "{:?}", after.status);
    assert_eq!(after.resource_version(), remade.resource_version());
    delete(&leftovers, &ours.pv).await;

    delete(&leftovers, &theirs.pv).await;
    ours.cleanup(&admin).await;
    theirs.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delete_reclaim_is_reclaim_failed_with_the_delete_hint() {
    // A hostPath volume outside /tmp with reclaimPolicy Delete: the controller-manager's deleter
    // refuses it and marks the PV Failed, for real.
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let r = released_volume(&admin, "failed", "Delete").await;
    wait_for("PV Failed", Duration::from_secs(60), || async {
        let pv = Api::<PersistentVolume>::all(admin.clone())
            .get(&r.pv)
            .await
            .ok()?;
        (phase(&pv) == "Failed").then_some(())
    })
    .await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, &r.pv, "ReclaimFailed", |o| {
        reason(o) == Some(Reason::ReclaimFailed)
    })
    .await;
    let s = vl.status.unwrap();
    assert_eq!(s.phase, "Failed");
    assert_eq!(s.reclaim_policy, "Delete");
    assert!(
        s.hints.contains(&Hint::ReclaimPolicyDelete),
        "{:?}",
        s.hints
    );
    assert!(
        s.phase_message.is_some(),
        "the controller's failure message is carried"
    );
    operator.stop().await;
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_csi_volume_with_delete_policy_is_a_hung_delete_with_its_rbd_image() {
    // A CSI volume whose provisioner never answers: the controller-manager leaves it Released,
    // waiting for the external deleter, for real.
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let class_name = unique("csi-sc");
    let ns = unique("csi-ns");
    let pv_name = unique("csi-pv");
    let mut sc = class(&class_name, "Delete");
    sc.provisioner = "rbd.csi.ceph.com".into();
    create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    create_ns(&admin, &ns).await;
    let mut volume = pv(&pv_name, &class_name, "20Gi", "Delete");
    volume.metadata.annotations = Some(
        [(
            "pv.kubernetes.io/provisioned-by".to_string(),
            "rbd.csi.ceph.com".to_string(),
        )]
        .into(),
    );
    let spec = volume.spec.as_mut().unwrap();
    spec.host_path = None;
    spec.csi = Some(k8s_openapi::api::core::v1::CSIPersistentVolumeSource {
        driver: "rbd.csi.ceph.com".into(),
        volume_handle: "0001-0009-rook-ceph-0000000000000002-6d1f".into(),
        volume_attributes: Some(
            [
                ("pool".to_string(), "k8s-rbd".to_string()),
                ("imageName".to_string(), "csi-vol-6d1f".to_string()),
                ("clusterID".to_string(), "rook-ceph".to_string()),
            ]
            .into(),
        ),
        ..Default::default()
    });
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    create(&pvs, &volume).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    create(&claims, &pvc(&ns, "data", &class_name, "20Gi")).await;
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    delete(&claims, "data").await;
    wait_pv_phase(&pvs, &pv_name, "Released").await;

    let operator = Operator::start(cp.operator_client().await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let vl = wait_leftover(&leftovers, &pv_name, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let s = vl.status.unwrap();
    assert_eq!(
        s.hints,
        vec![Hint::ReclaimPolicyDelete],
        "a hung delete, not a Retain success"
    );
    assert!(s.message.contains("delete hung or failed"), "{}", s.message);
    // Published only once it had stayed Released for the delete grace, dated by the server's
    // clock on both sides, and the message says since when.
    let since = s.phase_since.clone().expect("lastPhaseTransitionTime");
    let created = vl.metadata.creation_timestamp.clone().unwrap();
    let grace = test_settings().graces.delete_grace;
    assert!(
        created.0.duration_since(since.0) >= jiff::SignedDuration::try_from(grace).unwrap(),
        "created at {created:?}, Released since {since:?}: before the delete grace of {grace:?}"
    );
    let since_text = since.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    assert!(
        s.message.contains(&format!("Released since {since_text}")),
        "{}",
        s.message
    );
    assert_eq!(s.source.kind, "csi");
    assert_eq!(s.source.driver.as_deref(), Some("rbd.csi.ceph.com"));
    assert_eq!(
        s.source.volume_handle.as_deref(),
        Some("0001-0009-rook-ceph-0000000000000002-6d1f")
    );
    assert_eq!(s.source.pool.as_deref(), Some("k8s-rbd"));
    assert_eq!(s.source.image_name.as_deref(), Some("csi-vol-6d1f"));
    assert_eq!(s.capacity.as_deref(), Some("20Gi"));

    // The class is deleted: reported, never fixed.
    delete(&Api::<StorageClass>::all(admin.clone()), &class_name).await;
    let vl = wait_leftover(&leftovers, &pv_name, "class missing", |o| {
        o.status
            .as_ref()
            .is_some_and(|s| s.hints.contains(&Hint::StorageClassMissing))
    })
    .await;
    assert_eq!(
        vl.status.unwrap().storage_class.unwrap().missing,
        Tristate::True
    );
    operator.stop().await;
    delete(&pvs, &pv_name).await;
    delete(&Api::<Namespace>::all(admin), &ns).await;
}
