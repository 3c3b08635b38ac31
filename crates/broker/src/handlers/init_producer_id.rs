//! InitProducerId: hand an idempotent producer its producer id and epoch.
//!
//! With idempotence on (librdkafka's `enable.idempotence`, kafka-python 3's default) every
//! batch carries (producer id, epoch, base sequence). The partition log remembers the last
//! five batches per producer, so a retried batch is acknowledged with its original offset
//! instead of being written twice. KIP-360 (v3+): a producer that hit an error may present
//! its current id and epoch and get the epoch bumped. With a `transactional.id` the
//! transaction coordinator answers ([`TransactionCoordinator::init_producer_id`]): the
//! id keeps its producer id and gets the next epoch, fencing the instance before it. An
//! empty id (`""`, not null) is INVALID_REQUEST, as Kafka's coordinator answers it.

use std::sync::Arc;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};
use kafka_protocol::ResponseError;

use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

/// Handles an InitProducerId request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    txn: &Arc<TransactionCoordinator>,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> Reply {
    let response = InitProducerIdResponse::default();
    let refused = |error: ResponseError| {
        ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(error.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        )
    };
    match req.transactional_id.as_ref().map(|id| id.as_str()) {
        None => {}
        // Kafka's transaction coordinator refuses an empty (not null) transactional id as
        // a malformed request before anything else.
        Some("") => return Reply::now(refused(ResponseError::InvalidRequest)),
        Some(id) => {
            let allocate = || rm.producer_ids.allocate().0;
            let (tx, rx) = oneshot::channel();
            txn.init_producer_id(
                ctx,
                id,
                req.transaction_timeout_ms,
                allocate,
                Box::new(move |outcome| {
                    let response = InitProducerIdResponse::default();
                    let _ = tx.send(ResponseKind::InitProducerId(match outcome {
                        Ok((producer_id, epoch)) => response
                            .with_producer_id(ProducerId(producer_id))
                            .with_producer_epoch(epoch),
                        Err(e) => response
                            .with_error_code(e.code())
                            .with_producer_id(ProducerId(-1))
                            .with_producer_epoch(-1),
                    }));
                }),
            );
            return Reply::from_callback(rx);
        }
    }
    let result = if ctx.api_version >= 3 && req.producer_id.0 >= 0 {
        rm.producer_ids
            .bump_epoch(req.producer_id.0, req.producer_epoch)
    } else {
        Ok(rm.producer_ids.allocate())
    };
    Reply::now(ResponseKind::InitProducerId(match result {
        Ok((id, epoch)) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(e) => response
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    }))
}
