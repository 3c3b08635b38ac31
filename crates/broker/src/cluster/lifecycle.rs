//! A broker's life in the cluster: killed, restarted, shut down.
//!
//! * **Kill** is a crash whose disk survives. The listener and every connection close
//!   at once, the broker's fetchers stop, and its memory goes: it leads nothing and holds
//!   no group any more. Its logs stay exactly as they were, unreplicated tail included.
//!   The controller fences it and elects a new leader for each partition it led
//!   ([`controller::Controller::broker_failed`]).
//! * **Restart** brings it back with a new incarnation. It takes the role the
//!   controller has for it in each partition, which is follower wherever someone else
//!   was elected meanwhile, opens its listener on the same port and starts its fetchers.
//!   Each fetcher's first Fetch carries the epoch of its last batch; a new leader whose
//!   log diverged answers with the diverging epoch's end offset, and the broker
//!   truncates there, logging the offsets it dropped. Once caught up, the leader adds it
//!   back to the ISR (AlterPartition).
//! * **Controlled shutdown** moves leadership first
//!   ([`controller::Controller::controlled_shutdown`]): the new leaders take over, the
//!   leaving broker's parked requests are answered NOT_LEADER_OR_FOLLOWER on connections
//!   still open, so clients move on at once, and only then does it close.

use std::sync::Arc;
use std::time::Duration;

use controller::Change;
use tracing::info;

use super::Cluster;
use crate::topics::{OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC};

/// Why a lifecycle call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleError {
    /// No broker has this id.
    UnknownBroker(i32),
    /// The broker is dead already (kill, shutdown) or alive already (restart).
    WrongState {
        /// The broker.
        id: i32,
        /// Whether it is alive.
        alive: bool,
    },
    /// The brokers' runtime has stopped (the process is shutting down).
    Stopped,
    /// The restart could not bind the listener again.
    Listen {
        /// The broker.
        id: i32,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for LifecycleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LifecycleError::UnknownBroker(id) => write!(f, "there is no broker {id}"),
            LifecycleError::WrongState { id, alive: true } => {
                write!(f, "broker {id} is already running")
            }
            LifecycleError::WrongState { id, alive: false } => {
                write!(f, "broker {id} is not running")
            }
            LifecycleError::Stopped => f.write_str("the brokers have stopped"),
            LifecycleError::Listen { id, reason } => {
                write!(f, "broker {id} cannot listen again: {reason}")
            }
        }
    }
}

impl std::error::Error for LifecycleError {}

/// How long a broker shutting down cleanly lets its connections write the answers it
/// owes before it closes them.
const SHUTDOWN_DRAIN: Duration = Duration::from_millis(100);

/// What a lifecycle call returns: the controller's changes, in order.
pub type Changes = Result<Vec<Change>, LifecycleError>;

impl Cluster {
    /// Kills broker `id`; returns what the controller changed.
    pub async fn kill(self: &Arc<Self>, id: i32) -> Changes {
        let cluster = self.clone();
        self.on_brokers_runtime(async move { cluster.kill_here(id).await })
            .await
    }

    /// Shuts broker `id` down cleanly; returns what the controller changed.
    pub async fn controlled_shutdown(self: &Arc<Self>, id: i32) -> Changes {
        let cluster = self.clone();
        self.on_brokers_runtime(async move { cluster.controlled_shutdown_here(id).await })
            .await
    }

    /// Restarts broker `id` after a kill or a shutdown; returns what the controller
    /// changed.
    pub async fn restart(self: &Arc<Self>, id: i32) -> Changes {
        let cluster = self.clone();
        self.on_brokers_runtime(async move { cluster.restart_here(id).await })
            .await
    }

    /// Runs `work` on the brokers' runtime, whichever runtime awaits it.
    async fn on_brokers_runtime(
        &self,
        work: impl std::future::Future<Output = Changes> + Send + 'static,
    ) -> Changes {
        self.runtime
            .spawn(work)
            .await
            .unwrap_or(Err(LifecycleError::Stopped))
    }

    async fn kill_here(&self, id: i32) -> Changes {
        let _one = self.lifecycle.lock().await;
        self.expect_alive(id, true)?;
        self.stop_broker(id).await;
        let changes = self
            .controller
            .lock()
            .broker_failed(id)
            .map_err(|_| LifecycleError::UnknownBroker(id))?;
        info!(broker = id, changes = changes.len(), "broker killed");
        self.apply(&changes);
        Ok(changes)
    }

    async fn controlled_shutdown_here(&self, id: i32) -> Changes {
        let _one = self.lifecycle.lock().await;
        self.expect_alive(id, true)?;
        let changes = self
            .controller
            .lock()
            .controlled_shutdown(id)
            .map_err(|_| LifecycleError::UnknownBroker(id))?;
        // The new leaders take over before the old one lets go; it stops fetching from
        // them first, so that none counts it as a follower catching up.
        self.apply(&changes);
        self.stop_fetchers(id).await;
        if let Some(node) = self.nodes.get(&id) {
            self.forget(id);
            // What it answered (NOT_LEADER_OR_FOLLOWER) reaches its clients.
            tokio::time::sleep(SHUTDOWN_DRAIN).await;
            node.broker.stop_listening().await;
        }
        info!(
            broker = id,
            changes = changes.len(),
            "broker shut down (controlled)"
        );
        Ok(changes)
    }

    async fn restart_here(&self, id: i32) -> Changes {
        let _one = self.lifecycle.lock().await;
        self.expect_alive(id, false)?;
        let changes = self
            .controller
            .lock()
            .broker_restarted(id)
            .map_err(|_| LifecycleError::UnknownBroker(id))?;
        // Roles first, so that it never serves as the leader it was before it died.
        self.take_roles(id);
        self.apply(&changes);
        if let Some(node) = self.nodes.get(&id) {
            node.broker
                .listen_again()
                .await
                .map_err(|e| LifecycleError::Listen {
                    id,
                    reason: format!("{e:#}"),
                })?;
        }
        self.start_fetchers(id);
        self.nudge_fetchers();
        info!(broker = id, changes = changes.len(), "broker restarted");
        Ok(changes)
    }

    fn expect_alive(&self, id: i32, alive: bool) -> Result<(), LifecycleError> {
        if !self.nodes.contains_key(&id) {
            return Err(LifecycleError::UnknownBroker(id));
        }
        if self.is_alive(id) != alive {
            return Err(LifecycleError::WrongState { id, alive: !alive });
        }
        Ok(())
    }

    /// A crash: connections and fetchers stop, then its memory goes.
    async fn stop_broker(&self, id: i32) {
        if let Some(node) = self.nodes.get(&id) {
            node.broker.stop_listening().await;
        }
        self.stop_fetchers(id).await;
        self.forget(id);
    }

    /// Broker `id` leads nothing and holds no group.
    fn forget(&self, id: i32) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let rm = node.broker.replica_manager();
        rm.resign_all();
        if let Some(offsets) = rm.topic(OFFSETS_TOPIC) {
            for p in 0..offsets.partitions.len() as i32 {
                node.broker.group_coordinator().unload_groups(p);
            }
        }
        if let Some(state) = rm.topic(TRANSACTION_STATE_TOPIC) {
            for p in 0..state.partitions.len() as i32 {
                node.broker.txn_coordinator().unload_transactions(p);
            }
        }
    }

    async fn stop_fetchers(&self, id: i32) {
        let Some(node) = self.nodes.get(&id) else {
            return;
        };
        let fetchers = std::mem::take(&mut *node.fetchers.lock());
        for f in &fetchers {
            f.signal_shutdown();
        }
        for f in &fetchers {
            f.shutdown().await;
        }
    }
}
