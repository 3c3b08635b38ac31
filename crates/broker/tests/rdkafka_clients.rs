//! Real-client tests with librdkafka (through the `rdkafka` crate).
//!
//! Each test starts a broker on an ephemeral port. Where time matters the broker runs on a
//! manual clock, and followers are driven by hand with Fetch requests carrying their replica
//! ids, so the test decides exactly when the high watermark moves.

mod common;

use std::time::Duration;

use common::{create_topic, producer, spawn_send, wait_until, ManualFollower, TestBroker};
use followersim::{Follower, FollowerConfig, FollowerHandle};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// Reads every message of `topic`/0 from the beginning up to `count` messages.
fn consume_all(bootstrap: &str, topic: &str, count: usize) -> Vec<(i64, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.auto.commit", "false")
        .set("group.id", "purgatory-readback")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while out.len() < count && std::time::Instant::now() < deadline {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let payload =
                String::from_utf8(m.payload().unwrap_or_default().to_vec()).expect("utf8");
            out.push((m.offset(), payload));
        }
    }
    out
}

fn embedded_followers(bootstrap: &str) -> Vec<FollowerHandle> {
    [2, 3]
        .into_iter()
        .map(|id| {
            Follower::spawn(FollowerConfig {
                replica_id: id,
                bootstrap: bootstrap.to_string(),
                fetch_max_wait_ms: 100,
                metadata_refresh_ms: 100,
                ..FollowerConfig::default()
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_completes_only_after_both_followers_fetch_past_it() {
    let tb = TestBroker::start_manual(|_| {}).await;
    create_topic(&tb.bootstrap(), "held", 1, 3).await;
    let p = producer(&tb.bootstrap(), &[]);
    let mut f2 = ManualFollower::connect(tb.addr, 2).await;
    let mut f3 = ManualFollower::connect(tb.addr, 3).await;

    let delivery = spawn_send(&p, "held", "hello");
    wait_until("the produce is parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;

    // Both followers fetch the record: their LEO is still 0 until they ask for offset 1.
    let data = f2.fetch("held", 0, 0).await;
    assert!(
        data.records.map(|r| r.len()).unwrap_or(0) > 0,
        "follower 2 receives the batch"
    );
    f3.fetch("held", 0, 0).await;
    assert_eq!(tb.high_watermark("held", 0), 0);
    assert_eq!(tb.rm().produce_purgatory.delayed(), 1, "still parked");

    // One follower past it is not enough: the HW is the minimum LEO over the ISR.
    f2.fetch("held", 0, 1).await;
    assert_eq!(tb.high_watermark("held", 0), 0);
    assert_eq!(
        tb.rm().produce_purgatory.delayed(),
        1,
        "still parked with one follower behind"
    );
    assert!(
        !delivery.is_finished(),
        "delivery must wait for the second follower"
    );

    // The second follower's fetch moves the HW to 1 and completes the DelayedProduce.
    f3.fetch("held", 0, 1).await;
    assert_eq!(tb.high_watermark("held", 0), 1);
    let (partition, offset) = delivery.await.expect("task").expect("delivered");
    assert_eq!((partition, offset), (0, 0));
    assert_eq!(tb.rm().produce_purgatory.delayed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_followers_make_acks_all_time_out_with_request_timed_out() {
    let tb = TestBroker::start_manual(|c| c.replica_lag_time_max_ms = 600_000).await;
    create_topic(&tb.bootstrap(), "silent", 1, 3).await;
    let p = producer(
        &tb.bootstrap(),
        &[("request.timeout.ms", "5000"), ("retries", "0")],
    );

    let delivery = spawn_send(&p, "silent", "nobody replicates me");
    wait_until("the produce is parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    // Just short of the timeout nothing happens; at the timeout the wheel fires it.
    tb.rm().timer.advance_by(4_999);
    assert_eq!(tb.rm().produce_purgatory.delayed(), 1);
    tb.rm().timer.advance_by(1);
    let err = delivery.await.expect("task").expect_err("delivery fails");
    assert_eq!(
        err,
        KafkaError::MessageProduction(RDKafkaErrorCode::RequestTimedOut)
    );
    assert_eq!(tb.rm().produce_purgatory.expired(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_is_refused_with_not_enough_replicas_once_the_isr_shrank() {
    let tb = TestBroker::start_manual(|c| c.replica_lag_time_max_ms = 10_000).await;
    create_topic(&tb.bootstrap(), "shrunk", 1, 3).await;
    // A follower whose LEO equals the leader's is caught up however long it is silent, so
    // give the leader a record the followers never fetch (acks=1 does not wait for them).
    let p1 = producer(&tb.bootstrap(), &[("acks", "1")]);
    spawn_send(&p1, "shrunk", "leader only")
        .await
        .expect("task")
        .expect("acks=1 delivered");
    assert_eq!(tb.isr("shrunk", 0), vec![1, 2, 3]);
    // The ISR check runs every lag/2 = 5 s; followers last caught up at 0, so after 10 s
    // they are no longer caught up and the check at 15 s removes them.
    tb.rm().timer.advance_to(10_000);
    assert_eq!(
        tb.isr("shrunk", 0),
        vec![1, 2, 3],
        "within replica.lag.time.max.ms"
    );
    tb.rm().timer.advance_to(15_000);
    assert_eq!(tb.isr("shrunk", 0), vec![1]);

    let p = producer(&tb.bootstrap(), &[("retries", "0")]);
    let err = spawn_send(&p, "shrunk", "refused")
        .await
        .expect("task")
        .expect_err("refused");
    assert_eq!(
        err,
        KafkaError::MessageProduction(RDKafkaErrorCode::NotEnoughReplicas)
    );
    let log_end = tb.log_end_offset("shrunk", 0);
    assert_eq!(log_end, 1, "a refused acks=all produce appends nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_reads_back_every_acknowledged_message_in_order() {
    let tb = TestBroker::start(|_| {}).await;
    let followers = embedded_followers(&tb.bootstrap());
    create_topic(&tb.bootstrap(), "ordered", 1, 3).await;
    let p = producer(&tb.bootstrap(), &[("linger.ms", "2")]);
    let sends: Vec<_> = (0..200)
        .map(|i| spawn_send(&p, "ordered", &format!("m{i:03}")))
        .collect();
    let mut acked = Vec::new();
    for (i, s) in sends.into_iter().enumerate() {
        let (_, offset) = s.await.expect("task").expect("acknowledged");
        acked.push((offset, format!("m{i:03}")));
    }
    let read = consume_all(&tb.bootstrap(), "ordered", acked.len());
    acked.sort();
    assert_eq!(
        read, acked,
        "every acknowledged message, at its acknowledged offset, in order"
    );
    for f in followers {
        f.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_writes_each_message_once() {
    let tb = TestBroker::start(|_| {}).await;
    let followers = embedded_followers(&tb.bootstrap());
    create_topic(&tb.bootstrap(), "idem", 1, 3).await;
    let p = producer(
        &tb.bootstrap(),
        &[("enable.idempotence", "true"), ("linger.ms", "1")],
    );
    let sends: Vec<_> = (0..100)
        .map(|i| spawn_send(&p, "idem", &format!("i{i}")))
        .collect();
    for s in sends {
        s.await.expect("task").expect("acknowledged");
    }
    let read = consume_all(&tb.bootstrap(), "idem", 100);
    let payloads: Vec<String> = read.iter().map(|(_, p)| p.clone()).collect();
    let expected: Vec<String> = (0..100).map(|i| format!("i{i}")).collect();
    assert_eq!(payloads, expected);
    let log_end = tb.log_end_offset("idem", 0);
    assert_eq!(log_end, 100, "no record written twice");
    for f in followers {
        f.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_batches_round_trip() {
    let tb = TestBroker::start(|_| {}).await;
    let followers = embedded_followers(&tb.bootstrap());
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("codec-{codec}");
        create_topic(&tb.bootstrap(), &topic, 1, 3).await;
        let p = producer(
            &tb.bootstrap(),
            &[("compression.type", codec), ("linger.ms", "5")],
        );
        let payloads: Vec<String> = (0..50)
            .map(|i| format!("{codec} payload {i} {}", "x".repeat(i * 7)))
            .collect();
        let sends: Vec<_> = payloads.iter().map(|m| spawn_send(&p, &topic, m)).collect();
        for s in sends {
            s.await.expect("task").expect("acknowledged");
        }
        let read: Vec<String> = consume_all(&tb.bootstrap(), &topic, payloads.len())
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        assert_eq!(read, payloads, "{codec} round trip");
    }
    for f in followers {
        f.shutdown().await;
    }
}

/// Deletes `topic` with librdkafka's admin client.
async fn delete_topic(bootstrap: &str, topic: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("admin client");
    for result in admin
        .delete_topics(&[topic], &AdminOptions::new())
        .await
        .expect("DeleteTopics answered")
    {
        result.expect("topic deleted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_topic_answers_its_parked_produce_at_once_and_the_retry_waits_on_the_topic_the_client_recreates(
) {
    // An issue report: "DeleteTopics while an acks=all produce is parked on the topic ended
    // with REQUEST_TIMED_OUT at the produce's own timeout". Measured with librdkafka, on
    // this broker and on Kafka 4.4 alike: the parked produce is answered
    // UNKNOWN_TOPIC_OR_PARTITION as soon as the topic is deleted; the client refreshes its
    // metadata, which (auto-creation on) creates the topic again, and retries there, where
    // the stopped followers hold the retry until its timeout. The REQUEST_TIMED_OUT is
    // the retry's, on a topic that is not the deleted one.
    let tb = TestBroker::start_manual(|_| {}).await;
    let bootstrap = tb.bootstrap();
    // No follower fetches, as if both were stopped: an acks=all produce stays parked.
    create_topic(&bootstrap, "doomed", 1, 3).await;
    let old_id = tb.rm().topic("doomed").expect("created").id;
    let p = producer(&bootstrap, &[]);
    let delivery = spawn_send(&p, "doomed", "parked");
    wait_until("the produce is parked", || {
        tb.rm().produce_purgatory.delayed() == 1
    })
    .await;
    let rm = tb.rm();
    assert_eq!(rm.produce_purgatory.completed(), 0);

    delete_topic(&bootstrap, "doomed").await;
    // The broker's clock has not moved, so nothing could expire: the parked produce was
    // completed by the delete.
    wait_until("the parked produce is completed", || {
        rm.produce_purgatory.completed() == 1
    })
    .await;
    assert_eq!(rm.produce_purgatory.expired(), 0);
    // The client's Metadata refresh creates the topic again, and its retry waits there.
    wait_until("the retry is parked on the re-created topic", || {
        rm.topic("doomed").is_some_and(|t| t.id != old_id)
            && rm.produce_purgatory.delayed() == 1
            && tb.log_end_offset("doomed", 0) == 1
    })
    .await;
    // Its own timeout (librdkafka's request.timeout.ms, 30 s) gives REQUEST_TIMED_OUT.
    tb.rm().timer.advance_by(30_000);
    assert_eq!(rm.produce_purgatory.expired(), 1);
    drop(delivery);
}
