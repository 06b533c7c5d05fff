//! Pure decisions: which finding a volume is (lookup, classify), what to write about it (plan),
//! what the census concludes, what a finding costs, the whole decision about one name (name),
//! and what a person can do about a finding (explain). Times are
//! arguments; effects are returned, never performed.

pub mod census;
pub mod census_result;
pub mod classify;
pub mod cost;
pub mod explain;
pub mod lookup;
pub mod name;
pub mod plan;
pub mod report;
pub mod snapshot;
