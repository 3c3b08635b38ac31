//! Offsets committed while the followers are stopped, and after they come back. A commit is
//! an acks=-1 append to `__consumer_offsets`, so it waits for the followers like any
//! acks=all write, for at most `offsets.commit.timeout.ms` (5 s on both).

use std::time::Instant;

use anyhow::Result;
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use super::groups::{
    commit_code, commit_request, join_alone, offset_fetch_request, see_offsets, COMMIT_VERSION,
    HEARTBEAT_VERSION, OFFSET_FETCH_VERSION,
};
use super::{scenario, timing, Ctx, Scenario};
use crate::observe::{error_name, Observation};
use crate::target::{Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "offset_commit/while the followers are stopped, and after",
            true,
            commit_followers_stopped
        ),
        scenario!(
            "heartbeat/while a commit waits for the followers",
            true,
            heartbeat_behind_commit
        ),
        scenario!(
            "groups/every group API while a commit waits for the followers",
            true,
            apis_behind_commit
        ),
        scenario!(
            "groups/errors and a rejoin while a commit waits for the followers",
            true,
            errors_behind_commit
        ),
        scenario!(
            "groups/a rebalance with the followers stopped",
            true,
            rebalance_stopped
        ),
    ]
}

async fn commit_followers_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let group = c.group("g");
    let mut o = Observation::new();
    o.error(
        "before",
        commit_code(t, &commit_request(&group, "", -1, &topic, 0, 5, "five")).await?,
    );
    t.stop_followers().await?;
    let seen = stopped(t, &group, &topic, &mut o).await;
    t.resume_followers().await?;
    t.wait_replicated(&["__consumer_offsets", &topic]).await?;
    seen?;
    o.error(
        "after_resume",
        commit_code(t, &commit_request(&group, "", -1, &topic, 0, 9, "nine")).await?,
    );
    let resp = t
        .send(
            LEADER,
            &offset_fetch_request(&group, Some((&topic, &[0])), false),
            OFFSET_FETCH_VERSION,
        )
        .await?;
    o.set("after_resume.fetched", see_offsets(&resp, &[&topic]));
    Ok(o)
}

async fn stopped(t: &mut Target, group: &str, topic: &str, o: &mut Observation) -> Result<()> {
    let mut committer = t.open(LEADER).await?;
    let start = Instant::now();
    committer
        .write_request(
            &commit_request(group, "", -1, topic, 0, 7, "seven"),
            COMMIT_VERSION,
        )
        .await?;
    // While that commit waits for the followers:
    let resp = t
        .send(
            LEADER,
            &offset_fetch_request(group, Some((topic, &[0])), false),
            OFFSET_FETCH_VERSION,
        )
        .await?;
    o.set("pending.fetched", see_offsets(&resp, &[topic]));
    let asked = Instant::now();
    let resp = t
        .send(
            LEADER,
            &offset_fetch_request(group, Some((topic, &[0])), true),
            OFFSET_FETCH_VERSION,
        )
        .await?;
    o.set(
        "pending.fetched_require_stable",
        see_offsets(&resp, &[topic]),
    );
    o.set(
        "pending.fetched_require_stable_answered",
        timing(asked.elapsed(), 5_000),
    );
    let (_, resp) = committer
        .read_response::<OffsetCommitRequest>(COMMIT_VERSION)
        .await?;
    o.set("stopped.commit", commit_errors(&resp));
    o.set("stopped.commit_answered", timing(start.elapsed(), 5_000));
    let resp = t
        .send(
            LEADER,
            &offset_fetch_request(group, Some((topic, &[0])), false),
            OFFSET_FETCH_VERSION,
        )
        .await?;
    o.set(
        "stopped.fetched_after_failure",
        see_offsets(&resp, &[topic]),
    );
    Ok(())
}

fn commit_errors(resp: &OffsetCommitResponse) -> String {
    resp.topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| error_name(p.error_code))
        .collect::<Vec<_>>()
        .join(",")
}

async fn heartbeat_behind_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let group = c.group("g");
    let member = join_alone(t, &group, &topic).await?;
    let mut o = Observation::new();
    t.stop_followers().await?;
    let seen = heartbeat_stopped(t, &group, &topic, &member, &mut o).await;
    t.resume_followers().await?;
    t.wait_replicated(&["__consumer_offsets", &topic]).await?;
    seen?;
    let hb = heartbeat(&group, &member);
    let resp = t.send(LEADER, &hb, HEARTBEAT_VERSION).await?;
    o.error("after_resume.heartbeat", resp.error_code);
    Ok(o)
}

fn heartbeat(group: &str, m: &super::groups::Member) -> kafka_protocol::messages::HeartbeatRequest {
    kafka_protocol::messages::HeartbeatRequest::default()
        .with_group_id(kafka_protocol::messages::GroupId(crate::target::name(
            group,
        )))
        .with_generation_id(m.generation)
        .with_member_id(crate::target::name(&m.id))
}

async fn heartbeat_stopped(
    t: &mut Target,
    group: &str,
    topic: &str,
    m: &super::groups::Member,
    o: &mut Observation,
) -> Result<()> {
    let mut committer = t.open(LEADER).await?;
    let start = Instant::now();
    committer
        .write_request(
            &commit_request(group, &m.id, m.generation, topic, 0, 7, ""),
            COMMIT_VERSION,
        )
        .await?;
    // Give the commit a head start on its own connection: a heartbeat that arrived first
    // would not be behind it. (Kafka orders a partition's writes by arrival.)
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let asked = Instant::now();
    let resp = t
        .send(LEADER, &heartbeat(group, m), HEARTBEAT_VERSION)
        .await?;
    o.error("pending.heartbeat", resp.error_code);
    o.set("pending.heartbeat_answered", timing(asked.elapsed(), 4_000));
    let (_, resp) = committer
        .read_response::<OffsetCommitRequest>(COMMIT_VERSION)
        .await?;
    o.set("pending.commit", commit_errors(&resp));
    o.set("pending.commit_answered", timing(start.elapsed(), 5_000));
    let asked = Instant::now();
    let resp = t
        .send(LEADER, &heartbeat(group, m), HEARTBEAT_VERSION)
        .await?;
    o.error("after_failed_commit.heartbeat", resp.error_code);
    o.set(
        "after_failed_commit.heartbeat_answered",
        timing(asked.elapsed(), 4_000),
    );
    Ok(())
}

/// What one request behind the pending commit got, and whether it waited.
async fn read_behind<R: kafka_protocol::protocol::Request>(
    conn: &mut followersim::wire::KafkaConnection,
    version: i16,
    asked: Instant,
    code: impl Fn(&R::Response) -> String,
) -> Result<String> {
    let (_, resp) = conn.read_response::<R>(version).await?;
    Ok(format!(
        "{} {}",
        code(&resp),
        timing(asked.elapsed(), 4_000)
    ))
}

async fn apis_behind_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    use super::groups::{
        join_request, leave_request, sync_request, JOIN_VERSION, LEAVE_VERSION, SYNC_VERSION,
    };
    use kafka_protocol::messages::{
        DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest,
        LeaveGroupRequest, ListGroupsRequest, OffsetFetchRequest, SyncGroupRequest,
    };
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let group = c.group("g");
    // Groups beside it, in the same __consumer_offsets partition.
    let joining = c.group_beside(&group, "joining");
    let leaving = c.group_beside(&group, "leaving");
    let syncing = c.group_beside(&group, "syncing");
    let deleted = c.group_beside(&group, "deleted");
    let member = join_alone(t, &group, &topic).await?;
    let leaver = join_alone(t, &leaving, &topic).await?;
    // A member between JoinGroup and SyncGroup.
    let first = t
        .send(
            LEADER,
            &join_request(&syncing, "", "consumer", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
    let sync_id = first.member_id.to_string();
    let joined = t
        .send(
            LEADER,
            &join_request(&syncing, &sync_id, "consumer", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
    let syncer = super::groups::Member {
        id: sync_id,
        generation: joined.generation_id,
        leader: true,
    };
    commit_code(t, &commit_request(&deleted, "", -1, &topic, 0, 1, "")).await?;

    let mut o = Observation::new();
    t.stop_followers().await?;
    let seen = async {
        let mut committer = t.open(LEADER).await?;
        committer
            .write_request(
                &commit_request(&group, &member.id, member.generation, &topic, 0, 7, ""),
                COMMIT_VERSION,
            )
            .await?;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut conns = Vec::new();
        for _ in 0..9 {
            conns.push(t.open(LEADER).await?);
        }
        let asked = Instant::now();
        let gid = |g: &str| GroupId(crate::target::name(g));
        conns[0]
            .write_request(&heartbeat(&group, &member), HEARTBEAT_VERSION)
            .await?;
        conns[1]
            .write_request(
                &join_request(&joining, "", "consumer", 10_000, &topic),
                JOIN_VERSION,
            )
            .await?;
        conns[2]
            .write_request(&leave_request(&leaving, &[&leaver.id]), LEAVE_VERSION)
            .await?;
        conns[3]
            .write_request(&sync_request(&syncing, &syncer, Some(&topic)), SYNC_VERSION)
            .await?;
        conns[4]
            .write_request(
                &DescribeGroupsRequest::default().with_groups(vec![gid(&group)]),
                5,
            )
            .await?;
        conns[5]
            .write_request(&ListGroupsRequest::default(), 4)
            .await?;
        conns[6]
            .write_request(
                &offset_fetch_request(&group, Some((&topic, &[0])), false),
                OFFSET_FETCH_VERSION,
            )
            .await?;
        conns[7]
            .write_request(
                &offset_fetch_request(&group, Some((&topic, &[0])), true),
                OFFSET_FETCH_VERSION,
            )
            .await?;
        conns[8]
            .write_request(
                &DeleteGroupsRequest::default().with_groups_names(vec![gid(&deleted)]),
                2,
            )
            .await?;
        let top = |code: i16| error_name(code);
        let [c0, c1, c2, c3, c4, c5, c6, c7, c8] = conns.as_mut_slice() else {
            anyhow::bail!("nine connections were opened");
        };
        // Read all nine at once: each answer's time is its own.
        let answers = tokio::join!(
            read_behind::<HeartbeatRequest>(c0, HEARTBEAT_VERSION, asked, |r| top(r.error_code)),
            read_behind::<JoinGroupRequest>(c1, JOIN_VERSION, asked, |r| top(r.error_code)),
            read_behind::<LeaveGroupRequest>(c2, LEAVE_VERSION, asked, |r| {
                let members: Vec<String> = r.members.iter().map(|m| top(m.error_code)).collect();
                format!("{} [{}]", top(r.error_code), members.join(","))
            }),
            read_behind::<SyncGroupRequest>(c3, SYNC_VERSION, asked, |r| top(r.error_code)),
            read_behind::<DescribeGroupsRequest>(c4, 5, asked, |r| {
                r.groups.first().map_or("-".to_owned(), |g| {
                    format!("{} {}", top(g.error_code), g.group_state.as_str())
                })
            }),
            read_behind::<ListGroupsRequest>(c5, 4, asked, |r| top(r.error_code)),
            read_behind::<OffsetFetchRequest>(c6, OFFSET_FETCH_VERSION, asked, |r| {
                see_offsets(r, &[&topic])
            }),
            read_behind::<OffsetFetchRequest>(c7, OFFSET_FETCH_VERSION, asked, |r| {
                see_offsets(r, &[&topic])
            }),
            read_behind::<DeleteGroupsRequest>(c8, 2, asked, |r| {
                r.results
                    .first()
                    .map_or("-".to_owned(), |g| top(g.error_code))
            }),
        );
        o.set("heartbeat", answers.0?);
        o.set("join_new_member", answers.1?);
        o.set("leave", answers.2?);
        o.set("sync", answers.3?);
        o.set("describe", answers.4?);
        o.set("list", answers.5?);
        o.set("offset_fetch", answers.6?);
        o.set("offset_fetch_require_stable", answers.7?);
        o.set("delete_empty_group", answers.8?);
        let (_, resp) = committer
            .read_response::<OffsetCommitRequest>(COMMIT_VERSION)
            .await?;
        o.set("commit", commit_errors(&resp));
        anyhow::Ok(())
    }
    .await;
    t.resume_followers().await?;
    t.wait_replicated(&["__consumer_offsets", &topic]).await?;
    seen?;
    Ok(o)
}

async fn rebalance_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    use super::groups::{join_request, sync_request, JOIN_VERSION, SYNC_VERSION};
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let group = c.group("g");
    let member = join_alone(t, &group, &topic).await?;
    let mut o = Observation::new();
    t.stop_followers().await?;
    let seen = async {
        // Nothing of this group's partition waits yet.
        let asked = Instant::now();
        let resp = t
            .send(LEADER, &heartbeat(&group, &member), HEARTBEAT_VERSION)
            .await?;
        o.error("heartbeat_first", resp.error_code);
        o.set("heartbeat_first_answered", timing(asked.elapsed(), 4_000));
        // The member rejoins: it is the only one, so the rebalance completes at once.
        let asked = Instant::now();
        let join = join_request(&group, &member.id, "consumer", 10_000, &topic);
        let resp = t.send(LEADER, &join, JOIN_VERSION).await?;
        o.error("rejoin", resp.error_code);
        o.set("rejoin_generation", resp.generation_id);
        o.set("rejoin_answered", timing(asked.elapsed(), 4_000));
        let rejoined = super::groups::Member {
            id: member.id.clone(),
            generation: resp.generation_id,
            leader: true,
        };
        // The sync, and a heartbeat sent behind it on another connection, at once: the
        // followers stay stopped under Kafka's 9 s broker session, after which its
        // controller would fence them and change the picture.
        let mut syncer = t.open(LEADER).await?;
        let asked = Instant::now();
        syncer
            .write_request(&sync_request(&group, &rejoined, Some(&topic)), SYNC_VERSION)
            .await?;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let beat_asked = Instant::now();
        let beat_request = heartbeat(&group, &rejoined);
        let beat = t.send(LEADER, &beat_request, HEARTBEAT_VERSION);
        let sync = async {
            let answer = syncer
                .read_response::<kafka_protocol::messages::SyncGroupRequest>(SYNC_VERSION)
                .await;
            (answer, asked.elapsed())
        };
        let (beat, (sync, sync_took)) = tokio::join!(
            async {
                let answer = beat.await;
                (answer, beat_asked.elapsed())
            },
            sync
        );
        let (_, sync) = sync?;
        o.error("sync", sync.error_code);
        o.set("sync_answered", timing(sync_took, 4_000));
        let (beat, beat_took) = beat;
        o.error("heartbeat_after_sync", beat?.error_code);
        o.set("heartbeat_after_sync_answered", timing(beat_took, 4_000));
        anyhow::Ok(())
    }
    .await;
    t.resume_followers().await?;
    t.wait_replicated(&["__consumer_offsets", &topic]).await?;
    seen?;
    // What the failed sync left: the group in which generation, and in which state.
    for generation in [member.generation, member.generation + 1] {
        let m = super::groups::Member {
            id: member.id.clone(),
            generation,
            leader: true,
        };
        let resp = t
            .send(LEADER, &heartbeat(&group, &m), HEARTBEAT_VERSION)
            .await?;
        o.error(
            format!(
                "after_resume.heartbeat_generation_{}",
                generation - member.generation + 1
            ),
            resp.error_code,
        );
    }
    Ok(o)
}

/// The same window, for answers that are errors, a rejoin, and a group beside the one
/// whose commit waits.
async fn errors_behind_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    use super::groups::{join_request, leave_request, JOIN_VERSION, LEAVE_VERSION};
    use kafka_protocol::messages::{
        HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetFetchRequest,
    };
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let group = c.group("g");
    let rejoining = c.group_beside(&group, "rejoining");
    let quiet = c.group_beside(&group, "quiet");
    let member = join_alone(t, &group, &topic).await?;
    let rejoiner = join_alone(t, &rejoining, &topic).await?;
    commit_code(t, &commit_request(&quiet, "", -1, &topic, 0, 3, "")).await?;
    let mut o = Observation::new();
    t.stop_followers().await?;
    let seen = async {
        let mut committer = t.open(LEADER).await?;
        committer
            .write_request(
                &commit_request(&group, &member.id, member.generation, &topic, 0, 7, ""),
                COMMIT_VERSION,
            )
            .await?;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut conns = Vec::new();
        for _ in 0..6 {
            conns.push(t.open(LEADER).await?);
        }
        let asked = Instant::now();
        let stranger = super::groups::Member {
            id: "ghost".to_owned(),
            generation: member.generation,
            leader: false,
        };
        let stale = super::groups::Member {
            id: member.id.clone(),
            generation: member.generation + 3,
            leader: false,
        };
        conns[0]
            .write_request(&heartbeat(&group, &stranger), HEARTBEAT_VERSION)
            .await?;
        conns[1]
            .write_request(&heartbeat(&group, &stale), HEARTBEAT_VERSION)
            .await?;
        conns[2]
            .write_request(&leave_request(&group, &["ghost"]), LEAVE_VERSION)
            .await?;
        conns[3]
            .write_request(
                &join_request(&rejoining, &rejoiner.id, "consumer", 10_000, &topic),
                JOIN_VERSION,
            )
            .await?;
        conns[4]
            .write_request(
                &commit_request(&group, &member.id, member.generation + 3, &topic, 0, 8, ""),
                COMMIT_VERSION,
            )
            .await?;
        conns[5]
            .write_request(
                &offset_fetch_request(&quiet, Some((&topic, &[0])), true),
                OFFSET_FETCH_VERSION,
            )
            .await?;
        let top = |code: i16| error_name(code);
        let [c0, c1, c2, c3, c4, c5] = conns.as_mut_slice() else {
            anyhow::bail!("six connections were opened");
        };
        let answers = tokio::join!(
            read_behind::<HeartbeatRequest>(c0, HEARTBEAT_VERSION, asked, |r| top(r.error_code)),
            read_behind::<HeartbeatRequest>(c1, HEARTBEAT_VERSION, asked, |r| top(r.error_code)),
            read_behind::<LeaveGroupRequest>(c2, LEAVE_VERSION, asked, |r| {
                let members: Vec<String> = r.members.iter().map(|m| top(m.error_code)).collect();
                format!("{} [{}]", top(r.error_code), members.join(","))
            }),
            read_behind::<JoinGroupRequest>(c3, JOIN_VERSION, asked, |r| {
                format!("{} generation {}", top(r.error_code), r.generation_id)
            }),
            read_behind::<OffsetCommitRequest>(c4, COMMIT_VERSION, asked, commit_errors),
            read_behind::<OffsetFetchRequest>(c5, OFFSET_FETCH_VERSION, asked, |r| see_offsets(
                r,
                &[&topic]
            )),
        );
        o.set("heartbeat_unknown_member", answers.0?);
        o.set("heartbeat_wrong_generation", answers.1?);
        o.set("leave_unknown_member", answers.2?);
        o.set("rejoin_beside", answers.3?);
        o.set("commit_wrong_generation", answers.4?);
        o.set("offset_fetch_require_stable_beside", answers.5?);
        let (_, resp) = committer
            .read_response::<OffsetCommitRequest>(COMMIT_VERSION)
            .await?;
        o.set("commit", commit_errors(&resp));
        anyhow::Ok(())
    }
    .await;
    t.resume_followers().await?;
    t.wait_replicated(&["__consumer_offsets", &topic]).await?;
    seen?;
    Ok(o)
}
