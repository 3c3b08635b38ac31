//! Replication events: what moved a partition's high watermark and ISR, as it happened.
//!
//! A follower fetch whose offset moved that follower's log end offset, an ISR expand, an
//! ISR shrink: each is one numbered record. A produce's story ("follower 2 fetch @43 →
//! follower 3 fetch @43 → HW 43") is the events of its partitions between its append and
//! its completion; the live view shows them as they arrive. A follower's long poll that
//! changes nothing records nothing.

use std::time::Instant;

use serde::Serialize;

use super::ring::{Numbered, Ring};
use crate::partition::TopicPartition;

/// Events kept.
pub const EVENTS_KEPT: usize = 4096;

/// What happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EventKind {
    /// Empty slot.
    #[default]
    None,
    /// A follower fetched from a new offset: its log end offset moved.
    FollowerFetch {
        /// The follower.
        replica: i32,
        /// Its fetch offset, now its log end offset.
        fetch_offset: i64,
        /// The high watermark before and after.
        hw_before: i64,
        /// The high watermark after.
        hw_after: i64,
        /// The fetch's request number.
        request: u64,
        /// The fetch's correlation id.
        correlation_id: i32,
    },
    /// A follower rejoined the ISR.
    IsrExpand {
        /// The follower.
        replica: i32,
        /// The ISR after.
        isr: Vec<i32>,
    },
    /// The ISR check removed followers.
    IsrShrink {
        /// Who left.
        removed: Vec<i32>,
        /// The ISR after.
        isr: Vec<i32>,
        /// The high watermark after (a smaller ISR may let it move on).
        hw_after: i64,
    },
    /// The controller gave the partition a new leader, or none (with several brokers).
    LeaderElected {
        /// The leader before, -1 if none.
        old_leader: i32,
        /// The new leader, -1 if the partition is offline.
        new_leader: i32,
        /// The new leader epoch.
        leader_epoch: i32,
        /// The ISR after.
        isr: Vec<i32>,
        /// Whether the leader came from the ISR.
        clean: bool,
    },
    /// A replica dropped the end of its log to follow a new leader's.
    Truncated {
        /// The broker that truncated.
        replica: i32,
        /// Its log end before.
        from_offset: i64,
        /// Its log end after: the first offset dropped.
        to_offset: i64,
        /// Records dropped.
        records: u64,
    },
}

/// One event.
#[derive(Default)]
pub struct Event {
    /// Its number.
    pub seq: u64,
    /// When (real time).
    pub at: Option<Instant>,
    /// When, on the broker clock.
    pub broker_ms: u64,
    /// Which partition.
    pub tp: Option<TopicPartition>,
    /// What happened.
    pub kind: EventKind,
}

impl Numbered for Event {
    fn seq(&self) -> u64 {
        self.seq
    }
}

/// An event as the state API and the page show it.
#[derive(Clone, Debug, Serialize)]
pub struct EventView {
    /// Its number.
    pub seq: u64,
    /// Broker clock, ms.
    pub at_ms: u64,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// `follower_fetch`, `isr_expand`, `isr_shrink`, `leader_elected` or `truncated`.
    pub kind: &'static str,
    /// The follower concerned (for a shrink: the first removed).
    pub replica: Option<i32>,
    /// A follower fetch's offset.
    pub fetch_offset: Option<i64>,
    /// The HW before, for a follower fetch.
    pub hw_before: Option<i64>,
    /// The HW after.
    pub hw_after: Option<i64>,
    /// The ISR after an ISR change.
    pub isr: Option<Vec<i32>>,
    /// Followers removed by a shrink.
    pub removed: Option<Vec<i32>>,
    /// The follower fetch's request number.
    pub request: Option<u64>,
    /// In words.
    pub text: String,
}

impl Event {
    /// In words: `follower 2 fetch @43`, `HW 43`, `ISR shrink: 3 left, ISR [1, 2]`.
    pub fn text(&self) -> String {
        match &self.kind {
            EventKind::None => String::new(),
            EventKind::FollowerFetch {
                replica,
                fetch_offset,
                hw_before,
                hw_after,
                ..
            } => {
                if hw_after > hw_before {
                    format!("follower {replica} fetch @{fetch_offset} → HW {hw_after}")
                } else {
                    format!("follower {replica} fetch @{fetch_offset}")
                }
            }
            EventKind::IsrExpand { replica, isr } => {
                format!("ISR expand: {replica} rejoined, ISR {isr:?}")
            }
            EventKind::IsrShrink {
                removed,
                isr,
                hw_after,
            } => format!("ISR shrink: {removed:?} left, ISR {isr:?}, HW {hw_after}"),
            EventKind::LeaderElected {
                new_leader: -1,
                old_leader,
                leader_epoch,
                ..
            } => format!(
                "leader {old_leader} gone, none electable: offline, leader epoch {leader_epoch}"
            ),
            EventKind::LeaderElected {
                old_leader,
                new_leader,
                leader_epoch,
                isr,
                clean,
            } => format!(
                "{}election: leader {old_leader} → {new_leader}, leader epoch {leader_epoch}, ISR {isr:?}",
                if *clean { "" } else { "UNCLEAN " }
            ),
            EventKind::Truncated {
                replica,
                from_offset,
                to_offset,
                records,
            } => format!(
                "broker {replica} truncated offsets {to_offset}..{from_offset} ({records} records) to follow the leader"
            ),
        }
    }

    /// The serialisable view.
    pub fn view(&self) -> EventView {
        let (topic, partition) = self
            .tp
            .as_ref()
            .map(|tp| (tp.topic.to_string(), tp.partition))
            .unwrap_or_default();
        let mut v = EventView {
            seq: self.seq,
            at_ms: self.broker_ms,
            topic,
            partition,
            kind: "",
            replica: None,
            fetch_offset: None,
            hw_before: None,
            hw_after: None,
            isr: None,
            removed: None,
            request: None,
            text: self.text(),
        };
        match &self.kind {
            EventKind::None => {}
            EventKind::FollowerFetch {
                replica,
                fetch_offset,
                hw_before,
                hw_after,
                request,
                ..
            } => {
                v.kind = "follower_fetch";
                v.replica = Some(*replica);
                v.fetch_offset = Some(*fetch_offset);
                v.hw_before = Some(*hw_before);
                v.hw_after = Some(*hw_after);
                v.request = (*request > 0).then_some(*request);
            }
            EventKind::IsrExpand { replica, isr } => {
                v.kind = "isr_expand";
                v.replica = Some(*replica);
                v.isr = Some(isr.clone());
            }
            EventKind::IsrShrink {
                removed,
                isr,
                hw_after,
            } => {
                v.kind = "isr_shrink";
                v.replica = removed.first().copied();
                v.removed = Some(removed.clone());
                v.isr = Some(isr.clone());
                v.hw_after = Some(*hw_after);
            }
            EventKind::LeaderElected {
                new_leader, isr, ..
            } => {
                v.kind = "leader_elected";
                v.replica = Some(*new_leader);
                v.isr = Some(isr.clone());
            }
            EventKind::Truncated {
                replica, to_offset, ..
            } => {
                v.kind = "truncated";
                v.replica = Some(*replica);
                v.fetch_offset = Some(*to_offset);
            }
        }
        v
    }
}

/// The ring of recent events.
pub struct EventLog {
    ring: Ring<Event>,
}

impl Default for EventLog {
    fn default() -> Self {
        EventLog {
            ring: Ring::new(EVENTS_KEPT),
        }
    }
}

impl EventLog {
    /// Records an event; returns its number.
    pub fn record(&self, tp: &TopicPartition, broker_ms: u64, kind: EventKind) -> u64 {
        self.ring.push(|seq, e| {
            e.seq = seq;
            e.at = Some(Instant::now());
            e.broker_ms = broker_ms;
            if e.tp.as_ref() != Some(tp) {
                e.tp = Some(tp.clone());
            }
            e.kind = kind;
        })
    }

    /// The number the next event will get.
    pub fn next_seq(&self) -> u64 {
        self.ring.next_seq()
    }

    /// The newest events after `after`, newest first.
    pub fn newest(&self, after: u64, limit: usize) -> Vec<EventView> {
        self.ring.newest(after, limit, |e| Some(e.view()))
    }

    /// Maps the events numbered in `from..to`, oldest first.
    pub fn range<R>(&self, from: u64, to: u64, f: impl FnMut(&Event) -> Option<R>) -> Vec<R> {
        self.ring.range(from, to, f)
    }
}
