//! OffsetFetch: the offsets a group committed, from the coordinator's cache — which holds
//! a commit only once it is replicated. v1 names the partitions; v2+ may ask for all
//! (topics null) and has a top-level error; v5+ leader epochs; v7+ `require_stable`
//! (answered once the commits before it are replicated: see [`handle`]); v8+ batches
//! several groups in one request. With `require_stable`, an offset a transaction still
//! holds (TxnOffsetCommit, not yet committed or aborted) is UNSTABLE_OFFSET_COMMIT.

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetFetchRequest, OffsetFetchResponse, ResponseKind, TopicName,
};

use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::{sb, Reply, RequestContext};
use crate::coordinator::group::OffsetKey;
use crate::coordinator::{FetchedOffset, GroupCoordinator};

/// One group's answer: per topic (in order), per partition, the offset found.
type GroupOffsets = Vec<(String, Vec<(i32, FetchedOffset)>)>;

/// Handles an OffsetFetch request. With `require_stable` (v7+) the answer waits until
/// what the coordinator wrote to each group's partition is replicated, as Kafka 4.4's
/// does; a group whose partition does not get there within `offsets.commit.timeout.ms`
/// answers NOT_COORDINATOR.
pub fn handle(c: &Arc<GroupCoordinator>, ctx: &RequestContext, req: OffsetFetchRequest) -> Reply {
    let v = ctx.api_version;
    if !(v >= 7 && req.require_stable) {
        let no_txn = |_: &str, _: &str, _: i32| false;
        return Reply::now(ResponseKind::OffsetFetch(answer(c, &no_txn, v, &req, &[])));
    }
    let groups: Vec<String> = if v < 8 {
        vec![req.group_id.0.to_string()]
    } else {
        req.groups
            .iter()
            .map(|g| g.group_id.0.to_string())
            .collect()
    };
    let (tx, rx) = oneshot::channel();
    let coordinator = c.clone();
    c.after_pending_writes_of(
        ctx,
        "offset-fetch",
        &groups,
        Box::new(move |replicated| {
            let unstable: Vec<bool> = replicated.into_iter().map(|ok| !ok).collect();
            // An offset a transaction still holds is UNSTABLE_OFFSET_COMMIT until it ends.
            let pending = |group: &str, topic: &str, partition: i32| {
                coordinator.holds_txn_offset(group, &(Arc::from(topic), partition))
            };
            let _ = tx.send(ResponseKind::OffsetFetch(answer(
                &coordinator,
                &pending,
                v,
                &req,
                &unstable,
            )));
        }),
    );
    Reply::from_callback(rx)
}

/// The answer from the coordinator's cache; `not_coordinator[i]` marks the i-th group
/// (the only one before v8) whose partition's writes did not replicate in time, and
/// `pending(group, topic, partition)` an offset an open transaction holds.
fn answer(
    c: &GroupCoordinator,
    pending: &dyn Fn(&str, &str, i32) -> bool,
    v: i16,
    req: &OffsetFetchRequest,
    not_coordinator: &[bool],
) -> OffsetFetchResponse {
    let refused = |i: usize| not_coordinator.get(i).copied().unwrap_or(false);
    let fetch = |group: &str, topics: Option<Vec<(String, Vec<i32>)>>| -> GroupOffsets {
        let keys = topics.as_ref().map(|topics| {
            topics
                .iter()
                .flat_map(|(t, ps)| {
                    let t: Arc<str> = Arc::from(t.as_str());
                    ps.iter().map(move |p| (t.clone(), *p))
                })
                .collect::<Vec<OffsetKey>>()
        });
        group_by_topic(c.handle_fetch_offsets(group, keys))
    };
    let partition_error = |group: &str, topic: &str, index: i32, o: &FetchedOffset| {
        if pending(group, topic, index) {
            ResponseError::UnstableOffsetCommit.code()
        } else {
            o.error.map_or(0, |e| e.code())
        }
    };
    if v < 8 {
        if refused(0)
            || c.manager
                .check_coordinator(req.group_id.0.as_str())
                .is_err()
        {
            return OffsetFetchResponse::default()
                .with_error_code(ResponseError::NotCoordinator.code());
        }
        let topics = req.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let topics = fetch(req.group_id.0.as_str(), topics)
            .into_iter()
            .map(|(name, partitions)| {
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(sb(&name)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(index, o)| {
                                let mut p = OffsetFetchResponsePartition::default()
                                    .with_partition_index(index)
                                    .with_committed_offset(o.offset)
                                    .with_metadata(Some(sb(&o.metadata)))
                                    .with_error_code(partition_error(
                                        req.group_id.0.as_str(),
                                        &name,
                                        index,
                                        &o,
                                    ));
                                if v >= 5 {
                                    p.committed_leader_epoch = o.leader_epoch;
                                }
                                p
                            })
                            .collect(),
                    )
            })
            .collect();
        return OffsetFetchResponse::default().with_topics(topics);
    }
    let groups = req
        .groups
        .iter()
        .enumerate()
        .map(|(i, group)| {
            let answer = OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(sb(group.group_id.0.as_str())));
            if refused(i)
                || c.manager
                    .check_coordinator(group.group_id.0.as_str())
                    .is_err()
            {
                return answer.with_error_code(ResponseError::NotCoordinator.code());
            }
            let topics = group.topics.as_ref().map(|ts| {
                ts.iter()
                    .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                    .collect()
            });
            let topics = fetch(group.group_id.0.as_str(), topics)
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(TopicName(sb(&name)))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(index, o)| {
                                    OffsetFetchResponsePartitions::default()
                                        .with_partition_index(index)
                                        .with_committed_offset(o.offset)
                                        .with_committed_leader_epoch(o.leader_epoch)
                                        .with_metadata(Some(sb(&o.metadata)))
                                        .with_error_code(partition_error(
                                            group.group_id.0.as_str(),
                                            &name,
                                            index,
                                            &o,
                                        ))
                                })
                                .collect(),
                        )
                })
                .collect();
            answer.with_topics(topics)
        })
        .collect();
    OffsetFetchResponse::default().with_groups(groups)
}

/// Groups consecutive partitions of the same topic, keeping the order they came in.
fn group_by_topic(found: Vec<(OffsetKey, FetchedOffset)>) -> GroupOffsets {
    let mut out: GroupOffsets = Vec::new();
    for ((topic, partition), offset) in found {
        match out.last_mut() {
            Some((name, partitions)) if name.as_str() == &*topic => {
                partitions.push((partition, offset))
            }
            _ => out.push((topic.to_string(), vec![(partition, offset)])),
        }
    }
    out
}
