//! LeaveGroup: members leave at once, and the group rebalances without them (no waiting
//! for a session to time out). v0-2 name one member; v3+ (KIP-345) a batch, each by
//! member id or, for a static member, by `group.instance.id` alone; v5+ with a reason.
//! Before v3 the one member's error is the top-level error. The answer waits behind the
//! coordinator's unreplicated writes to the group's partition, if any.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{sb, Reply, RequestContext};
use crate::coordinator::{GroupCoordinator, LeavingMember};

/// Handles a LeaveGroup request.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: LeaveGroupRequest) -> Reply {
    let v = ctx.api_version;
    let leaving: Vec<LeavingMember> = if v < 3 {
        vec![LeavingMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
            reason: None,
        }]
    } else {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                reason: m.reason.as_ref().map(|s| s.to_string()),
            })
            .collect()
    };
    let (tx, rx) = oneshot::channel();
    c.handle_leave_group(
        ctx,
        req.group_id.0.as_str(),
        leaving,
        Box::new(move |top, results| {
            let _ = tx.send(ResponseKind::LeaveGroup(response(top, results, v)));
        }),
    );
    Reply::from_callback(rx)
}

fn response(
    top: Option<ResponseError>,
    results: Vec<(LeavingMember, Option<ResponseError>)>,
    v: i16,
) -> LeaveGroupResponse {
    if v < 3 {
        let error = top.or_else(|| results.iter().find_map(|(_, e)| *e));
        return LeaveGroupResponse::default().with_error_code(error.map_or(0, |e| e.code()));
    }
    let members = results
        .into_iter()
        .map(|(m, error)| {
            MemberResponse::default()
                .with_member_id(sb(&m.member_id))
                .with_group_instance_id(m.group_instance_id.as_deref().map(sb))
                .with_error_code(error.map_or(0, |e| e.code()))
        })
        .collect();
    LeaveGroupResponse::default()
        .with_error_code(top.map_or(0, |e| e.code()))
        .with_members(members)
}
