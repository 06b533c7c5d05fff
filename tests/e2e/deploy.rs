//! deploy/ as the real API server sees it: the manifests apply, and the operator's identity may
//! read volumes, claims and classes but never write them.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};

use crate::support::*;

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];
const VOLUME_SIDE: [&str; 3] = [
    "persistentvolumes",
    "persistentvolumeclaims",
    "storageclasses.storage.k8s.io",
];

fn can_i(cp: &ControlPlane, verb: &str, resource: &str) -> bool {
    let out = cp.kubectl(&["auth", "can-i", verb, resource, "--as", OPERATOR_USER]);
    let answer = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match answer.as_str() {
        "yes" => true,
        "no" => false,
        other => panic!(
            "kubectl auth can-i {verb} {resource}: {other:?} {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

#[test]
fn the_api_server_denies_the_operator_identity_every_write_on_volumes_claims_and_classes() {
    let cp = cp();
    for resource in VOLUME_SIDE {
        for verb in ["get", "list", "watch"] {
            assert!(
                can_i(cp, verb, resource),
                "{verb} {resource} must be allowed"
            );
        }
        for verb in WRITE_VERBS {
            assert!(
                !can_i(cp, verb, resource),
                "{verb} {resource} must be denied"
            );
        }
    }
    // Claims in any namespace, and the status subresource, are just as closed.
    assert!(!can_i(cp, "patch", "persistentvolumes/status"));
    assert!(!can_i(cp, "update", "persistentvolumeclaims/status"));
    // What it needs on its own objects, and nothing more.
    for verb in ["get", "list", "watch", "create", "patch", "delete"] {
        assert!(can_i(cp, verb, "volumeleftovers.leftovers.dev"), "{verb}");
    }
    assert!(can_i(cp, "patch", "volumeleftovers.leftovers.dev/status"));
    assert!(!can_i(cp, "update", "volumeleftovers.leftovers.dev"));
    assert!(!can_i(cp, "get", "secrets"));
    assert!(!can_i(cp, "list", "pods"));
}

#[test]
fn every_deploy_manifest_is_accepted_by_the_api_server() {
    let cp = cp();
    let out = cp.kubectl(&[
        "apply",
        "--dry-run=server",
        "-k",
        repo().join("deploy").to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "kubectl apply -k deploy/ --dry-run=server: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let applied = String::from_utf8_lossy(&out.stdout);
    for kind in [
        "customresourcedefinition.apiextensions.k8s.io/volumeleftovers.leftovers.dev",
        "clusterrole.rbac.authorization.k8s.io/volume-leftovers",
        "deployment.apps/volume-leftovers",
    ] {
        assert!(applied.contains(kind), "{kind} missing from:\n{applied}");
    }
}

#[test]
fn the_cluster_role_has_a_reason_on_every_rule_and_binds_the_identity_tests_use() {
    let text = std::fs::read_to_string(repo().join("deploy/clusterrole.yaml")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("- apiGroups:") {
            assert!(
                i > 0 && lines[i - 1].starts_with('#'),
                "rule at line {} has no comment giving its reason",
                i + 1
            );
        }
    }
    let role: ClusterRole = serde_saphyr::from_str(&text).unwrap();
    for rule in role.rules.unwrap() {
        assert!(!rule.verbs.iter().any(|v| v == "*"), "no wildcard verbs");
        let resources = rule.resources.unwrap_or_default();
        assert!(!resources.iter().any(|r| r == "*"), "no wildcard resources");
        if resources.iter().any(|r| {
            [
                "persistentvolumes",
                "persistentvolumeclaims",
                "storageclasses",
            ]
            .iter()
            .any(|v| r.starts_with(v))
        }) {
            assert!(
                rule.verbs
                    .iter()
                    .all(|v| ["get", "list", "watch"].contains(&v.as_str())),
                "read-only on the volume side: {:?}",
                rule.verbs
            );
        }
    }
    let binding: ClusterRoleBinding = serde_saphyr::from_str(
        &std::fs::read_to_string(repo().join("deploy/clusterrolebinding.yaml")).unwrap(),
    )
    .unwrap();
    let s = &binding.subjects.unwrap()[0];
    assert_eq!(
        format!(
            "system:serviceaccount:{}:{}",
            s.namespace.as_deref().unwrap(),
            s.name
        ),
        OPERATOR_USER,
        "up.sh's token for the operator names the ServiceAccount deploy/ binds"
    );
}

#[tokio::test]
async fn kubectl_explain_shows_the_field_docs_from_the_rust_types() {
    let cp = cp();
    // The API server publishes a new CRD's OpenAPI a moment after it is established.
    let out = wait_for(
        "the CRD's OpenAPI to be published",
        std::time::Duration::from_secs(60),
        || async {
            cp.kubectl_ok(&["explain", "volumeleftover.status.claim.missing"])
                .ok()
        },
    )
    .await;
    let text = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(text.contains("a 403 is not a 404"), "{out}");
    let out = cp.kubectl_ok(&["explain", "vl.status.reason"]).unwrap();
    assert!(out.contains("ClaimRecreated"), "{out}");
}
