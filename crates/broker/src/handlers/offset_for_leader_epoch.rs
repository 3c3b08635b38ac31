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
                    match rm.end_offset_for_leader_epoch(
                        &topic.topic.0,
                        p.partition,
                        p.leader_epoch,
                        p.current_leader_epoch,
                    ) {
                        Ok((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                        Err(e) => base
                            .with_error_code(e.code())
                            .with_leader_epoch(-1)
                            .with_end_offset(-1),
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
