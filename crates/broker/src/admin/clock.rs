//! Freezing a running broker's clock for the live view: stop time, step it, resume it.
//!
//! A broker on the system clock can be switched to manual time and back: `freeze` stops
//! the clock where it is (nothing fires, parked requests wait), `POST /api/clock/advance`
//! then steps it exactly like a manual clock, and `resume` lets it run at real rate again
//! from the time it holds. A broker started with `--clock manual` is always stopped: it is
//! stepped, never frozen or resumed.

use timewheel::Timer;

/// True while a system clock is frozen.
pub fn is_frozen(timer: &Timer) -> bool {
    let _ = timer;
    false
}

/// True if the clock can be frozen (a system clock; a manual one is always stopped).
pub fn can_freeze(timer: &Timer) -> bool {
    let _ = timer;
    false
}

/// Stops a running clock.
pub fn freeze(timer: &Timer) -> Result<(), String> {
    let _ = timer;
    Err("freezing a running clock needs the timewheel's freeze (second pass)".into())
}

/// Lets a frozen clock run again from the time it holds.
pub fn resume(timer: &Timer) -> Result<(), String> {
    let _ = timer;
    Err("resuming a frozen clock needs the timewheel's resume (second pass)".into())
}
