//! The wall clock. Not pure (it reads the system clock): only the loop and `scan` call it; the
//! pure modules get the time as an argument.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The wall clock, to the second: `Time` serialises to seconds, and a finer `firstSeen` would
/// never compare equal to what the API server gives back.
pub fn wall_clock() -> Time {
    truncate(jiff::Timestamp::now())
}

/// A timestamp truncated to the second (what the API server keeps of a `Time`).
pub(crate) fn truncate(t: jiff::Timestamp) -> Time {
    Time(jiff::Timestamp::from_second(t.as_second()).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}
