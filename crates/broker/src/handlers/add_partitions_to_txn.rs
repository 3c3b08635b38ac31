//! AddPartitionsToTxn (API key 24, v0-5): a transactional producer names the partitions
//! it is about to write to, before its first batch to each. They join the open
//! transaction (opening one), so that EndTxn knows where to write its markers and the
//! partitions accept the producer's transactional batches.
//!
//! Answered per partition, as Kafka answers it: a partition this broker does not have is
//! UNKNOWN_TOPIC_OR_PARTITION and every other one OPERATION_NOT_ATTEMPTED (nothing is
//! added); a refusal of the whole request (a fenced producer, a transaction still ending)
//! is given on every partition.
//!
//! v4+ is the form brokers send a coordinator (KIP-890): several transactions in one
//! request, each either added as above or, with `verify_only`, only checked: does the
//! open transaction hold each partition? (TRANSACTION_ABORTABLE where it does not, as
//! Kafka 4.4 answers at v4 and v5.) A partition leader asks that before it appends a
//! transactional batch. This broker's own leaders ask their coordinator in process
//! ([`TransactionCoordinator::verify`]); the wire form answers anyone who asks.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseKind, TransactionalId,
};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::gather;
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
    if ctx.api_version >= 4 {
        return batched(rm, txn, ctx, req);
    }
    let (tx, rx) = oneshot::channel();
    let one = Transaction {
        id: req.v3_and_below_transactional_id.to_string(),
        producer_id: req.v3_and_below_producer_id.0,
        epoch: req.v3_and_below_producer_epoch,
        verify_only: false,
    };
    apply(
        rm,
        txn,
        ctx,
        one,
        &req.v3_and_below_topics,
        move |results| {
            let _ = tx.send(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
            ));
        },
    );
    Reply::from_callback(rx)
}

/// One transaction of a request, as either form names it.
struct Transaction {
    id: String,
    producer_id: i64,
    epoch: i16,
    verify_only: bool,
}

/// v4+: each transaction of the request in turn; the answer lists them in order.
fn batched(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: AddPartitionsToTxnRequest,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    let ids: Vec<TransactionalId> = req
        .transactions
        .iter()
        .map(|t| t.transactional_id.clone())
        .collect();
    let answers = gather(
        req.transactions.len(),
        Box::new(move |results: Vec<Vec<AddPartitionsToTxnTopicResult>>| {
            let by_transaction = ids
                .into_iter()
                .zip(results)
                .map(|(id, topics)| {
                    AddPartitionsToTxnResult::default()
                        .with_transactional_id(id)
                        .with_topic_results(topics)
                })
                .collect();
            let _ = tx.send(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_results_by_transaction(by_transaction),
            ));
        }),
    );
    for (t, answer) in req.transactions.iter().zip(answers) {
        let one = Transaction {
            id: t.transactional_id.to_string(),
            producer_id: t.producer_id.0,
            epoch: t.producer_epoch,
            verify_only: t.verify_only,
        };
        apply(rm, txn, ctx, one, &t.topics, answer);
    }
    Reply::from_callback(rx)
}

/// Adds (or with `verify_only` checks) the partitions of `topics` for one transaction,
/// and gives `done` their results in the request's order.
fn apply(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    one: Transaction,
    topics: &[AddPartitionsToTxnTopic],
    done: impl FnOnce(Vec<AddPartitionsToTxnTopicResult>) + Send + 'static,
) {
    let partitions: Vec<TopicPartition> = topics
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
        return done(results(topics, code));
    }
    if one.verify_only {
        let checked = txn.verify_partitions(&one.id, one.producer_id, one.epoch, &partitions);
        let code = |tp: &TopicPartition| match &checked {
            Err(e) => e.code(),
            Ok(missing) if missing.contains(tp) => ResponseError::TransactionAbortable.code(),
            Ok(_) => 0,
        };
        return done(results(topics, code));
    }
    let topics = topics.to_vec();
    txn.add_partitions(
        ctx,
        &one.id,
        one.producer_id,
        one.epoch,
        &partitions,
        Box::new(move |outcome| {
            let code = outcome.err().map_or(0, |e| e.code());
            done(results(&topics, |_| code));
        }),
    );
}

/// The results of `topics`, each partition with the code `code` gives it.
fn results(
    topics: &[AddPartitionsToTxnTopic],
    code: impl Fn(&TopicPartition) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
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
        .collect()
}
