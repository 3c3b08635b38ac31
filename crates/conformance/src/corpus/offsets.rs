//! Offsets committed while the followers are stopped, and after they come back. A commit is
//! an acks=-1 append to `__consumer_offsets`, so it waits for the followers like any
//! acks=all write, for at most `offsets.commit.timeout.ms` (5 s on both).

use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use followersim::wire::KafkaConnection;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, SyncGroupRequest,
};

use super::group_requests::{
    commit_code, commit_request, consumer_join, fetch_offsets, heartbeat_code, heartbeat_request,
    join_alone, join_request, join_unsynced, leave_request, offset_fetch_request, see_leave,
    see_offsets, sync_request, Member, COMMIT_VERSION, HEARTBEAT_VERSION, JOIN_VERSION,
    LEAVE_VERSION, OFFSET_FETCH_VERSION, SYNC_VERSION,
};
use super::{
    scenario, timing, wait_group_write_pending, with_followers_stopped, Ctx, Scenario, Then,
};
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

/// The scenario's topic `t` (one partition) and group `g`.
async fn topic_and_group(t: &mut Target, c: &Ctx) -> Result<(String, String)> {
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    Ok((topic, c.group("g")))
}

/// Sends `commit` on a connection of its own without waiting for the answer (with the
/// followers stopped, it waits for them); returns that connection and when it was sent.
async fn send_commit(
    t: &mut Target,
    commit: &OffsetCommitRequest,
) -> Result<(KafkaConnection, Instant)> {
    let mut committer = t.open(LEADER).await?;
    let start = Instant::now();
    committer.write_request(commit, COMMIT_VERSION).await?;
    Ok((committer, start))
}

/// `m`'s commit of offset 7 to `group`, sent as [`send_commit`] does, once the coordinator
/// has appended it: a request that arrived before it would not be behind it. (Kafka
/// orders a partition's writes by arrival.)
async fn commit_ahead(
    t: &mut Target,
    group: &str,
    topic: &str,
    m: &Member,
) -> Result<(KafkaConnection, Instant)> {
    let commit = commit_request(group, &m.id, m.generation, topic, 0, 7, "");
    let sent = send_commit(t, &commit).await?;
    wait_group_write_pending(t, group).await?;
    Ok(sent)
}

/// The answer to the commit sent on `committer`, as [`commit_errors`] writes it.
async fn commit_answer(committer: &mut KafkaConnection) -> Result<String> {
    let (_, resp) = committer
        .read_response::<OffsetCommitRequest>(COMMIT_VERSION)
        .await?;
    Ok(commit_errors(&resp))
}

/// `N` new connections to node 1, one for each request sent behind a pending commit.
async fn connections<const N: usize>(t: &Target) -> Result<[KafkaConnection; N]> {
    let mut conns = Vec::with_capacity(N);
    for _ in 0..N {
        conns.push(t.open(LEADER).await?);
    }
    conns
        .try_into()
        .map_err(|_| anyhow!("{N} connections were opened"))
}

async fn commit_followers_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let (topic, group) = topic_and_group(t, c).await?;
    let mut o = Observation::new();
    o.error(
        "before",
        commit_code(t, &commit_request(&group, "", -1, &topic, 0, 5, "five")).await?,
    );
    with_followers_stopped(t, Then::Replicated(&topic), async |t: &mut Target| {
        stopped(t, &group, &topic, &mut o).await
    })
    .await?;
    o.error(
        "after_resume",
        commit_code(t, &commit_request(&group, "", -1, &topic, 0, 9, "nine")).await?,
    );
    o.set(
        "after_resume.fetched",
        fetch_offsets(t, &group, &topic, Some(&[0]), false).await?,
    );
    Ok(o)
}

async fn stopped(t: &mut Target, group: &str, topic: &str, o: &mut Observation) -> Result<()> {
    let commit = commit_request(group, "", -1, topic, 0, 7, "seven");
    let (mut committer, start) = send_commit(t, &commit).await?;
    wait_group_write_pending(t, group).await?;
    // While that commit waits for the followers:
    o.set(
        "pending.fetched",
        fetch_offsets(t, group, topic, Some(&[0]), false).await?,
    );
    let asked = Instant::now();
    o.set(
        "pending.fetched_require_stable",
        fetch_offsets(t, group, topic, Some(&[0]), true).await?,
    );
    o.set(
        "pending.fetched_require_stable_answered",
        timing(asked.elapsed(), 5_000),
    );
    o.set("stopped.commit", commit_answer(&mut committer).await?);
    o.set("stopped.commit_answered", timing(start.elapsed(), 5_000));
    o.set(
        "stopped.fetched_after_failure",
        fetch_offsets(t, group, topic, Some(&[0]), false).await?,
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
    let (topic, group) = topic_and_group(t, c).await?;
    let member = join_alone(t, &group, &topic).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::Replicated(&topic), async |t: &mut Target| {
        heartbeat_stopped(t, &group, &topic, &member, &mut o).await
    })
    .await?;
    o.error(
        "after_resume.heartbeat",
        heartbeat_code(t, &group, &member.id, member.generation).await?,
    );
    Ok(o)
}

async fn heartbeat_stopped(
    t: &mut Target,
    group: &str,
    topic: &str,
    m: &Member,
    o: &mut Observation,
) -> Result<()> {
    let (mut committer, start) = commit_ahead(t, group, topic, m).await?;
    let asked = Instant::now();
    o.error(
        "pending.heartbeat",
        heartbeat_code(t, group, &m.id, m.generation).await?,
    );
    o.set("pending.heartbeat_answered", timing(asked.elapsed(), 4_000));
    o.set("pending.commit", commit_answer(&mut committer).await?);
    o.set("pending.commit_answered", timing(start.elapsed(), 5_000));
    let asked = Instant::now();
    o.error(
        "after_failed_commit.heartbeat",
        heartbeat_code(t, group, &m.id, m.generation).await?,
    );
    o.set(
        "after_failed_commit.heartbeat_answered",
        timing(asked.elapsed(), 4_000),
    );
    Ok(())
}

/// What one request behind the pending commit got, and whether it waited.
async fn read_behind<R: kafka_protocol::protocol::Request>(
    conn: &mut KafkaConnection,
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

/// An answer's top-level error, by Kafka's name.
fn top(code: i16) -> String {
    error_name(code)
}

async fn apis_behind_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let (topic, group) = topic_and_group(t, c).await?;
    // Groups beside it, in the same __consumer_offsets partition.
    let joining = c.group_beside(&group, "joining");
    let leaving = c.group_beside(&group, "leaving");
    let syncing = c.group_beside(&group, "syncing");
    let deleted = c.group_beside(&group, "deleted");
    let member = join_alone(t, &group, &topic).await?;
    let leaver = join_alone(t, &leaving, &topic).await?;
    // A member between JoinGroup and SyncGroup.
    let syncer = Member {
        leader: true,
        ..join_unsynced(t, &syncing, &topic).await?
    };
    commit_code(t, &commit_request(&deleted, "", -1, &topic, 0, 1, "")).await?;

    let mut o = Observation::new();
    with_followers_stopped(t, Then::Replicated(&topic), async |t: &mut Target| {
        let (mut committer, _) = commit_ahead(t, &group, &topic, &member).await?;
        let [mut c0, mut c1, mut c2, mut c3, mut c4, mut c5, mut c6, mut c7, mut c8] =
            connections(t).await?;
        let asked = Instant::now();
        let gid = |g: &str| GroupId(crate::target::name(g));
        c0.write_request(
            &heartbeat_request(&group, &member.id, member.generation),
            HEARTBEAT_VERSION,
        )
        .await?;
        c1.write_request(
            &join_request(&joining, "", "consumer", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
        c2.write_request(&leave_request(&leaving, &[&leaver.id]), LEAVE_VERSION)
            .await?;
        c3.write_request(&sync_request(&syncing, &syncer, Some(&topic)), SYNC_VERSION)
            .await?;
        c4.write_request(
            &DescribeGroupsRequest::default().with_groups(vec![gid(&group)]),
            5,
        )
        .await?;
        c5.write_request(&ListGroupsRequest::default(), 4).await?;
        c6.write_request(
            &offset_fetch_request(&group, Some((&topic, &[0])), false),
            OFFSET_FETCH_VERSION,
        )
        .await?;
        c7.write_request(
            &offset_fetch_request(&group, Some((&topic, &[0])), true),
            OFFSET_FETCH_VERSION,
        )
        .await?;
        c8.write_request(
            &DeleteGroupsRequest::default().with_groups_names(vec![gid(&deleted)]),
            2,
        )
        .await?;
        // Read all nine at once: each answer's time is its own.
        let answers = tokio::join!(
            read_behind::<HeartbeatRequest>(&mut c0, HEARTBEAT_VERSION, asked, |r| top(
                r.error_code
            )),
            read_behind::<JoinGroupRequest>(&mut c1, JOIN_VERSION, asked, |r| top(r.error_code)),
            read_behind::<LeaveGroupRequest>(&mut c2, LEAVE_VERSION, asked, see_leave),
            read_behind::<SyncGroupRequest>(&mut c3, SYNC_VERSION, asked, |r| top(r.error_code)),
            read_behind::<DescribeGroupsRequest>(&mut c4, 5, asked, |r| {
                r.groups.first().map_or("-".to_owned(), |g| {
                    format!("{} {}", top(g.error_code), g.group_state.as_str())
                })
            }),
            read_behind::<ListGroupsRequest>(&mut c5, 4, asked, |r| top(r.error_code)),
            read_behind::<OffsetFetchRequest>(&mut c6, OFFSET_FETCH_VERSION, asked, |r| {
                see_offsets(r, &[&topic])
            }),
            read_behind::<OffsetFetchRequest>(&mut c7, OFFSET_FETCH_VERSION, asked, |r| {
                see_offsets(r, &[&topic])
            }),
            read_behind::<DeleteGroupsRequest>(&mut c8, 2, asked, |r| {
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
        o.set("commit", commit_answer(&mut committer).await?);
        Ok(())
    })
    .await?;
    Ok(o)
}

async fn rebalance_stopped(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let (topic, group) = topic_and_group(t, c).await?;
    let member = join_alone(t, &group, &topic).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::Replicated(&topic), async |t: &mut Target| {
        // Nothing of this group's partition waits yet.
        let asked = Instant::now();
        o.error(
            "heartbeat_first",
            heartbeat_code(t, &group, &member.id, member.generation).await?,
        );
        o.set("heartbeat_first_answered", timing(asked.elapsed(), 4_000));
        // The member rejoins: it is the only one, so the rebalance completes at once.
        let asked = Instant::now();
        let resp = consumer_join(t, &group, &member.id, &topic).await?;
        o.error("rejoin", resp.error_code);
        o.set("rejoin_generation", resp.generation_id);
        o.set("rejoin_answered", timing(asked.elapsed(), 4_000));
        let rejoined = Member {
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
        tokio::time::sleep(Duration::from_millis(200)).await;
        let beat_asked = Instant::now();
        let beat = heartbeat_code(t, &group, &rejoined.id, rejoined.generation);
        let sync = async {
            let answer = syncer.read_response::<SyncGroupRequest>(SYNC_VERSION).await;
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
        o.error("heartbeat_after_sync", beat?);
        o.set("heartbeat_after_sync_answered", timing(beat_took, 4_000));
        Ok(())
    })
    .await?;
    // What the failed sync left: the group in which generation, and in which state.
    for generation in [member.generation, member.generation + 1] {
        o.error(
            format!(
                "after_resume.heartbeat_generation_{}",
                generation - member.generation + 1
            ),
            heartbeat_code(t, &group, &member.id, generation).await?,
        );
    }
    Ok(o)
}

/// The same window, for answers that are errors, a rejoin, and a group beside the one
/// whose commit waits.
async fn errors_behind_commit(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let (topic, group) = topic_and_group(t, c).await?;
    let rejoining = c.group_beside(&group, "rejoining");
    let quiet = c.group_beside(&group, "quiet");
    let member = join_alone(t, &group, &topic).await?;
    let rejoiner = join_alone(t, &rejoining, &topic).await?;
    commit_code(t, &commit_request(&quiet, "", -1, &topic, 0, 3, "")).await?;
    let mut o = Observation::new();
    with_followers_stopped(t, Then::Replicated(&topic), async |t: &mut Target| {
        let (mut committer, _) = commit_ahead(t, &group, &topic, &member).await?;
        let [mut c0, mut c1, mut c2, mut c3, mut c4, mut c5] = connections(t).await?;
        let asked = Instant::now();
        let stale = member.generation + 3;
        c0.write_request(
            &heartbeat_request(&group, "ghost", member.generation),
            HEARTBEAT_VERSION,
        )
        .await?;
        c1.write_request(
            &heartbeat_request(&group, &member.id, stale),
            HEARTBEAT_VERSION,
        )
        .await?;
        c2.write_request(&leave_request(&group, &["ghost"]), LEAVE_VERSION)
            .await?;
        c3.write_request(
            &join_request(&rejoining, &rejoiner.id, "consumer", 10_000, &topic),
            JOIN_VERSION,
        )
        .await?;
        c4.write_request(
            &commit_request(&group, &member.id, stale, &topic, 0, 8, ""),
            COMMIT_VERSION,
        )
        .await?;
        c5.write_request(
            &offset_fetch_request(&quiet, Some((&topic, &[0])), true),
            OFFSET_FETCH_VERSION,
        )
        .await?;
        let answers = tokio::join!(
            read_behind::<HeartbeatRequest>(&mut c0, HEARTBEAT_VERSION, asked, |r| top(
                r.error_code
            )),
            read_behind::<HeartbeatRequest>(&mut c1, HEARTBEAT_VERSION, asked, |r| top(
                r.error_code
            )),
            read_behind::<LeaveGroupRequest>(&mut c2, LEAVE_VERSION, asked, see_leave),
            read_behind::<JoinGroupRequest>(&mut c3, JOIN_VERSION, asked, |r| {
                format!("{} generation {}", top(r.error_code), r.generation_id)
            }),
            read_behind::<OffsetCommitRequest>(&mut c4, COMMIT_VERSION, asked, commit_errors),
            read_behind::<OffsetFetchRequest>(&mut c5, OFFSET_FETCH_VERSION, asked, |r| {
                see_offsets(r, &[&topic])
            }),
        );
        o.set("heartbeat_unknown_member", answers.0?);
        o.set("heartbeat_wrong_generation", answers.1?);
        o.set("leave_unknown_member", answers.2?);
        o.set("rejoin_beside", answers.3?);
        o.set("commit_wrong_generation", answers.4?);
        o.set("offset_fetch_require_stable_beside", answers.5?);
        o.set("commit", commit_answer(&mut committer).await?);
        Ok(())
    })
    .await?;
    Ok(o)
}
