//! The handlers' tests, run through `KafkaApis::handle` without a socket, on a manual
//! clock. By subject:
//!
//! - `every_version`: every handler's response encodes at every version we advertise,
//!   from a table of requests per API;
//! - `group_life`: one group's whole life, walked at each version of every group API;
//! - `fetch_edges`: offsets outside the log, and fetches that must wait;
//! - `delete_records`: DeleteRecords' answers, and hostile DeleteRecords requests;
//! - `admin`: what CreateTopics, DescribeConfigs and ListOffsets answer;
//! - `readme`: the README's API table says what ApiVersions advertises;
//! - `partitions`: what CreatePartitions answers, and what partitions it adds take;
//! - `offset_delete`: what OffsetDelete answers, and that a reload keeps it deleted;
//! - `log_dirs`: what DescribeLogDirs answers;
//! - `configs`: IncrementalAlterConfigs and AlterConfigs, seen through DescribeConfigs
//!   and produces;
//! - `hostile`: structurally valid group requests, and CreatePartitions, OffsetDelete and
//!   DescribeLogDirs, with hostile values, at every version;
//! - `hostile_configs`: the same for the three config APIs;
//! - `read_committed`: what a read_committed Fetch and ListOffsets see of transactions;
//! - `hostile_txn`: the transaction APIs, and transactional produces, with hostile values.

mod admin;
mod configs;
mod delete_records;
mod every_version;
mod fetch_edges;
mod group_life;
mod hostile;
mod hostile_configs;
mod hostile_txn;
mod log_dirs;
mod offset_delete;
mod partitions;
mod read_committed;
mod readme;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use replog::test_util::BatchBuilder;

use super::{Reply, RequestContext, SUPPORTED_APIS};
use crate::apis::KafkaApis;
use crate::config::BrokerConfig;
use crate::connection::encode_response;
use crate::replica_manager::ReplicaManager;
use crate::test_util::manual_config;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One uncompressed v2 batch with a single record, CRC included.
fn one_record_batch() -> Bytes {
    BatchBuilder::new(1).bytes()
}
use crate::telemetry::TraceId;

/// The context of an untraced request from `client_id` at `version`.
fn context(client_id: &str, correlation_id: i32, version: i16) -> RequestContext {
    RequestContext {
        correlation_id,
        client_id: client_id.into(),
        api_version: version,
        peer: SocketAddr::from(([127, 0, 0, 1], 1)),
        trace: TraceId::NONE,
    }
}

/// A manual clock; groups complete their first rebalance on the next timer advance, and
/// `__consumer_offsets` and `__transaction_state` have one replica, so their appends are
/// replicated at once.
fn group_test_config() -> BrokerConfig {
    manual_config(|c| {
        c.group_initial_rebalance_delay_ms = 0;
        c.offsets_topic_replication_factor = 1;
        c.transaction_state_log_replication_factor = 1;
    })
}

/// Encodes `response` at `version` and decodes it back, as the connection would send it.
fn round_trip(api: ApiKey, version: i16, response: &ResponseKind) {
    let mut frame = encode_response(7, version, response)
        .unwrap_or_else(|e| panic!("{api:?} v{version}: {e:#}"));
    frame.advance(4);
    let _header = ResponseHeader::decode_from(&mut frame, response.header_version(version));
    ResponseKind::decode(api, &mut frame, version)
        .unwrap_or_else(|e| panic!("{api:?} v{version} does not decode back: {e}"));
}

/// Sends a request through `KafkaApis::handle` and returns the response, advancing the manual clock
/// if it was parked; every response is round-tripped through the codec at `version`.
fn exchange(apis: &KafkaApis, version: i16, request: RequestKind) -> ResponseKind {
    let api = request_api(&request);
    answered(apis, &context("flow", 7, version), api, request)
}

/// Hands `request` to the handlers and returns the answer, given at once or after one tick
/// of the manual clock, round-tripped through the codec at the context's version.
fn answered(
    apis: &KafkaApis,
    ctx: &RequestContext,
    api: ApiKey,
    request: RequestKind,
) -> ResponseKind {
    let version = ctx.api_version;
    let response = match apis.handle(ctx, request) {
        Reply::Now(r) => *r,
        Reply::Later(mut rx) => {
            apis.replica_manager.timer.advance_by(1);
            rx.try_recv()
                .unwrap_or_else(|_| panic!("{api:?} v{version}: parked reply never came"))
        }
        _ => panic!("{api:?} v{version}: no response"),
    };
    round_trip(api, version, &response);
    response
}

fn request_api(request: &RequestKind) -> ApiKey {
    match request {
        RequestKind::FindCoordinator(_) => ApiKey::FindCoordinator,
        RequestKind::JoinGroup(_) => ApiKey::JoinGroup,
        RequestKind::SyncGroup(_) => ApiKey::SyncGroup,
        RequestKind::Heartbeat(_) => ApiKey::Heartbeat,
        RequestKind::LeaveGroup(_) => ApiKey::LeaveGroup,
        RequestKind::OffsetCommit(_) => ApiKey::OffsetCommit,
        RequestKind::OffsetFetch(_) => ApiKey::OffsetFetch,
        RequestKind::ListGroups(_) => ApiKey::ListGroups,
        RequestKind::DescribeGroups(_) => ApiKey::DescribeGroups,
        RequestKind::DeleteGroups(_) => ApiKey::DeleteGroups,
        RequestKind::Metadata(_) => ApiKey::Metadata,
        RequestKind::Produce(_) => ApiKey::Produce,
        RequestKind::CreatePartitions(_) => ApiKey::CreatePartitions,
        RequestKind::OffsetDelete(_) => ApiKey::OffsetDelete,
        RequestKind::DescribeLogDirs(_) => ApiKey::DescribeLogDirs,
        other => panic!("unexpected request {other:?}"),
    }
}

/// Produces `records` to partition 0 of `topic` with acks=1, answered at once: the
/// partition's error code.
fn produce_to(apis: &KafkaApis, topic: &str, records: Bytes) -> i16 {
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

/// A Fetch of partition 0 of `topic` from `offset` by `replica_id` (-1: a consumer) that
/// asks to wait up to `max_wait_ms` for a byte.
fn fetch_of(topic: &str, replica_id: i32, offset: i64, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![FetchPartition::default()
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])])
}

/// The one partition of a Fetch response, as a client decodes it off the wire.
fn decoded_partition(response: ResponseKind, version: i16) -> fetch_response::PartitionData {
    let mut frame = encode_response(7, version, &response).expect("encodes");
    frame.advance(4);
    let _header = ResponseHeader::decode_from(&mut frame, response.header_version(version));
    let ResponseKind::Fetch(decoded) =
        ResponseKind::decode(ApiKey::Fetch, &mut frame, version).expect("decodes")
    else {
        panic!("not a Fetch response");
    };
    decoded.responses[0].partitions[0].clone()
}

/// Creates `topic` the way a client's Metadata does when auto-creation is on.
fn auto_create(apis: &KafkaApis, topic: &str) {
    exchange(
        apis,
        12,
        RequestKind::Metadata(
            MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name(topic)))
                ])),
        ),
    );
}

/// `request` as the broker would read it off the wire at `version`: encoded, then
/// decoded. `None` if a field does not fit the version or the bytes do not decode.
fn over_the_wire(api: ApiKey, version: i16, request: &RequestKind) -> Option<RequestKind> {
    let mut buf = bytes::BytesMut::new();
    request.encode(&mut buf, version).ok()?;
    RequestKind::decode(api, &mut buf.freeze(), version).ok()
}

/// `version` within an API's advertised range.
fn clamp(api: ApiKey, version: i16) -> i16 {
    let (min, max) = crate::handlers::supported_range(api).expect("advertised");
    version.clamp(min, max)
}

trait DecodeFrom: Sized {
    fn decode_from(buf: &mut Bytes, version: i16) -> Self;
}

impl DecodeFrom for ResponseHeader {
    fn decode_from(buf: &mut Bytes, version: i16) -> Self {
        <ResponseHeader as kafka_protocol::protocol::Decodable>::decode(buf, version)
            .expect("response header")
    }
}

fn manual_apis() -> Arc<KafkaApis> {
    KafkaApis::new(ReplicaManager::new(manual_config(|_| {})))
}

fn ask(apis: &KafkaApis, version: i16, request: RequestKind) -> ResponseKind {
    let ctx = context("test", 7, version);
    match apis.handle(&ctx, request) {
        Reply::Now(r) => *r,
        _ => panic!("expected an immediate response"),
    }
}
