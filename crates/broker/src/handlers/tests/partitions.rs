//! What CreatePartitions answers on a single broker: Kafka's errors and messages, the
//! broker's caps, `validate_only`, and partitions that, once added, are produced to and
//! listed like the others — under the same topic id, the old partitions' logs untouched.

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};

use super::*;

fn grow(topic: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(name(topic))
        .with_count(count)
        .with_assignments(assignments.map(|a| {
            a.into_iter()
                .map(|ids| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                })
                .collect()
        }))
}

/// (name, error code, message) of each result.
fn create_partitions(
    apis: &KafkaApis,
    version: i16,
    validate_only: bool,
    topics: Vec<CreatePartitionsTopic>,
) -> Vec<(String, i16, Option<String>)> {
    let request = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(1_000)
        .with_validate_only(validate_only);
    let ResponseKind::CreatePartitions(response) =
        ask(apis, version, RequestKind::CreatePartitions(request))
    else {
        panic!("not a CreatePartitions response");
    };
    round_trip(
        ApiKey::CreatePartitions,
        version,
        &ResponseKind::CreatePartitions(response.clone()),
    );
    response
        .results
        .into_iter()
        .map(|r| {
            (
                r.name.to_string(),
                r.error_code,
                r.error_message.map(|m| m.to_string()),
            )
        })
        .collect()
}

fn apis_with(
    configure: impl FnOnce(&mut BrokerConfig),
    topics: &[(&str, i32, i16)],
) -> Arc<KafkaApis> {
    KafkaApis::new(crate::test_util::manual_broker(configure, topics))
}

fn partition_count(apis: &KafkaApis, topic: &str) -> usize {
    apis.replica_manager
        .topic(topic)
        .map_or(0, |t| t.partitions.len())
}

#[test]
fn added_partitions_keep_the_topic_id_and_the_old_logs_and_take_records() {
    let apis = apis_with(|_| {}, &[("grown", 2, 1)]);
    let rm = &apis.replica_manager;
    let before = rm.topic("grown").expect("created");
    exchange(
        &apis,
        9,
        RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name("grown"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(one_record_batch()))])]),
        ),
    );
    for version in 0..=3 {
        let total = 3 + i32::from(version);
        assert_eq!(
            create_partitions(&apis, version, false, vec![grow("grown", total, None)]),
            vec![("grown".to_string(), 0, None)],
            "v{version}"
        );
    }
    let after = rm.topic("grown").expect("still there");
    assert_eq!(after.partitions.len(), 6);
    assert_eq!(after.id, before.id, "the same topic, not a new one");
    for (old, kept) in before.partitions.iter().zip(&after.partitions) {
        assert!(Arc::ptr_eq(old, kept), "{} was replaced", old.tp);
    }
    assert_eq!(
        rm.partition("grown", 1)
            .expect("p1")
            .lock()
            .log_end_offset(),
        1
    );

    // Metadata lists the new partitions, led here.
    let ResponseKind::Metadata(metadata) = exchange(
        &apis,
        12,
        RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("grown"))),
        ]))),
    ) else {
        panic!("not a Metadata response");
    };
    let listed: Vec<(i32, i32)> = metadata.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    assert_eq!(listed, (0..6).map(|p| (p, 1)).collect::<Vec<_>>());

    // A new partition takes an acks=all produce, and its high watermark moves.
    let ResponseKind::Produce(produced) = exchange(
        &apis,
        9,
        RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(name("grown"))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(5)
                        .with_records(Some(one_record_batch()))])]),
        ),
    ) else {
        panic!("not a Produce response");
    };
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(
        rm.partition("grown", 5)
            .expect("p5")
            .lock()
            .high_watermark(),
        1
    );
}

#[test]
fn refusals_carry_kafkas_errors_and_messages_and_change_nothing() {
    let apis = apis_with(|_| {}, &[("t", 3, 2), ("u", 1, 1)]);
    let results = create_partitions(
        &apis,
        3,
        false,
        vec![
            grow("t", 3, None),
            grow("t", 2, None),
            grow("nope", 5, None),
            grow("u", 2, None),
            grow("u", 9, None),
        ],
    );
    let invalid_request = ResponseError::InvalidRequest.code();
    assert_eq!(
        results,
        vec![
            (
                "t".into(),
                invalid_request,
                Some("Duplicate topic name.".into())
            ),
            (
                "u".into(),
                invalid_request,
                Some("Duplicate topic name.".into())
            ),
            (
                "nope".into(),
                ResponseError::UnknownTopicOrPartition.code(),
                None
            ),
        ],
        "a name given twice is refused once, first (Kafka 4.4's answer); an unknown topic has no \
         message"
    );
    let invalid_partitions = ResponseError::InvalidPartitions.code();
    let one = |topic: CreatePartitionsTopic| create_partitions(&apis, 3, false, vec![topic]);
    assert_eq!(
        one(grow("t", 3, None)),
        vec![(
            "t".into(),
            invalid_partitions,
            Some("Topic already has 3 partition(s).".into())
        )]
    );
    assert_eq!(
        one(grow("t", 2, None)),
        vec![(
            "t".into(),
            invalid_partitions,
            Some("The topic t currently has 3 partition(s); 2 would not be an increase.".into())
        )]
    );
    let bad_assignment = |a: Vec<Vec<i32>>, total: i32| {
        let r = one(grow("t", total, Some(a)));
        assert_eq!(
            r[0].1,
            ResponseError::InvalidReplicaAssignment.code(),
            "{r:?}"
        );
        r[0].2.clone().unwrap_or_default()
    };
    assert_eq!(
        bad_assignment(vec![vec![1, 2]], 5),
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."
    );
    assert_eq!(
        bad_assignment(vec![vec![1, 9]], 4),
        "The manual partition assignment includes broker 9, but no such broker is registered."
    );
    assert_eq!(
        bad_assignment(vec![vec![1, 1]], 4),
        "The manual partition assignment includes the broker 1 more than once."
    );
    assert_eq!(
        bad_assignment(vec![vec![1]], 4),
        "The manual partition assignment includes a partition with 1 replica(s), but this is \
         not consistent with previous partitions, which have 2 replica(s)."
    );
    assert!(bad_assignment(vec![vec![2, 3]], 4).contains("leaves out broker 1"));
    assert_eq!(partition_count(&apis, "t"), 3, "nothing was added");

    // A valid manual assignment: the replicas it names.
    assert_eq!(one(grow("t", 4, Some(vec![vec![1, 3]])))[0].1, 0);
    let added = apis.replica_manager.partition("t", 3).expect("p3");
    assert_eq!(added.lock().replicas(), [1, 3]);
}

#[test]
fn the_caps_refuse_huge_counts_before_anything_is_allocated() {
    let apis = apis_with(|c| c.max_partitions = 20, &[("t", 2, 1)]);
    let huge = create_partitions(&apis, 3, false, vec![grow("t", i32::MAX, None)]);
    assert_eq!(
        huge[0].1,
        ResponseError::InvalidPartitions.code(),
        "{huge:?}"
    );
    let over = create_partitions(&apis, 3, false, vec![grow("t", 21, None)]);
    assert_eq!(over[0].1, ResponseError::PolicyViolation.code(), "{over:?}");
    assert!(
        over[0]
            .2
            .as_deref()
            .unwrap_or_default()
            .contains("max.partitions"),
        "{over:?}"
    );
    assert_eq!(partition_count(&apis, "t"), 2);
    assert_eq!(
        create_partitions(&apis, 3, false, vec![grow("t", 20, None)])[0].1,
        0
    );
}

#[test]
fn validate_only_checks_everything_and_adds_nothing() {
    let apis = apis_with(|_| {}, &[("t", 2, 1)]);
    let mut changes = apis.replica_manager.subscribe_topic_changes();
    changes.mark_unchanged();
    assert_eq!(
        create_partitions(&apis, 1, true, vec![grow("t", 5, None)]),
        vec![("t".to_string(), 0, None)]
    );
    assert_eq!(
        create_partitions(&apis, 1, true, vec![grow("t", 2, None)])[0].1,
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(partition_count(&apis, "t"), 2);
    assert!(
        !changes.has_changed().unwrap_or(true),
        "followers were told of a change"
    );
    create_partitions(&apis, 1, false, vec![grow("t", 5, None)]);
    assert!(
        changes.has_changed().unwrap_or(false),
        "followers must hear of new partitions"
    );
}

#[test]
fn partitions_added_to_the_offsets_topic_move_no_group() {
    // Kafka's coordinator spreads groups over the partition count it started with, so
    // growing __consumer_offsets does not send a group to a partition without its state.
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let c = &apis.group_coordinator;
    c.find_coordinator().expect("__consumer_offsets created");
    let before: Vec<i32> = (0..20)
        .map(|i| c.manager.partition_for(&format!("group-{i}")))
        .collect();
    let offsets = crate::topics::OFFSETS_TOPIC;
    let count = partition_count(&apis, offsets) as i32;
    assert_eq!(
        create_partitions(&apis, 3, false, vec![grow(offsets, count + 7, None)])[0].1,
        0
    );
    assert_eq!(partition_count(&apis, offsets) as i32, count + 7);
    let after: Vec<i32> = (0..20)
        .map(|i| c.manager.partition_for(&format!("group-{i}")))
        .collect();
    assert_eq!(before, after);
}
