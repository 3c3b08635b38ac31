//! Unit tests. Every test builds its own v2 record batches with the workspace's test
//! encoder, [`crate::test_util`], and drives the partition with explicit `now_ms` values.

mod append;
mod batch_format;
mod delete_records;
mod fuzz;
mod idempotence;
mod isr;
mod read;
mod retention;
mod roles_and_truncation;
mod transactions;

use crate::{LogConfig, Partition};

/// Leader 1 with followers 2 and 3, default config (lag 30 s, min ISR 2), created at t = 0.
fn three_replicas() -> Partition {
    Partition::new("t", 0, 1, vec![1, 2, 3], LogConfig::default(), 0)
}

/// Like [`three_replicas`] with a custom config.
fn three_replicas_with(config: LogConfig) -> Partition {
    Partition::new("t", 0, 1, vec![1, 2, 3], config, 0)
}

/// Lets both followers fetch at `offset` at `now_ms`.
fn both_fetch(p: &mut Partition, offset: i64, now_ms: u64) {
    p.update_follower_fetch(2, offset, now_ms).unwrap();
    p.update_follower_fetch(3, offset, now_ms).unwrap();
}
