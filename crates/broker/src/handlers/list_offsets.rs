//! ListOffsets: turn a timestamp into an offset. Consumers use it to find where to start.
//!
//! Special timestamps: -1 (latest) answers the high watermark — the end of what a consumer
//! may read, not the log end; -2 (earliest) answers the log start offset; -3 (v7+, max
//! timestamp) answers the batch holding the largest timestamp. Any other timestamp answers
//! the first batch whose records reach it, or -1 if none does.

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
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index);
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
                .with_name(topic.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics))
}
