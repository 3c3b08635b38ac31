//! OffsetFetch: the offsets a group committed, from the coordinator's cache — which holds
//! a commit only once it is replicated. v1 names the partitions; v2+ may ask for all
//! (topics null) and has a top-level error; v5+ leader epochs; v7+ `require_stable`
//! (UNSTABLE_OFFSET_COMMIT for a partition whose commit is still being replicated); v8+
//! batches several groups in one request.

use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    GroupId, OffsetFetchRequest, OffsetFetchResponse, ResponseKind, TopicName,
};

use super::{sb, RequestContext};
use crate::coordinator::group::OffsetKey;
use crate::coordinator::{FetchedOffset, GroupCoordinator};

/// One group's answer: per topic (in order), per partition, the offset found.
type GroupOffsets = Vec<(String, Vec<(i32, FetchedOffset)>)>;

/// Handles an OffsetFetch request.
pub fn handle(
    c: &Arc<GroupCoordinator>,
    ctx: &RequestContext,
    req: OffsetFetchRequest,
) -> ResponseKind {
    let v = ctx.api_version;
    // Each group is answered from the coordinator's cache; there is no group-level error
    // to give on a broker that coordinates every group itself.
    let fetch = |group: &str, topics: Option<Vec<(String, Vec<i32>)>>| -> GroupOffsets {
        let require_stable = v >= 7 && req.require_stable;
        let keys = topics.as_ref().map(|topics| {
            topics
                .iter()
                .flat_map(|(t, ps)| {
                    let t: Arc<str> = Arc::from(t.as_str());
                    ps.iter().map(move |p| (t.clone(), *p))
                })
                .collect::<Vec<OffsetKey>>()
        });
        group_by_topic(c.handle_fetch_offsets(group, require_stable, keys))
    };
    let partition_error = |o: &FetchedOffset| o.error.map_or(0, |e| e.code());
    if v < 8 {
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
                                    .with_error_code(partition_error(&o));
                                if v >= 5 {
                                    p.committed_leader_epoch = o.leader_epoch;
                                }
                                p
                            })
                            .collect(),
                    )
            })
            .collect();
        return ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_topics(topics));
    }
    let groups = req
        .groups
        .iter()
        .map(|group| {
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
                                        .with_error_code(partition_error(&o))
                                })
                                .collect(),
                        )
                })
                .collect();
            OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(sb(group.group_id.0.as_str())))
                .with_topics(topics)
        })
        .collect();
    ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_groups(groups))
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
