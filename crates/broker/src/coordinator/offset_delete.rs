//! OffsetDelete (Kafka's `deleteOffsets`): forgetting a group's committed offsets for some
//! partitions, e.g. of a topic the group no longer reads (`kafka-consumer-groups
//! --delete-offsets`).
//!
//! Deleting is writing: each deleted offset becomes a tombstone (its offset-commit key
//! with a null value) appended to the group's `__consumer_offsets` partition with acks=-1,
//! as a commit is, and the answer waits until the tombstones are replicated. That is what
//! makes the deletion durable: a coordinator that takes over later replays the partition,
//! and the tombstone, after the commit it deletes, removes the offset again
//! ([`super::load`]). The cache forgets the offsets once the tombstones are replicated,
//! as it learns a commit only then.
//!
//! Kafka's rules: an empty group id is INVALID_GROUP_ID; an unknown (or dead) group
//! GROUP_ID_NOT_FOUND; a group with members whose protocol type is not `consumer`
//! NON_EMPTY_GROUP (its subscriptions cannot be read). Otherwise each partition is
//! answered on its own: GROUP_SUBSCRIBED_TO_TOPIC if the group's consumers subscribe to its
//! topic (an active group would commit it again), else deleted — a partition without a
//! committed offset is answered without error and writes nothing.

use kafka_protocol::ResponseError;
use tracing::info;

use super::group::{GroupState, OffsetKey, CONSUMER_PROTOCOL_TYPE};
use super::manager::offset_commit_error;
use super::*;

/// The answer to an OffsetDelete: a group-level error, or one result per partition.
pub type DeleteOffsetsCallback =
    Box<dyn FnOnce(Result<Vec<(OffsetKey, Option<ResponseError>)>, ResponseError>) + Send>;

impl GroupCoordinator {
    /// OffsetDelete for `partitions` of `group_id` (every topic named must exist: the
    /// handler answers the others). `callback` gets the answer once the tombstones are
    /// replicated, or at once when there are none to write.
    pub fn handle_delete_offsets(
        &self,
        ctx: &RequestContext,
        group_id: &str,
        partitions: Vec<OffsetKey>,
        callback: DeleteOffsetsCallback,
    ) {
        if group_id.is_empty() {
            return callback(Err(ResponseError::InvalidGroupId));
        }
        if let Err(e) = self.manager.check_coordinator(group_id) {
            return callback(Err(e));
        }
        let Some(handle) = self.group(group_id) else {
            return callback(Err(ResponseError::GroupIdNotFound));
        };
        self.locked(&handle, |c, g, fx| {
            match g.state() {
                GroupState::Dead => return callback(Err(ResponseError::GroupIdNotFound)),
                GroupState::Empty => {}
                _ if g.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) => {
                    return callback(Err(ResponseError::NonEmptyGroup))
                }
                _ => {}
            }
            let answers: Vec<(OffsetKey, Option<ResponseError>)> = partitions
                .into_iter()
                .map(|key| {
                    let error = g
                        .is_subscribed_to_topic(&key.0)
                        .then_some(ResponseError::GroupSubscribedToTopic);
                    (key, error)
                })
                .collect();
            let mut deleted: Vec<OffsetKey> = Vec::new();
            for (key, error) in &answers {
                let held = g.offset(key).is_some() || g.has_pending_offset_commit(key);
                if error.is_none() && held && !deleted.contains(key) {
                    deleted.push(key.clone());
                }
            }
            if deleted.is_empty() {
                return callback(Ok(answers));
            }
            info!(target: TRACE_TARGET, group = %g.group_id, offsets = deleted.len(), "deleting committed offsets (OffsetDelete); their tombstones are appended with acks=-1");
            let records = deleted
                .iter()
                .map(|(topic, partition)| {
                    (records::offset_commit_key(&g.group_id, topic, *partition), None)
                })
                .collect();
            let then = c.later(fx, move |_c, g, _fx, stored: Result<i64, ResponseError>| {
                match stored {
                    Ok(_) => {
                        for key in &deleted {
                            g.remove_offset(key);
                        }
                        callback(Ok(answers));
                    }
                    Err(e) => {
                        info!(target: TRACE_TARGET, group = %g.group_id, append_error = ?e, "the offsets' tombstones were not replicated");
                        callback(Err(offset_commit_error(e)));
                    }
                }
            });
            fx.push(Action::Append {
                ctx: ctx.clone(),
                group: g.group_id.clone(),
                records,
                transaction: None,
                then,
            });
        });
    }
}
