//! Waking the followers' parked fetches when the partitions they follow change.
//!
//! A follower long-polls: its Fetch names the partitions it follows and waits at the
//! leader for up to `max_wait_ms`. In Kafka the controller tells a broker it follows a new
//! partition, and the new partition joins the fetcher's *next* Fetch, at most
//! `replica.fetch.wait.max.ms` (500 ms) later. On this broker's manual clock that wait
//! never ends by itself: a topic created while the followers' fetches are parked would
//! never be replicated, and an `acks=all` produce to it would hang until the user moved
//! the clock. So when topics are created or deleted, the embedded followers are first
//! told to re-read Metadata, then [`ReplicaManager::wake_follower_fetches`] ends their
//! parked fetches (cause [`Cause::PartitionsChanged`]), and the next Fetch names the new
//! partitions.
//!
//! One race needs care: a Fetch already on its way when the wake happens was built from
//! the old Metadata and would park for good. So every follower Fetch is checked at arrival
//! ([`FollowerWakeups::missed_by`]): if a wake happened since that follower's previous
//! Fetch arrived, it is answered at once too. The follower was told before the wake, so
//! the Fetch after that answer is built from the new Metadata.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::ReplicaManager;
use crate::request::Cause;

/// Replica ids remembered at most, so hostile replica ids cannot grow the map.
const MAX_REPLICAS: usize = 1024;

/// How many wakes have happened, and which of them each follower's last Fetch saw.
#[derive(Default)]
pub struct FollowerWakeups {
    count: AtomicU64,
    seen: Mutex<HashMap<i32, u64>>,
}

impl FollowerWakeups {
    /// How many wakes have happened.
    pub fn current(&self) -> u64 {
        self.count.load(Ordering::Acquire)
    }

    /// Counts a wake and returns the new count.
    fn bump(&self) -> u64 {
        self.count.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether a wake happened since `replica`'s previous Fetch arrived (so this one may
    /// have been built before the follower was told). Records that this one arrived.
    pub fn missed_by(&self, replica: i32) -> bool {
        let now = self.current();
        let mut seen = self.seen.lock();
        if let Some(last) = seen.get_mut(&replica) {
            return std::mem::replace(last, now) != now;
        }
        if seen.len() >= MAX_REPLICAS {
            // Hostile replica ids filled it: start over. Each real follower then has one
            // fetch answered at once, as after a wake.
            seen.clear();
        }
        seen.insert(replica, now);
        now != 0
    }
}

/// A parked follower fetch's view of the wakes: the count when it parked.
#[derive(Clone)]
pub struct WakeWatch {
    wakeups: Arc<FollowerWakeups>,
    parked_at: u64,
}

impl WakeWatch {
    /// Watches for wakes after now.
    pub fn new(wakeups: &Arc<FollowerWakeups>) -> Self {
        WakeWatch {
            wakeups: wakeups.clone(),
            parked_at: wakeups.current(),
        }
    }

    /// Whether a wake happened since the fetch parked.
    pub fn woken(&self) -> bool {
        self.wakeups.current() != self.parked_at
    }
}

impl ReplicaManager {
    /// Ends every parked follower fetch, so the followers' next fetches name the
    /// partitions they were just told of (see the module's doc). Call it *after* telling
    /// them to re-read Metadata. Returns how many fetches it ended.
    pub fn wake_follower_fetches(&self) -> usize {
        let wake = self.follower_wakeups.bump();
        debug_assert!(wake > 0);
        self.topics
            .partitions()
            .iter()
            .map(|p| {
                self.fetch_purgatory
                    .check_and_complete_with(&p.tp, Cause::PartitionsChanged)
            })
            .sum()
    }
}
