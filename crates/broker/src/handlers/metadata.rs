//! Metadata: which brokers exist, which topics and partitions, who leads each partition,
//! its replicas and — what makes the purgatory visible — its live ISR.
//!
//! This broker (id 1) leads every partition. The followers are replica ids 2, 3, ... that
//! appear in `replica_nodes` and, while caught up, in `isr_nodes`; only the leader is listed
//! as a broker, since clients never need to connect to a follower. Unknown topics are
//! auto-created when the request allows it (v4+) and `auto.create.topics.enable` is on.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, ResponseKind, TopicName,
};
use kafka_protocol::ResponseError;

use super::{sb, RequestContext};
use crate::cluster::ClusterLink;
use crate::replica_manager::ReplicaManager;
use crate::topics::Topic;

/// Handles a Metadata request.
pub fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> ResponseKind {
    let cluster = rm.cluster();
    let brokers = match &cluster {
        // Several brokers: every one, and each partition as the controller has it.
        Some(cluster) => cluster.brokers(),
        None => {
            let (host, port) = advertised(rm);
            vec![(rm.config.broker_id, host, port)]
        }
    };
    let live: Vec<i32> = brokers.iter().map(|(id, _, _)| *id).collect();
    let brokers = brokers
        .into_iter()
        .map(|(id, host, port)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(sb(&host))
                .with_port(port)
        })
        .collect();
    let describe_topic = |topic: &Topic| describe_topic(topic, cluster.as_deref(), &live);
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && ctx.api_version == 0,
    };
    let allow_create = ctx.api_version < 4 || req.allow_auto_topic_creation;
    let topics = if all {
        rm.topics().iter().map(|t| describe_topic(t)).collect()
    } else {
        req.topics
            .unwrap_or_default()
            .into_iter()
            .map(|requested| {
                let by_name = requested.name.as_ref().map(|n| n.0.to_string());
                match by_name {
                    Some(name) => match rm.get_or_auto_create(&name, allow_create) {
                        Ok(t) => describe_topic(&t),
                        Err(e) => MetadataResponseTopic::default()
                            .with_name(Some(TopicName(sb(&name))))
                            .with_error_code(e.error.code()),
                    },
                    None => match rm.topic_by_id(requested.topic_id) {
                        Some(t) => describe_topic(&t),
                        None => MetadataResponseTopic::default()
                            .with_topic_id(requested.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code()),
                    },
                }
            })
            .collect()
    };
    ResponseKind::Metadata(
        MetadataResponse::default()
            .with_brokers(brokers)
            .with_cluster_id(Some(sb(rm.cluster_id())))
            .with_controller_id(BrokerId(rm.config.broker_id))
            .with_topics(topics),
    )
}

/// One topic; `live` are the brokers alive. With several brokers, a partition whose
/// leader died with nobody to take over is LEADER_NOT_AVAILABLE (leader -1), and its dead
/// replicas are listed as offline, as Kafka lists them.
fn describe_topic(
    topic: &Topic,
    cluster: Option<&dyn ClusterLink>,
    live: &[i32],
) -> MetadataResponseTopic {
    let partitions = topic
        .describe_partitions()
        .into_iter()
        .map(|local| {
            let p = cluster
                .and_then(|c| c.partition(&topic.name, local.index))
                .unwrap_or(local);
            let error = if p.leader < 0 {
                ResponseError::LeaderNotAvailable.code()
            } else {
                0
            };
            // Simulated followers are not brokers, and never offline.
            let offline = match cluster {
                Some(_) => p
                    .replicas
                    .iter()
                    .copied()
                    .filter(|r| !live.contains(r))
                    .map(BrokerId)
                    .collect(),
                None => Vec::new(),
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_offline_replicas(offline)
                .with_partition_index(p.index)
                .with_leader_id(BrokerId(p.leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(p.replicas.into_iter().map(BrokerId).collect())
                .with_isr_nodes(p.isr.into_iter().map(BrokerId).collect())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(sb(&topic.name))))
        .with_topic_id(topic.id)
        .with_is_internal(topic.internal)
        .with_partitions(partitions)
}

/// The host and port clients should use.
pub fn advertised(rm: &ReplicaManager) -> (String, i32) {
    let port = rm
        .config
        .listen
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<i32>().ok())
        .unwrap_or(9092);
    (rm.config.advertised_host(), rm.bound_port().unwrap_or(port))
}
