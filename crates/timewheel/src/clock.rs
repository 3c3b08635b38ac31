//! The timer's clock: milliseconds on a monotonic timeline, real or manual.
//!
//! Kafka's `SystemTimer` reads `Time.SYSTEM.hiResClockMs` and its tests swap in a
//! `MockTime`. Here the clock is chosen once when the [`Timer`](crate::Timer) is built:
//!
//! * **system**: milliseconds elapsed since the timer was created, from
//!   [`std::time::Instant`] (monotonic, unaffected by wall-clock changes);
//! * **manual**: starts at 0 and moves only when a test (or the broker's teaching mode)
//!   advances it, which makes every timing behaviour deterministic.
//!
//! The timeline is whole milliseconds. Reading it rounds *down*; turning a relative delay
//! into a deadline on a system clock rounds the start *up* ([`Clock::deadline_after`]), so
//! that a timer scheduled for `d` ms never fires less than `d` ms of real time later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where the timer's milliseconds come from.
#[derive(Debug)]
pub(crate) enum Clock {
    /// Real time since `origin`.
    System {
        /// The instant that is millisecond 0.
        origin: Instant,
    },
    /// Time that moves only when told to.
    Manual {
        /// The current time in milliseconds.
        now: AtomicU64,
    },
}

impl Clock {
    /// A system clock whose millisecond 0 is now.
    pub(crate) fn system() -> Clock {
        Clock::System {
            origin: Instant::now(),
        }
    }

    /// A manual clock at millisecond 0.
    pub(crate) fn manual() -> Clock {
        Clock::Manual {
            now: AtomicU64::new(0),
        }
    }

    /// True for the manual clock.
    pub(crate) fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual { .. })
    }

    /// The current time, rounded down to the millisecond.
    pub(crate) fn now_ms(&self) -> u64 {
        match self {
            Clock::System { origin } => origin.elapsed().as_millis() as u64,
            Clock::Manual { now } => now.load(Ordering::Acquire),
        }
    }

    /// The deadline of a timer scheduled `delay_ms` from now.
    ///
    /// `delay_ms <= 0` means "due now": the current (rounded-down) time. Otherwise the
    /// current time is rounded *up* to the millisecond before adding the delay, so the timer
    /// fires no earlier than `delay_ms` of real time from this call.
    pub(crate) fn deadline_after(&self, delay_ms: i64) -> u64 {
        if delay_ms <= 0 {
            return self.now_ms();
        }
        let start = match self {
            Clock::System { origin } => {
                let elapsed = origin.elapsed();
                let ms = elapsed.as_millis() as u64;
                if elapsed.subsec_nanos() % 1_000_000 == 0 {
                    ms
                } else {
                    ms + 1
                }
            }
            Clock::Manual { now } => now.load(Ordering::Acquire),
        };
        start.saturating_add(delay_ms as u64)
    }

    /// The real instant at which a system clock reads `ms` (`None` for a manual clock).
    pub(crate) fn instant_of(&self, ms: u64) -> Option<Instant> {
        match self {
            Clock::System { origin } => origin.checked_add(Duration::from_millis(ms)),
            Clock::Manual { .. } => None,
        }
    }

    /// Move a manual clock forward to `ms` (never backwards). No-op on a system clock.
    pub(crate) fn set_manual(&self, ms: u64) {
        if let Clock::Manual { now } = self {
            now.fetch_max(ms, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_forward_and_only_when_told() {
        let clock = Clock::manual();
        assert_eq!(clock.now_ms(), 0);
        assert_eq!(clock.deadline_after(-5), 0);
        assert_eq!(clock.deadline_after(7), 7);
        clock.set_manual(10);
        clock.set_manual(3);
        assert_eq!(clock.now_ms(), 10);
        assert_eq!(clock.instant_of(10), None);
    }

    #[test]
    fn system_deadlines_round_the_start_up() {
        let clock = Clock::system();
        let before = clock.now_ms();
        let deadline = clock.deadline_after(5);
        assert!(deadline >= before + 5 && deadline <= clock.now_ms() + 6);
        assert!(clock.instant_of(deadline).is_some());
    }
}
