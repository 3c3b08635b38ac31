//! Delayed operations and the purgatory that holds them: Kafka's `DelayedOperation` and
//! `DelayedOperationPurgatory`.
//!
//! A broker cannot always answer a request at once. An `acks=all` produce waits until the
//! followers have replicated it (the high watermark passes it); a fetch waits until enough
//! bytes have arrived. Kafka parks such a request as a *delayed operation* in a
//! *purgatory* until either its condition is met or its timeout fires, whichever is first.
//!
//! # Lifecycle of an operation
//!
//! ```text
//!  try_complete_else_watch(op, delay, keys)
//!    |-- op.try_complete()? -- yes --> completed (on_complete, on this thread)
//!    |-- watch every key (the op joins each key's watcher list)
//!    |-- op.try_complete()? -- yes --> completed          (closes the race with a
//!    |                                                      concurrent check_and_complete)
//!    `-- schedule the timeout in the shared Timer
//!
//!  later, exactly one of:
//!    check_and_complete_with(key, cause):
//!                         op.try_complete() is true --> on_complete(Satisfied(cause))
//!    handle.force_complete()                            --> on_complete(Forced)
//!    the timeout fires                                  --> on_complete(Expired)
//!    cancel_for_key(key) / shutdown()                   --> cancelled (no callback)
//! ```
//!
//! The path that wins the race is the one that says how the operation ended: the
//! [`Completion`] handed to `on_complete` is never inferred afterwards from the clock or
//! from what the operation still waits for. A check can also say why it was made (the
//! operation's [`DelayedOperation::Cause`]: for the broker, the follower fetch or append
//! that moved the partition), and the operations it completes are handed that cause.
//!
//! Completion is decided by one atomic compare-and-swap on the operation's state, so
//! `on_complete` runs exactly once even when a watcher and the timeout race; completing an
//! operation also cancels its timeout. Callbacks (`try_complete`, `on_complete`,
//! `describe`) are never called while a purgatory or timer lock is held.
//!
//! # Watcher lists and purging
//!
//! As in Kafka, a completed operation is *not* removed from its watcher lists at once (it
//! may watch several keys, and finding it in each would cost a lock per key). It is
//! dropped from a key's list the next time that key is checked, and all lists are purged
//! when the completed-but-still-listed entries (Kafka: `estimatedTotalOperations -
//! NumDelayedOperations`) exceed `purge_interval`. A key whose list becomes empty is
//! removed. `watched()` (Kafka's `PurgatorySize`) counts list entries, completed ones
//! included, which is why it can exceed the number of pending operations.
//!
//! One deliberate difference: Kafka purges every time that estimate passes
//! `purge_interval` (default 1000), and each purge walks every watcher list, so under load
//! (hundreds of thousands of watched entries, a million completions a second) it rescans
//! everything every thousand completions. Here a purge also waits until the garbage is at
//! least half of all watched entries, so each purge removes at least as much as it keeps
//! and costs amortised O(1) per completion. Small purgatories behave exactly like Kafka's;
//! large ones hold at most about twice their live entries plus `purge_interval`. The
//! condition is looked at on every 16th completion, and a purge runs on the thread whose
//! completion tipped it, one chunk of 4096 entries per lock hold, so a request watching the
//! same key never waits for a whole list to be scanned.
//!
//! Watcher lists live in a sharded hash map (one mutex per shard, FxHash) so that requests
//! on different keys rarely contend. The counters sit on separate cache lines: requests
//! add to them on one core while completions subtract on another.
//!
//! # Costs
//!
//! `try_complete_else_watch`: one allocation (the operation's `Arc`, which is also its
//! timer task), two `try_complete` calls, one shard lock per key, one timer insert.
//! `check_and_complete(key)`: O(watchers of key). Completion: one compare-and-swap, one
//! timer cancel. Purging: amortised O(1) per completed operation.
//!
//! # Files
//!
//! This file is the purgatory's public face (Kafka's `DelayedOperationPurgatory`):
//! `try_complete_else_watch`, `check_and_complete`, `cancel_for_key`, the snapshot.
//! `operation.rs` is one operation and the paths that finish it (Kafka's
//! `DelayedOperation`); `watchers.rs` the watcher lists, counters and purge (Kafka's
//! `Watchers`).

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::hash::FxBuildHasher;
use crate::snapshot::{KeySnapshot, PendingSnapshot, PurgatorySnapshot};
use crate::timer::{Timer, TimerHandle};

mod operation;
mod watchers;

pub use operation::OperationHandle;
use operation::{OpCell, NO_TIMEOUT, PENDING};
use watchers::{retain_pending, Core, Padded, SHARDS};

/// A request that waits in a [`Purgatory`] until its condition is met or it times out.
///
/// Kafka's `DelayedOperation`, minus the bookkeeping (completion flag, timer entry, lock),
/// which the purgatory keeps for it. The callbacks are called without any purgatory or
/// timer lock held, so they may take the caller's own locks, schedule or cancel timers, or
/// call back into the purgatory.
pub trait DelayedOperation: Send + Sync + 'static {
    /// Why a key was checked, as the checker tells it
    /// ([`Purgatory::check_and_complete_with`]) and a completed operation is told it
    /// ([`Completion::Satisfied`]). `()` where nobody needs to know.
    type Cause: Clone + Default + Send + Sync + 'static;

    /// Is the completion condition met now? Return `true` and the purgatory completes the
    /// operation (exactly once: `on_complete` follows unless another path won the race).
    ///
    /// May be called many times, concurrently from several threads, and even after
    /// another thread has completed the operation; it should only look, not act.
    fn try_complete(&self) -> bool;

    /// Runs exactly once per completed operation, told which path completed it: a
    /// `try_complete` that returned `true` ([`Completion::Satisfied`], with the check's
    /// cause), the timeout ([`Completion::Expired`]), or
    /// [`OperationHandle::force_complete`] ([`Completion::Forced`]). Typically sends the
    /// response.
    fn on_complete(&self, how: Completion<Self::Cause>);

    /// What the operation waits for, shown in [`Purgatory::snapshot`].
    fn describe(&self) -> String {
        String::new()
    }
}

/// How a delayed operation ended: said by the path that ended it, to `on_complete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion<C = ()> {
    /// Its condition held: `try_complete` returned `true` when one of its keys was checked,
    /// with that check's cause; or when it was added (the cause's default).
    Satisfied(C),
    /// Its timeout fired in the timer first (Kafka's `onExpiration` cases).
    Expired,
    /// Someone completed it from outside, whatever its condition (Kafka's `forceComplete`).
    Forced,
}

/// Tuning for a [`Purgatory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PurgatoryConfig {
    /// Purge the watcher lists once more than this many completed operations' entries are
    /// still in them (and they are at least half of all entries; see the module docs).
    /// Default 1000, Kafka's `purgeInterval`.
    pub purge_interval: usize,
}

impl Default for PurgatoryConfig {
    fn default() -> Self {
        PurgatoryConfig {
            purge_interval: 1000,
        }
    }
}

/// Holds delayed operations until they complete or time out (Kafka's
/// `DelayedOperationPurgatory`). `Send + Sync`; share it behind an `Arc`.
///
/// `K` is the watch key (for the broker, a topic-partition); `Op` the operation type.
/// Timeouts go into the [`Timer`] given at construction, which may be shared with other
/// purgatories.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use timewheel::{Completion, DelayedOperation, Purgatory, PurgatoryConfig, Timer, TimerConfig};
///
/// struct WaitForFlag(AtomicBool);
/// impl DelayedOperation for WaitForFlag {
///     fn try_complete(&self) -> bool { self.0.load(Ordering::SeqCst) }
///     type Cause = ();
///     fn on_complete(&self, _how: Completion) {}
/// }
///
/// let timer = Timer::manual(TimerConfig::default());
/// let purgatory = Purgatory::new("demo", timer.clone(), PurgatoryConfig::default());
/// let op = purgatory.try_complete_else_watch(WaitForFlag(AtomicBool::new(false)), 100, vec!["p0"]);
/// assert_eq!(purgatory.check_and_complete(&"p0"), 0);
/// op.operation().0.store(true, Ordering::SeqCst);
/// assert_eq!(purgatory.check_and_complete(&"p0"), 1);
/// assert!(op.is_completed());
/// ```
pub struct Purgatory<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    core: Arc<Core<K, Op>>,
}

impl<K, Op> Purgatory<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    /// An empty purgatory named `name` whose timeouts go into `timer`.
    pub fn new(name: &str, timer: Timer, config: PurgatoryConfig) -> Self {
        Purgatory {
            core: Arc::new(Core {
                name: name.to_string(),
                timer,
                purge_interval: config.purge_interval,
                hasher: FxBuildHasher::default(),
                shards: (0..SHARDS)
                    .map(|_| Padded(Mutex::new(HashMap::default())))
                    .collect(),
                watched: Padded::default(),
                garbage: Padded::default(),
                delayed: Padded::default(),
                expired: Padded::default(),
                completed: Padded::default(),
                purging: AtomicBool::new(false),
                purge_buffer: Mutex::new(Vec::new()),
                shut_down: AtomicBool::new(false),
            }),
        }
    }

    /// The purgatory's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The timer its timeouts go into.
    pub fn timer(&self) -> &Timer {
        &self.core.timer
    }

    /// Kafka's `tryCompleteElseWatch`: complete `op` now if it can, else watch it under
    /// every key and time it out after `delay_ms`.
    ///
    /// `try_complete` is called once before watching and once after (a
    /// `check_and_complete` on another thread may have run in between, before the
    /// operation was in the lists). If either call returns `true` the operation completes
    /// here, on the calling thread, and no timeout is scheduled. The deadline is
    /// [`Timer::deadline_after`]`(delay_ms)`; a zero delay times out on the next advance.
    ///
    /// After [`shutdown`](Purgatory::shutdown) the operation is tried once and, if it cannot
    /// complete, cancelled at once.
    ///
    /// # Panics
    /// If `keys` is empty: an operation must watch at least one key (Kafka asserts the
    /// same), otherwise nothing but its timeout could ever complete it and `shutdown` could
    /// not find it.
    pub fn try_complete_else_watch(
        &self,
        op: Op,
        delay_ms: u64,
        keys: Vec<K>,
    ) -> OperationHandle<Op> {
        assert!(
            !keys.is_empty(),
            "a delayed operation must watch at least one key"
        );
        let core = &self.core;
        let delay = i64::try_from(delay_ms).unwrap_or(i64::MAX);
        let cell = Arc::new(OpCell {
            op,
            state: AtomicU8::new(PENDING),
            listed: AtomicBool::new(false),
            deadline_ms: core.timer.deadline_after(delay),
            timeout: AtomicU64::new(NO_TIMEOUT),
            keys,
            core: core.clone(),
        });
        let handle = OperationHandle { cell: cell.clone() };

        if cell.op.try_complete() && cell.complete(Completion::Satisfied(Op::Cause::default())) {
            return handle;
        }
        if !core.watch(&cell) {
            return handle; // shut down: cancelled
        }
        if cell.op.try_complete() && cell.complete(Completion::Satisfied(Op::Cause::default())) {
            return handle;
        }
        if !cell.is_pending() {
            return handle; // completed by a concurrent check_and_complete
        }

        core.delayed.fetch_add(1, Ordering::AcqRel);
        let timeout = core.timer.schedule_arc(cell.deadline_ms, cell.clone());
        // Publish the handle, then look at the state (both sequentially consistent, as are
        // the completing side's state change and swap): either a completer that ran
        // meanwhile finds the handle, or we see its completion and cancel here. Whoever
        // swaps the handle out cancels it.
        cell.timeout.store(timeout.key_bits(), Ordering::SeqCst);
        if cell.state.load(Ordering::SeqCst) != PENDING {
            cell.cancel_timeout();
        }
        handle
    }

    /// Kafka's `checkAndComplete`: something happened on `key` (e.g. the high watermark
    /// moved), so try every operation watching it. Returns how many this call completed.
    /// The operations it completes are told the default cause; see
    /// [`check_and_complete_with`](Self::check_and_complete_with).
    pub fn check_and_complete(&self, key: &K) -> usize {
        self.check_and_complete_with(key, Op::Cause::default())
    }

    /// [`check_and_complete`](Self::check_and_complete), saying why: each operation it
    /// completes is handed `cause` ([`Completion::Satisfied`]).
    ///
    /// Completed operations found in the key's list are dropped from it, and a list left
    /// empty removes the key. `try_complete` and `on_complete` run on the calling thread,
    /// outside the purgatory's locks.
    pub fn check_and_complete_with(&self, key: &K, cause: Op::Cause) -> usize {
        let core = &self.core;
        let shard = core.shard(key);
        let candidates: Vec<Arc<OpCell<K, Op>>> = {
            let mut map = shard.lock();
            let Some(list) = map.get_mut(key) else {
                return 0;
            };
            let mut dropped = Vec::new();
            retain_pending(list, &mut dropped);
            core.removed_garbage(dropped.len());
            let candidates = list.clone();
            if list.is_empty() {
                map.remove(key);
            }
            drop(map);
            drop(dropped);
            candidates
        };
        let mut completed = 0;
        for cell in &candidates {
            if cell.is_pending()
                && cell.op.try_complete()
                && cell.complete(Completion::Satisfied(cause.clone()))
            {
                completed += 1;
            }
        }
        if completed > 0 {
            let mut dropped = Vec::new();
            let mut map = shard.lock();
            if let Some(list) = map.get_mut(key) {
                retain_pending(list, &mut dropped);
                core.removed_garbage(dropped.len());
                if list.is_empty() {
                    map.remove(key);
                }
            }
            drop(map);
        }
        completed
    }

    /// Kafka's `cancelForKey`: drop `key`'s watcher list and cancel every pending operation
    /// in it, returning those operations. No callback runs; their timeouts are cancelled;
    /// they never complete (an operation that also watches other keys stays in those lists
    /// as garbage until purged). Operations watching only other keys are untouched. An
    /// unknown key returns an empty list.
    pub fn cancel_for_key(&self, key: &K) -> Vec<OperationHandle<Op>> {
        let core = &self.core;
        let list = core.shard(key).lock().remove(key).unwrap_or_default();
        let removed = list.len();
        let cancelled = list
            .into_iter()
            .filter(|cell| cell.cancel())
            .map(|cell| OperationHandle { cell })
            .collect();
        // Every entry of the removed list belonged to a finished operation by now.
        core.removed_garbage(removed);
        cancelled
    }

    /// Entries in all watcher lists, Kafka's `PurgatorySize`. An operation watching three
    /// keys counts three times; completed operations count until purged.
    pub fn watched(&self) -> usize {
        self.core.watched.load(Ordering::Acquire)
    }

    /// Operations whose timeout is pending in the timer, Kafka's `NumDelayedOperations`.
    /// A timeout counts until it is cancelled or its task has run (a timeout the driver has
    /// already taken out of the wheel but not yet run still counts, even if its operation
    /// was completed meanwhile).
    pub fn delayed(&self) -> usize {
        self.core.delayed.load(Ordering::Acquire)
    }

    /// Operations completed by their timeout, since creation. Counted when the operation
    /// completes, before its callbacks run.
    pub fn expired(&self) -> u64 {
        self.core.expired.load(Ordering::Acquire)
    }

    /// Operations completed by any path, since creation. Counted when the operation
    /// completes, before `on_complete` runs (so a callback that signals another thread
    /// never gets there before the count).
    pub fn completed(&self) -> u64 {
        self.core.completed.load(Ordering::Acquire)
    }

    /// A read-only picture: counters, every key with its watcher count, and the first
    /// `max_pending` pending operations by deadline with their keys and descriptions.
    ///
    /// Walks every watcher list (O(watched)); `describe` is called outside the locks.
    pub fn snapshot(&self, max_pending: usize) -> PurgatorySnapshot {
        let core = &self.core;
        let mut keys = Vec::new();
        let mut seen = HashSet::new();
        let mut pending: Vec<Arc<OpCell<K, Op>>> = Vec::new();
        for shard in &core.shards {
            let map = shard.lock();
            for (key, list) in map.iter() {
                keys.push(KeySnapshot {
                    key: key.to_string(),
                    watchers: list.len(),
                });
                for cell in list {
                    if cell.is_pending() && seen.insert(Arc::as_ptr(cell)) {
                        pending.push(cell.clone());
                    }
                }
            }
        }
        keys.sort_by(|a, b| a.key.cmp(&b.key));
        let pending_total = pending.len();
        if pending.len() > max_pending {
            // Only the first `max_pending` by deadline are shown: no need to sort the rest.
            pending.select_nth_unstable_by_key(max_pending, |cell| cell.deadline_ms);
            pending.truncate(max_pending);
        }
        pending.sort_by_key(|cell| cell.deadline_ms);
        // Where each shown timeout sits in the wheel, under one timer lock.
        let handles: Vec<Option<TimerHandle>> = pending
            .iter()
            .map(|cell| match cell.timeout.load(Ordering::SeqCst) {
                NO_TIMEOUT => None,
                bits => Some(core.timer.handle_from_bits(bits)),
            })
            .collect();
        let scheduled: Vec<TimerHandle> = handles.iter().flatten().copied().collect();
        let mut positions = core.timer.positions(&scheduled).into_iter();
        let pending = pending
            .iter()
            .zip(&handles)
            .map(|(cell, handle)| PendingSnapshot {
                keys: cell.keys.iter().map(|k| k.to_string()).collect(),
                deadline_ms: cell.deadline_ms,
                description: cell.op.describe(),
                bucket: handle.and_then(|_| positions.next().flatten()),
            })
            .collect();
        PurgatorySnapshot {
            name: core.name.clone(),
            watched: self.watched(),
            delayed: self.delayed(),
            expired: self.expired(),
            completed: self.completed(),
            keys,
            pending,
            pending_total,
        }
    }

    /// Shut the purgatory down: every pending operation is **cancelled** (its timeout is
    /// removed from the timer, it leaves every watcher list, and no callback runs: no
    /// `on_complete`), so `watched()` and `delayed()` drop to 0 and the
    /// handles report neither completed nor able to complete. Later
    /// `try_complete_else_watch` calls try the operation once and cancel it if it cannot
    /// complete. The shared [`Timer`] keeps running for its other users.
    ///
    /// Idempotent; also done when the purgatory is dropped.
    pub fn shutdown(&self) {
        let core = &self.core;
        core.shut_down.store(true, Ordering::Release);
        for shard in &core.shards {
            let map = std::mem::take(&mut *shard.lock());
            for (_, list) in map {
                let removed = list.len();
                for cell in list {
                    cell.cancel();
                }
                core.removed_garbage(removed);
            }
        }
    }
}

impl<K, Op> Drop for Purgatory<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    /// Cancels everything still pending (see [`Purgatory::shutdown`]), which also breaks
    /// the reference cycle between the purgatory and its operations.
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl<K, Op> std::fmt::Debug for Purgatory<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Purgatory")
            .field("name", &self.core.name)
            .field("watched", &self.watched())
            .field("delayed", &self.delayed())
            .field("expired", &self.expired())
            .finish()
    }
}
