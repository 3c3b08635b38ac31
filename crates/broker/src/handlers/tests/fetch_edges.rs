//! The edges of a Fetch: offsets outside the log, and fetches that must wait.
//!
//! A consumer whose position is outside the log must hear OFFSET_OUT_OF_RANGE, with a
//! record set a client can parse, so that it resets by its `auto.offset.reset`. A fetch
//! that asked to wait and has nothing wrong must wait: a broker that answers it at once,
//! empty, makes the client fetch again at once, and both spin.

use super::*;

/// A topic of one partition and one replica, so the HW follows each append.
fn one_replica_topic(apis: &KafkaApis, topic: &str, configs: &[(&str, &str)]) {
    one_replica_topic_with(apis, topic, 1, configs)
}

fn one_replica_topic_with(apis: &KafkaApis, topic: &str, replicas: i16, configs: &[(&str, &str)]) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(replicas)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.to_string()))
                        .with_value(Some(StrBytes::from_string(v.to_string())))
                })
                .collect(),
        )]);
    let ResponseKind::CreateTopics(created) = ask(apis, 7, RequestKind::CreateTopics(request))
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0, "{topic} created");
}

/// A topic of one partition and three replicas (this broker leads, 2 and 3 follow).
fn three_replica_topic(apis: &KafkaApis, topic: &str, configs: &[(&str, &str)]) {
    one_replica_topic_with(apis, topic, 3, configs)
}

/// Appends one single-record batch per call, acks=1.
fn produce_one(apis: &KafkaApis, topic: &str) {
    assert_eq!(produce_to(apis, topic, one_record_batch()), 0);
}

/// A Fetch of partition 0 of `topic` from `offset` that asks to wait up to 500 ms for a byte.
fn fetch_from(topic: &str, replica_id: i32, offset: i64) -> RequestKind {
    fetch_waiting(topic, replica_id, offset, 500)
}

fn fetch_waiting(topic: &str, replica_id: i32, offset: i64, max_wait_ms: i32) -> RequestKind {
    RequestKind::Fetch(fetch_of(topic, replica_id, offset, max_wait_ms))
}

#[test]
fn an_offset_outside_the_log_answers_out_of_range_at_once_with_an_empty_record_set() {
    let apis = manual_apis();
    // retention.bytes 1: each append deletes every batch below the HW.
    one_replica_topic(&apis, "edges", &[("retention.bytes", "1")]);
    three_replica_topic(&apis, "edges3", &[("retention.bytes", "1")]);
    for topic in ["edges", "edges3"] {
        for _ in 0..3 {
            produce_one(&apis, topic);
        }
    }
    // The followers of edges3 copy the three records and report it, so its HW moves too.
    for offset in [0, 3] {
        for follower in [2, 3] {
            let reply = apis.handle(
                &context("follower", 7, 12),
                fetch_waiting("edges3", follower, offset, 0),
            );
            assert!(
                matches!(reply, Reply::Now(_)),
                "follower {follower} at {offset}"
            );
        }
    }
    for topic in ["edges", "edges3"] {
        let log = apis.replica_manager.partition(topic, 0).expect("partition");
        let log = log.lock();
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (3, 3),
            "{topic}: retention deleted every batch below the HW"
        );
    }

    // Above the log end offset, and below the log start; consumers and followers alike.
    let cases = [
        ("edges", -1, 999),
        ("edges", -1, 0),
        ("edges", -1, 2),
        ("edges3", -1, 4),
        ("edges3", 2, 999),
        ("edges3", 2, 0),
    ];
    for (topic, replica_id, offset) in cases {
        for version in [4, 11, 12] {
            let reply = apis.handle(
                &context("edges", 7, version),
                fetch_from(topic, replica_id, offset),
            );
            let what = format!("{topic}, replica {replica_id} at {offset}, v{version}");
            let Reply::Now(response) = reply else {
                panic!("{what}: parked, not answered");
            };
            let partition = decoded_partition(*response, version);
            assert_eq!(
                partition.error_code,
                ResponseError::OffsetOutOfRange.code(),
                "{what}"
            );
            // librdkafka refuses a whole response holding a null record set (size -1).
            assert_eq!(partition.records, Some(Bytes::new()), "{what}");
        }
    }
}

#[test]
fn a_fetch_that_asked_to_wait_waits_when_nothing_is_wrong() {
    let apis = manual_apis();
    one_replica_topic(&apis, "quiet", &[]);
    three_replica_topic(&apis, "quiet3", &[]);
    produce_one(&apis, "quiet");
    produce_one(&apis, "quiet3");
    // A consumer at the log end, a consumer above the HW (no follower has copied offset
    // 0 of quiet3 yet) and a follower at the log end all wait max_wait_ms.
    for (topic, replica_id) in [("quiet", -1), ("quiet3", -1), ("quiet3", 2)] {
        let reply = apis.handle(&context("quiet", 7, 12), fetch_from(topic, replica_id, 1));
        let Reply::Later(mut rx) = reply else {
            panic!("{topic}, replica {replica_id}: answered at once with nothing to read");
        };
        apis.replica_manager.timer.advance_by(499);
        assert!(
            rx.try_recv().is_err(),
            "{topic}, replica {replica_id}: answered before max_wait_ms"
        );
        apis.replica_manager.timer.advance_by(1);
        let response = rx.try_recv().expect("answered at max_wait_ms");
        let partition = decoded_partition(response, 12);
        assert_eq!(partition.error_code, 0, "{topic}, replica {replica_id}");
        assert_eq!(
            partition.records,
            Some(Bytes::new()),
            "{topic}, replica {replica_id}"
        );
    }
}
