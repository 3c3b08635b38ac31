//! A broker (or a cluster) inside a Rust test, with fault rules and the request log at hand.
//!
//! What kfake is to a Go test, this is to a Rust one: the test starts a real broker on port
//! 0 in its own runtime, points its real Kafka client at [`TestKafka::bootstrap`], makes the
//! broker misbehave with [`TestKafka::add_fault`] (the JSON rules of `POST /api/faults`),
//! and reads back what happened from [`TestKafka::requests`] and the rule's hits.
//!
//! ```no_run
//! # async fn example() -> anyhow::Result<()> {
//! use purgatory::testing::TestKafka;
//!
//! let kafka = TestKafka::builder().brokers(3).start().await?;
//! let rule = kafka
//!     .add_fault(r#"{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3}"#)
//!     .map_err(anyhow::Error::msg)?;
//! // ... run the application against kafka.bootstrap() ...
//! assert_eq!(kafka.fault_hits(rule), Some(3));
//! kafka.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! One broker is a broker alone, with replication factor 1 and no simulated followers, as
//! `purgatory serve --brokers 1`; several are `serve --brokers N`, replicating over the
//! protocol. With [`TestKafkaBuilder::manual_clock`] nothing times out until the test calls
//! [`TestKafka::advance_clock`], so a `delay_ms` rule or a request timeout is a step the test
//! takes, not a wait.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::admin::{self, AdminState};
use crate::cluster::Cluster;
use crate::config::{BrokerConfig, ClockMode};
use crate::faults::Faults;
use crate::followers::EmbeddedFollowers;
use crate::replica_manager::ReplicaManager;
use crate::server::Broker;
use crate::telemetry::RequestView;

/// How to start a [`TestKafka`].
pub struct TestKafkaBuilder {
    brokers: i32,
    config: BrokerConfig,
    admin: bool,
}

impl TestKafkaBuilder {
    /// How many brokers (1, the default, is a broker alone).
    pub fn brokers(mut self, n: i32) -> Self {
        self.brokers = n;
        self
    }

    /// Time moves only when the test calls [`TestKafka::advance_clock`].
    pub fn manual_clock(mut self) -> Self {
        self.config.clock = ClockMode::Manual;
        self
    }

    /// Changes the broker config (Kafka-named settings, as `config/broker.toml` has them).
    pub fn configure(mut self, change: impl FnOnce(&mut BrokerConfig)) -> Self {
        change(&mut self.config);
        self
    }

    /// Also serves the admin HTTP API and the live view, on a port of its own
    /// ([`TestKafka::admin_addr`]).
    pub fn admin(mut self) -> Self {
        self.admin = true;
        self
    }

    /// Starts the brokers, every listener on port 0 of 127.0.0.1.
    pub async fn start(self) -> anyhow::Result<TestKafka> {
        let TestKafkaBuilder {
            brokers,
            mut config,
            admin,
        } = self;
        anyhow::ensure!(
            brokers >= 1,
            "a TestKafka needs at least one broker, not {brokers}"
        );
        config.listen = "127.0.0.1:0".into();
        config.admin_listen = "127.0.0.1:0".into();
        if brokers == 1 {
            config.follower_count = 0;
            config.embedded_followers = false;
            config.default_replication_factor = 1;
            let broker = Broker::start(config).await?;
            let admin_addr = match admin {
                true => Some(admin::start(
                    &broker.replica_manager().config.admin_listen,
                    AdminState::new(
                        broker.replica_manager().clone(),
                        broker.group_coordinator().clone(),
                        EmbeddedFollowers::none(),
                        None,
                    )
                    .with_transactions(broker.txn_coordinator().clone()),
                )?),
                false => None,
            };
            return Ok(TestKafka {
                brokers: Brokers::One(broker),
                admin_addr,
            });
        }
        let cluster = Cluster::start(config, brokers).await?;
        let admin_addr = match (admin, cluster.broker(1)) {
            (true, Some(first)) => Some(admin::start(
                &first.replica_manager().config.admin_listen,
                AdminState::new(
                    first.replica_manager().clone(),
                    first.group_coordinator().clone(),
                    EmbeddedFollowers::none(),
                    None,
                )
                .with_cluster(cluster.clone())
                .with_transactions(first.txn_coordinator().clone()),
            )?),
            _ => None,
        };
        Ok(TestKafka {
            brokers: Brokers::Cluster(cluster),
            admin_addr,
        })
    }
}

enum Brokers {
    One(Broker),
    Cluster(Arc<Cluster>),
}

/// Brokers running inside the test (see the module docs).
pub struct TestKafka {
    brokers: Brokers,
    admin_addr: Option<SocketAddr>,
}

impl TestKafka {
    /// One broker, system clock, no admin listener.
    pub async fn start() -> anyhow::Result<TestKafka> {
        Self::builder().start().await
    }

    /// Choose brokers, clock and config first.
    pub fn builder() -> TestKafkaBuilder {
        TestKafkaBuilder {
            brokers: 1,
            config: BrokerConfig::default(),
            admin: false,
        }
    }

    /// Each broker's id and bound Kafka listener.
    pub fn listeners(&self) -> Vec<(i32, SocketAddr)> {
        match &self.brokers {
            Brokers::One(b) => vec![(b.replica_manager().config.broker_id, b.local_addr())],
            Brokers::Cluster(c) => c
                .ids()
                .into_iter()
                .filter_map(|id| c.broker(id).map(|b| (id, b.local_addr())))
                .collect(),
        }
    }

    /// `bootstrap.servers` for a client: every broker's listener.
    pub fn bootstrap(&self) -> String {
        let listeners: Vec<String> = self
            .listeners()
            .iter()
            .map(|(_, addr)| addr.to_string())
            .collect();
        listeners.join(",")
    }

    /// The admin API's address, if the builder asked for it.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// A broker's replica manager (its logs, purgatories, telemetry), by id.
    pub fn replica_manager(&self, broker_id: i32) -> Option<&Arc<ReplicaManager>> {
        match &self.brokers {
            Brokers::One(b) => {
                Some(b.replica_manager()).filter(|rm| rm.config.broker_id == broker_id)
            }
            Brokers::Cluster(c) => c.broker(broker_id).map(Broker::replica_manager),
        }
    }

    /// The cluster, when there are several brokers (to kill and restart them).
    pub fn cluster(&self) -> Option<&Arc<Cluster>> {
        match &self.brokers {
            Brokers::One(_) => None,
            Brokers::Cluster(c) => Some(c),
        }
    }

    fn first(&self) -> &Arc<ReplicaManager> {
        match &self.brokers {
            Brokers::One(b) => b.replica_manager(),
            Brokers::Cluster(c) => c
                .ids()
                .into_iter()
                .find_map(|id| c.broker(id))
                .map(Broker::replica_manager)
                .expect("a cluster has brokers"),
        }
    }

    /// The fault rules, shared by every broker.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.first().faults
    }

    /// Arms a rule (the JSON of `POST /api/faults`); its id, or why it is not a rule.
    pub fn add_fault(&self, rule: &str) -> Result<u64, String> {
        self.faults().add_json(rule)
    }

    /// How many times a rule has fired (`None`: no such rule).
    pub fn fault_hits(&self, id: u64) -> Option<u64> {
        self.faults()
            .list()
            .iter()
            .find(|r| r["id"].as_u64() == Some(id))
            .and_then(|r| r["hits"].as_u64())
    }

    /// Removes every rule.
    pub fn clear_faults(&self) {
        self.faults().clear();
    }

    /// A broker's most recent requests, newest first (at most `limit`), as
    /// `GET /api/requests` serves them: each with the rule that fired on it, if one did.
    pub fn requests(&self, broker_id: i32, limit: usize) -> Vec<RequestView> {
        self.replica_manager(broker_id)
            .map(|rm| rm.telemetry.recent_requests(0, limit, &Default::default()))
            .unwrap_or_default()
    }

    /// On a manual clock, moves time forward; returns how many timer tasks fired.
    pub fn advance_clock(&self, ms: u64) -> usize {
        self.first().timer.advance_by(ms)
    }

    /// Stops every broker.
    pub async fn shutdown(self) {
        match self.brokers {
            Brokers::One(b) => b.shutdown(),
            Brokers::Cluster(c) => c.shutdown().await,
        }
    }
}
