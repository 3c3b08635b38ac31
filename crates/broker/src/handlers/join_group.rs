//! JoinGroup: a member (re)joins its group. The answer usually waits: the coordinator
//! parks it until the rebalance's join phase is over (a DelayedJoin in the Rebalance
//! purgatory), then answers every member of the new generation at once — the leader with
//! the member list it must assign partitions to.
//!
//! Versions: v0 has no rebalance timeout (the session timeout serves); v4+ without a
//! `group.instance.id` first gets MEMBER_ID_REQUIRED with an id to rejoin with; v5+ static
//! members (`group.instance.id`); v7+ protocol type and name in the answer; v8+ a reason;
//! v9+ `skip_assignment` for a static leader rejoining a stable group.

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseKind};
use tokio::sync::oneshot;

use super::{sb, Reply, RequestContext};
use crate::coordinator::member::JoinGroupResult;
use crate::coordinator::{GroupCoordinator, JoinGroupParams};

/// Handles a JoinGroup request.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: JoinGroupRequest) -> Reply {
    let v = ctx.api_version;
    let params = JoinGroupParams {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        require_known_member_id: v >= 4 && req.group_instance_id.is_none(),
        support_skipping_assignment: v >= 9,
        client_id: ctx.client_id.clone(),
        client_host: format!("/{}", ctx.peer.ip()),
        rebalance_timeout_ms: if v == 0 {
            req.session_timeout_ms
        } else {
            req.rebalance_timeout_ms
        },
        session_timeout_ms: req.session_timeout_ms,
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect::<Vec<(String, Bytes)>>(),
        reason: req.reason.as_ref().map(|s| s.to_string()),
    };
    let (tx, rx) = oneshot::channel();
    c.handle_join_group(
        ctx,
        params,
        Box::new(move |result| {
            let _ = tx.send(ResponseKind::JoinGroup(response(result, v)));
        }),
    );
    Reply::from_callback(rx)
}

/// The wire answer at version `v`: fields a version lacks are left out.
fn response(r: JoinGroupResult, v: i16) -> JoinGroupResponse {
    let members = r
        .members
        .into_iter()
        .map(|m| {
            JoinGroupResponseMember::default()
                .with_member_id(sb(&m.member_id))
                .with_group_instance_id(if v >= 5 {
                    m.group_instance_id.as_deref().map(sb)
                } else {
                    None
                })
                .with_metadata(m.metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(r.error.map_or(0, |e| e.code()))
        .with_generation_id(r.generation_id)
        .with_protocol_type(if v >= 7 {
            r.protocol_type.as_deref().map(sb)
        } else {
            None
        })
        .with_protocol_name(match (v >= 7, r.protocol_name) {
            (true, name) => name.as_deref().map(sb),
            (false, name) => Some(sb(name.as_deref().unwrap_or_default())),
        })
        .with_leader(sb(&r.leader_id))
        .with_skip_assignment(v >= 9 && r.skip_assignment)
        .with_member_id(sb(&r.member_id))
        .with_members(members)
}
