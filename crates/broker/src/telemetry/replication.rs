//! What the live view, the metrics and the log are told of each replication change: one
//! call per change, made by the replica manager after the partition lock is released and
//! before the purgatories are woken, so that the event precedes the completions it causes
//! in the request log. The replica manager hands over replog's own account of the change
//! (`FollowerUpdate`, `IsrShrink`); nothing here reaches back into the partition.

use std::sync::atomic::Ordering;

use replog::{FollowerUpdate, IsrShrink};
use tracing::{info, warn};

use super::events::EventKind;
use super::Telemetry;
use crate::partition::TopicPartition;
use crate::request::RequestContext;

impl Telemetry {
    /// A follower fetched `tp` at `fetch_offset`: a replication event if that moved its
    /// log end offset or the HW, an ISR expansion if it rejoined.
    pub fn follower_fetched(
        &self,
        tp: &TopicPartition,
        now_ms: u64,
        ctx: &RequestContext,
        replica_id: i32,
        fetch_offset: i64,
        update: &FollowerUpdate,
    ) {
        let change = &update.change;
        if update.follower_log_end_offset_before != fetch_offset || change.high_watermark_advanced()
        {
            self.record_event(
                tp,
                now_ms,
                EventKind::FollowerFetch {
                    replica: replica_id,
                    fetch_offset,
                    hw_before: change.before.high_watermark,
                    hw_after: change.after.high_watermark,
                    request: ctx.trace.seq(),
                    correlation_id: ctx.correlation_id,
                },
            );
        }
        if let Some(isr) = &change.new_isr {
            self.metrics.isr_expands.fetch_add(1, Ordering::Relaxed);
            self.record_event(
                tp,
                now_ms,
                EventKind::IsrExpand {
                    replica: replica_id,
                    isr: isr.clone(),
                },
            );
            info!(
                target: "purgatory::isr",
                %tp, replica_id, ?isr,
                "ISR expand: follower caught up to the high watermark"
            );
        }
        if change.high_watermark_advanced() {
            info!(
                target: "purgatory::replication",
                %tp,
                replica_id,
                high_watermark = change.after.high_watermark,
                "high watermark advanced: follower {replica_id} fetched from offset {fetch_offset}"
            );
        }
    }

    /// The ISR check removed followers from `tp`'s ISR.
    pub fn isr_shrunk(&self, tp: &TopicPartition, now_ms: u64, shrink: &IsrShrink) {
        let isr = shrink.change.new_isr.clone().unwrap_or_default();
        self.metrics.isr_shrinks.fetch_add(1, Ordering::Relaxed);
        self.record_event(
            tp,
            now_ms,
            EventKind::IsrShrink {
                removed: shrink.removed.clone(),
                isr: isr.clone(),
                hw_after: shrink.change.after.high_watermark,
            },
        );
        warn!(
            target: "purgatory::isr",
            %tp, removed = ?shrink.removed, ?isr,
            "ISR shrink: followers not caught up within replica.lag.time.max.ms"
        );
    }
}

impl Telemetry {
    /// The controller changed `tp`'s leader (`new_leader` -1: offline).
    pub fn leader_elected(
        &self,
        tp: &TopicPartition,
        now_ms: u64,
        (old_leader, new_leader, leader_epoch): (i32, i32, i32),
        isr: &[i32],
        clean: bool,
    ) {
        self.record_event(
            tp,
            now_ms,
            EventKind::LeaderElected {
                old_leader,
                new_leader,
                leader_epoch,
                isr: isr.to_vec(),
                clean,
            },
        );
    }

    /// Broker `replica` truncated `tp` from `from_offset` down to `to_offset`.
    pub fn truncated(
        &self,
        tp: &TopicPartition,
        now_ms: u64,
        replica: i32,
        (from_offset, to_offset, records): (i64, i64, u64),
    ) {
        self.record_event(
            tp,
            now_ms,
            EventKind::Truncated {
                replica,
                from_offset,
                to_offset,
                records,
            },
        );
    }
}
