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
//! | `slab` | `TimerTaskEntry`, `TimerTaskList` | slots plus index lists with tombstones: O(1) bucket insert and cancel, no allocation per timer |
//! | `bucket_queue` | the `DelayQueue[TimerTaskList]` | which non-empty bucket is due next |
//! | [`wheel`] | `TimingWheel` | the levels, the cascade, "never early" |
//! | `clock` | `Time` / `MockTime` | system or manual milliseconds |
//! | [`timer`] | `SystemTimer` | the shared, locked wheel plus its driver thread |
//! | [`purgatory`] | `DelayedOperation`, `DelayedOperationPurgatory` | watch keys, complete exactly once, expire |
//! | [`snapshot`] | (metrics) | read-only pictures for the state API |
//! | `hash` | | a fast hasher for the purgatory's watcher maps |
//!
//! Start with [`Timer`] (schedule closures, cancel them) and [`Purgatory`] (park
//! operations). The crate's README draws the wheel and reports benchmark results.

#![warn(missing_docs)]

mod bucket_queue;
mod clock;
mod hash;
pub mod purgatory;
mod slab;
pub mod snapshot;
pub mod timer;
pub mod wheel;

pub use purgatory::{DelayedOperation, OperationHandle, Purgatory, PurgatoryConfig};
pub use slab::Key;
pub use snapshot::{
    BucketSnapshot, KeySnapshot, LevelSnapshot, PendingSnapshot, PurgatorySnapshot, WheelSnapshot,
};
pub use timer::{Timer, TimerConfig, TimerHandle, TimerTask};
pub use wheel::{Expired, TimingWheel, MAX_DEADLINE_MS};
