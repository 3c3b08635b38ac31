//! Freezing a running broker's clock for the live view: stop time, step it, resume it.
//!
//! A broker on the system clock can be switched to manual time and back: `freeze` stops
//! the clock where it is (nothing fires, parked requests wait), `POST /api/clock/advance`
//! then steps it exactly like a manual clock (running what falls due), and `resume` lets
//! it run at real rate again from the time it holds, without jumping over the time spent
//! frozen. A broker started with `--clock manual` is always stopped: it is stepped, never
//! frozen or resumed. (The timer does the work: `timewheel::Timer::freeze`/`resume`.)

use timewheel::Timer;

/// True while a system clock is frozen.
pub fn is_frozen(timer: &Timer) -> bool {
    timer.is_frozen()
}

/// True if the clock can be frozen: a system clock (a manual one is always stopped).
pub fn can_freeze(timer: &Timer) -> bool {
    timer.is_system()
}

/// Stops a running clock (a no-op if it is already frozen).
pub fn freeze(timer: &Timer) -> Result<(), String> {
    if !timer.is_system() {
        return Err("the broker runs on a manual clock: it is always stopped; step it".into());
    }
    timer.freeze();
    Ok(())
}

/// Lets a frozen clock run again from the time it holds (a no-op if it runs).
pub fn resume(timer: &Timer) -> Result<(), String> {
    if !timer.is_system() {
        return Err("the broker runs on a manual clock: it cannot run on its own".into());
    }
    timer.resume();
    Ok(())
}
