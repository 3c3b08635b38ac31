//! Read-only snapshots for introspection: what the wheel and a purgatory hold right now.
//!
//! The broker's state API and web view show, live, which bucket of which wheel level a
//! request's timeout sits in and which keys an operation watches. These plain structs are
//! what they serialise (with `serde`); taking one copies a few counters and lists under
//! the owner's lock, so it is cheap enough to poll but not meant for a hot path.

use serde::Serialize;

/// A picture of a [`Timer`](crate::Timer)'s wheel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WheelSnapshot {
    /// The timer's clock, in milliseconds (manual clock: the time tests advanced to;
    /// system clock: milliseconds since the timer started).
    pub now_ms: u64,
    /// The wheel's own current time: `now_ms` rounded down to a multiple of `tick_ms`, as
    /// of the last advance.
    pub current_time_ms: u64,
    /// Timers not yet fired or cancelled (including those already due).
    pub pending: usize,
    /// Timers already due (their deadline is at or before `current_time_ms`) that have not
    /// run yet: they run on the next advance of a manual clock, promptly on a system clock.
    pub due: usize,
    /// One entry per level, finest first. Overflow levels are created on demand, so this
    /// grows only when a timer far enough in the future has been scheduled.
    pub levels: Vec<LevelSnapshot>,
    /// Every non-empty bucket, ordered by expiration (the order the driver flushes them).
    pub buckets: Vec<BucketSnapshot>,
}

/// One level of the hierarchical wheel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LevelSnapshot {
    /// 0 for the finest level.
    pub level: usize,
    /// Time span of one bucket of this level.
    pub tick_ms: u64,
    /// Number of buckets of this level.
    pub wheel_size: usize,
    /// Time span of the whole level: `tick_ms * wheel_size` (saturating).
    pub interval_ms: u64,
    /// This level's current time: the wheel's time rounded down to a multiple of `tick_ms`.
    pub current_time_ms: u64,
}

/// One non-empty bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BucketSnapshot {
    /// The level the bucket belongs to.
    pub level: usize,
    /// Its index within the level, `0..wheel_size`.
    pub slot: usize,
    /// When the driver flushes it: its entries then fire or move to a finer level.
    pub expiration_ms: u64,
    /// How many timers it holds.
    pub entries: usize,
}

/// A picture of a [`Purgatory`](crate::Purgatory).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PurgatorySnapshot {
    /// The purgatory's name (e.g. "Produce", "Fetch").
    pub name: String,
    /// Watcher-list entries, Kafka's `PurgatorySize`: an operation watching three keys
    /// counts three times, and completed operations count until they are purged.
    pub watched: usize,
    /// Operations whose timeout is pending, Kafka's `NumDelayedOperations`.
    pub delayed: usize,
    /// Operations completed by their timeout since the purgatory was created.
    pub expired: u64,
    /// Operations completed by any path since the purgatory was created.
    pub completed: u64,
    /// Every watched key with the length of its watcher list, sorted by key.
    pub keys: Vec<KeySnapshot>,
    /// Pending operations, earliest deadline first, at most the requested number.
    pub pending: Vec<PendingSnapshot>,
    /// How many pending operations there are in all (`pending` may show fewer).
    pub pending_total: usize,
}

/// One watched key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeySnapshot {
    /// The key, formatted with `Display`.
    pub key: String,
    /// Entries in its watcher list (pending operations plus completed ones not yet purged).
    pub watchers: usize,
}

/// One pending delayed operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PendingSnapshot {
    /// The keys it watches, formatted with `Display`.
    pub keys: Vec<String>,
    /// When it times out, on the timer's clock.
    pub deadline_ms: u64,
    /// What it waits for, from [`DelayedOperation::describe`](crate::DelayedOperation::describe).
    pub description: String,
}
