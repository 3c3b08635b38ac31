//! Heartbeat: a member says it is alive. The coordinator completes its DelayedHeartbeat
//! and parks the next one a session timeout away. During a rebalance the answer is
//! REBALANCE_IN_PROGRESS, which is how a member learns it must rejoin.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};

use super::RequestContext;
use crate::coordinator::GroupCoordinator;

/// Handles a Heartbeat request.
pub fn handle(
    c: &Arc<GroupCoordinator>,
    _ctx: &RequestContext,
    req: HeartbeatRequest,
) -> ResponseKind {
    let error = c.handle_heartbeat(
        req.group_id.0.as_str(),
        req.member_id.as_str(),
        req.group_instance_id.as_deref(),
        req.generation_id,
    );
    ResponseKind::Heartbeat(
        HeartbeatResponse::default().with_error_code(error.map_or(0, |e| e.code())),
    )
}
