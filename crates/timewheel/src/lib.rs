//! Kafka's hierarchical timing wheel, its timer driver, and the delayed-operation
//! purgatory, in Rust.
//!
//! A Kafka broker parks requests that cannot be answered yet (an `acks=all` produce waiting
//! for replication, a fetch waiting for data) as *delayed operations* in a *purgatory*,
//! each with a timeout. There can be hundreds of thousands of them, and most complete
//! before their timeout, so adding and cancelling a timeout must be cheap: Kafka keeps
//! them in a hierarchical timing wheel (O(1) add and cancel) instead of a priority queue
//! (O(log n)). This crate is that machinery, with no Kafka types in it:
//!
//! | module | Kafka | what it is |
//! |---|---|---|
//! | `slab` | `TimerTaskEntry` | the timers' slots: O(1) insert and cancel, generations that never repeat |
//! | `list` | `TimerTaskList` | a bucket's list of entries, with tombstones |
//! | [`wheel`] (`level`, `cascade`) | `TimingWheel` | levels and buckets, placement, the cascade, "never early" |
//! | `bucket_queue` | the `DelayQueue[TimerTaskList]` | which non-empty bucket is due next |
//! | `clock` | `Time` / `MockTime` | system (freezable) or manual milliseconds |
//! | `task` | `TimerTask` | a closure stored in a slot without an allocation |
//! | [`timer`] | `SystemTimer` | the shared, locked wheel |
//! | `driver` | `ExpirationReaper` | the thread that advances a system timer |
//! | [`purgatory`] | `DelayedOperation`, `DelayedOperationPurgatory` | watch keys, complete exactly once, expire |
//! | [`snapshot`] | (metrics) | read-only pictures for the state API |
//! | `hash` | | a fast hasher for the purgatory's watcher maps |
//!
//! Start with [`Timer`] (schedule closures, cancel them) and [`Purgatory`] (park
//! operations). The crate's README draws the wheel and states its guarantees;
//! `docs/performance.md` (at the repository root) has the measurements.

#![warn(missing_docs)]

mod bucket_queue;
mod clock;
mod driver;
mod hash;
mod list;
pub mod purgatory;
mod slab;
pub mod snapshot;
mod task;
pub mod timer;
pub mod wheel;

pub use purgatory::{Completion, DelayedOperation, OperationHandle, Purgatory, PurgatoryConfig};
pub use slab::Key;
pub use snapshot::{
    BucketSnapshot, FlushSnapshot, KeySnapshot, LevelSnapshot, PendingSnapshot, PurgatorySnapshot,
    WheelPosition, WheelSnapshot,
};
pub use timer::{Timer, TimerConfig, TimerHandle, TimerTask};
pub use wheel::{Expired, TimingWheel, MAX_DEADLINE_MS};
