//! AddPartitionsToTxn (API key 24, v0-3): a transactional producer names the partitions
//! it is about to write to, before its first batch to each. They join the open
//! transaction (opening one), so that EndTxn knows where to write its markers and the
//! partitions accept the producer's transactional batches.
//!
//! Answered per partition, as Kafka answers it: a partition this broker does not have is
//! UNKNOWN_TOPIC_OR_PARTITION and every other one OPERATION_NOT_ATTEMPTED (nothing is
//! added); a refusal of the whole request (a fenced producer, a transaction still ending)
//! is given on every partition. v4+ (brokers verifying for each other) is not served.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// Handles an AddPartitionsToTxn request: answered once the transaction's new state is
/// written to `__transaction_state` (at once if the request is refused first).
pub fn handle(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> Reply {
    let partitions: Vec<TopicPartition> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|&p| TopicPartition::new(t.name.0.as_str(), p))
        })
        .collect();
    let unknown: HashSet<TopicPartition> = partitions
        .iter()
        .filter(|tp| rm.partition(&tp.topic, tp.partition).is_none())
        .cloned()
        .collect();
    if !unknown.is_empty() {
        let code = |tp: &TopicPartition| {
            if unknown.contains(tp) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            }
        };
        return Reply::now(answer(&req, code));
    }
    let (tx, rx) = oneshot::channel();
    let id = req.v3_and_below_transactional_id.to_string();
    let (producer_id, epoch) = (
        req.v3_and_below_producer_id.0,
        req.v3_and_below_producer_epoch,
    );
    txn.add_partitions(
        ctx,
        &id,
        producer_id,
        epoch,
        &partitions,
        Box::new(move |outcome| {
            let code = outcome.err().map_or(0, |e| e.code());
            let _ = tx.send(answer(&req, |_| code));
        }),
    );
    Reply::from_callback(rx)
}

/// The answer to `req`, each partition with the code `code` gives it.
fn answer(req: &AddPartitionsToTxnRequest, code: impl Fn(&TopicPartition) -> i16) -> ResponseKind {
    let results = req
        .v3_and_below_topics
        .iter()
        .map(|t| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(
                    t.partitions
                        .iter()
                        .map(|&p| {
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code(&TopicPartition::new(
                                    t.name.0.as_str(),
                                    p,
                                )))
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::AddPartitionsToTxn(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
    )
}
