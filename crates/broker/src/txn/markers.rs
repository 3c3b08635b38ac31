//! A transaction's end: its markers (Kafka's `TransactionMarkerChannelManager` and
//! WriteTxnMarkers, in one process).
//!
//! The decision (PrepareCommit or PrepareAbort) is written to `__transaction_state`
//! first. Then every partition of the transaction gets a COMMIT or ABORT marker from its
//! leader, which waits in that leader's produce purgatory until it is replicated; a
//! marker whose leader moved is written again on the new one. When all are replicated
//! the transaction is complete, and the coordinator of each `__consumer_offsets`
//! partition it wrote offsets to commits or drops them.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use replog::ControlType;
use tracing::{info, warn};

use super::{
    log, routing, EndTxnCallback, TransactionCoordinator, TxnMetadata, TxnState, TRACE_TARGET,
};
use crate::delayed::produce::ProducePartitionStatus;
use crate::delayed::{DelayedProduce, OpMeta, ProducePartitionResult};
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use crate::topics::OFFSETS_TOPIC;

/// How long an EndTxn waits for its markers to be replicated before the answer is
/// REQUEST_TIMED_OUT (the transaction stays in its Prepare state; a retry finds it there).
const MARKER_TIMEOUT_MS: u64 = 30_000;

/// How long a marker whose partition has no leader just now waits before it is tried again.
const MARKER_RETRY_MS: i64 = 100;

impl TransactionCoordinator {
    /// Writes the markers of `ending` and, once the last is replicated, completes the
    /// transaction and tells `reply`.
    pub(super) fn write_markers(
        self: &Arc<Self>,
        ctx: &RequestContext,
        ending: Ending,
        reply: EndTxnCallback,
    ) {
        let Some(rm) = self.rm.upgrade() else {
            return reply(Err(ResponseError::CoordinatorNotAvailable));
        };
        // The decision is written first (Kafka's PrepareCommit / PrepareAbort): once it is
        // replicated, the markers go out. A coordinator that cannot write it answers
        // COORDINATOR_NOT_AVAILABLE and the transaction stays as it is; a retry finds it.
        let me = self.clone();
        let ctx_after = ctx.clone();
        let prepared = ending.prepared.clone();
        log::write(
            &rm,
            ctx,
            &prepared,
            Box::new(move |written| match written {
                Ok(()) => me.markers_after_prepare(&ctx_after, ending, reply),
                Err(e) => reply(Err(e)),
            }),
        );
    }

    /// The markers of `ending`, its Prepare state written.
    pub(super) fn markers_after_prepare(
        self: &Arc<Self>,
        ctx: &RequestContext,
        ending: Ending,
        reply: EndTxnCallback,
    ) {
        let waits = ending
            .partitions
            .iter()
            .map(|tp| MarkerWait {
                tp: tp.clone(),
                written: None,
                done: false,
            })
            .collect();
        let reply_by_ms = self.now_ms().saturating_add(MARKER_TIMEOUT_MS);
        self.await_markers(
            ctx.clone(),
            Arc::new(ending),
            waits,
            Some(reply),
            reply_by_ms,
        );
    }

    /// One round of an ending's markers. Each marker not yet written is appended by its
    /// partition's leader (this broker's, or another's in a cluster); then every written
    /// marker waits in its leader's produce purgatory until that partition's high
    /// watermark passes it (`end-txn` here, `write-txn-markers` on another broker, as
    /// Kafka's WriteTxnMarkers waits). When all have answered, the transaction completes,
    /// or the round starts again for what is missing: a marker whose wait timed out waits
    /// again, one whose leader moved or had none is written again on the new leader
    /// [`MARKER_RETRY_MS`] later (Kafka retries its markers until they land). Past
    /// `reply_by_ms` the EndTxn is answered REQUEST_TIMED_OUT and the rounds go on: the
    /// transaction stays in its Prepare state meanwhile.
    fn await_markers(
        self: &Arc<Self>,
        ctx: RequestContext,
        ending: Arc<Ending>,
        mut waits: Vec<MarkerWait>,
        reply: Option<EndTxnCallback>,
        reply_by_ms: u64,
    ) {
        let Some(rm) = self.rm.upgrade() else {
            if let Some(reply) = reply {
                reply(Err(ResponseError::CoordinatorNotAvailable));
            }
            return;
        };
        let op_ctx = ctx.clone();
        waits.retain_mut(|w| {
            if w.written.is_some() {
                return true;
            }
            let appended = routing::leader_of(&rm, &w.tp).and_then(|leader| {
                let control = ending.control();
                leader
                    .append_txn_marker(&w.tp, ending.producer_id, ending.producer_epoch, 0, control)
                    .map(|a| (leader, a.last_offset + 1))
            });
            match appended {
                Ok(written) => w.written = Some(written),
                // A deleted partition needs no marker, as in Kafka.
                Err(ResponseError::UnknownTopicOrPartition) => return false,
                Err(e) => {
                    warn!(target: TRACE_TARGET, tp = %w.tp, error = ?e, transactional_id = %ending.transactional_id, "transaction marker not written yet; it is retried");
                }
            }
            true
        });
        // The written markers, by the broker that waits for them.
        let mut by_leader: BTreeMap<i32, (Arc<ReplicaManager>, Vec<ProducePartitionStatus>)> =
            BTreeMap::new();
        for w in &mut waits {
            let Some((leader, required)) = &w.written else {
                continue;
            };
            let Some(handle) = leader.partition(&w.tp.topic, w.tp.partition) else {
                // Deleted since the marker was written: nothing to wait for.
                w.done = true;
                continue;
            };
            by_leader
                .entry(leader.config.broker_id)
                .or_insert_with(|| (leader.clone(), Vec::new()))
                .1
                .push(ProducePartitionStatus {
                    tp: w.tp.clone(),
                    awaiting: Some((handle, *required)),
                    result: ProducePartitionResult {
                        error: None,
                        message: None,
                        base_offset: required - 1,
                        log_start_offset: -1,
                    },
                });
        }
        let round = Arc::new(Mutex::new(MarkerRound {
            left: by_leader.len(),
            failed: Vec::new(),
        }));
        let me = Arc::downgrade(self);
        let finish = Arc::new(Mutex::new(Some(
            move |failed: Vec<(TopicPartition, ResponseError)>| {
                let Some(me) = me.upgrade() else { return };
                for w in &mut waits {
                    match failed.iter().find(|(tp, _)| *tp == w.tp) {
                        // Timed out: the marker is there, its replicas are behind.
                        Some((_, ResponseError::RequestTimedOut)) => {}
                        // Its leader moved (the marker may be truncated away): again.
                        Some(_) => w.written = None,
                        None if w.written.is_some() => w.done = true,
                        None => {}
                    }
                }
                waits.retain(|w| !w.done);
                if waits.is_empty() {
                    me.complete(&ctx, &ending);
                    if let Some(reply) = reply {
                        reply(Ok(()));
                    }
                    return;
                }
                let mut reply = reply;
                if me.now_ms() >= reply_by_ms {
                    if let Some(reply) = reply.take() {
                        reply(Err(ResponseError::RequestTimedOut));
                        warn!(target: TRACE_TARGET, transactional_id = %ending.transactional_id, "transaction markers not replicated yet; still waiting");
                    }
                }
                let Some(rm) = me.rm.upgrade() else { return };
                let unwritten = waits.iter().any(|w| w.written.is_none());
                let again = Arc::downgrade(&me);
                let retry = move || {
                    if let Some(me) = again.upgrade() {
                        me.await_markers(ctx, ending, waits, reply, reply_by_ms);
                    }
                };
                if unwritten {
                    rm.timer.schedule(MARKER_RETRY_MS, retry);
                } else {
                    retry();
                }
            },
        )));
        if by_leader.is_empty() {
            round.lock().left = 1;
            return end_round(&round, &finish);
        }
        let own_id = rm.config.broker_id;
        for (id, (leader, statuses)) in by_leader {
            let name = if id == own_id {
                "end-txn"
            } else {
                "write-txn-markers"
            };
            let meta = OpMeta::new(&op_ctx, name, &leader.timer, MARKER_TIMEOUT_MS);
            let (round, finish) = (round.clone(), finish.clone());
            let op = DelayedProduce::new(
                meta,
                statuses,
                Box::new(move |results, _| {
                    round.lock().failed.extend(
                        results
                            .into_iter()
                            .filter_map(|(tp, r)| r.error.map(|e| (tp, e))),
                    );
                    end_round(&round, &finish);
                }),
            );
            let keys = op.keys();
            op.log_created(&keys);
            leader
                .produce_purgatory
                .try_complete_else_watch(op, MARKER_TIMEOUT_MS, keys);
        }
    }

    /// The markers of `ending` are replicated: the transaction is complete, and the
    /// coordinator of each group it committed offsets for commits or drops them.
    fn complete(&self, ctx: &RequestContext, ending: &Ending) {
        let now = self.now_ms();
        {
            let mut txns = self.txns.lock();
            let Some(meta) = txns.get_mut(&ending.transactional_id) else {
                return;
            };
            meta.complete(now);
            if let Some(rm) = self.rm.upgrade() {
                log::write(
                    &rm,
                    ctx,
                    meta,
                    Box::new(|written| {
                        if let Err(e) = written {
                            warn!(target: TRACE_TARGET, ?e, "a transaction's Complete state was not written");
                        }
                    }),
                );
            }
        }
        info!(target: TRACE_TARGET, transactional_id = %ending.transactional_id, commit = ending.commit, partitions = ending.partitions.len(), "transaction complete");
        let (Some(local), Some(rm)) = (self.groups.upgrade(), self.rm.upgrade()) else {
            return;
        };
        // The marker in a `__consumer_offsets` partition decides the offsets that the
        // transaction wrote there; its group coordinator (the partition's leader) hears
        // of it now, as Kafka's WriteTxnMarkers tells it. One that takes the partition
        // over later reads the marker from the log instead.
        for tp in ending
            .partitions
            .iter()
            .filter(|tp| &*tp.topic == OFFSETS_TOPIC)
        {
            match routing::group_coordinator_leading(&rm, local.clone(), tp) {
                Some(groups) => {
                    groups.on_transaction_completed(
                        ending.producer_id,
                        tp.partition,
                        ending.commit,
                    );
                }
                None => {
                    warn!(target: TRACE_TARGET, %tp, "no coordinator leads the partition now; its next leader reads the marker from the log");
                }
            }
        }
    }
}

/// One partition's marker across the rounds of [`TransactionCoordinator::await_markers`].
struct MarkerWait {
    tp: TopicPartition,
    /// The leader that appended it and the offset past it, once written.
    written: Option<(Arc<ReplicaManager>, i64)>,
    /// Replicated, or its partition is gone.
    done: bool,
}

/// One round's waits, one per leader: how many have not answered, and what failed.
struct MarkerRound {
    left: usize,
    failed: Vec<(TopicPartition, ResponseError)>,
}

/// Counts one leader's wait of a round as answered; the last one runs `finish` with
/// every failure of the round.
fn end_round<F: FnOnce(Vec<(TopicPartition, ResponseError)>)>(
    round: &Mutex<MarkerRound>,
    finish: &Mutex<Option<F>>,
) {
    let failed = {
        let mut r = round.lock();
        r.left = r.left.saturating_sub(1);
        if r.left > 0 {
            return;
        }
        std::mem::take(&mut r.failed)
    };
    if let Some(f) = finish.lock().take() {
        f(failed);
    }
}

/// What the markers of an ending transaction need to know.
pub(super) struct Ending {
    /// The state to write first: PrepareCommit or PrepareAbort.
    pub(super) prepared: TxnMetadata,
    pub(super) transactional_id: String,
    pub(super) producer_id: i64,
    pub(super) producer_epoch: i16,
    pub(super) commit: bool,
    pub(super) partitions: Vec<TopicPartition>,
}

impl Ending {
    fn control(&self) -> ControlType {
        if self.commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        }
    }

    pub(super) fn of(meta: &TxnMetadata) -> Ending {
        Ending {
            prepared: meta.clone(),
            transactional_id: meta.transactional_id.clone(),
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            commit: meta.state == TxnState::PrepareCommit,
            partitions: meta.partitions.iter().cloned().collect(),
        }
    }

    /// The ending of a transaction whose epoch EndTxn v5 just bumped, the producer having
    /// written it as `old` (producer id, epoch). Its markers carry the new epoch, or, when
    /// the epoch was spent and the id moved to a new producer id, the old producer id at
    /// the last epoch: a marker must name the producer whose records it decides.
    pub(super) fn bumped_from(meta: &TxnMetadata, old: (i64, i16)) -> Ending {
        let mut ending = Ending::of(meta);
        if meta.producer_id != old.0 {
            ending.producer_id = old.0;
            ending.producer_epoch = i16::MAX;
        }
        ending
    }
}
