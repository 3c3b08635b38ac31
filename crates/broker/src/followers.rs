//! Embedded followers: simulated replicas running inside the broker process.
//!
//! `cargo run` should show a real delayed produce with no other setup, so by default the
//! broker starts its followers (replica ids 2, 3, ...) itself. They are the same
//! `followersim` library an external `followersim` process uses, and they replicate the same
//! way: over a TCP connection to the broker's own listener, sending Fetch requests with
//! their replica ids. Nothing takes a shortcut around the protocol.

use std::collections::BTreeMap;
use std::sync::Arc;

use followersim::{Follower, FollowerConfig, FollowerHandle, FollowerStatus};
use parking_lot::RwLock;
use tracing::info;

use crate::replica_manager::ReplicaManager;

/// The followers this process runs, by replica id.
#[derive(Clone, Default)]
pub struct EmbeddedFollowers {
    inner: Arc<RwLock<BTreeMap<i32, FollowerHandle>>>,
}

impl EmbeddedFollowers {
    /// No followers (they are off, or played by external processes).
    pub fn none() -> Self {
        Self::default()
    }

    /// Starts one follower per id, fetching from `bootstrap`. Must run inside a tokio runtime.
    pub fn start(bootstrap: &str, ids: &[i32], template: &FollowerConfig) -> Self {
        let followers = EmbeddedFollowers::default();
        for &id in ids {
            let config = FollowerConfig {
                replica_id: id,
                bootstrap: bootstrap.to_string(),
                ..template.clone()
            };
            followers.inner.write().insert(id, Follower::spawn(config));
        }
        info!(?ids, %bootstrap, "embedded followers started");
        followers
    }

    /// Like [`start`](Self::start), and tells the followers about every topic created or
    /// deleted on `rm` as it happens (Kafka's controller does this with LeaderAndIsr),
    /// then ends their parked fetches so the next ones name the new partitions (on a
    /// manual clock a parked fetch would otherwise never end; see
    /// [`ReplicaManager::wake_follower_fetches`]).
    pub fn start_for(
        rm: &Arc<ReplicaManager>,
        bootstrap: &str,
        ids: &[i32],
        template: &FollowerConfig,
    ) -> Self {
        let followers = Self::start(bootstrap, ids, template);
        let mut changes = rm.subscribe_topic_changes();
        let watched = followers.clone();
        let rm = Arc::downgrade(rm);
        tokio::spawn(async move {
            while changes.changed().await.is_ok() {
                for h in watched.inner.read().values() {
                    h.refresh_metadata();
                }
                match rm.upgrade() {
                    Some(rm) => rm.wake_follower_fetches(),
                    None => break,
                };
            }
        });
        followers
    }

    /// A follower by replica id.
    pub fn get(&self, id: i32) -> Option<FollowerHandle> {
        self.inner.read().get(&id).cloned()
    }

    /// Replica ids of the embedded followers.
    pub fn ids(&self) -> Vec<i32> {
        self.inner.read().keys().copied().collect()
    }

    /// Every follower's status, for the state API.
    pub fn statuses(&self) -> Vec<FollowerStatus> {
        self.inner
            .read()
            .values()
            .map(FollowerHandle::status)
            .collect()
    }

    /// Stops every follower.
    pub async fn shutdown(&self) {
        let handles: Vec<FollowerHandle> = self.inner.read().values().cloned().collect();
        for h in handles {
            h.shutdown().await;
        }
    }
}
