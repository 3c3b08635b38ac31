//! SyncGroup: after JoinGroup, the leader sends everyone's assignment and the others ask
//! for theirs. A follower's SyncGroup is parked until the leader's arrives; the leader's
//! assignment is appended to `__consumer_offsets` (acks=-1), and every SyncGroup of the
//! generation is answered only once that append is replicated — so with the followers
//! paused, SyncGroup waits too. v3+ static members; v5+ protocol type and name, checked
//! against the group's and echoed back.

use std::sync::Arc;

use kafka_protocol::messages::{ResponseKind, SyncGroupRequest, SyncGroupResponse};
use tokio::sync::oneshot;

use super::{sb, Reply, RequestContext};
use crate::coordinator::member::SyncGroupResult;
use crate::coordinator::{GroupCoordinator, SyncGroupParams};

/// Handles a SyncGroup request.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: SyncGroupRequest) -> Reply {
    let v = ctx.api_version;
    let params = SyncGroupParams {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let (tx, rx) = oneshot::channel();
    c.handle_sync_group(
        ctx,
        params,
        Box::new(move |result| {
            let _ = tx.send(ResponseKind::SyncGroup(response(result, v)));
        }),
    );
    Reply::from_callback(rx)
}

fn response(r: SyncGroupResult, v: i16) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default()
        .with_error_code(r.error.map_or(0, |e| e.code()))
        .with_assignment(r.assignment);
    if v >= 5 {
        response.protocol_type = r.protocol_type.as_deref().map(sb);
        response.protocol_name = r.protocol_name.as_deref().map(sb);
    }
    response
}
