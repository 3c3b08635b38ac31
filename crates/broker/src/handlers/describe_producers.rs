//! DescribeProducers (API key 61, v0): the producers a partition's leader remembers, as
//! `kafka-transactions.sh describe-producers` prints them: each producer id with its epoch,
//! its last sequence and when it last wrote, and the first offset of its open transaction
//! on the partition (-1 if none). UNKNOWN_TOPIC_OR_PARTITION and NOT_LEADER_OR_FOLLOWER as
//! Kafka answers them.

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager::ReplicaManager;

/// Handles a DescribeProducers request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    _ctx: &RequestContext,
    req: DescribeProducersRequest,
) -> ResponseKind {
    let topics = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&index| {
                    let answer = PartitionResponse::default().with_partition_index(index);
                    let Some(handle) = rm.partition(t.name.0.as_str(), index) else {
                        return answer
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let log = handle.lock();
                    if !log.is_leader() {
                        return answer.with_error_code(ResponseError::NotLeaderOrFollower.code());
                    }
                    let open = log.open_transactions();
                    let producers = log
                        .producers()
                        .into_iter()
                        .map(|p| {
                            let txn_start = open
                                .iter()
                                .find(|t| t.producer_id == p.producer_id)
                                .map_or(-1, |t| t.first_offset);
                            ProducerState::default()
                                .with_producer_id(ProducerId(p.producer_id))
                                .with_producer_epoch(i32::from(p.producer_epoch))
                                .with_last_sequence(
                                    p.batches.back().map_or(-1, |b| b.last_sequence),
                                )
                                .with_last_timestamp(p.last_timestamp)
                                .with_coordinator_epoch(-1)
                                .with_current_txn_start_offset(txn_start)
                        })
                        .collect();
                    answer.with_active_producers(producers)
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::DescribeProducers(DescribeProducersResponse::default().with_topics(topics))
}
