//! The watcher lists: for each key, the operations waiting on it, in shards each behind
//! its own lock; the purgatory's counters; and the purge that drops finished operations'
//! entries once they are a large enough share of all entries.

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::operation::OpCell;
use super::DelayedOperation;
use crate::hash::FxBuildHasher;
use crate::timer::Timer;

/// Number of watcher-map shards (a power of two).
pub(super) const SHARDS: usize = 16;

pub(super) type WatcherMap<K, Op> = HashMap<K, Vec<Arc<OpCell<K, Op>>>, FxBuildHasher>;

/// How many watcher-list entries a purge examines per lock acquisition, so that a purge of
/// a huge list never holds up `try_complete_else_watch` on the same key for long.
const PURGE_CHUNK: usize = 4096;

/// The purge condition is looked at on every this-many-th completion (it reads counters
/// that other threads keep changing, which costs a cache miss or two). A power of two.
const PURGE_CHECK_EVERY: u64 = 16;

/// A value alone on its cache line. The purgatory's counters are updated by different
/// threads (requests add, completions and the timer driver subtract); keeping each on its
/// own line stops one counter's traffic from slowing the others down.
#[repr(align(64))]
#[derive(Default)]
pub(super) struct Padded<T>(pub(super) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// The shared insides of a purgatory.
pub(super) struct Core<K, Op> {
    pub(super) name: String,
    pub(super) timer: Timer,
    pub(super) purge_interval: usize,
    pub(super) hasher: FxBuildHasher,
    pub(super) shards: Vec<Padded<Mutex<WatcherMap<K, Op>>>>,
    /// Entries in all watcher lists (Kafka's PurgatorySize).
    pub(super) watched: Padded<AtomicUsize>,
    /// Watcher-list entries of operations that are no longer pending: what a purge would
    /// remove. Kafka estimates this as `estimatedTotalOperations - NumDelayedOperations`;
    /// here it is counted (it can dip below zero for a moment while a completion and a
    /// removal race).
    pub(super) garbage: Padded<AtomicIsize>,
    /// Operations whose timeout sits in the timer (Kafka's NumDelayedOperations).
    pub(super) delayed: Padded<AtomicUsize>,
    pub(super) expired: Padded<AtomicU64>,
    pub(super) completed: Padded<AtomicU64>,
    pub(super) purging: AtomicBool,
    /// The purge's buffer for the entries it removes (to drop them outside the locks),
    /// kept between purges: a buffer of thousands of entries allocated and freed per chunk
    /// made the allocator consolidate its free lists every time (`malloc_consolidate`),
    /// in every thread's arena. Only the thread holding `purging` uses it.
    pub(super) purge_buffer: Mutex<Vec<Arc<OpCell<K, Op>>>>,
    pub(super) shut_down: AtomicBool,
}

impl<K, Op> Core<K, Op>
where
    K: Eq + Hash + Clone + Send + Sync + Display + 'static,
    Op: DelayedOperation,
{
    pub(super) fn shard(&self, key: &K) -> &Mutex<WatcherMap<K, Op>> {
        let hash = self.hasher.hash_one(key) as usize;
        &self.shards[hash & (SHARDS - 1)].0
    }

    /// Count a completion; true every `PURGE_CHECK_EVERY`-th time, when the caller should
    /// call `maybe_purge` (after the operation's callbacks, so they are not delayed).
    pub(super) fn count_completion(&self) -> bool {
        let before = self.completed.fetch_add(1, Ordering::AcqRel);
        before & (PURGE_CHECK_EVERY - 1) == 0
    }

    /// Add the operation to every key's watcher list. If the purgatory has been shut down
    /// (checked under each shard lock, so a concurrent shutdown cannot miss it) this stops,
    /// cancels the operation and returns false.
    pub(super) fn watch(&self, cell: &Arc<OpCell<K, Op>>) -> bool {
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
    pub(super) fn removed_garbage(&self, removed: usize) {
        if removed > 0 {
            self.watched.fetch_sub(removed, Ordering::AcqRel);
            self.garbage.fetch_sub(removed as isize, Ordering::AcqRel);
        }
    }

    /// Purge all watcher lists if the garbage in them is large enough; see the module docs.
    ///
    /// Runs on the thread whose completion tipped the balance, one chunk of one list per
    /// lock acquisition, so that requests watching the same keys wait at most one chunk.
    pub(super) fn maybe_purge(&self) {
        let watched = self.watched.load(Ordering::Acquire);
        let garbage = self.garbage.load(Ordering::Acquire).max(0) as usize;
        if garbage <= self.purge_interval.max(watched / 2) {
            return;
        }
        if self.purging.swap(true, Ordering::AcqRel) {
            return; // someone else is purging
        }
        let mut dropped = std::mem::take(&mut *self.purge_buffer.lock());
        for shard in &self.shards {
            let keys: Vec<K> = shard.lock().keys().cloned().collect();
            for key in keys {
                self.purge_key(shard, &key, &mut dropped);
            }
        }
        *self.purge_buffer.lock() = dropped;
        self.purging.store(false, Ordering::Release);
    }

    /// Drop completed operations from one key's list, a chunk at a time; remove the key if
    /// nothing is left. Between chunks other threads may append or remove entries, which at
    /// worst makes this purge skip or re-examine a few: it never drops a pending operation.
    pub(super) fn purge_key(
        &self,
        shard: &Mutex<WatcherMap<K, Op>>,
        key: &K,
        dropped: &mut Vec<Arc<OpCell<K, Op>>>,
    ) {
        let mut at = 0;
        loop {
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
            dropped.clear();
            if done {
                return;
            }
        }
    }
}

/// Keep only pending operations in `list`, moving the others to `dropped`.
pub(super) fn retain_pending<K, Op>(
    list: &mut Vec<Arc<OpCell<K, Op>>>,
    dropped: &mut Vec<Arc<OpCell<K, Op>>>,
) where
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
