//! Odd and malformed objects that the API server accepts, on the quiet control plane (nothing
//! rewrites their status): the operator neither crashes nor says more than the objects show,
//! and every row the seed's original tool prints has a VolumeLeftover and a `scan` row that agree
//! with it on the tool's seven keys.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use volume_leftovers::model::crd::{Hint, Reason, Tristate, VolumeLeftover};
use volume_leftovers::scan::SevenKeys;

use crate::support::*;

/// One odd object: how to build it from the base PV, the phase to give it (None: leave what the
/// API server sets), and what the operator must publish about it.
/// How an odd object is made from the base PV.
type Edit = Box<dyn Fn(&mut Value, &Ctx)>;

struct Odd {
    what: &'static str,
    edit: Edit,
    phase: Option<&'static str>,
    message: Option<&'static str>,
    expect: Option<Reason>,
    hints: &'static [Hint],
}

struct Ctx {
    ns: String,
    present_uid: String,
}

fn odd(
    what: &'static str,
    phase: Option<&'static str>,
    expect: Option<Reason>,
    edit: impl Fn(&mut Value, &Ctx) + 'static,
) -> Odd {
    Odd {
        what,
        edit: Box::new(edit),
        phase,
        message: None,
        expect,
        hints: &[],
    }
}

impl Odd {
    fn hints(mut self, h: &'static [Hint]) -> Odd {
        self.hints = h;
        self
    }
    fn message(mut self, m: &'static str) -> Odd {
        self.message = Some(m);
        self
    }
}

fn claim_ref(ns: &str, name: &str, uid: &str) -> Value {
    json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns, "name": name, "uid": uid})
}

fn source(v: &mut Value, key: &str, body: Value) {
    let spec = v["spec"].as_object_mut().unwrap();
    spec.remove("hostPath");
    spec.insert(key.into(), body);
}

const RELEASED: Option<&str> = Some("Released");

fn table() -> Vec<Odd> {
    use Reason::*;
    let gone =
        |v: &mut Value, c: &Ctx| v["spec"]["claimRef"] = claim_ref(&c.ns, "gone", "uid-gone");
    vec![
        odd(
            "claimref-no-namespace",
            RELEASED,
            Some(ClaimRefInvalid),
            |v, _| {
                v["spec"]["claimRef"] =
                    json!({"kind": "PersistentVolumeClaim", "name": "c", "uid": "u1"})
            },
        )
        .hints(&[Hint::ClaimRefIncomplete]),
        odd(
            "claimref-no-name",
            RELEASED,
            Some(ClaimRefInvalid),
            |v, c| {
                v["spec"]["claimRef"] =
                    json!({"kind": "PersistentVolumeClaim", "namespace": c.ns, "uid": "u1"})
            },
        )
        .hints(&[Hint::ClaimRefIncomplete]),
        odd("claimref-empty", RELEASED, Some(ClaimRefInvalid), |v, _| {
            v["spec"]["claimRef"] = json!({})
        })
        .hints(&[Hint::ClaimRefIncomplete]),
        odd("claimref-no-uid", RELEASED, Some(ClaimDeleted), |v, c| {
            v["spec"]["claimRef"] =
                json!({"kind": "PersistentVolumeClaim", "namespace": c.ns, "name": "gone"})
        }),
        odd(
            "claimref-to-pod",
            RELEASED,
            Some(ClaimRefInvalid),
            |v, c| {
                v["spec"]["claimRef"] =
                    json!({"kind": "Pod", "namespace": c.ns, "name": "p", "uid": "u"})
            },
        )
        .hints(&[Hint::ClaimRefNotAClaim]),
        odd(
            "claimref-to-pod-bound",
            Some("Bound"),
            Some(BoundClaimMissing),
            |v, c| {
                v["spec"]["claimRef"] =
                    json!({"kind": "Pod", "namespace": c.ns, "name": "p", "uid": "u"})
            },
        )
        .hints(&[Hint::ClaimRefNotAClaim]),
        odd(
            "claimref-with-field-path",
            RELEASED,
            Some(ClaimDeleted),
            |v, c| {
                v["spec"]["claimRef"] = claim_ref(&c.ns, "gone", "u");
                v["spec"]["claimRef"]["fieldPath"] = json!("spec.containers{x}");
                v["spec"]["claimRef"]["resourceVersion"] = json!("12345");
            },
        ),
        odd(
            "claimref-namespace-missing",
            RELEASED,
            Some(ClaimDeleted),
            |v, _| v["spec"]["claimRef"] = claim_ref("no-such-namespace-xyz", "gone", "u"),
        ),
        odd("claim-recreated", RELEASED, Some(ClaimRecreated), |v, c| {
            v["spec"]["claimRef"] = claim_ref(&c.ns, "present", "an-older-uid")
        }),
        odd(
            "claim-still-present",
            RELEASED,
            Some(ClaimStillPresent),
            |v, c| v["spec"]["claimRef"] = claim_ref(&c.ns, "present", &c.present_uid),
        ),
        odd(
            "released-no-claimref",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |_, _| {},
        ),
        odd(
            "unknown-phase-claim-gone",
            Some("Lost"),
            Some(PreboundClaimMissing),
            gone,
        )
        .hints(&[Hint::PhaseUnknown]),
        odd("unknown-phase-no-claim", Some("Lost"), None, |_, _| {}),
        odd("lowercase-phase", Some("released"), None, |_, _| {}),
        odd(
            "pending-claim-gone",
            Some("Pending"),
            Some(PreboundClaimMissing),
            gone,
        ),
        odd(
            "available-prebound-gone",
            Some("Available"),
            Some(PreboundClaimMissing),
            |v, c| {
                v["spec"]["claimRef"] =
                    json!({"kind": "PersistentVolumeClaim", "namespace": c.ns, "name": "never"})
            },
        ),
        odd("available-plain", Some("Available"), None, |_, _| {}),
        odd(
            "bound-claim-gone",
            Some("Bound"),
            Some(BoundClaimMissing),
            gone,
        ),
        odd(
            "bound-claim-recreated",
            Some("Bound"),
            Some(BoundClaimMissing),
            |v, c| v["spec"]["claimRef"] = claim_ref(&c.ns, "present", "an-older-uid"),
        ),
        odd("bound-healthy", Some("Bound"), None, |v, c| {
            v["spec"]["claimRef"] = claim_ref(&c.ns, "present", &c.present_uid)
        }),
        odd("bound-no-claimref", Some("Bound"), None, |_, _| {}),
        odd(
            "bound-claimref-no-namespace",
            Some("Bound"),
            None,
            |v, _| {
                v["spec"]["claimRef"] =
                    json!({"kind": "PersistentVolumeClaim", "name": "c", "uid": "u1"})
            },
        ),
        odd(
            "failed-with-message",
            Some("Failed"),
            Some(ReclaimFailed),
            gone,
        )
        .message("Recycle failed: the recycler pod was evicted"),
        odd(
            "failed-recycle",
            Some("Failed"),
            Some(ReclaimFailed),
            |v, _| v["spec"]["persistentVolumeReclaimPolicy"] = json!("Recycle"),
        ),
        odd(
            "failed-claimref-no-namespace",
            Some("Failed"),
            Some(ReclaimFailed),
            |v, _| v["spec"]["claimRef"] = json!({"name": "c"}),
        )
        .hints(&[Hint::ClaimRefIncomplete]),
        odd(
            "delete-policy-released",
            RELEASED,
            Some(ClaimDeleted),
            |v, c| {
                v["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
                v["spec"]["claimRef"] = claim_ref(&c.ns, "gone", "u");
            },
        )
        .hints(&[Hint::ReclaimPolicyDelete]),
        odd(
            "class-missing",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| v["spec"]["storageClassName"] = json!("no-such-class"),
        )
        .hints(&[Hint::StorageClassMissing]),
        odd(
            "class-empty-string",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| v["spec"]["storageClassName"] = json!(""),
        ),
        odd(
            "class-253-chars",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| v["spec"]["storageClassName"] = json!(format!("c{}", "x".repeat(252))),
        )
        .hints(&[Hint::StorageClassMissing]),
        odd(
            "capacity-in-bytes",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| v["spec"]["capacity"] = json!({"storage": "21474836480"}),
        ),
        odd(
            "capacity-20gi",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| v["spec"]["capacity"] = json!({"storage": "20Gi"}),
        ),
        odd(
            "huge-annotations",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                v["metadata"]["annotations"] = json!({
                    "example.com/blob": "x".repeat(200 * 1024),
                    "example.com/unicode": "ボリューム 🗄️ \u{0}-free text",
                })
            },
        ),
        odd(
            "block-many-modes",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                v["spec"]["volumeMode"] = json!("Block");
                v["spec"]["accessModes"] =
                    json!(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"]);
                v["spec"]["mountOptions"] = json!(["discard"]);
            },
        ),
        odd("src-csi", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(
                v,
                "csi",
                json!({"driver": "rbd.csi.ceph.com", "volumeHandle": "0001-0009-rook-ceph-0000000000000002-x",
                "volumeAttributes": {"pool": "p", "imageName": "csi-vol-x", "clusterID": "rook-ceph", "big": "y".repeat(4096)}}),
            )
        }),
        odd("src-rbd", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(
                v,
                "rbd",
                json!({"monitors": ["10.0.0.1:6789"], "image": "img"}),
            )
        }),
        odd("src-gce", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(v, "gcePersistentDisk", json!({"pdName": "disk-1"}))
        }),
        odd("src-aws", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(v, "awsElasticBlockStore", json!({"volumeID": "vol-1"}))
        }),
        odd(
            "src-azure-disk",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                source(
                    v,
                    "azureDisk",
                    json!({"diskName": "d", "diskURI": "https://x/d"}),
                )
            },
        ),
        odd(
            "src-azure-file",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                source(
                    v,
                    "azureFile",
                    json!({"secretName": "s", "shareName": "sh"}),
                )
            },
        ),
        odd(
            "src-cinder",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "cinder", json!({"volumeID": "c-1"})),
        ),
        odd(
            "src-vsphere",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "vsphereVolume", json!({"volumePath": "[ds] v.vmdk"})),
        ),
        odd("src-nfs", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(v, "nfs", json!({"server": "10.0.0.3", "path": "/export"}))
        }),
        odd("src-local", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(v, "local", json!({"path": "/mnt/disks/1"}));
            v["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}});
        }),
        odd("src-iscsi", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(
                v,
                "iscsi",
                json!({"targetPortal": "10.0.0.2:3260", "iqn": "iqn.2001-04.com.example:s", "lun": 0}),
            )
        }),
        odd("src-fc", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(
                v,
                "fc",
                json!({"targetWWNs": ["500a0982991b8dc5"], "lun": 2}),
            )
        }),
        odd("src-flex", RELEASED, Some(ReleasedWithoutClaim), |v, _| {
            source(v, "flexVolume", json!({"driver": "example/lvm"}))
        }),
        odd(
            "src-cephfs",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "cephfs", json!({"monitors": ["10.0.0.1:6789"]})),
        ),
        odd(
            "src-portworx",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "portworxVolume", json!({"volumeID": "px-1"})),
        ),
        // The in-tree sources Kubernetes no longer mounts (their plugins were removed) but
        // still accepts in the API: old clusters keep such PVs, and their disks.
        odd(
            "src-glusterfs",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                source(
                    v,
                    "glusterfs",
                    json!({"endpoints": "glusterfs-cluster", "path": "vol_1"}),
                )
            },
        ),
        odd(
            "src-flocker",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "flocker", json!({"datasetName": "ds-1"})),
        ),
        odd(
            "src-photon",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "photonPersistentDisk", json!({"pdID": "pd-1"})),
        ),
        odd(
            "src-quobyte",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                source(
                    v,
                    "quobyte",
                    json!({"registry": "10.0.0.4:7861", "volume": "vol"}),
                )
            },
        ),
        odd(
            "src-scaleio",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| {
                source(
                    v,
                    "scaleIO",
                    json!({"gateway": "https://gw", "system": "sys", "volumeName": "sio-1", "secretRef": {"name": "sio"}}),
                )
            },
        ),
        odd(
            "src-storageos",
            RELEASED,
            Some(ReleasedWithoutClaim),
            |v, _| source(v, "storageos", json!({"volumeName": "sv-1"})),
        ),
        odd("src-none-of-them", RELEASED, None, |v, _| {
            // Admitted only if the API allows a PV without a source; expected to be refused.
            v["spec"].as_object_mut().unwrap().remove("hostPath");
        }),
        odd("no-capacity", RELEASED, None, |v, _| {
            // Expected to be refused by the API server.
            v["spec"].as_object_mut().unwrap().remove("capacity");
        }),
    ]
}

fn seven_keys_of(o: &VolumeLeftover) -> SevenKeys {
    let s = o.status.as_ref().expect("status");
    let claim = s.claim.as_ref();
    SevenKeys {
        name: o.spec.volume_name.clone(),
        phase: s.phase.clone(),
        reclaim: s.reclaim_policy.clone(),
        claim: claim
            .filter(|c| c.namespace.is_some() && c.name.is_some())
            .map(|c| c.reference.clone()),
        claim_missing: claim.map_or(Some(false), |c| c.missing.known()),
        storage_class: s.storage_class.as_ref().map(|c| c.name.clone()),
        capacity: s.capacity.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_objects_the_api_server_accepts_are_reported_as_the_original_tool_would() {
    let lease = lease(Flavor::Quiet).await;
    let cp = lease.cp;
    let admin = cp.admin().await;
    let pvs = Api::<PersistentVolume>::all(admin.clone());
    let prefix = unique("odd");
    let ns = format!("{prefix}-ns");
    create_ns(&admin, &ns).await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(admin.clone(), &ns);
    let present = create(&claims, &pvc(&ns, "present", "", "1Gi")).await;
    let ctx = Ctx {
        ns: ns.clone(),
        present_uid: present.metadata.uid.clone().unwrap(),
    };

    // Create every object; what the API server refuses is listed, and must be what we expect
    // it to refuse.
    let mut accepted: BTreeMap<String, &Odd> = BTreeMap::new();
    let mut refused = Vec::new();
    let table = table();
    for o in &table {
        let name = if o.what == "huge-annotations" {
            // And a name of the longest allowed length.
            let n = format!("{prefix}-{}", o.what);
            format!("{n}{}", "n".repeat(253 - n.len()))
        } else {
            format!("{prefix}-{}", o.what)
        };
        let mut v = json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "hostPath": {"path": "/mnt/odd"}}
        });
        (o.edit)(&mut v, &ctx);
        let pv: PersistentVolume = serde_json::from_value(v).expect("a PV");
        match pvs.create(&PostParams::default(), &pv).await {
            Ok(_) => {}
            Err(e) => {
                refused.push((o.what, e.to_string()));
                continue;
            }
        }
        let mut status = json!({});
        if let Some(p) = o.phase {
            status["phase"] = json!(p);
        }
        if let Some(m) = o.message {
            status["message"] = json!(m);
        }
        if o.phase.is_some() {
            pvs.patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
            .unwrap_or_else(|e| panic!("status of {}: {e}", o.what));
        }
        accepted.insert(name, o);
    }
    let refused_names: Vec<&str> = refused.iter().map(|(w, _)| *w).collect();
    assert_eq!(
        refused_names,
        ["src-none-of-them", "no-capacity"],
        "the API server refused: {refused:?}"
    );
    assert!(accepted.len() >= 30, "{} odd objects", accepted.len());

    let operator = Operator::start(cp.operator_client().await, test_settings());
    let leftovers = Api::<VolumeLeftover>::all(admin.clone());
    for (name, o) in &accepted {
        if let Some(want) = o.expect {
            let vl = wait_leftover(&leftovers, name, o.what, |vl| reason(vl) == Some(want)).await;
            let hints = vl.status.unwrap().hints;
            assert_eq!(hints, o.hints, "hints of {}", o.what);
        }
    }
    operator.wait_idle().await;
    assert_eq!(
        metric(&operator.metrics, "volume_leftovers_skipped_volumes"),
        accepted
            .values()
            .filter(|o| {
                matches!(
                    o.what,
                    "unknown-phase-no-claim"
                        | "lowercase-phase"
                        | "bound-no-claimref"
                        | "bound-claimref-no-namespace"
                )
            })
            .count() as f64,
        "skipped volumes are counted once each"
    );
    for (name, o) in &accepted {
        if o.expect.is_none() {
            assert!(
                leftovers.get_opt(name).await.unwrap().is_none(),
                "no finding for {}",
                o.what
            );
        }
    }
    // claim.missing never says more than the lookup showed.
    let vl = leftovers
        .get(&format!("{prefix}-claim-recreated"))
        .await
        .unwrap();
    assert_eq!(vl.status.unwrap().claim.unwrap().missing, Tristate::False);

    // The seed's original tool, the operator's objects and scan agree on the seven keys.
    let python = String::from_utf8(
        Command::new(repo().join("scripts/seed-python.sh"))
            .output()
            .expect("seed-python.sh")
            .stdout,
    )
    .unwrap();
    let out = Command::new(python.trim())
        .arg(repo().join("tests/seed/leftovers.py"))
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the original tool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seed: Vec<SevenKeys> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<SevenKeys>(l).ok())
        .filter(|k| k.name.starts_with(&prefix))
        .collect();
    // The original tool has no graces: neither has this scan (by default it holds back, as the
    // operator does, the states the objects do not date).
    let scan = Command::new(env!("CARGO_BIN_EXE_volume-leftovers"))
        .args(["scan", "--grace", "0s", "--delete-grace", "0s"])
        .env("KUBECONFIG", cp.kubeconfig("operator"))
        .output()
        .unwrap();
    assert_eq!(scan.status.code(), Some(3), "leftovers found");
    let scan_rows: BTreeMap<String, SevenKeys> = String::from_utf8(scan.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<SevenKeys>(l).ok())
        .map(|k| (k.name.clone(), k))
        .collect();
    assert!(
        seed.len() >= 25,
        "the original tool printed {} rows",
        seed.len()
    );
    for row in &seed {
        assert_eq!(
            scan_rows.get(&row.name),
            Some(row),
            "scan row of {}",
            row.name
        );
        let vl = leftovers
            .get_opt(&row.name)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("no VolumeLeftover for the original tool's row {row:?}"));
        let mut keys = seven_keys_of(&vl);
        // The one key the object cannot carry as the tool prints it: an empty class name (no
        // class at all, for the object).
        if row.storage_class.as_deref() == Some("") && keys.storage_class.is_none() {
            keys.storage_class = Some(String::new());
        }
        assert_eq!(&keys, row, "VolumeLeftover of {}", row.name);
    }

    operator.stop().await;
    for name in accepted.keys() {
        delete(&pvs, name).await;
        delete(&leftovers, name).await;
    }
    delete(&claims, "present").await;
    delete(&Api::<Namespace>::all(admin), &ns).await;
    let _ = Duration::ZERO;
}
