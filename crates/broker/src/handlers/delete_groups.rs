//! DeleteGroups: deletes Empty groups and their committed offsets (tombstones go to
//! `__consumer_offsets`). A group with members answers NON_EMPTY_GROUP, an unknown one
//! GROUP_ID_NOT_FOUND. The answer waits until the tombstones are replicated.

use std::sync::Arc;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseKind};

use tokio::sync::oneshot;

use super::{Reply, RequestContext};
use crate::coordinator::GroupCoordinator;

/// Handles a DeleteGroups request.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: DeleteGroupsRequest) -> Reply {
    let ids: Vec<String> = req.groups_names.iter().map(|g| g.0.to_string()).collect();
    let (tx, rx) = oneshot::channel();
    let names = req.groups_names;
    c.handle_delete_groups(
        ctx,
        &ids,
        Box::new(move |errors| {
            let results = names
                .into_iter()
                .zip(errors)
                .map(|(group_id, error)| {
                    DeletableGroupResult::default()
                        .with_group_id(group_id)
                        .with_error_code(error.map_or(0, |e| e.code()))
                })
                .collect();
            let _ = tx.send(ResponseKind::DeleteGroups(
                DeleteGroupsResponse::default().with_results(results),
            ));
        }),
    );
    Reply::from_callback(rx)
}
