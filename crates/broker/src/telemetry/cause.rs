//! Why a parked operation completed, as seen by the thread that completed it.
//!
//! A delayed operation is completed by whoever runs `check_and_complete` on its key: a
//! follower's fetch that moved the high watermark, a produce that appended data a parked
//! fetch was waiting for, the ISR check that dropped a follower. The operation's
//! `on_complete` runs on that same thread, inside that call, so the code that causes the
//! change sets the cause in a thread-local for the duration ([`with_cause`]) and the
//! operation reads it ([`current_cause`]). Nothing is allocated or locked for it.

use std::cell::Cell;

/// What completed a parked request (or why it did not need to park).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cause {
    /// Not known (not completed yet, or completed outside any traced change).
    #[default]
    Unknown,
    /// Answered without waiting in a purgatory.
    Immediate,
    /// A follower's fetch moved its log end offset (and with it, perhaps, the HW).
    FollowerFetch {
        /// The follower's replica id.
        replica: i32,
        /// Its fetch offset: its new log end offset.
        fetch_offset: i64,
        /// The high watermark after the fetch.
        high_watermark: i64,
        /// The follower fetch's own request number in the request log.
        request: u64,
        /// The follower fetch's correlation id.
        correlation_id: i32,
    },
    /// A produce appended to the partition (what a parked follower fetch waits for; with
    /// the leader alone in the ISR it also moves the HW).
    Append {
        /// The produce's request number in the request log.
        request: u64,
        /// The partition's log end offset after the append.
        log_end_offset: i64,
    },
    /// The periodic ISR check removed followers, and the HW moved on without them.
    IsrShrink {
        /// The high watermark after the shrink.
        high_watermark: i64,
    },
    /// The timeout fired in the timing wheel.
    Expired,
    /// Completed with an error (the Kafka error code).
    Error(i16),
}

thread_local! {
    static CURRENT: Cell<Cause> = const { Cell::new(Cause::Unknown) };
}

/// Runs `f` with `cause` as the thread's current cause, restoring the previous one after.
pub fn with_cause<R>(cause: Cause, f: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|c| c.replace(cause));
    let out = f();
    CURRENT.with(|c| c.set(previous));
    out
}

/// The cause set by the innermost [`with_cause`] on this thread, if any.
pub fn current_cause() -> Cause {
    CURRENT.with(Cell::get)
}

/// Fills in the offset a [`Cause`] reports once the change is made (under the partition
/// lock, before any purgatory is checked): the high watermark after a follower fetch or an
/// ISR shrink, the log end offset after an append.
pub fn set_current_offset(offset: i64) {
    CURRENT.with(|c| {
        let updated = match c.get() {
            Cause::FollowerFetch {
                replica,
                fetch_offset,
                request,
                correlation_id,
                ..
            } => Cause::FollowerFetch {
                replica,
                fetch_offset,
                high_watermark: offset,
                request,
                correlation_id,
            },
            Cause::IsrShrink { .. } => Cause::IsrShrink {
                high_watermark: offset,
            },
            Cause::Append { request, .. } => Cause::Append {
                request,
                log_end_offset: offset,
            },
            other => other,
        };
        c.set(updated);
    });
}
