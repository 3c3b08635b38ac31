//! Every handler's response must encode at every version we advertise: the Kafka message
//! schemas add and drop fields across versions, and a field set where the version has no
//! room for it makes the encoder fail (and the connection close). Each case runs a real
//! request through the handler, encodes the reply at that version and decodes it back.
//!
//! The requests come from [`REQUESTS`], one builder per API, each given the version. The
//! group APIs' builders take mostly the paths that answer at once (unknown members, errors,
//! empty groups); their success paths are walked version by version in `group_life`.

use super::*;

/// What to send an API at a version.
type Builder = fn(i16) -> Vec<RequestKind>;

/// Every API we advertise, with its requests. An API missing here fails the test.
const REQUESTS: &[(ApiKey, Builder)] = &[
    (ApiKey::ApiVersions, api_versions),
    (ApiKey::Metadata, metadata),
    (ApiKey::Produce, produce),
    (ApiKey::Fetch, fetch),
    (ApiKey::ListOffsets, list_offsets),
    (ApiKey::InitProducerId, init_producer_id),
    (ApiKey::AddPartitionsToTxn, add_partitions_to_txn),
    (ApiKey::AddOffsetsToTxn, add_offsets_to_txn),
    (ApiKey::EndTxn, end_txn),
    (ApiKey::TxnOffsetCommit, txn_offset_commit),
    (ApiKey::DescribeProducers, describe_producers),
    (ApiKey::DescribeTransactions, describe_transactions),
    (ApiKey::ListTransactions, list_transactions),
    (ApiKey::OffsetForLeaderEpoch, offset_for_leader_epoch),
    (ApiKey::CreateTopics, create_topics),
    (ApiKey::DeleteTopics, delete_topics),
    (ApiKey::DeleteRecords, delete_records),
    (ApiKey::DescribeConfigs, describe_configs),
    (ApiKey::AlterConfigs, alter_configs),
    (ApiKey::IncrementalAlterConfigs, incremental_alter_configs),
    (ApiKey::FindCoordinator, find_coordinator),
    (ApiKey::JoinGroup, join_group),
    (ApiKey::SyncGroup, sync_group),
    (ApiKey::Heartbeat, heartbeat),
    (ApiKey::LeaveGroup, leave_group),
    (ApiKey::OffsetCommit, offset_commit),
    (ApiKey::OffsetFetch, offset_fetch),
    (ApiKey::ListGroups, list_groups),
    (ApiKey::DescribeGroups, describe_groups),
    (ApiKey::DeleteGroups, delete_groups),
    (ApiKey::CreatePartitions, create_partitions),
    (ApiKey::OffsetDelete, offset_delete),
    (ApiKey::DescribeLogDirs, describe_log_dirs),
];

fn requests_for(api: ApiKey) -> Builder {
    REQUESTS
        .iter()
        .find(|(a, _)| *a == api)
        .map(|(_, b)| *b)
        .unwrap_or_else(|| panic!("no test requests for {api:?}: add a row to REQUESTS"))
}

#[test]
fn every_advertised_api_has_test_requests() {
    let missing: Vec<ApiKey> = SUPPORTED_APIS
        .iter()
        .map(|(api, _, _)| *api)
        .filter(|api| !REQUESTS.iter().any(|(a, _)| a == api))
        .collect();
    assert!(missing.is_empty(), "no test requests for {missing:?}");
}

#[test]
fn every_handler_response_encodes_and_decodes_at_every_advertised_version() {
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let mut checked = 0;
    for &(api, min, max) in SUPPORTED_APIS {
        let min = if api == ApiKey::Produce {
            crate::handlers::PRODUCE_MIN_ACCEPTED
        } else {
            min
        };
        for version in min..=max {
            for request in requests_for(api)(version) {
                let ctx = context("test", 7, version);
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
                round_trip(api, version, &response);
                checked += 1;
            }
        }
    }
    assert!(checked > 150, "checked {checked} responses");
}

fn group(s: &str) -> GroupId {
    GroupId(StrBytes::from_string(s.to_string()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn join(group_id: &str, session: i32, instance: Option<&str>) -> JoinGroupRequest {
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
}

fn api_versions(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::ApiVersions(ApiVersionsRequest::default())]
}

fn metadata(_v: i16) -> Vec<RequestKind> {
    vec![
        RequestKind::Metadata(MetadataRequest::default().with_topics(None)),
        RequestKind::Metadata(
            MetadataRequest::default()
                .with_allow_auto_topic_creation(true)
                .with_topics(Some(vec![
                    MetadataRequestTopic::default().with_name(Some(name("t"))),
                    MetadataRequestTopic::default().with_name(Some(name("bad name!"))),
                ])),
        ),
    ]
}

fn produce(_v: i16) -> Vec<RequestKind> {
    [1i16, -1, 7]
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
        .collect()
}

fn fetch(_v: i16) -> Vec<RequestKind> {
    let topic_t = || FetchTopic::default().with_topic(name("t"));
    [-1, 2]
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
        .collect()
}

fn list_offsets(v: i16) -> Vec<RequestKind> {
    [-1i64, -2, -3, 0, i64::MAX]
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
        .collect()
}

fn init_producer_id(_v: i16) -> Vec<RequestKind> {
    vec![
        RequestKind::InitProducerId(InitProducerIdRequest::default().with_transactional_id(None)),
        RequestKind::InitProducerId(
            InitProducerIdRequest::default()
                .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("tx")))),
        ),
    ]
}

fn transactional_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

// The transaction APIs of an id that never called InitProducerId (the "tx" above has,
// with the default timeout, which is refused), and of unknown partitions.
fn add_partitions_to_txn(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::AddPartitionsToTxn(
        AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(transactional_id("nobody"))
            .with_v3_and_below_producer_id(ProducerId(5))
            .with_v3_and_below_topics(vec![
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![0, 9]),
            ]),
    )]
}

fn add_offsets_to_txn(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::AddOffsetsToTxn(
        AddOffsetsToTxnRequest::default()
            .with_transactional_id(transactional_id("nobody"))
            .with_group_id(GroupId(StrBytes::from_static_str("g"))),
    )]
}

fn end_txn(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::EndTxn(
        EndTxnRequest::default()
            .with_transactional_id(transactional_id("nobody"))
            .with_committed(true),
    )]
}

fn txn_offset_commit(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::TxnOffsetCommit(
        TxnOffsetCommitRequest::default()
            .with_transactional_id(transactional_id("nobody"))
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(vec![
                txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                            .with_committed_offset(3),
                    ]),
            ]),
    )]
}

fn describe_producers(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DescribeProducers(
        DescribeProducersRequest::default().with_topics(vec![
            describe_producers_request::TopicRequest::default()
                .with_name(name("t"))
                .with_partition_indexes(vec![0, 9]),
        ]),
    )]
}

fn describe_transactions(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DescribeTransactions(
        DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![transactional_id("tx"), transactional_id("nobody")]),
    )]
}

fn list_transactions(_v: i16) -> Vec<RequestKind> {
    vec![
        RequestKind::ListTransactions(ListTransactionsRequest::default()),
        RequestKind::ListTransactions(
            ListTransactionsRequest::default()
                .with_state_filters(vec![
                    StrBytes::from_static_str("Ongoing"),
                    StrBytes::from_static_str("Bogus"),
                ])
                .with_duration_filter(1000),
        ),
    ]
}

fn offset_for_leader_epoch(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::OffsetForLeaderEpoch(
        OffsetForLeaderEpochRequest::default().with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![
                OffsetForLeaderPartition::default()
                    .with_partition(0)
                    .with_leader_epoch(0),
                OffsetForLeaderPartition::default()
                    .with_partition(3)
                    .with_leader_epoch(0),
            ])]),
    )]
}

fn create_topics(v: i16) -> Vec<RequestKind> {
    vec![RequestKind::CreateTopics(
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
    )]
}

fn delete_topics(v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DeleteTopics(
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
    )]
}

/// Topic `t` exists (the produce builder auto-creates it) with one replica per follower,
/// so a deletion parks until the timeout (nobody fetches here): -1, an offset above the
/// HW, and an unknown topic.
fn delete_records(_v: i16) -> Vec<RequestKind> {
    [("t", -1i64), ("t", 99), ("nope", 0)]
        .into_iter()
        .map(|(topic, offset)| {
            RequestKind::DeleteRecords(
                DeleteRecordsRequest::default()
                    .with_timeout_ms(500)
                    .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![
                            delete_records_request::DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(offset),
                        ])]),
            )
        })
        .collect()
}

fn describe_configs(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DescribeConfigs(
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
    )]
}

fn incremental_alter_configs(_v: i16) -> Vec<RequestKind> {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let config = |name: &str, op: i8, value: Option<&str>| {
        AlterableConfig::default()
            .with_name(text(name))
            .with_config_operation(op)
            .with_value(value.map(text))
    };
    let resource = |resource_type: i8, name: &str, configs: Vec<AlterableConfig>| {
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configs(configs)
    };
    [false, true]
        .into_iter()
        .map(|validate_only| {
            RequestKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsRequest::default()
                    .with_validate_only(validate_only)
                    .with_resources(vec![
                        resource(2, "t", vec![config("retention.bytes", 0, Some("4096"))]),
                        resource(2, "t", vec![config("cleanup.policy", 2, Some("compact"))]),
                        resource(2, "nope", vec![config("retention.ms", 1, None)]),
                        resource(4, "1", vec![config("num.partitions", 0, Some("3"))]),
                        resource(9, "x", vec![config("a", 9, None)]),
                    ]),
            )
        })
        .collect()
}

fn alter_configs(_v: i16) -> Vec<RequestKind> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resource = |resource_type: i8, name: &str, configs: &[(&str, Option<&str>)]| {
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(text(k))
                            .with_value(v.map(text))
                    })
                    .collect(),
            )
    };
    vec![RequestKind::AlterConfigs(
        AlterConfigsRequest::default().with_resources(vec![
            resource(2, "t", &[("retention.bytes", Some("4096"))]),
            resource(2, "nope", &[]),
            resource(2, "", &[("retention.ms", None)]),
            resource(4, "1", &[("num.partitions", Some("3"))]),
        ]),
    )]
}

fn find_coordinator(v: i16) -> Vec<RequestKind> {
    [0i8, 1, 9]
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
        .collect()
}

fn join_group(v: i16) -> Vec<RequestKind> {
    {
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
}

fn sync_group(v: i16) -> Vec<RequestKind> {
    vec![RequestKind::SyncGroup(
        SyncGroupRequest::default()
            .with_group_id(group(&format!("jg-{v}")))
            .with_member_id(text("nobody")),
    )]
}

fn heartbeat(_v: i16) -> Vec<RequestKind> {
    vec![
        RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(group("jg-0"))),
        RequestKind::Heartbeat(HeartbeatRequest::default()),
    ]
}

fn leave_group(v: i16) -> Vec<RequestKind> {
    {
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
}

fn offset_commit(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::OffsetCommit(
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
    )]
}

fn offset_fetch(v: i16) -> Vec<RequestKind> {
    {
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
}

fn list_groups(v: i16) -> Vec<RequestKind> {
    {
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
}

fn describe_groups(v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DescribeGroups(
        DescribeGroupsRequest::default()
            .with_groups(vec![group("oc"), group("nope"), group("jg-0")])
            .with_include_authorized_operations(v >= 3),
    )]
}

fn delete_groups(_v: i16) -> Vec<RequestKind> {
    vec![RequestKind::DeleteGroups(
        DeleteGroupsRequest::default().with_groups_names(vec![
            group("nope"),
            group("oc"),
            group("jg-0"),
        ]),
    )]
}

fn create_partitions(v: i16) -> Vec<RequestKind> {
    use create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
    // "t" grows by one partition per version (a success), then the refusals.
    let grow = |topic: &str, count: i32, assignments: Option<Vec<Vec<i32>>>| {
        CreatePartitionsTopic::default()
            .with_name(name(topic))
            .with_count(count)
            .with_assignments(assignments.map(|a| {
                a.into_iter()
                    .map(|ids| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                    })
                    .collect()
            }))
    };
    vec![RequestKind::CreatePartitions(
        CreatePartitionsRequest::default()
            .with_timeout_ms(1_000)
            .with_topics(vec![
                grow("t", 11 + i32::from(v), None),
                grow("nope", 2, None),
                grow("oc-topic", 1, None),
                grow("dup", 3, None),
                grow("dup", 4, Some(vec![vec![1]])),
            ]),
    )]
}

fn offset_delete(_v: i16) -> Vec<RequestKind> {
    use offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
    let topics = || {
        ["t", "nope"]
            .into_iter()
            .map(|topic| {
                OffsetDeleteRequestTopic::default()
                    .with_name(name(topic))
                    .with_partitions(vec![
                        OffsetDeleteRequestPartition::default().with_partition_index(0)
                    ])
            })
            .collect::<Vec<_>>()
    };
    ["oc", "nope", "", "jg-0"]
        .into_iter()
        .map(|g| {
            RequestKind::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(group(g))
                    .with_topics(topics()),
            )
        })
        .collect()
}

fn describe_log_dirs(_v: i16) -> Vec<RequestKind> {
    use describe_log_dirs_request::DescribableLogDirTopic;
    vec![
        RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(None)),
        RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default()
                .with_topic(name("t"))
                .with_partitions(vec![0, 5]),
        ]))),
    ]
}
