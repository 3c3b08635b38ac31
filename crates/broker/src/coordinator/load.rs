//! Loading groups from `__consumer_offsets` (Kafka's `GroupMetadataManager.loadGroupsAndOffsets`).
//!
//! The coordinator of a group is the leader of the group's `__consumer_offsets` partition.
//! When leadership of that partition moves to this broker, the new coordinator knows
//! nothing yet: its memory is empty, but its copy of the partition holds every commit and
//! every group record the old coordinator wrote, replicated before they were acknowledged.
//! Replaying the partition's records in offset order rebuilds what the old one had: the
//! last committed offset of each group and partition (a null value deletes it), and each
//! group's protocol type and generation (a null value deletes the group).
//!
//! Members come back too, as Kafka loads them: the last group record of a generation holds
//! each member with its subscription and assignment, so the group is Stable again with
//! the same members, leader and generation, and each member's session starts anew, one
//! session timeout from the load. A member that keeps heartbeating (to its new
//! coordinator, once FindCoordinator sends it there) carries on, commits included, with
//! no rebalance; one that is gone expires as it would have.
//!
//! The whole log is read, up to its end, as Kafka's load reads it: a new leader's high
//! watermark can lag what the old one acknowledged (a follower learns the HW one fetch
//! later), and a commit that was acknowledged is in this log, below its end.
//!
//! Leadership can also move away (the broker shuts down, or the partition is led
//! elsewhere after an election). Then the groups of that partition are unloaded
//! (Kafka's `onResignation`): members waiting in JoinGroup or SyncGroup are answered
//! NOT_COORDINATOR, and every later request for those groups is answered the same, which
//! sends the client to FindCoordinator and on to the new coordinator.

use std::sync::Arc;

use kafka_protocol::records::RecordBatchDecoder;
use replog::ReadBound;

use kafka_protocol::ResponseError;

use super::delayed::MemberKey;
use super::group::{GroupState, OffsetAndMetadata};
use super::member::{JoinGroupResult, MemberMetadata, SyncGroupResult};
use super::records::{self, RecordKey};
use super::{Action, GroupCoordinator};
use crate::partition::PartitionHandle;

/// What a load found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadSummary {
    /// Records replayed.
    pub records: usize,
    /// Groups present after the load.
    pub groups: usize,
    /// Committed offsets present after the load.
    pub offsets: usize,
    /// Records that could not be read (logged and skipped, as Kafka skips unknown ones).
    pub unreadable: usize,
}

impl GroupCoordinator {
    /// Replays `partition` (a `__consumer_offsets` partition this broker now leads) into
    /// the groups it holds.
    pub fn load_groups(&self, partition: &PartitionHandle) -> LoadSummary {
        let bytes = {
            let log = partition.lock();
            match log.read(log.log_start_offset(), usize::MAX, ReadBound::LogEnd) {
                Ok(read) => read.records,
                Err(_) => return LoadSummary::default(),
            }
        };
        let mut summary = LoadSummary::default();
        let mut buf = bytes;
        let sets = match RecordBatchDecoder::decode_all(&mut buf) {
            Ok(sets) => sets,
            Err(e) => {
                tracing::warn!(tp = %partition.tp, "cannot read the partition's batches: {e}");
                summary.unreadable += 1;
                return summary;
            }
        };
        let mut touched: Vec<Arc<str>> = Vec::new();
        for record in sets.into_iter().flat_map(|set| set.records) {
            summary.records += 1;
            if record.control {
                // A transaction's marker: it decides the offsets that transaction wrote
                // before it, in every group of this partition.
                match records::read_control_type(record.key.as_ref()) {
                    Some(marker) => {
                        let commit = marker == replog::ControlType::Commit;
                        for id in &touched {
                            if let Some(handle) = self.group(id) {
                                self.locked(&handle, |_, g, _| {
                                    g.complete_pending_txn_offsets(record.producer_id, commit);
                                });
                            }
                        }
                    }
                    None => summary.unreadable += 1,
                }
                continue;
            }
            let Some(key) = record.key else {
                summary.unreadable += 1;
                continue;
            };
            match records::read_key(key) {
                Ok(RecordKey::OffsetCommit {
                    group,
                    topic,
                    partition,
                }) => {
                    let value = record.value.map(records::read_offset_commit_value);
                    if let Some(Err(_)) = value {
                        summary.unreadable += 1;
                        continue;
                    }
                    let transaction = record.transactional.then_some(record.producer_id);
                    self.replay(&group, &mut touched, |g| {
                        let key = (Arc::from(topic.as_str()), partition);
                        let offset = value.map(|v| {
                            v.map(|v| OffsetAndMetadata {
                                offset: v.offset,
                                leader_epoch: v.leader_epoch,
                                metadata: v.metadata,
                                commit_timestamp_ms: v.commit_timestamp,
                            })
                        });
                        match (offset, transaction) {
                            // A transaction's offset: pending until its marker.
                            (Some(Ok(o)), Some(producer_id)) => {
                                g.load_txn_offset(producer_id, key, o)
                            }
                            (Some(Ok(o)), None) => g.on_offset_commit_append(&key, &o),
                            _ => g.remove_offset(&key),
                        }
                    });
                }
                Ok(RecordKey::GroupMetadata { group }) => match record.value {
                    Some(value) => match records::read_group_metadata_value(value) {
                        Ok(v) => {
                            let now = self.now();
                            self.replay(&group, &mut touched, |g| {
                                let members = v
                                    .members
                                    .iter()
                                    .map(|m| {
                                        MemberMetadata::loaded(
                                            m,
                                            &v.protocol_type,
                                            v.protocol.as_deref(),
                                        )
                                    })
                                    .collect();
                                g.protocol_type = Some(v.protocol_type);
                                g.load_generation(v.generation, v.protocol, v.leader, members, now);
                            })
                        }
                        Err(_) => summary.unreadable += 1,
                    },
                    // The group was deleted: so are its offsets (DeleteGroups wrote them
                    // as tombstones before it, in the same batch).
                    None => self.replay(&group, &mut touched, |g| {
                        g.remove_all_offsets();
                        g.protocol_type = None;
                    }),
                },
                Err(_) => summary.unreadable += 1,
            }
        }
        for id in &touched {
            if let Some(handle) = self.group(id) {
                // Each loaded member's session starts now. (`locked` drops a group that
                // ended with nothing in it.)
                self.locked(&handle, |c, g, fx| {
                    for member in g.member_ids() {
                        c.session_heartbeat(g, &member, fx);
                    }
                });
            }
        }
        summary.groups = touched.iter().filter(|id| self.group(id).is_some()).count();
        summary.offsets = touched
            .iter()
            .filter_map(|id| self.group(id))
            .map(|h| h.state.lock().offset_count())
            .sum();
        if summary.unreadable > 0 {
            tracing::warn!(tp = %partition.tp, unreadable = summary.unreadable, "skipped records that could not be read");
        }
        tracing::info!(tp = %partition.tp, records = summary.records, groups = summary.groups, offsets = summary.offsets, "loaded groups and offsets");
        summary
    }

    /// Forgets every group held in `__consumer_offsets` partition `partition`, which this
    /// broker no longer leads. Returns how many groups it held.
    pub fn unload_groups(&self, partition: i32) -> usize {
        let handles = self.groups_of_partition(partition);
        for handle in &handles {
            self.locked(handle, |c, g, fx| {
                for member in g.member_ids() {
                    g.maybe_invoke_join_callback(
                        &member,
                        JoinGroupResult::error(&member, ResponseError::NotCoordinator),
                    );
                    g.maybe_invoke_sync_callback(
                        &member,
                        SyncGroupResult::error(ResponseError::NotCoordinator),
                    );
                    g.remove(&member);
                    fx.push(Action::CheckHeartbeat(MemberKey {
                        group: g.group_id.clone(),
                        member,
                    }));
                }
                g.remove_all_offsets();
                let now = c.now();
                g.transition_to(GroupState::Dead, now);
                fx.push(Action::CheckJoin(g.group_id.clone()));
                fx.push(Action::CheckSync(g.group_id.clone()));
            });
        }
        if !handles.is_empty() {
            tracing::info!(
                partition,
                groups = handles.len(),
                "unloaded the groups of {}-{partition}: led elsewhere now",
                crate::topics::OFFSETS_TOPIC
            );
        }
        handles.len()
    }

    /// The groups this coordinator holds in `__consumer_offsets` partition `partition`.
    pub(super) fn groups_of_partition(&self, partition: i32) -> Vec<Arc<super::GroupHandle>> {
        self.groups
            .read()
            .values()
            .filter(|h| self.manager.partition_for(&h.id) == partition)
            .cloned()
            .collect()
    }

    /// Applies one record to `group` (created Empty if new), under its lock.
    fn replay(
        &self,
        group: &str,
        touched: &mut Vec<Arc<str>>,
        apply: impl FnOnce(&mut super::group::GroupMetadata),
    ) {
        let Ok(Some(handle)) = self.get_or_create(group, true) else {
            return; // over group.coordinator.max.groups: logged by get_or_create
        };
        if !touched.iter().any(|t| **t == *group) {
            touched.push(handle.id.clone());
        }
        self.locked(&handle, |_, g, _| apply(g));
    }
}
