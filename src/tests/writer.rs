//! The writer's outcomes as the write metrics label them.

use super::fixtures::{mariadb_finding, now};
use crate::decide::plan::{Action, plan};
use crate::model::finding::Verdict;
use crate::publish::writer::{Op, Outcome};
use crate::run::scheduling::WriteEnd;

#[test]
fn every_action_has_its_op_label() {
    let leftover = Verdict::Leftover(Box::new(mariadb_finding()));
    let create = plan("mariadb-pv", Some(&leftover), None, &now(), &now());
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
