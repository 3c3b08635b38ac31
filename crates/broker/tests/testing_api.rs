//! `purgatory::testing` as a Rust test uses it: a cluster on port 0 inside the test, a real
//! client (librdkafka, through rdkafka) pointed at it, fault rules added from the test, and
//! the request log read back.

mod common;

use common::{create_topic, producer, spawn_send};
use purgatory::testing::TestKafka;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_in_the_test_with_a_rule_the_client_retries_through() {
    let kafka = TestKafka::builder().brokers(3).start().await.unwrap();
    let listeners = kafka.listeners();
    assert_eq!(
        listeners.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(
        listeners.iter().all(|(_, addr)| addr.port() != 0),
        "bound ports: {listeners:?}"
    );
    create_topic(&kafka.bootstrap(), "in-test", 1, 3).await;

    let rule = kafka
        .add_fault(r#"{"api": "Produce", "topic": "in-test", "error": "NOT_LEADER_OR_FOLLOWER", "times": 2}"#)
        .unwrap();
    let client = producer(
        &kafka.bootstrap(),
        &[("enable.idempotence", "true"), ("retry.backoff.ms", "20")],
    );
    let (partition, offset) = spawn_send(&client, "in-test", "once")
        .await
        .unwrap()
        .expect("delivered after two refusals");
    assert_eq!((partition, offset), (0, 0), "appended once, at the start");
    assert_eq!(kafka.fault_hits(rule), Some(2));

    // The partition's leader logged the produces the rule fired on.
    let refused: usize = [1, 2, 3]
        .iter()
        .map(|&broker| {
            kafka
                .requests(broker, 200)
                .into_iter()
                .filter(|r| {
                    r.request == "Produce" && r.fault.as_ref().is_some_and(|f| f.rule == rule)
                })
                .count()
        })
        .sum();
    assert_eq!(refused, 2);
    kafka.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_alone_has_replication_factor_one_and_rules_by_api_key() {
    let kafka = TestKafka::start().await.unwrap();
    assert_eq!(kafka.listeners().len(), 1);
    assert!(kafka
        .add_fault(r#"{"api": "Produce", "error": 6, "times": -1}"#)
        .is_err());
    let rule = kafka
        .add_fault(r#"{"api": 0, "error": "NOT_ENOUGH_REPLICAS", "times": 1}"#)
        .unwrap();
    let client = producer(&kafka.bootstrap(), &[("retry.backoff.ms", "20")]);
    spawn_send(&client, "alone", "x")
        .await
        .unwrap()
        .expect("retried past NOT_ENOUGH_REPLICAS");
    assert_eq!(kafka.fault_hits(rule), Some(1));
    let rm = kafka.replica_manager(1).unwrap();
    assert_eq!(rm.partition("alone", 0).unwrap().lock().isr(), [1]);
    kafka.clear_faults();
    assert!(kafka.faults().list().is_empty());
    kafka.shutdown().await;
}
