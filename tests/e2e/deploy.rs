//! deploy/ as the real API server sees it: the manifests apply, and the operator's identity may
//! read volumes, claims and classes but never write them. deploy/ is generated from the Helm chart
//! (scripts/render-deploy.sh; tests/e2e/chart.rs checks it is current).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role};

use crate::support::*;

const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];
const VOLUME_SIDE: [&str; 3] = [
    "persistentvolumes",
    "persistentvolumeclaims",
    "storageclasses.storage.k8s.io",
];
const SNAPSHOT_GROUP: &str = "snapshot.storage.k8s.io";
const SNAPSHOT_SIDE: [&str; 2] = ["volumesnapshotcontents", "volumesnapshots"];

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
        for verb in ["list", "watch"] {
            assert!(
                can_i(cp, verb, resource),
                "{verb} {resource} must be allowed"
            );
        }
        // One GET, by `scan`, of a claim that looked missing; nothing gets a PV or a class.
        assert_eq!(
            can_i(cp, "get", resource),
            resource == "persistentvolumeclaims",
            "get {resource}"
        );
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
    for verb in ["list", "watch", "create", "patch", "delete"] {
        assert!(can_i(cp, verb, "volumeleftovers.leftovers.dev"), "{verb}");
    }
    assert!(can_i(cp, "patch", "volumeleftovers.leftovers.dev/status"));
    assert!(!can_i(cp, "update", "volumeleftovers.leftovers.dev"));
    // Nothing reads one VolumeLeftover: the reflector's objects are what is compared.
    assert!(!can_i(cp, "get", "volumeleftovers.leftovers.dev"));
    assert!(!can_i(cp, "get", "volumeleftovers.leftovers.dev/status"));
    assert!(!can_i(cp, "get", "secrets"));
    assert!(!can_i(cp, "list", "pods"));
    // Snapshots, as read-only as volumes: `scan` lists both kinds and re-reads one object with
    // a GET; nothing may bind, patch or delete one.
    for resource in SNAPSHOT_SIDE {
        for verb in ["get", "list"] {
            assert!(
                may(cp, verb, SNAPSHOT_GROUP, resource),
                "{verb} {resource} must be allowed"
            );
        }
        for verb in WRITE_VERBS {
            assert!(
                !may(cp, verb, SNAPSHOT_GROUP, resource),
                "{verb} {resource} must be denied"
            );
        }
    }
    assert!(!may(cp, "list", SNAPSHOT_GROUP, "volumesnapshotclasses"));
}

/// What the API server's authorizer answers for the operator's identity, asked with a
/// SubjectAccessReview that names the API group: `kubectl auth can-i` cannot name the group of a
/// resource the server does not serve (the snapshot CRDs are not installed here), and would ask
/// about a resource called `volumesnapshots.snapshot.storage.k8s.io` in the core group.
fn may(cp: &ControlPlane, verb: &str, group: &str, resource: &str) -> bool {
    let review = serde_json::json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": OPERATOR_USER,
            "groups": [
                "system:serviceaccounts",
                "system:serviceaccounts:volume-leftovers",
                "system:authenticated"
            ],
            "resourceAttributes": {"verb": verb, "group": group, "resource": resource}
        }
    });
    let file = cp.dir.join(format!("{}.json", unique("access-review")));
    std::fs::write(&file, review.to_string()).unwrap();
    let answer = cp
        .kubectl_ok(&[
            "create",
            "-f",
            file.to_str().unwrap(),
            "-o",
            "jsonpath={.status.allowed}",
        ])
        .unwrap_or_else(|e| panic!("SubjectAccessReview {verb} {group}/{resource}: {e}"));
    match answer.trim() {
        "true" => true,
        "false" | "" => false,
        other => panic!("SubjectAccessReview {verb} {group}/{resource}: {other:?}"),
    }
}

#[test]
fn the_operator_identity_may_use_its_lease_in_its_namespace_and_no_other() {
    let cp = cp();
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--as", OPERATOR_USER]);
        let out = cp.kubectl(&all);
        match String::from_utf8_lossy(&out.stdout).trim() {
            "yes" => true,
            "no" => false,
            other => panic!("kubectl {all:?}: {other:?}"),
        }
    };
    let lease = "leases.coordination.k8s.io/volume-leftovers";
    let ns = ["-n", "volume-leftovers"];
    assert!(can(&["get", lease, ns[0], ns[1]]));
    assert!(can(&["patch", lease, ns[0], ns[1]]));
    assert!(can(&["watch", lease, ns[0], ns[1]]));
    assert!(can(&["create", "leases.coordination.k8s.io", ns[0], ns[1]]));
    assert!(!can(&["update", lease, ns[0], ns[1]]));
    assert!(!can(&["delete", lease, ns[0], ns[1]]));
    assert!(!can(&[
        "get",
        "leases.coordination.k8s.io/another",
        ns[0],
        ns[1]
    ]));
    assert!(!can(&["list", "leases.coordination.k8s.io", ns[0], ns[1]]));
    assert!(!can(&["get", lease, "-n", "kube-system"]));
    assert!(!can(&[
        "create",
        "leases.coordination.k8s.io",
        "-n",
        "default"
    ]));
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
        "serviceaccount/volume-leftovers",
        "clusterrole.rbac.authorization.k8s.io/volume-leftovers",
        "clusterrolebinding.rbac.authorization.k8s.io/volume-leftovers",
        "role.rbac.authorization.k8s.io/volume-leftovers",
        "rolebinding.rbac.authorization.k8s.io/volume-leftovers",
        "service/volume-leftovers",
        "deployment.apps/volume-leftovers",
        "poddisruptionbudget.policy/volume-leftovers",
    ] {
        assert!(applied.contains(kind), "{kind} missing from:\n{applied}");
    }
}

/// Every rule of an RBAC role, given as its YAML text, has a `#` comment line giving its reason
/// right above it, and every rule is written so that this check sees it (`- apiGroups:` first,
/// at the start of a line).
pub fn assert_every_rule_has_a_reason(text: &str, rules: usize, what: &str) {
    let lines: Vec<&str> = text.lines().collect();
    let mut seen = 0;
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("- apiGroups:") {
            seen += 1;
            assert!(
                i > 0 && lines[i - 1].starts_with('#'),
                "{what}: rule at line {} has no comment giving its reason",
                i + 1
            );
        }
    }
    assert_eq!(
        seen, rules,
        "{what}: every rule must start with `- apiGroups:` at the start of a line"
    );
}

/// No wildcard verb or resource, and nothing but get/list/watch on PersistentVolumes, claims,
/// StorageClasses and the snapshot kinds (or any of their subresources).
pub fn assert_read_only_on_the_volume_side(rules: &[PolicyRule], what: &str) {
    for rule in rules {
        assert!(
            !rule.verbs.iter().any(|v| v == "*"),
            "{what}: no wildcard verbs"
        );
        let resources = rule.resources.clone().unwrap_or_default();
        assert!(
            !resources.iter().any(|r| r == "*"),
            "{what}: no wildcard resources"
        );
        if resources.iter().any(|r| {
            [
                "persistentvolumes",
                "persistentvolumeclaims",
                "storageclasses",
                "volumesnapshotcontents",
                "volumesnapshots",
                "volumesnapshotclasses",
            ]
            .iter()
            .any(|v| r.starts_with(v))
        }) {
            assert!(
                rule.verbs
                    .iter()
                    .all(|v| ["get", "list", "watch"].contains(&v.as_str())),
                "{what}: read-only on the volume side: {:?}",
                rule.verbs
            );
        }
    }
}

#[test]
fn the_cluster_role_has_a_reason_on_every_rule_and_binds_the_identity_tests_use() {
    let text = std::fs::read_to_string(repo().join("deploy/clusterrole.yaml")).unwrap();
    let role: ClusterRole = serde_saphyr::from_str(&text).unwrap();
    let rules = role.rules.unwrap();
    assert_every_rule_has_a_reason(&text, rules.len(), "deploy/clusterrole.yaml");
    assert_read_only_on_the_volume_side(&rules, "deploy/clusterrole.yaml");
    // The leader-election Role: a reason on every rule, and nothing but Leases.
    let text = std::fs::read_to_string(repo().join("deploy/role.yaml")).unwrap();
    let role: Role = serde_saphyr::from_str(&text).unwrap();
    let rules = role.rules.unwrap();
    assert_every_rule_has_a_reason(&text, rules.len(), "deploy/role.yaml");
    assert_read_only_on_the_volume_side(&rules, "deploy/role.yaml");
    for rule in &rules {
        assert_eq!(rule.resources.as_deref(), Some(&["leases".to_string()][..]));
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
