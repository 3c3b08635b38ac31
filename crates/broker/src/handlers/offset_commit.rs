//! OffsetCommit: a consumer records how far it has read. The commit is appended to
//! `__consumer_offsets` with acks=-1 and answered when the followers have replicated it (a
//! DelayedProduce in the produce purgatory, like any acks=all write); only then does
//! OffsetFetch see it. Not replicated within `offsets.commit.timeout.ms`, or too few
//! in-sync replicas: COORDINATOR_NOT_AVAILABLE, as Kafka answers.
//!
//! Checked here, as Kafka's `KafkaApis` checks: a partition of a topic that does not exist
//! is UNKNOWN_TOPIC_OR_PARTITION. v2-4 carry a retention time (ignored, as Kafka 2.1+
//! ignores it), v6+ the leader epoch, v7+ `group.instance.id`.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::group::{OffsetAndMetadata, OffsetKey};
use crate::coordinator::GroupCoordinator;
use crate::record_batch::wall_clock_ms;
use crate::replica_manager::ReplicaManager;

/// Handles an OffsetCommit request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    coordinator: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: OffsetCommitRequest,
) -> Reply {
    let v = ctx.api_version;
    let now = wall_clock_ms();
    // The answer's shape: topics and partitions in request order.
    let shape: Vec<(kafka_protocol::messages::TopicName, Vec<i32>)> = req
        .topics
        .iter()
        .map(|t| {
            (
                t.name.clone(),
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let mut refused: HashMap<OffsetKey, ResponseError> = HashMap::new();
    let mut offsets: Vec<(OffsetKey, OffsetAndMetadata)> = Vec::new();
    for topic in &req.topics {
        let name: Arc<str> = Arc::from(topic.name.0.as_str());
        let partitions = rm.topic(&name).map(|t| t.partitions.len() as i32);
        for p in &topic.partitions {
            let key: OffsetKey = (name.clone(), p.partition_index);
            match partitions {
                Some(n) if (0..n).contains(&p.partition_index) => offsets.push((
                    key,
                    OffsetAndMetadata {
                        offset: p.committed_offset,
                        leader_epoch: if v >= 6 { p.committed_leader_epoch } else { -1 },
                        metadata: p
                            .committed_metadata
                            .as_ref()
                            .map(|m| m.to_string())
                            .unwrap_or_default(),
                        commit_timestamp_ms: now,
                    },
                )),
                _ => {
                    refused.insert(key, ResponseError::UnknownTopicOrPartition);
                }
            }
        }
    }
    let (tx, rx) = oneshot::channel();
    let respond: crate::coordinator::CommitCallback =
        Box::new(move |results: Vec<(OffsetKey, Option<ResponseError>)>| {
            let mut errors: HashMap<OffsetKey, Option<ResponseError>> =
                results.into_iter().collect();
            errors.extend(refused.into_iter().map(|(k, e)| (k, Some(e))));
            let _ = tx.send(ResponseKind::OffsetCommit(response(shape, &errors)));
        });
    if offsets.is_empty() {
        respond(Vec::new());
    } else {
        coordinator.handle_commit_offsets(
            ctx,
            req.group_id.0.as_str(),
            req.member_id.as_str(),
            req.group_instance_id.as_deref(),
            req.generation_id_or_member_epoch,
            None,
            offsets,
            respond,
        );
    }
    Reply::from_callback(rx)
}

fn response(
    shape: Vec<(kafka_protocol::messages::TopicName, Vec<i32>)>,
    errors: &HashMap<OffsetKey, Option<ResponseError>>,
) -> OffsetCommitResponse {
    let topics = shape
        .into_iter()
        .map(|(name, partitions)| {
            let topic: Arc<str> = Arc::from(name.0.as_str());
            let partitions = partitions
                .into_iter()
                .map(|index| {
                    let error = errors
                        .get(&(topic.clone(), index))
                        .copied()
                        .unwrap_or(Some(ResponseError::UnknownServerError));
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(index)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
