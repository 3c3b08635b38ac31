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
        _ => group_requests(api, v),
    }
}

/// The group APIs' requests for the every-version test: mostly the paths that answer at
/// once (unknown members, errors, empty groups); the success paths are walked version by
/// version in `a_whole_group_life_encodes_at_every_advertised_version`.
fn group_requests(api: ApiKey, v: i16) -> Vec<RequestKind> {
    let group = |s: &str| GroupId(StrBytes::from_string(s.to_string()));
    let text = |s: &str| StrBytes::from_string(s.to_string());
    let join = |group_id: &str, session: i32, instance: Option<&str>| {
        JoinGroupRequest::default()
            .with_group_id(group(group_id))
            .with_session_timeout_ms(session)
            .with_rebalance_timeout_ms(1000)
            .with_protocol_type(text("consumer"))
            .with_group_instance_id(instance.map(text))
            .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
            )
            .with_name(text("range"))
            .with_metadata(Bytes::from_static(b"sub"))])
    };
    match api {
        ApiKey::FindCoordinator => [0i8, 1, 9]
            .into_iter()
            .filter(|key_type| *key_type == 0 || v >= 1)
            .map(|key_type| {
                let mut r = FindCoordinatorRequest::default().with_key_type(key_type);
                if v >= 4 {
                    r.coordinator_keys = vec![text("g"), text("h")];
                } else {
                    r.key = text("g");
                }
                RequestKind::FindCoordinator(r)
            })
            .collect(),
        ApiKey::JoinGroup => {
            let mut requests = vec![
                RequestKind::JoinGroup(join(&format!("jg-{v}"), 10_000, None)),
                RequestKind::JoinGroup(join("jg", 1, None)),
                RequestKind::JoinGroup(join("", 10_000, None)),
                RequestKind::JoinGroup(join("jg", 10_000, None).with_member_id(text("nobody"))),
            ];
            if v >= 5 {
                requests.push(RequestKind::JoinGroup(join(
                    &format!("static-{v}"),
                    10_000,
                    Some("i"),
                )));
            }
            requests
        }
        ApiKey::SyncGroup => vec![RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(group(&format!("jg-{v}")))
                .with_member_id(text("nobody")),
        )],
        ApiKey::Heartbeat => vec![
            RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(group("jg-0"))),
            RequestKind::Heartbeat(HeartbeatRequest::default()),
        ],
        ApiKey::LeaveGroup => {
            let mut r = LeaveGroupRequest::default().with_group_id(group("jg-0"));
            if v >= 3 {
                r.members = vec![
                    leave_group_request::MemberIdentity::default().with_member_id(text("nobody")),
                    leave_group_request::MemberIdentity::default()
                        .with_group_instance_id(Some(text("nobody"))),
                ];
            } else {
                r.member_id = text("nobody");
            }
            vec![RequestKind::LeaveGroup(r)]
        }
        ApiKey::OffsetCommit => vec![RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group("oc"))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(name("t"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(5),
                            offset_commit_request::OffsetCommitRequestPartition::default()
                                .with_partition_index(7)
                                .with_committed_offset(5),
                        ]),
                    offset_commit_request::OffsetCommitRequestTopic::default()
                        .with_name(name("nope"))
                        .with_partitions(vec![
                            offset_commit_request::OffsetCommitRequestPartition::default(),
                        ]),
                ]),
        )],
        ApiKey::OffsetFetch => {
            let named = || {
                vec![offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name("t"))
                    .with_partition_indexes(vec![0, 1])]
            };
            if v >= 8 {
                vec![RequestKind::OffsetFetch(
                    OffsetFetchRequest::default().with_groups(vec![
                        offset_fetch_request::OffsetFetchRequestGroup::default()
                            .with_group_id(group("oc"))
                            .with_topics(Some(vec![
                                offset_fetch_request::OffsetFetchRequestTopics::default()
                                    .with_name(name("t"))
                                    .with_partition_indexes(vec![0, 1]),
                            ])),
                        offset_fetch_request::OffsetFetchRequestGroup::default()
                            .with_group_id(group("oc"))
                            .with_topics(None),
                    ]),
                )]
            } else {
                let mut requests = vec![RequestKind::OffsetFetch(
                    OffsetFetchRequest::default()
                        .with_group_id(group("oc"))
                        .with_topics(Some(named())),
                )];
                if v >= 2 {
                    requests.push(RequestKind::OffsetFetch(
                        OffsetFetchRequest::default()
                            .with_group_id(group("oc"))
                            .with_topics(None),
                    ));
                }
                requests
            }
        }
        ApiKey::ListGroups => {
            let mut r = ListGroupsRequest::default();
            if v >= 4 {
                r.states_filter = vec![text("stable"), text("Empty")];
            }
            if v >= 5 {
                r.types_filter = vec![text("classic")];
            }
            vec![
                RequestKind::ListGroups(ListGroupsRequest::default()),
                RequestKind::ListGroups(r),
            ]
        }
        ApiKey::DescribeGroups => vec![RequestKind::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups(vec![group("oc"), group("nope"), group("jg-0")])
                .with_include_authorized_operations(v >= 3),
        )],
        ApiKey::DeleteGroups => vec![RequestKind::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![
                group("nope"),
                group("oc"),
                group("jg-0"),
            ]),
        )],
        other => panic!("no test requests for {other:?}"),
    }
}

#[test]
fn every_handler_response_encodes_and_decodes_at_every_advertised_version() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
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
                let response = match apis.handle(&ctx, request) {
                    Reply::Now(r) => *r,
                    Reply::Nothing => continue,
                    Reply::Close(reason) => panic!("{api:?} v{version}: closed: {reason}"),
                    Reply::Later(mut rx) => {
                        apis.replica_manager.timer.advance_by(1_000);
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

/// A manual clock; groups complete their first rebalance on the next timer advance and
/// `__consumer_offsets` has one replica, so its appends are replicated at once.
fn group_test_config() -> BrokerConfig {
    manual_config(|c| {
        c.group_initial_rebalance_delay_ms = 0;
        c.offsets_topic_replication_factor = 1;
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
    let ctx = RequestContext {
        correlation_id: 7,
        client_id: "flow".into(),
        api_version: version,
        peer: "127.0.0.1:1".parse().unwrap(),
        trace: crate::telemetry::TraceId::NONE,
    };
    let response = match apis.handle(&ctx, request) {
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
        other => panic!("unexpected request {other:?}"),
    }
}

/// `version` within an API's advertised range.
fn clamp(api: ApiKey, version: i16) -> i16 {
    let (min, max) = super::supported_range(api).expect("advertised");
    version.clamp(min, max)
}

#[test]
fn a_whole_group_life_encodes_at_every_advertised_version() {
    // One group per step i: every group API at version min(i, its max), down the success
    // paths — join (with MEMBER_ID_REQUIRED from v4), sync with an assignment, heartbeat,
    // commit, fetch, describe a Stable group, list, leave, delete — with every response
    // round-tripped through the codec at its version.
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let text = |s: &str| StrBytes::from_string(s.to_string());
    exchange(
        &apis,
        12,
        RequestKind::Metadata(
            MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("t")))
                ])),
        ),
    );
    for i in 0..=9i16 {
        let v = |api| clamp(api, i);
        let g = GroupId(text(&format!("life-{i}")));
        let instance = (v(ApiKey::JoinGroup) >= 5).then(|| text("instance"));

        let ResponseKind::FindCoordinator(found) = exchange(&apis, v(ApiKey::FindCoordinator), {
            let mut r = FindCoordinatorRequest::default();
            if v(ApiKey::FindCoordinator) >= 4 {
                r.coordinator_keys = vec![g.0.clone()];
            } else {
                r.key = g.0.clone();
            }
            RequestKind::FindCoordinator(r)
        }) else {
            panic!()
        };
        let node = if v(ApiKey::FindCoordinator) >= 4 {
            found.coordinators[0].node_id
        } else {
            found.node_id
        };
        assert_eq!(node, BrokerId(1), "step {i}");

        let join = |member: &str| {
            RequestKind::JoinGroup(
                JoinGroupRequest::default()
                    .with_group_id(g.clone())
                    .with_session_timeout_ms(10_000)
                    .with_rebalance_timeout_ms(5_000)
                    .with_member_id(text(member))
                    .with_group_instance_id(instance.clone())
                    .with_protocol_type(text("consumer"))
                    .with_reason((v(ApiKey::JoinGroup) >= 8).then(|| text("testing")))
                    .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
                    )
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(b"subscription"))]),
            )
        };
        let ResponseKind::JoinGroup(mut joined) = exchange(&apis, v(ApiKey::JoinGroup), join(""))
        else {
            panic!()
        };
        if joined.error_code == ResponseError::MemberIdRequired.code() {
            assert!(v(ApiKey::JoinGroup) >= 4 && instance.is_none(), "step {i}");
            let ResponseKind::JoinGroup(again) = exchange(
                &apis,
                v(ApiKey::JoinGroup),
                join(&joined.member_id.to_string()),
            ) else {
                panic!()
            };
            joined = again;
        }
        assert_eq!(joined.error_code, 0, "step {i}");
        assert_eq!(joined.generation_id, 1, "step {i}");
        assert_eq!(
            joined.leader, joined.member_id,
            "step {i}: the only member leads"
        );
        assert_eq!(
            joined.members.len(),
            1,
            "step {i}: the leader gets the member list"
        );
        assert_eq!(&joined.members[0].metadata[..], b"subscription");
        let member = joined.member_id.clone();

        let mut sync = SyncGroupRequest::default()
            .with_group_id(g.clone())
            .with_generation_id(1)
            .with_member_id(member.clone())
            .with_group_instance_id(if v(ApiKey::SyncGroup) >= 3 {
                instance.clone()
            } else {
                None
            })
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(member.clone())
                    .with_assignment(Bytes::from_static(b"assignment")),
            ]);
        if v(ApiKey::SyncGroup) >= 5 {
            sync.protocol_type = Some(text("consumer"));
            sync.protocol_name = Some(text("range"));
        }
        let ResponseKind::SyncGroup(synced) =
            exchange(&apis, v(ApiKey::SyncGroup), RequestKind::SyncGroup(sync))
        else {
            panic!()
        };
        assert_eq!(
            (synced.error_code, &synced.assignment[..]),
            (0, &b"assignment"[..]),
            "step {i}"
        );

        let ResponseKind::Heartbeat(beat) = exchange(
            &apis,
            v(ApiKey::Heartbeat),
            RequestKind::Heartbeat(
                HeartbeatRequest::default()
                    .with_group_id(g.clone())
                    .with_generation_id(1)
                    .with_member_id(member.clone())
                    .with_group_instance_id(if v(ApiKey::Heartbeat) >= 3 {
                        instance.clone()
                    } else {
                        None
                    }),
            ),
        ) else {
            panic!()
        };
        assert_eq!(beat.error_code, 0, "step {i}");

        let ResponseKind::OffsetCommit(committed) = exchange(
            &apis,
            v(ApiKey::OffsetCommit),
            RequestKind::OffsetCommit(
                OffsetCommitRequest::default()
                    .with_group_id(g.clone())
                    .with_generation_id_or_member_epoch(1)
                    .with_member_id(member.clone())
                    .with_group_instance_id(if v(ApiKey::OffsetCommit) >= 7 {
                        instance.clone()
                    } else {
                        None
                    })
                    .with_topics(vec![
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(name("t"))
                            .with_partitions(vec![
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(40 + i64::from(i))
                                    .with_committed_metadata(Some(text("meta"))),
                            ]),
                    ]),
            ),
        ) else {
            panic!()
        };
        assert_eq!(committed.topics[0].partitions[0].error_code, 0, "step {i}");

        let fetch_v = v(ApiKey::OffsetFetch);
        let request = if fetch_v >= 8 {
            OffsetFetchRequest::default().with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(g.clone())
                    .with_topics(Some(vec![
                        offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(name("t"))
                            .with_partition_indexes(vec![0]),
                    ])),
            ])
        } else {
            OffsetFetchRequest::default()
                .with_group_id(g.clone())
                .with_topics(Some(vec![
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(name("t"))
                        .with_partition_indexes(vec![0]),
                ]))
        };
        let ResponseKind::OffsetFetch(fetched) =
            exchange(&apis, fetch_v, RequestKind::OffsetFetch(request))
        else {
            panic!()
        };
        let offset = if fetch_v >= 8 {
            fetched.groups[0].topics[0].partitions[0].committed_offset
        } else {
            fetched.topics[0].partitions[0].committed_offset
        };
        assert_eq!(offset, 40 + i64::from(i), "step {i}");

        let ResponseKind::DescribeGroups(described) = exchange(
            &apis,
            v(ApiKey::DescribeGroups),
            RequestKind::DescribeGroups(
                DescribeGroupsRequest::default().with_groups(vec![g.clone()]),
            ),
        ) else {
            panic!()
        };
        let d = &described.groups[0];
        assert_eq!(
            (d.group_state.as_str(), d.protocol_data.as_str()),
            ("Stable", "range"),
            "step {i}"
        );
        assert_eq!(&d.members[0].member_assignment[..], b"assignment");

        let ResponseKind::ListGroups(listed) = exchange(
            &apis,
            v(ApiKey::ListGroups),
            RequestKind::ListGroups(ListGroupsRequest::default()),
        ) else {
            panic!()
        };
        assert!(listed.groups.iter().any(|l| l.group_id == g), "step {i}");

        let mut leave = LeaveGroupRequest::default().with_group_id(g.clone());
        if v(ApiKey::LeaveGroup) >= 3 {
            leave.members = vec![leave_group_request::MemberIdentity::default()
                .with_member_id(member.clone())
                .with_group_instance_id(instance.clone())];
        } else {
            leave.member_id = member.clone();
        }
        let ResponseKind::LeaveGroup(left) =
            exchange(&apis, v(ApiKey::LeaveGroup), RequestKind::LeaveGroup(leave))
        else {
            panic!()
        };
        assert_eq!(left.error_code, 0, "step {i}");

        // The group rebalances to Empty on the next timer tick; then it can be deleted.
        apis.replica_manager.timer.advance_by(1);
        let ResponseKind::DeleteGroups(deleted) = exchange(
            &apis,
            v(ApiKey::DeleteGroups),
            RequestKind::DeleteGroups(
                DeleteGroupsRequest::default().with_groups_names(vec![g.clone()]),
            ),
        ) else {
            panic!()
        };
        assert_eq!(deleted.results[0].error_code, 0, "step {i}");
    }
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
    let ctx = RequestContext {
        correlation_id: 7,
        client_id: "test".into(),
        api_version: version,
        peer: "127.0.0.1:1".parse().unwrap(),
        trace: crate::telemetry::TraceId::NONE,
    };
    match apis.handle(&ctx, request) {
        Reply::Now(r) => *r,
        _ => panic!("expected an immediate response"),
    }
}

#[test]
fn create_topics_and_describe_configs_say_where_each_value_comes_from() {
    // Kafka's ConfigSource: 1 = set for the topic, 4 = the broker's config, 5 = default.
    // Leaving it at the field's default (-1) made kafka-python's admin client reject the
    // whole CreateTopics response.
    let apis = manual_apis();
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
            ask(&apis, version, RequestKind::CreateTopics(request))
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
        let retention = apis.replica_manager.config.retention_bytes.to_string();
        let max_message = apis.replica_manager.config.message_max_bytes.to_string();
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
            ask(&apis, 4, RequestKind::DescribeConfigs(describe))
        else {
            panic!("not a DescribeConfigs response");
        };
        // (name, ConfigSource, read only, ConfigType: 2 string, 3 int, 5 long, 7 list)
        let entries: Vec<(&str, i8, bool, i8)> = described.results[0]
            .configs
            .iter()
            .map(|c| (c.name.as_str(), c.config_source, c.read_only, c.config_type))
            .collect();
        // In Kafka 4.4's order (its java.util.HashMap's), not the table's.
        assert_eq!(
            entries,
            vec![
                ("min.insync.replicas", 1, false, 3),
                ("cleanup.policy", 5, false, 7),
                ("max.message.bytes", 4, false, 3),
                ("message.timestamp.type", 5, true, 2),
                ("retention.bytes", 4, false, 5),
            ]
        );
    }
}

#[test]
fn describe_configs_filters_by_the_keys_asked_for() {
    let apis = manual_apis();
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![
                StrBytes::from_static_str("min.insync.replicas"),
                StrBytes::from_static_str("no.such.key"),
            ]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&apis, 4, RequestKind::DescribeConfigs(describe))
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
    let apis = KafkaApis::new(ReplicaManager::new(manual_config(|c| {
        c.admin_token = Some("s3cret".into());
    })));
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("admin.token")]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&apis, 4, RequestKind::DescribeConfigs(describe))
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
    let apis = manual_apis();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("twice"))
        .with_num_partitions(2)
        .with_replication_factor(3)]);
    ask(&apis, 7, RequestKind::CreateTopics(create));
    let entry = |partition: i32, timestamp: i64| {
        ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(timestamp)
    };
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("twice"))
        .with_partitions(vec![entry(0, -1), entry(0, -2), entry(1, -1)])]);
    let ResponseKind::ListOffsets(response) = ask(&apis, 7, RequestKind::ListOffsets(request))
    else {
        panic!("not a ListOffsets response");
    };
    let answers: Vec<(i32, i16, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    assert_eq!(answers, vec![(0, 42, -1), (0, 42, -1), (1, 0, 0)]);
}

/// Values that have broken brokers: empty, huge, negative, extreme.
mod hostile {
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::Rng;

    pub const INTS: &[i32] = &[
        i32::MIN,
        -1,
        0,
        1,
        2,
        5_999,
        6_000,
        10_000,
        300_000,
        i32::MAX,
    ];
    pub const PARTITIONS: &[i32] = &[i32::MIN, -1, 0, 1, 3, 99_999];
    pub const OFFSETS: &[i64] = &[i64::MIN, -1, 0, 7, i64::MAX];

    pub fn int(rng: &mut StdRng) -> i32 {
        *INTS.choose(rng).unwrap_or(&0)
    }

    /// A group id: a few real ones (so requests meet state), and hostile ones.
    pub fn group(rng: &mut StdRng) -> String {
        match rng.gen_range(0..10) {
            0 => String::new(),
            1 => "ü\u{0}\u{1F600}".into(),
            2 => "x".repeat(rng.gen_range(1..40_000)),
            n => format!("g{}", n % 4),
        }
    }

    /// A string from the pool of ids seen, or a hostile one.
    pub fn id(rng: &mut StdRng, seen: &[String]) -> String {
        match rng.gen_range(0..6) {
            0 => String::new(),
            1 => "nobody".into(),
            2 => "é".repeat(rng.gen_range(1..20_000)),
            _ => seen.choose(rng).cloned().unwrap_or_default(),
        }
    }

    pub fn bytes(rng: &mut StdRng) -> bytes::Bytes {
        let len = *[0usize, 1, 2, 16, 5_000].choose(rng).unwrap_or(&0);
        (0..len)
            .map(|_| rng.gen::<u8>())
            .collect::<Vec<u8>>()
            .into()
    }
}

/// A structurally valid request of a group API with hostile field values.
fn hostile_group_request(
    rng: &mut rand::rngs::StdRng,
    api: ApiKey,
    seen: &[String],
) -> Option<RequestKind> {
    use rand::seq::SliceRandom;
    use rand::Rng;
    let s = |v: String| StrBytes::from_string(v);
    let group = |rng: &mut rand::rngs::StdRng| GroupId(s(hostile::group(rng)));
    let opt = |rng: &mut rand::rngs::StdRng| -> Option<StrBytes> {
        rng.gen_bool(0.6).then(|| s(hostile::id(rng, seen)))
    };
    let topic = |rng: &mut rand::rngs::StdRng| {
        name(
            ["t", "nope", "__consumer_offsets", ""]
                .choose(rng)
                .copied()
                .unwrap_or("t"),
        )
    };
    Some(match api {
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_key(s(hostile::group(rng)))
                .with_key_type(*[0i8, 1, 2, -1, i8::MAX].choose(rng)?)
                .with_coordinator_keys((0..rng.gen_range(0..4)).map(|_| s(hostile::group(rng))).collect()),
        ),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(group(rng))
                .with_session_timeout_ms(hostile::int(rng))
                .with_rebalance_timeout_ms(hostile::int(rng))
                .with_member_id(s(hostile::id(rng, seen)))
                .with_group_instance_id(opt(rng))
                .with_protocol_type(s(["consumer", "", "connect"].choose(rng)?.to_string()))
                .with_reason(opt(rng))
                .with_protocols(
                    (0..*[0usize, 1, 2, 50].choose(rng)?)
                        .map(|i| {
                            join_group_request::JoinGroupRequestProtocol::default()
                                .with_name(s(["range", "roundrobin", ""][i % 3].to_string()))
                                .with_metadata(hostile::bytes(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(group(rng))
                .with_generation_id(hostile::int(rng))
                .with_member_id(s(hostile::id(rng, seen)))
                .with_group_instance_id(opt(rng))
                .with_protocol_type(opt(rng))
                .with_protocol_name(opt(rng))
                .with_assignments(
                    (0..rng.gen_range(0..5))
                        .map(|_| {
                            sync_group_request::SyncGroupRequestAssignment::default()
                                .with_member_id(s(hostile::id(rng, seen)))
                                .with_assignment(hostile::bytes(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(group(rng))
                .with_generation_id(hostile::int(rng))
                .with_member_id(s(hostile::id(rng, seen)))
                .with_group_instance_id(opt(rng)),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(group(rng))
                .with_member_id(s(hostile::id(rng, seen)))
                .with_members(
                    (0..rng.gen_range(0..4))
                        .map(|_| {
                            leave_group_request::MemberIdentity::default()
                                .with_member_id(s(hostile::id(rng, seen)))
                                .with_group_instance_id(opt(rng))
                                .with_reason(opt(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group(rng))
                .with_generation_id_or_member_epoch(hostile::int(rng))
                .with_member_id(s(hostile::id(rng, seen)))
                .with_group_instance_id(opt(rng))
                .with_topics(
                    (0..rng.gen_range(0..3))
                        .map(|_| {
                            offset_commit_request::OffsetCommitRequestTopic::default()
                                .with_name(topic(rng))
                                .with_partitions(
                                    (0..rng.gen_range(0..4))
                                        .map(|_| {
                                            offset_commit_request::OffsetCommitRequestPartition::default()
                                                .with_partition_index(*hostile::PARTITIONS.choose(rng).unwrap_or(&0))
                                                .with_committed_offset(*hostile::OFFSETS.choose(rng).unwrap_or(&0))
                                                .with_committed_leader_epoch(hostile::int(rng))
                                                .with_committed_metadata(opt(rng))
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                ),
        ),
        ApiKey::OffsetFetch => {
            let topics = |rng: &mut rand::rngs::StdRng| {
                rng.gen_bool(0.7).then(|| {
                    (0..rng.gen_range(0..3))
                        .map(|_| {
                            offset_fetch_request::OffsetFetchRequestTopic::default()
                                .with_name(topic(rng))
                                .with_partition_indexes(vec![*hostile::PARTITIONS.choose(rng).unwrap_or(&0)])
                        })
                        .collect()
                })
            };
            let groups = (0..rng.gen_range(0..3))
                .map(|_| {
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group(rng))
                        .with_member_id(opt(rng))
                        .with_member_epoch(hostile::int(rng))
                        .with_topics(rng.gen_bool(0.5).then(|| {
                            vec![offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(topic(rng))
                                .with_partition_indexes(vec![0, -1, 1])]
                        }))
                })
                .collect();
            RequestKind::OffsetFetch(
                OffsetFetchRequest::default()
                    .with_group_id(group(rng))
                    .with_topics(topics(rng))
                    .with_groups(groups)
                    .with_require_stable(rng.gen()),
            )
        }
        ApiKey::ListGroups => RequestKind::ListGroups(
            ListGroupsRequest::default()
                .with_states_filter((0..rng.gen_range(0..3)).map(|_| s(hostile::id(rng, &["Stable".into()]))).collect())
                .with_types_filter((0..rng.gen_range(0..2)).map(|_| s(hostile::id(rng, &["classic".into()]))).collect()),
        ),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups((0..rng.gen_range(0..4)).map(|_| group(rng)).collect())
                .with_include_authorized_operations(rng.gen()),
        ),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names((0..rng.gen_range(0..4)).map(|_| group(rng)).collect()),
        ),
        _ => return None,
    })
}

#[test]
fn hostile_group_requests_at_every_version_neither_panic_nor_grow_without_bound() {
    // Structurally valid requests of every group API at every advertised version, with
    // hostile fields (extreme numbers, empty and 40 KB strings, bogus and stolen member
    // ids, dozens of protocols), encoded and decoded as on the wire, then handled; the
    // member ids the broker hands out are fed back so that requests meet real groups.
    // Every parked reply eventually comes; the coordinator never holds more than its caps.
    use rand::{Rng, SeedableRng};
    let config = manual_config(|c| {
        c.offsets_topic_replication_factor = 1;
        c.offsets_topic_num_partitions = 5;
        c.group_max_size = 6;
        c.group_coordinator_max_groups = 8;
        c.group_coordinator_max_members = 20;
        c.group_coordinator_max_committed_offsets = 12;
    });
    let apis = KafkaApis::new(ReplicaManager::new(config));
    exchange(
        &apis,
        12,
        RequestKind::Metadata(
            MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("t")))
                ])),
        ),
    );
    let c = apis.group_coordinator.clone();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6a0c);
    let mut seen: Vec<String> = Vec::new();
    let mut parked: Vec<tokio::sync::oneshot::Receiver<ResponseKind>> = Vec::new();
    let mut handled = 0;
    let mut states_seen = std::collections::BTreeSet::new();
    for round in 0..40 {
        for &(api, min, max) in SUPPORTED_APIS {
            for version in min..=max {
                let Some(request) = hostile_group_request(&mut rng, api, &seen) else {
                    continue;
                };
                let mut buf = bytes::BytesMut::new();
                if request.encode(&mut buf, version).is_err() {
                    continue; // a field this version cannot carry
                }
                let mut frame = buf.freeze();
                let Ok(request) = RequestKind::decode(api, &mut frame, version) else {
                    continue;
                };
                let ctx = RequestContext {
                    correlation_id: round,
                    client_id: "fuzz".into(),
                    api_version: version,
                    peer: "127.0.0.1:1".parse().unwrap(),
                    trace: crate::telemetry::TraceId::NONE,
                };
                let response = match apis.handle(&ctx, request) {
                    Reply::Now(r) => Some(*r),
                    Reply::Later(rx) => {
                        parked.push(rx);
                        None
                    }
                    Reply::Nothing | Reply::Close(_) => None,
                };
                if let Some(response) = response {
                    round_trip(api, version, &response);
                    if let ResponseKind::JoinGroup(j) = &response {
                        seen.push(j.member_id.to_string());
                    }
                }
                handled += 1;
                let (groups, members, offsets) = c.counts();
                assert!(
                    groups <= 8 && members <= 20 && offsets <= 12,
                    "{groups} groups, {members} members, {offsets} offsets"
                );
                assert!(
                    c.heartbeat_purgatory.delayed() <= 20 + 8,
                    "heartbeats: {}",
                    c.heartbeat_purgatory.delayed()
                );
                assert!(
                    c.rebalance_purgatory.delayed() <= 3 * 8,
                    "rebalances: {}",
                    c.rebalance_purgatory.delayed()
                );
            }
        }
        for g in c.snapshot(8).list {
            states_seen.insert(g.state);
        }
        apis.replica_manager
            .timer
            .advance_by(rng.gen_range(0..20_000));
        parked.retain_mut(|rx| match rx.try_recv() {
            Ok(response) => {
                if let ResponseKind::JoinGroup(j) = &response {
                    seen.push(j.member_id.to_string());
                }
                false
            }
            Err(tokio::sync::oneshot::error::TryRecvError::Empty) => true,
            Err(tokio::sync::oneshot::error::TryRecvError::Closed) => {
                panic!("a parked reply was dropped unanswered")
            }
        });
        seen.truncate(64);
    }
    assert!(handled > 1000, "only {handled} hostile requests handled");
    eprintln!("hostile group requests: {handled} handled, group states seen {states_seen:?}");
    assert!(
        states_seen.contains("CompletingRebalance") || states_seen.contains("Stable"),
        "the fuzz never got a group past its first join: {states_seen:?}"
    );
    // Far past every session timeout: no member outlives its session, except those a
    // hostile rebalance timeout (up to i32::MAX ms) keeps waiting in a DelayedJoin.
    apis.replica_manager.timer.advance_by(1_900_000);
    for mut rx in parked {
        if rx.try_recv().is_err() {
            assert!(
                c.rebalance_purgatory.delayed() > 0,
                "a reply waits with nothing to complete it"
            );
        }
    }
    let (_, members, _) = c.counts();
    assert!(members <= 20);
}
