//! Unit tests. Each test builds its own cluster with [`cluster`] and drives it through
//! the controller's public calls; every call also checks the image's invariants
//! (debug builds), so a test that passes has not broken any.

mod alter_partition;
mod assignment;
mod controlled_shutdown;
mod errors;
mod failover;
mod fuzz;
mod preferred;
mod restart;
mod snapshot;
mod topics;
mod unclean;

use crate::{Change, Controller, PartitionState, TopicPartition};

/// Broker `id`'s listener address in these tests.
fn address(id: i32) -> String {
    format!("127.0.0.1:{}", 9090 + id)
}

/// A controller with brokers `1..=n` registered and alive.
fn cluster(n: i32) -> Controller {
    let mut c = Controller::new();
    for id in 1..=n {
        c.register_broker(id, address(id)).unwrap();
    }
    c
}

/// `topic`-`partition`.
fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

/// A copy of the state of `topic`-`partition`.
fn state(c: &Controller, topic: &str, partition: i32) -> PartitionState {
    c.image().partition(&tp(topic, partition)).unwrap().clone()
}

/// The changes in `changes` about `topic`-`partition`.
fn about<'a>(changes: &'a [Change], topic: &str, partition: i32) -> Vec<&'a Change> {
    let wanted = tp(topic, partition);
    changes
        .iter()
        .filter(|c| c.topic_partition() == Some(&wanted))
        .collect()
}
