//! AddOffsetsToTxn (API key 25, v0-3): a transactional producer says it will commit a
//! consumer group's offsets in its transaction (`send_offsets_to_transaction`), before
//! the TxnOffsetCommit that carries them. The offsets then take effect only if the
//! transaction commits.

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::txn::TransactionCoordinator;

/// Handles an AddOffsetsToTxn request.
pub fn handle(
    txn: &Arc<TransactionCoordinator>,
    _ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> ResponseKind {
    let outcome = if req.group_id.is_empty() {
        Err(ResponseError::InvalidGroupId)
    } else {
        txn.add_offsets(
            req.transactional_id.as_str(),
            req.producer_id.0,
            req.producer_epoch,
            req.group_id.as_str(),
        )
    };
    ResponseKind::AddOffsetsToTxn(
        AddOffsetsToTxnResponse::default().with_error_code(outcome.err().map_or(0, |e| e.code())),
    )
}
