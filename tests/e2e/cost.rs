//! The cost estimates on the real control plane: a price table priced by a StorageClass's name
//! and by a CSI driver with the class's disk parameters (read through the operator's class store,
//! which keeps them), present exactly where a row applies, kept by a tombstone from its delete,
//! shown by `kubectl get vl -o wide`, and added up by the gauge to what the objects say.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use volume_leftovers::model::crd::{Reason, VolumeLeftover};
use volume_leftovers::model::price::PriceTable;

use crate::support::*;

/// A released Retain volume of `size` whose class `class` (made here) has `parameters`, with a
/// GCE PD CSI source when `handle` is given (bound statically: no driver runs).
async fn released(
    admin: &kube::Client,
    prefix: &str,
    size: &str,
    parameters: &[(&str, &str)],
    handle: Option<&str>,
) -> Released {
    let class_name = unique(&format!("{prefix}-sc"));
    let ns = unique(&format!("{prefix}-ns"));
    let pv_name = unique(&format!("{prefix}-pv"));
    let mut sc = class(&class_name, "Retain");
    sc.parameters = Some(
        parameters
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    create_ns(admin, &ns).await;
    let mut volume = pv(&pv_name, &class_name, size, "Retain");
    if let Some(h) = handle {
        let spec = volume.spec.as_mut().unwrap();
        spec.host_path = None;
        spec.csi = Some(CSIPersistentVolumeSource {
            driver: "pd.csi.storage.gke.io".into(),
            volume_handle: h.into(),
            ..CSIPersistentVolumeSource::default()
        });
    }
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    create(&pvs, &volume).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let claim = create(&claims, &pvc(&ns, "data", &class_name, size)).await;
    wait_pv_phase(&pvs, &pv_name, "Bound").await;
    delete(&claims, "data").await;
    Released {
        pv: pv_name,
        ns,
        class: class_name,
        claim_uid: claim.metadata.uid.unwrap_or_default(),
    }
}

fn cost(o: &VolumeLeftover) -> Option<volume_leftovers::model::crd::CostEstimate> {
    o.status.as_ref()?.cost.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn findings_carry_their_estimated_cost_exactly_where_the_price_table_prices_them() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    // By driver and the class's parameters: a 2 TiB regional pd-ssd (the issue's ticket).
    let regional = released(
        &admin,
        "cost-repl",
        "2Ti",
        &[("type", "pd-ssd"), ("replication-type", "regional-pd")],
        Some("projects/p/regions/europe-west1/disks/cost-repl"),
    )
    .await;
    // By the class's name: 10 GiB at 0.17.
    let by_class = released(&admin, "cost-class", "10Gi", &[], None).await;
    // No row applies: no cost field.
    let unpriced = released(&admin, "cost-none", "5Gi", &[("type", "pd-ssd")], None).await;
    let table = PriceTable::parse(&format!(
        r#"
currency: USD
note: "the e2e table"
volumes:
  - storageClass: {}
    perGiBMonth: "0.17"
  - driver: pd.csi.storage.gke.io
    type: pd-ssd
    regional: true
    perGiBMonth: "0.34"
"#,
        by_class.class
    ))
    .unwrap();
    let mut settings = test_settings();
    settings.prices = Some(Arc::new(table));
    let operator = Operator::start(cp.operator_client().await, settings);

    let vl = wait_leftover(&leftovers, &regional.pv, "ClaimDeleted with a cost", |o| {
        reason(o) == Some(Reason::ClaimDeleted) && cost(o).is_some()
    })
    .await;
    let c = cost(&vl).unwrap();
    assert_eq!(c.currency, "USD");
    assert_eq!(c.monthly_minor_units, 69632, "2048 GiB × 0.34");
    assert_eq!(
        c.priced_by,
        "driver pd.csi.storage.gke.io type pd-ssd regional"
    );
    let s = vl.status.as_ref().unwrap();
    assert_eq!(
        Some(&c.since),
        s.phase_since.as_ref(),
        "since the volume was released"
    );
    // Released moments ago: no whole day counted yet.
    assert_eq!(c.accrued_minor_units, 0);
    let class = s.storage_class.as_ref().unwrap();
    assert_eq!(
        (
            class.disk_type.as_deref(),
            class.replication_type.as_deref()
        ),
        (Some("pd-ssd"), Some("regional-pd")),
        "the class's disk parameters, through the operator's class store"
    );
    let vl = wait_leftover(&leftovers, &by_class.pv, "ClaimDeleted with a cost", |o| {
        reason(o) == Some(Reason::ClaimDeleted) && cost(o).is_some()
    })
    .await;
    let c = cost(&vl).unwrap();
    assert_eq!(c.monthly_minor_units, 170, "10 GiB × 0.17");
    assert_eq!(c.priced_by, format!("storageClass {}", by_class.class));
    let vl = wait_leftover(&leftovers, &unpriced.pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    assert_eq!(cost(&vl), None, "no row prices a zonal pd-ssd here");

    // kubectl shows it in the wide output (printed: docs/cost.md shows such a run).
    let wide = cp
        .kubectl_ok(&[
            "get",
            "vl",
            &regional.pv,
            &by_class.pv,
            &unpriced.pv,
            "-o",
            "wide",
        ])
        .unwrap();
    println!("{wide}");
    assert!(
        wide.lines().next().unwrap().contains("COST")
            && wide.contains("696.32 USD/month, 0.00 USD since "),
        "{wide}"
    );

    // The gauge adds up what the objects say, per class.
    operator.wait_idle().await;
    let mut objects: BTreeMap<String, i64> = BTreeMap::new();
    for o in leftovers.list(&Default::default()).await.unwrap() {
        if let (Some(c), Some(class)) = (
            cost(&o),
            o.status
                .as_ref()
                .and_then(|s| s.storage_class.as_ref())
                .map(|c| c.name.clone()),
        ) {
            *objects.entry(class).or_default() += c.monthly_minor_units;
        }
    }
    let mut gauge: BTreeMap<String, i64> = BTreeMap::new();
    for (labels, v) in samples(
        &operator.metrics,
        "volume_leftovers_findings_monthly_cost_minor_units",
    ) {
        assert_eq!(labels["currency"], "USD");
        if v != 0.0 {
            *gauge.entry(labels["storage_class"].clone()).or_default() += v as i64;
        }
    }
    assert_eq!(gauge, objects);
    assert_eq!(
        gauge.get(&regional.class).copied(),
        Some(69632),
        "{gauge:?}"
    );

    // Deleted, the Retain volume's tombstone still costs: its disk is still there, since the
    // delete.
    cp.kubectl_ok(&["delete", "pv", &regional.pv]).unwrap();
    let vl = wait_leftover(&leftovers, &regional.pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let c = cost(&vl).expect("a tombstone keeps its cost");
    assert_eq!(c.monthly_minor_units, 69632);
    assert_eq!(
        Some(&c.since),
        vl.status.as_ref().unwrap().deleted_at.as_ref()
    );

    operator.stop().await;
    for r in [&regional, &by_class, &unpriced] {
        delete(&leftovers, &r.pv).await;
        r.cleanup(&admin).await;
    }
}
