//! # followersim: simulated Kafka follower replicas
//!
//! A Kafka partition is replicated by its **followers** *pulling* from the leader: each
//! follower sends Fetch requests carrying its replica id and its **log end offset (LEO)**,
//! appends the record batches it gets, and fetches again from its new LEO. The leader
//! reads each fetch offset as that follower's LEO and moves the partition's **high
//! watermark (HW)** to the lowest LEO in the in-sync replica set (ISR). A producer using
//! `acks=all` is answered only once the HW has passed its records, so it is the followers'
//! pace that decides how long the produce waits in the leader's purgatory.
//!
//! This crate is such a follower, speaking the real Kafka protocol over TCP, with knobs to
//! make it slow, paused, crashed or lagging on purpose, and scenario files that script
//! those faults over time.
//!
//! - [`wire`]: a small async Kafka client connection (reusable by tests).
//! - [`batch`] and [`log`]: record batch checks and the follower's copy of a partition;
//!   [`store`]: where fetched data goes (that copy, or a broker's own log).
//! - [`Follower`] / [`FollowerHandle`]: spawn a follower and control it while it runs.
//! - [`scenario`]: TOML timelines of faults and the runner that plays them.
//!
//! ```no_run
//! # async fn demo() {
//! use followersim::{Follower, FollowerConfig};
//! let f3 = Follower::spawn(FollowerConfig::new(3, "127.0.0.1:9092"));
//! f3.pause();                     // acks=all produces now wait...
//! f3.resume();                    // ...until it fetches again
//! println!("{:?}", f3.status());
//! f3.shutdown().await;
//! # }
//! ```

#![warn(missing_docs)]

mod backoff;
pub mod batch;
pub mod config;
mod fetcher;
mod follower;
pub mod log;
pub mod scenario;
mod state;
pub mod store;
pub mod test_util;
pub mod wire;

pub use config::FollowerConfig;
pub use fetcher::{API_VERSIONS_VERSION, FETCH_VERSION, LIST_OFFSETS_VERSION, METADATA_VERSION};
pub use follower::{
    Follower, FollowerCounters, FollowerHandle, FollowerState, FollowerStatus, PartitionStatus,
};
pub use log::PartitionLog;
pub use scenario::{
    run_scenario, run_scenario_with, run_timeline, spawn_followers, Action, Scenario,
    ScenarioFollower, Step, StepApplier,
};
pub use store::{MemoryLogs, ReplicaLog, ReplicaLogs};
pub use wire::KafkaConnection;

/// `ms` after `start`, or thirty years after it if that is past what an `Instant` holds: a
/// knob set absurdly high (a config file, a test) sleeps "forever" rather than panicking
/// in `Instant + Duration`.
pub(crate) fn instant_after(start: tokio::time::Instant, ms: u64) -> tokio::time::Instant {
    const THIRTY_YEARS: std::time::Duration = std::time::Duration::from_secs(30 * 365 * 86_400);
    let wait = std::time::Duration::from_millis(ms).min(THIRTY_YEARS);
    start
        .checked_add(wait)
        .unwrap_or(start + std::time::Duration::from_secs(86_400))
}

#[cfg(test)]
mod tests {
    use super::instant_after;
    use std::time::Duration;
    use tokio::time::Instant;

    #[test]
    fn a_wait_past_what_an_instant_holds_saturates_instead_of_panicking() {
        let start = Instant::now();
        assert_eq!(
            instant_after(start, 250),
            start + Duration::from_millis(250)
        );
        let far = instant_after(start, u64::MAX);
        assert!(far > start + Duration::from_secs(365 * 86_400));
    }
}
