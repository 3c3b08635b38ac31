//! ListGroups: every group this coordinator holds, with its protocol type; v4+ also its
//! state (and can filter by states), v5+ its type (always `classic` here; filtering by
//! another type lists nothing).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind};

use super::{sb, RequestContext};
use crate::coordinator::GroupCoordinator;

/// Handles a ListGroups request.
pub fn handle(
    c: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: ListGroupsRequest,
) -> ResponseKind {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_string()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_string()).collect();
    let v = ctx.api_version;
    let groups = c
        .handle_list_groups(&states, &types)
        .into_iter()
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(GroupId(sb(&g.group_id)))
                .with_protocol_type(sb(&g.protocol_type));
            if v >= 4 {
                listed.group_state = sb(g.state);
            }
            if v >= 5 {
                listed.group_type = sb("classic");
            }
            listed
        })
        .collect();
    ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups))
}
