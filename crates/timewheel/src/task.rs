//! What a [`Timer`](crate::Timer) slot holds: a task to run once, stored without an
//! allocation when it is small.
//!
//! Kafka's timer tasks are objects on the heap. A boxed closure here would cost an
//! allocation per `schedule` and, on a cancel, a free of memory last touched when the
//! timer was scheduled (a cache miss with many timers pending). So a [`Task`] stores a
//! closure of up to 8 bytes (aligned to at most 8) in place, next to one pointer to a
//! table of two functions that know its type: run it, or drop it: 16 bytes in all, so a
//! timer's slot is 32 (with its generation, list and insertion number). Many timeouts capture one pointer (an `Arc`) or an id, and need no
//! allocation at all; a bigger closure is boxed first (the box is one pointer and fits).
//! An `Arc<T>` of a concrete [`TimerTask`] ([`Timer::schedule_arc`](crate::Timer::schedule_arc),
//! how a purgatory schedules its operations) is one pointer too; an `Arc<dyn TimerTask>`
//! is two, and is boxed.
//!
//! This is the crate's one piece of `unsafe` code. Its soundness rests on three facts,
//! all established in `Task::in_place`, the only constructor: the bytes hold a valid `F`
//! (written there, and alignment and size checked there), the table is the one for that
//! same `F`, and `F: Send`. After that the bytes are read out as an `F` exactly once,
//! either by [`Task::run`] (which consumes the task without running its destructor) or by
//! `Drop`.

use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};
use std::sync::Arc;

/// Something a [`Timer`](crate::Timer) can run when it fires.
///
/// Implement it to schedule an object that is already behind an `Arc` without any further
/// allocation; that is how a [`Purgatory`](crate::Purgatory) puts its operations' timeouts
/// in the wheel.
pub trait TimerTask: Send + Sync + 'static {
    /// Called once, when the timer fires, outside every timer lock. Not called if the timer
    /// is cancelled or the timer shuts down first.
    fn run(self: Arc<Self>);
}

/// The in-place storage: 8 bytes, aligned to 8.
type Storage = MaybeUninit<u64>;

/// The two things a task's type knows how to do with its bytes.
struct VTable {
    /// Read the value out and call it.
    run: unsafe fn(*mut Storage),
    /// Drop the value in place.
    drop: unsafe fn(*mut Storage),
}

/// The table for tasks of type `F`.
struct VTableFor<F>(std::marker::PhantomData<F>);

impl<F: FnOnce()> VTableFor<F> {
    const TABLE: VTable = VTable {
        run: run::<F>,
        drop: drop_in_place::<F>,
    };
}

/// # Safety
/// `p` holds a valid `F`, which the caller never reads or drops again.
unsafe fn run<F: FnOnce()>(p: *mut Storage) {
    // SAFETY: the caller guarantees a valid `F` that nobody else will read or drop.
    let f = unsafe { p.cast::<F>().read() };
    f();
}

/// # Safety
/// `p` holds a valid `F`, which the caller never reads or drops again.
unsafe fn drop_in_place<F>(p: *mut Storage) {
    // SAFETY: as for `run`.
    unsafe { std::ptr::drop_in_place(p.cast::<F>()) }
}

/// True if a value of type `F` fits in a task's storage.
const fn fits<F>() -> bool {
    size_of::<F>() <= size_of::<Storage>() && align_of::<F>() <= align_of::<Storage>()
}

/// A task to run once: a small closure in place, or a boxed bigger one. 16 bytes.
pub(crate) struct Task {
    data: Storage,
    vtable: &'static VTable,
}

// SAFETY: every `Task` is made by `Task::new` from an `F: Send`, and only ever moves that
// `F` (to run or drop it) on whichever thread holds the task.
unsafe impl Send for Task {}

impl Task {
    /// A task that calls `f`. No allocation if `f` is at most 8 bytes.
    #[inline]
    pub(crate) fn new<F: FnOnce() + Send + 'static>(f: F) -> Task {
        if fits::<F>() {
            Task::in_place(f)
        } else {
            Task::in_place(Box::new(f))
        }
    }

    /// A task holding `f` in place.
    ///
    /// # Panics
    /// If `F` does not fit (a check the compiler resolves for each `F`).
    #[inline]
    fn in_place<F: FnOnce() + Send + 'static>(f: F) -> Task {
        assert!(fits::<F>(), "a task stored in place must fit");
        let mut data = Storage::uninit();
        // SAFETY: `F` fits the storage in size and alignment (asserted just above), and
        // the storage is ours to write.
        unsafe { data.as_mut_ptr().cast::<F>().write(f) };
        Task {
            data,
            vtable: &VTableFor::<F>::TABLE,
        }
    }

    /// A task that runs an `Arc`-shared [`TimerTask`] (boxed: the `Arc` is two pointers).
    #[inline]
    pub(crate) fn shared(task: Arc<dyn TimerTask>) -> Task {
        Task::new(move || task.run())
    }

    /// A task that runs an `Arc`-shared [`TimerTask`] of a known type: no allocation.
    #[inline]
    pub(crate) fn arc<T: TimerTask>(task: Arc<T>) -> Task {
        Task::in_place(move || task.run())
    }

    /// Run the task, consuming it.
    #[inline]
    pub(crate) fn run(self) {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: the storage holds the value `vtable` was made for (see `new`); `this`
        // is never dropped, so the value is read exactly once, here.
        unsafe { (this.vtable.run)(&mut this.data) }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: as in `run`: the value was never read out (a run task is not dropped).
        unsafe { (self.vtable.drop)(&mut self.data) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops.
    struct Token(Arc<AtomicUsize>);
    impl Drop for Token {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn small_and_large_closures_run_once_or_drop_once() {
        assert_eq!(size_of::<Task>(), 16);
        assert_eq!(size_of::<Option<Task>>(), 16);
        let drops = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));

        // Small (8 bytes: one Arc) and large (an Arc and a 64-byte array).
        let t = Arc::new((Token(drops.clone()), ran.clone()));
        let small = Task::new(move || {
            t.1.fetch_add(1, Ordering::SeqCst);
        });
        let (t, r, pad) = (Token(drops.clone()), ran.clone(), [7u8; 64]);
        let large = Task::new(move || {
            let _t = &t;
            r.fetch_add(pad[0] as usize, Ordering::SeqCst);
        });
        small.run();
        large.run();
        assert_eq!(ran.load(Ordering::SeqCst), 8);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            2,
            "captures dropped after running"
        );

        // Dropped without running: captures dropped, nothing runs.
        let t = Arc::new((Token(drops.clone()), ran.clone()));
        drop(Task::new(move || {
            t.1.fetch_add(100, Ordering::SeqCst);
        }));
        let (t, r, pad) = (Token(drops.clone()), ran.clone(), [1u64; 8]);
        drop(Task::new(move || {
            let _t = &t;
            r.fetch_add(pad[0] as usize * 100, Ordering::SeqCst);
        }));
        assert_eq!(ran.load(Ordering::SeqCst), 8);
        assert_eq!(drops.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn a_panicking_task_drops_its_captures_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let t = Token(drops.clone());
        let task = Task::new(move || {
            let _t = &t;
            panic!("expected in this test");
        });
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
        assert!(caught.is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn shared_tasks_run_through_their_arc() {
        struct Counter(AtomicUsize);
        impl TimerTask for Counter {
            fn run(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let counter = Arc::new(Counter(AtomicUsize::new(0)));
        Task::shared(counter.clone()).run();
        drop(Task::shared(counter.clone()));
        Task::arc(counter.clone()).run();
        drop(Task::arc(counter.clone()));
        assert_eq!(counter.0.load(Ordering::SeqCst), 2);
        assert_eq!(Arc::strong_count(&counter), 1);
    }
}
