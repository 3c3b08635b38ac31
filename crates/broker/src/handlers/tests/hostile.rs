//! Structurally valid requests of every group API and of the admin APIs CreatePartitions,
//! OffsetDelete and DescribeLogDirs, at every advertised version, with
//! hostile values: the broker neither panics nor grows without bound.

use super::*;

/// Values that have broken brokers: empty, huge, negative, extreme.
pub(super) mod values {
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
    let group = |rng: &mut rand::rngs::StdRng| GroupId(s(values::group(rng)));
    let opt = |rng: &mut rand::rngs::StdRng| -> Option<StrBytes> {
        rng.gen_bool(0.6).then(|| s(values::id(rng, seen)))
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
                .with_key(s(values::group(rng)))
                .with_key_type(*[0i8, 1, 2, -1, i8::MAX].choose(rng)?)
                .with_coordinator_keys((0..rng.gen_range(0..4)).map(|_| s(values::group(rng))).collect()),
        ),
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(group(rng))
                .with_session_timeout_ms(values::int(rng))
                .with_rebalance_timeout_ms(values::int(rng))
                .with_member_id(s(values::id(rng, seen)))
                .with_group_instance_id(opt(rng))
                .with_protocol_type(s(["consumer", "", "connect"].choose(rng)?.to_string()))
                .with_reason(opt(rng))
                .with_protocols(
                    (0..*[0usize, 1, 2, 50].choose(rng)?)
                        .map(|i| {
                            join_group_request::JoinGroupRequestProtocol::default()
                                .with_name(s(["range", "roundrobin", ""][i % 3].to_string()))
                                .with_metadata(values::bytes(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::SyncGroup => RequestKind::SyncGroup(
            SyncGroupRequest::default()
                .with_group_id(group(rng))
                .with_generation_id(values::int(rng))
                .with_member_id(s(values::id(rng, seen)))
                .with_group_instance_id(opt(rng))
                .with_protocol_type(opt(rng))
                .with_protocol_name(opt(rng))
                .with_assignments(
                    (0..rng.gen_range(0..5))
                        .map(|_| {
                            sync_group_request::SyncGroupRequestAssignment::default()
                                .with_member_id(s(values::id(rng, seen)))
                                .with_assignment(values::bytes(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(group(rng))
                .with_generation_id(values::int(rng))
                .with_member_id(s(values::id(rng, seen)))
                .with_group_instance_id(opt(rng)),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(
            LeaveGroupRequest::default()
                .with_group_id(group(rng))
                .with_member_id(s(values::id(rng, seen)))
                .with_members(
                    (0..rng.gen_range(0..4))
                        .map(|_| {
                            leave_group_request::MemberIdentity::default()
                                .with_member_id(s(values::id(rng, seen)))
                                .with_group_instance_id(opt(rng))
                                .with_reason(opt(rng))
                        })
                        .collect(),
                ),
        ),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(
            OffsetCommitRequest::default()
                .with_group_id(group(rng))
                .with_generation_id_or_member_epoch(values::int(rng))
                .with_member_id(s(values::id(rng, seen)))
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
                                                .with_partition_index(*values::PARTITIONS.choose(rng).unwrap_or(&0))
                                                .with_committed_offset(*values::OFFSETS.choose(rng).unwrap_or(&0))
                                                .with_committed_leader_epoch(values::int(rng))
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
                                .with_partition_indexes(vec![*values::PARTITIONS.choose(rng).unwrap_or(&0)])
                        })
                        .collect()
                })
            };
            let groups = (0..rng.gen_range(0..3))
                .map(|_| {
                    offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(group(rng))
                        .with_member_id(opt(rng))
                        .with_member_epoch(values::int(rng))
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
                .with_states_filter((0..rng.gen_range(0..3)).map(|_| s(values::id(rng, &["Stable".into()]))).collect())
                .with_types_filter((0..rng.gen_range(0..2)).map(|_| s(values::id(rng, &["classic".into()]))).collect()),
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
    auto_create(&apis, "t");
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
                let Some(request) = over_the_wire(api, version, &request) else {
                    continue; // a field this version cannot carry
                };
                let ctx = context("fuzz", round, version);
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

/// A structurally valid CreatePartitions, OffsetDelete or DescribeLogDirs with hostile
/// field values: huge and negative counts, manual assignments of every wrong shape,
/// partitions and broker ids at the ends of i32.
fn hostile_admin_request(rng: &mut rand::rngs::StdRng, api: ApiKey) -> Option<RequestKind> {
    use rand::seq::SliceRandom;
    use rand::Rng;
    let topic = |rng: &mut rand::rngs::StdRng| {
        name(
            ["t", "u", "nope", "", "__consumer_offsets"]
                .choose(rng)
                .copied()
                .unwrap_or("t"),
        )
    };
    let partitions = |rng: &mut rand::rngs::StdRng| -> Vec<i32> {
        (0..*[0usize, 1, 3, 2_000].choose(rng).unwrap_or(&1))
            .map(|_| *values::PARTITIONS.choose(rng).unwrap_or(&0))
            .collect()
    };
    Some(match api {
        ApiKey::CreatePartitions => {
            use create_partitions_request::{CreatePartitionsAssignment, CreatePartitionsTopic};
            let topics = (0..rng.gen_range(0..4))
                .map(|_| {
                    let count = if rng.gen_bool(0.5) {
                        values::int(rng)
                    } else {
                        rng.gen_range(0..40)
                    };
                    let assignments = rng.gen_bool(0.5).then(|| {
                        (0..*[0usize, 1, 2, 5_000].choose(rng).unwrap_or(&1))
                            .map(|_| {
                                let ids = (0..rng.gen_range(0..4))
                                    .map(|_| {
                                        BrokerId(*[1, 2, 3, -1, i32::MAX].choose(rng).unwrap_or(&1))
                                    })
                                    .collect();
                                CreatePartitionsAssignment::default().with_broker_ids(ids)
                            })
                            .collect()
                    });
                    CreatePartitionsTopic::default()
                        .with_name(topic(rng))
                        .with_count(count)
                        .with_assignments(assignments)
                })
                .collect();
            RequestKind::CreatePartitions(
                CreatePartitionsRequest::default()
                    .with_topics(topics)
                    .with_timeout_ms(values::int(rng))
                    .with_validate_only(rng.gen()),
            )
        }
        ApiKey::OffsetDelete => {
            use offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic};
            let topics = (0..rng.gen_range(0..4))
                .map(|_| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic(rng))
                        .with_partitions(
                            partitions(rng)
                                .into_iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(p)
                                })
                                .collect(),
                        )
                })
                .collect();
            RequestKind::OffsetDelete(
                OffsetDeleteRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(values::group(rng))))
                    .with_topics(topics),
            )
        }
        ApiKey::DescribeLogDirs => {
            use describe_log_dirs_request::DescribableLogDirTopic;
            let topics = rng.gen_bool(0.7).then(|| {
                (0..rng.gen_range(0..4))
                    .map(|_| {
                        DescribableLogDirTopic::default()
                            .with_topic(topic(rng))
                            .with_partitions(partitions(rng))
                    })
                    .collect()
            });
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(topics))
        }
        _ => return None,
    })
}

#[test]
fn hostile_admin_requests_at_every_version_neither_panic_nor_grow_without_bound() {
    // CreatePartitions, OffsetDelete and DescribeLogDirs at every advertised version with
    // hostile fields, encoded and decoded as on the wire, then handled, between commits
    // that give OffsetDelete offsets to delete. A count of i32::MAX is refused by the caps
    // before anything is allocated, so the broker never holds more than max.partitions.
    use rand::SeedableRng;
    let config = manual_config(|c| {
        c.offsets_topic_replication_factor = 1;
        c.offsets_topic_num_partitions = 3;
        c.max_partitions = 60;
    });
    let apis = KafkaApis::new(ReplicaManager::new(config));
    for topic in ["t", "u"] {
        auto_create(&apis, topic);
    }
    let rm = apis.replica_manager.clone();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xad31);
    let mut handled = 0;
    let mut grown = 0;
    for round in 0..60 {
        // Offsets for the fuzzed OffsetDeletes to find (a simple consumer's commit).
        let commit = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(format!("g{}", round % 4))))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(name("t"))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(round.into()),
                    ]),
            ]);
        exchange(&apis, 8, RequestKind::OffsetCommit(commit));
        for &(api, min, max) in SUPPORTED_APIS {
            for version in min..=max {
                let Some(request) = hostile_admin_request(&mut rng, api) else {
                    continue;
                };
                let Some(request) = over_the_wire(api, version, &request) else {
                    continue; // a field this version cannot carry
                };
                let response = answered(&apis, &context("fuzz", round, version), api, request);
                if let ResponseKind::CreatePartitions(r) = &response {
                    grown += r.results.iter().filter(|t| t.error_code == 0).count();
                }
                handled += 1;
                let held = rm.topics.partitions().len();
                assert!(held <= 60, "{held} partitions held, max.partitions is 60");
            }
        }
    }
    assert!(
        handled > 500,
        "only {handled} hostile admin requests handled"
    );
    assert!(grown > 0, "the fuzz never grew a topic");
    eprintln!("hostile admin requests: {handled} handled, {grown} topics grown");
}
