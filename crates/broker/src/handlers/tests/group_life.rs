//! One group's whole life, at each version of every group API.

use super::*;

#[test]
fn a_whole_group_life_encodes_at_every_advertised_version() {
    // One group per step i: every group API at version min(i, its max), down the success
    // paths — join (with MEMBER_ID_REQUIRED from v4), sync with an assignment, heartbeat,
    // commit, fetch, describe a Stable group, list, leave, delete — with every response
    // round-tripped through the codec at its version.
    let apis = KafkaApis::new(ReplicaManager::new(group_test_config()));
    let text = |s: &str| StrBytes::from_string(s.to_string());
    auto_create(&apis, "t");
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
