//! AddOffsetsToTxn (API key 25, v0-3): a transactional producer says it will commit a
//! consumer group's offsets in its transaction (`send_offsets_to_transaction`), before
//! the TxnOffsetCommit that carries them. The offsets then take effect only if the
//! transaction commits.

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::txn::TransactionCoordinator;

/// Handles an AddOffsetsToTxn request: answered once the transaction's new state is
/// written to `__transaction_state`.
pub fn handle(
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: AddOffsetsToTxnRequest,
) -> Reply {
    let answer = |code: i16| {
        ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
    };
    if req.group_id.is_empty() {
        return Reply::now(answer(ResponseError::InvalidGroupId.code()));
    }
    let (tx, rx) = oneshot::channel();
    txn.add_offsets(
        ctx,
        req.transactional_id.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.group_id.as_str(),
        Box::new(move |outcome| {
            let _ = tx.send(answer(outcome.err().map_or(0, |e| e.code())));
        }),
    );
    Reply::from_callback(rx)
}
