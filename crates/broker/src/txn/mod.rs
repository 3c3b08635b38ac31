//! The transaction coordinator: exactly-once writes across partitions (Kafka's
//! `TransactionCoordinator`).
//!
//! A transactional producer names itself with a `transactional.id`. InitProducerId gives
//! the id a producer id and a new epoch, which fences every older instance of the same
//! id (a "zombie"), and aborts whatever transaction the old instance left open. Then, per
//! transaction:
//!
//! 1. **AddPartitionsToTxn** before the first write to a partition, and **AddOffsetsToTxn**
//!    before committing a consumer group's offsets in the transaction. The producer's
//!    batches carry the transactional bit; the partitions hold them back from
//!    `read_committed` readers (the last stable offset, [`replog::transactions`]).
//!    AddOffsetsToTxn adds the group's `__consumer_offsets` partition to the transaction.
//! 2. **TxnOffsetCommit**, at the group's coordinator: the offsets are appended to that
//!    partition as the transaction's own batch, and the group holds them as pending
//!    (OffsetFetch does not show them; with `require_stable` it answers
//!    UNSTABLE_OFFSET_COMMIT).
//! 3. **EndTxn**: commit or abort. The coordinator writes a COMMIT or ABORT marker into
//!    every partition of the transaction ([`ReplicaManager::append_txn_marker`]) and
//!    answers once every marker is replicated (a `DelayedProduce` of no records, in the
//!    produce purgatory, named `end-txn`). The marker in `__consumer_offsets` decides the
//!    group's pending offsets: committed, or dropped.
//!
//! A transaction open longer than its `transaction.timeout.ms` is aborted by the
//! coordinator itself, with the epoch bumped so that the producer that left it is fenced;
//! the check runs every `transaction.abort.timed.out.transaction.cleanup.interval.ms` on
//! the broker's timer, so a manual clock drives it.
//!
//! Every change of an id's state is written first to `__transaction_state` ([`log`]) with
//! acks=-1, and the request that made it is answered once the record is replicated.
//!
//! In a cluster the coordinator of an id is the leader of its `__transaction_state`
//! partition, each marker is written by its partition's leader, and a group's offsets by
//! the group's coordinator (`routing.rs`); a coordinator that takes over a partition loads
//! its ids from the log (`load.rs`).
//! Both logs are the truth: a group coordinator that takes over a `__consumer_offsets`
//! partition reads a transaction's offsets and its marker back from it.

mod load;
pub mod log;
pub mod metadata;
mod routing;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use replog::ControlType;
use tracing::{info, warn};

use crate::coordinator::GroupCoordinator;
use crate::delayed::produce::ProducePartitionStatus;
use crate::delayed::{DelayedProduce, OpMeta, ProducePartitionResult};
use crate::partition::TopicPartition;
use crate::replica_manager::ReplicaManager;
use crate::request::RequestContext;
use crate::topics::OFFSETS_TOPIC;
pub use metadata::{TxnMetadata, TxnState};

/// Tracing target of the coordinator's decisions.
pub const TRACE_TARGET: &str = "purgatory::txn";

/// Where an InitProducerId's answer goes: the producer id and epoch.
pub type InitCallback = Box<dyn FnOnce(Result<(i64, i16), ResponseError>) + Send>;

pub use log::WriteCallback;

/// Where the end of a transaction's markers is told.
pub type EndTxnCallback = Box<dyn FnOnce(Result<(), ResponseError>) + Send>;

/// Where an EndTxn's answer goes: the producer id and epoch the producer goes on with.
pub type EndTxnReply = Box<dyn FnOnce(Result<(i64, i16), ResponseError>) + Send>;

/// How long an EndTxn waits for its markers to be replicated before the answer is
/// REQUEST_TIMED_OUT (the transaction stays in its Prepare state; a retry finds it there).
const MARKER_TIMEOUT_MS: u64 = 30_000;

/// How long a marker whose partition has no leader just now waits before it is tried again.
const MARKER_RETRY_MS: i64 = 100;

/// The transaction coordinator of one broker.
pub struct TransactionCoordinator {
    rm: Weak<ReplicaManager>,
    groups: Weak<GroupCoordinator>,
    txns: Mutex<HashMap<String, TxnMetadata>>,
    /// Producer id → transactional id, so a transactional produce finds its transaction
    /// without a scan. Taken after `txns` when both are held.
    by_producer: Mutex<HashMap<i64, String>>,
    max_timeout_ms: u64,
    max_transactional_ids: usize,
    /// `__transaction_state` partitions this broker has begun to lead and is still
    /// loading (`load.rs`): their ids are answered COORDINATOR_LOAD_IN_PROGRESS.
    loading: Mutex<BTreeSet<i32>>,
}

impl TransactionCoordinator {
    /// The coordinator over `rm` (markers) and `groups` (offsets committed with a
    /// transaction), with its timeout check on `rm`'s timer.
    pub fn new(rm: &Arc<ReplicaManager>, groups: &Arc<GroupCoordinator>) -> Arc<Self> {
        let coordinator = Arc::new(TransactionCoordinator {
            rm: Arc::downgrade(rm),
            groups: Arc::downgrade(groups),
            txns: Mutex::new(HashMap::new()),
            by_producer: Mutex::new(HashMap::new()),
            max_timeout_ms: rm.config.transaction_max_timeout_ms.max(1) as u64,
            max_transactional_ids: rm.config.transaction_coordinator_max_transactional_ids,
            loading: Mutex::new(BTreeSet::new()),
        });
        schedule_expiry(Arc::downgrade(&coordinator));
        coordinator
    }

    /// The broker clock, as the transactions' start times read it.
    pub fn now_ms(&self) -> u64 {
        self.rm.upgrade().map_or(0, |rm| rm.now_ms())
    }

    /// One transactional id's state, if the coordinator knows it.
    pub fn describe(&self, transactional_id: &str) -> Option<TxnMetadata> {
        self.txns.lock().get(transactional_id).cloned()
    }

    /// InitProducerId with a transactional id: the id's producer id and its next epoch.
    /// A transaction the previous instance left open is aborted first (the answer is
    /// CONCURRENT_TRANSACTIONS until its markers are written; the client retries).
    pub fn init_producer_id(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        timeout_ms: i32,
        allocate: impl Fn() -> i64,
        reply: InitCallback,
    ) {
        if let Err(e) = self.check_coordinator(transactional_id) {
            return reply(Err(e));
        }
        match self.init_locked(ctx, transactional_id, timeout_ms, allocate) {
            Ok(meta) => {
                let Some(rm) = self.rm.upgrade() else {
                    return reply(Err(ResponseError::CoordinatorNotAvailable));
                };
                let (producer_id, epoch) = (meta.producer_id, meta.producer_epoch);
                log::write(
                    &rm,
                    ctx,
                    &meta,
                    Box::new(move |written| reply(written.map(|()| (producer_id, epoch)))),
                );
            }
            Err(e) => reply(Err(e)),
        }
    }

    /// InitProducerId's change of state, under the lock: the state to write.
    fn init_locked(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        timeout_ms: i32,
        allocate: impl Fn() -> i64,
    ) -> Result<TxnMetadata, ResponseError> {
        let timeout_ms = match u64::try_from(timeout_ms) {
            Ok(ms) if (1..=self.max_timeout_ms).contains(&ms) => ms,
            _ => return Err(ResponseError::InvalidTransactionTimeout),
        };
        let now = self.now_ms();
        let mut txns = self.txns.lock();
        let is_new = !txns.contains_key(transactional_id);
        if is_new && txns.len() >= self.max_transactional_ids {
            warn!(target: TRACE_TARGET, limit = self.max_transactional_ids, "transactional id refused: transaction.coordinator.max.transactional.ids reached");
            return Err(ResponseError::CoordinatorNotAvailable);
        }
        let meta = txns
            .entry(transactional_id.to_string())
            .or_insert_with(|| TxnMetadata::new(transactional_id, allocate(), timeout_ms, now));
        match meta.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Ongoing => {
                // The old instance's transaction: abort it under a new epoch.
                meta.bump_epoch();
                meta.prepare_end(false, now)?;
                let ending = Ending::of(meta);
                drop(txns);
                info!(target: TRACE_TARGET, transactional_id, "aborting the transaction a previous producer left open");
                self.write_markers(ctx, ending, Box::new(|_| {}));
                return Err(ResponseError::ConcurrentTransactions);
            }
            _ => {}
        }
        meta.timeout_ms = timeout_ms;
        // A new instance of a known id fences the one before it.
        if !is_new && meta.bump_epoch().is_none() {
            self.by_producer.lock().remove(&meta.producer_id);
            meta.producer_id = allocate();
            meta.producer_epoch = 0;
        }
        self.by_producer
            .lock()
            .insert(meta.producer_id, transactional_id.to_string());
        meta.state = TxnState::Empty;
        meta.ended_with = None;
        meta.updated_ms = now;
        info!(target: TRACE_TARGET, transactional_id, producer_id = meta.producer_id, epoch = meta.producer_epoch, "producer initialised");
        Ok(meta.clone())
    }

    /// AddPartitionsToTxn: `partitions` join the open transaction (opening one if none
    /// is). Every partition answers the same error if the request as a whole is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn add_partitions(
        &self,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        reply: WriteCallback,
    ) {
        let now = self.now_ms();
        let changed = self.with_txn(transactional_id, producer_id, producer_epoch, |meta| {
            meta.add(partitions, now)
        });
        self.write_then(ctx, changed, reply);
    }

    /// AddOffsetsToTxn: the transaction will commit offsets of `group_id`, so the
    /// group's `__consumer_offsets` partition joins it (and gets its marker at the end).
    pub fn add_offsets(
        &self,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
        reply: WriteCallback,
    ) {
        let tp = match self.offsets_partition_of(group_id) {
            Ok(tp) => tp,
            Err(e) => return reply(Err(e)),
        };
        let now = self.now_ms();
        let changed = self.with_txn(transactional_id, producer_id, producer_epoch, |meta| {
            meta.add(std::slice::from_ref(&tp), now)
        });
        self.write_then(ctx, changed, reply);
    }

    /// The `__consumer_offsets` partition of `group_id` (the topic is created if it is
    /// not there yet, as FindCoordinator would).
    fn offsets_partition_of(&self, group_id: &str) -> Result<TopicPartition, ResponseError> {
        let groups = self
            .groups
            .upgrade()
            .ok_or(ResponseError::CoordinatorNotAvailable)?;
        groups
            .manager
            .ensure_offsets_topic()
            .map_err(|_| ResponseError::CoordinatorNotAvailable)?;
        Ok(groups.manager.topic_partition_for(group_id))
    }

    /// Writes the state `changed` left (if it succeeded) to `__transaction_state`, then
    /// tells `reply`.
    fn write_then(
        &self,
        ctx: &RequestContext,
        changed: Result<TxnMetadata, ResponseError>,
        reply: WriteCallback,
    ) {
        match (changed, self.rm.upgrade()) {
            (Ok(meta), Some(rm)) => log::write(&rm, ctx, &meta, reply),
            (Ok(_), None) => reply(Err(ResponseError::CoordinatorNotAvailable)),
            (Err(e), _) => reply(Err(e)),
        }
    }

    /// Whether a TxnOffsetCommit of `group_id` may be written for the transaction of
    /// (`producer_id`, `producer_epoch`): it must be open and hold the group's partition
    /// (AddOffsetsToTxn first). INVALID_TXN_STATE otherwise; PRODUCER_FENCED for an old
    /// epoch, INVALID_PRODUCER_ID_MAPPING for another producer id.
    pub fn verify_offsets(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        group_id: &str,
    ) -> Result<(), ResponseError> {
        let tp = self.offsets_partition_of(group_id)?;
        let missing =
            self.verify_partitions(transactional_id, producer_id, producer_epoch, &[tp])?;
        if missing.is_empty() {
            Ok(())
        } else {
            Err(ResponseError::InvalidTxnState)
        }
    }

    /// The partitions of `partitions` that the open transaction of (`producer_id`,
    /// `producer_epoch`) does not hold (all of them when none is open): AddPartitionsToTxn
    /// v4+ with `verify_only`. The errors refuse them all: NOT_COORDINATOR,
    /// INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, ...
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<TopicPartition>, ResponseError> {
        self.check_coordinator(transactional_id)?;
        let txns = self.txns.lock();
        let meta = txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        meta.check_producer(producer_id, producer_epoch)?;
        let open = meta.state == TxnState::Ongoing;
        Ok(partitions
            .iter()
            .filter(|tp| !(open && meta.partitions.contains(tp)))
            .cloned()
            .collect())
    }

    /// Whether a transactional batch of (`producer_id`, `producer_epoch`) may go to
    /// `tp`: its transaction must be open and hold the partition (Kafka's KIP-890
    /// verification). INVALID_TXN_STATE otherwise; INVALID_PRODUCER_EPOCH for an old epoch.
    /// In a cluster the producer's coordinator may be another broker's: the one that
    /// knows the producer id answers.
    pub fn verify(
        self: &Arc<Self>,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError> {
        if let Some(answer) = self.verify_here(producer_id, producer_epoch, tp) {
            return answer;
        }
        self.all_coordinators()
            .iter()
            .filter(|c| !Arc::ptr_eq(c, self))
            .find_map(|c| c.verify_here(producer_id, producer_epoch, tp))
            .unwrap_or(Err(ResponseError::InvalidTxnState))
    }

    /// [`verify`](Self::verify) by this coordinator; `None` if it does not know the
    /// producer id.
    fn verify_here(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Option<Result<(), ResponseError>> {
        let id = self.by_producer.lock().get(&producer_id).cloned()?;
        Some(self.verify_txn(&id, producer_id, producer_epoch, tp))
    }

    fn verify_txn(
        &self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError> {
        let txns = self.txns.lock();
        let meta = txns
            .get(id)
            .filter(|m| m.producer_id == producer_id)
            .ok_or(ResponseError::InvalidTxnState)?;
        if producer_epoch < meta.producer_epoch {
            // A zombie's produce: Kafka 4.4 answers it INVALID_PRODUCER_EPOCH (the
            // transaction APIs answer the same zombie PRODUCER_FENCED).
            return Err(ResponseError::InvalidProducerEpoch);
        }
        if meta.state == TxnState::Ongoing && meta.partitions.contains(tp) {
            Ok(())
        } else {
            Err(ResponseError::InvalidTxnState)
        }
    }

    /// EndTxn: commit or abort the open transaction; `reply` is told, with the producer
    /// id and epoch the producer goes on with, once its markers are replicated (at once
    /// for a retry of an EndTxn already done). With `bump_epoch` (EndTxn v5+, transaction
    /// version 2) every transaction ends with a new epoch, which the markers carry.
    #[allow(clippy::too_many_arguments)]
    pub fn end_txn(
        self: &Arc<Self>,
        ctx: &RequestContext,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        bump_epoch: bool,
        allocate: impl FnOnce() -> i64,
        reply: EndTxnReply,
    ) {
        if let Err(e) = self.check_coordinator(transactional_id) {
            return reply(Err(e));
        }
        let now = self.now_ms();
        let mut txns = self.txns.lock();
        let Some(meta) = txns.get_mut(transactional_id) else {
            drop(txns);
            return reply(Err(ResponseError::InvalidProducerIdMapping));
        };
        let decided = if bump_epoch {
            meta.prepare_end_bumping(producer_id, producer_epoch, commit, now, allocate)
                .map(|old| old.map(|old| Ending::bumped_from(meta, old)))
        } else {
            meta.check_producer(producer_id, producer_epoch)
                .and_then(|()| meta.prepare_end(commit, now))
                .map(|start| start.then(|| Ending::of(meta)))
        };
        let now_producer = (meta.producer_id, meta.producer_epoch);
        if let Ok(Some(ending)) = &decided {
            if ending.producer_id != now_producer.0 {
                // The epoch was spent: the id goes on with a new producer id.
                let mut by_producer = self.by_producer.lock();
                by_producer.remove(&ending.producer_id);
                by_producer.insert(now_producer.0, transactional_id.to_string());
            }
        }
        drop(txns);
        match decided {
            Ok(Some(ending)) => self.write_markers(
                ctx,
                ending,
                Box::new(move |done| reply(done.map(|()| now_producer))),
            ),
            Ok(None) => reply(Ok(now_producer)),
            Err(e) => reply(Err(e)),
        }
    }

    /// Every transactional id, for the state API and the live view.
    pub fn snapshot(&self) -> Vec<TxnMetadata> {
        let mut all: Vec<TxnMetadata> = self.txns.lock().values().cloned().collect();
        all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        all
    }

    /// Runs `change` on the transaction of `transactional_id` after checking the
    /// producer's id and epoch.
    fn with_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        change: impl FnOnce(&mut TxnMetadata) -> Result<(), ResponseError>,
    ) -> Result<TxnMetadata, ResponseError> {
        self.check_coordinator(transactional_id)?;
        let mut txns = self.txns.lock();
        let meta = txns
            .get_mut(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        meta.check_producer(producer_id, producer_epoch)?;
        change(meta)?;
        Ok(meta.clone())
    }

    /// Writes the markers of `ending` and, once the last is replicated, completes the
    /// transaction (committing its group offsets if it commits) and tells `reply`.
    fn write_markers(
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
    fn markers_after_prepare(
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

    /// Aborts every transaction past its timeout, with its epoch bumped.
    fn abort_expired(self: &Arc<Self>) {
        let now = self.now_ms();
        let mut expired = Vec::new();
        {
            let mut txns = self.txns.lock();
            for meta in txns.values_mut().filter(|m| m.expired(now)) {
                if meta.bump_epoch().is_none() {
                    continue;
                }
                meta.ended_with = None;
                if meta.prepare_end(false, now).is_ok() {
                    info!(target: TRACE_TARGET, transactional_id = %meta.transactional_id, timeout_ms = meta.timeout_ms, epoch = meta.producer_epoch, "aborting a transaction past its transaction.timeout.ms");
                    expired.push(Ending::of(meta));
                }
            }
        }
        let ctx = RequestContext::internal("transaction-coordinator");
        for ending in expired {
            self.write_markers(&ctx, ending, Box::new(|_| {}));
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
struct Ending {
    /// The state to write first: PrepareCommit or PrepareAbort.
    prepared: TxnMetadata,
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    partitions: Vec<TopicPartition>,
}

impl Ending {
    fn control(&self) -> ControlType {
        if self.commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        }
    }

    fn of(meta: &TxnMetadata) -> Ending {
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
    fn bumped_from(meta: &TxnMetadata, old: (i64, i16)) -> Ending {
        let mut ending = Ending::of(meta);
        if meta.producer_id != old.0 {
            ending.producer_id = old.0;
            ending.producer_epoch = i16::MAX;
        }
        ending
    }
}

/// Runs the timeout check every `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
fn schedule_expiry(coordinator: Weak<TransactionCoordinator>) {
    let Some(strong) = coordinator.upgrade() else {
        return;
    };
    let Some(rm) = strong.rm.upgrade() else {
        return;
    };
    let interval = i64::from(
        rm.config
            .transaction_abort_timed_out_transaction_cleanup_interval_ms
            .max(1),
    );
    let timer = rm.timer.clone();
    drop((strong, rm));
    timer.schedule(interval, move || {
        if let Some(strong) = coordinator.upgrade() {
            strong.abort_expired();
            drop(strong);
            schedule_expiry(coordinator);
        }
    });
}
