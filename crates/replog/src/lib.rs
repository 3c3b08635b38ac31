//! # replog: an in-memory replicated partition log, the way a Kafka replica keeps it
//!
//! This crate models what a Kafka broker knows about one partition it leads or follows:
//!
//! * the **log** itself, a sequence of record batches stored exactly as producers sent
//!   them, except for the base offset and leader epoch the leader writes in
//!   ([`batch`]);
//! * the **offsets** that describe it: log start offset, log end offset (LEO) and high
//!   watermark (HW) ([`partition`]);
//! * the **followers**' progress and the **in-sync replica set** (ISR) derived from it,
//!   with Kafka's `lastCaughtUpTimeMs` rule ([`replica`]);
//! * the **idempotent producers**' sequence numbers, so retried batches are not written
//!   twice ([`producer_state`]);
//! * the **leader epochs** the log holds and where each starts ([`leader_epoch`]), which
//!   let a follower find and truncate the records a failed leader wrote but nobody else
//!   got (KIP-101), after a switch of roles ([`Role`], [`Partition::make_leader`],
//!   [`Partition::make_follower`]);
//! * the **transactions** open on the partition, the **last stable offset** they hold a
//!   `read_committed` reader to, and the aborted transactions it must skip
//!   ([`transactions`]).
//!
//! It is pure: no I/O, no threads, no clock. Methods that depend on time take
//! `now_ms`, so the broker drives them with its clock and tests with a manual one.
//!
//! ```
//! use replog::{LogConfig, Partition, ReadBound};
//!
//! // Leader 1, followers 2 and 3, created at t = 0.
//! let mut p = Partition::new("demo", 0, 1, vec![1, 2, 3], LogConfig::default(), 0);
//! assert_eq!(p.isr(), vec![1, 2, 3]);
//! // Followers report their LEO by fetching; with nothing appended, the HW stays 0.
//! let update = p.update_follower_fetch(2, 0, 10).unwrap();
//! assert_eq!(update.change.after.high_watermark, 0);
//! assert!(p.read(0, 1024, ReadBound::HighWatermark).unwrap().records.is_empty());
//! ```

#![warn(missing_docs)]

pub mod batch;
pub mod config;
pub mod error;
pub mod leader_epoch;
pub mod partition;
pub mod producer_state;
pub mod replica;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod transactions;

#[cfg(test)]
mod tests;

pub use config::LogConfig;
pub use error::{
    AppendError, DeleteRecordsError, FollowerAppendError, FollowerError, ReadError, RoleError,
};
pub use leader_epoch::EpochEntry;
pub use partition::{
    AppendInfo, FollowerSnapshot, FollowerUpdate, IsrShrink, Marks, Partition, PartitionChange,
    PartitionSnapshot, ReadBound, ReadResult, RecordsDeleted, ReplicationState, Role, Truncation,
    TruncationTarget, DELETE_UP_TO_HIGH_WATERMARK, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET,
};
pub use producer_state::{BatchMetadata, ProducerStateEntry};
pub use replica::{FollowerState, UNKNOWN_OFFSET};
pub use transactions::{AbortedTxn, ControlType, OpenTxn};
