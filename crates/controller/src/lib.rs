//! # controller: who leads each partition of N in-process brokers
//!
//! Kafka's delayed operations only become interesting when replicas fail: a produce
//! waiting for `acks=all` must learn that the ISR shrank, a fetch parked on a leader
//! must learn it is no longer one. This crate is the piece that decides those
//! things for brokers `1..=N` running in one process: an in-process controller that
//! keeps, per partition, what KRaft's metadata keeps (replicas, leader, leader epoch,
//! ISR, partition epoch) and changes it the way Kafka's controller does:
//!
//! * [`assignment`]: Kafka's rack-unaware replica assignment for new topics;
//! * [`image`]: the brokers and partitions, read-only from outside;
//! * [`controller`]: the calls that change them (topics, broker failure, restart and
//!   controlled shutdown, AlterPartition, preferred election);
//! * [`change`]: what each call changed, as typed events for the broker to apply;
//! * [`election`]: Kafka's rules for who may lead;
//! * [`snapshot`]: a serializable copy of the image.
//!
//! It is pure and synchronous: no I/O, no threads, no clock. It is *not* a Raft
//! quorum (see the README): there is one copy of the image and it dies with the
//! process.
//!
//! ```
//! use controller::{Change, Controller, TopicPartition};
//!
//! let mut c = Controller::new();
//! for id in 1..=3 {
//!     c.register_broker(id, format!("127.0.0.1:{}", 9091 + id)).unwrap();
//! }
//! c.create_topic("orders", 3, 3, false).unwrap();
//! let tp = TopicPartition::new("orders", 0);
//! assert_eq!(c.image().partition(&tp).unwrap().leader, 1);
//!
//! // Broker 1 dies: partition 0 fails over to the next ISR member, at epoch 1.
//! let changes = c.broker_failed(1).unwrap();
//! assert!(changes.iter().any(|ch| matches!(ch,
//!     Change::LeaderElected { tp: t, new_leader: 2, leader_epoch: 1, clean: true, .. }
//!         if *t == tp)));
//! assert_eq!(c.image().partition(&tp).unwrap().isr, vec![2, 3]);
//! ```

#![warn(missing_docs)]

pub mod assignment;
pub mod broker;
pub mod change;
pub mod controller;
pub mod election;
pub mod error;
pub mod image;
pub mod partition;
pub mod snapshot;

#[cfg(test)]
mod tests;

pub use assignment::{assign_partitions, assign_replicas, check_manual_replicas, AssignmentParams};
pub use broker::Broker;
pub use change::{Change, ElectionReason};
pub use controller::{AlterPartitionOutcome, Controller};
pub use error::{Error, ErrorCode};
pub use image::{MetadataImage, Topic};
pub use partition::{PartitionState, TopicPartition, NO_LEADER};
pub use snapshot::{MetadataSnapshot, PartitionSnapshot, TopicSnapshot};
