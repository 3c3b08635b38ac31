//! Adding partitions to a topic (CreatePartitions, `kafka-topics --alter --partitions N`).
//!
//! Kafka's controller checks a request in this order, and so does
//! [`ReplicaManager::create_partitions`]: the topic must exist
//! (UNKNOWN_TOPIC_OR_PARTITION), the new count must be above the current one
//! (INVALID_PARTITIONS, also for an equal count), and manual assignments, if given, must
//! be one per new partition, each naming distinct known brokers, as many as the topic's
//! replication factor (INVALID_REPLICA_ASSIGNMENT). This broker adds its own caps
//! after those: at most [`crate::topics::MAX_PARTITIONS_PER_TOPIC`] per topic and
//! `max.partitions` in all, checked before anything is allocated.
//!
//! A single broker adds the partitions to its own registry: it leads them, and its
//! simulated followers (if any) hear of them through the registry's change counter and
//! start fetching them. In a cluster the controller assigns the new partitions' replicas
//! and every broker creates them and takes its role ([`crate::cluster::ClusterLink`]).

use std::sync::Arc;

use kafka_protocol::ResponseError;
use tracing::info;

use super::ReplicaManager;
use crate::topics::{check_partition_increase, Topic, TopicError};

/// Kafka's message when the assignments are not one per new partition.
pub fn assignment_count_error(adding: i64, given: usize) -> TopicError {
    TopicError::new(
        ResponseError::InvalidReplicaAssignment,
        format!(
            "Attempted to add {adding} additional partition(s), but only {given} assignment(s) were specified."
        ),
    )
}

impl ReplicaManager {
    /// Grows topic `name` to `new_total` partitions, with the replicas `assignment[i]`
    /// for new partition `i` if given (else the controller's round robin, or a single
    /// broker's usual replicas). With `validate_only` nothing changes. Returns the topic
    /// as this broker now has it.
    pub fn create_partitions(
        &self,
        name: &str,
        new_total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let topic = self.topic(name).ok_or_else(|| {
            TopicError::new(ResponseError::UnknownTopicOrPartition, "unknown topic")
        })?;
        let current = topic.partitions.len() as i32;
        check_partition_increase(name, current, new_total)?;
        if let Some(a) = &assignment {
            let adding = i64::from(new_total) - i64::from(current);
            if i64::try_from(a.len()).ok() != Some(adding) {
                return Err(assignment_count_error(adding, a.len()));
            }
        }
        if let Some(cluster) = self.cluster() {
            return cluster.create_partitions(
                self.config.broker_id,
                name,
                new_total,
                assignment,
                validate_only,
            );
        }
        if let Some(a) = &assignment {
            self.check_local_assignment(&topic, a)?;
        }
        self.add_local_partitions(name, new_total, assignment.as_deref(), validate_only)
    }

    /// Adds the partitions to this broker's registry alone, led here, with `replicas` per
    /// new partition if given (a cluster calls this on each broker, then sets each new
    /// partition's role).
    pub fn add_local_partitions(
        &self,
        name: &str,
        new_total: i32,
        replicas: Option<&[Vec<i32>]>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        let now = self.now_ms();
        let grown =
            self.topics
                .add_partitions(name, new_total, validate_only, |topic, indexes| {
                    topic.new_partitions(indexes, replicas, &self.config, now)
                })?;
        if !validate_only {
            info!(topic = %name, partitions = grown.partitions.len(), "added partitions");
        }
        Ok(grown)
    }

    /// A single broker's check of manual assignments, in Kafka's words where Kafka has
    /// them: the replicas are this broker and its simulated followers, so each list must
    /// name distinct ones of those, as many as the topic's replication factor, and this
    /// broker among them, since it leads every partition.
    fn check_local_assignment(
        &self,
        topic: &Topic,
        assignment: &[Vec<i32>],
    ) -> Result<(), TopicError> {
        let known = self.config.all_replica_ids();
        let rf = usize::try_from(topic.replication_factor).unwrap_or(0);
        let invalid = |message: String| {
            Err(TopicError::new(
                ResponseError::InvalidReplicaAssignment,
                message,
            ))
        };
        let first_new = topic.partitions.len();
        for (i, replicas) in assignment.iter().enumerate() {
            controller::check_manual_replicas(replicas, rf, |b| known.contains(&b))
                .or_else(invalid)?;
            if !replicas.contains(&self.config.broker_id) {
                return invalid(format!(
                    "The manual partition assignment for partition {} leaves out broker {}, which leads every partition here.",
                    first_new + i,
                    self.config.broker_id
                ));
            }
        }
        Ok(())
    }
}
