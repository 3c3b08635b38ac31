//! Fault rules over the wire, on a manual clock: what a client sees of each action.
//!
//! On a manual clock a held request never completes by itself, so "held" is checked in
//! the broker's own state (the FaultDelay purgatory, the request log) and "answered" by
//! reading with a generous real-time limit that only turns a hang into a failure. "Never
//! answered" is checked by the client half-closing its side: the broker then closes the
//! connection, and the client reads the end of the stream with no frame before it.

mod common;

use std::time::Duration;

use common::*;
use followersim::wire::{encode_request, KafkaConnection};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{FetchRequest, MetadataRequest, ProduceRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;

/// A Produce (acks=1) of one record to partition 0 of each topic.
fn produce_to(topics: &[&str]) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5_000)
        .with_topic_data(
            topics
                .iter()
                .map(|t| {
                    TopicProduceData::default()
                        .with_name(name(t))
                        .with_partition_data(vec![PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch(1, 10, None)))])
                })
                .collect(),
        )
}

fn errors(response: &kafka_protocol::messages::ProduceResponse) -> Vec<(String, i16)> {
    let mut errors: Vec<(String, i16)> = response
        .responses
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .map(move |p| (t.name.0.to_string(), p.error_code))
        })
        .collect();
    errors.sort();
    errors
}

/// Writes `frames`, half-closes, and returns every byte the broker sent before it closed.
async fn bytes_until_closed(addr: &str, frames: &[bytes::Bytes]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    for frame in frames {
        stream.write_all(frame).await.unwrap();
    }
    stream.shutdown().await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut got))
        .await
        .expect("the broker closes once the client has")
        .expect("read");
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_rule_fails_only_its_partitions_appends_nothing_there_and_counts_its_hits() {
    let (tb, mut conn) = broker_with_topic("hit", 1, &[]).await;
    create(&mut conn, "spared", 1, &[]).await;
    let id = tb
        .rm()
        .faults
        .add_json(
            r#"{"api": "Produce", "topic": "hit", "error": "NOT_LEADER_OR_FOLLOWER", "times": 2}"#,
        )
        .unwrap();

    for round in 0..2 {
        let response = conn.send(&produce_to(&["hit", "spared"]), 9).await.unwrap();
        assert_eq!(
            errors(&response),
            [("hit".into(), NOT_LEADER_OR_FOLLOWER), ("spared".into(), 0)],
            "round {round}"
        );
    }
    assert_eq!(
        tb.log_end_offset("hit", 0),
        0,
        "nothing appended where the error answered"
    );
    assert_eq!(tb.log_end_offset("spared", 0), 2, "the rest went through");

    // Spent after two: the third goes through everywhere.
    let response = conn.send(&produce_to(&["hit", "spared"]), 9).await.unwrap();
    assert_eq!(errors(&response), [("hit".into(), 0), ("spared".into(), 0)]);
    assert_eq!(tb.log_end_offset("hit", 0), 1);
    let listed = tb.rm().faults.list();
    assert_eq!(listed[0]["id"].as_u64(), Some(id));
    assert_eq!(listed[0]["hits"].as_u64(), Some(2));
    assert_eq!(listed[0]["matched"].as_u64(), Some(3));

    // The request log says which rule fired.
    let logged = tb
        .rm()
        .telemetry
        .recent_requests(0, 50, &Default::default());
    let faulted: Vec<_> = logged.iter().filter_map(|r| r.fault.as_ref()).collect();
    assert_eq!(faulted.len(), 2, "{logged:#?}");
    assert_eq!(faulted[0].rule, id);
    assert_eq!(faulted[0].action, "error NOT_LEADER_OR_FOLLOWER (6)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delay_holds_one_clients_request_on_the_wheel_and_leaves_another_alone() {
    let (tb, mut conn) = broker_with_topic("slow", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Metadata", "client_id": "slowpoke", "delay_ms": 800}"#)
        .unwrap();
    let mut slow = KafkaConnection::connect(&tb.bootstrap())
        .await
        .unwrap()
        .with_client_id("slowpoke");
    let asked = slow
        .write_request(&MetadataRequest::default(), 9)
        .await
        .unwrap();
    let delays = &tb.rm().faults.delays;
    wait_until("the request is held", || delays.delayed() == 1).await;
    let state = purgatory::admin::state_json(
        tb.rm(),
        tb.broker.group_coordinator(),
        &purgatory::followers::EmbeddedFollowers::none(),
        None,
    );
    let pending = state["purgatories"]["fault_delay"].to_string();
    assert!(pending.contains("held by fault rule 1"), "{pending}");

    // Another client is answered at once, held request or not.
    let other = conn.send(&MetadataRequest::default(), 9).await.unwrap();
    assert!(other.brokers.len() == 1);

    tb.rm().timer.advance_by(799);
    assert_eq!(delays.delayed(), 1, "799 ms of 800: still held");
    tb.rm().timer.advance_by(1);
    let (correlation, _) = tokio::time::timeout(
        Duration::from_secs(10),
        slow.read_response::<MetadataRequest>(9),
    )
    .await
    .expect("answered once the delay is over")
    .unwrap();
    assert_eq!(correlation, asked);
    assert_eq!(delays.delayed(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_throttle_is_carried_in_the_answer_and_mutes_the_connection_for_that_long() {
    let (tb, mut conn) = broker_with_topic("quota", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Produce", "throttle_ms": 250, "times": 1}"#)
        .unwrap();
    let response = conn.send(&produce_to(&["quota"]), 9).await.unwrap();
    assert_eq!(response.throttle_time_ms, 250);
    assert_eq!(
        errors(&response),
        [("quota".into(), 0)],
        "a throttle is no error"
    );

    // The next request waits until the throttle is over.
    conn.write_request(&MetadataRequest::default(), 9)
        .await
        .unwrap();
    let delays = &tb.rm().faults.delays;
    wait_until("the connection is muted", || delays.delayed() == 1).await;
    tb.rm().timer.advance_by(250);
    answered::<MetadataRequest>(&mut conn, 9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_closes_the_connection_before_answering_and_the_next_one_works() {
    let (tb, _conn) = broker_with_topic("cut", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Metadata", "action": "disconnect", "times": 1}"#)
        .unwrap();
    let frame = encode_request(&MetadataRequest::default(), 9, 1, Some("c")).unwrap();
    let got = bytes_until_closed(&tb.bootstrap(), &[frame]).await;
    assert!(got.is_empty(), "no answer before the close: {got:?}");
    let mut again = KafkaConnection::connect(&tb.bootstrap()).await.unwrap();
    answered_now(&mut again).await;
}

async fn answered_now(conn: &mut KafkaConnection) {
    conn.write_request(&MetadataRequest::default(), 9)
        .await
        .unwrap();
    answered::<MetadataRequest>(conn, 9).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackhole_answers_nothing_on_that_connection_from_then_on() {
    let (tb, _conn) = broker_with_topic("void", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Produce", "action": "blackhole", "times": 1}"#)
        .unwrap();
    let produce = encode_request(&produce_to(&["void"]), 9, 1, Some("c")).unwrap();
    let metadata = encode_request(&MetadataRequest::default(), 9, 2, Some("c")).unwrap();
    let got = bytes_until_closed(&tb.bootstrap(), &[produce, metadata]).await;
    assert!(got.is_empty(), "nothing answered: {got:?}");
    assert_eq!(
        tb.log_end_offset("void", 0),
        0,
        "a blackholed produce is not appended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_response_is_appended_but_never_answered() {
    let (tb, _conn) = broker_with_topic("lost", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Produce", "action": "drop_response", "times": 1}"#)
        .unwrap();
    let produce = encode_request(&produce_to(&["lost"]), 9, 1, Some("c")).unwrap();
    let got = bytes_until_closed(&tb.bootstrap(), &[produce]).await;
    assert!(got.is_empty(), "no answer: {got:?}");
    assert_eq!(
        tb.log_end_offset("lost", 0),
        1,
        "but the record is in the log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_on_an_acks0_produce_closes_the_connection_as_kafka_does() {
    let (tb, _conn) = broker_with_topic("quiet", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Produce", "topic": "quiet", "error": 6}"#)
        .unwrap();
    let produce = encode_request(&produce_to(&["quiet"]).with_acks(0), 9, 1, Some("c")).unwrap();
    let metadata = encode_request(&MetadataRequest::default(), 9, 2, Some("c")).unwrap();
    let got = bytes_until_closed(&tb.bootstrap(), &[produce, metadata]).await;
    assert!(got.is_empty(), "closed before the metadata answer: {got:?}");
    assert_eq!(tb.log_end_offset("quiet", 0), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_error_answers_at_once_even_with_a_long_poll() {
    let (tb, mut conn) = broker_with_topic("poll", 1, &[]).await;
    tb.rm()
        .faults
        .add_json(r#"{"api": "Fetch", "topic": "poll", "error": "NOT_LEADER_OR_FOLLOWER"}"#)
        .unwrap();
    conn.write_request(&long_poll("poll", -1, 0, 30_000), 12)
        .await
        .unwrap();
    let response = answered::<FetchRequest>(&mut conn, 12).await;
    let p = &response.responses[0].partitions[0];
    assert_eq!(
        (p.error_code, p.high_watermark),
        (NOT_LEADER_OR_FOLLOWER, -1)
    );
}
