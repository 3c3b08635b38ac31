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
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager::ReplicaManager;

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
                            .with_error_code(ResponseError::InvalidRequest.code())
                            .with_offset(-1)
                            .with_timestamp(-1);
                    }
                    match rm.fetch_offset_for_timestamp(
                        &topic.name.0,
                        p.partition_index,
                        p.timestamp,
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
