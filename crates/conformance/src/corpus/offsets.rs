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
