//! DescribeGroups: each group's state, protocol type, protocol and members. As in Kafka,
//! member metadata and assignments are shown only for a Stable group; an unknown group is
//! described as Dead (v6+: with GROUP_ID_NOT_FOUND and a message).

use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, ResponseKind};

use super::{sb, RequestContext};
use crate::coordinator::{GroupCoordinator, GROUP_AUTHORIZED_OPERATIONS};

/// Handles a DescribeGroups request.
pub fn handle(
    c: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: DescribeGroupsRequest,
) -> ResponseKind {
    let v = ctx.api_version;
    let groups = req
        .groups
        .into_iter()
        .map(|group_id| {
            let d = c.handle_describe_group(group_id.0.as_str(), v);
            let members = d
                .members
                .into_iter()
                .map(|m| {
                    let mut member = DescribedGroupMember::default()
                        .with_member_id(sb(&m.member_id))
                        .with_client_id(sb(&m.client_id))
                        .with_client_host(sb(&m.client_host))
                        .with_member_metadata(m.metadata)
                        .with_member_assignment(m.assignment);
                    if v >= 4 {
                        member.group_instance_id = m.group_instance_id.as_deref().map(sb);
                    }
                    member
                })
                .collect();
            let mut group = DescribedGroup::default()
                .with_group_id(group_id)
                .with_error_code(d.error.map_or(0, |e| e.code()))
                .with_group_state(sb(&d.state))
                .with_protocol_type(sb(&d.protocol_type))
                .with_protocol_data(sb(&d.protocol))
                .with_members(members);
            if v >= 3 {
                group.authorized_operations = if req.include_authorized_operations {
                    GROUP_AUTHORIZED_OPERATIONS
                } else {
                    i32::MIN
                };
            }
            if v >= 6 {
                group.error_message = d.error_message.as_deref().map(sb);
            }
            group
        })
        .collect();
    ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
}
