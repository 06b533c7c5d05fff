//! Hand-off to people and tools, on the real control plane: an acknowledgement written by a
//! ticketing controller with its own field manager (never written, stripped or fought over by the
//! operator), the state and conditions `kubectl wait` reads, expiry without a restart, a finding
//! that changes under its acknowledgement, Events on the PV, the ignore label and exclusions.

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use volume_leftovers::model::crd::{Reason, State, VolumeLeftover};

use crate::support::*;

fn state(o: &VolumeLeftover) -> Option<State> {
    o.status.as_ref().map(|s| s.state)
}

/// The ticketing controller's acknowledgement, with its own field manager (server-side apply).
async fn acknowledge(api: &Api<VolumeLeftover>, name: &str, ticket: &str, until: Option<&str>) {
    let mut ack = json!({"by": "ticket-bot", "reason": "kept for the migration", "ticket": ticket});
    if let Some(u) = until {
        ack["until"] = json!(u);
    }
    let body = json!({
        "apiVersion": "leftovers.dev/v1alpha1",
        "kind": "VolumeLeftover",
        "metadata": {"name": name},
        "spec": {"acknowledgement": ack},
    });
    api.patch(
        name,
        &PatchParams::apply("ticket-bot").force(),
        &Patch::Apply(&body),
    )
    .await
    .unwrap_or_else(|e| panic!("acknowledging {name}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_is_never_fought_over_and_its_state_follows_the_finding() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "ack", "Retain").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted, Open", |o| {
        reason(o) == Some(Reason::ClaimDeleted) && state(o) == Some(State::Open)
    })
    .await;
    operator.wait_idle().await;
    let before = cp.operator_writes(&r.pv);

    acknowledge(&leftovers, &r.pv, "OPS-123", None).await;
    // kubectl wait reads the condition.
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Acknowledged",
        "--timeout=60s",
        &format!("volumeleftover/{}", r.pv),
    ])
    .unwrap();
    let o = leftovers.get(&r.pv).await.unwrap();
    let s = o.status.clone().unwrap();
    assert_eq!(s.state, State::Acknowledged);
    assert_eq!(s.observed_generation, o.metadata.generation);
    assert_eq!(
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("leftovers.dev/state"))
            .map(String::as_str),
        Some("Acknowledged")
    );
    operator.wait_idle().await;
    let after_ack = cp.operator_writes(&r.pv);
    assert_eq!(
        after_ack - before,
        2,
        "one patch of the state label and one status apply; the acknowledgement itself untouched"
    );
    // Field ownership: the acknowledgement belongs to ticket-bot alone.
    let raw: serde_json::Value = serde_json::from_str(
        &cp.kubectl_ok(&[
            "get",
            "volumeleftover",
            &r.pv,
            "-o",
            "json",
            "--show-managed-fields",
        ])
        .unwrap(),
    )
    .unwrap();
    let owners: Vec<String> = raw["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| {
            m["fieldsV1"]["f:spec"]
                .as_object()
                .is_some_and(|f| f.contains_key("f:acknowledgement"))
        })
        .map(|m| m["manager"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        owners,
        ["ticket-bot"],
        "{}",
        raw["metadata"]["managedFields"]
    );
    // A restart writes nothing and keeps it acknowledged.
    operator.stop().await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    operator.wait_idle().await;
    assert_eq!(
        cp.operator_writes(&r.pv),
        after_ack,
        "no write after restart"
    );
    assert_eq!(
        state(&leftovers.get(&r.pv).await.unwrap()),
        Some(State::Acknowledged)
    );

    // The finding changes reason under the acknowledgement: it is no longer what was
    // acknowledged.
    let claims =
        Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(admin.clone(), &r.ns);
    create(&claims, &pvc(&r.ns, "data", &r.class, "1Gi")).await;
    let o = wait_leftover(&leftovers, &r.pv, "Superseded", |o| {
        reason(o) == Some(Reason::ClaimRecreated) && state(o) == Some(State::Superseded)
    })
    .await;
    let covered = o.status.unwrap().acknowledged.unwrap();
    assert_eq!(covered.reason, Reason::ClaimDeleted);
    assert_eq!(
        o.spec.acknowledgement.unwrap().ticket.as_deref(),
        Some("OPS-123")
    );

    // A person acknowledges again, for a few seconds: it expires without a restart.
    let until = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(4))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    acknowledge(&leftovers, &r.pv, "OPS-124", Some(&until)).await;
    wait_leftover(&leftovers, &r.pv, "Acknowledged again", |o| {
        state(o) == Some(State::Acknowledged)
    })
    .await;
    wait_leftover(&leftovers, &r.pv, "Expired", |o| {
        state(o) == Some(State::Expired)
    })
    .await;
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=Open",
        "--timeout=30s",
        &format!("volumeleftover/{}", r.pv),
    ])
    .unwrap();
    operator.stop().await;
    delete(&claims, "data").await;
    delete(&leftovers, &r.pv).await;
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_describe_pv_shows_the_events_of_its_finding() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "events", "Retain").await;
    let operator = Operator::start(cp.operator_client().await, test_settings());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let described = wait_for("the Event on the PV", Duration::from_secs(30), || async {
        let out = cp.kubectl_ok(&["describe", "pv", &r.pv]).ok()?;
        out.contains("LeftoverClaimDeleted").then_some(out)
    })
    .await;
    assert!(described.contains("volume-leftovers"), "{described}");
    let events_of_pv = || {
        let out = cp
            .kubectl_ok(&[
                "get",
                "events.events.k8s.io",
                "-n",
                "default",
                "-o",
                "json",
                "--field-selector",
                &format!("regarding.name={}", r.pv),
            ])
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["items"].as_array().unwrap().clone()
    };
    // The finding changes reason (a claim of that name is made again): an Event says from what.
    let claims =
        Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(admin.clone(), &r.ns);
    create(&claims, &pvc(&r.ns, "data", &r.class, "1Gi")).await;
    wait_leftover(&leftovers, &r.pv, "ClaimRecreated", |o| {
        reason(o) == Some(Reason::ClaimRecreated)
    })
    .await;
    let changed = wait_for(
        "the reason-change Event",
        Duration::from_secs(30),
        || async {
            events_of_pv()
                .into_iter()
                .find(|e| e["reason"] == "LeftoverClaimRecreated")
        },
    )
    .await;
    assert!(
        changed["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("Was ClaimDeleted.")),
        "{changed}"
    );
    assert_eq!(changed["type"], "Warning");
    delete(&claims, "data").await;
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted again", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    // The finding clears: another Event says so.
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    pvs.patch(
        &r.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": null}})),
    )
    .await
    .unwrap();
    wait_leftover_gone(&leftovers, &r.pv).await;
    wait_for("the cleared Event", Duration::from_secs(30), || async {
        let out = cp.kubectl_ok(&["describe", "pv", &r.pv]).ok()?;
        out.contains("LeftoverCleared").then_some(())
    })
    .await;
    // The same finding comes back (the claimRef restored, the claim still gone): the same Event
    // again is a count on the first one (the events API's series), not a new object.
    pvs.patch(
        &r.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"claimRef": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "namespace": r.ns, "name": "data", "uid": r.claim_uid,
        }}})),
    )
    .await
    .unwrap();
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted once more", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let repeated = wait_for(
        "a series on the first Event",
        Duration::from_secs(30),
        || async {
            events_of_pv().into_iter().find(|e| {
                e["reason"] == "LeftoverClaimDeleted" && e["series"]["count"].as_u64() >= Some(2)
            })
        },
    )
    .await;
    assert!(
        !repeated["note"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Was "),
        "the first Event's repeat: {repeated}"
    );
    let found_events = events_of_pv()
        .into_iter()
        .filter(|e| {
            e["reason"] == "LeftoverClaimDeleted"
                && !e["note"].as_str().unwrap_or_default().starts_with("Was ")
        })
        .count();
    assert_eq!(found_events, 1, "one object for the repeated Event");
    // Through the events API, regarding the PV, reported by this operator.
    let items = events_of_pv();
    assert!(items.len() >= 2, "{items:?}");
    assert!(
        items
            .iter()
            .all(|e| e["reportingController"] == "volume-leftovers"),
        "{items:?}"
    );
    operator.stop().await;
    r.cleanup(&admin).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_kept_on_purpose_has_no_finding_and_exclusions_apply() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let kept = released_volume(&admin, "kept", "Retain").await;
    let by_class = released_volume(&admin, "byclass", "Retain").await;
    let by_label = released_volume(&admin, "bylabel", "Retain").await;
    pvs.patch(
        &by_label.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "archive"}}})),
    )
    .await
    .unwrap();
    for r in [&kept, &by_class, &by_label] {
        wait_pv_phase(&pvs, &r.pv, "Released").await;
    }
    let mut settings = test_settings();
    settings.exclusions = volume_leftovers::model::exclude::Exclusions {
        classes: [by_class.class.clone()].into(),
        selector: Some(volume_leftovers::model::selector::Selector::parse("team=archive").unwrap()),
    };
    let operator = Operator::start(cp.operator_client().await, settings);
    // Published first: nothing kept yet.
    wait_leftover(&leftovers, &kept.pv, "published", |o| reason(o).is_some()).await;
    // A person keeps it on purpose: the finding goes.
    pvs.patch(
        &kept.pv,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"leftovers.dev/ignore": "true"}}})),
    )
    .await
    .unwrap();
    wait_leftover_gone(&leftovers, &kept.pv).await;
    operator.wait_idle().await;
    for r in [&by_class, &by_label] {
        assert!(
            leftovers.get_opt(&r.pv).await.unwrap().is_none(),
            "{} is excluded",
            r.pv
        );
    }
    assert_eq!(
        metric(&operator.metrics, "volume_leftovers_ignored_volumes"),
        3.0
    );
    operator.stop().await;
    for r in [&kept, &by_class, &by_label] {
        r.cleanup(&admin).await;
    }
}

#[tokio::test]
async fn kubectl_shows_the_type_description_first_and_the_hints_in_wide_output() {
    let cp = cp();
    let out = wait_for(
        "the CRD's OpenAPI to be published",
        Duration::from_secs(60),
        || async { cp.kubectl_ok(&["explain", "volumeleftover"]).ok() },
    )
    .await;
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        text.contains("DESCRIPTION: A PersistentVolume that survived, lost or outlived its claim"),
        "{out}"
    );
    assert!(!text.contains("Auto-generated"), "{out}");
    let crd = cp
        .kubectl_ok(&[
            "get",
            "crd",
            "volumeleftovers.leftovers.dev",
            "-o",
            "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}",
        ])
        .unwrap();
    for col in ["Reason", "State", "Age", "Hints", "Ticket"] {
        assert!(crd.split_whitespace().any(|c| c == col), "{col}: {crd}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_findings_are_mirrored_into_an_openreports_cluster_report() {
    // A control plane of its own: the report mirrors every finding in the cluster, and the
    // restart below must find the same findings. On the shared one, a test that deletes its
    // Retain volumes meanwhile changes them (a tombstone), and the report rightly with them.
    let own = ControlPlane::start(Flavor::Full, true).unwrap_or_else(|e| panic!("{e}"));
    let cp = &own;
    let admin = cp.admin().await;
    // The real OpenReports CRDs, from their Go module (tools/openreports-crd.sh fetches them).
    let out = std::process::Command::new(repo().join("tools/openreports-crd.sh"))
        .output()
        .expect("tools/openreports-crd.sh");
    assert!(
        out.status.success(),
        "the OpenReports CRDs could not be fetched (tests never skip): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let paths = String::from_utf8(out.stdout).unwrap();
    for p in paths.lines() {
        cp.kubectl_ok(&["apply", "--server-side", "-f", p]).unwrap();
    }
    cp.kubectl_ok(&[
        "wait",
        "--for=condition=established",
        "crd/clusterreports.openreports.io",
    ])
    .unwrap();
    // What the chart grants with openReports.enabled.
    let rbac = format!(
        r#"{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{{"name":"vl-openreports"}},
"rules":[{{"apiGroups":["openreports.io"],"resources":["clusterreports"],"verbs":["get","create","patch"]}}]}}
---
{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{{"name":"vl-openreports"}},
"roleRef":{{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"vl-openreports"}},
"subjects":[{{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"{OPERATOR_USER}"}}]}}"#
    );
    let rbac_file = cp.dir.join("vl-openreports.yaml");
    std::fs::write(&rbac_file, rbac).unwrap();
    cp.kubectl_ok(&["apply", "-f", rbac_file.to_str().unwrap()])
        .unwrap();

    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "report", "Retain").await;
    let mut settings = test_settings();
    settings.openreports = true;
    let operator = Operator::start(cp.operator_client().await, settings.clone());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    let report = || async move {
        let out = cp
            .kubectl_ok(&["get", "clusterreport", "volume-leftovers", "-o", "json"])
            .ok()?;
        serde_json::from_str::<serde_json::Value>(&out).ok()
    };
    let result_of = |rep: &serde_json::Value, pv: &str| {
        rep["results"]
            .as_array()
            .and_then(|rs| rs.iter().find(|x| x["resources"][0]["name"] == pv).cloned())
    };
    let rep = wait_for("the ClusterReport", Duration::from_secs(60), || async {
        let rep = report().await?;
        result_of(&rep, &r.pv).map(|_| rep)
    })
    .await;
    let mine = result_of(&rep, &r.pv).unwrap();
    assert_eq!(mine["policy"], "ClaimDeleted");
    assert_eq!(mine["result"], "fail");
    assert_eq!(mine["category"], "Storage");
    assert_eq!(rep["source"], "volume-leftovers");
    // Exact counts.
    let results = rep["results"].as_array().unwrap();
    let fails = results.iter().filter(|x| x["result"] == "fail").count();
    let skips = results.iter().filter(|x| x["result"] == "skip").count();
    assert_eq!(rep["summary"]["fail"], fails);
    assert_eq!(rep["summary"]["skip"], skips);

    // Acknowledged: the result turns skip.
    acknowledge(&leftovers, &r.pv, "OPS-7", None).await;
    let rep = wait_for("the result to be skip", Duration::from_secs(60), || async {
        let rep = report().await?;
        (result_of(&rep, &r.pv)?["result"] == "skip").then_some(rep)
    })
    .await;
    assert_eq!(
        result_of(&rep, &r.pv).unwrap()["properties"]["ticket"],
        "OPS-7"
    );
    // Nothing is rewritten unless its content changed. A change to the finding that the report
    // does not show (someone's label) makes the operator consider the report again; then a
    // change it shows (the ticket). Report writes go one at a time, in order: exactly one more
    // write means the first was not rewritten.
    operator.wait_idle().await;
    let reports = || cp.operator_writes_on("clusterreports", "volume-leftovers");
    let written = reports();
    assert!(
        written >= 2,
        "created, then rewritten for the acknowledgement: {written}"
    );
    let decided = metric(&operator.metrics, "volume_leftovers_decisions_total");
    leftovers
        .patch(
            &r.pv,
            &PatchParams::apply("team-labels"),
            &Patch::Apply(json!({
                "apiVersion": "leftovers.dev/v1alpha1",
                "kind": "VolumeLeftover",
                "metadata": {"name": r.pv, "labels": {"team": "storage"}}
            })),
        )
        .await
        .unwrap();
    wait_metric(&operator.metrics, "volume_leftovers_decisions_total", |v| {
        v > decided
    })
    .await;
    operator.wait_idle().await;
    acknowledge(&leftovers, &r.pv, "OPS-8", None).await;
    wait_for(
        "the new ticket in the report",
        Duration::from_secs(60),
        || async {
            let rep = report().await?;
            (result_of(&rep, &r.pv)?["properties"]["ticket"] == "OPS-8").then_some(())
        },
    )
    .await;
    assert_eq!(
        reports(),
        written + 1,
        "the report was rewritten although nothing in it changed"
    );
    // The status the ticket changes (its condition) may land after the report showed the ticket;
    // the restart below is only "with the same findings" once the report says what the findings
    // there say. Waiting on that, not on a report tick, also proves the two agree.
    let agreed = wait_for(
        "the report to say what the findings say",
        Duration::from_secs(60),
        || async {
            let there = report().await?;
            let listed = leftovers.list(&Default::default()).await.ok()?;
            let expected = volume_leftovers::decide::report::cluster_report(&listed.items);
            (volume_leftovers::decide::report::owned(&there)
                == volume_leftovers::decide::report::owned(&expected))
            .then_some(there)
        },
    )
    .await;
    operator.wait_idle().await;
    operator.stop().await;

    // A restart with the same findings reads the report once (GET) and writes nothing: the
    // process has no memory of what it wrote, the report there says the same.
    let written = reports();
    let reads = || {
        cp.audit()
            .iter()
            .filter(|e| {
                e["user"]["username"] == OPERATOR_USER
                    && e["objectRef"]["resource"] == "clusterreports"
                    && e["objectRef"]["name"] == "volume-leftovers"
                    && e["verb"] == "get"
            })
            .count()
    };
    let read = reads();
    let operator = Operator::start(cp.operator_client().await, settings);
    wait_for(
        "the restarted operator to read or write the report",
        Duration::from_secs(60),
        || async { (reads() > read || reports() > written).then_some(()) },
    )
    .await;
    operator.wait_idle().await;
    // Two looks at the report since the findings settled: the first may start a write, and
    // the second comes only once no write is in flight. Still nothing written.
    let checks = metric(&operator.metrics, "volume_leftovers_report_checks_total");
    wait_metric(
        &operator.metrics,
        "volume_leftovers_report_checks_total",
        |v| v >= checks + 2.0,
    )
    .await;
    // The read, as the API server saw it: its answer and how long it took.
    let gets: Vec<String> = cp
        .audit()
        .iter()
        .filter(|e| {
            e["user"]["username"] == OPERATOR_USER
                && e["objectRef"]["resource"] == "clusterreports"
                && e["verb"] == "get"
        })
        .skip(read)
        .map(|e| {
            format!(
                "{} {} .. {}",
                e["responseStatus"]["code"], e["requestReceivedTimestamp"], e["stageTimestamp"]
            )
        })
        .collect();
    // A read that failed or outlasted the request timeout (3 s; a loaded machine) is answered
    // by writing, as documented: then that one write is the only one.
    let read_failed = cp
        .audit()
        .iter()
        .filter(|e| {
            e["user"]["username"] == OPERATOR_USER
                && e["objectRef"]["resource"] == "clusterreports"
                && e["verb"] == "get"
        })
        .skip(read)
        .any(|e| {
            let at = |k: &str| {
                e[k].as_str()
                    .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                    .unwrap_or_default()
            };
            e["responseStatus"]["code"] != 200
                || at("stageTimestamp").duration_since(at("requestReceivedTimestamp"))
                    >= jiff::SignedDuration::from_millis(2500)
        });
    assert_eq!(
        reports(),
        written + usize::from(read_failed),
        "restarted with the same findings, the operator wrote the report again; its reads: {gets:?}; the report now: {}",
        report()
            .await
            .map(|r| volume_leftovers::decide::report::owned(&r).to_string())
            .unwrap_or_default()
    );
    assert_eq!(reads(), read + 1, "one read at start, then none");
    let rep = report().await.expect("the report");
    assert_eq!(
        volume_leftovers::decide::report::owned(&rep),
        volume_leftovers::decide::report::owned(&agreed)
    );
    assert_eq!(
        result_of(&rep, &r.pv).unwrap()["properties"]["ticket"],
        "OPS-8"
    );
    operator.stop().await;
    delete(&leftovers, &r.pv).await;
    r.cleanup(&admin).await;
}

/// A ticket bot that means "keep it" writes an `until` far ahead. The CRD accepts any date, so
/// any date must be survivable: a wake-up that far ahead made the timer queue panic, and every
/// restart panicked again. The operator stays up, the finding is Acknowledged, and a restart
/// finds it so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_until_any_date_keeps_the_operator_up() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    let r = released_volume(&admin, "ack-far", "Retain").await;
    let mut operator = Operator::start(cp.operator_client().await, test_settings());
    wait_leftover(&leftovers, &r.pv, "ClaimDeleted, Open", |o| {
        reason(o) == Some(Reason::ClaimDeleted) && state(o) == Some(State::Open)
    })
    .await;
    for (ticket, until) in [
        ("OPS-2099", "2099-01-01T00:00:00Z"),
        ("OPS-9999", "9999-12-31T23:59:59Z"),
    ] {
        acknowledge(&leftovers, &r.pv, ticket, Some(until)).await;
        wait_leftover(&leftovers, &r.pv, "Acknowledged", |o| {
            state(o) == Some(State::Acknowledged)
                && o.spec
                    .acknowledgement
                    .as_ref()
                    .is_some_and(|a| a.ticket.as_deref() == Some(ticket))
        })
        .await;
        operator.wait_idle().await;
        assert!(
            operator.is_running(),
            "the operator is up after until {until}"
        );
        // A restart reads the same acknowledgement first thing.
        operator.stop().await;
        operator = Operator::start(cp.operator_client().await, test_settings());
        // Idle means it has decided every name, this one's acknowledgement read and kept.
        operator.wait_idle().await;
        assert!(
            operator.is_running(),
            "the operator is up after a restart with until {until}"
        );
        assert_eq!(
            state(&leftovers.get(&r.pv).await.unwrap()),
            Some(State::Acknowledged)
        );
    }
    operator.stop().await;
    delete(&leftovers, &r.pv).await;
    r.cleanup(&admin).await;
}
