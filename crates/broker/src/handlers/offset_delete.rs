//! OffsetDelete: deletes a group's committed offsets for the partitions named
//! (`kafka-consumer-groups --delete-offsets`, AdminClient `delete_consumer_group_offsets`),
//! so that a group that stopped reading a topic no longer shows, or resumes from, what it
//! committed there.
//!
//! Parse: the group and its topics' partitions. A topic this broker does not know is
//! answered UNKNOWN_TOPIC_OR_PARTITION for each of its partitions without reaching the
//! coordinator, and listed first, as Kafka's `KafkaApis` answers it. Apply: the group
//! coordinator checks the group and writes tombstones to `__consumer_offsets`
//! ([`crate::coordinator::GroupCoordinator::handle_delete_offsets`]); the answer waits for
//! their replication. Respond: a group-level error alone (INVALID_GROUP_ID,
//! NOT_COORDINATOR, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...), or one result per partition
//! (GROUP_SUBSCRIBED_TO_TOPIC for a topic the group's consumers read).

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::group::OffsetKey;
use crate::coordinator::GroupCoordinator;
use crate::replica_manager::ReplicaManager;

/// Handles an OffsetDelete request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    coordinator: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: OffsetDeleteRequest,
) -> Reply {
    let mut unknown: Vec<OffsetDeleteResponseTopic> = Vec::new();
    let mut known = Vec::new();
    for topic in req.topics {
        if rm.topic(topic.name.0.as_str()).is_some() {
            known.push(topic);
        } else {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    answer(
                        p.partition_index,
                        Some(ResponseError::UnknownTopicOrPartition),
                    )
                })
                .collect();
            unknown.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name)
                    .with_partitions(partitions),
            );
        }
    }
    let keys: Vec<OffsetKey> = known
        .iter()
        .flat_map(|t| {
            let name: Arc<str> = Arc::from(t.name.0.as_str());
            t.partitions
                .iter()
                .map(move |p| (name.clone(), p.partition_index))
        })
        .collect();
    let (tx, rx) = oneshot::channel();
    coordinator.handle_delete_offsets(
        ctx,
        req.group_id.0.as_str(),
        keys,
        Box::new(move |outcome| {
            let response = match outcome {
                Err(error) => OffsetDeleteResponse::default().with_error_code(error.code()),
                Ok(results) => {
                    let errors: HashMap<OffsetKey, Option<ResponseError>> =
                        results.into_iter().collect();
                    let mut topics = unknown;
                    topics.extend(known.into_iter().map(|t| {
                        let name: Arc<str> = Arc::from(t.name.0.as_str());
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                let key = (name.clone(), p.partition_index);
                                answer(p.partition_index, errors.get(&key).copied().flatten())
                            })
                            .collect();
                        OffsetDeleteResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(partitions)
                    }));
                    OffsetDeleteResponse::default().with_topics(topics)
                }
            };
            let _ = tx.send(ResponseKind::OffsetDelete(response));
        }),
    );
    Reply::from_callback(rx)
}

fn answer(partition: i32, error: Option<ResponseError>) -> OffsetDeleteResponsePartition {
    OffsetDeleteResponsePartition::default()
        .with_partition_index(partition)
        .with_error_code(error.map_or(0, |e| e.code()))
}
