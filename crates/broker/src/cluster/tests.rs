//! An altered topic config, in a cluster: checked once, applied on every broker.

use std::net::SocketAddr;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::Cluster;
use crate::config::BrokerConfig;
use crate::handlers::{describe_configs, incremental_alter_configs, RequestContext};
use crate::telemetry::TraceId;
use crate::topics::NewTopic;

fn ctx(version: i16) -> RequestContext {
    RequestContext {
        correlation_id: 1,
        client_id: "test".into(),
        api_version: version,
        peer: SocketAddr::from(([127, 0, 0, 1], 1)),
        trace: TraceId::NONE,
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn set(cluster: &Cluster, on: i32, topic: &str, configs: &[(&str, &str)]) -> i16 {
    let rm = cluster.broker(on).expect("broker").replica_manager();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text(topic))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(text(k))
                            .with_config_operation(0)
                            .with_value(Some(text(v)))
                    })
                    .collect(),
            ),
    ]);
    let ResponseKind::IncrementalAlterConfigs(r) =
        incremental_alter_configs::handle(rm, &ctx(1), request)
    else {
        panic!("not an IncrementalAlterConfigs response");
    };
    r.responses[0].error_code
}

/// (value, source) of `key` of `topic` as broker `on` describes it.
fn shown(cluster: &Cluster, on: i32, topic: &str, key: &str) -> (String, i8) {
    let rm = cluster.broker(on).expect("broker").replica_manager();
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(text(topic))
            .with_configuration_keys(Some(vec![text(key)]))]);
    let ResponseKind::DescribeConfigs(r) = describe_configs::handle(rm, &ctx(4), request) else {
        panic!("not a DescribeConfigs response");
    };
    let entry = &r.results[0].configs[0];
    (
        entry.value.as_deref().unwrap_or("null").to_string(),
        entry.config_source,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alter_on_one_broker_shows_on_every_broker_and_in_every_log() {
    let config = BrokerConfig {
        listen: "127.0.0.1:0".into(),
        ..BrokerConfig::default()
    };
    let cluster = Cluster::start(config, 3).await.expect("the cluster starts");
    let rm = cluster
        .broker(2)
        .expect("broker 2")
        .replica_manager()
        .clone();
    rm.create_topic(
        NewTopic {
            name: "altered".into(),
            partitions: 3,
            replication_factor: 3,
            configs: vec![],
        },
        false,
    )
    .expect("created");
    let id = rm.topic("altered").expect("topic").id;

    assert_eq!(
        set(
            &cluster,
            2,
            "altered",
            &[
                ("min.insync.replicas", "3"),
                ("retention.bytes", "65536"),
                ("unclean.leader.election.enable", "true"),
            ]
        ),
        0
    );
    for broker in cluster.ids() {
        assert_eq!(
            shown(&cluster, broker, "altered", "min.insync.replicas"),
            ("3".into(), 1),
            "broker {broker}"
        );
        assert_eq!(
            shown(&cluster, broker, "altered", "retention.bytes"),
            ("65536".into(), 1)
        );
        let rm = cluster.broker(broker).expect("broker").replica_manager();
        let topic = rm.topic("altered").expect("topic");
        assert_eq!(topic.id, id, "the same topic, not a new one");
        for p in &topic.partitions {
            let log = p.lock();
            assert_eq!(
                log.config().min_insync_replicas,
                3,
                "broker {broker} {}",
                p.tp
            );
            assert_eq!(log.config().retention_bytes, 65536);
        }
    }
    // The controller elects by the new unclean.leader.election.enable.
    let snapshot = cluster.snapshot();
    let topic = snapshot
        .topics
        .iter()
        .find(|t| t.name == "altered")
        .expect("the controller has it");
    assert!(topic.unclean_leader_election);

    // A bad value is refused on every broker: nothing changes anywhere.
    assert_eq!(
        set(&cluster, 3, "altered", &[("min.insync.replicas", "0")]),
        40
    );
    assert_eq!(
        set(&cluster, 1, "never-created", &[("retention.ms", "1")]),
        3
    );
    for broker in cluster.ids() {
        assert_eq!(
            shown(&cluster, broker, "altered", "min.insync.replicas").0,
            "3"
        );
    }
    cluster.shutdown().await;
}
