//! Freezing a running broker's clock for the live view: stop time, step it, resume it.
//!
//! A broker on the system clock can be switched to manual time and back: `freeze` stops
//! the clock where it is (nothing fires, parked requests wait), `POST /api/clock/advance`
//! then steps it exactly like a manual clock (running what falls due), and `resume` lets
//! it run at real rate again from the time it holds, without jumping over the time spent
//! frozen. A broker started with `--clock manual` is always stopped: it is stepped, never
//! frozen or resumed. (The timer does the work: `timewheel::Timer::freeze`/`resume`.)

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use timewheel::Timer;
use tracing::info;

use super::{authorize, error, AdminState};

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

/// The clock, as the page needs it.
pub(super) fn clock_json(s: &AdminState) -> Value {
    let timer = &s.rm.timer;
    json!({
        "mode": s.rm.config.clock,
        "frozen": is_frozen(timer),
        "steppable": timer.is_manual(),
        "can_freeze": can_freeze(timer),
        "now_ms": timer.now_ms(),
        "tick_ms": timer.config().tick_ms,
        "wheel_size": timer.config().wheel_size,
    })
}

pub(super) async fn post_freeze(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    change_clock(&s, peer, &headers, freeze, "clock frozen")
}

pub(super) async fn post_resume(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    change_clock(&s, peer, &headers, resume, "clock resumed")
}

/// Freezes or resumes the broker's clock for an authorized caller, answering with the
/// clock's new state (409 if it already was so).
fn change_clock(
    s: &AdminState,
    peer: SocketAddr,
    headers: &HeaderMap,
    change: fn(&Timer) -> Result<(), String>,
    what: &str,
) -> Response {
    if let Err(denied) = authorize(s, peer, headers) {
        return *denied;
    }
    match change(&s.rm.timer) {
        Ok(()) => {
            info!(target: "purgatory::admin", %peer, now_ms = s.rm.now_ms(), "{what}");
            Json(clock_json(s)).into_response()
        }
        Err(why) => error(StatusCode::CONFLICT, why),
    }
}
