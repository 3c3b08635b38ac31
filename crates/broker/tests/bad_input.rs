//! Hostile and broken input: each case must close only the offending connection (never
//! panic, hang or allocate without bound), while a connection opened before it and a new
//! one opened after it are both served.

mod common;

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use common::TestBroker;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MAX_REQUEST: usize = 1 << 20;

async fn broker() -> TestBroker {
    TestBroker::start_manual(|c| c.socket_request_max_bytes = MAX_REQUEST).await
}

/// A request header (v1: api key, version, correlation id, client id) followed by `body`.
fn request(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i16(api_key);
    b.put_i16(version);
    b.put_i32(7);
    b.put_i16(4);
    b.put_slice(b"evil");
    b.put_slice(body);
    let mut frame = BytesMut::new();
    frame.put_i32(b.len() as i32);
    frame.put_slice(&b);
    frame.to_vec()
}

/// Writes `bytes`, optionally half-closes, and returns true if the broker closed the
/// connection (EOF or reset) without sending anything back.
async fn closed_after(tb: &TestBroker, bytes: &[u8], half_close: bool) -> bool {
    let mut s = TcpStream::connect(tb.addr).await.expect("connect");
    s.write_all(bytes).await.expect("write");
    if half_close {
        s.shutdown().await.expect("half close");
    }
    let mut buf = [0u8; 64];
    match tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(n)) => panic!("broker answered {n} bytes instead of closing"),
        Err(_) => panic!("broker neither answered nor closed within 10 s"),
    }
}

/// A well-formed request on `conn` succeeds.
async fn served(conn: &mut KafkaConnection) {
    let versions = conn
        .send(&ApiVersionsRequest::default(), 0)
        .await
        .expect("ApiVersions answered");
    assert_eq!(versions.error_code, 0);
    let metadata = conn
        .send(&MetadataRequest::default(), 1)
        .await
        .expect("Metadata answered");
    assert_eq!(metadata.brokers.len(), 1);
}

/// Runs one bad-input case and checks the broker is unharmed.
async fn case(bytes: Vec<u8>, half_close: bool) {
    let tb = broker().await;
    let mut before = KafkaConnection::connect(&tb.bootstrap())
        .await
        .expect("connect");
    served(&mut before).await;
    assert!(closed_after(&tb, &bytes, half_close).await);
    served(&mut before).await;
    let mut after = KafkaConnection::connect(&tb.bootstrap())
        .await
        .expect("connect");
    served(&mut after).await;
}

#[tokio::test]
async fn negative_frame_size_closes_the_connection() {
    case((-5i32).to_be_bytes().to_vec(), false).await;
}

#[tokio::test]
async fn frame_above_socket_request_max_bytes_closes_the_connection() {
    let mut bytes = ((MAX_REQUEST + 1) as i32).to_be_bytes().to_vec();
    bytes.extend_from_slice(&[0u8; 16]);
    case(bytes, false).await;
}

#[tokio::test]
async fn truncated_frame_closes_the_connection() {
    let mut full = request(3, 1, &[0, 0, 0, 0]);
    full.truncate(full.len() - 3);
    case(full, true).await;
}

#[tokio::test]
async fn undecodable_body_closes_the_connection() {
    // Metadata v1 claiming 2^31-1 topics in a tiny frame: must not size an allocation.
    case(request(3, 1, &[0x7f, 0xff, 0xff, 0xff, 0, 1]), false).await;
    // Garbage bytes where a Produce v3 body should be.
    case(request(0, 3, &[0xde, 0xad, 0xbe, 0xef, 0x01]), false).await;
}

#[tokio::test]
async fn unknown_api_key_closes_the_connection() {
    case(request(999, 0, &[]), false).await;
    // A real Kafka API this broker does not implement (SaslHandshake).
    case(request(17, 0, &[0, 5, b'P', b'L', b'A', b'I', b'N']), false).await;
}

#[tokio::test]
async fn unsupported_version_closes_the_connection() {
    case(request(3, 99, &[]), false).await;
    // Produce v0-2 are advertised (for old librdkafka) but refused, as Kafka 4 does.
    case(request(0, 2, &[0, 1, 0, 0, 0x75, 0x30, 0, 0, 0, 0]), false).await;
}

#[tokio::test]
async fn api_versions_above_ours_gets_a_v0_error_response_and_stays_open() {
    let tb = broker().await;
    let mut s = TcpStream::connect(tb.addr).await.expect("connect");
    // ApiVersions v9 with a flexible (v2) header: api key, version, correlation id,
    // client id, empty tagged fields; then an empty body.
    let mut b = BytesMut::new();
    b.put_i16(18);
    b.put_i16(9);
    b.put_i32(42);
    b.put_i16(-1);
    b.put_u8(0);
    b.put_u8(0);
    s.write_all(&(b.len() as i32).to_be_bytes()).await.unwrap();
    s.write_all(&b).await.unwrap();
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.expect("a response");
    let mut frame = vec![0u8; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut frame).await.expect("the whole response");
    let mut body = bytes::Bytes::from(frame);
    let correlation_id = bytes::Buf::get_i32(&mut body);
    assert_eq!(correlation_id, 42);
    let response = ApiVersionsResponse::decode(&mut body, 0).expect("a v0 ApiVersions response");
    assert_eq!(response.error_code, 35, "UNSUPPORTED_VERSION");
    let api_versions = response
        .api_keys
        .iter()
        .find(|k| k.api_key == 18)
        .expect("ApiVersions listed");
    assert_eq!((api_versions.min_version, api_versions.max_version), (0, 4));
    // The client may now retry on the same connection with a version we support.
    let mut conn = KafkaConnection::from_stream(s).expect("wrap");
    served(&mut conn).await;
}
