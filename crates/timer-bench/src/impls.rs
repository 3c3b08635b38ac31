//! The implementations the single-threaded workloads compare, behind one small trait.
//!
//! * `timewheel`: this crate's [`TimingWheel`], the data structure itself (what the
//!   timer-vs-timer comparison is about);
//! * `timewheel-timer`: the full shared [`Timer`] (mutex, closure task, driver wake-up
//!   check), to show what the thread-safe wrapper adds;
//! * `binary-heap`: [`HeapTimer`], a `BinaryHeap` with tombstones;
//! * `delay-queue`: `tokio_util::time::DelayQueue` (itself a slab-backed hierarchical
//!   wheel with 64 slots per level), used from inside a tokio runtime context.
//!
//! Every implementation gets its capacity up front, deadlines in milliseconds from a fixed
//! base (no clock read per operation), the same payload (a `NonZeroU32` id, which an
//! `Option` can wrap for free) and the same sequence of operations.

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use timewheel::{Key, Timer, TimerConfig, TimerHandle, TimingWheel};
use tokio_util::time::{delay_queue, DelayQueue};

use crate::heap::{HeapHandle, HeapTimer};

/// What the add/cancel workloads need from a timer.
pub trait TimerImpl {
    /// The `impl=` name in the output.
    const NAME: &'static str;
    /// What `add` returns and `cancel` takes.
    type Handle: Copy;
    /// An empty timer with room for `capacity` timers.
    fn with_capacity(capacity: usize) -> Self;
    /// Add a timer `delay_ms` after the (fixed) start, carrying `id`.
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> Self::Handle;
    /// Cancel a pending timer; true if it was pending.
    fn cancel(&mut self, handle: Self::Handle) -> bool;
}

impl TimerImpl for TimingWheel<NonZeroU32> {
    const NAME: &'static str = "timewheel";
    type Handle = Key;

    fn with_capacity(capacity: usize) -> Self {
        let config = TimerConfig::default();
        TimingWheel::with_capacity(config.tick_ms, config.wheel_size, 0, capacity)
    }

    #[inline]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> Key {
        self.insert(delay_ms, id)
    }

    #[inline]
    fn cancel(&mut self, handle: Key) -> bool {
        self.remove(handle).is_some()
    }
}

/// The shared timer, on a manual clock (no driver thread competing for the CPU).
pub struct SharedTimer(Timer);

impl TimerImpl for SharedTimer {
    const NAME: &'static str = "timewheel-timer";
    type Handle = TimerHandle;

    fn with_capacity(capacity: usize) -> Self {
        let timer = Timer::manual(TimerConfig::default());
        timer.reserve(capacity);
        SharedTimer(timer)
    }

    #[inline]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> TimerHandle {
        self.0.schedule_at(delay_ms, move || {
            std::hint::black_box(id);
        })
    }

    #[inline]
    fn cancel(&mut self, handle: TimerHandle) -> bool {
        self.0.cancel(handle)
    }
}

impl TimerImpl for HeapTimer<NonZeroU32> {
    const NAME: &'static str = "binary-heap";
    type Handle = HeapHandle;

    fn with_capacity(capacity: usize) -> Self {
        HeapTimer::with_capacity(capacity)
    }

    #[inline]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> HeapHandle {
        HeapTimer::add(self, delay_ms, id)
    }

    #[inline]
    fn cancel(&mut self, handle: HeapHandle) -> bool {
        HeapTimer::cancel(self, handle)
    }
}

/// tokio-util's `DelayQueue`, with deadlines as `Instant`s from a fixed base.
pub struct TokioDelayQueue {
    queue: DelayQueue<NonZeroU32>,
    base: Instant,
}

impl TimerImpl for TokioDelayQueue {
    const NAME: &'static str = "delay-queue";
    type Handle = delay_queue::Key;

    fn with_capacity(capacity: usize) -> Self {
        TokioDelayQueue {
            queue: DelayQueue::with_capacity(capacity),
            base: Instant::now(),
        }
    }

    #[inline]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> delay_queue::Key {
        let when = self.base + Duration::from_millis(delay_ms);
        self.queue.insert_at(id, when.into())
    }

    #[inline]
    fn cancel(&mut self, handle: delay_queue::Key) -> bool {
        // `remove` panics on a stale key instead of answering; `try_remove` answers.
        self.queue.try_remove(&handle).is_some()
    }
}

/// Run `f` inside a tokio runtime context (DelayQueue needs the runtime's timer).
pub fn in_tokio<R>(f: impl FnOnce() -> R) -> R {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("tokio runtime");
    let _guard = runtime.enter();
    f()
}
