//! The writer's outcomes as the write metrics label them, and its errors: the client's error
//! kept as the source, classified from it.

use super::fixtures::{mariadb_finding, now};
use crate::decide::plan::{Action, plan};
use crate::model::finding::Verdict;
use crate::publish::report::ReportError;
use crate::publish::writer::{Op, Outcome, WriteError};
use crate::run::scheduling::WriteEnd;
use crate::watch::category::{Category, RequestError};
use std::time::Duration;

#[test]
fn every_action_has_its_op_label() {
    let leftover = Verdict::Leftover(Box::new(mariadb_finding()));
    let create = plan("mariadb-pv", Some(&leftover), None, &now(), &now(), None);
    let Action::Create { object } = &create else {
        panic!("expected Create, got {create:?}");
    };
    let apply = Action::Apply {
        object: object.clone(),
        meta: None,
        status: true,
    };
    let delete = Action::Delete {
        name: "a".into(),
        uid: None,
    };
    let foreign = Action::Foreign { name: "a".into() };
    let ops = [&Action::Nothing, &foreign, &create, &apply, &delete].map(Op::of);
    assert_eq!(ops, [Op::None, Op::None, Op::Create, Op::Apply, Op::Delete]);
    // The labels dashboards and alerts select on.
    assert_eq!(
        Op::ALL.map(Op::as_str),
        ["none", "create", "apply", "apply_status", "delete"]
    );
}

#[test]
fn outcomes_keep_their_result_labels_and_tell_the_scheduler_the_same() {
    assert_eq!(Outcome::ALL.map(Outcome::as_str), ["ok", "outdated"]);
    assert_eq!(WriteEnd::from(Outcome::Done), WriteEnd::Done);
    assert_eq!(WriteEnd::from(Outcome::Outdated), WriteEnd::Outdated);
}

/// A status the API server would send.
fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(message, reason)
            .with_code(code)
            .boxed(),
    )
}

/// The client error at the bottom of `e`'s source chain.
fn client_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a kube::Error> {
    let mut cur = e.source();
    while let Some(err) = cur {
        if let Some(k) = err.downcast_ref::<kube::Error>() {
            return Some(k);
        }
        cur = err.source();
    }
    None
}

#[test]
fn a_failed_write_keeps_the_client_error_as_its_source_and_says_the_same_line() {
    let forbidden =
        "volumeleftovers.volume-leftovers.io \"a\" is forbidden: User \"x\" cannot create";
    let e = WriteError::Create {
        name: "a".into(),
        source: RequestError::Client(api_error(403, "Forbidden", forbidden)),
    };
    assert_eq!(e.category(), Category::Forbidden);
    assert_eq!(e.op(), Op::Create);
    // The line logs and the writes-blocked condition show, as before the cause was kept.
    assert_eq!(
        e.to_string(),
        format!("creating VolumeLeftover a: 403 Forbidden: {forbidden}")
    );
    // The chain: the step, the request, the client's own error (with its status).
    let request = std::error::Error::source(&e).expect("the request's error");
    assert!(matches!(
        request.downcast_ref::<RequestError>(),
        Some(RequestError::Client(_))
    ));
    let Some(kube::Error::Api(status)) = client_error(&e) else {
        panic!("no client error in the chain of {e:?}");
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
}

#[test]
fn a_write_error_is_classified_from_its_cause() {
    let step = |op: Op, source: RequestError| {
        let name = "a".to_string();
        match op {
            Op::Create => WriteError::Create { name, source },
            Op::Apply => WriteError::Apply { name, source },
            Op::ApplyStatus => WriteError::ApplyStatus { name, source },
            Op::Delete => WriteError::Delete { name, source },
            Op::None => unreachable!("nothing is sent"),
        }
    };
    let api = |code| RequestError::Client(api_error(code, "", "m"));
    // (op, code) → (category, write-wide): a 404 is about the resource type only on a create
    // (the CRD is missing); a 403 is always.
    let cases = [
        (Op::Create, 404, Category::NotFound, true),
        (Op::Create, 403, Category::Forbidden, true),
        (Op::Create, 422, Category::Invalid, false),
        (Op::Apply, 404, Category::NotFound, false),
        (Op::Apply, 403, Category::Forbidden, true),
        (Op::ApplyStatus, 403, Category::Forbidden, true),
        (Op::ApplyStatus, 500, Category::Unavailable, false),
        (Op::Delete, 404, Category::NotFound, false),
        (Op::Delete, 403, Category::Forbidden, true),
    ];
    for (op, code, category, wide) in cases {
        let e = step(op, api(code));
        assert_eq!(
            (e.op(), e.category(), e.write_wide()),
            (op, category, wide),
            "{op:?} answered {code}"
        );
        assert!(matches!(client_error(&e), Some(kube::Error::Api(s)) if s.code == code));
    }
    let e = step(
        Op::Apply,
        RequestError::Timeout(Duration::from_millis(2500)),
    );
    assert_eq!((e.category(), e.write_wide()), (Category::Timeout, false));
    assert_eq!(
        e.to_string(),
        "patching VolumeLeftover a: no answer within 2.5s"
    );
    assert!(client_error(&e).is_none());
}

#[test]
fn a_failed_report_keeps_the_client_error_and_its_line() {
    let e = ReportError::Client(api_error(422, "Invalid", "ClusterReport is invalid"));
    assert_eq!(e.category(), Category::Invalid);
    assert_eq!(e.to_string(), "422 Invalid: ClusterReport is invalid");
    let Some(kube::Error::Api(status)) =
        std::error::Error::source(&e).and_then(|s| s.downcast_ref::<kube::Error>())
    else {
        panic!("no client error as the source of {e:?}");
    };
    assert_eq!(status.code, 422);
    assert_eq!(ReportError::Timeout.category(), Category::Timeout);
    assert_eq!(ReportError::Timeout.to_string(), "no answer");
}
