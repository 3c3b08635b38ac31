//! `POST /api/send`: the page's "send" control. It produces one record over a real Kafka
//! connection to this broker's own listener, as any client would, so the page alone can
//! show a `DelayedProduce` from creation to completion or expiry.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::{authorize, error, AdminState};

/// What `POST /api/send` produces.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendRequest {
    topic: String,
    #[serde(default)]
    partition: i32,
    #[serde(default = "default_acks")]
    acks: i16,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default = "default_timeout")]
    timeout_ms: i32,
    #[serde(default)]
    client_id: Option<String>,
}

fn default_acks() -> i16 {
    -1
}

fn default_timeout() -> i32 {
    30_000
}

/// Client id of the page's test producer.
const SEND_CLIENT_ID: &str = "purgatory-view";

/// The longest `timeout_ms` a produce sent from the page may wait: one hour.
const MAX_SEND_TIMEOUT_MS: i32 = 3_600_000;

/// `POST /api/send` with a JSON body `{"topic": "demo", "acks": -1, "value": "hi",
/// "partition": 0, "key": null, "timeout_ms": 30000, "client_id": "purgatory-view"}`
/// (only `topic` is required): connects to the broker's own Kafka listener like any
/// client, sends Metadata (which creates the topic if it does not exist and
/// auto-creation is on) and then one Produce v9 with one record, and answers at once
/// with the produce's correlation id; the produce's answer arrives on that connection
/// when its `DelayedProduce` completes or expires, and shows in the request log.
pub(super) async fn post_send(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let send: SendRequest = match serde_json::from_str(&body) {
        Ok(send) => send,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad body: {e}")),
    };
    if !matches!(send.acks, -1..=1) {
        return error(StatusCode::BAD_REQUEST, "acks must be -1 (all), 0 or 1");
    }
    if send.topic.is_empty() {
        return error(StatusCode::BAD_REQUEST, "topic must not be empty");
    }
    if !(0..=MAX_SEND_TIMEOUT_MS).contains(&send.timeout_ms) {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "timeout_ms is {}: it takes 0 to {MAX_SEND_TIMEOUT_MS} (one hour)",
                send.timeout_ms
            ),
        );
    }
    if send.partition < 0 {
        return error(
            StatusCode::BAD_REQUEST,
            format!("partition is {}: it takes 0 or more", send.partition),
        );
    }
    let Some(port) = s.rm.bound_port() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the Kafka listener is not bound yet",
        );
    };
    match send_one(port, send).await {
        Ok(sent) => Json(sent).into_response(),
        Err(e) => error(StatusCode::BAD_GATEWAY, format!("{e:#}")),
    }
}

async fn send_one(port: i32, send: SendRequest) -> anyhow::Result<Value> {
    use anyhow::Context;
    let client_id = send
        .client_id
        .clone()
        .unwrap_or_else(|| SEND_CLIENT_ID.to_string());
    // Loopback reaches the listener whatever address it is bound to, as the followers do.
    let mut conn = followersim::KafkaConnection::connect(&format!("127.0.0.1:{port}"))
        .await?
        .with_client_id(client_id.clone());
    let topic = TopicName(StrBytes::from_string(send.topic.clone()));
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic.clone()))
        ]))
        .with_allow_auto_topic_creation(true);
    let answer = conn.send(&metadata, 12).await.context("Metadata")?;
    // A topic Metadata could not create (an illegal name, auto-creation off) is still
    // produced to, as a client may: the broker's answer to that is worth seeing too.
    let metadata_error = answer
        .topics
        .first()
        .filter(|t| t.error_code != 0)
        .map(|t| crate::telemetry::error_name(t.error_code));
    let value = send
        .value
        .unwrap_or_else(|| "sent from the live view".to_string());
    let batch = crate::record_batch::encode(
        [(send.key.map(Bytes::from), Some(Bytes::from(value)))],
        crate::record_batch::wall_clock_ms(),
    )?;
    let produce = ProduceRequest::default()
        .with_acks(send.acks)
        .with_timeout_ms(send.timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(send.partition)
                .with_records(Some(batch))])]);
    let correlation_id = conn.write_request(&produce, 9).await.context("Produce")?;
    let what = format!(
        "produce #{correlation_id} from {client_id:?} to {}-{} (acks={})",
        send.topic, send.partition, send.acks
    );
    info!(target: "purgatory::admin", "live view: {what} sent");
    if send.acks != 0 {
        // The answer comes when the DelayedProduce completes or expires.
        tokio::spawn(async move {
            match conn.read_response::<ProduceRequest>(9).await {
                Ok((_, response)) => {
                    let code = response
                        .responses
                        .first()
                        .and_then(|t| t.partition_responses.first())
                        .map_or(0, |p| p.error_code);
                    info!(
                        target: "purgatory::admin",
                        error = %crate::telemetry::error_name(code),
                        "live view: {what} answered"
                    );
                }
                Err(e) => {
                    warn!(target: "purgatory::admin", error = %e, "live view: {what}: no answer")
                }
            }
            conn.close().await;
        });
    }
    Ok(json!({
        "client_id": client_id,
        "metadata_error": metadata_error,
        "correlation_id": correlation_id,
        "topic": send.topic,
        "partition": send.partition,
        "acks": send.acks,
    }))
}
