//! EndTxn (API key 26, v0-3): commit or abort the open transaction. The coordinator
//! writes a marker into every partition of the transaction, and the answer comes once
//! every marker is replicated: until then the EndTxn waits in the produce purgatory, as
//! `end-txn`. A retry of an EndTxn already done answers at once; one that meets the
//! transaction still ending is CONCURRENT_TRANSACTIONS, which the client retries.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ResponseKind};
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::txn::TransactionCoordinator;

/// Handles an EndTxn request.
pub fn handle(
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: EndTxnRequest,
) -> Reply {
    let (tx, rx) = oneshot::channel();
    txn.end_txn(
        ctx,
        req.transactional_id.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        req.committed,
        Box::new(move |outcome| {
            let code = outcome.err().map_or(0, |e| e.code());
            let _ = tx.send(ResponseKind::EndTxn(
                EndTxnResponse::default().with_error_code(code),
            ));
        }),
    );
    Reply::from_callback(rx)
}
