//! What bounds a log: `retention.bytes` per partition (and old offsets going out of range),
//! and the broker-wide memory cap, which evicts replicated data and refuses what it cannot
//! hold.

mod common;

use common::*;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{FetchRequest, ListOffsetsRequest};

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
