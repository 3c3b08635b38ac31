//! InitProducerId: hand an idempotent producer its producer id and epoch.
//!
//! With idempotence on (librdkafka's `enable.idempotence`, kafka-python 3's default) every
//! batch carries (producer id, epoch, base sequence). The partition log remembers the last
//! five batches per producer, so a retried batch is acknowledged with its original offset
//! instead of being written twice. KIP-360 (v3+): a producer that hit an error may present
//! its current id and epoch and get the epoch bumped. Transactions are not supported: a
//! transactional id is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and an empty
//! one (`""`, not null) with INVALID_REQUEST, as Kafka's coordinator answers it.

use std::sync::Arc;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::RequestContext;
use crate::replica_manager::ReplicaManager;

/// Handles an InitProducerId request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: InitProducerIdRequest,
) -> ResponseKind {
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
        Some("") => return refused(ResponseError::InvalidRequest),
        Some(_) => return refused(ResponseError::TransactionalIdAuthorizationFailed),
    }
    let result = if ctx.api_version >= 3 && req.producer_id.0 >= 0 {
        rm.producer_ids
            .bump_epoch(req.producer_id.0, req.producer_epoch)
    } else {
        Ok(rm.producer_ids.allocate())
    };
    ResponseKind::InitProducerId(match result {
        Ok((id, epoch)) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(epoch),
        Err(e) => response
            .with_error_code(e.code())
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    })
}
