use super::alter::{check_incremental, check_replacement, incremental, Alteration};
use super::*;

fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_table_has_kafka_44s_37_topic_configs_once_each() {
    assert_eq!(TOPIC_CONFIGS.len(), 37);
    for (i, def) in TOPIC_CONFIGS.iter().enumerate() {
        assert!(
            TOPIC_CONFIGS[..i].iter().all(|d| d.name != def.name),
            "{} twice",
            def.name
        );
        // Every default passes its own check, in canonical form.
        if let Fallback::Kafka(default) = def.fallback {
            assert_eq!(
                def.check.check(default).as_deref(),
                Ok(default),
                "{}",
                def.name
            );
        }
    }
    assert!(topic_config_def("message.downconversion.enable").is_none());
}

#[test]
fn defaults_come_from_the_broker_or_kafka_and_say_so() {
    let broker = BrokerConfig {
        min_insync_replicas: 3,
        ..BrokerConfig::default()
    };
    let config = TopicConfig::resolve(&broker, &[]).unwrap();
    assert_eq!(config.min_insync_replicas(), 3);
    let min_isr = config.entry(MIN_INSYNC_REPLICAS).unwrap();
    assert_eq!(min_isr.source, ConfigSource::StaticBroker);
    assert!(!min_isr.read_only);
    // The broker's file set it: its value, then the built-in default.
    let synonyms: Vec<(&str, &str, ConfigSource)> = min_isr
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.value.as_str(), s.source))
        .collect();
    assert_eq!(
        synonyms,
        vec![
            (MIN_INSYNC_REPLICAS, "3", ConfigSource::StaticBroker),
            (MIN_INSYNC_REPLICAS, "2", ConfigSource::Default),
        ]
    );
    // A broker setting left at its default is DEFAULT_CONFIG, as in Kafka.
    let max = config.entry(MAX_MESSAGE_BYTES).unwrap();
    assert_eq!(max.source, ConfigSource::Default);
    assert_eq!(max.synonyms[0].name, "message.max.bytes");
    let ts = config.entry(MESSAGE_TIMESTAMP_TYPE).unwrap();
    assert_eq!(
        (ts.value.as_str(), ts.source),
        ("CreateTime", ConfigSource::Default)
    );
    assert!(config.entry(RETENTION_MS).unwrap().synonyms.is_empty());
    assert_eq!(config.entries().len(), TOPIC_CONFIGS.len());
    assert!(config.overrides().is_empty());
}

#[test]
fn the_broker_is_described_under_kafka_names_and_its_token_is_withheld() {
    let broker = BrokerConfig {
        admin_token: Some("s3cret".into()),
        num_partitions: 3,
        ..BrokerConfig::default()
    };
    let entries = describe_broker(&broker);
    let find = |name: &str| entries.iter().find(|e| e.name == name).unwrap();
    let min_isr = find(MIN_INSYNC_REPLICAS);
    assert_eq!(
        (min_isr.value.as_str(), min_isr.config_type, min_isr.source),
        ("2", ConfigType::Int, ConfigSource::Default)
    );
    let partitions = find("num.partitions");
    assert_eq!(partitions.source, ConfigSource::StaticBroker);
    assert_eq!(partitions.synonyms.len(), 2);
    assert_eq!(find("log.retention.bytes").value, "-1");
    assert!(entries.iter().all(|e| e.name != "retention.bytes"));
    assert_eq!(
        find("auto.create.topics.enable").config_type,
        ConfigType::Boolean
    );
    assert_eq!(find("listeners").value, "127.0.0.1:9092");
    assert_eq!(find("admin.token").config_type, ConfigType::Password);
    assert!(entries.iter().all(|e| e.read_only));
    // The handler withholds PASSWORD values; make sure nothing else would leak it.
    assert!(entries
        .iter()
        .filter(|e| e.name != "admin.token")
        .all(|e| !e.value.contains("s3cret")
            && e.synonyms.iter().all(|s| !s.value.contains("s3cret"))));
}

#[test]
fn values_set_by_the_creator_are_checked_and_marked_as_topic_configs() {
    let broker = BrokerConfig::default();
    let config = TopicConfig::resolve(
        &broker,
        &set(&[
            (MIN_INSYNC_REPLICAS, "1"),
            (RETENTION_BYTES, "4096"),
            (CLEANUP_POLICY, "delete, compact"),
            ("segment.ms", "1000"),
        ]),
    )
    .unwrap();
    assert_eq!(config.min_insync_replicas(), 1);
    assert_eq!(config.retention_bytes(), 4096);
    let policy = config.entry(CLEANUP_POLICY).unwrap();
    assert_eq!(
        (policy.value.as_str(), policy.source),
        ("delete,compact", ConfigSource::DynamicTopic)
    );
    assert_eq!(policy.synonyms.len(), 2);
    assert_eq!(config.log_config(&broker).min_insync_replicas, 1);
    assert_eq!(config.overrides().len(), 4);

    for (bad, why) in [
        (
            set(&[(MIN_INSYNC_REPLICAS, "0")]),
            "Value must be at least 1",
        ),
        (
            set(&[(MIN_INSYNC_REPLICAS, "two")]),
            "Not a number of type INT",
        ),
        (set(&[(MIN_INSYNC_REPLICAS, "99999999999")]), "INT"),
        (set(&[(RETENTION_MS, "-2")]), "at least -1"),
        (set(&[(CLEANUP_POLICY, "shred")]), "compact, delete"),
        (set(&[(MESSAGE_TIMESTAMP_TYPE, "Now")]), "LogAppendTime"),
        (set(&[("segment.bytes", "1")]), "at least 1048576"),
        (set(&[("remote.storage.enable", "true")]), "Tiered Storage"),
        (
            set(&[("no.such.config", "1")]),
            "Unknown topic config name: no.such.config",
        ),
        (
            set(&[(RETENTION_BYTES, "1"), (RETENTION_BYTES, "2")]),
            "more than once",
        ),
    ] {
        let err = TopicConfig::resolve(&broker, &bad).unwrap_err();
        assert_eq!(err.error, ResponseError::InvalidConfig, "{bad:?}");
        assert!(err.message.contains(why), "{bad:?}: {}", err.message);
    }
}

fn op(name: &str, op: i8, value: Option<&str>) -> Alteration {
    Alteration {
        name: name.into(),
        op,
        value: value.map(str::to_string),
    }
}

fn altered(config: &TopicConfig, ops: &[Alteration]) -> Result<Vec<(String, String)>, TopicError> {
    let checked = check_incremental(ops)?;
    incremental(config, &checked)
}

#[test]
fn incremental_operations_set_delete_append_and_subtract_as_kafka_does() {
    let broker = BrokerConfig::default();
    let config = TopicConfig::resolve(&broker, &set(&[(RETENTION_MS, "1000")])).unwrap();
    // APPEND starts from the default when the topic sets nothing; repeats are dropped.
    let after = altered(&config, &[op(CLEANUP_POLICY, 2, Some("compact,delete"))]).unwrap();
    assert_eq!(
        after,
        set(&[(RETENTION_MS, "1000"), (CLEANUP_POLICY, "delete,compact")])
    );
    let config = TopicConfig::resolve(&broker, &after).unwrap();
    let after = altered(
        &config,
        &[
            op(CLEANUP_POLICY, 3, Some("delete")),
            op(RETENTION_MS, 1, None),
        ],
    )
    .unwrap();
    assert_eq!(after, set(&[(CLEANUP_POLICY, "compact")]));
    // Subtracting everything leaves an empty list, which Kafka accepts.
    let config = TopicConfig::resolve(&broker, &after).unwrap();
    let after = altered(&config, &[op(CLEANUP_POLICY, 3, Some("compact"))]).unwrap();
    assert_eq!(after, set(&[(CLEANUP_POLICY, "")]));
    // DELETE of a name nobody set, or nobody knows, changes nothing.
    assert_eq!(
        altered(
            &config,
            &[op("segment.ms", 1, None), op("no.such", 1, None)]
        )
        .unwrap(),
        config.overrides()
    );

    let code = |ops: &[Alteration]| altered(&config, ops).unwrap_err().error;
    assert_eq!(
        code(&[op(RETENTION_MS, 2, Some("5"))]),
        ResponseError::InvalidConfig
    );
    assert_eq!(
        code(&[op(RETENTION_MS, 3, Some("5"))]),
        ResponseError::InvalidConfig
    );
    assert_eq!(
        code(&[op("no.such", 0, Some("5"))]),
        ResponseError::InvalidConfig
    );
    assert_eq!(
        code(&[op(RETENTION_MS, 0, None)]),
        ResponseError::InvalidRequest
    );
    assert_eq!(
        code(&[op(RETENTION_MS, 7, Some("1"))]),
        ResponseError::InvalidRequest
    );
    assert_eq!(
        code(&[op(RETENTION_MS, 0, Some("1")), op(RETENTION_MS, 1, None)]),
        ResponseError::InvalidRequest
    );
    let replaced = check_replacement(&[(RETENTION_MS.into(), None)]).unwrap_err();
    assert_eq!(replaced.error, ResponseError::InvalidRequest);
}
