//! # Follower replicas as the leader sees them
//!
//! A partition is replicated to several brokers. One, the **leader**, takes all
//! writes; the others, **followers**, copy its log by sending Fetch requests, just like
//! consumers do but with their broker id as `replica_id`. The offset a follower fetches
//! from is the next offset it does not have, i.e. its own **log end offset (LEO)**. So
//! each follower fetch tells the leader how far that follower got.
//!
//! The leader keeps, per follower:
//! * its **LEO** (the last fetch offset), which feeds the high watermark;
//! * its **last fetch time**;
//! * its **last caught-up time** (`lastCaughtUpTimeMs`): the last moment the follower
//!   was known to hold everything the leader had. This decides ISR membership: a
//!   follower not caught up for more than `replica.lag.time.max.ms` leaves the ISR.
//!
//! "Caught up" is judged at fetch time with Kafka's rule (`Replica.updateFetchState`):
//! 1. if this fetch asks for the leader's current LEO, the follower is caught up *now*;
//! 2. else, if it asks for at least the leader LEO *as of the follower's previous
//!    fetch*, it was caught up *at the previous fetch time*: everything the leader had
//!    back then has now arrived. This keeps a follower of a busy partition (where the
//!    leader's LEO moves on between every two fetches) in the ISR as long as it keeps
//!    pace;
//! 3. otherwise nothing changes, and the follower's caught-up time ages.
//!
//! Either way the leader then remembers its LEO and the time, for rule 2 next time.
//!
//! A broker that becomes leader of an existing partition (Kafka's `makeLeader`) does not
//! know where its followers are: each starts with an unknown LEO ([`UNKNOWN_OFFSET`])
//! until its first fetch. The ones the controller says are in the ISR stay in it,
//! caught up as of the election (Kafka initialises `lastCaughtUpTimeMs` so), so they
//! have `replica.lag.time.max.ms` to fetch before they drop out; meanwhile their unknown
//! LEO holds the high watermark where it is.

use serde::Serialize;

/// The LEO of a follower that has not fetched since this broker became its leader
/// (Kafka's `UnifiedLog.UNKNOWN_OFFSET`). Below every offset, so it never lets the high
/// watermark advance.
pub const UNKNOWN_OFFSET: i64 = -1;

/// The leader's view of one follower replica.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowerState {
    /// Broker id of the follower.
    pub replica_id: i32,
    /// The follower's log end offset: the offset of its last fetch (0 before any on a
    /// new partition, [`UNKNOWN_OFFSET`] before any since a leader change).
    pub log_end_offset: i64,
    /// When the follower last fetched, `None` if it never has.
    pub last_fetch_time_ms: Option<u64>,
    /// Kafka's `lastCaughtUpTimeMs`: the last time the follower was known to hold the
    /// leader's whole log. Starts at the partition's creation time.
    pub last_caught_up_time_ms: u64,
    /// The leader's LEO at the follower's last fetch (Kafka's
    /// `lastFetchLeaderLogEndOffset`), `None` before any fetch.
    pub last_fetch_leader_log_end_offset: Option<i64>,
    /// Whether the follower is in the in-sync replica set.
    pub in_isr: bool,
    /// The follower's log start offset, as its last fetch reported it (Fetch v5+), or
    /// [`UNKNOWN_OFFSET`] before it reported one. DeleteRecords waits on it.
    pub log_start_offset: i64,
}

impl FollowerState {
    /// A follower of a newly created partition: in the ISR, LEO 0, and considered
    /// caught up at `now_ms` (everything, i.e. nothing, has been replicated).
    pub fn new(replica_id: i32, now_ms: u64) -> Self {
        FollowerState {
            replica_id,
            log_end_offset: 0,
            last_fetch_time_ms: None,
            last_caught_up_time_ms: now_ms,
            last_fetch_leader_log_end_offset: None,
            in_isr: true,
            log_start_offset: UNKNOWN_OFFSET,
        }
    }

    /// A follower as a newly elected leader sees it: LEO unknown, never fetched, in the
    /// ISR if `in_isr`. An in-sync follower counts as caught up at `now_ms`; one outside
    /// the ISR has never been (0), and rejoins when its LEO reaches the high watermark.
    pub fn for_new_leader(replica_id: i32, in_isr: bool, now_ms: u64) -> Self {
        FollowerState {
            replica_id,
            log_end_offset: UNKNOWN_OFFSET,
            last_fetch_time_ms: None,
            last_caught_up_time_ms: if in_isr { now_ms } else { 0 },
            last_fetch_leader_log_end_offset: None,
            in_isr,
            log_start_offset: UNKNOWN_OFFSET,
        }
    }

    /// Whether the leader has not heard from this follower since it became leader.
    pub fn log_end_offset_unknown(&self) -> bool {
        self.log_end_offset == UNKNOWN_OFFSET
    }

    /// Records a fetch at `fetch_offset`, made at `now_ms` while the leader's LEO was
    /// `leader_log_end_offset`, applying the caught-up rule of the module docs.
    pub fn record_fetch(&mut self, fetch_offset: i64, leader_log_end_offset: i64, now_ms: u64) {
        if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(now_ms);
        } else if let (Some(previous_leader_leo), Some(previous_fetch_ms)) = (
            self.last_fetch_leader_log_end_offset,
            self.last_fetch_time_ms,
        ) {
            if fetch_offset >= previous_leader_leo {
                self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(previous_fetch_ms);
            }
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end_offset = Some(leader_log_end_offset);
        self.last_fetch_time_ms = Some(now_ms);
    }

    /// Kafka's `isCaughtUp`: the follower holds the leader's whole log, or it did
    /// within the last `replica_lag_time_max_ms`.
    pub fn is_caught_up(
        &self,
        leader_log_end_offset: i64,
        now_ms: u64,
        replica_lag_time_max_ms: u64,
    ) -> bool {
        self.log_end_offset == leader_log_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= replica_lag_time_max_ms
    }
}
