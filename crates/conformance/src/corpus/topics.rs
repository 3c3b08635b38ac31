//! CreateTopics and DeleteTopics, their errors, DescribeConfigs, and a topic deleted while
//! an acks=all produce waits on it.

use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DescribeConfigsRequest,
    MetadataRequest, ProduceRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::{
    list_offset_with, list_offsets_request, produce_request, scenario, see_produce, timing, values,
    with_followers_stopped, Ctx, Scenario, Then, PRODUCE_VERSION,
};
use crate::observe::Observation;
use crate::target::{name, topic_configs, topic_name, Target, LEADER};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!("create_topics/errors", true, create_errors),
        scenario!("create_topics/validate_only", true, validate_only),
        scenario!(
            "create_topics/the answer's partitions, replication and configs",
            true,
            create_answer
        ),
        scenario!(
            "delete_topics/errors, and a deleted topic is gone",
            true,
            delete_topics
        ),
        scenario!(
            "delete_topics/while an acks=-1 produce waits on the topic",
            true,
            delete_while_parked
        ),
        scenario!(
            "delete_topics/while an acks=-1 produce waits, and a Metadata re-creates the topic",
            true,
            delete_while_parked_recreated
        ),
        scenario!(
            "describe_configs/a topic",
            true,
            describe_topic_configs,
            &[(
                "min.insync.replicas",
                "Kafka 4.4's controller keeps min.insync.replicas as a cluster-wide dynamic \
                 default (source 3, written for ELR); ours is the broker's setting, at its \
                 default (source 5)"
            )]
        ),
        scenario!("describe_configs/errors", true, describe_config_errors),
    ]
}

fn creatable(
    topic: &str,
    partitions: i32,
    replication: i16,
    configs: &[(&str, &str)],
) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(topic))
        .with_num_partitions(partitions)
        .with_replication_factor(replication)
        .with_configs(topic_configs(configs))
}

async fn create(
    t: &mut Target,
    topics: Vec<CreatableTopic>,
    validate_only: bool,
) -> Result<CreateTopicsResponse> {
    let req = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only);
    t.leader(&req, 7).await
}

async fn create_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let existing = c.topic("exists");
    t.create_topic(&existing, 1, &[]).await?;
    let cases: Vec<(&str, CreatableTopic)> = vec![
        ("already_exists", creatable(&existing, 1, 3, &[])),
        ("zero_partitions", creatable(&c.topic("zero"), 0, 3, &[])),
        ("replication_4", creatable(&c.topic("rf4"), 1, 4, &[])),
        ("replication_0", creatable(&c.topic("rf0"), 1, 0, &[])),
        ("bad_name", creatable("bad name!", 1, 3, &[])),
        (
            "min_isr_not_a_number",
            creatable(&c.topic("cfg1"), 1, 3, &[("min.insync.replicas", "two")]),
        ),
        (
            "unknown_config",
            creatable(&c.topic("cfg2"), 1, 3, &[("no.such.config", "1")]),
        ),
        (
            "retention_bytes_not_a_number",
            creatable(&c.topic("cfg3"), 1, 3, &[("retention.bytes", "lots")]),
        ),
    ];
    for (key, topic) in cases {
        let resp = create(t, vec![topic], false).await?;
        o.error(key, resp.topics.first().map_or(-1, |r| r.error_code));
    }
    // The same name twice in one request.
    let twice = c.topic("twice");
    let resp = create(
        t,
        vec![creatable(&twice, 1, 3, &[]), creatable(&twice, 1, 3, &[])],
        false,
    )
    .await?;
    let codes: Vec<String> = resp
        .topics
        .iter()
        .map(|r| crate::observe::error_name(r.error_code))
        .collect();
    o.set("same_name_twice", codes.join(","));
    o.error("same_name_twice.metadata", {
        let meta = t.metadata(&[&twice]).await?;
        meta.topics.first().map_or(-1, |t| t.error_code)
    });
    // Beside another topic, which is created; the answer's order tells them apart.
    let (again, other) = (c.topic("twice2"), c.topic("other"));
    let resp = create(
        t,
        vec![
            creatable(&again, 1, 3, &[]),
            creatable(&other, 1, 3, &[]),
            creatable(&again, 1, 3, &[]),
        ],
        false,
    )
    .await?;
    let answers: Vec<String> = resp
        .topics
        .iter()
        .map(|r| {
            let which = if r.name.0.as_str() == other {
                "other"
            } else {
                "twice"
            };
            format!(
                "{which}:{} partitions={}",
                crate::observe::error_name(r.error_code),
                r.num_partitions
            )
        })
        .collect();
    o.set("same_name_twice_beside_another", answers.join(","));
    Ok(o)
}

async fn validate_only(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("v");
    let resp = create(t, vec![creatable(&topic, 2, 3, &[])], true).await?;
    o.error(
        "validate_only.error",
        resp.topics.first().map_or(-1, |r| r.error_code),
    );
    let meta = t.metadata(&[&topic]).await?;
    o.error(
        "metadata_after.error",
        meta.topics.first().map_or(-1, |t| t.error_code),
    );
    let resp = create(t, vec![creatable(&topic, 0, 3, &[])], true).await?;
    o.error(
        "validate_only_zero_partitions.error",
        resp.topics.first().map_or(-1, |r| r.error_code),
    );
    Ok(o)
}

async fn create_answer(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("a");
    let resp = create(
        t,
        vec![creatable(&topic, 2, 3, &[("min.insync.replicas", "1")])],
        false,
    )
    .await?;
    let Some(r) = resp.topics.first() else {
        anyhow::bail!("CreateTopics answered no topic");
    };
    o.error("error", r.error_code);
    o.set("num_partitions", r.num_partitions);
    o.set("replication_factor", r.replication_factor);
    let config = |key: &str| {
        r.configs
            .iter()
            .flatten()
            .find(|c| c.name.as_str() == key)
            .map(|c| {
                format!(
                    "{} (source {})",
                    c.value.as_deref().unwrap_or("null"),
                    c.config_source
                )
            })
            .unwrap_or_else(|| "absent".to_owned())
    };
    o.set("config.min.insync.replicas", config("min.insync.replicas"));
    o.set("config.cleanup.policy", config("cleanup.policy"));
    Ok(o)
}

async fn delete(t: &mut Target, names: &[&str]) -> Result<Vec<String>> {
    let req = DeleteTopicsRequest::default()
        .with_topics(
            names
                .iter()
                .map(|n| DeleteTopicState::default().with_name(Some(topic_name(n))))
                .collect(),
        )
        .with_timeout_ms(30_000);
    let resp = t.leader(&req, 6).await?;
    Ok(resp
        .responses
        .iter()
        .map(|r| crate::observe::error_name(r.error_code))
        .collect())
}

/// Waits until Metadata no longer knows `topic` (Kafka deletes in the background).
async fn wait_gone(t: &mut Target, topic: &str) -> Result<i16> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let meta = t.metadata(&[topic]).await?;
        let code = meta.topics.first().map_or(-1, |t| t.error_code);
        if code != 0 || Instant::now() > deadline {
            return Ok(code);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn delete_topics(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let topic = c.topic("d");
    t.create_topic(&topic, 1, &[]).await?;
    o.set(
        "unknown",
        delete(t, &[&c.topic("never-created")]).await?.join(","),
    );
    o.set("existing", delete(t, &[&topic]).await?.join(","));
    o.error("metadata_after", wait_gone(t, &topic).await?);
    o.set("again", delete(t, &[&topic]).await?.join(","));
    // By topic id (v6): an id nobody has.
    let req = DeleteTopicsRequest::default()
        .with_topics(vec![DeleteTopicState::default()
            .with_name(None)
            .with_topic_id(uuid::Uuid::from_u128(
                0x1234_5678_9abc_def0_1234_5678_9abc_def0,
            ))])
        .with_timeout_ms(30_000);
    let resp = t.leader(&req, 6).await?;
    o.error(
        "unknown_topic_id",
        resp.responses.first().map_or(-1, |r| r.error_code),
    );
    Ok(o)
}

async fn delete_while_parked(t: &mut Target, c: &Ctx) -> Result<Observation> {
    parked_delete(t, c, false).await
}

/// As [`delete_while_parked`], but right after the delete a client's Metadata refresh
/// (auto-creation allowed, as every producer asks) creates the topic again: the parked
/// produce still belongs to the deleted partition.
async fn delete_while_parked_recreated(t: &mut Target, c: &Ctx) -> Result<Observation> {
    parked_delete(t, c, true).await
}

/// A new topic deleted, with the followers stopped, while an acks=-1 produce waits on it
/// (see [`delete_while_parked_then`]).
async fn parked_delete(t: &mut Target, c: &Ctx, recreate: bool) -> Result<Observation> {
    let topic = c.topic("d");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    // Nothing to wait for afterwards: the topic is gone.
    with_followers_stopped(t, Then::Resumed, async |t: &mut Target| {
        delete_while_parked_then(t, &topic, &mut o, recreate).await
    })
    .await?;
    Ok(o)
}

/// The steps with the followers stopped: a produce parked on the topic, the delete (and,
/// with `recreate`, a Metadata that creates the topic again), and what the produce gets.
async fn delete_while_parked_then(
    t: &mut Target,
    topic: &str,
    o: &mut Observation,
    recreate: bool,
) -> Result<()> {
    let mut producer = t.open(LEADER).await?;
    let req: ProduceRequest = produce_request(topic, 0, -1, 20_000, values("parked", 1));
    producer.write_request(&req, PRODUCE_VERSION).await?;
    // Wait until the leader has appended it (its log end, as replica id -2 reads it, is 1):
    // the produce is then waiting for the followers.
    let deadline = Instant::now() + Duration::from_secs(10);
    let log_end = list_offsets_request(-2, 0, topic, 0, -1);
    while list_offset_with(t, &log_end).await?.1 < 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = Instant::now();
    o.set("delete", delete(t, &[topic]).await?.join(","));
    if recreate {
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(true)
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
            ]));
        // Not observed: Kafka may answer from the deleted topic still cached, or
        // UNKNOWN_TOPIC_OR_PARTITION while its controller creates it (asynchronously).
        t.leader(&req, 12).await?;
    }
    let (_, resp) = producer
        .read_response::<ProduceRequest>(PRODUCE_VERSION)
        .await?;
    let p = resp
        .responses
        .into_iter()
        .flat_map(|t| t.partition_responses)
        .next()
        .unwrap_or_default();
    see_produce(o, "parked_produce.", &p);
    // At once after the delete, or at its own 20 s timeout.
    o.set("parked_produce.answered", timing(start.elapsed(), 20_000));
    Ok(())
}

async fn describe(
    t: &mut Target,
    resource_type: i8,
    resource: &str,
    keys: Option<&[&str]>,
) -> Result<kafka_protocol::messages::DescribeConfigsResponse> {
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(name(resource))
            .with_configuration_keys(
                keys.map(|ks| ks.iter().map(|k| name(k)).collect::<Vec<StrBytes>>()),
            )]);
    t.leader(&req, 4).await
}

/// The topic configs a scenario compares; Kafka answers many more.
const TOPIC_KEYS: [&str; 6] = [
    "min.insync.replicas",
    "retention.bytes",
    "retention.ms",
    "max.message.bytes",
    "cleanup.policy",
    "message.timestamp.type",
];

async fn describe_topic_configs(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("dc");
    t.create_topic(&topic, 1, &[("retention.bytes", "1048576")])
        .await?;
    let mut o = Observation::new();
    let resp = describe(t, 2, &topic, None).await?;
    let Some(r) = resp.results.first() else {
        anyhow::bail!("DescribeConfigs answered no resource");
    };
    o.error("error", r.error_code);
    o.set("config_count", r.configs.len());
    for key in TOPIC_KEYS {
        let entry = r.configs.iter().find(|e| e.name.as_str() == key);
        o.set(
            key,
            entry.map_or("absent".to_owned(), |e| {
                format!(
                    "{} source={} read_only={} type={}",
                    e.value.as_deref().unwrap_or("null"),
                    e.config_source,
                    e.read_only,
                    e.config_type
                )
            }),
        );
    }
    // Asking for some keys answers just those.
    let resp = describe(t, 2, &topic, Some(&["retention.bytes", "cleanup.policy"])).await?;
    let names: Vec<&str> = resp
        .results
        .iter()
        .flat_map(|r| &r.configs)
        .map(|e| e.name.as_str())
        .collect();
    o.set("asked_two_keys", names.join(","));
    // Kafka answers the keys asked for in its own order, not the request's, and leaves
    // out the ones it does not know; the keys both brokers have, in the order of the
    // whole list.
    let resp = describe(
        t,
        2,
        &topic,
        Some(&[
            "retention.ms",
            "cleanup.policy",
            "min.insync.replicas",
            "retention.bytes",
            "no.such.key",
        ]),
    )
    .await?;
    let names: Vec<&str> = resp
        .results
        .iter()
        .flat_map(|r| &r.configs)
        .map(|e| e.name.as_str())
        .filter(|n| *n != "retention.ms")
        .collect();
    o.set("asked_five_keys_without_retention.ms", names.join(","));
    let names: Vec<&str> = r
        .configs
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| TOPIC_KEYS.contains(n) && *n != "retention.ms")
        .collect();
    o.set("order_of_shared_keys", names.join(","));
    Ok(o)
}

async fn describe_config_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let mut o = Observation::new();
    let resp = describe(t, 2, &c.topic("never-created"), None).await?;
    o.error(
        "unknown_topic",
        resp.results.first().map_or(-1, |r| r.error_code),
    );
    let resp = describe(t, 4, "1", Some(&["min.insync.replicas"])).await?;
    let r = resp.results.first();
    o.error("broker_1", r.map_or(-1, |r| r.error_code));
    o.set(
        "broker_1.min.insync.replicas",
        r.and_then(|r| r.configs.first())
            .map_or("absent".to_owned(), |e| {
                e.value.as_deref().unwrap_or("null").to_owned()
            }),
    );
    let resp = describe(t, 4, "not-a-broker-id", None).await?;
    o.error(
        "broker_not_a_number",
        resp.results.first().map_or(-1, |r| r.error_code),
    );
    for (key, name) in [
        ("broker_2", "2"),
        ("broker_99", "99"),
        ("broker_minus_1", "-1"),
        ("broker_01", "01"),
        ("broker_empty", ""),
    ] {
        let resp = describe(t, 4, name, Some(&["min.insync.replicas"])).await?;
        let r = resp.results.first();
        o.error(key, r.map_or(-1, |r| r.error_code));
        o.set(
            format!("{key}.configs"),
            r.map(|r| {
                r.configs
                    .iter()
                    .map(|e| {
                        format!(
                            "{}={}",
                            e.name.as_str(),
                            e.value.as_deref().unwrap_or("null")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .unwrap_or_default(),
        );
    }
    let resp = describe(t, 9, "x", None).await?;
    o.error(
        "unknown_resource_type",
        resp.results.first().map_or(-1, |r| r.error_code),
    );
    Ok(o)
}
