//! Produce over the wire, on a manual clock: the minimum ISR in force on small topics, one
//! batch per partition, no auto-creation, acks=0 (no answer, and a closed connection after a
//! failed one), invalid acks, idempotent de-duplication, the log start offset of a refused
//! produce, response order behind a parked produce, and parked produces when their client
//! leaves or their topic is deleted.
//!
//! On a manual clock a parked request never completes by itself, so "answered at once" is
//! checked by reading with a generous real-time limit: the limit only turns a hang into a
//! failure, it never decides a pass.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{
    ApiVersionsRequest, InitProducerIdRequest, MetadataRequest, ProduceRequest,
};
use replog::test_util::BatchBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_works_on_topics_with_one_or_two_replicas() {
    // The broker's min.insync.replicas is 2 (Kafka's common setting); the minimum in force
    // is min(min.insync.replicas, replication factor).
    let (tb, mut conn) = broker_with_topic("rf1", 1, &[]).await;
    create(&mut conn, "rf2", 2, &[]).await;
    create(&mut conn, "rf2-min3", 2, &[("min.insync.replicas", "3")]).await;

    // One replica: the leader is the whole ISR, the HW moves on append, and acks=all is
    // answered at once. (Before: NOT_ENOUGH_REPLICAS, nothing appended.)
    conn.write_request(&produce("rf1", -1, 1000, batch(2, 10, None)), 9)
        .await
        .unwrap();
    let response = answered::<ProduceRequest>(&mut conn, 9).await;
    assert_eq!(partition_result(&response), (0, 0));
    assert_eq!(tb.high_watermark("rf1", 0), 2);

    // Two replicas, with min.insync.replicas 2 and 3: both wait for follower 2, then succeed.
    let mut follower = ManualFollower::connect(tb.addr, 2).await;
    for topic in ["rf2", "rf2-min3"] {
        conn.write_request(&produce(topic, -1, 1000, batch(1, 10, None)), 9)
            .await
            .unwrap();
        wait_until("the produce to be parked", || {
            tb.rm().produce_purgatory.delayed() == 1
        })
        .await;
        let data = follower.fetch(topic, 0, 0).await;
        assert!(data.records.is_some_and(|r| !r.is_empty()));
        follower.fetch(topic, 0, 1).await; // follower 2 now holds offset 0: HW 1
        let response = answered::<ProduceRequest>(&mut conn, 9).await;
        assert_eq!(partition_result(&response), (0, 0), "{topic}");
    }

    // And below the minimum in force it is refused, as in Kafka: follower 2 stops fetching
    // rf2 and leaves its ISR once it has not been caught up for replica.lag.time.max.ms
    // (30 s, checked every 15 s).
    conn.send(&produce("rf2", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    tb.rm().timer.advance_by(45_000);
    assert_eq!(tb.isr("rf2", 0), vec![1]);
    let response = conn
        .send(&produce("rf2", -1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, NOT_ENOUGH_REPLICAS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_takes_exactly_one_batch_per_partition_and_appends_nothing_else() {
    let (tb, mut conn) = broker_with_topic("one-batch", 1, &[]).await;
    let two_batches = Bytes::from([batch(1, 10, None), batch(2, 10, None)].concat());
    let response = conn
        .send(&produce("one-batch", 1, 1000, two_batches), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 0, "nothing appended");

    let whole = batch(1, 10, None);
    let cut = whole.slice(..whole.len() - 3);
    let response = conn
        .send(&produce("one-batch", 1, 1000, cut), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 0);

    // An idempotent retry beside a new batch: answering "duplicate" would acknowledge the
    // new batch without appending it. (Before: success, and the new batch was dropped.)
    let init = conn
        .send(
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
            4,
        )
        .await
        .unwrap();
    let (pid, epoch) = (init.producer_id.0, init.producer_epoch);
    let first = BatchBuilder::new(1).producer(pid, epoch, 0).bytes();
    let second = BatchBuilder::new(1).producer(pid, epoch, 1).bytes();
    let response = conn
        .send(&produce("one-batch", -1, 1000, first.clone()), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response), (0, 0));
    let retry_and_new = Bytes::from([first, second.clone()].concat());
    let response = conn
        .send(&produce("one-batch", -1, 1000, retry_and_new), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, INVALID_RECORD);
    assert_eq!(tb.log_end_offset("one-batch", 0), 1);
    // Sent alone, the new batch is appended where it belongs.
    let response = conn
        .send(&produce("one-batch", -1, 1000, second), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response), (0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_an_unknown_topic_is_refused_and_creates_nothing() {
    let tb = TestBroker::start_manual(|_| {}).await;
    let mut conn = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    let response = conn
        .send(&produce("nobody-made-me", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&response).0, UNKNOWN_TOPIC_OR_PARTITION);
    let metadata = conn
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await
        .unwrap();
    assert!(
        metadata.topics.is_empty(),
        "only Metadata auto-creates topics"
    );
    assert!(tb.rm().topic("nobody-made-me").is_none());
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
async fn a_failed_acks_zero_produce_closes_the_connection_after_earlier_responses() {
    let (tb, mut conn) = broker_with_topic("quiet", 1, &[]).await;
    // acks=0 that succeeds: no response, the connection stays.
    conn.write_request(&produce("quiet", 0, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    conn.send(&ApiVersionsRequest::default(), 3).await.unwrap();
    assert_eq!(tb.log_end_offset("quiet", 0), 1);

    // acks=0 that fails (unknown topic): the producer cannot be told, so the broker
    // closes the connection — after answering what came before.
    let before = conn
        .write_request(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap();
    conn.write_request(&produce("no-such-topic", 0, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    let _ = conn.write_request(&ApiVersionsRequest::default(), 3).await;
    let (id, _) = tokio::time::timeout(
        Duration::from_secs(10),
        conn.read_response::<ApiVersionsRequest>(3),
    )
    .await
    .expect("answered")
    .expect("the response owed before the failed produce");
    assert_eq!(id, before);
    let after = tokio::time::timeout(
        Duration::from_secs(10),
        conn.read_response::<ApiVersionsRequest>(3),
    )
    .await
    .expect("the broker closes the connection rather than leaving it open");
    assert!(
        after.is_err(),
        "nothing is answered after the failed acks=0 produce"
    );
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

/// Partition 0's (error, log start offset) in a Produce response.
fn error_and_log_start(r: &kafka_protocol::messages::ProduceResponse) -> (i16, i64) {
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.log_start_offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_produce_carries_the_log_start_offset_where_kafka_answers_it() {
    // Kafka 4.4 answers the partition's log start offset for what the log refuses (a
    // sequence gap, a fenced epoch, too small an ISR, a batch its validation rejects) and
    // -1 for what is refused before the log or as a bad batch (an unknown partition, two
    // batches, magic 1, too large, a corrupt CRC). (Before: -1 for every error.)
    let (tb, mut conn) = broker_with_topic(
        "lso",
        1,
        &[
            ("min.insync.replicas", "1"),
            ("retention.bytes", "4096"),
            ("max.message.bytes", "2000"),
        ],
    )
    .await;
    for _ in 0..20 {
        let r = conn
            .send(&produce("lso", 1, 1000, batch(1, 500, None)), 9)
            .await
            .unwrap();
        assert_eq!(partition_result(&r).0, 0);
    }
    let log_start = tb
        .rm()
        .partition("lso", 0)
        .unwrap()
        .lock()
        .log_start_offset();
    assert!(log_start > 0, "retention moved the log start");
    let send = |records: Bytes| produce("lso", 1, 1000, records);

    let (pid, epoch) = (4242, 3);
    let first = BatchBuilder::new(1).producer(pid, epoch, 0).bytes();
    let r = conn.send(&send(first), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (0, log_start));
    let gap = BatchBuilder::new(1).producer(pid, epoch, 5).bytes();
    let r = conn.send(&send(gap), 9).await.unwrap();
    assert_eq!(
        error_and_log_start(&r),
        (45, log_start),
        "OUT_OF_ORDER_SEQUENCE"
    );
    let fenced = BatchBuilder::new(1).producer(pid, epoch - 1, 1).bytes();
    let r = conn.send(&send(fenced), 9).await.unwrap();
    assert_eq!(
        error_and_log_start(&r),
        (47, log_start),
        "INVALID_PRODUCER_EPOCH"
    );

    let r = conn.send(&send(batch(1, 3000, None)), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (10, -1), "MESSAGE_TOO_LARGE");
    let mut corrupt = bytes::BytesMut::from(&batch(1, 10, None)[..]);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let r = conn.send(&send(corrupt.freeze()), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (2, -1), "CORRUPT_MESSAGE");
    let mut magic_one = bytes::BytesMut::from(&batch(1, 10, None)[..]);
    magic_one[16] = 1;
    let r = conn.send(&send(magic_one.freeze()), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (INVALID_RECORD, -1), "magic 1");
    let two = Bytes::from([batch(1, 10, None), batch(1, 10, None)].concat());
    let r = conn.send(&send(two), 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (INVALID_RECORD, -1), "two batches");
    let mut unknown = send(batch(1, 10, None));
    unknown.topic_data[0].partition_data[0].index = 7;
    let r = conn.send(&unknown, 9).await.unwrap();
    assert_eq!(error_and_log_start(&r), (UNKNOWN_TOPIC_OR_PARTITION, -1));

    // Too small an ISR: replica 2 never fetches, so it leaves the ISR once the leader has
    // written past it and replica.lag.time.max.ms (30 s, checked every 15 s) has passed.
    create(&mut conn, "lso-rf2", 2, &[]).await;
    conn.send(&produce("lso-rf2", 1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    tb.rm().timer.advance_by(45_000);
    assert_eq!(tb.isr("lso-rf2", 0), vec![1]);
    let r = conn
        .send(&produce("lso-rf2", -1, 1000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(error_and_log_start(&r), (NOT_ENOUGH_REPLICAS, 0));
}

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
        2,
        "only the periodic checks are left on the wheel: the ISR's and the transaction timeouts'"
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
async fn requests_on_a_partition_that_stops_being_led_here_are_answered_not_leader() {
    const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    let (tb, mut producer) = broker_with_topic("moved", 3, &[("min.insync.replicas", "2")]).await;
    // Parked: no follower fetches.
    producer
        .write_request(&produce("moved", -1, 30_000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    wait_until("the produce to park", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    let mut consumer = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    consumer
        .write_request(&long_poll("moved", -1, 1, 30_000), 12)
        .await
        .unwrap();
    wait_until("the fetch to park", || {
        tb.rm().fetch_purgatory.delayed() == 1
    })
    .await;

    // The controller moves leadership to broker 2: what waited here is answered at once,
    // and so is whatever comes next, so clients go to the new leader.
    let handle = tb.rm().partition("moved", 0).expect("partition");
    tb.rm()
        .make_follower(&handle, 2, 1)
        .expect("now a follower");
    let parked = answered::<ProduceRequest>(&mut producer, 9).await;
    assert_eq!(partition_result(&parked).0, NOT_LEADER_OR_FOLLOWER);
    let fetched = answered::<kafka_protocol::messages::FetchRequest>(&mut consumer, 12).await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        NOT_LEADER_OR_FOLLOWER
    );
    let again = producer
        .send(&produce("moved", 1, 30_000, batch(1, 10, None)), 9)
        .await
        .unwrap();
    assert_eq!(partition_result(&again), (NOT_LEADER_OR_FOLLOWER, -1));
    assert_eq!(
        handle.lock().log_end_offset(),
        1,
        "nothing appended after the move"
    );
}
