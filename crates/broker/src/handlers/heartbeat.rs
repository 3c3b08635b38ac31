//! Heartbeat: a member says it is alive. The coordinator completes its DelayedHeartbeat
//! and parks the next one a session timeout away. During a rebalance the answer is
//! REBALANCE_IN_PROGRESS, which is how a member learns it must rejoin. The answer waits
//! behind the coordinator's unreplicated writes to the group's partition, if any.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};

use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::GroupCoordinator;

/// Handles a Heartbeat request.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: HeartbeatRequest) -> Reply {
    let (tx, rx) = oneshot::channel();
    c.handle_heartbeat(
        ctx,
        req.group_id.0.as_str(),
        req.member_id.as_str(),
        req.group_instance_id.as_deref(),
        req.generation_id,
        Box::new(move |error| {
            let _ = tx.send(ResponseKind::Heartbeat(
                HeartbeatResponse::default().with_error_code(error.map_or(0, |e| e.code())),
            ));
        }),
    );
    Reply::from_callback(rx)
}
