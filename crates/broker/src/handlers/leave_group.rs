//! LeaveGroup: members leave at once, and the group rebalances without them (no waiting
//! for a session to time out). v0-2 name one member; v3+ (KIP-345) a batch, each by
//! member id or, for a static member, by `group.instance.id` alone; v5+ with a reason.
//! Before v3 the one member's error is the top-level error.

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};

use super::{sb, RequestContext};
use crate::coordinator::{GroupCoordinator, LeavingMember};

/// Handles a LeaveGroup request.
pub fn handle(
    c: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: LeaveGroupRequest,
) -> ResponseKind {
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
    let (top, results) = c.handle_leave_group(req.group_id.0.as_str(), leaving);
    if v < 3 {
        let error = top.or_else(|| results.iter().find_map(|(_, e)| *e));
        return ResponseKind::LeaveGroup(
            LeaveGroupResponse::default().with_error_code(error.map_or(0, |e| e.code())),
        );
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
    ResponseKind::LeaveGroup(
        LeaveGroupResponse::default()
            .with_error_code(top.map_or(0, |e| e.code()))
            .with_members(members),
    )
}
