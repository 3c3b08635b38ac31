//! EndTxn (API key 26, v0-5): commit or abort the open transaction. The coordinator
//! writes a marker into every partition of the transaction, and the answer comes once
//! every marker is replicated: until then the EndTxn waits in the produce purgatory, as
//! `end-txn`. A retry of an EndTxn already done answers at once; one that meets the
//! transaction still ending is CONCURRENT_TRANSACTIONS, which the client retries.
//!
//! v5 is transaction version 2 (KIP-890 part 2): the epoch moves on with every
//! transaction, the markers carry the new one, and the answer gives the producer id and
//! epoch to go on with. A retry still carries the epoch from before the bump, and is
//! recognised as one.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId, ResponseKind};
use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// The first EndTxn version that bumps the epoch of every transaction.
const BUMPS_EPOCH: i16 = 5;

/// Handles an EndTxn request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
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
        ctx.api_version >= BUMPS_EPOCH,
        || rm.producer_ids.allocate().0,
        Box::new(move |outcome| {
            let response = match outcome {
                Ok((producer_id, epoch)) => EndTxnResponse::default()
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(epoch),
                Err(e) => EndTxnResponse::default()
                    .with_error_code(e.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            };
            let _ = tx.send(ResponseKind::EndTxn(response));
        }),
    );
    Reply::from_callback(rx)
}
