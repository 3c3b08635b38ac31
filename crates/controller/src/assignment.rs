//! # Replica assignment: which brokers hold each partition of a new topic
//!
//! Kafka's classic rack-unaware assignment (`AdminUtils.assignReplicasToBrokers`),
//! with its two goals: spread leaders evenly (each broker is the first replica of
//! about `partitions / n` partitions) and spread the *followers* of each broker's
//! partitions over the other brokers, so a failed broker's load does not all land on
//! one neighbour.
//!
//! With the brokers sorted by id into `b[0..n]`, partition `p` gets
//!
//! * first replica `b[(p + start_index) % n]`, so first replicas go round robin;
//! * a *shift* `start_shift + p / n`: one more every time `p` wraps around the broker
//!   count;
//! * as its `j`-th further replica (`j = 0..rf-1`) `b[(first + 1 + (shift + j) % (n - 1)) % n]`.
//!   The offsets `1 + (shift + j) % (n - 1)` are distinct and never 0 for `j < n - 1`,
//!   so no broker appears twice in a partition.
//!
//! Kafka picks `start_index` and `start_shift` at random per topic; here both default
//! to 0 so layouts are reproducible (with brokers `[1, 2, 3]`, partition 0 is
//! `[1, 2, 3]`), and both can be set. The shift is written in closed form so that
//! partitions added later ([`assign_partitions`] from the current count) continue the
//! same layout a topic created with all of them at once would have.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The two free parameters of the assignment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentParams {
    /// Index (into the sorted brokers) of partition 0's first replica.
    pub start_index: usize,
    /// The replica shift of partitions `0..n`.
    pub start_shift: usize,
}

/// Kafka's checks of one partition's manual replica list (CreateTopics and
/// CreatePartitions with an assignment), in its words: not empty, every broker
/// `registered`, none twice, and `rf` of them. The reason for INVALID_REPLICA_ASSIGNMENT
/// if one fails. Kafka checks the brokers in id order, so the first one it names is the
/// lowest offending id.
pub fn check_manual_replicas(
    replicas: &[i32],
    rf: usize,
    registered: impl Fn(i32) -> bool,
) -> Result<(), String> {
    if replicas.is_empty() {
        return Err("The manual partition assignment includes an empty replica list.".into());
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    for (j, &b) in sorted.iter().enumerate() {
        if !registered(b) {
            return Err(format!(
                "The manual partition assignment includes broker {b}, but no such broker is registered."
            ));
        }
        if j > 0 && sorted[j - 1] == b {
            return Err(format!(
                "The manual partition assignment includes the broker {b} more than once."
            ));
        }
    }
    if replicas.len() != rf {
        return Err(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {rf} replica(s).",
            replicas.len()
        ));
    }
    Ok(())
}

/// Replicas for partitions `0..partitions` of a new topic over `brokers` (any order,
/// repeats ignored). Refuses a partition count below 1 (`INVALID_PARTITIONS`) and a
/// replication factor below 1 or above the number of brokers
/// (`INVALID_REPLICATION_FACTOR`).
pub fn assign_replicas(
    brokers: &[i32],
    partitions: i32,
    replication_factor: i16,
    params: AssignmentParams,
) -> Result<Vec<Vec<i32>>, Error> {
    if partitions < 1 {
        return Err(Error::InvalidPartitions {
            requested: partitions,
            current: 0,
        });
    }
    assign_partitions(brokers, 0..partitions, replication_factor, params)
}

/// Replicas for the partitions in `partitions` (a non-empty range from 0 up), laid
/// out as if the topic had been created with all of them. Used to add partitions.
pub fn assign_partitions(
    brokers: &[i32],
    partitions: Range<i32>,
    replication_factor: i16,
    params: AssignmentParams,
) -> Result<Vec<Vec<i32>>, Error> {
    if partitions.start < 0 || partitions.is_empty() {
        return Err(Error::InvalidPartitions {
            requested: partitions.end,
            current: partitions.start,
        });
    }
    let mut sorted = brokers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let n = sorted.len();
    if replication_factor < 1 || replication_factor as usize > n {
        return Err(Error::InvalidReplicationFactor {
            replication_factor,
            live_brokers: n,
        });
    }
    let followers = replication_factor as usize - 1;
    let layout = partitions
        .map(|p| {
            let p = p as usize;
            let first = (p + params.start_index) % n;
            let shift = params.start_shift + p / n;
            let mut replicas = Vec::with_capacity(followers + 1);
            replicas.push(sorted[first]);
            replicas
                .extend((0..followers).map(|j| sorted[(first + 1 + (shift + j) % (n - 1)) % n]));
            debug_assert!(
                replicas
                    .iter()
                    .enumerate()
                    .all(|(i, r)| !replicas[..i].contains(r)),
                "partition {p}: no broker twice in {replicas:?}"
            );
            replicas
        })
        .collect();
    Ok(layout)
}
