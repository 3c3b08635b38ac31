//! The implementations the single-threaded workloads compare, behind one small trait.
//!
//! * `timewheel`: this crate's [`TimingWheel`], the data structure itself (what the
//!   timer-vs-timer comparison is about);
//! * `timewheel-timer`: the full shared [`Timer`] (mutex, closure task, driver wake-up
//!   check), to show what the thread-safe wrapper adds;
//! * `timewheel-locked` (churn only): the bare wheel behind the same kind of mutex as the
//!   `Timer`'s and nothing else, to tell what the lock costs from what the rest of the
//!   `Timer` (its task, its larger slot, its wake-up check) costs;
//! * `timewheel-fenced` (churn only): the bare wheel with two atomic read-modify-writes
//!   around each call and no lock: what a lock's acquire and release cost as memory
//!   barriers (on x86 each is a `lock`-prefixed instruction), apart from locking;
//! * `binary-heap`: [`HeapTimer`], a `BinaryHeap` with tombstones;
//! * `delay-queue`: `tokio_util::time::DelayQueue` (itself a slab-backed hierarchical
//!   wheel with 64 slots per level), used from inside a tokio runtime context;
//! * `slots-only` (churn and scale): [`SlotsOnly`], generation-checked slots and nothing
//!   else, the floor under every implementation (see `floor.rs`).
//!
//! Every implementation gets its capacity up front, deadlines in milliseconds from a fixed
//! base (no clock read per operation), the same payload (a `NonZeroU32` id, which an
//! `Option` can wrap for free) and the same sequence of operations.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use timewheel::{Key, Timer, TimerConfig, TimerHandle, TimingWheel};
use tokio_util::time::{delay_queue, DelayQueue};

use crate::floor::{SlotKey, SlotsOnly};
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

/// The bare wheel behind a `parking_lot` mutex, locked once per call as
/// [`Timer::schedule_at`] and [`Timer::cancel`] lock theirs.
pub struct LockedWheel(parking_lot::Mutex<TimingWheel<NonZeroU32>>);

impl TimerImpl for LockedWheel {
    const NAME: &'static str = "timewheel-locked";
    type Handle = Key;

    fn with_capacity(capacity: usize) -> Self {
        let wheel = <TimingWheel<NonZeroU32> as TimerImpl>::with_capacity(capacity);
        LockedWheel(parking_lot::Mutex::new(wheel))
    }

    // Not inlined, like the `Timer`'s methods, which are called across the crate boundary.
    #[inline(never)]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> Key {
        self.0.lock().insert(delay_ms, id)
    }

    #[inline(never)]
    fn cancel(&mut self, handle: Key) -> bool {
        self.0.lock().remove(handle).is_some()
    }
}

/// The bare wheel, with an atomic read-modify-write before and after each call, as a
/// lock's acquire and release would do, but guarding nothing.
pub struct FencedWheel {
    wheel: TimingWheel<NonZeroU32>,
    fence: AtomicU64,
}

impl FencedWheel {
    #[inline]
    fn fence(&self) {
        self.fence.fetch_add(1, Ordering::SeqCst);
    }
}

impl TimerImpl for FencedWheel {
    const NAME: &'static str = "timewheel-fenced";
    type Handle = Key;

    fn with_capacity(capacity: usize) -> Self {
        FencedWheel {
            wheel: <TimingWheel<NonZeroU32> as TimerImpl>::with_capacity(capacity),
            fence: AtomicU64::new(0),
        }
    }

    // Not inlined, like `LockedWheel`'s.
    #[inline(never)]
    fn add(&mut self, delay_ms: u64, id: NonZeroU32) -> Key {
        self.fence();
        let key = self.wheel.insert(delay_ms, id);
        self.fence();
        key
    }

    #[inline(never)]
    fn cancel(&mut self, handle: Key) -> bool {
        self.fence();
        let removed = self.wheel.remove(handle).is_some();
        self.fence();
        removed
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

impl TimerImpl for SlotsOnly<NonZeroU32> {
    const NAME: &'static str = "slots-only";
    type Handle = SlotKey;

    fn with_capacity(capacity: usize) -> Self {
        SlotsOnly::with_capacity(capacity)
    }

    /// The delay is dropped: nothing is ordered (see `floor.rs`).
    #[inline]
    fn add(&mut self, _delay_ms: u64, id: NonZeroU32) -> SlotKey {
        SlotsOnly::add(self, id)
    }

    #[inline]
    fn cancel(&mut self, handle: SlotKey) -> bool {
        SlotsOnly::cancel(self, handle).is_some()
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
