//! What OffsetDelete answers, and that what it deletes stays deleted when another
//! coordinator loads the group from `__consumer_offsets`.

use bytes::BufMut;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::protocol::Encodable;

use super::*;
use crate::coordinator::GroupCoordinator;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A consumer's subscription to `topics`, as a v1 `ConsumerProtocolSubscription` with
/// its version in front.
fn subscription(topics: &[&str]) -> Bytes {
    let mut buf = bytes::BytesMut::new();
    buf.put_i16(1);
    ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| text(t)).collect())
        .encode(&mut buf, 1)
        .expect("encodes");
    buf.freeze()
}

/// A one-member group of `protocol_type`, Stable at generation 1; returns the member id.
fn stable_group(apis: &KafkaApis, group: &str, protocol_type: &str, metadata: Bytes) -> StrBytes {
    let ResponseKind::JoinGroup(joined) = exchange(
        apis,
        3,
        RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(5_000)
                .with_protocol_type(text(protocol_type))
                .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                )
                .with_name(text("range"))
                .with_metadata(metadata)]),
        ),
    ) else {
        panic!("not a JoinGroup response")
    };
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id;
    let ResponseKind::SyncGroup(synced) = exchange(
        apis,
        3,
        RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id(1)
                .with_member_id(member.clone())
                .with_assignments(vec![
                    sync_group_request::SyncGroupRequestAssignment::default()
                        .with_member_id(member.clone())
                        .with_assignment(Bytes::from_static(b"assignment")),
                ]),
        ),
    ) else {
        panic!("not a SyncGroup response")
    };
    assert_eq!(synced.error_code, 0);
    member
}

fn commit(
    apis: &KafkaApis,
    group: &str,
    member: &StrBytes,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) {
    let topics = offsets
        .iter()
        .map(|&(topic, partition, offset)| {
            OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition)
                    .with_committed_offset(offset)])
        })
        .collect();
    let ResponseKind::OffsetCommit(committed) = exchange(
        apis,
        8,
        RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_generation_id_or_member_epoch(generation)
                .with_member_id(member.clone())
                .with_topics(topics),
        ),
    ) else {
        panic!("not an OffsetCommit response")
    };
    for t in &committed.topics {
        for p in &t.partitions {
            assert_eq!(
                p.error_code, 0,
                "commit of {}-{}",
                t.name.0, p.partition_index
            );
        }
    }
}

/// The group-level error and each (topic, partition, error) of an OffsetDelete.
fn delete_offsets(
    apis: &KafkaApis,
    group: &str,
    partitions: &[(&str, i32)],
) -> (i16, Vec<(String, i32, i16)>) {
    let mut topics: Vec<OffsetDeleteRequestTopic> = Vec::new();
    for &(topic, partition) in partitions {
        let p = OffsetDeleteRequestPartition::default().with_partition_index(partition);
        match topics.iter_mut().find(|t| t.name.0.as_str() == topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetDeleteRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![p]),
            ),
        }
    }
    let ResponseKind::OffsetDelete(response) = exchange(
        apis,
        0,
        RequestKind::OffsetDelete(
            OffsetDeleteRequest::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(topics),
        ),
    ) else {
        panic!("not an OffsetDelete response")
    };
    let results = response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.0.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    (response.error_code, results)
}

fn committed(c: &GroupCoordinator, group: &str, topic: &str, partition: i32) -> i64 {
    c.handle_fetch_offsets(group, Some(vec![(Arc::from(topic), partition)]))[0]
        .1
        .offset
}

fn apis_with_topics() -> Arc<KafkaApis> {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let create = CreateTopicsRequest::default().with_topics(
        [("read", 2), ("dropped", 1)]
            .into_iter()
            .map(|(topic, partitions)| {
                CreatableTopic::default()
                    .with_name(name(topic))
                    .with_num_partitions(partitions)
                    .with_replication_factor(1)
            })
            .collect(),
    );
    ask(&apis, 7, RequestKind::CreateTopics(create));
    apis
}

#[test]
fn an_active_group_keeps_the_offsets_of_topics_it_reads_and_loses_the_others() {
    let apis = apis_with_topics();
    let c = &apis.group_coordinator;
    let member = stable_group(&apis, "readers", "consumer", subscription(&["read"]));
    commit(
        &apis,
        "readers",
        &member,
        1,
        &[("read", 0, 5), ("read", 1, 6), ("dropped", 0, 7)],
    );

    let (error, results) = delete_offsets(
        &apis,
        "readers",
        &[("read", 0), ("read", 9), ("dropped", 0), ("nope", 0)],
    );
    assert_eq!(error, 0);
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let subscribed = ResponseError::GroupSubscribedToTopic.code();
    assert_eq!(
        results,
        vec![
            ("read".into(), 9, unknown),
            ("read".into(), 0, subscribed),
            ("nope".into(), 0, unknown),
            ("dropped".into(), 0, 0),
        ],
        "as Kafka 4.4 orders it: the topics with unknown partitions first, those partitions \
         first in each, then the coordinator's answers"
    );
    assert_eq!(
        committed(c, "readers", "read", 0),
        5,
        "a subscribed topic keeps its offset"
    );
    assert_eq!(committed(c, "readers", "dropped", 0), -1, "deleted");
    // A partition with nothing committed is answered without error.
    assert_eq!(
        delete_offsets(&apis, "readers", &[("dropped", 0)]).1[0].2,
        0
    );

    // Once the group is Empty, the topic it read can go too.
    let ResponseKind::LeaveGroup(left) = exchange(
        &apis,
        0,
        RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(GroupId(text("readers")))
                .with_member_id(member),
        ),
    ) else {
        panic!("not a LeaveGroup response")
    };
    assert_eq!(left.error_code, 0);
    apis.replica_manager.timer.advance_by(1);
    assert_eq!(
        delete_offsets(&apis, "readers", &[("read", 1)]),
        (0, vec![("read".into(), 1, 0)])
    );
    assert_eq!(committed(c, "readers", "read", 1), -1);
    assert_eq!(
        committed(c, "readers", "read", 0),
        5,
        "only what was named goes"
    );
}

#[test]
fn group_level_refusals_are_kafkas() {
    let apis = apis_with_topics();
    let group_error = |group: &str| delete_offsets(&apis, group, &[("read", 0)]);
    assert_eq!(
        group_error(""),
        (ResponseError::InvalidGroupId.code(), vec![])
    );
    assert_eq!(
        group_error("nobody"),
        (ResponseError::GroupIdNotFound.code(), vec![])
    );
    // A group with members whose subscriptions the coordinator cannot read.
    stable_group(
        &apis,
        "connectors",
        "connect",
        Bytes::from_static(b"config"),
    );
    assert_eq!(
        group_error("connectors"),
        (ResponseError::NonEmptyGroup.code(), vec![])
    );
    // A consumer group whose subscription does not parse is taken to read everything.
    stable_group(&apis, "garbled", "consumer", Bytes::from_static(b"\x00"));
    assert_eq!(
        group_error("garbled").1,
        vec![(
            "read".into(),
            0,
            ResponseError::GroupSubscribedToTopic.code()
        )]
    );
}

#[test]
fn deleted_offsets_stay_deleted_when_a_new_coordinator_loads_the_group() {
    // The deletion is a tombstone in __consumer_offsets, after the commit it deletes: a
    // coordinator that takes over replays both and ends without the offset. (Had the
    // cache alone forgotten it, the reload would bring it back.)
    let apis = apis_with_topics();
    let member = stable_group(&apis, "readers", "consumer", subscription(&["read"]));
    commit(
        &apis,
        "readers",
        &member,
        1,
        &[("read", 0, 5), ("dropped", 0, 7)],
    );
    assert_eq!(
        delete_offsets(&apis, "readers", &[("dropped", 0)]).1[0].2,
        0
    );

    let fresh = GroupCoordinator::new(&apis.replica_manager);
    let offsets = apis
        .replica_manager
        .topic(crate::topics::OFFSETS_TOPIC)
        .expect("offsets topic");
    let loaded: usize = offsets
        .partitions
        .iter()
        .map(|p| fresh.load_groups(p).offsets)
        .sum();
    assert_eq!(loaded, 1, "only read-0 comes back");
    assert_eq!(committed(&fresh, "readers", "read", 0), 5);
    assert_eq!(committed(&fresh, "readers", "dropped", 0), -1);
    // The loaded group still knows what its consumers subscribe to.
    assert_eq!(
        delete_offsets_with(&fresh, "readers", ("read", 0)),
        Ok(vec![(
            (Arc::from("read"), 0),
            Some(ResponseError::GroupSubscribedToTopic)
        )])
    );
}

/// OffsetDelete straight at a coordinator (one that no `KafkaApis` routes to).
fn delete_offsets_with(
    c: &GroupCoordinator,
    group: &str,
    (topic, partition): (&str, i32),
) -> Result<Vec<(crate::coordinator::group::OffsetKey, Option<ResponseError>)>, ResponseError> {
    let (tx, rx) = std::sync::mpsc::channel();
    c.handle_delete_offsets(
        &context("test", 1, 0),
        group,
        vec![(Arc::from(topic), partition)],
        Box::new(move |answer| {
            let _ = tx.send(answer);
        }),
    );
    rx.try_recv().expect("answered at once: nothing to write")
}
