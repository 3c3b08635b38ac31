//! Metadata: the partitions of a topic, auto-creation on and off, and names Kafka refuses.

use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};

use super::{consumer_offsets_topic, scenario, Ctx, Scenario};
use crate::observe::Observation;
use crate::target::{topic_name, Target};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "metadata/a topic's partitions",
            true,
            partitions,
            &[(
                "brokers",
                "our followers are simulated replicas inside the broker, not brokers \
                 (issue 20 makes them brokers)"
            )]
        ),
        scenario!(
            "metadata/unknown topic, auto-create off",
            true,
            auto_create_off
        ),
        scenario!(
            "metadata/unknown topic, auto-create on",
            true,
            auto_create_on,
            &[(
                "first.error",
                "our topic creation is synchronous, Kafka's controller creates the topic \
                 asynchronously (UNKNOWN_TOPIC_OR_PARTITION on the Metadata that creates \
                 it); clients retry either way"
            )]
        ),
        scenario!(
            "metadata/invalid topic name, auto-create on",
            true,
            invalid_name
        ),
        scenario!(
            "metadata/all topics lists internal ones as internal",
            true,
            all_topics
        ),
    ]
}

async fn ask(t: &mut Target, topic: &str, auto_create: bool) -> Result<MetadataResponse> {
    let req = MetadataRequest::default()
        .with_allow_auto_topic_creation(auto_create)
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
        ]));
    t.leader(&req, 12).await
}

/// Records a topic's answer: error, internal flag, and per partition its leader, epoch,
/// replicas and ISR.
fn see_topic(o: &mut Observation, prefix: &str, meta: &MetadataResponse) {
    let Some(topic) = meta.topics.first() else {
        o.set(format!("{prefix}topics"), 0);
        return;
    };
    o.error(format!("{prefix}error"), topic.error_code);
    o.set(format!("{prefix}is_internal"), topic.is_internal);
    o.set(format!("{prefix}partitions"), topic.partitions.len());
    let mut parts: Vec<_> = topic.partitions.iter().collect();
    parts.sort_by_key(|p| p.partition_index);
    for p in parts {
        let ids = |v: &[kafka_protocol::messages::BrokerId]| {
            v.iter()
                .map(|b| b.0.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let key = format!("{prefix}p{}", p.partition_index);
        o.error(format!("{key}.error"), p.error_code);
        o.set(format!("{key}.leader"), p.leader_id.0);
        o.set(format!("{key}.leader_epoch"), p.leader_epoch);
        o.set(format!("{key}.replicas"), ids(&p.replica_nodes));
        o.set(format!("{key}.isr"), ids(&p.isr_nodes));
        o.set(format!("{key}.offline"), ids(&p.offline_replicas));
    }
}

async fn partitions(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("m");
    t.create_topic(&topic, 3, &[]).await?;
    let mut o = Observation::new();
    let meta = ask(t, &topic, false).await?;
    see_topic(&mut o, "", &meta);
    o.set("brokers", meta.brokers.len());
    o.set(
        "controller_is_a_listed_broker",
        meta.brokers.iter().any(|b| b.node_id == meta.controller_id),
    );
    Ok(o)
}

async fn auto_create_off(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("never-created");
    let mut o = Observation::new();
    see_topic(&mut o, "", &ask(t, &topic, false).await?);
    see_topic(&mut o, "again.", &ask(t, &topic, false).await?);
    Ok(o)
}

async fn auto_create_on(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("auto");
    let mut o = Observation::new();
    let first = ask(t, &topic, true).await?;
    o.error(
        "first.error",
        first.topics.first().map_or(-1, |t| t.error_code),
    );
    // Then the topic exists: wait until it has a leader and a full ISR.
    let deadline = Instant::now() + Duration::from_secs(30);
    let settled = loop {
        let meta = ask(t, &topic, false).await?;
        let ready = meta.topics.first().is_some_and(|t| {
            t.error_code == 0
                && !t.partitions.is_empty()
                && t.partitions
                    .iter()
                    .all(|p| p.leader_id.0 >= 0 && p.isr_nodes.len() == p.replica_nodes.len())
        });
        if ready || Instant::now() > deadline {
            break meta;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let topic = &settled.topics[0];
    o.error("settled.error", topic.error_code);
    o.set("settled.partitions", topic.partitions.len());
    o.set(
        "settled.replication_factor",
        topic
            .partitions
            .first()
            .map_or(0, |p| p.replica_nodes.len()),
    );
    o.set(
        "settled.isr",
        topic.partitions.first().map_or(0, |p| p.isr_nodes.len()),
    );
    Ok(o)
}

async fn invalid_name(t: &mut Target, _: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    for (key, name) in [
        ("bang", "bad name!"),
        ("dot", "."),
        ("long", &"x".repeat(250)),
    ] {
        let meta = ask(t, name, true).await?;
        o.error(key, meta.topics.first().map_or(-1, |t| t.error_code));
    }
    Ok(o)
}

async fn all_topics(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("m");
    t.create_topic(&topic, 1, &[]).await?;
    // As any group consumer would have (ours creates it only then; the harness has already
    // asked Kafka's).
    consumer_offsets_topic(t, c).await?;
    let mut o = Observation::new();
    let meta = t
        .leader(&MetadataRequest::default().with_topics(None), 12)
        .await?;
    let find = |name: &str| {
        meta.topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == name))
    };
    o.set("lists_new_topic", find(&topic).is_some());
    o.set(
        "new_topic_is_internal",
        find(&topic).is_some_and(|t| t.is_internal),
    );
    o.set(
        "consumer_offsets_is_internal",
        find("__consumer_offsets").map_or("absent".to_owned(), |t| t.is_internal.to_string()),
    );
    Ok(o)
}
