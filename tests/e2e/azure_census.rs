//! The operator's Azure census end to end: the operator binary (`run --census-config` with
//! `azure:` sections and nothing else) on the real control plane, listing the project's own ARM
//! test server (`tests/fake-azure-arm/server.py`, NOT Microsoft's; see tests/azure.rs) over
//! TLS, signed in with a client secret the server's token endpoint checks.
//!
//! The cluster's node resource group (`nodeResourceGroup: true`, listed in pages of two): its
//! unattached disk nothing names → DiskWithoutVolume with its size, SKU, region, zone and the
//! claim the driver recorded; an attached one → DiskInUse; another cluster's (its tag) →
//! nothing; the one a Bound PV names in another case → nothing; a Bound PV whose disk is not
//! there → VolumeWithoutDisk. A shared group: a disk nothing attributes → OwnerUnknown. A group
//! answering 403 and one that hangs → `census_up` 0, one log line each, their Bound PVs without
//! disks → nothing, and `scan` exits 4 naming the forbidden group. A Retain PV's claim and then
//! the PV deleted → a tombstone the census confirms; its disk deleted → the tombstone closed
//! after two listings, and never a DiskWithoutVolume about it (the audit log).
//!
//! `scan` signs in as a user-assigned managed identity too, through the host's identity endpoint
//! the server serves (in the form `IDENTITY_ENDPOINT` names); a wrong secret header → auth.
//!
//! When the server's Python cannot be installed the test skips, except in CI (`CI=true`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Api;
use serde_json::{Value, json};
use volume_leftovers::decide::census::{Scope, disk_leftover_name};
use volume_leftovers::decide::classify::NOTE_FOUND;
use volume_leftovers::model::crd::{Hint, Reason, Subject, VolumeLeftover};

use crate::support::*;

const SUB: &str = "00000000-0000-0000-0000-0000000e2e01";
const TENANT: &str = "72f988bf-0000-0000-0000-00000000feed";
const CLIENT: &str = "11111111-2222-3333-4444-555555555555";
const SECRET: &str = "s3cret";
/// A user-assigned managed identity's client id, and the secret header of the host's identity
/// endpoint (`IDENTITY_HEADER`).
const MANAGED: &str = "99999999-8888-7777-6666-555555555555";
const IDENTITY_HEADER: &str = "h0st-secret";
/// The cluster's node resource group, as AKS names it (the PVs' handles lower-case it).
const NODE_RG: &str = "MC_e2e_aks_westeurope";

/// A disk as the Azure Disk CSI driver makes it, with `tags` added.
fn disk(name: &str, state: &str, tags: Value) -> Value {
    let mut t = json!({
        "k8s-azure-created-by": "kubernetes-azure-dd",
        "kubernetes.io-created-for-pv-name": name,
        "kubernetes.io-created-for-pvc-name": "data",
        "kubernetes.io-created-for-pvc-namespace": "shop",
    });
    for (k, v) in tags.as_object().unwrap() {
        t[k] = v.clone();
    }
    json!({
        "name": name, "location": "westeurope", "zones": ["1"],
        "sku": {"name": "StandardSSD_LRS", "tier": "Standard"},
        "tags": t,
        "properties": {
            "creationData": {"createOption": "Empty"},
            "diskSizeGB": 10, "diskSizeBytes": 10737418240u64, "diskState": state,
            "timeCreated": "2026-03-01T10:00:00.1234567+00:00",
            "provisioningState": "Succeeded", "uniqueId": format!("uid-{name}"),
        },
    })
}

fn disk_id(rg: &str, name: &str) -> String {
    format!("/subscriptions/{SUB}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}")
}

/// The server's state; `tomb_disk`: whether the tombstone's disk still exists.
fn state(tomb_disk: bool) -> Value {
    let vm = format!(
        "/subscriptions/{SUB}/resourceGroups/{NODE_RG}/providers/Microsoft.Compute/virtualMachines/aks-node-0"
    );
    let mut attached = disk("pvc-attached", "Attached", json!({}));
    attached["managedBy"] = json!(vm);
    let mut node_disks = vec![
        disk("pvc-orphan", "Unattached", json!({})),
        attached,
        disk(
            "pvc-theirs",
            "Unattached",
            json!({"cluster": "another-cluster"}),
        ),
        disk("PVC-NAMED", "Attached", json!({})),
    ];
    if tomb_disk {
        node_disks.push(disk("pvc-tomb", "Unattached", json!({})));
    }
    json!({
        "tenant": TENANT,
        "clients": {CLIENT: {"secret": SECRET}},
        "managedIdentity": {"header": IDENTITY_HEADER, "clientIds": [MANAGED]},
        "pageSize": 2,
        "subscriptions": {SUB: {
            NODE_RG: {"disks": node_disks},
            "shared-rg": {"disks": [{
                "name": "loose", "location": "westeurope",
                "sku": {"name": "Premium_LRS", "tier": "Premium"},
                "properties": {
                    "creationData": {"createOption": "Empty"}, "diskSizeGB": 4,
                    "diskState": "Unattached", "timeCreated": "2026-03-01T10:00:00+00:00",
                },
            }]},
            "forbidden-rg": {"disks": []},
            "hanging-rg": {"disks": []},
        }},
        "errors": {
            format!("{SUB}/forbidden-rg/disks"): {"status": 403},
            format!("{SUB}/hanging-rg/disks"): {"hang": 600},
        },
    })
}

fn scope(rg: &str) -> Scope {
    volume_leftovers::census::azure::vocabulary::resource_group(SUB, rg)
}

/// The operator binary with the census configuration `config`, short intervals, its log in
/// `log`.
fn start_operator(cp: &ControlPlane, config: &Path, port: u16, log: &Path) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"));
    cmd.args(["run", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--census-interval", "1s", "--census-image-grace", "3s"])
        .args([
            "--census-timeout",
            "3s",
            "--grace",
            "4s",
            "--delete-grace",
            "6s",
        ])
        .arg("--census-config")
        .arg(config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .env_remove("AZURE_FEDERATED_TOKEN_FILE")
        .env_remove("AZURE_CLIENT_ID")
        .env_remove("AZURE_TENANT_ID")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    println!("operator log: {}", log.display());
    Running(cmd.spawn().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_azure_census_reports_leftovers_and_keeps_unknown_groups_unknown() {
    let lease = lease(Flavor::Full).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let cluster = unique("e2e-aks");
    let dir = cp.dir.join(unique("azure-census"));
    let Some(arm) = available(
        "the ARM test server",
        ArmServer::start(dir.join("arm"), state(true), SECRET),
    ) else {
        return;
    };

    let class = unique("azure-sc");
    create(
        &Api::<StorageClass>::all(admin.clone()),
        &crate::support::class(&class, "Retain"),
    )
    .await;
    let ns = unique("azure-ns");
    create_ns(&admin, &ns).await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let named_pv = unique("az-named-pv");
    let gone_pv = unique("az-gone-pv");
    let forbidden_pv = unique("az-forbidden-pv");
    let hanging_pv = unique("az-hanging-pv");
    let tomb_pv = unique("az-tomb-pv");
    let node_rg_lower = NODE_RG.to_ascii_lowercase();
    for (pv, claim, handle) in [
        // The driver writes the id as ARM returned it: here lower-cased group, upper-cased disk.
        (&named_pv, "named", disk_id(&node_rg_lower, "pvc-named")),
        (&gone_pv, "gone", disk_id(NODE_RG, "gone-disk")),
        (
            &forbidden_pv,
            "forbidden",
            disk_id("forbidden-rg", "hidden"),
        ),
        (&hanging_pv, "hanging", disk_id("hanging-rg", "far")),
        (&tomb_pv, "tomb", disk_id(NODE_RG, "pvc-tomb")),
    ] {
        create(&pvs, &azure_pv(pv, &class, &handle)).await;
        create(&claims, &pvc(&ns, claim, &class, "10Gi")).await;
        wait_pv_phase(&pvs, pv, "Bound").await;
    }

    let config = dir.join("census.yaml");
    std::fs::write(
        &config,
        format!(
            "clusterName: {cluster}\nazure:\n{}{}{}",
            arm.section(
                SUB,
                &[NODE_RG],
                TENANT,
                CLIENT,
                "    nodeResourceGroup: true\n    clusterTag: cluster\n"
            ),
            arm.section(SUB, &["shared-rg", "forbidden-rg"], TENANT, CLIENT, ""),
            arm.section(SUB, &["hanging-rg"], TENANT, CLIENT, ""),
        ),
    )
    .unwrap();
    let port = free_port();
    let log = dir.join("operator.log");
    let mut operator = start_operator(cp, &config, port, &log);
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());

    // The cluster's unattached disk nothing names.
    let orphan_name = disk_leftover_name(&scope(NODE_RG), "pvc-orphan");
    let orphan = wait_leftover(&leftovers, &orphan_name, "DiskWithoutVolume", |o| {
        reason(o) == Some(Reason::DiskWithoutVolume)
    })
    .await;
    let s = orphan.status.clone().unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.hints.is_empty(), "ours, by its group: {:?}", s.hints);
    assert_eq!(s.capacity_bytes, Some(10 << 30));
    let info = s.image.unwrap();
    assert_eq!(
        (
            info.account.as_deref(),
            info.resource_group.as_deref(),
            info.region.as_deref(),
            info.zone.as_deref(),
            info.disk_type.as_deref(),
        ),
        (
            Some(SUB),
            Some(node_rg_lower.as_str()),
            Some("westeurope"),
            Some("westeurope-1"),
            Some("StandardSSD_LRS")
        )
    );
    assert_eq!(
        info.owner.and_then(|o| o.claim_name).as_deref(),
        Some("data")
    );
    assert!(
        s.message.starts_with("Azure managed disk pvc-orphan"),
        "{}",
        s.message
    );

    // Attached: in use. Unattributed, in a shared group: OwnerUnknown.
    let attached = wait_leftover(
        &leftovers,
        &disk_leftover_name(&scope(NODE_RG), "pvc-attached"),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    assert_eq!(attached.status.unwrap().hints, [Hint::DiskInUse]);
    let loose = wait_leftover(
        &leftovers,
        &disk_leftover_name(&scope("shared-rg"), "loose"),
        "DiskWithoutVolume",
        |o| reason(o) == Some(Reason::DiskWithoutVolume),
    )
    .await;
    assert_eq!(loose.status.unwrap().hints, [Hint::OwnerUnknown]);

    // The Bound PV whose disk is not there.
    let lost = wait_leftover(&leftovers, &gone_pv, "VolumeWithoutDisk", |o| {
        reason(o) == Some(Reason::VolumeWithoutDisk)
    })
    .await;
    assert_eq!(lost.status.unwrap().subject, Subject::VolumeAndDisk);

    // Unknown: the forbidden group and the hanging one.
    wait_for(
        "census_up of the forbidden and hanging groups to be 0",
        Duration::from_secs(90),
        || async {
            let up = |rg: &str| {
                scraped(
                    port,
                    &format!(r#"volume_leftovers_census_up{{backend="azure",scope="{SUB}/{rg}"}}"#),
                )
            };
            (up("forbidden-rg") == Some(0.0)
                && up("hanging-rg") == Some(0.0)
                && up(&node_rg_lower) == Some(1.0)
                && up("shared-rg") == Some(1.0))
            .then_some(())
        },
    )
    .await;
    wait_census_settled(port, "azure", &format!("{SUB}/{node_rg_lower}")).await;
    wait_census_settled(port, "azure", &format!("{SUB}/shared-rg")).await;
    for not in [
        named_pv.clone(),
        forbidden_pv.clone(),
        hanging_pv.clone(),
        disk_leftover_name(&scope(NODE_RG), "pvc-theirs"),
        disk_leftover_name(&scope(NODE_RG), "pvc-named"),
        disk_leftover_name(&scope(NODE_RG), "pvc-tomb"),
    ] {
        assert!(
            leftovers.get_opt(&not).await.unwrap().is_none(),
            "{not}: a finding about a named disk, another cluster's or an Unknown group's"
        );
    }
    // The hanging group's first listing ends when its three attempts have timed out.
    let failed = |rg: &'static str| {
        let log = log.clone();
        move || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap()
                    .lines()
                    .any(|l| l.contains("the census of the scope failed") && l.contains(rg))
                    .then_some(())
            }
        }
    };
    wait_for(
        "the hanging group's failure line",
        Duration::from_secs(90),
        failed("hanging-rg"),
    )
    .await;
    let text = std::fs::read_to_string(&log).unwrap();
    for (rg, category) in [("forbidden-rg", "forbidden"), ("hanging-rg", "timeout")] {
        let failing: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("the census of the scope failed") && l.contains(rg))
            .collect();
        assert_eq!(
            failing.len(),
            1,
            "one line when {rg} starts failing:\n{text}"
        );
        assert!(failing[0].contains(category), "{}", failing[0]);
    }
    assert!(
        text.contains("Microsoft.Compute/disks/read"),
        "the 403's line names the action:\n{text}"
    );

    // `scan` with the same configuration: it does not know about the forbidden group, and
    // says so.
    let out = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "--census-timeout", "2s", "--census-config"])
        .arg(&config)
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the Azure census of azure:{SUB}/forbidden-rg failed (forbidden)"
        )),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&gone_pv),
        "scan finds the lost disk too:\n{stdout}"
    );

    // A managed identity (no secret, no federated token): the token from the host's identity
    // endpoint, here in the form azure_identity reads from IDENTITY_ENDPOINT (IMDS's own
    // address cannot be served on 127.0.0.1); a wrong secret header is an auth failure.
    let url = format!("https://127.0.0.1:{}", arm.port);
    let managed_config = dir.join("census-managed.yaml");
    std::fs::write(
        &managed_config,
        format!(
            "clusterName: {cluster}\nazure:\n  - subscription: {SUB}\n    resourceGroups: [{NODE_RG}]\n    clientId: {MANAGED}\n    endpoint: {url}\n    caFile: {}\n    nodeResourceGroup: true\n    clusterTag: cluster\n",
            arm.dir.join("tls/ca.pem").display()
        ),
    )
    .unwrap();
    let managed_scan = |header: &str| {
        Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
            .args(["scan", "--census-timeout", "2s", "--census-config"])
            .arg(&managed_config)
            .env("KUBECONFIG", cp.kubeconfig("operator"))
            .env("IDENTITY_ENDPOINT", format!("{url}/msi/token"))
            .env("IDENTITY_HEADER", header)
            .env_remove("AZURE_FEDERATED_TOKEN_FILE")
            .env_remove("AZURE_CLIENT_ID")
            .env_remove("AZURE_TENANT_ID")
            .output()
            .unwrap()
    };
    let before = arm.requests("/msi/token");
    let out = managed_scan(IDENTITY_HEADER);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "findings, nothing unknown:\n{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&gone_pv),
        "the managed identity lists the node resource group:\n{stderr}"
    );
    assert!(
        arm.requests("/msi/token") > before,
        "the token came from the identity endpoint"
    );
    let out = managed_scan("not-the-host's");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the Azure census of azure:{SUB}/{node_rg_lower} failed (auth)"
        )),
        "{stderr}"
    );

    // The tombstone: the claim deleted (Released, ClaimDeleted), then the PV (VolumeDeleted,
    // subject Disk, the census finds the disk); the disk deleted → closed after two listings.
    delete(&claims, "tomb").await;
    wait_pv_phase(&pvs, &tomb_pv, "Released").await;
    wait_leftover(&leftovers, &tomb_pv, "ClaimDeleted", |o| {
        reason(o) == Some(Reason::ClaimDeleted)
    })
    .await;
    delete(&pvs, &tomb_pv).await;
    let tomb = wait_leftover(&leftovers, &tomb_pv, "VolumeDeleted", |o| {
        reason(o) == Some(Reason::VolumeDeleted)
    })
    .await;
    let s = tomb.status.unwrap();
    assert_eq!(s.subject, Subject::Disk);
    assert!(s.message.ends_with(NOTE_FOUND), "{}", s.message);
    wait_census_settled(port, "azure", &format!("{SUB}/{node_rg_lower}")).await;
    let runs = format!(
        r#"volume_leftovers_census_runs_total{{backend="azure",scope="{SUB}/{node_rg_lower}"}}"#
    );
    arm.set_state(&state(false));
    let from = scraped(port, &runs).unwrap_or(0.0);
    wait_leftover_gone(&leftovers, &tomb_pv).await;
    let listings = scraped(port, &runs).unwrap_or(0.0) - from;
    assert!(
        listings >= 2.0,
        "closed after {listings} listing(s) without the disk"
    );
    let tomb_disk = disk_leftover_name(&scope(NODE_RG), "pvc-tomb");
    assert_eq!(
        cp.operator_writes(&tomb_disk),
        0,
        "never a DiskWithoutVolume about the tombstone's disk"
    );

    operator.stop();
    for n in [
        orphan_name,
        disk_leftover_name(&scope(NODE_RG), "pvc-attached"),
        disk_leftover_name(&scope("shared-rg"), "loose"),
        gone_pv.clone(),
    ] {
        let _ = leftovers.delete(&n, &Default::default()).await;
    }
    for pv in [&named_pv, &gone_pv, &forbidden_pv, &hanging_pv] {
        let _ = pvs.delete(pv, &Default::default()).await;
    }
}
