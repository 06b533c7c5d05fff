//! The generic [`engine::schedule`](crate::engine::schedule) made the operator's: its memory of a
//! name is the decision's [`Memo`], a failed write is known by its [`Category`], and a decision
//! tells the scheduler what comes next. No I/O.

use crate::decide::name::{Decision, Memo};
use crate::engine::schedule::{self, Memory, Next};
use crate::watch::category::Category;

/// The loop's scheduler.
pub type Scheduler = schedule::Scheduler<Memo, Category>;
/// How one of the loop's writes ended.
pub type WriteEnd = schedule::WriteEnd<Category>;
/// A change of the write-wide condition of the loop's writes.
pub type Condition = schedule::Condition<Category>;
/// The loop's writes are failing as a whole.
pub type Blocked = schedule::Blocked<Category>;
/// Everything the loop's scheduler keeps about one name.
pub type NameState = schedule::NameState<Memo>;

impl Memory for Memo {
    fn is_empty(&self) -> bool {
        Memo::is_empty(self)
    }
}

impl<W> From<Decision<W>> for Next<W> {
    fn from(d: Decision<W>) -> Next<W> {
        match d {
            Decision::Idle => Next::Idle,
            Decision::WaitFor(d) => Next::WaitFor(d),
            Decision::Write(w) => Next::Write(w),
        }
    }
}
