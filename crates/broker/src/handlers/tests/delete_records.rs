//! DeleteRecords through the handler: the answer a client decodes, and hostile requests.

use super::*;

fn delete(topic: &str, partitions: &[(i32, i64)], timeout_ms: i32) -> RequestKind {
    RequestKind::DeleteRecords(
        DeleteRecordsRequest::default()
            .with_timeout_ms(timeout_ms)
            .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                .with_name(name(topic))
                .with_partitions(
                    partitions
                        .iter()
                        .map(|&(index, offset)| {
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(index)
                                .with_offset(offset)
                        })
                        .collect(),
                )]),
    )
}

/// A topic of `partitions` partitions and one replica, with one record in partition 0.
fn one_replica_topic(apis: &KafkaApis, topic: &str, partitions: i32) {
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(1)]);
    ask(apis, 7, RequestKind::CreateTopics(create));
    produce_to(apis, topic, one_record_batch());
}

#[test]
fn each_partition_answers_its_low_watermark_or_its_error_in_request_order() {
    let apis = manual_apis();
    one_replica_topic(&apis, "dr", 2);
    for version in 0..=2 {
        // With no follower, the low watermark is the leader's log start: answered at once.
        let ResponseKind::DeleteRecords(response) = ask(
            &apis,
            version,
            delete("dr", &[(0, 0), (1, 5), (7, 0), (0, -1)], 1000),
        ) else {
            panic!("not a DeleteRecords response");
        };
        round_trip(
            ApiKey::DeleteRecords,
            version,
            &ResponseKind::DeleteRecords(response.clone()),
        );
        let answers: Vec<(i32, i64, i16)> = response.topics[0]
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.low_watermark, p.error_code))
            .collect();
        assert_eq!(
            answers,
            // Partition 0 is named twice: deleted once, at the last offset (-1: the HW),
            // answered where it was first named, as Kafka's handler keeps a map.
            vec![
                (0, 1, 0),
                (1, -1, ResponseError::OffsetOutOfRange.code()),
                (7, -1, ResponseError::UnknownTopicOrPartition.code()),
            ],
            "v{version}"
        );
    }
}

#[test]
fn internal_topics_cannot_be_deleted_from() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let find = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
    ask(&apis, 1, RequestKind::FindCoordinator(find)); // creates __consumer_offsets
    let ResponseKind::DeleteRecords(response) =
        ask(&apis, 2, delete("__consumer_offsets", &[(0, -1)], 1000))
    else {
        panic!("not a DeleteRecords response");
    };
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        ResponseError::InvalidTopicException.code()
    );
}

#[test]
fn hostile_delete_records_neither_panic_nor_park_without_bound() {
    use rand::{Rng, SeedableRng};
    let apis = manual_apis();
    one_replica_topic(&apis, "a", 3);
    // Three replicas: a deletion parks until its timeout, as no follower fetches here.
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("b"))
        .with_num_partitions(2)
        .with_replication_factor(3)]);
    ask(&apis, 7, RequestKind::CreateTopics(create));
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xde1e7e);
    let mut parked = Vec::new();
    let offsets = [i64::MIN, -2, -1, 0, 1, 2, i64::MAX];
    let partitions_pool = [i32::MIN, -1, 0, 1, 2, 99_999];
    let timeouts = [i32::MIN, -1, 0, 1, 30_000, i32::MAX];
    for round in 0..300 {
        let topic = ["a", "b", "", "nope", "__consumer_offsets"][rng.gen_range(0..5)];
        let partitions: Vec<(i32, i64)> = (0..rng.gen_range(0..6))
            .map(|_| {
                (
                    partitions_pool[rng.gen_range(0..partitions_pool.len())],
                    offsets[rng.gen_range(0..offsets.len())],
                )
            })
            .collect();
        let timeout = timeouts[rng.gen_range(0..timeouts.len())];
        let version = rng.gen_range(0..=2);
        let request = delete(topic, &partitions, timeout);
        let mut buf = bytes::BytesMut::new();
        request.encode(&mut buf, version).expect("encodes");
        let mut frame = buf.freeze();
        let request =
            RequestKind::decode(ApiKey::DeleteRecords, &mut frame, version).expect("decodes");
        match apis.handle(&context("fuzz", round, version), request) {
            Reply::Now(r) => round_trip(ApiKey::DeleteRecords, version, &r),
            Reply::Later(rx) => parked.push((version, rx)),
            Reply::Nothing | Reply::Close(_) => panic!("round {round}: no answer"),
        }
        assert!(apis.replica_manager.delete_records_purgatory.delayed() <= parked.len());
    }
    // Every parked deletion ends by its (capped) timeout.
    apis.replica_manager
        .timer
        .advance_by(crate::replica_manager::MAX_DELETE_RECORDS_TIMEOUT_MS);
    for (version, mut rx) in parked {
        let response = rx
            .try_recv()
            .expect("a parked DeleteRecords answered by its timeout");
        round_trip(ApiKey::DeleteRecords, version, &response);
    }
    assert_eq!(apis.replica_manager.delete_records_purgatory.delayed(), 0);
}
