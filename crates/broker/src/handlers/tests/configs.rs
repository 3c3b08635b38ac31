//! What IncrementalAlterConfigs and AlterConfigs do, as a user of `kafka-configs` or an
//! AdminClient sees it: through DescribeConfigs, and through a produce.

use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};

use super::*;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn create(apis: &KafkaApis, topic: &str, configs: &[(&str, &str)]) {
    let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(1)
        .with_replication_factor(3)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(text(k))
                        .with_value(Some(text(v)))
                })
                .collect(),
        )]);
    let ResponseKind::CreateTopics(r) = ask(apis, 7, RequestKind::CreateTopics(request)) else {
        panic!("not a CreateTopics response");
    };
    assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0].error_message);
}

/// One resource's (resource type, name, [(config, operation, value)]).
type Resource<'a> = (i8, &'a str, &'a [(&'a str, i8, Option<&'a str>)]);

/// IncrementalAlterConfigs at `version`; each resource's (error code, message).
fn incremental(
    apis: &KafkaApis,
    version: i16,
    validate_only: bool,
    resources: &[Resource],
) -> Vec<(i16, Option<String>)> {
    let request = IncrementalAlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(
            resources
                .iter()
                .map(|(resource_type, resource, configs)| {
                    AlterConfigsResource::default()
                        .with_resource_type(*resource_type)
                        .with_resource_name(text(resource))
                        .with_configs(
                            configs
                                .iter()
                                .map(|(k, op, v)| {
                                    AlterableConfig::default()
                                        .with_name(text(k))
                                        .with_config_operation(*op)
                                        .with_value(v.map(text))
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let ResponseKind::IncrementalAlterConfigs(r) =
        ask(apis, version, RequestKind::IncrementalAlterConfigs(request))
    else {
        panic!("not an IncrementalAlterConfigs response");
    };
    r.responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect()
}

/// One topic resource, SET etc. on `topic`; its error code.
fn alter_topic(apis: &KafkaApis, topic: &str, ops: &[(&str, i8, Option<&str>)]) -> i16 {
    incremental(apis, 1, false, &[(2, topic, ops)])[0].0
}

/// AlterConfigs (the legacy API) of one resource; its error code.
fn replace(
    apis: &KafkaApis,
    resource_type: i8,
    resource: &str,
    configs: &[(&str, Option<&str>)],
    validate_only: bool,
) -> i16 {
    let request = AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![LegacyResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        LegacyConfig::default()
                            .with_name(text(k))
                            .with_value(v.map(text))
                    })
                    .collect(),
            )]);
    let ResponseKind::AlterConfigs(r) = ask(apis, 2, RequestKind::AlterConfigs(request)) else {
        panic!("not an AlterConfigs response");
    };
    r.responses[0].error_code
}

fn describe(apis: &KafkaApis, resource_type: i8, resource: &str) -> DescribeConfigsResult {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_include_documentation(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))]);
    let ResponseKind::DescribeConfigs(mut r) = ask(apis, 4, RequestKind::DescribeConfigs(request))
    else {
        panic!("not a DescribeConfigs response");
    };
    r.results.remove(0)
}

/// A topic config's (value, source) as DescribeConfigs reports it.
fn shown(apis: &KafkaApis, topic: &str, key: &str) -> (String, i8) {
    let result = describe(apis, 2, topic);
    let entry = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == key)
        .unwrap_or_else(|| panic!("{key} is not described"));
    (
        entry.value.as_deref().unwrap_or("null").to_string(),
        entry.config_source,
    )
}

#[test]
fn set_shows_as_a_topic_config_with_synonyms_and_delete_returns_to_the_default() {
    let apis = manual_apis();
    create(&apis, "t", &[]);
    assert_eq!(shown(&apis, "t", "retention.bytes"), ("-1".into(), 5));
    for version in 0..=1 {
        assert_eq!(
            incremental(
                &apis,
                version,
                false,
                &[(2, "t", &[("retention.bytes", SET, Some("4096"))])]
            ),
            vec![(0, None)]
        );
        assert_eq!(shown(&apis, "t", "retention.bytes"), ("4096".into(), 1));
        // The topic's value, then the broker's default, under the broker's name.
        let result = describe(&apis, 2, "t");
        let entry = result
            .configs
            .iter()
            .find(|c| c.name.as_str() == "retention.bytes")
            .unwrap();
        let synonyms: Vec<(&str, Option<&str>, i8)> = entry
            .synonyms
            .iter()
            .map(|s| (s.name.as_str(), s.value.as_deref(), s.source))
            .collect();
        assert_eq!(
            synonyms,
            vec![
                ("retention.bytes", Some("4096"), 1),
                ("log.retention.bytes", Some("-1"), 5)
            ]
        );
        assert!(entry
            .documentation
            .as_deref()
            .is_some_and(|d| d.contains("at once")));
        assert_eq!(
            alter_topic(&apis, "t", &[("retention.bytes", DELETE, None)]),
            0
        );
        assert_eq!(shown(&apis, "t", "retention.bytes"), ("-1".into(), 5));
    }
    // Configs this broker does not act on are stored and reported all the same.
    assert_eq!(
        alter_topic(&apis, "t", &[("segment.ms", SET, Some("1000"))]),
        0
    );
    assert_eq!(shown(&apis, "t", "segment.ms"), ("1000".into(), 1));
}

#[test]
fn incremental_alters_of_one_topic_from_many_clients_at_once_all_land() {
    // Each alter reads the topic's overrides and writes the whole new set; without one
    // alter at a time, two at once each keep the other's key out and one change is lost.
    let apis = manual_apis();
    let keys = [
        ("retention.bytes", "4096"),
        ("retention.ms", "60000"),
        ("segment.ms", "1000"),
        ("max.message.bytes", "2048"),
        ("min.insync.replicas", "1"),
        ("cleanup.policy", "compact"),
    ];
    for round in 0..40 {
        let topic = format!("t{round}");
        create(&apis, &topic, &[]);
        let start = std::sync::Barrier::new(keys.len());
        std::thread::scope(|scope| {
            for (key, value) in keys {
                let (apis, topic, start) = (&apis, &topic, &start);
                scope.spawn(move || {
                    start.wait();
                    assert_eq!(alter_topic(apis, topic, &[(key, SET, Some(value))]), 0);
                });
            }
        });
        for (key, value) in keys {
            assert_eq!(
                shown(&apis, &topic, key),
                (value.to_string(), 1),
                "round {round}: {key} was lost"
            );
        }
    }
}

#[test]
fn append_and_subtract_change_a_list_and_only_a_list() {
    let apis = manual_apis();
    create(&apis, "t", &[]);
    assert_eq!(
        alter_topic(&apis, "t", &[("cleanup.policy", APPEND, Some("compact"))]),
        0
    );
    assert_eq!(
        shown(&apis, "t", "cleanup.policy"),
        ("delete,compact".into(), 1)
    );
    assert_eq!(
        alter_topic(&apis, "t", &[("cleanup.policy", APPEND, Some("compact"))]),
        0
    );
    assert_eq!(shown(&apis, "t", "cleanup.policy").0, "delete,compact");
    assert_eq!(
        alter_topic(&apis, "t", &[("cleanup.policy", SUBTRACT, Some("delete"))]),
        0
    );
    assert_eq!(shown(&apis, "t", "cleanup.policy"), ("compact".into(), 1));
    // Not a LIST: INVALID_CONFIG, as Kafka.
    assert_eq!(
        alter_topic(&apis, "t", &[("retention.ms", APPEND, Some("5"))]),
        40
    );
    assert_eq!(
        alter_topic(&apis, "t", &[("retention.ms", SUBTRACT, Some("5"))]),
        40
    );
    assert_eq!(
        alter_topic(&apis, "t", &[("cleanup.policy", APPEND, Some("shred"))]),
        40
    );
    assert_eq!(shown(&apis, "t", "cleanup.policy").0, "compact");
}

#[test]
fn bad_alters_answer_kafkas_errors_and_change_nothing() {
    let apis = manual_apis();
    create(&apis, "t", &[("retention.ms", "1000")]);
    let code = |ops: &[(&str, i8, Option<&str>)]| alter_topic(&apis, "t", ops);
    // INVALID_CONFIG: unknown names, bad values, and one bad value spoils the resource.
    assert_eq!(code(&[("no.such.config", SET, Some("1"))]), 40);
    assert_eq!(code(&[("min.insync.replicas", SET, Some("abc"))]), 40);
    assert_eq!(code(&[("min.insync.replicas", SET, Some("0"))]), 40);
    assert_eq!(code(&[("remote.storage.enable", SET, Some("true"))]), 40);
    assert_eq!(
        code(&[
            ("retention.bytes", SET, Some("777")),
            ("min.insync.replicas", SET, Some("x"))
        ]),
        40
    );
    assert_eq!(shown(&apis, "t", "retention.bytes").1, 5);
    // INVALID_REQUEST: the request's shape.
    assert_eq!(code(&[("retention.ms", SET, None)]), 42);
    assert_eq!(code(&[("retention.ms", 7, Some("1"))]), 42);
    assert_eq!(
        code(&[
            ("retention.ms", SET, Some("1")),
            ("retention.ms", SET, Some("2"))
        ]),
        42
    );
    assert_eq!(shown(&apis, "t", "retention.ms"), ("1000".into(), 1));
    let answers = incremental(
        &apis,
        1,
        false,
        &[
            (2, "t", &[("retention.ms", SET, Some("1"))]),
            (2, "t", &[("retention.bytes", SET, Some("2"))]),
            (2, "", &[("retention.ms", SET, Some("1"))]),
            (9, "x", &[]),
            (2, "never-created", &[("retention.ms", SET, Some("1"))]),
        ],
    );
    let codes: Vec<i16> = answers.iter().map(|(code, _)| *code).collect();
    assert_eq!(codes, vec![42, 42, 42, 42, 3]);
    assert_eq!(
        answers[4].1.as_deref(),
        Some("The topic 'never-created' does not exist.")
    );
    // Broker configs cannot be changed while this broker runs (Kafka's answer for a
    // config it cannot update dynamically); the broker must be this one.
    let broker = incremental(
        &apis,
        1,
        true,
        &[(4, "1", &[("num.partitions", SET, Some("3"))])],
    );
    assert_eq!(
        broker,
        vec![(
            42,
            Some("Cannot update these configs dynamically: [num.partitions]".into())
        )]
    );
    assert_eq!(incremental(&apis, 1, false, &[(4, "2", &[])])[0].0, 42);
    assert_eq!(incremental(&apis, 1, false, &[(4, "", &[])])[0].0, 0);
    assert_eq!(
        replace(&apis, 4, "1", &[("message.max.bytes", Some("5"))], false),
        42
    );
    let min_isr = describe(&apis, 4, "1");
    let entry = min_isr
        .configs
        .iter()
        .find(|c| c.name.as_str() == "num.partitions")
        .unwrap();
    assert!(entry.read_only);
    assert_eq!(entry.value.as_deref(), Some("1"));
}

#[test]
fn validate_only_checks_and_changes_nothing() {
    let apis = manual_apis();
    create(&apis, "t", &[]);
    let ok = incremental(
        &apis,
        1,
        true,
        &[(2, "t", &[("retention.bytes", SET, Some("12345"))])],
    );
    assert_eq!(ok, vec![(0, None)]);
    let bad = incremental(
        &apis,
        1,
        true,
        &[(2, "t", &[("retention.bytes", SET, Some("x"))])],
    );
    assert_eq!(bad[0].0, 40);
    assert_eq!(
        replace(&apis, 2, "t", &[("retention.bytes", Some("9"))], true),
        0
    );
    assert_eq!(shown(&apis, "t", "retention.bytes"), ("-1".into(), 5));
    let log = apis.replica_manager.partition("t", 0).unwrap();
    assert_eq!(log.lock().config().retention_bytes, -1);
}

#[test]
fn alter_configs_replaces_the_whole_override_set() {
    let apis = manual_apis();
    create(
        &apis,
        "t",
        &[("retention.ms", "1000"), ("min.insync.replicas", "1")],
    );
    assert_eq!(
        replace(&apis, 2, "t", &[("retention.bytes", Some("5000"))], false),
        0
    );
    assert_eq!(shown(&apis, "t", "retention.bytes"), ("5000".into(), 1));
    // What the request left out is back at its default.
    assert_eq!(shown(&apis, "t", "retention.ms"), ("604800000".into(), 5));
    assert_eq!(shown(&apis, "t", "min.insync.replicas"), ("2".into(), 5));
    assert_eq!(replace(&apis, 2, "t", &[("no.such", Some("1"))], false), 40);
    assert_eq!(replace(&apis, 2, "t", &[("retention.ms", None)], false), 42);
    assert_eq!(replace(&apis, 2, "never-created", &[], false), 3);
    assert_eq!(replace(&apis, 2, "t", &[], false), 0);
    assert_eq!(shown(&apis, "t", "retention.bytes"), ("-1".into(), 5));
}

fn produce_all(apis: &KafkaApis, topic: &str) -> i16 {
    produce(apis, topic, -1)
}

fn produce(apis: &KafkaApis, topic: &str, acks: i16) -> i16 {
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(1000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(one_record_batch()))])]);
    let ResponseKind::Produce(r) = exchange_any(apis, 9, RequestKind::Produce(request)) else {
        panic!("not a Produce response");
    };
    r.responses[0].partition_responses[0].error_code
}

/// Like `exchange`, for any API: a parked reply is given the clock it needs.
fn exchange_any(apis: &KafkaApis, version: i16, request: RequestKind) -> ResponseKind {
    let ctx = context("configs", 7, version);
    match apis.handle(&ctx, request) {
        Reply::Now(r) => *r,
        Reply::Later(mut rx) => {
            apis.replica_manager.timer.advance_by(1_000);
            rx.try_recv().expect("the parked reply came")
        }
        _ => panic!("no response"),
    }
}

/// Appends with acks=1 and lets replica.lag.time.max.ms pass: the followers nobody
/// fetches for leave the ISR.
fn shrink_isr_to_the_leader(apis: &KafkaApis, topic: &str) {
    assert_eq!(produce(apis, topic, 1), 0);
    let lag = apis.replica_manager.config.replica_lag_time_max_ms;
    apis.replica_manager.timer.advance_by(lag * 2);
}

#[test]
fn a_min_isr_raised_above_the_isr_refuses_acks_all_at_once() {
    // Nobody fetches for the simulated followers here: once a record is appended and
    // replica.lag.time.max.ms passes, the ISR is the leader alone.
    let apis = manual_apis();
    create(&apis, "t", &[("min.insync.replicas", "1")]);
    shrink_isr_to_the_leader(&apis, "t");
    let log = apis.replica_manager.partition("t", 0).unwrap();
    assert_eq!(log.lock().isr(), vec![1]);
    assert_eq!(produce_all(&apis, "t"), 0);
    assert_eq!(
        alter_topic(&apis, "t", &[("min.insync.replicas", SET, Some("2"))]),
        0
    );
    assert_eq!(
        produce_all(&apis, "t"),
        ResponseError::NotEnoughReplicas.code()
    );
    assert_eq!(log.lock().config().min_insync_replicas, 2);
    // Back to 1: accepted again.
    assert_eq!(
        alter_topic(&apis, "t", &[("min.insync.replicas", SET, Some("1"))]),
        0
    );
    assert_eq!(produce_all(&apis, "t"), 0);
}

#[test]
fn a_lower_retention_bytes_deletes_old_batches_at_once() {
    let apis = manual_apis();
    create(&apis, "t", &[("min.insync.replicas", "1")]);
    shrink_isr_to_the_leader(&apis, "t");
    for _ in 0..5 {
        assert_eq!(produce_all(&apis, "t"), 0);
    }
    let log = apis.replica_manager.partition("t", 0).unwrap();
    assert_eq!(log.lock().isr(), vec![1]);
    assert_eq!(log.lock().log_start_offset(), 0);
    let held = apis.replica_manager.log_bytes();
    assert_eq!(
        alter_topic(&apis, "t", &[("retention.bytes", SET, Some("1"))]),
        0
    );
    assert!(log.lock().log_start_offset() > 0, "old batches deleted");
    assert!(apis.replica_manager.log_bytes() < held);
}
