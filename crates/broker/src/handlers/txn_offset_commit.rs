//! TxnOffsetCommit (API key 28, v0-3): a consumer group's offsets, committed inside a
//! transaction (consume-transform-produce). The transaction coordinator holds them; they
//! reach the group only when the transaction commits, and are dropped if it aborts.
//! INVALID_TXN_STATE unless AddOffsetsToTxn added the group to the open transaction. A
//! partition this broker does not have is UNKNOWN_TOPIC_OR_PARTITION and is not held,
//! so what a transaction holds is bounded by the partitions that exist.

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// Handles a TxnOffsetCommit request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    _ctx: &RequestContext,
    req: TxnOffsetCommitRequest,
) -> ResponseKind {
    let known = |topic: &str, partition: i32| rm.partition(topic, partition).is_some();
    let offsets = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| known(t.name.0.as_str(), p.partition_index))
                .map(|p| {
                    (
                        (t.name.0.to_string(), p.partition_index),
                        (
                            p.committed_offset,
                            p.committed_leader_epoch,
                            p.committed_metadata
                                .as_ref()
                                .map_or_else(String::new, |m| m.to_string()),
                        ),
                    )
                })
        })
        .collect();
    // This broker is the group's coordinator; the transaction's may be another broker's.
    let outcome = txn
        .coordinator_of(req.transactional_id.as_str())
        .and_then(|txn| {
            txn.txn_offset_commit(
                req.transactional_id.as_str(),
                req.producer_id.0,
                req.producer_epoch,
                req.group_id.as_str(),
                req.member_id.as_str(),
                req.generation_id,
                offsets,
            )
        });
    let code = outcome.err().map_or(0, |e| e.code());
    let topics = req
        .topics
        .iter()
        .map(|t| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let code = if known(t.name.0.as_str(), p.partition_index) {
                                code
                            } else {
                                ResponseError::UnknownTopicOrPartition.code()
                            };
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}
