//! IncrementalAlterConfigs and AlterConfigs against topics and brokers, read back with
//! DescribeConfigs (values, sources, synonyms, read-only): the answers a `kafka-configs`
//! user or a Terraform run sees.
//!
//! Kafka applies an alter through its controller and every broker replays it a moment
//! later, so a read-back polls DescribeConfigs (a few seconds at most) until the value it
//! expects shows; ours shows it at once.

use std::time::{Duration, Instant};

use anyhow::Result;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::{
    alter_configs_request, incremental_alter_configs_request, AlterConfigsRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest,
};

use super::{scenario, Ctx, Scenario};
use crate::observe::Observation;
use crate::target::{name, Target};

pub fn scenarios() -> Vec<Scenario> {
    vec![
        scenario!(
            "configs/incremental SET, APPEND, SUBTRACT, DELETE read back",
            true,
            incremental_read_back
        ),
        scenario!(
            "configs/incremental errors",
            true,
            incremental_errors,
            &[
                (
                    "bad_operation",
                    "Kafka answers an unknown operation code with UNKNOWN_SERVER_ERROR (its \
                     broker fails to map it); ours says INVALID_REQUEST"
                ),
                (
                    "broker_dynamic",
                    "log.retention.bytes is a dynamic broker config in Kafka; this broker \
                     has no dynamic broker configs and refuses every broker alter as Kafka \
                     refuses a static one"
                ),
            ]
        ),
        scenario!(
            "configs/alter_configs replaces the override set",
            true,
            alter_configs_replaces
        ),
        scenario!(
            "configs/describe with synonyms, topic and broker",
            true,
            describe_synonyms,
            &[
                ("topic.min.insync.replicas", MIN_ISR),
                ("broker.min.insync.replicas", MIN_ISR),
                (
                    "broker.broker.id",
                    "Kafka says STATIC_BROKER_CONFIG for what server.properties sets; ours \
                     for what broker.toml sets to other than the built-in default (broker.id \
                     1 is the default)"
                ),
                (
                    "broker.num.partitions",
                    "as broker.id: num.partitions 1 is the built-in default here"
                ),
                (
                    "broker.log.retention.bytes",
                    "dynamic (read_only=false) in Kafka; read-only here, which has no dynamic \
                     broker configs"
                ),
                (
                    "broker.message.max.bytes",
                    "as log.retention.bytes: dynamic in Kafka, read-only here"
                ),
            ]
        ),
    ]
}

const MIN_ISR: &str = "Kafka 4.4's controller keeps min.insync.replicas as a cluster-wide \
                       dynamic default (source 3, written for ELR) over the static value; ours \
                       is the broker's setting (DEFAULT_CONFIG, 2)";

/// One IncrementalAlterConfigs resource: (type, name, [(config, op, value)]).
type Ops<'a> = &'a [(&'a str, i8, Option<&'a str>)];

async fn incremental(
    t: &mut Target,
    resources: &[(i8, &str, Ops<'_>)],
    validate_only: bool,
) -> Result<Vec<i16>> {
    use incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let req = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(resource_type, resource, ops)| {
                    AlterConfigsResource::default()
                        .with_resource_type(*resource_type)
                        .with_resource_name(name(resource))
                        .with_configs(
                            ops.iter()
                                .map(|(k, op, v)| {
                                    AlterableConfig::default()
                                        .with_name(name(k))
                                        .with_config_operation(*op)
                                        .with_value(v.map(name))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let resp = t.leader(&req, 1).await?;
    Ok(resp.responses.iter().map(|r| r.error_code).collect())
}

async fn one(t: &mut Target, topic: &str, ops: Ops<'_>) -> Result<i16> {
    Ok(incremental(t, &[(2, topic, ops)], false)
        .await?
        .first()
        .copied()
        .unwrap_or(-1))
}

async fn replace(
    t: &mut Target,
    resource_type: i8,
    resource: &str,
    configs: &[(&str, Option<&str>)],
) -> Result<i16> {
    use alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let req = AlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(name(resource))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    AlterableConfig::default()
                        .with_name(name(k))
                        .with_value(v.map(name))
                })
                .collect(),
        )]);
    let resp = t.leader(&req, 2).await?;
    Ok(resp.responses.first().map_or(-1, |r| r.error_code))
}

/// Every config of a resource, with synonyms.
async fn describe(
    t: &mut Target,
    resource_type: i8,
    resource: &str,
    documentation: bool,
) -> Result<Vec<DescribeConfigsResourceResult>> {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(documentation)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(name(resource))]);
    let resp = t.leader(&req, 4).await?;
    Ok(resp
        .results
        .into_iter()
        .next()
        .map(|r| r.configs)
        .unwrap_or_default())
}

/// `value source=S read_only=R` of `key`, or `absent`.
fn shown(configs: &[DescribeConfigsResourceResult], key: &str) -> String {
    configs
        .iter()
        .find(|e| e.name.as_str() == key)
        .map_or("absent".to_owned(), |e| {
            format!(
                "{} source={} read_only={}",
                e.value.as_deref().unwrap_or("null"),
                e.config_source,
                e.read_only
            )
        })
}

/// The synonyms of `key`, as `name=value(source)`.
fn synonyms(configs: &[DescribeConfigsResourceResult], key: &str) -> String {
    configs
        .iter()
        .find(|e| e.name.as_str() == key)
        .map(|e| {
            e.synonyms
                .iter()
                .map(|s| {
                    format!(
                        "{}={}({})",
                        s.name.as_str(),
                        s.value.as_deref().unwrap_or("null"),
                        s.source
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// `shown(key)` once it starts with `expected` (Kafka's brokers replay an alter a moment
/// after answering it), or what it is after 10 s.
async fn read_back(t: &mut Target, topic: &str, key: &str, expected: &str) -> Result<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = shown(&describe(t, 2, topic, false).await?, key);
        if now.starts_with(expected) || Instant::now() > deadline {
            return Ok(now);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

async fn incremental_read_back(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("inc");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let code = one(t, &topic, &[("retention.bytes", SET, Some("4096"))]).await?;
    o.error("set", code);
    o.set(
        "set.retention.bytes",
        read_back(t, &topic, "retention.bytes", "4096 ").await?,
    );
    let configs = describe(t, 2, &topic, false).await?;
    o.set(
        "set.retention.bytes.synonyms",
        synonyms(&configs, "retention.bytes"),
    );
    let code = one(t, &topic, &[("cleanup.policy", APPEND, Some("compact"))]).await?;
    o.error("append", code);
    o.set(
        "append.cleanup.policy",
        read_back(t, &topic, "cleanup.policy", "delete,compact ").await?,
    );
    let code = one(t, &topic, &[("cleanup.policy", SUBTRACT, Some("delete"))]).await?;
    o.error("subtract", code);
    o.set(
        "subtract.cleanup.policy",
        read_back(t, &topic, "cleanup.policy", "compact ").await?,
    );
    let code = one(t, &topic, &[("retention.bytes", DELETE, None)]).await?;
    o.error("delete", code);
    o.set(
        "delete.retention.bytes",
        read_back(t, &topic, "retention.bytes", "-1 ").await?,
    );
    // Values as Kafka prints them, and a config this broker does not act on.
    let code = one(
        t,
        &topic,
        &[
            ("preallocate", SET, Some("TRUE")),
            ("min.cleanable.dirty.ratio", SET, Some("0.7")),
            ("segment.ms", SET, Some(" 60000 ")),
        ],
    )
    .await?;
    o.error("set_three", code);
    o.set(
        "preallocate",
        read_back(t, &topic, "preallocate", "true ").await?,
    );
    o.set(
        "min.cleanable.dirty.ratio",
        read_back(t, &topic, "min.cleanable.dirty.ratio", "0.7 ").await?,
    );
    o.set(
        "segment.ms",
        read_back(t, &topic, "segment.ms", "60000 ").await?,
    );
    Ok(o)
}

async fn incremental_errors(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("incerr");
    t.create_topic(&topic, 1, &[]).await?;
    let mut o = Observation::new();
    let cases: Vec<(&str, Ops)> = vec![
        ("unknown_name", &[("no.such.config", SET, Some("1"))]),
        ("not_an_int", &[("min.insync.replicas", SET, Some("abc"))]),
        ("min_isr_0", &[("min.insync.replicas", SET, Some("0"))]),
        (
            "min_isr_above_replicas",
            &[("min.insync.replicas", SET, Some("4"))],
        ),
        ("append_not_a_list", &[("retention.ms", APPEND, Some("5"))]),
        (
            "subtract_not_a_list",
            &[("retention.ms", SUBTRACT, Some("5"))],
        ),
        (
            "append_bad_policy",
            &[("cleanup.policy", APPEND, Some("shred"))],
        ),
        ("null_value", &[("retention.ms", SET, None)]),
        ("bad_operation", &[("retention.ms", 7, Some("1"))]),
        (
            "duplicate_key",
            &[
                ("retention.ms", SET, Some("1")),
                ("retention.ms", SET, Some("2")),
            ],
        ),
        ("delete_unknown", &[("no.such.config", DELETE, None)]),
        ("retention_ms_minus_2", &[("retention.ms", SET, Some("-2"))]),
        (
            "retention_bytes_minus_2",
            &[("retention.bytes", SET, Some("-2"))],
        ),
        ("segment_bytes_1", &[("segment.bytes", SET, Some("1"))]),
        (
            "timestamp_type_bad",
            &[("message.timestamp.type", SET, Some("Now"))],
        ),
        (
            "compression_bad",
            &[("compression.type", SET, Some("brotli"))],
        ),
        ("ratio_2", &[("min.cleanable.dirty.ratio", SET, Some("2"))]),
        (
            "remote_storage_on",
            &[("remote.storage.enable", SET, Some("true"))],
        ),
        (
            "throttled_star",
            &[("leader.replication.throttled.replicas", SET, Some("*"))],
        ),
        (
            "throttled_bad",
            &[("leader.replication.throttled.replicas", SET, Some("x"))],
        ),
        (
            "one_bad_spoils_the_resource",
            &[
                ("retention.bytes", SET, Some("777")),
                ("min.insync.replicas", SET, Some("x")),
            ],
        ),
    ];
    for (key, ops) in cases {
        let code = one(t, &topic, ops).await?;
        o.error(key, code);
    }
    o.set(
        "after_spoiled",
        // -2 from the case above; the spoiled 777 never shows.
        read_back(t, &topic, "retention.bytes", "-2 ").await?,
    );
    let codes = incremental(
        t,
        &[
            (2, topic.as_str(), &[("retention.ms", SET, Some("1"))]),
            (2, topic.as_str(), &[("retention.bytes", SET, Some("2"))]),
        ],
        false,
    )
    .await?;
    o.set("duplicate_resource", format!("{codes:?}"));
    let never = c.topic("never-created");
    let codes = incremental(
        t,
        &[
            (2, never.as_str(), &[("retention.ms", SET, Some("1"))]),
            (9, "x", &[("retention.ms", SET, Some("1"))]),
            (2, "", &[("retention.ms", SET, Some("1"))]),
        ],
        false,
    )
    .await?;
    o.set("unknown_topic,bad_type,empty_topic", format!("{codes:?}"));
    let validate = |value| [("retention.bytes", SET, Some(value))];
    let ok = incremental(t, &[(2, topic.as_str(), &validate("12345"))], true).await?;
    o.set("validate_only", format!("{ok:?}"));
    let bad = incremental(t, &[(2, topic.as_str(), &validate("x"))], true).await?;
    o.set("validate_only_bad", format!("{bad:?}"));
    o.set(
        "after_validate_only",
        shown(&describe(t, 2, &topic, false).await?, "retention.bytes"),
    );
    // Brokers, validate_only so that Kafka's cluster is left as it was.
    for (key, broker, config) in [
        ("broker_static", "1", "num.partitions"),
        ("broker_static_default", "", "num.partitions"),
        ("broker_dynamic", "1", "log.retention.bytes"),
        ("broker_other_id", "2", "num.partitions"),
        ("broker_not_a_number", "x", "num.partitions"),
    ] {
        let codes = incremental(t, &[(4, broker, &[(config, SET, Some("3"))])], true).await?;
        o.set(key, format!("{codes:?}"));
    }
    Ok(o)
}

async fn alter_configs_replaces(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("legacy");
    t.create_topic(
        &topic,
        1,
        &[("retention.ms", "1000"), ("min.insync.replicas", "1")],
    )
    .await?;
    let mut o = Observation::new();
    let code = replace(t, 2, &topic, &[("retention.bytes", Some("5000"))]).await?;
    o.error("replace", code);
    o.set(
        "retention.bytes",
        read_back(t, &topic, "retention.bytes", "5000 ").await?,
    );
    o.set(
        "retention.ms",
        read_back(t, &topic, "retention.ms", "604800000 ").await?,
    );
    let configs = describe(t, 2, &topic, false).await?;
    let overrides: Vec<&str> = configs
        .iter()
        .filter(|e| e.config_source == 1)
        .map(|e| e.name.as_str())
        .collect();
    o.set("overrides", overrides.join(","));
    for (key, configs) in [
        ("unknown_name", &[("no.such", Some("1"))][..]),
        ("null_value", &[("retention.ms", None)][..]),
        ("bad_value", &[("retention.ms", Some("x"))][..]),
        (
            "duplicate_key",
            &[("retention.ms", Some("1")), ("retention.ms", Some("2"))][..],
        ),
    ] {
        let code = replace(t, 2, &topic, configs).await?;
        o.error(key, code);
    }
    let never = c.topic("never-created");
    o.error(
        "unknown_topic",
        replace(t, 2, &never, &[("retention.ms", Some("1"))]).await?,
    );
    o.error("bad_type", replace(t, 9, "x", &[]).await?);
    Ok(o)
}

async fn describe_synonyms(t: &mut Target, c: &Ctx) -> Result<Observation> {
    let topic = c.topic("syn");
    t.create_topic(&topic, 1, &[("max.message.bytes", "2048")])
        .await?;
    let mut o = Observation::new();
    let configs = describe(t, 2, &topic, true).await?;
    o.set("topic.count", configs.len());
    for key in [
        "max.message.bytes",
        "retention.bytes",
        "retention.ms",
        "segment.ms",
        "cleanup.policy",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "remote.storage.enable",
        "min.cleanable.dirty.ratio",
    ] {
        o.set(
            format!("topic.{key}"),
            format!(
                "{} synonyms={}",
                shown(&configs, key),
                synonyms(&configs, key)
            ),
        );
    }
    let types: Vec<String> = configs
        .iter()
        .map(|e| format!("{}:{}", e.name.as_str(), e.config_type))
        .collect();
    o.set("topic.types", types.join(","));
    o.set(
        "topic.documented",
        configs.iter().all(|e| e.documentation.is_some()),
    );
    let undocumented = describe(t, 2, &topic, false).await?;
    o.set(
        "topic.without_documentation",
        undocumented.iter().all(|e| e.documentation.is_none()),
    );
    let broker = describe(t, 4, "1", false).await?;
    for key in [
        "broker.id",
        "num.partitions",
        "min.insync.replicas",
        "log.retention.bytes",
        "message.max.bytes",
    ] {
        o.set(format!("broker.{key}"), shown(&broker, key));
    }
    Ok(o)
}
