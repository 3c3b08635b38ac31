//! `DelayedProduce`: an `acks=all` produce waiting for its records to be replicated.
//!
//! Per partition it needs `high_watermark >= required_offset` (the offset after its last
//! record): then every replica in the ISR has the batch. When that holds for all partitions
//! it completes with NONE, or with NOT_ENOUGH_REPLICAS_AFTER_APPEND for a partition whose
//! ISR fell below `min.insync.replicas` meanwhile. A deleted partition completes with
//! UNKNOWN_TOPIC_OR_PARTITION. If the timeout (the request's `timeout_ms`) fires first,
//! the partitions still waiting answer REQUEST_TIMED_OUT.

use kafka_protocol::messages::ResponseKind;
use parking_lot::Mutex;
use timewheel::DelayedOperation;
use tokio::sync::oneshot;
use tracing::info;

use super::{OpMeta, Responder, TRACE_TARGET};
use crate::error_codes as ec;
use crate::handlers::produce::{build_response, ProduceStatuses};
use crate::replica_manager::TopicPartition;

/// An `acks=all` produce parked in the produce purgatory.
pub struct DelayedProduce {
    meta: OpMeta,
    statuses: Mutex<ProduceStatuses>,
    respond: Responder,
}

impl DelayedProduce {
    /// Wraps the per-partition statuses of an appended produce.
    pub fn new(
        meta: OpMeta,
        statuses: ProduceStatuses,
        respond: oneshot::Sender<ResponseKind>,
    ) -> Self {
        DelayedProduce {
            meta,
            statuses: Mutex::new(statuses),
            respond: Responder::new(respond),
        }
    }

    /// Who asked and when it times out.
    pub fn meta(&self) -> &OpMeta {
        &self.meta
    }

    /// Traces the operation's creation.
    pub fn log_created(&self, keys: &[TopicPartition]) {
        info!(
            target: TRACE_TARGET,
            kind = "DelayedProduce",
            correlation_id = self.meta.correlation_id,
            client = %self.meta.client_id,
            keys = ?keys,
            deadline_ms = self.meta.deadline_ms,
            waits_for = %self.waits_for(),
            "created: acks=all produce parked until the high watermark passes it"
        );
    }
}

impl DelayedOperation for DelayedProduce {
    fn try_complete(&self) -> bool {
        let mut statuses = self.statuses.lock();
        let mut all_done = true;
        for (_, partitions) in statuses.iter_mut() {
            for p in partitions.iter_mut() {
                let Some(waiting) = &p.awaiting else { continue };
                if waiting.handle.is_deleted() {
                    p.error_code = ec::UNKNOWN_TOPIC_OR_PARTITION;
                    p.awaiting = None;
                    continue;
                }
                let verdict = {
                    let log = waiting.handle.lock();
                    if log.high_watermark() >= waiting.required_offset {
                        Some(if log.isr_len() < log.min_insync_replicas() {
                            ec::NOT_ENOUGH_REPLICAS_AFTER_APPEND
                        } else {
                            ec::NONE
                        })
                    } else {
                        None
                    }
                };
                match verdict {
                    Some(code) => {
                        p.error_code = code;
                        p.awaiting = None;
                    }
                    None => all_done = false,
                }
            }
        }
        all_done
    }

    fn on_complete(&self) {
        let mut statuses = self.statuses.lock();
        let mut timed_out = 0;
        let mut errors = 0;
        for (_, partitions) in statuses.iter_mut() {
            for p in partitions.iter_mut() {
                if p.awaiting.take().is_some() {
                    p.error_code = ec::REQUEST_TIMED_OUT;
                    p.error_message = Some(
                        "the high watermark did not reach this batch before timeout_ms".into(),
                    );
                    timed_out += 1;
                } else if p.error_code != ec::NONE {
                    errors += 1;
                }
            }
        }
        let response = build_response(&statuses);
        drop(statuses);
        let why = if timed_out > 0 {
            "expired: REQUEST_TIMED_OUT"
        } else if errors > 0 {
            "error"
        } else {
            "high watermark reached"
        };
        info!(
            target: TRACE_TARGET,
            kind = "DelayedProduce",
            correlation_id = self.meta.correlation_id,
            client = %self.meta.client_id,
            why,
            waited_ms = self.meta.waited_ms(),
            "completed"
        );
        self.respond.send(ResponseKind::Produce(response));
    }

    fn describe(&self) -> String {
        format!(
            "{} waits for {}",
            self.meta.who("DelayedProduce"),
            self.waits_for()
        )
    }
}

impl DelayedProduce {
    /// What the operation still needs, in words.
    fn waits_for(&self) -> String {
        let statuses = self.statuses.lock();
        let mut parts = Vec::new();
        for (_, partitions) in statuses.iter() {
            for p in partitions {
                if let Some(w) = &p.awaiting {
                    let (hw, isr) = {
                        let log = w.handle.lock();
                        (log.high_watermark(), log.isr())
                    };
                    parts.push(format!(
                        "{}: HW >= {} (HW now {hw}, ISR {isr:?})",
                        w.handle.tp, w.required_offset
                    ));
                }
            }
        }
        parts.join("; ")
    }
}
