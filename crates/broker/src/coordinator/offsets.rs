//! OffsetCommit and OffsetFetch: commits are appended to `__consumer_offsets` with acks=-1
//! and enter the offset cache only once replicated; fetches read the cache (Kafka's
//! `handleCommitOffsets`, `handleFetchOffsets`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use kafka_protocol::ResponseError;
use tracing::{info, warn};

use super::group::{GroupMetadata, GroupState, OffsetAndMetadata, OffsetKey};
use super::manager::offset_commit_error;
use super::*;
use crate::request::RequestContext;

impl GroupCoordinator {
    // ------------------------------------------------------------------ offsets

    /// OffsetCommit (Kafka's `handleCommitOffsets`), and TxnOffsetCommit when
    /// `transaction` names the producer id and epoch of the transaction that commits
    /// them (`handleTxnCommitOffsets`). Every partition named must exist (the handler
    /// checks); the answer comes once the commit is replicated. A transaction's offsets
    /// are written as its transactional batch and then wait for its marker
    /// ([`on_transaction_completed`](Self::on_transaction_completed)).
    #[allow(clippy::too_many_arguments)]
    pub fn handle_commit_offsets(
        &self,
        ctx: &RequestContext,
        group_id: &str,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        transaction: Option<(i64, i16)>,
        offsets: Vec<(OffsetKey, OffsetAndMetadata)>,
        callback: CommitCallback,
    ) {
        let fail = |offsets: Vec<(OffsetKey, OffsetAndMetadata)>, error: ResponseError| {
            offsets.into_iter().map(|(k, _)| (k, Some(error))).collect()
        };
        if let Err(e) = self.manager.check_coordinator(group_id) {
            return callback(fail(offsets, e));
        }
        let handle = match self.get_or_create(group_id, generation_id < 0) {
            Ok(Some(handle)) => handle,
            // Not a group member's commit and no such group: a stale generation.
            Ok(None) => return callback(fail(offsets, ResponseError::IllegalGeneration)),
            Err(e) => return callback(fail(offsets, e)),
        };
        self.locked(&handle, |c, g, fx| {
            let transactional = transaction.is_some();
            if let Some(error) = validate_offset_commit(
                g,
                generation_id,
                member_id,
                group_instance_id,
                transactional,
            ) {
                return callback(fail(offsets, error));
            }
            match g.state() {
                GroupState::Empty => c.store_offsets(ctx, g, offsets, transaction, callback, fx),
                GroupState::Stable | GroupState::PreparingRebalance => {
                    if g.has(member_id) {
                        c.session_heartbeat(g, member_id, fx);
                    }
                    c.store_offsets(ctx, g, offsets, transaction, callback, fx)
                }
                // A transaction's offsets are not held back by a rebalance: they take
                // effect only with the transaction, after it.
                GroupState::CompletingRebalance if transactional => {
                    c.store_offsets(ctx, g, offsets, transaction, callback, fx)
                }
                GroupState::CompletingRebalance => {
                    callback(fail(offsets, ResponseError::RebalanceInProgress))
                }
                GroupState::Dead => callback(fail(offsets, ResponseError::CoordinatorNotAvailable)),
            }
        });
    }

    /// The transaction of `producer_id` ended and its marker is replicated in
    /// `__consumer_offsets` partition `partition`: every group of that partition holding
    /// offsets of the transaction commits them (`commit`) or drops them (Kafka's
    /// `onTransactionCompleted`). Returns how many offsets were committed.
    pub fn on_transaction_completed(
        &self,
        producer_id: i64,
        partition: i32,
        commit: bool,
    ) -> usize {
        let handles = self.groups_of_partition(partition);
        let mut committed = 0;
        for handle in handles {
            self.locked(&handle, |_, g, _| {
                if g.has_pending_txn_offsets_of(producer_id) {
                    committed += g.complete_pending_txn_offsets(producer_id, commit);
                    info!(target: TRACE_TARGET, group = %g.group_id, producer_id, commit, "a transaction's offsets are decided by its marker");
                }
            });
        }
        committed
    }

    /// Kafka's `storeOffsets`: append the commits (acks=-1); the cache shows them when the
    /// append completes.
    pub(super) fn store_offsets(
        &self,
        ctx: &RequestContext,
        g: &mut GroupMetadata,
        offsets: Vec<(OffsetKey, OffsetAndMetadata)>,
        transaction: Option<(i64, i16)>,
        callback: CommitCallback,
        fx: &mut Fx,
    ) {
        let mut refused: HashMap<OffsetKey, ResponseError> = HashMap::new();
        let mut room = self
            .config
            .max_committed_offsets
            .saturating_sub(self.committed_offsets.load(Ordering::Acquire));
        let mut accepted: Vec<(OffsetKey, OffsetAndMetadata)> = Vec::new();
        for (key, offset) in &offsets {
            if offset.metadata.len() > self.config.offset_metadata_max_bytes {
                refused.insert(key.clone(), ResponseError::OffsetMetadataTooLarge);
            } else if g.offset(key).is_none() && !g.has_pending_offset_commit(key) && room == 0 {
                refused.insert(key.clone(), ResponseError::InvalidCommitOffsetSize);
            } else {
                if g.offset(key).is_none() && !g.has_pending_offset_commit(key) {
                    room -= 1;
                }
                accepted.push((key.clone(), offset.clone()));
            }
        }
        if refused
            .values()
            .any(|e| *e == ResponseError::InvalidCommitOffsetSize)
        {
            warn!(
                target: TRACE_TARGET, group = %g.group_id, limit = self.config.max_committed_offsets,
                "offset commit refused for new partitions: group.coordinator.max.committed.offsets reached (INVALID_COMMIT_OFFSET_SIZE)"
            );
        }
        let order: Vec<OffsetKey> = offsets.into_iter().map(|(k, _)| k).collect();
        if accepted.is_empty() {
            return callback(
                order
                    .into_iter()
                    .map(|k| {
                        let e = refused.get(&k).copied();
                        (k, e)
                    })
                    .collect(),
            );
        }
        match transaction {
            None => g.prepare_offset_commit(&accepted),
            Some((producer_id, _)) => g.prepare_txn_offset_commit(producer_id, &accepted),
        }
        let group_id = g.group_id.clone();
        let records = accepted
            .iter()
            .map(|((topic, partition), o)| {
                let key = records::offset_commit_key(&group_id, topic, *partition);
                let value = records::offset_commit_value(&records::OffsetCommitValue {
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata.clone(),
                    commit_timestamp: o.commit_timestamp_ms,
                });
                (key, Some(value))
            })
            .collect();
        let then = self.later(fx, move |_c, g, _fx, stored: Result<i64, ResponseError>| {
            let error = match stored {
                Ok(_) => {
                    if !g.is(GroupState::Dead) {
                        for (key, offset) in &accepted {
                            match transaction {
                                None => g.on_offset_commit_append(key, offset),
                                Some((producer_id, _)) => {
                                    g.on_txn_offset_commit_append(producer_id, key, offset)
                                }
                            }
                        }
                    }
                    None
                }
                Err(e) => {
                    for (key, offset) in &accepted {
                        match transaction {
                            None => g.fail_pending_offset_write(key, offset),
                            Some((producer_id, _)) => {
                                g.fail_pending_txn_offset_write(producer_id, key, offset)
                            }
                        }
                    }
                    let mapped = offset_commit_error(e);
                    info!(target: TRACE_TARGET, group = %g.group_id, append_error = ?e, error = ?mapped, "offset commit failed");
                    Some(mapped)
                }
            };
            callback(
                order
                    .into_iter()
                    .map(|k| {
                        let e = refused.get(&k).copied().or(error);
                        (k, e)
                    })
                    .collect(),
            );
        });
        fx.push(Action::Append {
            ctx: ctx.clone(),
            group: g.group_id.clone(),
            records,
            transaction,
            then,
        });
    }

    /// OffsetFetch (Kafka's `handleFetchOffsets`): committed offsets of the partitions
    /// asked for (or all of them), answered from the cache, whatever the group's state.
    /// The cache holds a commit only once it is replicated, so a commit still waiting for
    /// the followers is not seen (`require_stable` callers wait for it first: see
    /// [`GroupCoordinator::after_pending_writes_of`]).
    pub fn handle_fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<Vec<OffsetKey>>,
    ) -> Vec<(OffsetKey, FetchedOffset)> {
        let nothing = |partitions: Option<Vec<OffsetKey>>| {
            partitions
                .unwrap_or_default()
                .into_iter()
                .map(|k| (k, FetchedOffset::none(None)))
                .collect()
        };
        let Some(handle) = self.group(group_id) else {
            return nothing(partitions);
        };
        let g = handle.state.lock();
        if g.is(GroupState::Dead) {
            return nothing(partitions);
        }
        let fetched = |o: &OffsetAndMetadata| FetchedOffset {
            offset: o.offset,
            leader_epoch: o.leader_epoch,
            metadata: o.metadata.clone(),
            error: None,
        };
        match partitions {
            None => g.offsets().map(|(k, o)| (k.clone(), fetched(o))).collect(),
            Some(keys) => keys
                .into_iter()
                .map(|k| {
                    let answer = g
                        .offset(&k)
                        .map_or_else(|| FetchedOffset::none(None), fetched);
                    (k, answer)
                })
                .collect(),
        }
    }

    /// Whether an open transaction wrote an offset of `group_id` for `key` that its
    /// marker has not decided yet (OffsetFetch with `require_stable` answers it
    /// UNSTABLE_OFFSET_COMMIT).
    pub fn holds_txn_offset(&self, group_id: &str, key: &OffsetKey) -> bool {
        self.group(group_id)
            .is_some_and(|h| h.state.lock().has_pending_txn_offset(key))
    }

    /// How many offsets open transactions hold across every group, for bounds checks.
    pub fn txn_offsets_held(&self) -> usize {
        let handles: Vec<Arc<GroupHandle>> = self.groups.read().values().cloned().collect();
        handles
            .iter()
            .map(|h| h.state.lock().pending_txn_offset_count())
            .sum()
    }

    /// Calls back, once per group of `groups` in order, whether what the coordinator wrote
    /// to that group's partition got replicated (within `offsets.commit.timeout.ms`).
    pub fn after_pending_writes_of(
        &self,
        ctx: &RequestContext,
        kind: &'static str,
        groups: &[String],
        callback: Box<dyn FnOnce(Vec<bool>) + Send>,
    ) {
        let answers = gather(groups.len(), callback);
        for (group, answer) in groups.iter().zip(answers) {
            self.manager.after_pending_writes(
                ctx,
                kind,
                group,
                Box::new(move |written| answer(written.is_ok())),
            );
        }
    }
}

/// Kafka's `validateOffsetCommit`. A transactional commit with no member and no
/// generation (a producer's `send_offsets_to_transaction` with only a group id) is taken
/// whatever the group's state; a plain one only while the group is Empty.
fn validate_offset_commit(
    g: &GroupMetadata,
    generation_id: i32,
    member_id: &str,
    group_instance_id: Option<&str>,
    transactional: bool,
) -> Option<ResponseError> {
    if g.is(GroupState::Dead) {
        Some(ResponseError::CoordinatorNotAvailable)
    } else if generation_id < 0 && g.is(GroupState::Empty) {
        // A consumer that does not use group management (or an admin client).
        None
    } else if generation_id >= 0 || !member_id.is_empty() || group_instance_id.is_some() {
        validate_current_member(g, member_id, group_instance_id)
            .or((generation_id != g.generation_id).then_some(ResponseError::IllegalGeneration))
    } else if !transactional && !g.is(GroupState::Empty) {
        // Only members may commit for a group that has members.
        Some(ResponseError::UnknownMemberId)
    } else {
        None
    }
}
