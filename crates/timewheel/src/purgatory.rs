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
//!    check_and_complete(key): op.try_complete() is true --> completed (on_complete)
//!    handle.force_complete()                            --> completed (on_complete)
//!    the timeout fires                                  --> completed (on_complete, then
//!                                                                      on_expiration)
//!    cancel_for_key(key) / shutdown()                   --> cancelled (no callback)
//! ```
//!
//! Completion is decided by one atomic compare-and-swap on the operation's state, so
//! `on_complete` runs exactly once even when a watcher and the timeout race; completing an
//! operation also cancels its timeout. Callbacks (`try_complete`, `on_complete`,
//! `on_expiration`, `describe`) are never called while a purgatory or timer lock is held.
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

use std::collections::{HashMap, HashSet};
use std::fmt::Display;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::hash::FxBuildHasher;
use crate::snapshot::{KeySnapshot, PendingSnapshot, PurgatorySnapshot};
use crate::timer::{Timer, TimerHandle, TimerTask};

/// A request that waits in a [`Purgatory`] until its condition is met or it times out.
///
/// Kafka's `DelayedOperation`, minus the bookkeeping (completion flag, timer entry, lock),
/// which the purgatory keeps for it. The callbacks are called without any purgatory or
/// timer lock held, so they may take the caller's own locks, schedule or cancel timers, or
/// call back into the purgatory.
pub trait DelayedOperation: Send + Sync + 'static {
    /// Is the completion condition met now? Return `true` and the purgatory completes the
    /// operation (exactly once: `on_complete` follows unless another path won the race).
    ///
    /// May be called many times, concurrently from several threads, and even after
    /// another thread has completed the operation; it should only look, not act.
    fn try_complete(&self) -> bool;

    /// Runs exactly once per completed operation, whichever path completed it: a watcher
    /// (`try_complete` returned `true`), the timeout, or
    /// [`OperationHandle::force_complete`]. Typically sends the response.
    fn on_complete(&self);

    /// Runs only when the timeout completed the operation, right after `on_complete`.
    fn on_expiration(&self) {}

    /// What the operation waits for, shown in [`Purgatory::snapshot`].
    fn describe(&self) -> String {
        String::new()
    }
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

const PENDING: u8 = 0;
const COMPLETED: u8 = 1;
const CANCELLED: u8 = 2;

/// Number of watcher-map shards (a power of two).
const SHARDS: usize = 16;

type WatcherMap<K, Op> = HashMap<K, Vec<Arc<OpCell<K, Op>>>, FxBuildHasher>;

/// How many watcher-list entries a purge examines per lock acquisition, so that a purge of
/// a huge list never holds up `try_complete_else_watch` on the same key for long.
const PURGE_CHUNK: usize = 4096;

/// The purge condition is looked at on every this-many-th completion (it reads counters
/// that other threads keep changing, which costs a cache miss or two). A power of two.
const PURGE_CHECK_EVERY: u64 = 16;

/// `timeout` slot value meaning "no timeout scheduled (or already taken)".
const NO_TIMEOUT: u64 = u64::MAX;

/// A value alone on its cache line. The purgatory's counters are updated by different
/// threads (requests add, completions and the timer driver subtract); keeping each on its
/// own line stops one counter's traffic from slowing the others down.
#[repr(align(64))]
#[derive(Default)]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// An operation plus the purgatory's bookkeeping for it; the one allocation per operation.
/// The watcher lists, the timer's wheel entry and every [`OperationHandle`] share it.
struct OpCell<K, Op> {
    op: Op,
    /// `PENDING` until exactly one path moves it to `COMPLETED` or `CANCELLED`.
    state: AtomicU8,
    /// Set before the operation joins its watcher lists: from then on, finishing it turns
    /// its list entries into garbage.
    listed: AtomicBool,
    deadline_ms: u64,
    /// The timeout's timer handle ([`TimerHandle::key_bits`]) once it is scheduled, else
    /// `NO_TIMEOUT`; swapped out by whoever cancels it.
    timeout: AtomicU64,
    keys: Vec<K>,
    core: Arc<Core<K, Op>>,
}

/// The shared insides of a purgatory.
struct Core<K, Op> {
    name: String,
    timer: Timer,
    purge_interval: usize,
    hasher: FxBuildHasher,
    shards: Vec<Padded<Mutex<WatcherMap<K, Op>>>>,
    /// Entries in all watcher lists (Kafka's PurgatorySize).
    watched: Padded<AtomicUsize>,
    /// Watcher-list entries of operations that are no longer pending: what a purge would
    /// remove. Kafka estimates this as `estimatedTotalOperations - NumDelayedOperations`;
    /// here it is counted (it can dip below zero for a moment while a completion and a
    /// removal race).
    garbage: Padded<AtomicIsize>,
    /// Operations whose timeout sits in the timer (Kafka's NumDelayedOperations).
    delayed: Padded<AtomicUsize>,
    expired: Padded<AtomicU64>,
    completed: Padded<AtomicU64>,
    purging: AtomicBool,
    shut_down: AtomicBool,
}

/// A shared handle to an operation in a purgatory, returned by
/// [`Purgatory::try_complete_else_watch`] and [`Purgatory::cancel_for_key`].
///
/// Cloning is cheap (an `Arc`). Holding a handle keeps the operation alive, nothing else.
pub struct OperationHandle<Op> {
    cell: Arc<dyn CellView<Op>>,
}

impl<Op> Clone for OperationHandle<Op> {
    fn clone(&self) -> Self {
        OperationHandle {
            cell: self.cell.clone(),
        }
    }
}

/// What a handle can see of an `OpCell` without knowing the key type.
trait CellView<Op>: Send + Sync {
    fn op(&self) -> &Op;
    fn state(&self) -> u8;
    fn deadline_ms(&self) -> u64;
    fn force_complete(&self) -> bool;
}

impl<Op> OperationHandle<Op> {
    /// The operation itself.
    pub fn operation(&self) -> &Op {
        self.cell.op()
    }

    /// True once the operation has completed (by any path). A cancelled operation never
    /// completes.
    pub fn is_completed(&self) -> bool {
        self.cell.state() == COMPLETED
    }

    /// True if the operation was cancelled by [`Purgatory::cancel_for_key`] or
    /// [`Purgatory::shutdown`].
    pub fn is_cancelled(&self) -> bool {
        self.cell.state() == CANCELLED
    }

    /// Complete the operation now, whatever its condition (Kafka's `forceComplete`): cancel
    /// its timeout and run `on_complete` on this thread. Returns `true` iff this call
    /// completed it (`false` if it had already completed or been cancelled).
    ///
    /// The operation stays in its watcher lists until they are next checked or purged.
    pub fn force_complete(&self) -> bool {
        self.cell.force_complete()
    }

    /// When the operation times out, on the timer's clock.
    pub fn deadline_ms(&self) -> u64 {
        self.cell.deadline_ms()
    }
}

impl<Op: std::fmt::Debug> std::fmt::Debug for OperationHandle<Op> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationHandle")
            .field("operation", self.operation())
            .field("completed", &self.is_completed())
            .field("cancelled", &self.is_cancelled())
            .field("deadline_ms", &self.deadline_ms())
            .finish()
    }
}

impl<K, Op> OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn is_pending(&self) -> bool {
        self.state.load(Ordering::Acquire) == PENDING
    }

    /// The one place where an operation leaves `PENDING`. True iff this call moved it.
    fn finish(&self, to: u8) -> bool {
        let won = self
            .state
            .compare_exchange(PENDING, to, Ordering::SeqCst, Ordering::Acquire)
            .is_ok();
        if won && self.listed.load(Ordering::Acquire) {
            // Its watcher-list entries are garbage from now on.
            self.core
                .garbage
                .fetch_add(self.keys.len() as isize, Ordering::AcqRel);
        }
        won
    }

    /// Cancel the timeout if it is scheduled and still pending.
    fn cancel_timeout(&self) {
        let bits = self.timeout.swap(NO_TIMEOUT, Ordering::SeqCst);
        if bits != NO_TIMEOUT
            && self
                .core
                .timer
                .cancel(self.core.timer.handle_from_bits(bits))
        {
            self.core.delayed.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Kafka's `forceComplete`: complete now if still pending.
    fn complete(&self) -> bool {
        if !self.finish(COMPLETED) {
            return false;
        }
        self.cancel_timeout();
        let check_purge = self.core.count_completion();
        self.op.on_complete();
        if check_purge {
            self.core.maybe_purge();
        }
        true
    }

    /// Cancel without any callback.
    fn cancel(&self) -> bool {
        if !self.finish(CANCELLED) {
            return false;
        }
        self.cancel_timeout();
        true
    }
}

impl<K, Op> CellView<Op> for OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn op(&self) -> &Op {
        &self.op
    }

    fn state(&self) -> u8 {
        self.state.load(Ordering::Acquire)
    }

    fn deadline_ms(&self) -> u64 {
        self.deadline_ms
    }

    fn force_complete(&self) -> bool {
        self.complete()
    }
}

/// The timeout path: the timer runs this when the operation's deadline comes.
impl<K, Op> TimerTask for OpCell<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn run(self: Arc<Self>) {
        self.core.delayed.fetch_sub(1, Ordering::AcqRel);
        if self.finish(COMPLETED) {
            self.core.expired.fetch_add(1, Ordering::AcqRel);
            let check_purge = self.core.count_completion();
            self.op.on_complete();
            self.op.on_expiration();
            if check_purge {
                self.core.maybe_purge();
            }
        }
    }
}

impl<K, Op> Core<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    fn shard(&self, key: &K) -> &Mutex<WatcherMap<K, Op>> {
        let hash = self.hasher.hash_one(key) as usize;
        &self.shards[hash & (SHARDS - 1)].0
    }

    /// Count a completion; true every `PURGE_CHECK_EVERY`-th time, when the caller should
    /// call `maybe_purge` (after the operation's callbacks, so they are not delayed).
    fn count_completion(&self) -> bool {
        let before = self.completed.fetch_add(1, Ordering::AcqRel);
        before & (PURGE_CHECK_EVERY - 1) == 0
    }

    /// Add the operation to every key's watcher list. If the purgatory has been shut down
    /// (checked under each shard lock, so a concurrent shutdown cannot miss it) this stops,
    /// cancels the operation and returns false.
    fn watch(&self, cell: &Arc<OpCell<K, Op>>) -> bool {
        cell.listed.store(true, Ordering::Release);
        let mut added = 0;
        for key in &cell.keys {
            let mut shard = self.shard(key).lock();
            if self.shut_down.load(Ordering::Acquire) {
                break;
            }
            shard.entry(key.clone()).or_default().push(cell.clone());
            added += 1;
        }
        self.watched.fetch_add(added, Ordering::AcqRel);
        if added == cell.keys.len() {
            return true;
        }
        if cell.cancel() {
            // It counted all its keys as garbage; only `added` entries exist.
            self.garbage
                .fetch_sub((cell.keys.len() - added) as isize, Ordering::AcqRel);
        }
        false
    }

    /// Account for `removed` entries of finished operations taken out of watcher lists.
    fn removed_garbage(&self, removed: usize) {
        if removed > 0 {
            self.watched.fetch_sub(removed, Ordering::AcqRel);
            self.garbage.fetch_sub(removed as isize, Ordering::AcqRel);
        }
    }

    /// Purge all watcher lists if the garbage in them is large enough; see the module docs.
    ///
    /// Runs on the thread whose completion tipped the balance, one chunk of one list per
    /// lock acquisition, so that requests watching the same keys wait at most one chunk.
    fn maybe_purge(&self) {
        let watched = self.watched.load(Ordering::Acquire);
        let garbage = self.garbage.load(Ordering::Acquire).max(0) as usize;
        if garbage <= self.purge_interval.max(watched / 2) {
            return;
        }
        if self.purging.swap(true, Ordering::AcqRel) {
            return; // someone else is purging
        }
        for shard in &self.shards {
            let keys: Vec<K> = shard.lock().keys().cloned().collect();
            for key in keys {
                self.purge_key(shard, &key);
            }
        }
        self.purging.store(false, Ordering::Release);
    }

    /// Drop completed operations from one key's list, a chunk at a time; remove the key if
    /// nothing is left. Between chunks other threads may append or remove entries, which at
    /// worst makes this purge skip or re-examine a few: it never drops a pending operation.
    fn purge_key(&self, shard: &Mutex<WatcherMap<K, Op>>, key: &K) {
        let mut at = 0;
        loop {
            let mut dropped = Vec::new();
            let done = {
                let mut map = shard.lock();
                let Some(list) = map.get_mut(key) else {
                    return;
                };
                let end = (at + PURGE_CHUNK).min(list.len());
                while at < end.min(list.len()) {
                    if list[at].is_pending() {
                        at += 1;
                    } else {
                        dropped.push(list.swap_remove(at));
                    }
                }
                self.removed_garbage(dropped.len());
                let done = at >= list.len();
                if list.is_empty() {
                    map.remove(key);
                }
                done
            };
            // Dropping the last reference runs the operation's destructor: no lock held.
            drop(dropped);
            if done {
                return;
            }
        }
    }
}

/// Keep only pending operations in `list`, moving the others to `dropped`.
fn retain_pending<K, Op>(list: &mut Vec<Arc<OpCell<K, Op>>>, dropped: &mut Vec<Arc<OpCell<K, Op>>>)
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    let mut i = 0;
    while i < list.len() {
        if list[i].is_pending() {
            i += 1;
        } else {
            dropped.push(list.swap_remove(i));
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
/// use timewheel::{DelayedOperation, Purgatory, PurgatoryConfig, Timer, TimerConfig};
///
/// struct WaitForFlag(AtomicBool);
/// impl DelayedOperation for WaitForFlag {
///     fn try_complete(&self) -> bool { self.0.load(Ordering::SeqCst) }
///     fn on_complete(&self) {}
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

        if cell.op.try_complete() && cell.complete() {
            return handle;
        }
        if !core.watch(&cell) {
            return handle; // shut down: cancelled
        }
        if cell.op.try_complete() && cell.complete() {
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
    ///
    /// Completed operations found in the key's list are dropped from it, and a list left
    /// empty removes the key. `try_complete` and `on_complete` run on the calling thread,
    /// outside the purgatory's locks.
    pub fn check_and_complete(&self, key: &K) -> usize {
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
            if cell.is_pending() && cell.op.try_complete() && cell.complete() {
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
    /// `on_complete`, no `on_expiration`), so `watched()` and `delayed()` drop to 0 and the
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
