//! The Kafka listener: accept TCP connections and give each its own task.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::config::BrokerConfig;
use crate::connection;
use crate::coordinator::GroupCoordinator;
use crate::replica_manager::ReplicaManager;

/// A running broker.
pub struct Broker {
    rm: Arc<ReplicaManager>,
    local_addr: SocketAddr,
    accept_task: JoinHandle<()>,
}

impl Broker {
    /// Binds the listener and starts serving. Must be called inside a tokio runtime.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Broker> {
        config.validate()?;
        let listener = TcpListener::bind(&config.listen).await.with_context(|| {
            format!(
                "cannot start the Kafka listener on {}; choose another address with \
                 --listen HOST:PORT (`listeners` in the config file)",
                config.listen
            )
        })?;
        let local_addr = listener.local_addr()?;
        let rm = ReplicaManager::new(config);
        rm.set_bound_port(local_addr.port());
        // The group coordinator starts with the broker, so that its purgatories show in the
        // state API from the start; __consumer_offsets is created when a group first needs it.
        GroupCoordinator::of(&rm);
        info!(
            listen = %local_addr,
            advertised = %format!("{}:{}", rm.config.advertised_host(), local_addr.port()),
            clock = ?rm.config.clock,
            "Kafka listener ready"
        );
        let accept_rm = rm.clone();
        let accept_task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        debug!(%peer, "connection accepted");
                        tokio::spawn(connection::serve(accept_rm.clone(), stream, peer));
                    }
                    Err(e) => {
                        // Usually EMFILE: back off briefly instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        });
        Ok(Broker {
            rm,
            local_addr,
            accept_task,
        })
    }

    /// The address the listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The broker's shared state.
    pub fn replica_manager(&self) -> &Arc<ReplicaManager> {
        &self.rm
    }

    /// Stops accepting connections and stops the timer.
    pub fn shutdown(&self) {
        self.accept_task.abort();
        self.rm.shutdown();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shutdown();
    }
}
