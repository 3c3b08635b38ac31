//! Protocol-level behaviour checked with hand-built requests: response ordering on a
//! pipelined connection, acks=0, a client that leaves while parked, idempotent
//! de-duplication, retention and the broker-wide memory cap.

mod common;

use common::{
    batch, broker_with_topic, create, long_poll, name, partition_result, produce, wait_until,
    ManualFollower, TestBroker,
};
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, FetchRequest, InitProducerIdRequest,
    ListOffsetsRequest, ProduceRequest,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_produce_holds_back_later_responses_on_its_connection() {
    let (tb, mut conn) = broker_with_topic("order", 3, &[]).await;
    let produce_id = conn
        .write_request(&produce("order", -1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    let versions_id = conn
        .write_request(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    wait_until("the produce to be parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    // ApiVersions was answered by its handler at once, but its response must wait its turn.
    tb.rm().timer.advance_by(1000);
    let (id, first) = conn.read_response::<ProduceRequest>(9).await.unwrap();
    assert_eq!(id, produce_id, "the parked produce's response comes first");
    assert_eq!(partition_result(&first).0, 7, "REQUEST_TIMED_OUT");
    let (id, second) = conn.read_response::<ApiVersionsRequest>(3).await.unwrap();
    assert_eq!(id, versions_id);
    assert_eq!(second.error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_appends_and_sends_no_response() {
    let (tb, mut conn) = broker_with_topic("fire-and-forget", 3, &[]).await;
    conn.write_request(&produce("fire-and-forget", 0, 1000, batch(3, 10, None)), 9)
        .await
        .unwrap();
    let versions_id = conn
        .write_request(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    let (id, _) = conn.read_response::<ApiVersionsRequest>(3).await.unwrap();
    assert_eq!(
        id, versions_id,
        "the next response on the wire is ApiVersions'"
    );
    assert_eq!(tb.log_end_offset("fire-and-forget", 0), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_acks_is_refused_with_invalid_required_acks() {
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let response = conn
        .send(&produce("bad-acks", 2, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, 21, "INVALID_REQUIRED_ACKS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_while_parked_leaks_nothing() {
    let (tb, conn) = broker_with_topic("gone", 3, &[]).await;
    // Three producers, one connection each: a connection's next request is not read
    // while one is parked, as in Kafka.
    let mut producers = vec![conn];
    for _ in 1..3 {
        producers.push(KafkaConnection::connect(&tb.bootstrap()).await.unwrap());
    }
    for conn in &mut producers {
        conn.write_request(&produce("gone", -1, 5000, batch(1, 10, None)), 9)
            .await
            .unwrap();
    }
    wait_until("three produces parked", || {
        tb.rm().produce_purgatory.delayed() == 3
    })
    .await;
    assert_eq!(tb.rm().produce_purgatory.watched(), 3);
    for conn in producers {
        conn.close().await;
    }
    // The operations still expire on schedule; their responses go nowhere.
    tb.rm().timer.advance_by(5000);
    assert_eq!(tb.rm().produce_purgatory.delayed(), 0);
    assert_eq!(tb.rm().produce_purgatory.expired(), 3);
    assert_eq!(
        tb.rm().timer.pending(),
        1,
        "only the periodic ISR check is left on the wheel"
    );
    // Like Kafka, completed operations leave watcher lists lazily: the next check on the
    // key (or the periodic purge) drops them, and the key with them.
    let tp = purgatory::partition::TopicPartition::new("gone", 0);
    assert_eq!(tb.rm().produce_purgatory.check_and_complete(&tp), 0);
    assert_eq!(tb.rm().produce_purgatory.watched(), 0);
    assert!(tb.rm().produce_purgatory.snapshot(10).keys.is_empty());
    // The records were appended and stay: followers can still replicate them.
    assert_eq!(tb.log_end_offset("gone", 0), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_retries_are_deduplicated_and_gaps_refused() {
    let (tb, mut conn) = broker_with_topic("idem-wire", 1, &[("min.insync.replicas", "1")]).await;
    let pid = conn
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60000),
            4,
        )
        .await
        .unwrap();
    assert_eq!(pid.error_code, 0);
    let producer = (pid.producer_id.0, pid.producer_epoch, 0);

    let first = conn
        .send(
            &produce("idem-wire", 1, 1000, batch(2, 10, Some(producer))),
            9,
        )
        .await
        .unwrap();
    assert_eq!(partition_result(&first), (0, 0));
    // The same batch again (a retry after a lost response): same offset, not appended.
    let retry = conn
        .send(
            &produce("idem-wire", 1, 1000, batch(2, 10, Some(producer))),
            9,
        )
        .await
        .unwrap();
    assert_eq!(partition_result(&retry), (0, 0));
    assert_eq!(tb.log_end_offset("idem-wire", 0), 2);
    // Sequence 5 after 0..=1 leaves a gap.
    let gap = (producer.0, producer.1, 5);
    let response = conn
        .send(&produce("idem-wire", 1, 1000, batch(1, 10, Some(gap))), 9)
        .await
        .unwrap();
    assert_eq!(
        partition_result(&response).0,
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    let next = (producer.0, producer.1, 2);
    let response = conn
        .send(&produce("idem-wire", 1, 1000, batch(1, 10, Some(next))), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response), (0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_bytes_bounds_a_partition_and_old_offsets_go_out_of_range() {
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    create(
        &mut conn,
        "retained",
        1,
        &[("min.insync.replicas", "1"), ("retention.bytes", "4096")],
    )
    .await;
    for _ in 0..100 {
        let r = conn
            .send(&produce("retained", 1, 1000, batch(1, 500, None)), 9)
            .await
            .unwrap();
        assert_eq!(partition_result(&r).0, 0);
    }
    let (size, log_start, hw) = {
        let log = tb.rm().partition("retained", 0).unwrap();
        let log = log.lock();
        (
            log.size_bytes(),
            log.log_start_offset(),
            log.high_watermark(),
        )
    };
    assert!(size <= 4096, "partition holds {size} bytes");
    assert!(log_start > 0 && hw == 100);
    let fetch = FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name("retained"))
            .with_partitions(vec![FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response = conn.send(&fetch, 12).await.unwrap();
    let data = &response.responses[0].partitions[0];
    assert_eq!(
        data.error_code, 1,
        "OFFSET_OUT_OF_RANGE below the log start"
    );
    // As in Kafka, the error answer carries no offsets; the consumer resets through
    // ListOffsets, which finds the new log start.
    assert_eq!(data.log_start_offset, -1);
    let earliest = ListOffsetsRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("retained"))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-2)])]);
    let response = conn.send(&earliest, 7).await.unwrap();
    assert_eq!(response.topics[0].partitions[0].offset, log_start);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_cap_evicts_replicated_data_and_refuses_what_it_cannot_hold() {
    let cap = 64 * 1024;
    let tb = TestBroker::start_manual(|c| c.log_memory_max_bytes = cap).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    create(&mut conn, "capped", 3, &[]).await;
    let mut f2 = ManualFollower::connect(tb.addr, 2).await;
    let mut f3 = ManualFollower::connect(tb.addr, 3).await;
    // Replicated data (below the HW) may be evicted to stay under the cap.
    for i in 0..300i64 {
        let r = conn
            .send(&produce("capped", 1, 1000, batch(1, 1000, None)), 9)
            .await
            .unwrap();
        assert_eq!(partition_result(&r), (0, i));
        f2.fetch("capped", 0, i + 1).await;
        f3.fetch("capped", 0, i + 1).await;
        assert!(
            tb.rm().log_bytes() <= cap,
            "{} bytes held",
            tb.rm().log_bytes()
        );
    }
    assert_eq!(tb.high_watermark("capped", 0), 300);
    // Unreplicated data is never evicted: with the followers silent, the cap is reached
    // and produces are refused (KAFKA_STORAGE_ERROR) instead of dropping anything.
    let mut refused = false;
    for _ in 0..200 {
        let r = conn
            .send(&produce("capped", 1, 1000, batch(1, 1000, None)), 9)
            .await
            .unwrap();
        if partition_result(&r).0 == 56 {
            refused = true;
            break;
        }
    }
    assert!(
        refused,
        "the cap must refuse unreplicated data rather than evict it"
    );
    assert!(tb.rm().log_bytes() <= cap);
    let log_end = tb.log_end_offset("capped", 0);
    let log_start = tb
        .rm()
        .partition("capped", 0)
        .unwrap()
        .lock()
        .log_start_offset();
    assert!(
        log_start <= 300,
        "nothing above the HW was evicted (log start {log_start})"
    );
    assert!(log_end > 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_topic_completes_its_parked_produces_with_unknown_topic() {
    let (tb, mut conn) = broker_with_topic("doomed", 3, &[]).await;
    let produce_id = conn
        .write_request(&produce("doomed", -1, 60_000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    wait_until("the produce to be parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    let mut admin = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let deleted = admin
        .send(
            &kafka_protocol::messages::DeleteTopicsRequest::default()
                .with_topic_names(vec![name("doomed")]),
            4,
        )
        .await
        .unwrap();
    assert_eq!(deleted.responses[0].error_code, 0);
    let (id, response) = conn.read_response::<ProduceRequest>(9).await.unwrap();
    assert_eq!(id, produce_id);
    assert_eq!(
        partition_result(&response).0,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION, without waiting for the timeout"
    );
    assert_eq!(tb.rm().produce_purgatory.delayed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_creation_is_capped_by_max_partitions() {
    let tb = TestBroker::start_manual(|c| c.max_partitions = 10).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("huge"))
        .with_num_partitions(11)
        .with_replication_factor(3)]);
    let response = conn.send(&request, 5).await.unwrap();
    assert_eq!(response.topics[0].error_code, 44, "POLICY_VIOLATION");
    assert!(tb.rm().topics().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_consumer_fetch_completes_on_hw_advance_not_on_append() {
    let (tb, mut conn) = broker_with_topic("longpoll", 3, &[]).await;
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let fetch_id = consumer
        .write_request(&long_poll("longpoll", -1, 0, 10_000), 12)
        .await
        .unwrap();
    wait_until("the consumer fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;

    // acks=1: appended (LEO 1) but not replicated (HW 0). A consumer may not see it yet.
    let r = conn
        .send(&produce("longpoll", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&r), (0, 0));
    assert_eq!(
        tb.rm().fetch_purgatory.delayed(),
        1,
        "an append alone must not wake a consumer fetch"
    );

    // Followers replicate it: the HW moves to 1 and the parked consumer fetch completes.
    let mut f2 = ManualFollower::connect(tb.addr, 2).await;
    let mut f3 = ManualFollower::connect(tb.addr, 3).await;
    f2.fetch("longpoll", 0, 1).await;
    f3.fetch("longpoll", 0, 1).await;
    let (id, response) = consumer.read_response::<FetchRequest>(12).await.unwrap();
    assert_eq!(id, fetch_id);
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.high_watermark, 1);
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "the record, now below the HW"
    );
    assert_eq!(tb.rm().fetch_purgatory.delayed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_follower_fetch_completes_on_append_and_an_idle_one_on_timeout() {
    let (tb, mut conn) = broker_with_topic("replicate", 3, &[]).await;
    let mut follower = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    follower
        .write_request(&long_poll("replicate", 2, 0, 500), 12)
        .await
        .unwrap();
    wait_until("the follower fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;
    conn.send(&produce("replicate", 1, 1000, batch(2, 10, None)), 9)
        .await
        .unwrap();
    let (_, response) = follower.read_response::<FetchRequest>(12).await.unwrap();
    let data = &response.responses[0].partitions[0];
    assert!(
        data.records.as_ref().is_some_and(|r| !r.is_empty()),
        "a follower reads up to the log end"
    );
    assert_eq!(data.high_watermark, 0, "not replicated yet");

    // Nothing new: the next long poll waits max_wait_ms on the broker clock, then answers empty.
    follower
        .write_request(&long_poll("replicate", 2, 2, 500), 12)
        .await
        .unwrap();
    wait_until("the follower fetch to be parked", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;
    tb.rm().timer.advance_by(499);
    assert_eq!(tb.rm().fetch_purgatory.delayed(), 1);
    tb.rm().timer.advance_by(1);
    let (_, response) = follower.read_response::<FetchRequest>(12).await.unwrap();
    assert!(response.responses[0].partitions[0]
        .records
        .as_ref()
        .is_none_or(|r| r.is_empty()));
    assert_eq!(tb.rm().fetch_purgatory.expired(), 1);
}
