//! The reconnect backoff of a follower's fetch loop: the first retry after `min` ms, each
//! next one twice as late, up to `max`, and back to `min` once a connection works.

use std::time::Duration;

/// Exponential reconnect backoff.
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    pub(crate) failures: u32,
}

impl Backoff {
    pub(crate) fn new(min_ms: u64, max_ms: u64) -> Self {
        let min = Duration::from_millis(min_ms.max(1));
        Backoff {
            min,
            max: Duration::from_millis(max_ms.max(min_ms.max(1))),
            next: min,
            failures: 0,
        }
    }

    pub(crate) fn failure(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        self.failures += 1;
        d
    }

    pub(crate) fn reset(&mut self) {
        self.next = self.min;
        self.failures = 0;
    }
}
