//! What the admin APIs answer: where each config value comes from (CreateTopics,
//! DescribeConfigs), which keys DescribeConfigs returns and withholds, and ListOffsets
//! refusing a partition asked for twice.

use super::*;

#[test]
fn create_topics_and_describe_configs_say_where_each_value_comes_from() {
    // Kafka's ConfigSource: 1 = set for the topic, 4 = the broker's config, 5 = default.
    // Leaving it at the field's default (-1) made kafka-python's admin client reject the
    // whole CreateTopics response.
    let apis = manual_apis();
    for version in 5..=7 {
        let topic = format!("sourced-{version}");
        let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(name(&topic))
            .with_num_partitions(1)
            .with_replication_factor(3)
            .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_static_str("1")))])]);
        let ResponseKind::CreateTopics(response) =
            ask(&apis, version, RequestKind::CreateTopics(request))
        else {
            panic!("not a CreateTopics response");
        };
        let result = &response.topics[0];
        assert_eq!(result.error_code, 0, "v{version}");
        let configs = result.configs.as_ref().expect("v5+ reports the configs");
        assert_eq!(
            configs.len(),
            37,
            "v{version}: every topic config Kafka 4.4 has"
        );
        let find = |key: &str| {
            configs
                .iter()
                .find(|c| c.name.as_str() == key)
                .map(|c| (c.value.as_deref(), c.config_source, c.read_only))
        };
        // Set by the creator (1); the broker's settings at their defaults and Kafka's
        // own defaults (5); every config can be altered.
        assert_eq!(find("min.insync.replicas"), Some((Some("1"), 1, false)));
        assert_eq!(find("retention.bytes"), Some((Some("-1"), 5, false)));
        assert_eq!(find("max.message.bytes"), Some((Some("1048588"), 5, false)));
        assert_eq!(find("cleanup.policy"), Some((Some("delete"), 5, false)));
        assert_eq!(
            find("message.timestamp.type"),
            Some((Some("CreateTime"), 5, false))
        );
        assert_eq!(find("segment.bytes"), Some((Some("1073741824"), 5, false)));

        // An empty key list asks for every key, as a null one does.
        let describe = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(StrBytes::from_string(topic.clone()))
                .with_configuration_keys(Some(vec![])),
        ]);
        let ResponseKind::DescribeConfigs(described) =
            ask(&apis, 4, RequestKind::DescribeConfigs(describe))
        else {
            panic!("not a DescribeConfigs response");
        };
        // (name, ConfigSource, read only, ConfigType: 1 boolean, 2 string, 3 int, 5 long,
        // 7 list), of the keys the table had before it had all 37.
        let shared = [
            "min.insync.replicas",
            "cleanup.policy",
            "max.message.bytes",
            "message.timestamp.type",
            "unclean.leader.election.enable",
            "retention.bytes",
        ];
        assert_eq!(described.results[0].configs.len(), 37);
        let entries: Vec<(&str, i8, bool, i8)> = described.results[0]
            .configs
            .iter()
            .filter(|c| shared.contains(&c.name.as_str()))
            .map(|c| (c.name.as_str(), c.config_source, c.read_only, c.config_type))
            .collect();
        // In Kafka 4.4's order (its java.util.HashMap's), not the table's.
        assert_eq!(
            entries,
            vec![
                ("min.insync.replicas", 1, false, 3),
                ("cleanup.policy", 5, false, 7),
                ("max.message.bytes", 5, false, 3),
                ("message.timestamp.type", 5, false, 2),
                ("unclean.leader.election.enable", 5, false, 1),
                ("retention.bytes", 5, false, 5),
            ]
        );
        // The whole list in Kafka 4.4's order, as measured against it.
        let first: Vec<&str> = described.results[0]
            .configs
            .iter()
            .take(5)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            first,
            vec![
                "compression.type",
                "errors.deadletterqueue.group.enable",
                "remote.copy.lag.bytes",
                "remote.log.delete.on.disable",
                "leader.replication.throttled.replicas"
            ]
        );
    }
}

#[test]
fn describe_configs_filters_by_the_keys_asked_for() {
    let apis = manual_apis();
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![
                StrBytes::from_static_str("min.insync.replicas"),
                StrBytes::from_static_str("no.such.key"),
            ]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&apis, 4, RequestKind::DescribeConfigs(describe))
    else {
        panic!("not a DescribeConfigs response");
    };
    let names: Vec<&str> = described.results[0]
        .configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["min.insync.replicas"]);
}

#[test]
fn describe_configs_withholds_the_admin_token() {
    let apis = KafkaApis::new(ReplicaManager::new(manual_config(|c| {
        c.admin_token = Some("s3cret".into());
    })));
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(StrBytes::from_static_str("1"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("admin.token")]))]);
    let ResponseKind::DescribeConfigs(described) =
        ask(&apis, 4, RequestKind::DescribeConfigs(describe))
    else {
        panic!("not a DescribeConfigs response");
    };
    let token = &described.results[0].configs[0];
    assert_eq!(token.name.as_str(), "admin.token");
    assert!(token.is_sensitive);
    assert_eq!(token.value, None);
}

#[test]
fn list_offsets_refuses_a_partition_asked_for_twice() {
    // Kafka answers INVALID_REQUEST for every entry of a partition named more than once,
    // rather than two offsets a client cannot tell apart.
    let apis = manual_apis();
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(name("twice"))
        .with_num_partitions(2)
        .with_replication_factor(3)]);
    ask(&apis, 7, RequestKind::CreateTopics(create));
    let entry = |partition: i32, timestamp: i64| {
        ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_timestamp(timestamp)
    };
    let request = ListOffsetsRequest::default().with_topics(vec![ListOffsetsTopic::default()
        .with_name(name("twice"))
        .with_partitions(vec![entry(0, -1), entry(0, -2), entry(1, -1)])]);
    let ResponseKind::ListOffsets(response) = ask(&apis, 7, RequestKind::ListOffsets(request))
    else {
        panic!("not a ListOffsets response");
    };
    let answers: Vec<(i32, i16, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.error_code, p.offset))
        .collect();
    assert_eq!(answers, vec![(0, 42, -1), (0, 42, -1), (1, 0, 0)]);
}
