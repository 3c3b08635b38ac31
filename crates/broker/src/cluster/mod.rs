//! Several brokers in one process (`purgatory serve --brokers N`).
//!
//! Each broker is a whole broker: its own listener (consecutive ports from `--listen`), its
//! own replica manager with its own Produce and Fetch purgatories (on one timer shared by
//! all, so one wheel holds every timeout), its own group coordinator. Followers are
//! brokers: broker `i` runs one replica fetcher per other broker `j`, the `followersim`
//! fetch loop connected to `j`'s listener with `i` as its replica id, following the
//! partitions `j` leads into `i`'s own partition logs ([`crate::replica_fetcher`]).
//!
//! One in-process controller ([`controller::Controller`], KRaft's metadata without the
//! quorum) owns each partition's replicas, leader, leader epoch and ISR. Topic creation goes
//! through it: it assigns replicas the way Kafka does, and every broker creates the
//! partitions and takes the role it was given; so does adding partitions to a topic
//! (`partitions.rs`). A leader's ISR changes go to it (Kafka's
//! AlterPartition), and Metadata on any broker answers its view.
//!
//! Brokers can be killed, restarted and shut down (`lifecycle.rs`): the controller elects
//! new leaders, and every live broker takes the role each change gives it (`apply.rs`).

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use anyhow::Context;
use controller::{Controller, TopicPartition as ControllerTp};
use followersim::{Follower, FollowerConfig, FollowerHandle};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::config::BrokerConfig;
use crate::partition::TopicPartition;
use crate::replica_fetcher::BrokerLogs;
use crate::replica_manager::{BrokerShared, ReplicaManager};
use crate::server::Broker;
use crate::topics::{NewTopic, PartitionDescription, Topic, TopicError};

mod apply;
mod lifecycle;
mod partitions;
#[cfg(test)]
mod tests;
pub use lifecycle::LifecycleError;

/// What a broker of a cluster asks of the cluster.
pub trait ClusterLink: Send + Sync {
    /// Every broker: (id, host, port).
    fn brokers(&self) -> Vec<(i32, String, i32)>;
    /// A partition as the controller has it.
    fn partition(&self, topic: &str, index: i32) -> Option<PartitionDescription>;
    /// Creates a topic on every broker, asked by broker `from`; returns `from`'s topic.
    fn create_topic(&self, from: i32, new: NewTopic) -> Result<Arc<Topic>, TopicError>;
    /// Adds partitions to a topic up to `new_total` (CreatePartitions), asked by broker
    /// `from`: the controller assigns them (or takes `assignment`), and every broker
    /// creates them and takes its role. With `validate_only` only the checks run.
    /// Returns `from`'s topic.
    fn create_partitions(
        &self,
        from: i32,
        name: &str,
        new_total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError>;
    /// Deletes a topic from the controller and every broker.
    fn delete_topic(&self, name: &str) -> Result<(), TopicError>;
    /// Gives topic `name` the override set `overrides` on every broker: checked on all
    /// of them first (nothing changes if one refuses), then applied on each, as every
    /// Kafka broker replays the controller's one ConfigRecord.
    fn alter_topic_config(
        &self,
        name: &str,
        overrides: &[(String, String)],
    ) -> Result<(), TopicError>;
    /// Broker `leader` changed the ISR of `tp` to `isr` (Kafka's AlterPartition).
    fn isr_changed(&self, leader: i32, tp: &TopicPartition, isr: Vec<i32>);
    /// Broker `id`, alive or not: what one broker's coordinators call on another's (a
    /// transaction marker on the partition it leads, a group's offsets a transaction
    /// commits). Kafka sends these as requests between brokers (WriteTxnMarkers); here the
    /// brokers share a process.
    fn node(&self, id: i32) -> Option<NodeRef>;
    /// Every broker, alive or not.
    fn nodes(&self) -> Vec<NodeRef>;
}

/// One broker's replica manager and coordinators, as [`ClusterLink::node`] hands them out.
#[derive(Clone)]
pub struct NodeRef {
    pub rm: Arc<ReplicaManager>,
    pub groups: Arc<crate::coordinator::GroupCoordinator>,
    pub txn: Arc<crate::txn::TransactionCoordinator>,
}

impl NodeRef {
    fn of(broker: &Broker) -> NodeRef {
        NodeRef {
            rm: broker.replica_manager().clone(),
            groups: broker.group_coordinator().clone(),
            txn: broker.txn_coordinator().clone(),
        }
    }
}

/// One broker of the cluster.
struct Node {
    broker: Broker,
    host: String,
    /// One replica fetcher per other broker; none while this one is dead.
    fetchers: Mutex<Vec<FollowerHandle>>,
}

/// The brokers of this process and their controller.
pub struct Cluster {
    controller: Mutex<Controller>,
    nodes: BTreeMap<i32, Node>,
    /// Kills, restarts and shutdowns run one at a time.
    lifecycle: tokio::sync::Mutex<()>,
    /// The runtime the brokers run on: a restarted listener and new fetchers must run
    /// there too, whoever asks for them (the admin listener has a runtime of its own).
    runtime: tokio::runtime::Handle,
}

impl Cluster {
    /// Starts `brokers` brokers (ids 1..=brokers) from `config`, on consecutive ports from
    /// its `listen`, each fetching from the others. Must run inside a tokio runtime.
    pub async fn start(config: BrokerConfig, brokers: i32) -> anyhow::Result<Arc<Cluster>> {
        anyhow::ensure!(brokers >= 1, "--brokers must be at least 1");
        let (host, port) = config
            .listen
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .context("--listen must be HOST:PORT")?;
        let shared = BrokerShared::for_config(&config);
        let mut nodes = BTreeMap::new();
        let mut controller = Controller::new();
        for id in 1..=brokers {
            let port = if port == 0 {
                0
            } else {
                port.checked_add(u16::try_from(id - 1)?)
                    .context("the brokers' ports run past 65535")?
            };
            let node_config = BrokerConfig {
                broker_id: id,
                listen: format!("{host}:{port}"),
                // The others are this broker's followers: replication factors up to N.
                follower_count: brokers - 1,
                embedded_followers: false,
                ..config.clone()
            };
            let broker = Broker::start_shared(node_config, shared.clone()).await?;
            let advertised = broker.replica_manager().config.advertised_host();
            let address = format!("{}:{}", advertised, broker.local_addr().port());
            controller
                .register_broker(id, address)
                .map_err(|e| anyhow::anyhow!("registering broker {id}: {e}"))?;
            nodes.insert(
                id,
                Node {
                    broker,
                    host: advertised,
                    fetchers: Mutex::new(Vec::new()),
                },
            );
        }
        let cluster = Arc::new(Cluster {
            controller: Mutex::new(controller),
            nodes,
            lifecycle: tokio::sync::Mutex::new(()),
            runtime: tokio::runtime::Handle::current(),
        });
        for &id in cluster.nodes.keys() {
            cluster.start_fetchers(id);
        }
        let link: Weak<dyn ClusterLink> =
            Arc::downgrade(&(cluster.clone() as Arc<dyn ClusterLink>));
        for node in cluster.nodes.values() {
            node.broker.replica_manager().link_cluster(link.clone());
        }
        // A new topic is followed at once, not on the fetchers' next metadata refresh.
        // Every broker creates every topic, so broker 1's registry tells of all of them.
        if let Some(first) = cluster.nodes.values().next() {
            let mut changes = first.broker.replica_manager().subscribe_topic_changes();
            let cluster = Arc::downgrade(&cluster);
            tokio::spawn(async move {
                while changes.changed().await.is_ok() {
                    match cluster.upgrade() {
                        Some(cluster) => cluster.nudge_fetchers(),
                        None => break,
                    }
                }
            });
        }
        info!(brokers, "cluster started");
        Ok(cluster)
    }

    /// Broker `id`.
    pub fn broker(&self, id: i32) -> Option<&Broker> {
        self.nodes.get(&id).map(|n| &n.broker)
    }

    /// Every broker's id.
    pub fn ids(&self) -> Vec<i32> {
        self.nodes.keys().copied().collect()
    }

    /// Broker `id`'s replica fetchers (none while it is dead), for the fault controls.
    pub fn fetchers(&self, id: i32) -> Option<Vec<FollowerHandle>> {
        self.nodes.get(&id).map(|n| n.fetchers.lock().clone())
    }

    /// Every replica fetcher's status, broker by broker (`replica_id` is the broker).
    pub fn fetcher_statuses(&self) -> Vec<followersim::FollowerStatus> {
        self.nodes
            .values()
            .flat_map(|n| {
                n.fetchers
                    .lock()
                    .iter()
                    .map(FollowerHandle::status)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The controller's view, for the state API.
    pub fn snapshot(&self) -> controller::MetadataSnapshot {
        self.controller.lock().snapshot()
    }

    /// Stops every broker and fetcher.
    pub async fn shutdown(&self) {
        let fetchers: Vec<FollowerHandle> = self
            .nodes
            .values()
            .flat_map(|n| std::mem::take(&mut *n.fetchers.lock()))
            .collect();
        // Every fetcher is told first, so none reconnects to a broker already gone.
        for f in &fetchers {
            f.signal_shutdown();
        }
        for node in self.nodes.values() {
            node.broker.shutdown();
        }
        for f in &fetchers {
            f.shutdown().await;
        }
    }

    /// Starts broker `id`'s replica fetchers: one per other broker, each following the
    /// partitions that broker leads and `id` replicates.
    fn start_fetchers(&self, id: i32) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let rm = node.broker.replica_manager().clone();
        let mut fetchers = Vec::new();
        for (&leader, other) in self.nodes.iter().filter(|(&l, _)| l != id) {
            let fetcher = FollowerConfig {
                replica_id: id,
                bootstrap: format!("127.0.0.1:{}", other.broker.local_addr().port()),
                leader_id: Some(leader),
                fetch_max_wait_ms: rm.config.follower_fetch_max_wait_ms,
                client_id: Some(format!("broker-{id}-fetcher-{leader}")),
                ..FollowerConfig::default()
            };
            fetchers.push(Follower::spawn_with_logs(fetcher, BrokerLogs::new(&rm)));
        }
        *node.fetchers.lock() = fetchers;
    }

    /// Tells every fetcher to re-read Metadata now: leaders or partitions changed. Then
    /// ends their parked fetches, so the next ones name the new partitions (see
    /// [`ReplicaManager::wake_follower_fetches`]).
    fn nudge_fetchers(&self) {
        for node in self.nodes.values() {
            for f in node.fetchers.lock().iter() {
                f.refresh_metadata();
            }
        }
        for node in self.nodes.values() {
            node.broker.replica_manager().wake_follower_fetches();
        }
    }

    fn rm(&self, id: i32) -> Option<&Arc<ReplicaManager>> {
        self.nodes.get(&id).map(|n| n.broker.replica_manager())
    }
}

/// A controller error as the Kafka error a client gets.
pub(crate) fn topic_error(e: controller::Error) -> TopicError {
    let error = ResponseError::try_from_code(e.kafka_error_code())
        .unwrap_or(ResponseError::UnknownServerError);
    TopicError::new(error, e.to_string())
}

impl ClusterLink for Cluster {
    fn node(&self, id: i32) -> Option<NodeRef> {
        self.nodes.get(&id).map(|n| NodeRef::of(&n.broker))
    }

    fn nodes(&self) -> Vec<NodeRef> {
        self.nodes
            .values()
            .map(|n| NodeRef::of(&n.broker))
            .collect()
    }

    fn brokers(&self) -> Vec<(i32, String, i32)> {
        // Live brokers only, as Kafka's Metadata lists the unfenced ones.
        let controller = self.controller.lock();
        self.nodes
            .iter()
            .filter(|(&id, _)| controller.image().is_alive(id))
            .map(|(&id, n)| (id, n.host.clone(), i32::from(n.broker.local_addr().port())))
            .collect()
    }

    fn partition(&self, topic: &str, index: i32) -> Option<PartitionDescription> {
        let controller = self.controller.lock();
        let state = controller
            .image()
            .partition(&ControllerTp::new(topic, index))?;
        Some(PartitionDescription {
            index,
            leader: state.leader,
            leader_epoch: state.leader_epoch,
            replicas: state.replicas.clone(),
            isr: state.isr.clone(),
        })
    }

    fn create_topic(&self, from: i32, mut new: NewTopic) -> Result<Arc<Topic>, TopicError> {
        let asking = self
            .rm(from)
            .ok_or_else(|| TopicError::new(ResponseError::UnknownServerError, "no such broker"))?;
        if new.partitions == -1 {
            new.partitions = asking.config.num_partitions;
        }
        if new.replication_factor == -1 {
            new.replication_factor = asking.config.default_replication_factor;
        }
        // The name, the counts and the configs are checked as one broker checks them.
        asking.create_local_topic(new.clone(), true)?;
        let unclean = crate::topics::config::TopicConfig::resolve(&asking.config, &new.configs)?
            .unclean_leader_election();
        let states: Vec<controller::PartitionState> = {
            let mut controller = self.controller.lock();
            controller
                .create_topic(&new.name, new.partitions, new.replication_factor, unclean)
                .map_err(topic_error)?;
            let topic = controller.image().topic(&new.name).ok_or_else(|| {
                TopicError::new(ResponseError::UnknownServerError, "the controller lost it")
            })?;
            (0..topic.partition_count())
                .filter_map(|p| topic.partition(p).cloned())
                .collect()
        };
        let mut created = None;
        let topic_id = uuid::Uuid::new_v4();
        for (&id, node) in &self.nodes {
            let rm = node.broker.replica_manager();
            let topic = rm.create_local_topic_with_id(new.clone(), false, Some(topic_id))?;
            for (handle, state) in topic.partitions.iter().zip(&states) {
                let role = if state.leader == id {
                    rm.make_leader(
                        handle,
                        state.leader_epoch,
                        state.replicas.clone(),
                        state.isr.clone(),
                    )
                } else {
                    rm.make_follower(handle, state.leader, state.leader_epoch)
                };
                if let Err(e) = role {
                    warn!(tp = %handle.tp, broker = id, "cannot take its role: {e}");
                }
            }
            if id == from {
                created = Some(topic);
            }
        }
        created.ok_or_else(|| TopicError::new(ResponseError::UnknownServerError, "no such broker"))
    }

    fn create_partitions(
        &self,
        from: i32,
        name: &str,
        new_total: i32,
        assignment: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        self.add_partitions(from, name, new_total, assignment, validate_only)
    }

    fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        self.controller
            .lock()
            .delete_topic(name)
            .map_err(topic_error)?;
        for node in self.nodes.values() {
            // A broker that never had it has nothing to delete.
            let _ = node.broker.replica_manager().delete_local_topic(name);
        }
        Ok(())
    }

    fn alter_topic_config(
        &self,
        name: &str,
        overrides: &[(String, String)],
    ) -> Result<(), TopicError> {
        let checked = self
            .nodes
            .iter()
            .map(|(&id, node)| {
                let config = node
                    .broker
                    .replica_manager()
                    .check_topic_config(name, overrides)?;
                Ok((id, config))
            })
            .collect::<Result<Vec<_>, TopicError>>()?;
        let Some(unclean) = checked.first().map(|(_, c)| c.unclean_leader_election()) else {
            return Ok(());
        };
        // The controller elects by the topic's unclean.leader.election.enable: turning it
        // on elects a live out-of-sync replica where no leader is left.
        let changes = self
            .controller
            .lock()
            .set_unclean_leader_election(name, unclean)
            .map_err(topic_error)?;
        for (id, config) in checked {
            if let Some(rm) = self.rm(id) {
                if let Err(e) = rm.apply_topic_config(name, config) {
                    warn!(
                        topic = name,
                        broker = id,
                        "cannot apply altered configs: {e:?}"
                    );
                }
            }
        }
        self.apply(&changes);
        Ok(())
    }

    fn isr_changed(&self, leader: i32, tp: &TopicPartition, isr: Vec<i32>) {
        let ctp = ControllerTp::new(&*tp.topic, tp.partition);
        let refused = {
            let mut controller = self.controller.lock();
            if !controller.image().is_alive(leader) {
                return; // a dead broker's timer still runs; what it decides counts for nothing
            }
            let Some(state) = controller.image().partition(&ctp).cloned() else {
                return;
            };
            if state.isr == isr {
                return; // the controller has it already
            }
            match controller.alter_partition(
                &ctp,
                leader,
                state.leader_epoch,
                state.partition_epoch,
                &isr,
            ) {
                Ok(_) => None,
                Err(e) => {
                    warn!(%tp, leader, ?isr, "AlterPartition refused: {e}");
                    Some(state)
                }
            }
        };
        // Refused (a broker it wanted to add is dead, say): the leader goes back to the
        // controller's ISR, as Kafka's leader does when its AlterPartition fails, or it
        // would believe in an ISR nobody else sees and never ask again.
        if let Some(state) = refused {
            if state.leader == leader {
                self.take_role(leader, &ctp, &state);
            }
        }
    }
}
