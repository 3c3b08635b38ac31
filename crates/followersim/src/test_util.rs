//! For tests (this crate's and the broker's): wait for something to happen, without
//! asserting how long it took. Small enough to ship in the library, so that integration
//! tests in any crate of the workspace share one.

use std::time::{Duration, Instant};

/// How long [`wait_until`] waits before it calls the wait a hang. A guard that turns a hang
/// into a failure, never a bound a slow machine could break: every wait it guards ends
/// in milliseconds when nothing is wrong.
pub const HANG_GUARD: Duration = Duration::from_secs(20);

/// Polls `condition` every 5 ms until it holds; panics with `what` after [`HANG_GUARD`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        if start.elapsed() > HANG_GUARD {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
