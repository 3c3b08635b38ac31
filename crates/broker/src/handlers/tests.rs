//! Every handler's response must encode at every version we advertise: the Kafka message
//! schemas add and drop fields across versions, and a field set where the version has no
//! room for it makes the encoder fail (and the connection close). Each case here runs a
//! real request through the handler, encodes the reply at that version and decodes it back.

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
use replog::test_util::BatchBuilder;

use super::{dispatch, Reply, RequestContext, SUPPORTED_APIS};
use crate::config::{BrokerConfig, ClockMode};
use crate::connection::encode_response;
use crate::replica_manager::ReplicaManager;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

/// One uncompressed v2 batch with a single record, CRC included.
fn one_record_batch() -> Bytes {
    BatchBuilder::new(1).bytes()
}

fn requests(api: ApiKey, v: i16) -> Vec<RequestKind> {
    let topic_t = || FetchTopic::default().with_topic(name("t"));
    match api {
        ApiKey::ApiVersions => vec![RequestKind::ApiVersions(ApiVersionsRequest::default())],
        ApiKey::Metadata => vec![
            RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
            RequestKind::Metadata(
                MetadataRequest::default()
                    .with_allow_auto_topic_creation(true)
                    .with_topics(Some(vec![
                        MetadataRequestTopic::default().with_name(Some(name("t"))),
                        MetadataRequestTopic::default().with_name(Some(name("bad name!"))),
                    ])),
            ),
        ],
        ApiKey::Produce => [1i16, -1, 7]
            .into_iter()
            .flat_map(|acks| {
                [
                    Some(one_record_batch()),
                    Some(Bytes::from_static(b"garbage")),
                ]
                .into_iter()
                .map(move |records| {
                    RequestKind::Produce(
                        ProduceRequest::default()
                            .with_acks(acks)
                            .with_timeout_ms(100)
                            .with_topic_data(vec![TopicProduceData::default()
                                .with_name(name("t"))
                                .with_partition_data(vec![
                                    PartitionProduceData::default()
                                        .with_index(0)
                                        .with_records(records.clone()),
                                    PartitionProduceData::default()
                                        .with_index(9)
                                        .with_records(records),
                                ])]),
                    )
                })
            })
            .collect(),
        ApiKey::Fetch => [-1, 2]
            .into_iter()
            .flat_map(|replica| {
                [0i64, 1, 99].into_iter().map(move |offset| {
                    RequestKind::Fetch(
                        FetchRequest::default()
                            .with_replica_id(BrokerId(replica))
                            .with_max_wait_ms(if offset == 1 { 100 } else { 0 })
                            .with_max_bytes(1 << 20)
                            .with_session_epoch(-1)
                            .with_topics(vec![topic_t().with_partitions(vec![
                                FetchPartition::default()
                                    .with_fetch_offset(offset)
                                    .with_partition_max_bytes(1 << 20),
                            ])]),
                    )
                })
            })
            .chain([RequestKind::Fetch(
                FetchRequest::default()
                    .with_session_id(5)
                    .with_session_epoch(3),
            )])
            .collect(),
        ApiKey::ListOffsets => [-1i64, -2, -3, 0, i64::MAX]
            .into_iter()
            .filter(|ts| *ts != -3 || v >= 7)
            .map(|ts| {
                RequestKind::ListOffsets(
                    ListOffsetsRequest::default()
                        .with_replica_id(BrokerId(-1))
                        .with_topics(vec![ListOffsetsTopic::default()
                            .with_name(name("t"))
                            .with_partitions(vec![
                                ListOffsetsPartition::default()
                                    .with_partition_index(0)
                                    .with_timestamp(ts),
                                ListOffsetsPartition::default()
                                    .with_partition_index(5)
                                    .with_timestamp(ts),
                            ])]),
                )
            })
            .collect(),
        ApiKey::InitProducerId => vec![
            RequestKind::InitProducerId(
                InitProducerIdRequest::default().with_transactional_id(None),
            ),
            RequestKind::InitProducerId(
                InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx")))),
            ),
        ],
        ApiKey::OffsetForLeaderEpoch => vec![RequestKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochRequest::default().with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(name("t"))
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(0),
                        OffsetForLeaderPartition::default()
                            .with_partition(3)
                            .with_leader_epoch(0),
                    ]),
            ]),
        )],
        ApiKey::CreateTopics => vec![RequestKind::CreateTopics(
            CreateTopicsRequest::default().with_topics(vec![
                CreatableTopic::default()
                    .with_name(name(&format!("created-{v}")))
                    .with_num_partitions(2)
                    .with_replication_factor(3),
                CreatableTopic::default()
                    .with_name(name("t"))
                    .with_num_partitions(1)
                    .with_replication_factor(3),
                CreatableTopic::default()
                    .with_name(name("x"))
                    .with_num_partitions(1)
                    .with_replication_factor(9),
            ]),
        )],
        ApiKey::DeleteTopics => vec![RequestKind::DeleteTopics(
            DeleteTopicsRequest::default()
                .with_topic_names(if v < 6 {
                    vec![name(&format!("created-{v}")), name("nope")]
                } else {
                    vec![]
                })
                .with_topics(if v >= 6 {
                    vec![DeleteTopicState::default().with_name(Some(name("nope")))]
                } else {
                    vec![]
                }),
        )],
        ApiKey::DescribeConfigs => vec![RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("t")),
                DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(StrBytes::from_static_str("1")),
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(StrBytes::from_static_str("nope")),
            ]),
        )],
        other => panic!("no test requests for {other:?}"),
    }
}

#[test]
fn every_handler_response_encodes_and_decodes_at_every_advertised_version() {
    let config = BrokerConfig {
        clock: ClockMode::Manual,
        ..BrokerConfig::default()
    };
    let rm: Arc<ReplicaManager> = ReplicaManager::new(config);
    let mut checked = 0;
    for &(api, min, max) in SUPPORTED_APIS {
        let min = if api == ApiKey::Produce {
            super::PRODUCE_MIN_ACCEPTED
        } else {
            min
        };
        for version in min..=max {
            for request in requests(api, version) {
                let ctx = RequestContext {
                    correlation_id: 7,
                    client_id: "test".into(),
                    api_version: version,
                    peer: "127.0.0.1:1".parse().unwrap(),
                    trace: crate::telemetry::TraceId::NONE,
                };
                let response = match dispatch(&rm, &ctx, request) {
                    Reply::Now(r) => *r,
                    Reply::Nothing => continue,
                    Reply::Close(reason) => panic!("{api:?} v{version}: closed: {reason}"),
                    Reply::Later(mut rx) => {
                        rm.timer.advance_by(1_000);
                        rx.try_recv().unwrap_or_else(|_| {
                            panic!("{api:?} v{version}: parked reply never came")
                        })
                    }
                };
                let mut frame = encode_response(7, version, &response)
                    .unwrap_or_else(|e| panic!("{api:?} v{version}: {e:#}"));
                frame.advance(4);
                let _header =
                    ResponseHeader::decode_from(&mut frame, response.header_version(version));
                ResponseKind::decode(api, &mut frame, version)
                    .unwrap_or_else(|e| panic!("{api:?} v{version} does not decode back: {e}"));
                checked += 1;
            }
        }
    }
    assert!(checked > 150, "checked {checked} responses");
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

fn manual_broker() -> Arc<ReplicaManager> {
    ReplicaManager::new(BrokerConfig {
        clock: ClockMode::Manual,
        ..BrokerConfig::default()
    })
}

fn ask(rm: &Arc<ReplicaManager>, version: i16, request: RequestKind) -> ResponseKind {
    let ctx = RequestContext {
        correlation_id: 7,
        client_id: "test".into(),
        api_version: version,
        peer: "127.0.0.1:1".parse().unwrap(),
        trace: crate::telemetry::TraceId::NONE,
    };
    match dispatch(rm, &ctx, request) {
        Reply::Now(r) => *r,
        _ => panic!("expected an immediate response"),
    }
}

#[test]
fn create_topics_and_describe_configs_say_where_each_value_comes_from() {
    // Kafka's ConfigSource: 1 = set for the topic, 4 = the broker's config, 5 = default.
    // Leaving it at the field's default (-1) made kafka-python's admin client reject the
    // whole CreateTopics response.
    let rm = manual_broker();
    for version in 5..=7 {
        let topic = format!("sourced-{version}");
        let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name(&topic))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("1")))])]);
        let ResponseKind::CreateTopics(response) =
            ask(&rm, version, RequestKind::CreateTopics(request))
        else {
            panic!("not a CreateTopics response");
        };
        let result = &response.topics[0];
        assert_eq!(result.error_code, 0, "v{version}");
        let sources: Vec<(&str, Option<&str>, i8, bool)> = result
            .configs
            .as_ref()
            .expect("v5+ reports the configs")
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.value.as_deref(),
                    c.config_source,
                    c.read_only,
                )
            })
            .collect();
        let retention = rm.config.retention_bytes.to_string();
        let max_message = rm.config.message_max_bytes.to_string();
        assert_eq!(
            sources,
            vec![
                ("min.insync.replicas", Some("1"), 1, false),
                ("retention.bytes", Some(retention.as_str()), 4, false),
                ("max.message.bytes", Some(max_message.as_str()), 4, false),
                ("cleanup.policy", Some("delete"), 5, false),
                ("message.timestamp.type", Some("CreateTime"), 5, true),
            ],
            "v{version}"
        );

        // An empty key list asks for every key, as a null one does.
        let describe = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.clone()))
                .with_configuration_keys(Some(vec![])),
        ]);
        let ResponseKind::DescribeConfigs(described) =
            ask(&rm, 4, RequestKind::DescribeConfigs(describe))
        else {
            panic!("not a DescribeConfigs response");
        };
        // (name, ConfigSource, read only, ConfigType: 2 string, 3 int, 5 long, 7 list)
        let entries: Vec<(&str, i8, bool, i8)> = described.results[0]
            .configs
            .iter()
            .map(|c| (c.name.as_str(), c.config_source, c.read_only, c.config_type))
            .collect();
        assert_eq!(
            entries,
            vec![
                ("min.insync.replicas", 1, false, 3),
                ("retention.bytes", 4, false, 5),
                ("max.message.bytes", 4, false, 3),
                ("cleanup.policy", 5, false, 7),
                ("message.timestamp.type", 5, true, 2),
            ]
        );
    }
}

#[test]
fn describe_configs_filters_by_the_keys_asked_for() {
    let rm = manual_broker();
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![
                StrBytes::from_static_str("min.insync.replicas"),
                StrBytes::from_static_str("no.such.key"),
            ]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&rm, 4, RequestKind::DescribeConfigs(describe))
    else {
        panic!("not a DescribeConfigs response");
    };
    let names: Vec<&str> = described.results[0]
        .configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["min.insync.replicas"]);
}

#[test]
fn describe_configs_withholds_the_admin_token() {
    let rm = ReplicaManager::new(BrokerConfig {
        clock: ClockMode::Manual,
        admin_token: Some("s3cret".into()),
        ..BrokerConfig::default()
    });
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("admin.token")]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&rm, 4, RequestKind::DescribeConfigs(describe))
    else {
        panic!("not a DescribeConfigs response");
    };
    let token = &described.results[0].configs[0];
    assert_eq!(token.name.as_str(), "admin.token");
    assert!(token.is_sensitive);
    assert_eq!(token.value, None);
}

#[test]
fn list_offsets_refuses_a_partition_asked_for_twice() {
    // Kafka answers INVALID_REQUEST for every entry of a partition named more than once,
    // rather than two offsets a client cannot tell apart.
    let rm = manual_broker();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("twice"))
        .with_num_partitions(2)
        .with_replication_factor(3)]);
    ask(&rm, 7, RequestKind::CreateTopics(create));
    let entry = |partition: i32, timestamp: i64| {
        ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(timestamp)
    };
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("twice"))
        .with_partitions(vec![entry(0, -1), entry(0, -2), entry(1, -1)])]);
    let ResponseKind::ListOffsets(response) = ask(&rm, 7, RequestKind::ListOffsets(request)) else {
        panic!("not a ListOffsets response");
    };
    let answers: Vec<(i32, i16, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    assert_eq!(answers, vec![(0, 42, -1), (0, 42, -1), (1, 0, 0)]);
}
