//! The admin APIs Kafka's tools call: CreatePartitions (`kafka-topics --alter
//! --partitions`), OffsetDelete (`kafka-consumer-groups --delete-offsets`) and
//! DescribeLogDirs (`kafka-log-dirs --describe`), on their error paths and their happy
//! ones.
//!
//! New partitions are given the replicas [1, 2, 3] by manual assignment on both brokers,
//! so node 1 leads them on Kafka as it does here and a produce to one goes to node 1.

use anyhow::Result;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreatePartitionsResponse, DescribeLogDirsRequest,
    JoinGroupRequest, OffsetDeleteRequest,
};

use super::group_requests::{
    commit_code, commit_request, fetch_offsets, gid, join_alone, leave, JOIN_VERSION,
};
use super::{
    consumer_offsets_topic, high_watermark, list_offset, produce, scenario, see_produce, values,
    Ctx, Scenario,
};
use crate::observe::{error_name, Observation};
use crate::target::{name, topic_name, Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!("create_partitions/errors", true, create_partitions_errors),
        scenario!(
            "create_partitions/new partitions take acks=-1 records",
            true,
            create_partitions_grow
        ),
        scenario!("offset_delete/errors", true, offset_delete_errors),
        scenario!(
            "offset_delete/an active group and the topics it subscribes to",
            true,
            offset_delete_active
        ),
        scenario!(
            "describe_log_dirs/the partitions and their sizes",
            true,
            describe_log_dirs,
            &[
                (
                    "dir0.total_bytes",
                    "ours is log.memory.max.bytes (the logs are in memory), Kafka's the disk's size"
                ),
                (
                    "dir0.usable_bytes",
                    "ours is what log.memory.max.bytes leaves, Kafka's the disk's free space"
                ),
            ]
        ),
    ]
}

const CREATE_PARTITIONS_VERSION: i16 = 3;
const OFFSET_DELETE_VERSION: i16 = 0;
const DESCRIBE_LOG_DIRS_VERSION: i16 = 4;

/// Grow `topic` to `count`; `assignments` replicas per new partition, if given.
fn grow(topic: &str, count: i32, assignments: Option<&[&[i32]]>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(topic_name(topic))
        .with_count(count)
        .with_assignments(assignments.map(|a| {
            a.iter()
                .map(|ids| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(ids.iter().copied().map(BrokerId).collect())
                })
                .collect()
        }))
}

async fn create_partitions(
    t: &mut Target,
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
) -> Result<CreatePartitionsResponse> {
    let req = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only);
    t.leader(&req, CREATE_PARTITIONS_VERSION).await
}

/// A result's error and message, the topic's name (which carries the run id) as `T`.
fn see_result(r: &CreatePartitionsResponse, topic: &str) -> String {
    r.results
        .iter()
        .map(|r| {
            let message = r
                .error_message
                .as_deref()
                .map_or_else(|| "null".to_owned(), |m| m.replace(topic, "T"));
            format!("{} {message}", error_name(r.error_code))
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

async fn partition_count(t: &mut Target, topic: &str) -> Result<String> {
    let meta = t.metadata(&[topic]).await?;
    Ok(meta.topics.first().map_or_else(
        || "none".to_owned(),
        |m| format!("{} {}", error_name(m.error_code), m.partitions.len()),
    ))
}

async fn create_partitions_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 2, &[]).await?;
    let all: &[i32] = &[1, 2, 3];
    let cases: Vec<(&str, CreatePartitionsTopic)> = vec![
        ("same_count", grow(&topic, 2, None)),
        ("fewer", grow(&topic, 1, None)),
        ("unknown_topic", grow(&c.topic("never-created"), 3, None)),
        ("too_few_assignments", grow(&topic, 4, Some(&[all]))),
        ("empty_assignment_list", grow(&topic, 3, Some(&[]))),
        ("empty_replica_list", grow(&topic, 3, Some(&[&[]]))),
        ("unknown_broker", grow(&topic, 3, Some(&[&[1, 2, 99]]))),
        ("broker_twice", grow(&topic, 3, Some(&[&[1, 2, 2]]))),
        ("fewer_replicas", grow(&topic, 3, Some(&[&[1, 2]]))),
    ];
    for (key, case) in cases {
        let resp = create_partitions(t, vec![case], false).await?;
        o.set(key, see_result(&resp, &topic));
    }
    let twice = create_partitions(
        t,
        vec![
            grow(&topic, 3, Some(&[all])),
            grow(&c.topic("never-created"), 3, None),
            grow(&topic, 4, Some(&[all, all])),
        ],
        false,
    )
    .await?;
    let order: Vec<String> = twice
        .results
        .iter()
        .map(|r| {
            let which = if r.name.0.as_str() == topic {
                "t"
            } else {
                "unknown"
            };
            format!("{which}:{}", error_name(r.error_code))
        })
        .collect();
    o.set("same_topic_twice", order.join(","));
    o.set("metadata_after_refusals", partition_count(t, &topic).await?);
    let dry = create_partitions(t, vec![grow(&topic, 4, Some(&[all, all]))], true).await?;
    o.set("validate_only", see_result(&dry, &topic));
    let dry_bad = create_partitions(t, vec![grow(&topic, 2, None)], true).await?;
    o.set("validate_only_same_count", see_result(&dry_bad, &topic));
    o.set(
        "metadata_after_validate_only",
        partition_count(t, &topic).await?,
    );
    Ok(o)
}

async fn create_partitions_grow(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 1, &[]).await?;
    let all: &[i32] = &[1, 2, 3];
    let resp = create_partitions(t, vec![grow(&topic, 3, Some(&[all, all]))], false).await?;
    o.set("grow", see_result(&resp, &topic));
    t.wait_in_sync(&[&topic]).await?;
    // Kafka's brokers learn of the new partitions from the controller a moment after the
    // answer: ask until Metadata lists all three (at once here).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut meta = t.metadata(&[&topic]).await?;
    while meta.topics.first().map_or(0, |m| m.partitions.len()) < 3
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        meta = t.metadata(&[&topic]).await?;
    }
    if let Some(m) = meta.topics.first() {
        for p in &m.partitions {
            let replicas: Vec<String> = p.replica_nodes.iter().map(|b| b.0.to_string()).collect();
            let isr: Vec<String> = p.isr_nodes.iter().map(|b| b.0.to_string()).collect();
            o.set(
                format!("metadata.p{}", p.partition_index),
                format!(
                    "{} leader={} epoch={} replicas={} isr={}",
                    error_name(p.error_code),
                    p.leader_id.0,
                    p.leader_epoch,
                    replicas.join(","),
                    isr.join(",")
                ),
            );
        }
    }
    // Kafka answers CreatePartitions before its brokers have applied the new partitions
    // (Metadata may list node 1 as the leader while node 1 still answers
    // NOT_LEADER_OR_FOLLOWER): wait until node 1 serves partition 2.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while list_offset(t, &topic, 2, -1).await?.0 != 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (p, _) = produce(t, &topic, 2, -1, 10_000, values("new", 3)).await?;
    see_produce(&mut o, "produce_p2.", &p);
    o.set("p2.high_watermark", high_watermark(t, &topic, 2).await?);
    o.set("p0.high_watermark", high_watermark(t, &topic, 0).await?);
    Ok(o)
}

fn offset_delete_request(group: &str, topics: &[(&str, &[i32])]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(gid(group))
        .with_topics(
            topics
                .iter()
                .map(|(topic, partitions)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(topic))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// An OffsetDelete answer as `group error; tN-p error ...`, topics by their place in
/// `topics`, in the answer's order.
async fn offset_delete(t: &mut Target, group: &str, topics: &[(&str, &[i32])]) -> Result<String> {
    let resp = t
        .send(
            LEADER,
            &offset_delete_request(group, topics),
            OFFSET_DELETE_VERSION,
        )
        .await?;
    let mut parts = vec![format!("group {}", error_name(resp.error_code))];
    for answered in &resp.topics {
        let label = topics
            .iter()
            .position(|(x, _)| *x == answered.name.0.as_str())
            .map_or_else(|| "other".to_owned(), |i| format!("t{i}"));
        for p in &answered.partitions {
            parts.push(format!(
                "{label}-{} {}",
                p.partition_index,
                error_name(p.error_code)
            ));
        }
    }
    Ok(parts.join("; "))
}

async fn offset_delete_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    consumer_offsets_topic(t, c).await?;
    let topic = c.topic("t");
    t.create_topic(&topic, 2, &[]).await?;
    let unknown = c.topic("never-created");
    o.set(
        "unknown_group",
        offset_delete(t, &c.group("nobody"), &[(&topic, &[0])]).await?,
    );
    o.set(
        "empty_group_id",
        offset_delete(t, "", &[(&topic, &[0])]).await?,
    );
    // A simple consumer's group (no members): its offsets can go.
    let group = c.group("simple");
    for p in 0..2 {
        let req = commit_request(&group, "", -1, &topic, p, 5 + i64::from(p), "");
        o.error(format!("commit_p{p}"), commit_code(t, &req).await?);
    }
    o.set(
        "delete",
        offset_delete(t, &group, &[(&topic, &[0, 9]), (&unknown, &[0])]).await?,
    );
    o.set(
        "fetched_after",
        fetch_offsets(t, &group, &topic, Some(&[0, 1]), false).await?,
    );
    o.set(
        "delete_again",
        offset_delete(t, &group, &[(&topic, &[0])]).await?,
    );
    Ok(o)
}

async fn offset_delete_active(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    consumer_offsets_topic(t, c).await?;
    let (read, other) = (c.topic("read"), c.topic("other"));
    t.create_topic(&read, 1, &[]).await?;
    t.create_topic(&other, 1, &[]).await?;
    let group = c.group("g");
    let m = join_alone(t, &group, &read).await?;
    for (label, topic) in [("commit_read", &read), ("commit_other", &other)] {
        let req = commit_request(&group, &m.id, m.generation, topic, 0, 3, "");
        o.error(label, commit_code(t, &req).await?);
    }
    o.set(
        "delete_while_stable",
        offset_delete(t, &group, &[(&read, &[0]), (&other, &[0])]).await?,
    );
    o.set(
        "fetched_read",
        fetch_offsets(t, &group, &read, Some(&[0]), false).await?,
    );
    o.set(
        "fetched_other",
        fetch_offsets(t, &group, &other, Some(&[0]), false).await?,
    );
    leave(t, &group, &[&m.id]).await?;
    o.set(
        "delete_once_empty",
        offset_delete(t, &group, &[(&read, &[0])]).await?,
    );
    // A group of another protocol type, with a member: its subscriptions cannot be read.
    let connect = c.group("connect");
    let join = |member: &str| {
        JoinGroupRequest::default()
            .with_group_id(gid(&connect))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(name(member))
            .with_protocol_type(name("connect"))
            .with_protocols(vec![
                kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                    .with_name(name("default"))
                    .with_metadata(bytes::Bytes::from_static(b"worker")),
            ])
    };
    let first = t.send(LEADER, &join(""), JOIN_VERSION).await?;
    let id = first.member_id.to_string();
    let joined = t.send(LEADER, &join(&id), JOIN_VERSION).await?;
    o.error("connect.join", joined.error_code);
    o.set(
        "delete_non_consumer_group",
        offset_delete(t, &connect, &[(&read, &[0])]).await?,
    );
    leave(t, &connect, &[&id]).await?;
    Ok(o)
}

async fn describe_log_dirs(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("t");
    t.create_topic(&topic, 2, &[]).await?;
    let (p, _) = produce(t, &topic, 0, -1, 10_000, values("sized", 4)).await?;
    see_produce(&mut o, "produce.", &p);
    let req = DescribeLogDirsRequest::default().with_topics(Some(vec![
        DescribableLogDirTopic::default()
            .with_topic(topic_name(&topic))
            .with_partitions(vec![0, 1, 7]),
        DescribableLogDirTopic::default()
            .with_topic(topic_name(&c.topic("never-created")))
            .with_partitions(vec![0]),
    ]));
    let resp = t.leader(&req, DESCRIBE_LOG_DIRS_VERSION).await?;
    o.error("error", resp.error_code);
    o.set("log_dirs", resp.results.len());
    for (i, dir) in resp.results.iter().enumerate() {
        let prefix = format!("dir{i}.");
        o.error(format!("{prefix}error"), dir.error_code);
        o.set(format!("{prefix}absolute"), dir.log_dir.starts_with('/'));
        o.set(format!("{prefix}total_bytes"), dir.total_bytes);
        o.set(format!("{prefix}usable_bytes"), dir.usable_bytes);
        o.set(
            format!("{prefix}usable_within_total"),
            dir.usable_bytes >= 0 && dir.usable_bytes <= dir.total_bytes,
        );
        for listed in &dir.topics {
            let label = if listed.name.0.as_str() == topic {
                "t"
            } else {
                "other"
            };
            for p in &listed.partitions {
                o.set(
                    format!("{prefix}{label}-{}", p.partition_index),
                    format!(
                        "size={} lag={} future={}",
                        p.partition_size, p.offset_lag, p.is_future_key
                    ),
                );
            }
        }
    }
    // Null asks for every partition: the topic's are among them.
    let every = t
        .leader(
            &DescribeLogDirsRequest::default().with_topics(None),
            DESCRIBE_LOG_DIRS_VERSION,
        )
        .await?;
    let listed: usize = every
        .results
        .iter()
        .flat_map(|d| &d.topics)
        .filter(|x| x.name.0.as_str() == topic)
        .map(|x| x.partitions.len())
        .sum();
    o.set("all.partitions_of_the_topic", listed);
    Ok(o)
}
