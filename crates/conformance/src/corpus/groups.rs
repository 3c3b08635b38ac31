//! The classic group protocol, request by request: FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups and
//! DeleteGroups, each on its error paths as well as its happy one.
//!
//! Every group is named (by [`Ctx::group`]) so that node 1 coordinates it on Kafka too.
//! The requests themselves, and a member's steps, are built in `group_requests.rs`.

use std::time::{Duration, Instant};

use anyhow::Result;
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, JoinGroupRequest,
    JoinGroupResponse, ListGroupsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{scenario, Ctx, Scenario};
use crate::observe::{error_name, Observation};
use crate::target::{find_coordinator_request, name, topic_name, Target, LEADER};

use super::group_requests::*;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "find_coordinator/group, transaction and bad keys",
            true,
            find_coordinator
        ),
        scenario!("join_group/a new member", true, join_new_member),
        scenario!("join_group/errors", true, join_errors),
        scenario!(
            "join_group/another protocol type",
            true,
            join_other_protocol_type
        ),
        scenario!("sync_group/assignment and errors", true, sync_group),
        scenario!("heartbeat/errors and a rebalance", true, heartbeat),
        scenario!("leave_group/known and unknown members", true, leave_group),
        scenario!(
            "offset_commit/simple, generation and member checks",
            true,
            offset_commit
        ),
        scenario!(
            "offset_fetch/unknown group, all topics, require_stable",
            true,
            offset_fetch
        ),
        scenario!(
            "describe_groups/stable, empty, unknown",
            true,
            describe_groups
        ),
        scenario!(
            "list_groups/with and without a state filter",
            true,
            list_groups
        ),
        scenario!(
            "delete_groups/non-empty, empty, unknown",
            true,
            delete_groups
        ),
    ]
}

async fn find_coordinator(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    for (label, key_type, key) in [
        ("group", 0, group.as_str()),
        ("empty_group_id", 0, ""),
        ("bad_key_type", 7, group.as_str()),
    ] {
        let resp = t
            .leader(&find_coordinator_request(key_type, key), 4)
            .await?;
        let first = resp.coordinators.first();
        o.error(format!("{label}.error"), first.map_or(-1, |c| c.error_code));
        // Kafka spreads groups over its brokers; ours coordinates all of them, so only the
        // group named to be on node 1 has the same node on both.
        if label == "group" {
            o.set(format!("{label}.node"), first.map_or(-9, |c| c.node_id.0));
        }
    }
    // Version 3 and below carry one key and answer at the top level.
    let resp = t
        .leader(
            &FindCoordinatorRequest::default()
                .with_key(name(&group))
                .with_key_type(0),
            3,
        )
        .await?;
    o.error("v3.error", resp.error_code);
    o.set("v3.node", resp.node_id.0);
    Ok(o)
}

async fn join_new_member(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    let first = consumer_join(t, &group, "", &topic).await?;
    o.error("first.error", first.error_code);
    o.set("first.member_id_given", !first.member_id.is_empty());
    o.set("first.generation", first.generation_id);
    let id = first.member_id.to_string();
    let joined = consumer_join(t, &group, &id, &topic).await?;
    see_join(&mut o, "second.", &joined, &id);
    // A member of an older client, JoinGroup v3, gets its id and joins in one step.
    let old_group = c.group("v3");
    let v3 = t
        .send(
            LEADER,
            &join_request(&old_group, "", "consumer", 10_000, &topic),
            3,
        )
        .await?;
    let v3_id = v3.member_id.to_string();
    see_join(&mut o, "v3.", &v3, &v3_id);
    leave(t, &group, &[&id]).await?;
    leave(t, &old_group, &[&v3_id]).await?;
    Ok(o)
}

fn see_join(o: &mut Observation, prefix: &str, r: &JoinGroupResponse, me: &str) {
    o.error(format!("{prefix}error"), r.error_code);
    o.set(format!("{prefix}generation"), r.generation_id);
    o.set(
        format!("{prefix}protocol_type"),
        r.protocol_type.as_deref().unwrap_or("null"),
    );
    o.set(
        format!("{prefix}protocol_name"),
        r.protocol_name.as_deref().unwrap_or("null"),
    );
    o.set(
        format!("{prefix}leader_is_me"),
        !me.is_empty() && r.leader.as_str() == me,
    );
    o.set(format!("{prefix}members"), r.members.len());
    o.set(
        format!("{prefix}member_id_is_mine"),
        r.member_id.as_str() == me,
    );
}

async fn join_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    let cases = [
        (
            "session_timeout_too_small",
            join_request(&group, "", "consumer", 1_000, &topic),
        ),
        (
            "session_timeout_too_large",
            join_request(&group, "", "consumer", 2_000_000, &topic),
        ),
        (
            "empty_group_id",
            join_request("", "", "consumer", 10_000, &topic),
        ),
        (
            "unknown_member_of_a_new_group",
            join_request(&group, "ghost", "consumer", 10_000, &topic),
        ),
        (
            "no_protocols",
            join_request(&group, "", "consumer", 10_000, &topic).with_protocols(Vec::new()),
        ),
        (
            "empty_protocol_type",
            join_request(&c.group("empty-type"), "", "", 10_000, &topic),
        ),
    ];
    for (label, req) in cases {
        let resp = t.send(LEADER, &req, JOIN_VERSION).await?;
        o.error(label, resp.error_code);
    }
    Ok(o)
}

async fn join_other_protocol_type(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    let m = join_alone(t, &group, &topic).await?;
    let resp = t
        .send(
            LEADER,
            &join_request(&group, "", "connect", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
    o.error("connect_member.error", resp.error_code);
    // A consumer member with no protocol in common: "roundrobin" only, where the group has "range".
    let mut other = join_request(&group, "", "consumer", 10_000, &topic);
    other.protocols[0].name = name("roundrobin");
    let resp = t.send(LEADER, &other, JOIN_VERSION).await?;
    o.error("no_common_protocol.error", resp.error_code);
    o.error(
        "member_still_there.heartbeat",
        heartbeat_code(t, &group, &m.id, m.generation).await?,
    );
    leave(t, &group, &[&m.id]).await?;
    Ok(o)
}

async fn sync_group(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    let m = join_unsynced(t, &group, &topic).await?;
    let wrong_generation = Member {
        id: m.id.clone(),
        generation: m.generation + 5,
        leader: m.leader,
    };
    let resp = sync(t, &group, &wrong_generation, Some(&topic)).await?;
    o.error("wrong_generation", resp.error_code);
    let stranger = Member {
        id: "ghost".to_owned(),
        generation: m.generation,
        leader: false,
    };
    let resp = sync(t, &group, &stranger, None).await?;
    o.error("unknown_member", resp.error_code);
    let resp = sync(t, &c.group("nobody"), &stranger, None).await?;
    o.error("unknown_group", resp.error_code);
    let mut wrong_protocol = sync_request(&group, &m, Some(&topic));
    wrong_protocol.protocol_name = Some(name("roundrobin"));
    let resp = t.send(LEADER, &wrong_protocol, SYNC_VERSION).await?;
    o.error("wrong_protocol_name", resp.error_code);
    // The leader's sync, then again in the same generation: the same assignment again.
    for (label, protocol_too) in [("leader", true), ("again", false)] {
        let resp = sync(t, &group, &m, Some(&topic)).await?;
        o.error(format!("{label}.error"), resp.error_code);
        o.set(
            format!("{label}.assignment_is_what_it_sent"),
            resp.assignment == assignment(&topic, &[0]),
        );
        if protocol_too {
            o.set(
                format!("{label}.protocol_name"),
                resp.protocol_name.as_deref().unwrap_or("null"),
            );
        }
    }
    leave(t, &group, &[&m.id]).await?;
    Ok(o)
}

async fn heartbeat(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    o.error(
        "unknown_group",
        heartbeat_code(t, &c.group("nobody"), "ghost", 1).await?,
    );
    // Between JoinGroup and SyncGroup (CompletingRebalance).
    let a = join_unsynced(t, &group, &topic).await?;
    o.error(
        "before_sync",
        heartbeat_code(t, &group, &a.id, a.generation).await?,
    );
    sync(t, &group, &a, Some(&topic)).await?;
    for (label, member_id, generation) in [
        ("stable", a.id.as_str(), a.generation),
        ("wrong_generation", &a.id, a.generation + 1),
        ("unknown_member", "ghost", a.generation),
    ] {
        o.error(
            label,
            heartbeat_code(t, &group, member_id, generation).await?,
        );
    }

    // A second member arrives: its JoinGroup waits for the first to rejoin, and the first
    // learns of the rebalance from its heartbeat.
    let b_first = consumer_join(t, &group, "", &topic).await?;
    let b_id = b_first.member_id.to_string();
    let mut b_conn: KafkaConnection = t.open(LEADER).await?;
    b_conn
        .write_request(
            &join_request(&group, &b_id, "consumer", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let during = loop {
        let code = heartbeat_code(t, &group, &a.id, a.generation).await?;
        if code != 0 || Instant::now() > deadline {
            break code;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    o.error("during_rebalance", during);
    let a_rejoin = consumer_join(t, &group, &a.id, &topic).await?;
    let (_, b_join) = b_conn
        .read_response::<JoinGroupRequest>(JOIN_VERSION)
        .await?;
    o.error("rejoin.error", a_rejoin.error_code);
    o.set("rejoin.generation", a_rejoin.generation_id);
    o.set(
        "rejoin.leader_is_first_member",
        a_rejoin.leader.as_str() == a.id,
    );
    o.set("rejoin.members_seen_by_leader", a_rejoin.members.len());
    o.error("second_member.error", b_join.error_code);
    o.set("second_member.members_seen", b_join.members.len());
    o.error(
        "old_generation_after_rebalance",
        heartbeat_code(t, &group, &a.id, a.generation).await?,
    );
    leave(t, &group, &[&a.id, &b_id]).await?;
    Ok(o)
}

async fn leave_group(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let group = c.group("g");
    let topic = c.topic("t");
    let m = join_alone(t, &group, &topic).await?;
    let nobody = c.group("nobody");
    for (label, g, members) in [
        ("unknown_member", &group, vec!["ghost"]),
        ("known_and_unknown", &group, vec![m.id.as_str(), "ghost"]),
        ("unknown_group", &nobody, vec!["ghost"]),
    ] {
        o.set(label, see_leave(&leave(t, g, &members).await?));
    }
    o.error(
        "heartbeat_after_leaving",
        heartbeat_code(t, &group, &m.id, m.generation).await?,
    );
    Ok(o)
}

async fn offset_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 2, &[]).await?;
    // A simple commit: no generation, no member (as an assign()-ing consumer commits).
    let simple = c.group("simple");
    let unknown_topic = c.topic("never-created");
    let too_large = "m".repeat(5000);
    let simple_cases = [
        (
            "simple",
            commit_request(&simple, "", -1, &topic, 0, 5, "meta"),
        ),
        (
            "simple_unknown_topic",
            commit_request(&simple, "", -1, &unknown_topic, 0, 5, ""),
        ),
        (
            "simple_unknown_partition",
            commit_request(&simple, "", -1, &topic, 9, 5, ""),
        ),
        (
            "metadata_too_large",
            commit_request(&simple, "", -1, &topic, 1, 5, &too_large),
        ),
        (
            "negative_offset",
            commit_request(&simple, "", -1, &topic, 1, -7, ""),
        ),
    ];
    for (label, req) in simple_cases {
        o.error(label, commit_code(t, &req).await?);
    }
    o.set(
        "simple.fetched",
        fetch_offsets(t, &simple, &topic, Some(&[0, 1]), false).await?,
    );
    // A group with a member.
    let group = c.group("g");
    let m = join_alone(t, &group, &topic).await?;
    let member_cases = [
        (
            "member",
            commit_request(&group, &m.id, m.generation, &topic, 0, 3, ""),
        ),
        (
            "member_wrong_generation",
            commit_request(&group, &m.id, m.generation + 1, &topic, 0, 3, ""),
        ),
        (
            "unknown_member",
            commit_request(&group, "ghost", m.generation, &topic, 0, 3, ""),
        ),
        (
            "no_generation_into_active_group",
            commit_request(&group, "", -1, &topic, 0, 3, ""),
        ),
    ];
    for (label, req) in member_cases {
        o.error(label, commit_code(t, &req).await?);
    }
    leave(t, &group, &[&m.id]).await?;
    Ok(o)
}

async fn offset_fetch(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 2, &[]).await?;
    let nobody = c.group("nobody");
    o.set(
        "unknown_group",
        fetch_offsets(t, &nobody, &topic, Some(&[0]), false).await?,
    );
    o.set(
        "unknown_group_all_topics",
        fetch_offsets(t, &nobody, &topic, None, false).await?,
    );
    let group = c.group("g");
    commit_code(t, &commit_request(&group, "", -1, &topic, 1, 42, "m42")).await?;
    o.set(
        "all_topics",
        fetch_offsets(t, &group, &topic, None, false).await?,
    );
    o.set(
        "require_stable",
        fetch_offsets(t, &group, &topic, Some(&[0, 1, 7]), true).await?,
    );
    let unknown_topic = c.topic("never-created");
    o.set(
        "unknown_topic",
        fetch_offsets(t, &group, &unknown_topic, Some(&[0]), false).await?,
    );
    // Version 7 and below name one group at the top level.
    let v7 = OffsetFetchRequest::default()
        .with_group_id(gid(&group))
        .with_topics(Some(vec![
            kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic_name(&topic))
                .with_partition_indexes(vec![1]),
        ]));
    let resp = t.send(LEADER, &v7, 7).await?;
    let p = resp.topics.first().and_then(|t| t.partitions.first());
    o.error("v7.error", resp.error_code);
    o.set("v7.offset", p.map_or(-9, |p| p.committed_offset));
    Ok(o)
}

/// The two groups the listing scenarios look at: group `joined` with one member, joined
/// and synced (Stable), and group `empty`, with an offset committed and no member (Empty).
async fn joined_and_empty(
    t: &mut Target,
    c: &Ctx,
    joined: &str,
    topic: &str,
) -> Result<(String, Member, String)> {
    let group = c.group(joined);
    let m = join_alone(t, &group, topic).await?;
    let empty = c.group("empty");
    commit_code(t, &commit_request(&empty, "", -1, topic, 0, 1, "")).await?;
    Ok((group, m, empty))
}

fn describe_request(groups: &[&str]) -> DescribeGroupsRequest {
    DescribeGroupsRequest::default().with_groups(groups.iter().map(|g| gid(g)).collect())
}

async fn describe_groups(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    let (stable, m, empty) = joined_and_empty(t, c, "stable", &topic).await?;
    let nobody = c.group("nobody");
    let resp = t
        .leader(&describe_request(&[&stable, &empty, &nobody]), 5)
        .await?;
    // Kafka answers in its own order (by coordinator shard): match the answers by group id.
    for (label, id) in [("stable", &stable), ("empty", &empty), ("unknown", &nobody)] {
        let Some(g) = resp
            .groups
            .iter()
            .find(|g| g.group_id.0.as_str() == id.as_str())
        else {
            o.set(format!("{label}.answered"), false);
            continue;
        };
        o.error(format!("{label}.error"), g.error_code);
        o.set(format!("{label}.state"), g.group_state.as_str());
        o.set(format!("{label}.protocol_type"), g.protocol_type.as_str());
        o.set(format!("{label}.protocol"), g.protocol_data.as_str());
        o.set(format!("{label}.members"), g.members.len());
        if let Some(member) = g.members.first() {
            o.set(
                format!("{label}.member_is_the_joined_one"),
                member.member_id.as_str() == m.id,
            );
            o.set(
                format!("{label}.member_client_id"),
                member.client_id.as_str(),
            );
            o.set(
                format!("{label}.member_assignment_is_the_synced_one"),
                member.member_assignment == assignment(&topic, &[0]),
            );
        }
    }
    o.set("answers", resp.groups.len());
    leave(t, &stable, &[&m.id]).await?;
    Ok(o)
}

async fn list_groups(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    let (stable, m, empty) = joined_and_empty(t, c, "stable", &topic).await?;
    for (label, states) in [
        ("all", vec![]),
        ("stable_only", vec!["Stable"]),
        ("empty_only", vec!["Empty"]),
    ] {
        let req = ListGroupsRequest::default()
            .with_states_filter(states.iter().map(|s| name(s)).collect::<Vec<StrBytes>>());
        let resp = t.leader(&req, 4).await?;
        o.error(format!("{label}.error"), resp.error_code);
        for (which, g) in [("stable", &stable), ("empty", &empty)] {
            let found = resp
                .groups
                .iter()
                .find(|x| x.group_id.0.as_str() == g.as_str());
            o.set(
                format!("{label}.{which}"),
                found.map_or("absent".to_owned(), |x| {
                    format!("{} {}", x.group_state.as_str(), x.protocol_type.as_str())
                }),
            );
        }
    }
    leave(t, &stable, &[&m.id]).await?;
    Ok(o)
}

async fn delete_groups(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let (active, m, empty) = joined_and_empty(t, c, "active", &topic).await?;
    let nobody = c.group("nobody");
    let req = DeleteGroupsRequest::default().with_groups_names(vec![
        gid(&active),
        gid(&empty),
        gid(&nobody),
    ]);
    let resp = t.leader(&req, 2).await?;
    for (label, g) in [("active", &active), ("empty", &empty), ("unknown", &nobody)] {
        let r = resp
            .results
            .iter()
            .find(|r| r.group_id.0.as_str() == g.as_str());
        o.error(label, r.map_or(-1, |r| r.error_code));
    }
    o.set(
        "deleted_group_offsets",
        fetch_offsets(t, &empty, &topic, Some(&[0]), false).await?,
    );
    let resp = t.leader(&describe_request(&[&empty]), 5).await?;
    o.set(
        "deleted_group_state",
        resp.groups.first().map_or("-".to_owned(), |g| {
            format!("{} {}", error_name(g.error_code), g.group_state.as_str())
        }),
    );
    leave(t, &active, &[&m.id]).await?;
    Ok(o)
}
