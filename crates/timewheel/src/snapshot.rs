//! Read-only snapshots for introspection: what the wheel and a purgatory hold right now.
//!
//! The broker's state API and web view show, live, which bucket of which wheel level a
//! request's timeout sits in and which keys an operation watches. These plain structs are
//! what they serialise (with `serde`), and what `purgatory ctl` reads back from that JSON;
//! taking one copies a few counters and lists under the owner's lock, so it is cheap
//! enough to poll but not meant for a hot path.

use serde::{Deserialize, Serialize};

/// A picture of a [`Timer`](crate::Timer)'s wheel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The most recent bucket flushes (at most 64), oldest first: the cascade as it
    /// happens.
    pub flushes: Vec<FlushSnapshot>,
    /// Bucket flushes since the wheel was created (the `number` the next one will get).
    pub flushes_total: u64,
}

/// One level of the hierarchical wheel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Entries that this level's bucket flushes moved down to a finer level, since the
    /// wheel was created. Always 0 on level 0.
    pub cascaded: u64,
    /// Entries that this level's bucket flushes found due and fired, since the wheel was
    /// created (timers scheduled already due fire without being in any bucket and are not
    /// counted here).
    pub fired: u64,
}

/// One bucket flush: a bucket's expiration came, and its entries moved down a level or
/// fired. With incremental cascades (see [`TimingWheel`](crate::TimingWheel)) the entries
/// of a coarse bucket move in chunks after the flush; they are added to its record while
/// it is among the recent ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlushSnapshot {
    /// Flushes are numbered from 0 since the wheel was created.
    pub number: u64,
    /// The bucket's level.
    pub level: usize,
    /// The bucket's index within its level.
    pub slot: usize,
    /// The bucket's expiration.
    pub expiration_ms: u64,
    /// Entries moved to a finer level so far.
    pub moved_down: u64,
    /// Entries fired (they were due).
    pub fired: u64,
    /// The wheel's time when the bucket was flushed (its expiration, unless the wheel was
    /// advanced past it in one step).
    pub at_ms: u64,
}

/// Where a pending timer sits in the wheel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WheelPosition {
    /// The bucket's level (0 for the finest).
    pub level: usize,
    /// The bucket's index within its level, `0..wheel_size`.
    pub slot: usize,
    /// When the bucket is flushed (its entries then fire or move to a finer level).
    pub expiration_ms: u64,
}

/// One non-empty bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySnapshot {
    /// The key, formatted with `Display`.
    pub key: String,
    /// Entries in its watcher list (pending operations plus completed ones not yet purged).
    pub watchers: usize,
}

/// One pending delayed operation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingSnapshot {
    /// The keys it watches, formatted with `Display`.
    pub keys: Vec<String>,
    /// When it times out, on the timer's clock.
    pub deadline_ms: u64,
    /// What it waits for, from [`DelayedOperation::describe`](crate::DelayedOperation::describe).
    pub description: String,
    /// The wheel bucket its timeout sits in; `None` if the timeout is already due (or has
    /// just fired or been cancelled) and so is in no bucket.
    pub bucket: Option<WheelPosition>,
}
