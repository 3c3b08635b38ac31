//! Three brokers in one process, seen through librdkafka: every broker in Metadata,
//! leaders spread as Kafka's assignment spreads them, each partition served by its leader
//! and replicated by the other two brokers' fetchers before acks=all is answered, and a
//! group consumer (whose coordinator is the leader of its `__consumer_offsets` partition)
//! reading everything back.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{create_topic, producer, wait_until};
use purgatory::cluster::Cluster;
use purgatory::config::BrokerConfig;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::FutureRecord;
use rdkafka::Message;

async fn three_brokers() -> std::sync::Arc<Cluster> {
    let config = BrokerConfig {
        listen: "127.0.0.1:0".into(),
        ..BrokerConfig::default()
    };
    Cluster::start(config, 3).await.expect("the cluster starts")
}

fn bootstrap(cluster: &Cluster) -> String {
    cluster
        .ids()
        .iter()
        .filter_map(|&id| cluster.broker(id))
        .map(|b| b.local_addr().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_brokers_spread_leaders_replicate_to_each_other_and_serve_a_group() {
    let cluster = three_brokers().await;
    let servers = bootstrap(&cluster);
    create_topic(&servers, "spread", 3, 3).await;

    // Metadata from any broker: three brokers, partition p led by broker p + 1 (Kafka's
    // round robin from broker 1), every broker in every ISR.
    let client: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .set("group.id", "metadata-reader")
        .create()
        .expect("client");
    let metadata = client
        .fetch_metadata(Some("spread"), Duration::from_secs(10))
        .expect("metadata");
    let brokers: BTreeSet<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    assert_eq!(brokers, BTreeSet::from([1, 2, 3]));
    let topic = &metadata.topics()[0];
    let mut leaders: Vec<(i32, i32)> = topic
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader()))
        .collect();
    leaders.sort();
    assert_eq!(leaders, vec![(0, 1), (1, 2), (2, 3)]);
    for p in topic.partitions() {
        assert_eq!(p.isr().len(), 3, "partition {} ISR {:?}", p.id(), p.isr());
    }
    // acks=all: each record is answered by its partition's leader once both other
    // brokers have fetched it.
    let p = producer(&servers, &[]);
    for i in 0..30 {
        let value = format!("v{i}");
        p.send(
            FutureRecord::<(), _>::to("spread")
                .partition(i % 3)
                .payload(&value),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("record {i} not acknowledged: {e}"));
    }
    // One topic, one id, on every broker (Metadata v10+ carries it; a client that saw
    // two would take the topic for deleted and re-created).
    let ids: BTreeSet<String> = cluster
        .ids()
        .iter()
        .filter_map(|&id| cluster.broker(id)?.replica_manager().topic("spread"))
        .map(|t| t.id.to_string())
        .collect();
    assert_eq!(ids.len(), 1, "topic ids {ids:?}");
    // Every broker holds every record: the followers' copies are in their own logs.
    for id in cluster.ids() {
        let rm = cluster
            .broker(id)
            .expect("broker")
            .replica_manager()
            .clone();
        wait_until("every replica to hold its 10 records", || {
            (0..3).all(|p| {
                rm.partition("spread", p)
                    .is_some_and(|h| h.lock().log_end_offset() == 10)
            })
        })
        .await;
        let leads: Vec<i32> = (0..3)
            .filter(|&p| {
                rm.partition("spread", p)
                    .is_some_and(|h| h.lock().is_leader())
            })
            .collect();
        assert_eq!(
            leads,
            vec![id - 1],
            "broker {id} leads only its own partition"
        );
    }
    // A group consumer finds its coordinator and reads everything from the leaders.
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .set("group.id", "cluster-readers")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .create()
        .expect("consumer");
    consumer.subscribe(&["spread"]).expect("subscribe");
    let mut seen = BTreeSet::new();
    while seen.len() < 30 {
        let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records keep coming")
            .expect("a record");
        seen.insert(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
    }
    assert_eq!(seen.len(), 30);
    // The clients leave while the brokers are still there to answer them.
    drop((consumer, client, p));

    // Deleting the topic on one broker deletes it from the controller and every broker.
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .create()
        .expect("admin client");
    for r in admin
        .delete_topics(&["spread"], &AdminOptions::new())
        .await
        .expect("DeleteTopics answered")
    {
        r.expect("deleted");
    }
    for id in cluster.ids() {
        let rm = cluster.broker(id).expect("broker").replica_manager();
        assert!(
            rm.topic("spread").is_none(),
            "broker {id} still has the topic"
        );
    }
    assert!(cluster.snapshot().topics.iter().all(|t| t.name != "spread"));
    drop(admin);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn added_partitions_continue_the_round_robin_and_are_replicated_by_every_broker() {
    use rdkafka::admin::NewPartitions;
    let cluster = three_brokers().await;
    let servers = bootstrap(&cluster);
    create_topic(&servers, "grown", 2, 3).await;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .create()
        .expect("admin client");
    // validate_only changes nothing; a count not above the current one is refused.
    let dry = admin
        .create_partitions(
            &[NewPartitions::new("grown", 6)],
            &AdminOptions::new().validate_only(true),
        )
        .await
        .expect("CreatePartitions answered");
    assert!(dry[0].is_ok(), "{dry:?}");
    let same = admin
        .create_partitions(&[NewPartitions::new("grown", 2)], &AdminOptions::new())
        .await
        .expect("CreatePartitions answered");
    assert!(
        matches!(
            &same[0],
            Err((_, rdkafka::types::RDKafkaErrorCode::InvalidPartitions))
        ),
        "{same:?}"
    );
    assert_eq!(cluster.snapshot().topics[0].partitions.len(), 2);

    let grown = admin
        .create_partitions(&[NewPartitions::new("grown", 4)], &AdminOptions::new())
        .await
        .expect("CreatePartitions answered");
    assert!(grown[0].is_ok(), "{grown:?}");
    // The controller continued the round robin from partition 2: as if the topic had
    // been created with four (partition 2 on broker 3 first, partition 3 shifted once).
    let layout: Vec<(i32, Vec<i32>)> = cluster
        .snapshot()
        .topics
        .iter()
        .find(|t| t.name == "grown")
        .expect("the controller has it")
        .partitions
        .iter()
        .map(|p| (p.state.leader, p.state.replicas.clone()))
        .collect();
    assert_eq!(
        layout,
        vec![
            (1, vec![1, 2, 3]),
            (2, vec![2, 3, 1]),
            (3, vec![3, 1, 2]),
            (1, vec![1, 3, 2]),
        ]
    );
    // Every broker has the new partitions, led by their leader and followed by the others.
    for id in cluster.ids() {
        let rm = cluster.broker(id).expect("broker").replica_manager();
        for (p, (leader, _)) in layout.iter().enumerate().skip(2) {
            let handle = rm
                .partition("grown", p as i32)
                .unwrap_or_else(|| panic!("broker {id} lacks partition {p}"));
            assert_eq!(handle.lock().is_leader(), *leader == id, "broker {id} p{p}");
        }
    }
    // acks=all to the new partitions is answered once both followers' fetchers have them;
    // Metadata from any broker lists them, and a consumer reads them back.
    let p = producer(&servers, &[]);
    for i in 0..10 {
        let value = format!("n{i}");
        p.send(
            FutureRecord::<(), _>::to("grown")
                .partition(2 + i % 2)
                .payload(&value),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("record {i} not acknowledged: {e}"));
    }
    for id in cluster.ids() {
        let rm = cluster
            .broker(id)
            .expect("broker")
            .replica_manager()
            .clone();
        wait_until(
            "every replica of the new partitions to hold its records",
            || {
                (2..4).all(|p| {
                    rm.partition("grown", p)
                        .is_some_and(|h| h.lock().log_end_offset() == 5)
                })
            },
        )
        .await;
    }
    for &(leader, _) in &layout[2..] {
        let rm = cluster.broker(leader).expect("broker").replica_manager();
        let hws: Vec<i64> = (2..4)
            .filter_map(|p| rm.partition("grown", p))
            .filter(|h| h.lock().is_leader())
            .map(|h| h.lock().high_watermark())
            .collect();
        assert_eq!(hws, vec![5], "broker {leader}'s new partition is committed");
    }
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &servers)
        .set("group.id", "grown-readers")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    let metadata = consumer
        .fetch_metadata(Some("grown"), Duration::from_secs(10))
        .expect("metadata");
    assert_eq!(metadata.topics()[0].partitions().len(), 4);
    consumer.subscribe(&["grown"]).expect("subscribe");
    let mut seen = BTreeSet::new();
    while seen.len() < 10 {
        let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("records keep coming")
            .expect("a record");
        assert!(m.partition() >= 2, "only the new partitions hold records");
        seen.insert(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
    }
    drop((consumer, p, admin));
    cluster.shutdown().await;
}
