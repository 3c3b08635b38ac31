//! ListOffsets: turn a timestamp into an offset. Consumers use it to find where to start.
//!
//! Special timestamps: -1 (latest) answers the high watermark — the end of what a consumer
//! may read, not the log end; -2 (earliest) answers the log start offset; -3 (v7+, max
//! timestamp) answers the record with the largest timestamp. Any other timestamp answers
//! the first record that reaches it. Nothing found: offset, timestamp and leader epoch -1.
//!
//! Only `replica_id` -1 is a consumer. Any other (a follower, or -2, Kafka's "debugging"
//! replica that tools use) reads the whole log: "latest" is the log end offset and the
//! lookups reach records not yet replicated, whatever isolation level it names — as in
//! Kafka, which applies isolation to client requests only.
//!
//! A partition named more than once in one request is answered INVALID_REQUEST for each
//! time, as Kafka's broker does: which of its answers would a client believe?

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use replog::ReadBound;

use super::RequestContext;
use crate::replica_manager::ReplicaManager;

/// The replica id of a consumer's ListOffsets (Kafka's `CONSUMER_REPLICA_ID`).
const CONSUMER_REPLICA_ID: i32 = -1;

/// Handles a ListOffsets request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: ListOffsetsRequest,
) -> ResponseKind {
    let mut asked: HashMap<(&str, i32), usize> = HashMap::new();
    for topic in &req.topics {
        for p in &topic.partitions {
            *asked
                .entry((topic.name.0.as_str(), p.partition_index))
                .or_default() += 1;
        }
    }
    let duplicated =
        |topic: &str, partition: i32| asked.get(&(topic, partition)).is_some_and(|&n| n > 1);
    // A consumer sees up to the high watermark, or with read_committed (isolation level
    // 1) up to the last stable offset.
    let bound = if req.replica_id.0 == CONSUMER_REPLICA_ID && req.isolation_level == 1 {
        ReadBound::LastStable
    } else if req.replica_id.0 == CONSUMER_REPLICA_ID {
        ReadBound::HighWatermark
    } else {
        ReadBound::LogEnd
    };
    let topics = req
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    if duplicated(topic.name.0.as_str(), p.partition_index) {
                        return base
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_offset(-1)
                            .with_timestamp(-1);
                    }
                    match rm.fetch_offset_for_timestamp(
                        &topic.name.0,
                        p.partition_index,
                        p.timestamp,
                        bound,
                        p.current_leader_epoch,
                    ) {
                        Ok(found) => {
                            let answer = base
                                .with_offset(found.offset)
                                .with_timestamp(found.timestamp);
                            // The leader epoch field exists from v4 on.
                            if ctx.api_version >= 4 {
                                answer.with_leader_epoch(found.leader_epoch)
                            } else {
                                answer
                            }
                        }
                        Err(e) => base
                            .with_error_code(e.code())
                            .with_offset(-1)
                            .with_timestamp(-1),
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}
