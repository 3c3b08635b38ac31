//! OffsetForLeaderEpoch: "where does leader epoch N end?" — asked by consumers (and Kafka
//! followers) after a leader change, to detect log divergence and truncate. This broker is
//! the only leader and never changes epoch, so the answer for the current epoch is the log
//! end offset.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};

use super::RequestContext;
use crate::error_codes as ec;
use crate::replica_manager::ReplicaManager;

/// Handles an OffsetForLeaderEpoch request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: OffsetForLeaderEpochRequest,
) -> ResponseKind {
    let topics = req
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    let base = EpochEndOffset::default().with_partition(p.partition);
                    match rm.partition(&topic.topic.0, p.partition) {
                        None => base
                            .with_error_code(ec::UNKNOWN_TOPIC_OR_PARTITION)
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
                        Some(h) => {
                            let (epoch, end) = h.lock().end_offset_for_leader_epoch(p.leader_epoch);
                            base.with_leader_epoch(epoch).with_end_offset(end)
                        }
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default().with_topics(topics))
}
