//! OffsetDelete: deletes a group's committed offsets for the partitions named
//! (`kafka-consumer-groups --delete-offsets`, AdminClient `delete_consumer_group_offsets`),
//! so that a group that stopped reading a topic no longer shows, or resumes from, what it
//! committed there.
//!
//! Parse: the group and its topics' partitions. A partition this broker does not know (of
//! an unknown topic, or past its topic's count) is answered UNKNOWN_TOPIC_OR_PARTITION
//! without reaching the coordinator, and listed first within its topic, the topics in
//! request order, as Kafka 4.4 answers it (the conformance run compares it). Apply: the group
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
use kafka_protocol::messages::{
    OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind, TopicName,
};
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
    // Kafka's KafkaApis answers a partition it does not know itself, per partition, and
    // hands the coordinator the others; its answer lists the topics with unknown
    // partitions first, in request order, then the coordinator's answers merged in.
    let mut answered: Vec<OffsetDeleteResponseTopic> = Vec::new();
    let mut asked: Vec<(TopicName, Vec<i32>)> = Vec::new();
    for topic in req.topics {
        let count = rm
            .topic(topic.name.0.as_str())
            .map_or(0, |t| t.partitions.len() as i32);
        let (known, unknown): (Vec<i32>, Vec<i32>) = topic
            .partitions
            .iter()
            .map(|p| p.partition_index)
            .partition(|p| (0..count).contains(p));
        if !unknown.is_empty() {
            let errors = unknown
                .into_iter()
                .map(|p| answer(p, Some(ResponseError::UnknownTopicOrPartition)))
                .collect();
            add(&mut answered, &topic.name, errors);
        }
        if !known.is_empty() {
            asked.push((topic.name, known));
        }
    }
    let keys: Vec<OffsetKey> = asked
        .iter()
        .flat_map(|(name, partitions)| {
            let name: Arc<str> = Arc::from(name.0.as_str());
            partitions.iter().map(move |&p| (name.clone(), p))
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
                    for (name, partitions) in asked {
                        let key_name: Arc<str> = Arc::from(name.0.as_str());
                        let results = partitions
                            .into_iter()
                            .map(|p| {
                                let error = errors.get(&(key_name.clone(), p)).copied().flatten();
                                answer(p, error)
                            })
                            .collect();
                        add(&mut answered, &name, results);
                    }
                    OffsetDeleteResponse::default().with_topics(answered)
                }
            };
            let _ = tx.send(ResponseKind::OffsetDelete(response));
        }),
    );
    Reply::from_callback(rx)
}

/// Appends `partitions` to `topic`'s entry, or adds one for it at the end.
fn add(
    topics: &mut Vec<OffsetDeleteResponseTopic>,
    topic: &TopicName,
    partitions: Vec<OffsetDeleteResponsePartition>,
) {
    match topics.iter_mut().find(|t| t.name == *topic) {
        Some(entry) => entry.partitions.extend(partitions),
        None => topics.push(
            OffsetDeleteResponseTopic::default()
                .with_name(topic.clone())
                .with_partitions(partitions),
        ),
    }
}

fn answer(partition: i32, error: Option<ResponseError>) -> OffsetDeleteResponsePartition {
    OffsetDeleteResponsePartition::default()
        .with_partition_index(partition)
        .with_error_code(error.map_or(0, |e| e.code()))
}
