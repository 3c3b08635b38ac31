//! ListTransactions (API key 66, v0-1): the transactional ids this coordinator knows, as
//! `kafka-transactions.sh list` prints them, filtered by state (a name Kafka does not
//! know is echoed back in `unknown_state_filters`), by producer id, and (v1) to those
//! whose open transaction has run longer than `duration_filter` ms.

use std::sync::Arc;

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, ResponseKind, TransactionalId,
};

use super::describe_transactions::state_names;
use super::{sb, RequestContext};
use crate::txn::TransactionCoordinator;

/// Handles a ListTransactions request.
pub fn handle(
    txn: &Arc<TransactionCoordinator>,
    _ctx: &RequestContext,
    req: ListTransactionsRequest,
) -> ResponseKind {
    let names = state_names();
    let unknown: Vec<_> = req
        .state_filters
        .iter()
        .filter(|f| !names.iter().any(|(name, _)| *name == f.as_str()))
        .cloned()
        .collect();
    let now = txn.now_ms();
    let states = txn
        .snapshot()
        .into_iter()
        .filter(|m| {
            req.state_filters.is_empty()
                || req
                    .state_filters
                    .iter()
                    .any(|f| f.as_str() == m.state.name())
        })
        .filter(|m| {
            req.producer_id_filters.is_empty()
                || req.producer_id_filters.iter().any(|p| p.0 == m.producer_id)
        })
        .filter(|m| {
            req.duration_filter < 0
                || (m.state.in_flight()
                    && now.saturating_sub(m.started_ms) > req.duration_filter as u64)
        })
        .map(|m| {
            TransactionState::default()
                .with_transactional_id(TransactionalId(sb(&m.transactional_id)))
                .with_producer_id(ProducerId(m.producer_id))
                .with_transaction_state(sb(m.state.name()))
        })
        .collect();
    ResponseKind::ListTransactions(
        ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown)
            .with_transaction_states(states),
    )
}
