//! What a `read_committed` consumer sees of transactions: nothing past the last stable
//! offset while a transaction is open, the aborted transactions it must drop, ListOffsets
//! answering from the LSO, and a parked fetch that wakes when a marker moves the LSO.
//! Markers are written as the transaction coordinator writes them
//! ([`ReplicaManager::append_txn_marker`]).

use replog::batch::{batch_headers, ATTR_TRANSACTIONAL};
use replog::ControlType;

use super::*;
use crate::partition::TopicPartition;

const PRODUCER: i64 = 4242;

/// Creates `topic`, one partition, one replica: its HW follows each append.
fn topic(apis: &KafkaApis, topic: &str) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(1)]);
    let ResponseKind::CreateTopics(created) = ask(apis, 7, RequestKind::CreateTopics(request))
    else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(created.topics[0].error_code, 0);
}

/// Produces `records`, acks=1; the error code.
fn produce(apis: &KafkaApis, topic: &str, records: Bytes) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let ResponseKind::Produce(produced) = ask(apis, 9, RequestKind::Produce(request)) else {
        panic!("not a Produce response");
    };
    produced.responses[0].partition_responses[0].error_code
}

fn transactional(count: usize, sequence: i32) -> Bytes {
    BatchBuilder::new(count)
        .producer(PRODUCER, 0, sequence)
        .attributes(ATTR_TRANSACTIONAL)
        .bytes()
}

fn fetch(topic: &str, isolation_level: i8, max_wait_ms: i32) -> RequestKind {
    RequestKind::Fetch(
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation_level)
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![FetchPartition::default()
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])]),
    )
}

/// A fetch answered at once: its partition, as a client decodes it at v12.
fn fetched(apis: &KafkaApis, topic: &str, isolation_level: i8) -> fetch_response::PartitionData {
    partition_of(ask(apis, 12, fetch(topic, isolation_level, 0)))
}

fn partition_of(response: ResponseKind) -> fetch_response::PartitionData {
    let mut frame = encode_response(7, 12, &response).expect("encodes");
    frame.advance(4);
    let _header = ResponseHeader::decode_from(&mut frame, response.header_version(12));
    let ResponseKind::Fetch(decoded) =
        ResponseKind::decode(ApiKey::Fetch, &mut frame, 12).expect("decodes")
    else {
        panic!("not a Fetch response");
    };
    decoded.responses[0].partitions[0].clone()
}

fn offsets(p: &fetch_response::PartitionData) -> Vec<i64> {
    batch_headers(p.records.as_deref().unwrap_or_default())
        .map(|h| h.base_offset)
        .collect()
}

fn aborted(p: &fetch_response::PartitionData) -> Option<Vec<(i64, i64)>> {
    p.aborted_transactions.as_ref().map(|list| {
        list.iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect()
    })
}

fn latest(apis: &KafkaApis, topic: &str, isolation_level: i8) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name(topic))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let ResponseKind::ListOffsets(answer) = ask(apis, 7, RequestKind::ListOffsets(request)) else {
        panic!("not a ListOffsets response");
    };
    answer.topics[0].partitions[0].offset
}

fn marker(apis: &KafkaApis, topic: &str, control: ControlType) {
    apis.replica_manager
        .append_txn_marker(&TopicPartition::new(topic, 0), PRODUCER, 0, 0, control)
        .expect("the marker is appended");
}

#[test]
fn an_open_transaction_hides_its_records_and_everything_after_from_read_committed() {
    let apis = manual_apis();
    topic(&apis, "txn");
    assert_eq!(produce(&apis, "txn", one_record_batch()), 0); // 0
    assert_eq!(produce(&apis, "txn", transactional(2, 0)), 0); // 1..=2
    assert_eq!(produce(&apis, "txn", one_record_batch()), 0); // 3
    let uncommitted = fetched(&apis, "txn", 0);
    assert_eq!(offsets(&uncommitted), vec![0, 1, 3]);
    assert_eq!(
        aborted(&uncommitted),
        None,
        "read_uncommitted gets no aborted list"
    );
    let committed = fetched(&apis, "txn", 1);
    assert_eq!(
        (committed.high_watermark, committed.last_stable_offset),
        (4, 1)
    );
    assert_eq!(offsets(&committed), vec![0]);
    assert_eq!(aborted(&committed), Some(vec![]));
    assert_eq!((latest(&apis, "txn", 0), latest(&apis, "txn", 1)), (4, 1));

    marker(&apis, "txn", ControlType::Commit); // 4
    let committed = fetched(&apis, "txn", 1);
    assert_eq!(committed.last_stable_offset, 5);
    assert_eq!(offsets(&committed), vec![0, 1, 3, 4]);
    assert_eq!(aborted(&committed), Some(vec![]));
    assert_eq!(latest(&apis, "txn", 1), 5);
}

#[test]
fn an_aborted_transaction_is_listed_so_the_consumer_drops_its_records() {
    let apis = manual_apis();
    topic(&apis, "aborts");
    assert_eq!(produce(&apis, "aborts", transactional(3, 0)), 0); // 0..=2
    marker(&apis, "aborts", ControlType::Abort); // 3
    assert_eq!(produce(&apis, "aborts", one_record_batch()), 0); // 4
    let committed = fetched(&apis, "aborts", 1);
    assert_eq!(committed.last_stable_offset, 5);
    assert_eq!(offsets(&committed), vec![0, 3, 4]);
    assert_eq!(aborted(&committed), Some(vec![(PRODUCER, 0)]));
}

#[test]
fn a_parked_read_committed_fetch_wakes_when_the_marker_moves_the_lso() {
    let apis = manual_apis();
    topic(&apis, "waits");
    assert_eq!(produce(&apis, "waits", transactional(1, 0)), 0);
    // Data is there, but not below the LSO: a read_committed fetch waits for it.
    let Reply::Later(mut reply) = apis.handle(&context("rc", 7, 12), fetch("waits", 1, 5000))
    else {
        panic!("a read_committed fetch with nothing stable answered at once");
    };
    assert!(reply.try_recv().is_err(), "still waiting");
    marker(&apis, "waits", ControlType::Commit);
    let answer = partition_of(reply.try_recv().expect("the marker completed the fetch"));
    assert_eq!(answer.last_stable_offset, 2);
    assert_eq!(offsets(&answer), vec![0, 1]);
}
