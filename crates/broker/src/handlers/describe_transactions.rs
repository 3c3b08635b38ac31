//! DescribeTransactions (API key 65, v0): each transactional id's state, as
//! `kafka-transactions.sh describe` prints it: its producer id and epoch, its state by
//! Kafka's name, its timeout, when the open transaction started, and its partitions. An
//! id the coordinator does not know is TRANSACTIONAL_ID_NOT_FOUND; one another broker
//! coordinates, NOT_COORDINATOR.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::txn::{TransactionCoordinator, TxnState};

/// Handles a DescribeTransactions request.
pub fn handle(
    txn: &Arc<TransactionCoordinator>,
    _ctx: &RequestContext,
    req: DescribeTransactionsRequest,
) -> ResponseKind {
    let states = req
        .transactional_ids
        .iter()
        .map(|id| {
            let answer = TransactionState::default().with_transactional_id(id.clone());
            // In a cluster, another broker's id: NOT_COORDINATOR (the admin client asks
            // FindCoordinator and retries there).
            if let Err(e) = txn.check_coordinator(id.as_str()) {
                return answer
                    .with_error_code(e.code())
                    .with_transaction_state(sb(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1);
            }
            let Some(meta) = txn.describe(id.as_str()) else {
                return answer
                    .with_error_code(ResponseError::TransactionalIdNotFound.code())
                    .with_transaction_state(sb(""))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1);
            };
            let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for tp in &meta.partitions {
                topics.entry(&tp.topic).or_default().push(tp.partition);
            }
            let started = if meta.state.in_flight() {
                meta.started_wall_ms
            } else {
                -1
            };
            answer
                .with_transaction_state(sb(meta.state.name()))
                .with_transaction_timeout_ms(i32::try_from(meta.timeout_ms).unwrap_or(i32::MAX))
                .with_transaction_start_time_ms(started)
                .with_producer_id(ProducerId(meta.producer_id))
                .with_producer_epoch(meta.producer_epoch)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(topic, partitions)| {
                            TopicData::default()
                                .with_topic(TopicName(sb(topic)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::DescribeTransactions(
        DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}

/// Kafka's state names, for filters.
pub fn state_names() -> [(&'static str, TxnState); 6] {
    [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
    ]
    .map(|s| (s.name(), s))
}
