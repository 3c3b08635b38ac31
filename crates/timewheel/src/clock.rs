//! The timer's clock: milliseconds on a monotonic timeline, real, frozen or manual.
//!
//! Kafka's `SystemTimer` reads `Time.SYSTEM.hiResClockMs` and its tests swap in a
//! `MockTime`. Here the clock is chosen once when the [`Timer`](crate::Timer) is built:
//!
//! * **system**: milliseconds since the timer was created, from [`std::time::Instant`]
//!   (monotonic, unaffected by wall-clock changes). It can be *frozen*: it then reads a
//!   fixed time that only explicit steps move forward, and when it *resumes* it goes on at
//!   real rate from where it was left (the real time spent frozen is skipped, so the
//!   timeline never jumps);
//! * **manual**: starts at 0 and moves only when a test (or the broker's teaching mode)
//!   advances it, which makes every timing behaviour deterministic.
//!
//! The timeline is whole milliseconds. Reading it rounds *down*; turning a relative delay
//! into a deadline on a running system clock rounds the start *up*
//! ([`Clock::deadline_after`]), so that a timer scheduled for `d` ms never fires less than
//! `d` ms of timeline later.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NANOS_PER_MS: u64 = 1_000_000;

/// `SystemClock::held` while the clock runs.
const RUNNING: u64 = 0;

/// A system clock that can be frozen.
#[derive(Debug)]
pub(crate) struct SystemClock {
    origin: Instant,
    /// While running, the timeline reads `origin.elapsed() - shift` (in nanoseconds; it
    /// grows by the time spent frozen, and can be negative after steps ahead of real time).
    shift_ns: AtomicI64,
    /// [`RUNNING`], or the frozen time plus one.
    held: AtomicU64,
}

impl SystemClock {
    fn elapsed_ns(&self) -> i64 {
        i64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }

    /// The timeline in nanoseconds while running.
    fn running_ns(&self) -> u64 {
        // `held` was read as RUNNING with Acquire, after `resume` wrote the shift.
        let shift = self.shift_ns.load(Ordering::Acquire);
        self.elapsed_ns().saturating_sub(shift).max(0) as u64
    }

    fn frozen_at(&self) -> Option<u64> {
        match self.held.load(Ordering::Acquire) {
            RUNNING => None,
            held => Some(held - 1),
        }
    }
}

/// Where the timer's milliseconds come from.
#[derive(Debug)]
pub(crate) enum Clock {
    /// Real time since creation, minus the time spent frozen.
    System(SystemClock),
    /// Time that moves only when told to.
    Manual {
        /// The current time in milliseconds.
        now: AtomicU64,
    },
}

impl Clock {
    /// A system clock whose millisecond 0 is now.
    pub(crate) fn system() -> Clock {
        Clock::System(SystemClock {
            origin: Instant::now(),
            shift_ns: AtomicI64::new(0),
            held: AtomicU64::new(RUNNING),
        })
    }

    /// A manual clock at millisecond 0.
    pub(crate) fn manual() -> Clock {
        Clock::Manual {
            now: AtomicU64::new(0),
        }
    }

    /// True for a clock created manual.
    pub(crate) fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual { .. })
    }

    /// True for a frozen system clock.
    pub(crate) fn is_frozen(&self) -> bool {
        matches!(self, Clock::System(c) if c.frozen_at().is_some())
    }

    /// True if time moves only when told to: a manual clock, or a frozen system clock.
    pub(crate) fn is_held(&self) -> bool {
        self.is_manual() || self.is_frozen()
    }

    /// The current time, rounded down to the millisecond.
    pub(crate) fn now_ms(&self) -> u64 {
        match self {
            Clock::System(c) => c
                .frozen_at()
                .unwrap_or_else(|| c.running_ns() / NANOS_PER_MS),
            Clock::Manual { now } => now.load(Ordering::Acquire),
        }
    }

    /// The deadline of a timer scheduled `delay_ms` from now.
    ///
    /// `delay_ms <= 0` means "due now": the current (rounded-down) time. Otherwise, on a
    /// running system clock, the current time is rounded *up* to the millisecond before
    /// adding the delay, so the timer fires no earlier than `delay_ms` from this call.
    pub(crate) fn deadline_after(&self, delay_ms: i64) -> u64 {
        if delay_ms <= 0 {
            return self.now_ms();
        }
        let start = match self {
            Clock::System(c) => match c.frozen_at() {
                Some(ms) => ms,
                None => c.running_ns().div_ceil(NANOS_PER_MS),
            },
            Clock::Manual { now } => now.load(Ordering::Acquire),
        };
        start.saturating_add(delay_ms as u64)
    }

    /// The real instant at which a running system clock reads `ms`; `None` for a manual or
    /// frozen clock (nothing but a step or a resume moves it).
    pub(crate) fn instant_of(&self, ms: u64) -> Option<Instant> {
        let Clock::System(c) = self else { return None };
        if c.frozen_at().is_some() {
            return None;
        }
        let at_ns = i128::from(ms) * i128::from(NANOS_PER_MS)
            + i128::from(c.shift_ns.load(Ordering::Acquire));
        let at_ns = u64::try_from(at_ns.max(0)).unwrap_or(u64::MAX);
        c.origin.checked_add(Duration::from_nanos(at_ns))
    }

    /// Move a held clock (manual or frozen) forward to `ms` (never backwards). False, and
    /// no change, if the clock runs.
    pub(crate) fn hold_at(&self, ms: u64) -> bool {
        match self {
            Clock::Manual { now } => {
                now.fetch_max(ms, Ordering::AcqRel);
                true
            }
            Clock::System(c) => c
                .held
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                    (held != RUNNING).then(|| held.max(ms.saturating_add(1).min(u64::MAX - 1)))
                })
                .is_ok(),
        }
    }

    /// Freeze a running system clock at its current millisecond. False (no change) if it is
    /// manual or already frozen. The caller serialises freeze, resume and steps.
    pub(crate) fn freeze(&self) -> bool {
        let Clock::System(c) = self else { return false };
        if c.frozen_at().is_some() {
            return false;
        }
        let ms = c.running_ns() / NANOS_PER_MS;
        c.held.store(ms + 1, Ordering::Release);
        true
    }

    /// Let a frozen system clock run again from the time it holds, at real rate. False (no
    /// change) if it is manual or not frozen. The caller serialises freeze, resume and
    /// steps.
    pub(crate) fn resume(&self) -> bool {
        let Clock::System(c) = self else { return false };
        let Some(ms) = c.frozen_at() else {
            return false;
        };
        // From now on the timeline reads `ms` plus the real time since this instant.
        let held_ns = i64::try_from(ms.saturating_mul(NANOS_PER_MS)).unwrap_or(i64::MAX);
        c.shift_ns
            .store(c.elapsed_ns().saturating_sub(held_ns), Ordering::Release);
        c.held.store(RUNNING, Ordering::Release);
        true
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
        assert!(clock.hold_at(10));
        assert!(clock.hold_at(3));
        assert_eq!(clock.now_ms(), 10);
        assert_eq!(clock.instant_of(10), None);
        assert!(!clock.freeze() && !clock.resume());
        assert!(clock.is_held() && !clock.is_frozen());
    }

    #[test]
    fn system_deadlines_round_the_start_up() {
        let clock = Clock::system();
        let before = clock.now_ms();
        let deadline = clock.deadline_after(5);
        assert!(deadline >= before + 5 && deadline <= clock.now_ms() + 6);
        assert!(clock.instant_of(deadline).is_some());
    }

    #[test]
    fn a_frozen_clock_holds_steps_and_resumes_without_a_jump() {
        let clock = Clock::system();
        assert!(!clock.hold_at(5), "a running clock is not stepped");
        assert!(clock.freeze());
        assert!(!clock.freeze(), "already frozen");
        let t = clock.now_ms();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(clock.now_ms(), t, "frozen");
        assert_eq!(clock.deadline_after(10), t + 10);
        assert_eq!(clock.instant_of(t + 10), None);
        assert!(clock.hold_at(t + 1_000));
        assert_eq!(clock.now_ms(), t + 1_000, "stepped ahead of real time");
        // Resumed, it runs on from the held time: by no more than the real time since the
        // resume, however slowly this thread runs.
        let resuming = Instant::now();
        assert!(clock.resume());
        let after = clock.now_ms();
        let since_resume = resuming.elapsed().as_millis() as u64;
        assert!(
            (t + 1_000..=t + 1_000 + since_resume + 1).contains(&after),
            "resumed from the held time: {after}, {since_resume} ms after resuming"
        );
        let at = clock.instant_of(after + 5).expect("running");
        assert!(at > Instant::now());
        assert!(!clock.resume(), "not frozen");
    }
}
