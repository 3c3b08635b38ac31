//! The driver: Kafka's `ExpirationReaper`, the thread that advances a system timer.
//!
//! It sleeps until the earliest non-empty bucket is due (the bucket queue's head), wakes,
//! advances the wheel to the current time, and runs what fired outside the lock. With
//! nothing pending, or while the timer is frozen, it sleeps with no deadline at all; a
//! schedule that needs it earlier than planned, a resume and a shutdown wake it.

use std::sync::Arc;
use std::thread::{JoinHandle, ThreadId};

use parking_lot::{Condvar, Mutex};

use crate::clock::Clock;
use crate::task::Task;
use crate::wheel::{Expired, TimerConfig, TimingWheel};

/// Everything behind the wheel lock.
pub(crate) struct State {
    pub(crate) wheel: TimingWheel<Task>,
    /// When the driver plans to wake: [`AWAKE`] while it runs (or is frozen),
    /// `u64::MAX` while it sleeps with nothing pending. A schedule earlier than this wakes
    /// it.
    pub(crate) sleeping_until: u64,
    pub(crate) shut_down: bool,
}

/// What the driver thread shares with the handles.
pub(crate) struct Shared {
    /// The wheel's id (a handle's `key.wheel`), readable without the lock.
    pub(crate) id: u32,
    pub(crate) config: TimerConfig,
    pub(crate) clock: Clock,
    pub(crate) state: Mutex<State>,
    pub(crate) wakeup: Condvar,
}

impl Shared {
    pub(crate) fn new(config: TimerConfig, clock: Clock) -> Shared {
        let wheel = TimingWheel::new(config.tick_ms, config.wheel_size, clock.now_ms());
        Shared {
            id: wheel.id(),
            config,
            clock,
            state: Mutex::new(State {
                wheel,
                sleeping_until: AWAKE,
                shut_down: false,
            }),
            wakeup: Condvar::new(),
        }
    }
}

/// `State::sleeping_until` while the driver is awake, or frozen (or there is no driver):
/// no schedule needs to wake it.
pub(crate) const AWAKE: u64 = 0;

/// Run a batch of fired tasks (outside every lock), emptying it.
pub(crate) fn run_batch(batch: &mut Vec<Expired<Task>>, catch_panics: bool) {
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
pub(crate) fn drive(shared: &Arc<Shared>) {
    let mut batch = Vec::new();
    let mut state = shared.state.lock();
    loop {
        if state.shut_down {
            return;
        }
        state.sleeping_until = AWAKE;
        if shared.clock.is_frozen() {
            // Steps run on the caller's thread; a resume or shutdown wakes us.
            shared.wakeup.wait(&mut state);
            continue;
        }
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

/// Stop a timer: drop its pending tasks, stop and join its driver (unless called on it).
pub(crate) fn shutdown(
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
