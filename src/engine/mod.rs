//! Generic machinery of the loop: the scheduler, backoff, the clock, a heap.

pub mod backoff;
pub mod clock;
pub mod heap;
pub mod schedule;
