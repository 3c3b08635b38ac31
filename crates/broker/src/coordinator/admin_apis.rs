//! The group admin APIs: ListGroups, DescribeGroups, DeleteGroups, and the broker-wide
//! counts the caps are checked against.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::ResponseError;
use tracing::{info, warn};

use super::group::GroupState;
use super::*;
use crate::request::RequestContext;

impl GroupCoordinator {
    // ------------------------------------------------------------------ admin APIs

    /// ListGroups: every group, filtered by state names and group types (only `classic`
    /// groups exist here), case-insensitively.
    pub fn handle_list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupOverview> {
        if !types.is_empty() && !types.iter().any(|t| t.eq_ignore_ascii_case("classic")) {
            return Vec::new();
        }
        let handles: Vec<Arc<GroupHandle>> = self.groups.read().values().cloned().collect();
        handles
            .into_iter()
            .filter_map(|h| {
                let g = h.state.lock();
                let state = g.state().name();
                let wanted =
                    states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state));
                (wanted && !g.is(GroupState::Dead)).then(|| GroupOverview {
                    group_id: g.group_id.to_string(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state,
                })
            })
            .collect()
    }

    /// DescribeGroups for one group. An unknown group is described as Dead (v6+:
    /// GROUP_ID_NOT_FOUND).
    pub fn handle_describe_group(&self, group_id: &str, api_version: i16) -> GroupDescription {
        let dead = || {
            let not_found = api_version >= 6;
            GroupDescription {
                error: not_found.then_some(ResponseError::GroupIdNotFound),
                error_message: not_found.then(|| format!("Group {group_id} not found.")),
                state: GroupState::Dead.name().to_string(),
                ..GroupDescription::default()
            }
        };
        if let Err(error) = self.manager.check_coordinator(group_id) {
            return GroupDescription {
                error: Some(error),
                state: GroupState::Dead.name().to_string(),
                ..GroupDescription::default()
            };
        }
        let Some(handle) = self.group(group_id) else {
            return dead();
        };
        let g = handle.state.lock();
        if g.is(GroupState::Dead) {
            return dead();
        }
        let stable = g.is(GroupState::Stable);
        let protocol = if stable {
            g.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = g
            .members()
            .map(|m| MemberDescription {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol).cloned().unwrap_or_default()
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            error: None,
            error_message: None,
            state: g.state().name().to_string(),
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }

    /// DeleteGroups: an Empty group is deleted with its offsets at once, and tombstones
    /// are appended to `__consumer_offsets` (acks=-1); its answer waits for them, as
    /// Kafka's does (COORDINATOR_NOT_AVAILABLE if they are not replicated in time). A group
    /// with members is NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. `callback` gets
    /// one result per id, in order.
    pub fn handle_delete_groups(
        &self,
        ctx: &RequestContext,
        group_ids: &[String],
        callback: Box<dyn FnOnce(Vec<Option<ResponseError>>) + Send>,
    ) {
        let answers = gather(group_ids.len(), callback);
        for (group_id, answer) in group_ids.iter().zip(answers) {
            if let Err(error) = self.manager.check_coordinator(group_id) {
                answer(Some(error));
                continue;
            }
            let Some(handle) = self.group(group_id) else {
                answer(Some(ResponseError::GroupIdNotFound));
                continue;
            };
            self.locked(&handle, |c, g, fx| match g.state() {
                GroupState::Dead => answer(Some(ResponseError::GroupIdNotFound)),
                GroupState::Empty => {
                    let now = c.now();
                    g.transition_to(GroupState::Dead, now);
                    let removed = g.remove_all_offsets();
                    info!(target: TRACE_TARGET, group = %g.group_id, offsets = removed.len(), "group deleted (DeleteGroups); its tombstones are appended with acks=-1");
                    let mut records: Vec<(Bytes, Option<Bytes>)> = removed
                        .iter()
                        .map(|(t, p)| (records::offset_commit_key(&g.group_id, t, *p), None))
                        .collect();
                    records.push((records::group_metadata_key(&g.group_id), None));
                    let group = g.group_id.clone();
                    fx.push(Action::Append {
                        ctx: ctx.clone(),
                        group: g.group_id.clone(),
                        records,
                        transaction: None,
                        then: Box::new(move |stored| match stored {
                            Ok(_) => answer(None),
                            Err(e) => {
                                warn!(target: TRACE_TARGET, %group, error = ?e, "the deleted group's tombstones were not replicated");
                                answer(Some(manager::offset_commit_error(e)));
                            }
                        }),
                    });
                }
                _ => answer(Some(ResponseError::NonEmptyGroup)),
            });
        }
    }

    /// Groups, members and committed offsets held, broker-wide.
    pub fn counts(&self) -> (usize, usize, usize) {
        (
            self.groups.read().len(),
            self.members.load(Ordering::Acquire),
            self.committed_offsets.load(Ordering::Acquire),
        )
    }
}
