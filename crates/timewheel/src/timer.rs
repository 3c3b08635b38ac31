//! The timer: a shared, thread-safe timing wheel with a clock and a driver.
//!
//! This is Kafka's `SystemTimer`: the single timer a broker's purgatories (produce,
//! fetch, join, ...) all put their timeouts in. It wraps a [`TimingWheel`](crate::TimingWheel) in a mutex and
//! drives it in one of two ways, with the same code underneath:
//!
//! * [`Timer::system`]: a monotonic clock and a background *driver* thread (`driver.rs`)
//!   that sleeps until the earliest non-empty bucket is due. With nothing pending it
//!   sleeps without a deadline: no periodic tick, no idle wake-up (Kafka's reaper polls
//!   every 200 ms forever). A system timer can be [frozen](Timer::freeze), stepped with
//!   [`advance_by`](Timer::advance_by) and [resumed](Timer::resume).
//! * [`Timer::manual`]: time starts at 0 and moves only through
//!   [`advance_to`](Timer::advance_to) / [`advance_by`](Timer::advance_by), which run the
//!   due tasks on the calling thread. Tests are deterministic and take no real time.
//!
//! # Tasks run outside every lock
//!
//! Fired tasks are collected under the wheel's lock and run only after it is released, so
//! a task may freely schedule or cancel timers (on this or any timer), and may take its own
//! locks without risking a lock-order inversion with the timer. On a system timer the tasks
//! run one after another on the driver thread, so they should be short; a task that panics
//! is caught and the driver carries on.
//!
//! # Costs
//!
//! `schedule`: one uncontended lock, an O(1) wheel insert, at most one wake-up of the
//! driver, and no allocation for a closure of up to 8 bytes (`task.rs`); `schedule_arc`
//! takes an existing `Arc` and allocates nothing. `cancel`: one lock and an O(1) removal.

use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use parking_lot::Mutex;

use crate::clock::Clock;
use crate::driver::{self, Shared};
use crate::slab::Key;
use crate::snapshot::{WheelPosition, WheelSnapshot};
use crate::task::Task;
pub use crate::task::TimerTask;
pub use crate::wheel::TimerConfig;

/// Identifies one scheduled timer, for [`Timer::cancel`].
///
/// Once the timer has fired or been cancelled the handle is stale and cancelling it returns
/// `false`, however many timers have been scheduled since. A handle from one timer is
/// refused by every other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerHandle {
    key: Key,
}

impl TimerHandle {
    /// The handle packed in 64 bits, without the timer id (for an `AtomicU64` slot).
    pub(crate) fn key_bits(self) -> u64 {
        self.key.bits()
    }
}

/// Owned by the `Timer` handles (not by the driver): dropping the last handle stops the
/// driver.
struct Owner {
    shared: Arc<Shared>,
    driver: Mutex<Option<JoinHandle<()>>>,
    driver_thread: Option<ThreadId>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        driver::shutdown(&self.shared, &self.driver, self.driver_thread);
    }
}

/// A hierarchical-timing-wheel timer, shared by cloning (`Send + Sync`).
///
/// One `Timer` serves all the purgatories of a broker, as Kafka's `SystemTimer` does per
/// purgatory. Cloning is cheap (an `Arc`); the driver stops when the last clone is dropped
/// or [`shutdown`](Timer::shutdown) is called.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use timewheel::{Timer, TimerConfig};
///
/// let timer = Timer::manual(TimerConfig::default());
/// let fired = Arc::new(AtomicUsize::new(0));
/// let f = fired.clone();
/// timer.schedule(30, move || { f.fetch_add(1, Ordering::SeqCst); });
/// assert_eq!(timer.advance_to(29), 0);
/// assert_eq!(timer.advance_to(30), 1);
/// assert_eq!(fired.load(Ordering::SeqCst), 1);
/// ```
#[derive(Clone)]
pub struct Timer {
    owner: Arc<Owner>,
}

impl Timer {
    /// A timer on the monotonic system clock, driven by a background thread
    /// (`timewheel-driver`) that sleeps until the earliest bucket is due.
    ///
    /// Tasks due now (delay <= 0) run promptly on the driver thread.
    ///
    /// # Panics
    /// If the configuration is invalid (`tick_ms == 0` or `wheel_size < 2`) or the thread
    /// cannot be spawned.
    pub fn system(config: TimerConfig) -> Timer {
        let shared = Arc::new(Shared::new(config, Clock::system()));
        let driver_shared = shared.clone();
        let driver = std::thread::Builder::new()
            .name("timewheel-driver".into())
            .spawn(move || driver::drive(&driver_shared))
            .expect("spawn the timer driver thread");
        let driver_thread = Some(driver.thread().id());
        Timer {
            owner: Arc::new(Owner {
                shared,
                driver: Mutex::new(Some(driver)),
                driver_thread,
            }),
        }
    }

    /// A timer on a manual clock that starts at 0 and moves only through
    /// [`advance_to`](Timer::advance_to) and [`advance_by`](Timer::advance_by). There is no
    /// driver thread: tasks run on the thread that advances.
    ///
    /// # Panics
    /// If the configuration is invalid (`tick_ms == 0` or `wheel_size < 2`).
    pub fn manual(config: TimerConfig) -> Timer {
        Timer {
            owner: Arc::new(Owner {
                shared: Arc::new(Shared::new(config, Clock::manual())),
                driver: Mutex::new(None),
                driver_thread: None,
            }),
        }
    }

    fn shared(&self) -> &Shared {
        &self.owner.shared
    }

    /// True while time moves only through [`advance_to`](Timer::advance_to) /
    /// [`advance_by`](Timer::advance_by): always for a timer created with
    /// [`Timer::manual`], and for a system timer while it is [frozen](Timer::freeze).
    /// So `is_manual()` answers "does `advance_by` step this timer now?".
    pub fn is_manual(&self) -> bool {
        self.shared().clock.is_held()
    }

    /// True for a system timer that is [frozen](Timer::freeze) (never for a manual one).
    pub fn is_frozen(&self) -> bool {
        self.shared().clock.is_frozen()
    }

    /// True for a timer created with [`Timer::system`], frozen or not.
    pub fn is_system(&self) -> bool {
        !self.shared().clock.is_manual()
    }

    /// Freeze a system timer: its clock stops (`now_ms()` stays put), no timeout fires,
    /// and the driver sleeps without a deadline (no busy-waiting). While frozen,
    /// [`advance_to`](Timer::advance_to) / [`advance_by`](Timer::advance_by) step it
    /// exactly like a manual clock, running what falls due on the calling thread; new
    /// timers are scheduled relative to the frozen time. Returns `true` if this call froze
    /// it; `false` (no change) for a manual timer or one already frozen.
    pub fn freeze(&self) -> bool {
        let shared = self.shared();
        let _state = shared.state.lock();
        shared.clock.freeze()
    }

    /// Let a frozen system timer run again, at real rate from the time it was left at
    /// (frozen, then perhaps stepped): the clock does not jump over the time spent frozen.
    /// What fell due during the steps has run; what falls due from now on runs on the
    /// driver as usual, never early, never twice. Returns `true` if this call resumed it;
    /// `false` (no change) for a manual timer or one not frozen.
    pub fn resume(&self) -> bool {
        let shared = self.shared();
        let resumed = {
            let _state = shared.state.lock();
            shared.clock.resume()
        };
        if resumed {
            shared.wakeup.notify_all();
        }
        resumed
    }

    /// The configuration the timer was built with.
    pub fn config(&self) -> TimerConfig {
        self.shared().config
    }

    /// The current time on the timer's clock, in milliseconds (rounded down).
    pub fn now_ms(&self) -> u64 {
        self.shared().clock.now_ms()
    }

    /// The deadline [`schedule`](Timer::schedule) would give a timer of `delay_ms`:
    /// `now_ms()` for `delay_ms <= 0`, else the current time rounded *up* to the
    /// millisecond plus the delay (so it never fires early in real time).
    pub fn deadline_after(&self, delay_ms: i64) -> u64 {
        self.shared().clock.deadline_after(delay_ms)
    }

    /// Run `task` once `delay_ms` have passed; see [`deadline_after`](Timer::deadline_after).
    ///
    /// A delay of zero or less is due now: on a manual clock the task runs on the next
    /// advance (even `advance_by(0)`), on a system clock promptly on the driver thread. The
    /// task never runs inside this call. A closure of up to 8 bytes (one pointer, or an id)
    /// is stored without an allocation.
    pub fn schedule(&self, delay_ms: i64, task: impl FnOnce() + Send + 'static) -> TimerHandle {
        self.insert(self.deadline_after(delay_ms), Task::new(task))
    }

    /// Run `task` once the clock reads `deadline_ms` (a deadline in the past is due now).
    pub fn schedule_at(
        &self,
        deadline_ms: u64,
        task: impl FnOnce() + Send + 'static,
    ) -> TimerHandle {
        self.insert(deadline_ms, Task::new(task))
    }

    /// Run an `Arc`-shared [`TimerTask`] once the clock reads `deadline_ms` (one small
    /// allocation for the two-pointer `Arc`; [`schedule_arc`](Timer::schedule_arc) has
    /// none).
    ///
    /// On a timer that has been shut down the task is dropped without running and the
    /// returned handle is already stale.
    pub fn schedule_task(&self, deadline_ms: u64, task: Arc<dyn TimerTask>) -> TimerHandle {
        self.insert(deadline_ms, Task::shared(task))
    }

    /// Run an `Arc`-shared [`TimerTask`] of a concrete type once the clock reads
    /// `deadline_ms`. The `Arc` is stored in the timer's slot: no allocation at all (an
    /// `Arc<dyn TimerTask>` given to [`schedule_task`](Timer::schedule_task) is two
    /// pointers, one too many for the slot, and is boxed).
    pub fn schedule_arc<T: TimerTask>(&self, deadline_ms: u64, task: Arc<T>) -> TimerHandle {
        self.insert(deadline_ms, Task::arc(task))
    }

    fn insert(&self, deadline_ms: u64, task: Task) -> TimerHandle {
        let shared = self.shared();
        let mut state = shared.state.lock();
        if state.shut_down {
            drop(state);
            drop(task);
            return self.handle_from_bits(u64::MAX);
        }
        let (key, wake) = state.wheel.insert_and_wake(deadline_ms, task);
        // Wake the driver if this timer needs it earlier than it planned to wake. Clearing
        // `sleeping_until` means later schedules do not wake it again before it has looked.
        if wake < state.sleeping_until {
            state.sleeping_until = driver::AWAKE;
            shared.wakeup.notify_one();
        }
        TimerHandle { key }
    }

    /// Cancel a pending timer. Returns `true` iff it was pending and now will never run;
    /// `false` for a stale handle (already fired, already cancelled, or a handle of another
    /// timer). The task is dropped after the lock is released.
    pub fn cancel(&self, handle: TimerHandle) -> bool {
        let removed = self.shared().state.lock().wheel.remove(handle.key);
        removed.is_some()
    }

    /// The handle of this timer whose [`key_bits`](TimerHandle::key_bits) are `bits`.
    pub(crate) fn handle_from_bits(&self, bits: u64) -> TimerHandle {
        TimerHandle {
            key: Key::from_bits(self.shared().id, bits),
        }
    }

    /// True if the timer behind `handle` is still pending.
    pub fn is_pending(&self, handle: TimerHandle) -> bool {
        self.shared().state.lock().wheel.contains(handle.key)
    }

    /// Where the timer behind `handle` sits in the wheel (level, slot, bucket expiration);
    /// `None` if it is stale or already due (in no bucket).
    pub fn position(&self, handle: TimerHandle) -> Option<WheelPosition> {
        self.shared().state.lock().wheel.position(handle.key)
    }

    /// [`position`](Timer::position) of many handles under one lock.
    pub fn positions(&self, handles: &[TimerHandle]) -> Vec<Option<WheelPosition>> {
        let state = self.shared().state.lock();
        handles
            .iter()
            .map(|h| state.wheel.position(h.key))
            .collect()
    }

    /// Make room for `additional` more pending timers without reallocating.
    pub fn reserve(&self, additional: usize) {
        self.shared().state.lock().wheel.reserve(additional);
    }

    /// Held clock (manual, or a frozen system timer): move time forward to `t_ms`, running
    /// every task due at or before it, in due-time order (ties in scheduling order), and
    /// return how many ran.
    ///
    /// Time moves bucket by bucket: while a batch of tasks runs, [`now_ms`](Timer::now_ms)
    /// reads their due time, so a task that schedules another timer due before `t_ms` sees
    /// it run within this same call, in order. Tasks run on the calling thread, outside the
    /// timer's lock; a panicking task propagates to the caller (tasks of the same batch
    /// that had not run yet are dropped). Concurrent advances of one timer are allowed but
    /// may interleave their batches. If a frozen timer is resumed meanwhile, the advance
    /// stops there (the driver takes over).
    ///
    /// With `tick_ms > 1` a task is due once its deadline rounded up to the tick has come.
    ///
    /// Running system clock: a no-op returning 0 (the driver thread does the advancing).
    pub fn advance_to(&self, t_ms: u64) -> usize {
        let shared = self.shared();
        let mut ran = 0;
        let mut batch = Vec::new();
        loop {
            {
                let mut state = shared.state.lock();
                let step = match state.wheel.next_expiration() {
                    Some(next) if next <= t_ms => next.max(shared.clock.now_ms()),
                    _ => t_ms,
                };
                if !shared.clock.hold_at(step) {
                    return ran; // the clock runs: the driver advances it
                }
                let now = shared.clock.now_ms();
                state.wheel.advance_to(now, &mut batch);
                if batch.is_empty() && step == t_ms {
                    return ran;
                }
            }
            ran += batch.len();
            driver::run_batch(&mut batch, false);
        }
    }

    /// Held clock: [`advance_to`](Timer::advance_to)`(now_ms() + ms)`. Running system
    /// clock: a no-op returning 0.
    pub fn advance_by(&self, ms: u64) -> usize {
        if !self.is_manual() {
            return 0;
        }
        self.advance_to(self.now_ms().saturating_add(ms))
    }

    /// Number of timers scheduled and not yet run or cancelled.
    pub fn pending(&self) -> usize {
        self.shared().state.lock().wheel.len()
    }

    /// A read-only picture of the wheel: clock, levels (with their cascade counters),
    /// non-empty buckets and recent flushes. Never walks the timers.
    pub fn snapshot(&self) -> WheelSnapshot {
        let shared = self.shared();
        let mut state = shared.state.lock();
        state.wheel.snapshot(shared.clock.now_ms())
    }

    /// Stop the timer.
    ///
    /// Every pending task is dropped without running (as in Kafka, where shutting the
    /// `SystemTimer` down abandons its pending tasks), the driver thread exits and is
    /// joined (unless `shutdown` is called from a task running on it), and later schedules
    /// drop their task at once and return a stale handle. `pending()` is 0 afterwards.
    /// Idempotent; also done when the last clone of the timer is dropped.
    pub fn shutdown(&self) {
        driver::shutdown(
            &self.owner.shared,
            &self.owner.driver,
            self.owner.driver_thread,
        );
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("manual", &self.is_manual())
            .field("frozen", &self.is_frozen())
            .field("now_ms", &self.now_ms())
            .field("pending", &self.pending())
            .finish()
    }
}
