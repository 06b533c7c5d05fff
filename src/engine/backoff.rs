//! Exponential backoff with jitter. Pure: the caller keeps the state and asks for the next delay.
//!
//! Used per store (a failing list or watch), per name (a failing write) and for write-wide
//! failures. Reset only by a success the caller defines (a completed list, a write that landed):
//! kube-runtime's own `default_backoff()` is reset by the `Init` event the watcher emits before
//! every list attempt, so a list that keeps failing would be retried about every second forever.

use std::time::Duration;

/// Parameters and state of one backoff.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    initial: Duration,
    max: Duration,
    attempts: u32,
    /// xorshift state for the jitter; deterministic for a given seed.
    rng: u64,
}

impl Backoff {
    /// A backoff from `initial`, doubling up to `max`, with a jitter seeded by `seed`.
    pub(crate) fn new(initial: Duration, max: Duration, seed: u64) -> Backoff {
        Backoff {
            initial,
            max: max.max(initial),
            attempts: 0,
            rng: seed | 1,
        }
    }

    #[cfg(test)]
    /// Consecutive failures so far.
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The next delay: half of `initial * 2^attempts` (capped at `max`) plus a random part of
    /// the other half, so that replicas and stores that failed together do not retry together.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let exp = self.attempts.min(20);
        self.attempts = self.attempts.saturating_add(1);
        let full = self
            .initial
            .checked_mul(1u32 << exp)
            .unwrap_or(self.max)
            .min(self.max);
        let half = full / 2;
        let jitter = half.mul_f64(self.random_unit());
        half + jitter
    }

    /// Forgets the failures.
    pub(crate) fn reset(&mut self) {
        self.attempts = 0;
    }

    fn random_unit(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        // 53 random bits in [0, 1).
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A seed that differs between processes and between callers (for jitter only).
pub(crate) fn seed(salt: &str) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write(salt.as_bytes());
    h.write_u32(std::process::id());
    h.finish()
}
