//! The Kafka listener: accept TCP connections and give each its own task.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::apis::KafkaApis;
use crate::config::BrokerConfig;
use crate::connection;
use crate::coordinator::GroupCoordinator;
use crate::replica_manager::{BrokerShared, ReplicaManager};

/// The tokio runtime `purgatory serve` runs the broker and its embedded followers on: one
/// thread (tokio's current-thread scheduler), like librdkafka's mock cluster.
///
/// An acks=all produce is a chain of small steps that each wake the next task: the append
/// completes the followers' parked fetches, their connections write the responses, each
/// follower appends and sends its next Fetch, the second one moves the high watermark,
/// which completes the produce. On a multi-thread runtime nearly every one of those
/// wake-ups also wakes an idle worker thread to steal the task (a futex or eventfd write,
/// and a hand-over to another CPU); on one thread the chain runs straight through, with
/// lower latency and less CPU per message (`cargo bench -p purgatory --bench vs_mock --
/// --variants ct,mt2`; the figures are in docs/performance.md). Handlers never block, and
/// timeouts run on the timing wheel's own thread, so one thread is enough for a mock
/// broker's load.
/// The benchmarks build their broker on this too, so that they measure what users run.
/// The admin listener is the one part of `purgatory serve` that runs elsewhere, on a
/// thread of its own ([`admin::start`](crate::admin::start) says why).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A running broker.
pub struct Broker {
    apis: Arc<KafkaApis>,
    local_addr: SocketAddr,
    listening: Mutex<Option<Listening>>,
}

/// A bound listener: the task accepting on it, and the signal that closes every
/// connection it accepted.
struct Listening {
    accept_task: JoinHandle<()>,
    close_connections: watch::Sender<bool>,
}

impl Listening {
    /// Accepts on `listener`, serving each connection until it ends or until
    /// [`stop`](Self::stop).
    fn start(listener: TcpListener, apis: Arc<KafkaApis>) -> Listening {
        let (close_connections, closed) = watch::channel(false);
        let accept_task = tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        debug!(%peer, "connection accepted");
                        tokio::spawn(connection::serve(
                            apis.clone(),
                            stream,
                            peer,
                            closed.clone(),
                        ));
                    }
                    Err(e) => {
                        // Usually EMFILE: back off briefly instead of spinning.
                        warn!(error = %e, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            }
        });
        Listening {
            accept_task,
            close_connections,
        }
    }

    /// Stops accepting and closes every connection; returns once the listening socket is
    /// closed, so that its port can be bound again.
    async fn stop(self) {
        let _ = self.close_connections.send(true);
        self.accept_task.abort();
        let _ = self.accept_task.await;
    }
}

impl Broker {
    /// Binds the listener and starts serving. Must be called inside a tokio runtime.
    pub async fn start(config: BrokerConfig) -> anyhow::Result<Broker> {
        let shared = BrokerShared::for_config(&config);
        Self::start_shared(config, shared).await
    }

    /// Like [`start`](Self::start), sharing the timer and the producer ids with the other
    /// brokers of this process ([`crate::cluster`]).
    pub async fn start_shared(
        config: BrokerConfig,
        shared: BrokerShared,
    ) -> anyhow::Result<Broker> {
        config.validate()?;
        let listener = TcpListener::bind(&config.listen).await.with_context(|| {
            format!(
                "cannot start the Kafka listener on {}; choose another address with \
                 --listen HOST:PORT (`listeners` in the config file)",
                config.listen
            )
        })?;
        let local_addr = listener.local_addr()?;
        let rm = ReplicaManager::with_shared(config, shared);
        rm.set_bound_port(local_addr.port());
        // The group coordinator starts with the broker, so that its purgatories show in the
        // state API from the start; __consumer_offsets is created when a group first needs it.
        let apis = KafkaApis::new(rm.clone());
        info!(
            listen = %local_addr,
            advertised = %format!("{}:{}", rm.config.advertised_host(), local_addr.port()),
            clock = ?rm.config.clock,
            "Kafka listener ready"
        );
        let listening = Listening::start(listener, apis.clone());
        Ok(Broker {
            apis,
            local_addr,
            listening: Mutex::new(Some(listening)),
        })
    }

    /// Closes the listener and every connection, as a crashed broker's would close. The
    /// logs and the timer stay: [`listen_again`](Self::listen_again) reopens the same port.
    pub async fn stop_listening(&self) {
        let listening = self.listening.lock().take();
        if let Some(listening) = listening {
            listening.stop().await;
            info!(listen = %self.local_addr, "Kafka listener closed");
        }
    }

    /// Binds the listener's port again after [`stop_listening`](Self::stop_listening).
    pub async fn listen_again(&self) -> anyhow::Result<()> {
        if self.listening.lock().is_some() {
            return Ok(());
        }
        let listener = TcpListener::bind(self.local_addr)
            .await
            .with_context(|| format!("cannot bind {} again", self.local_addr))?;
        let listening = Listening::start(listener, self.apis.clone());
        *self.listening.lock() = Some(listening);
        info!(listen = %self.local_addr, "Kafka listener ready again");
        Ok(())
    }

    /// Whether the listener is open.
    pub fn is_listening(&self) -> bool {
        self.listening.lock().is_some()
    }

    /// The address the listener is bound to (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The broker's shared state.
    pub fn replica_manager(&self) -> &Arc<ReplicaManager> {
        &self.apis.replica_manager
    }

    /// The group coordinator.
    pub fn group_coordinator(&self) -> &Arc<GroupCoordinator> {
        &self.apis.group_coordinator
    }

    /// The transaction coordinator.
    pub fn txn_coordinator(&self) -> &Arc<crate::txn::TransactionCoordinator> {
        &self.apis.txn_coordinator
    }

    /// Stops accepting connections and stops the timer.
    pub fn shutdown(&self) {
        if let Some(listening) = self.listening.lock().take() {
            let _ = listening.close_connections.send(true);
            listening.accept_task.abort();
        }
        self.apis.replica_manager.shutdown();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shutdown();
    }
}
