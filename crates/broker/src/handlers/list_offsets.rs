//! ListOffsets: turn a timestamp into an offset. Consumers use it to find where to start.
//!
//! Special timestamps: -1 (latest) answers the high watermark — the end of what a consumer
//! may read, not the log end; -2 (earliest) answers the log start offset; -3 (v7+, max
//! timestamp) answers the batch holding the largest timestamp. Any other timestamp answers
//! the first batch whose records reach it, or -1 if none does.
//!
//! A partition named more than once in one request is answered INVALID_REQUEST for each
//! time, as Kafka's broker does: which of its answers would a client believe?

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};

use super::RequestContext;
use crate::error_codes as ec;
use crate::replica_manager::ReplicaManager;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;

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
                            .with_error_code(ec::INVALID_REQUEST)
                            .with_offset(-1)
                            .with_timestamp(-1);
                    }
                    let Some(handle) = rm.partition(&topic.name.0, p.partition_index) else {
                        return base
                            .with_error_code(ec::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_offset(-1)
                            .with_timestamp(-1);
                    };
                    let log = handle.lock();
                    let (offset, timestamp) = match p.timestamp {
                        LATEST => (log.high_watermark(), -1),
                        EARLIEST => (log.log_start_offset(), -1),
                        MAX_TIMESTAMP => log.offset_for_max_timestamp().unwrap_or((-1, -1)),
                        ts => log.offset_for_timestamp(ts).unwrap_or((-1, -1)),
                    };
                    let answer = base.with_offset(offset).with_timestamp(timestamp);
                    // The leader epoch field exists from v4 on.
                    if ctx.api_version >= 4 {
                        answer.with_leader_epoch(log.leader_epoch())
                    } else {
                        answer
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
