//! The timer: a shared, thread-safe timing wheel with a clock and a driver.
//!
//! This is Kafka's `SystemTimer`: the single timer a broker's purgatories (produce,
//! fetch, join, ...) all put their timeouts in. It wraps a [`TimingWheel`] in a mutex and
//! drives it in one of two ways, with the same code underneath:
//!
//! * [`Timer::system`]: a monotonic clock and a background *driver* thread. The driver
//!   sleeps until the earliest non-empty bucket is due (the bucket queue's head), wakes,
//!   advances the wheel to the current time and runs what fired. With nothing pending it
//!   sleeps without a deadline: there is no periodic tick and no idle wake-up. Kafka's
//!   reaper, by contrast, polls its queue with a 200 ms timeout forever. A newly scheduled
//!   timer that is due before the driver's planned wake-up wakes it early.
//! * [`Timer::manual`]: time starts at 0 and moves only through
//!   [`advance_to`](Timer::advance_to) / [`advance_by`](Timer::advance_by), which run the
//!   due tasks on the calling thread. Tests are deterministic and take no real time.
//!
//! # Tasks run outside every lock
//!
//! Fired tasks are collected under the wheel's lock and run only after it is released, so
//! a task may freely schedule or cancel timers (on this or any timer), and may take its own
//! locks without risking a lock-order inversion with the timer. On a system timer the tasks
//! run one after another on the driver thread, so they should be short (hand heavy work to
//! another thread or task); a task that panics is caught and the driver carries on.
//!
//! # Costs
//!
//! `schedule`: one allocation for a closure task (none for [`Timer::schedule_task`], which
//! takes an existing `Arc`), one uncontended lock, an O(1) wheel insert, and at most one
//! wake-up of the driver. `cancel`: one lock and an O(1) wheel removal.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use parking_lot::{Condvar, Mutex};

use crate::clock::Clock;
use crate::slab::Key;
use crate::snapshot::WheelSnapshot;
use crate::wheel::{Expired, TimingWheel};

/// Shape of the wheel underneath a [`Timer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    /// Width of a level-0 bucket, in milliseconds: the timer's resolution. Default 1.
    pub tick_ms: u64,
    /// Buckets per level. Default 20 (Kafka's), so the levels span 20 ms, 400 ms, 8 s, ...
    pub wheel_size: usize,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            tick_ms: 1,
            wheel_size: 20,
        }
    }
}

/// Something a [`Timer`] can run when it fires.
///
/// Closures passed to [`Timer::schedule`] are wrapped in one of these. Implement it
/// directly to schedule an object that is already behind an `Arc` without any further
/// allocation; that is how a [`Purgatory`](crate::Purgatory) puts its operations' timeouts
/// in the wheel.
pub trait TimerTask: Send + Sync + 'static {
    /// Called once, when the timer fires, outside every timer lock. Not called if the timer
    /// is cancelled or the timer shuts down first.
    fn run(self: Arc<Self>);
}

/// A closure task. The closure is `Send` but not necessarily `Sync`, so it sits in a
/// mutex that is locked only to take it out, never while it runs.
struct ClosureTask<F>(Mutex<Option<F>>);

impl<F: FnOnce() + Send + 'static> TimerTask for ClosureTask<F> {
    fn run(self: Arc<Self>) {
        let f = self.0.lock().take();
        if let Some(f) = f {
            f();
        }
    }
}

/// Identifies one scheduled timer, for [`Timer::cancel`].
///
/// Handles are stamped with the timer's insertion number: once the timer has fired or been cancelled (and its slot
/// perhaps reused by another timer) the handle is stale and cancelling it returns `false`.
/// A handle from one timer is refused by another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerHandle {
    timer: u32,
    key: Key,
}

impl TimerHandle {
    /// The handle packed in 64 bits, without the timer id (for an `AtomicU64` slot).
    pub(crate) fn key_bits(self) -> u64 {
        ((self.key.index as u64) << 32) | self.key.stamp as u64
    }

    /// A handle that names no timer (what scheduling on a shut-down timer returns).
    fn dead(timer: u32) -> TimerHandle {
        TimerHandle {
            timer,
            key: Key {
                index: u32::MAX,
                stamp: 0,
            },
        }
    }
}

/// Source of timer ids, so that handles can tell their timer apart from others.
static NEXT_TIMER_ID: AtomicU32 = AtomicU32::new(0);

/// `State::sleeping_until` while the driver is awake (or there is no driver).
const AWAKE: u64 = 0;

/// Everything behind the wheel lock.
struct State {
    wheel: TimingWheel<Arc<dyn TimerTask>>,
    /// When the driver plans to wake: [`AWAKE`] while it runs, `u64::MAX` while it sleeps
    /// with nothing pending. A schedule earlier than this wakes it.
    sleeping_until: u64,
    shut_down: bool,
}

/// What the driver thread shares with the handles.
struct Shared {
    id: u32,
    config: TimerConfig,
    clock: Clock,
    state: Mutex<State>,
    wakeup: Condvar,
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
        shutdown(&self.shared, &self.driver, self.driver_thread);
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
            .spawn(move || drive(&driver_shared))
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

    /// True if this timer runs on a manual clock.
    pub fn is_manual(&self) -> bool {
        self.shared().clock.is_manual()
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
    /// task never runs inside this call.
    pub fn schedule(&self, delay_ms: i64, task: impl FnOnce() + Send + 'static) -> TimerHandle {
        self.schedule_task(
            self.deadline_after(delay_ms),
            Arc::new(ClosureTask(Mutex::new(Some(task)))),
        )
    }

    /// Run `task` once the clock reads `deadline_ms` (a deadline in the past is due now).
    pub fn schedule_at(
        &self,
        deadline_ms: u64,
        task: impl FnOnce() + Send + 'static,
    ) -> TimerHandle {
        self.schedule_task(deadline_ms, Arc::new(ClosureTask(Mutex::new(Some(task)))))
    }

    /// Run an `Arc`-shared [`TimerTask`] once the clock reads `deadline_ms`. No allocation
    /// beyond the wheel's slab.
    ///
    /// On a timer that has been shut down the task is dropped without running and the
    /// returned handle is already stale.
    pub fn schedule_task(&self, deadline_ms: u64, task: Arc<dyn TimerTask>) -> TimerHandle {
        let shared = self.shared();
        let mut state = shared.state.lock();
        if state.shut_down {
            drop(state);
            drop(task);
            return TimerHandle::dead(shared.id);
        }
        let key = state.wheel.insert(deadline_ms, task);
        // Wake the driver if this timer needs it earlier than it planned to wake. Clearing
        // `sleeping_until` means later schedules do not wake it again before it has looked.
        if let Some(wake) = state.wheel.wake_time(key) {
            if wake < state.sleeping_until {
                state.sleeping_until = AWAKE;
                shared.wakeup.notify_one();
            }
        }
        TimerHandle {
            timer: shared.id,
            key,
        }
    }

    /// Cancel a pending timer. Returns `true` iff it was pending and now will never run;
    /// `false` for a stale handle (already fired, already cancelled, slot reused, or a
    /// handle of another timer). The task is dropped after the lock is released.
    pub fn cancel(&self, handle: TimerHandle) -> bool {
        let shared = self.shared();
        if handle.timer != shared.id {
            return false;
        }
        let removed = shared.state.lock().wheel.remove(handle.key);
        removed.is_some()
    }

    /// The handle of this timer whose [`key_bits`](TimerHandle::key_bits) are `bits`.
    pub(crate) fn handle_from_bits(&self, bits: u64) -> TimerHandle {
        TimerHandle {
            timer: self.shared().id,
            key: Key {
                index: (bits >> 32) as u32,
                stamp: bits as u32,
            },
        }
    }

    /// True if the timer behind `handle` is still pending.
    pub fn is_pending(&self, handle: TimerHandle) -> bool {
        handle.timer == self.shared().id && self.shared().state.lock().wheel.contains(handle.key)
    }

    /// Manual clock: move time forward to `t_ms`, running every task due at or before it, in
    /// due-time order (ties in scheduling order), and return how many ran.
    ///
    /// Time moves bucket by bucket: while a batch of tasks runs, [`now_ms`](Timer::now_ms)
    /// reads their due time, so a task that schedules another timer due before `t_ms` sees
    /// it run within this same call, in order. Tasks run on the calling thread, outside the
    /// timer's lock; a panicking task propagates to the caller (tasks of the same batch
    /// that had not run yet are dropped). Concurrent advances of one manual timer are
    /// allowed but may interleave their batches.
    ///
    /// With `tick_ms > 1` a task is due once its deadline rounded up to the tick has come.
    ///
    /// System clock: a no-op returning 0 (the driver thread does the advancing).
    pub fn advance_to(&self, t_ms: u64) -> usize {
        let shared = self.shared();
        if !shared.clock.is_manual() {
            return 0;
        }
        let mut ran = 0;
        let mut batch = Vec::new();
        loop {
            {
                let mut state = shared.state.lock();
                let step = match state.wheel.next_expiration() {
                    Some(next) if next <= t_ms => next.max(shared.clock.now_ms()),
                    _ => t_ms,
                };
                shared.clock.set_manual(step);
                let now = shared.clock.now_ms();
                state.wheel.advance_to(now, &mut batch);
                if batch.is_empty() && step == t_ms {
                    return ran;
                }
            }
            ran += batch.len();
            run_batch(&mut batch, false);
        }
    }

    /// Manual clock: [`advance_to`](Timer::advance_to)`(now_ms() + ms)`. System clock: a
    /// no-op returning 0.
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

    /// A read-only picture of the wheel: clock, levels, non-empty buckets.
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
        shutdown(
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
            .field("now_ms", &self.now_ms())
            .field("pending", &self.pending())
            .finish()
    }
}

impl Shared {
    fn new(config: TimerConfig, clock: Clock) -> Shared {
        let start = clock.now_ms();
        Shared {
            id: NEXT_TIMER_ID.fetch_add(1, Ordering::Relaxed),
            config,
            clock,
            state: Mutex::new(State {
                wheel: TimingWheel::new(config.tick_ms, config.wheel_size, start),
                sleeping_until: AWAKE,
                shut_down: false,
            }),
            wakeup: Condvar::new(),
        }
    }
}

/// Run a batch of fired tasks (outside every lock), emptying it.
fn run_batch(batch: &mut Vec<Expired<Arc<dyn TimerTask>>>, catch_panics: bool) {
    for expired in batch.drain(..) {
        let task = expired.value;
        if catch_panics {
            // The panic message has already been printed by the panic hook; keep the
            // driver alive for everyone else's timers.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
        } else {
            task.run();
        }
    }
}

/// The driver thread of a system timer.
fn drive(shared: &Shared) {
    let mut batch = Vec::new();
    let mut state = shared.state.lock();
    loop {
        if state.shut_down {
            return;
        }
        state.sleeping_until = AWAKE;
        state.wheel.advance_to(shared.clock.now_ms(), &mut batch);
        if !batch.is_empty() {
            drop(state);
            run_batch(&mut batch, true);
            state = shared.state.lock();
            continue;
        }
        match state.wheel.next_expiration() {
            Some(next) => {
                state.sleeping_until = next;
                match shared.clock.instant_of(next) {
                    Some(at) => {
                        shared.wakeup.wait_until(&mut state, at);
                    }
                    None => shared.wakeup.wait(&mut state),
                }
            }
            None => {
                state.sleeping_until = u64::MAX;
                shared.wakeup.wait(&mut state);
            }
        }
    }
}

fn shutdown(
    shared: &Shared,
    driver: &Mutex<Option<JoinHandle<()>>>,
    driver_thread: Option<ThreadId>,
) {
    let abandoned = {
        let mut state = shared.state.lock();
        state.shut_down = true;
        state.wheel.drain()
    };
    shared.wakeup.notify_all();
    // Dropping the tasks may run arbitrary destructors: do it outside the lock.
    drop(abandoned);
    if driver_thread != Some(std::thread::current().id()) {
        if let Some(handle) = driver.lock().take() {
            let _ = handle.join();
        }
    }
}
