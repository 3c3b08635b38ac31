//! The hierarchical timing wheel: Kafka's `TimingWheel`, single-threaded and generic.
//!
//! # Levels and buckets
//!
//! Level 0 has `wheel_size` buckets, each `tick_ms` wide, so it covers
//! `interval = tick_ms * wheel_size` milliseconds from its current time. Level `n + 1`
//! (an *overflow wheel* in Kafka's words) has the same number of buckets, each as wide as
//! the whole of level `n`. With Kafka's defaults (`tick_ms = 1`, `wheel_size = 20`) the
//! levels cover 20 ms, 400 ms, 8 s, 160 s, ... Overflow levels are created on demand, the
//! first time a timer lands beyond the levels that exist (`level.rs`).
//!
//! ```text
//!            level 2: tick 400 ms, 20 buckets, covers 8 s
//!            [ 0 | 1 | 2 | ... | 19 ]
//!                  |  flushed at its expiration: entries cascade down
//!                  v
//!            level 1: tick 20 ms, 20 buckets, covers 400 ms
//!            [ 0 | 1 | 2 | ... | 19 ]
//!                  |
//!                  v
//!  now ----> level 0: tick 1 ms, 20 buckets, covers 20 ms
//!            [ 0 | 1 | 2 | ... | 19 ]  --> due: fired
//! ```
//!
//! A timer goes into the finest level whose range still contains it, into the bucket
//! `(expiration / tick) % wheel_size` of that level. A bucket's *expiration* is the start
//! of the time span it covers. Only non-empty buckets are kept in a priority queue
//! (`bucket_queue.rs`). Advancing the clock pops every bucket whose expiration has come,
//! moves the wheel's time to it and *flushes* it (`cascade.rs`): each entry is placed
//! again, which now lands it in a finer level (the *cascade*) or, once it is due, in the
//! due list, which the advance hands out.
//!
//! # Due and "never early"
//!
//! Kafka files a timer by `expiration / tick`, i.e. into the bucket whose span *starts* at
//! or before it, and fires the bucket at that start, so with `tick_ms > 1` a timer can fire
//! up to `tick_ms - 1` early. This wheel files the deadline rounded *up* to the tick, and
//! an entry only ever fires by going through the due list, which takes an entry only once
//! its deadline is at or before the wheel's time. With `tick_ms = 1`, the default, a timer
//! fires exactly at its deadline; with a coarser tick, at the first tick boundary at or
//! after it. Within one advance, fired entries are returned sorted by deadline, ties in
//! insertion order.
//!
//! # Cancel: tombstones
//!
//! `remove` takes the value out of the timer's slot (`slab.rs`): the key is stale at once
//! and the task can never fire. The entry's item stays in its bucket's list as a
//! tombstone. The rest of the bookkeeping waits for a batch of `SETTLE_BATCH` cancels
//! (or anything that reads the lists: advancing, draining, snapshots,
//! [`next_expiration`](TimingWheel::next_expiration)): each slot then gets its next
//! generation and goes on the free list, and each list counts its new tombstones. A list
//! whose last live entry goes is emptied, and a bucket left with none leaves the bucket
//! queue, so the queue holds exactly the buckets with live timers and a driver never wakes
//! for nothing. A cancel itself touches the slot and nothing else that can miss the cache,
//! which lets the processor overlap several cancels' misses (measured in
//! `docs/performance.md`).
//!
//! Flushes skip tombstones; a list that keeps receiving timers is compacted when it is
//! full and half tombstones. An item is current only while its slot holds the generation
//! it names (a taken, not yet settled slot still does, and its item still counts as live in
//! its list until the batch is settled: the two stay consistent), and generations are
//! never reused, so a tombstone never fires and a stale key never cancels, however long
//! the wheel runs.
//!
//! # Incremental cascades
//!
//! Flushing a coarse bucket moves every entry in it: with Kafka's defaults a 400 ms
//! level-2 bucket can hold a third of all pending timers, and while the driver moves tens
//! of thousands of entries, the timers due right now wait. So each bucket of level 1 and
//! up keeps its entries in two lists: the *head*, entries in the bucket's first `tick` of
//! the level below (the only ones that can be due soon after the bucket's expiration), and
//! the *rest*. When the bucket expires its head is placed at once; the rest, due no
//! earlier than one lower tick later, is cascaded a chunk at a time by the following
//! advances, between firings, and finished outright by any advance that reaches that
//! time. [`next_expiration`](TimingWheel::next_expiration) reports the pending work as due
//! now, so a driver keeps going until it is done.
//!
//! # Costs
//!
//! * `insert`: O(levels) comparisons and two divisions, both skipped when the deadline is
//!   in the span of the previous placement (timers with the same timeout); an amortised
//!   O(1) push onto the bucket's list; an O(log B) queue push when the bucket was empty
//!   (B = non-empty buckets, a few hundred at most). No allocation once the slab and lists
//!   have grown.
//! * `remove`: O(1): the slot; amortised O(1) more when its batch is settled.
//! * `advance_to`: O(log B) per popped bucket plus O(1) per entry moved or fired (every
//!   entry moves at most once per level), plus sorting each batch of fired entries.
//! * memory: per pending timer a slot (16 bytes with a 4-byte payload, 32 with the timer's
//!   task) and a 16-byte item in its bucket's list (tombstones at most double a list),
//!   plus `wheel_size` bucket headers per level.
//!
//! The wheel is a plain single-threaded data structure (`&mut self` to change it); the
//! [`Timer`](crate::Timer) wraps it in a mutex and adds a clock and a driver.

mod cascade;
mod level;

use std::sync::atomic::{AtomicU32, Ordering};

use crate::bucket_queue::BucketQueue;
use crate::list::{Item, List, ListId, MAX_BUCKETS};
use crate::slab::{Key, Slab};
use crate::snapshot::{BucketSnapshot, LevelSnapshot, WheelPosition, WheelSnapshot};

use cascade::{Cascade, CascadeStats};
use level::{place_in, Level, Span};

/// Cancels are settled (slots released, tombstones counted) this many at a time.
const SETTLE_BATCH: usize = 128;

/// Deadlines are clamped to this (about 146 million years of milliseconds) so that no
/// arithmetic on them can overflow. A timer clamped here effectively never fires.
pub const MAX_DEADLINE_MS: u64 = 1 << 62;

/// A timer that has fired: its deadline and its payload.
#[derive(Debug)]
pub struct Expired<T> {
    /// The deadline it was scheduled for (clamped to [`MAX_DEADLINE_MS`]).
    pub deadline_ms: u64,
    /// Insertion number, the tie-breaker between equal deadlines (comparable within one
    /// advance).
    seq: u32,
    /// The payload given to [`TimingWheel::insert`].
    pub value: T,
}

/// Source of wheel ids, so that a wheel can refuse another wheel's keys.
static NEXT_WHEEL_ID: AtomicU32 = AtomicU32::new(0);

fn next_wheel_id() -> u32 {
    NEXT_WHEEL_ID
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |id| id.checked_add(1))
        .expect("a process creates at most 2^32 timing wheels")
}

/// Shape of the wheel underneath a [`Timer`](crate::Timer): its tick and how many buckets
/// each level has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerConfig {
    /// Width of a level-0 bucket, in milliseconds: the timer's resolution. Default 1.
    pub tick_ms: u64,
    /// Buckets per level. Default 20 (Kafka's), so the levels span 20 ms, 400 ms, 8 s, ...
    pub wheel_size: usize,
}

impl Default for TimerConfig {
    fn default() -> Self {
        TimerConfig {
            tick_ms: 1,
            wheel_size: 20,
        }
    }
}

/// A hierarchical timing wheel holding values of type `T` until their deadline.
///
/// Single-threaded; see the [module documentation](self) for the design and costs.
///
/// ```
/// use timewheel::TimingWheel;
///
/// let mut wheel = TimingWheel::new(1, 20, 0);
/// let a = wheel.insert(5, "five");
/// wheel.insert(1_000, "a second");
/// assert_eq!(wheel.remove(a), Some("five"));
///
/// let mut fired = Vec::new();
/// wheel.advance_to(999, &mut fired);
/// assert!(fired.is_empty());
/// wheel.advance_to(1_000, &mut fired);
/// assert_eq!(fired[0].value, "a second");
/// ```
pub struct TimingWheel<T> {
    id: u32,
    tick_ms: u64,
    wheel_size: u64,
    levels: Vec<Level>,
    /// Every list, indexed by [`ListId`]: the due list (entries already due, waiting for
    /// the next `advance_to` to hand them out), then the rest and head lists of each of the
    /// `levels.len() * wheel_size` buckets (bucket `level * wheel_size + slot`).
    lists: Vec<List>,
    /// Per bucket, the expiration of the round it holds (while it holds one).
    expirations: Vec<u64>,
    queue: BucketQueue,
    slab: Slab<T>,
    /// The time last advanced to (not rounded): deadlines at or before it are due.
    now: u64,
    /// Expired buckets still being cascaded (usually none or one).
    cascading: Vec<Cascade>,
    /// The buffer cascade chunks move through, empty between chunks (kept for its
    /// capacity).
    chunk: Vec<Item>,
    /// Counters and recent flushes, for snapshots.
    stats: CascadeStats,
    /// The last placement and the expirations it holds for, until the time moves: timers
    /// with the same timeout scheduled close together land in the same bucket, and skip
    /// the level search and the divisions. Its bucket is queued (non-empty) for as long as
    /// it is remembered: whatever empties a bucket forgets it.
    last: Span,
    /// Cancelled timers whose slots wait to be released and their tombstones counted
    /// (see "Cancel: tombstones").
    unsettled: Unsettled,
}

/// The slots of cancelled timers not yet settled: at most [`SETTLE_BATCH`].
struct Unsettled {
    slots: [u32; SETTLE_BATCH],
    len: usize,
}

impl<T> TimingWheel<T> {
    /// A wheel whose level 0 has `wheel_size` buckets of `tick_ms`, starting at `start_ms`.
    ///
    /// # Panics
    /// If `tick_ms == 0`, `wheel_size < 2` or `wheel_size > 2^24`.
    pub fn new(tick_ms: u64, wheel_size: usize, start_ms: u64) -> Self {
        Self::with_capacity(tick_ms, wheel_size, start_ms, 0)
    }

    /// Like [`TimingWheel::new`], with room for `capacity` pending timers before the slab
    /// reallocates.
    pub fn with_capacity(tick_ms: u64, wheel_size: usize, start_ms: u64, capacity: usize) -> Self {
        assert!(tick_ms >= 1, "tick_ms must be at least 1");
        assert!(wheel_size >= 2, "wheel_size must be at least 2");
        assert!(wheel_size <= 1 << 24, "wheel_size must be at most 2^24");
        let now = start_ms.min(MAX_DEADLINE_MS);
        let mut wheel = TimingWheel {
            id: next_wheel_id(),
            tick_ms,
            wheel_size: wheel_size as u64,
            levels: Vec::new(),
            lists: vec![List::default()],
            expirations: Vec::new(),
            queue: BucketQueue::default(),
            // Plus the slots of cancels waiting to be settled, which are not free yet.
            slab: Slab::with_capacity(capacity.saturating_add(SETTLE_BATCH)),
            now,
            cascading: Vec::new(),
            chunk: Vec::new(),
            stats: CascadeStats::default(),
            last: Span::EMPTY,
            unsettled: Unsettled {
                slots: [0; SETTLE_BATCH],
                len: 0,
            },
        };
        wheel.add_level(tick_ms);
        wheel
    }

    /// This wheel's id (the one its keys carry).
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    /// Make room for `additional` more pending timers without reallocating the slab.
    pub fn reserve(&mut self, additional: usize) {
        // Plus the slots of cancels waiting to be settled, which are not free yet.
        self.slab.reserve(additional.saturating_add(SETTLE_BATCH));
    }

    /// Width of a level-0 bucket.
    pub fn tick_ms(&self) -> u64 {
        self.tick_ms
    }

    /// Buckets per level.
    pub fn wheel_size(&self) -> usize {
        self.wheel_size as usize
    }

    /// The wheel's current time: the last time advanced to, rounded down to the tick.
    pub fn current_time(&self) -> u64 {
        self.levels[0].current
    }

    /// The last time advanced to (or the start time), not rounded.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Number of pending timers (including due ones not yet handed out).
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// True if no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.slab.len() == 0
    }

    /// Number of levels created so far.
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// When the next advance has work to do: [`now`](Self::now) if timers are already due
    /// or a cascade is in progress, else the earliest non-empty bucket's expiration; `None`
    /// if nothing is pending. That is the instant a driver should sleep until (it may be a
    /// coarse bucket whose flush only moves entries down). O(1).
    pub fn next_expiration(&mut self) -> Option<u64> {
        self.settle();
        if !self.lists[ListId::DUE.index()].is_empty() || !self.cascading.is_empty() {
            Some(self.now)
        } else {
            self.queue.peek().map(|(expiration, _)| expiration)
        }
    }

    /// Schedule `value` for `deadline_ms` and return the key that cancels it.
    ///
    /// A deadline at or before [`now`](Self::now) is already due: the value is handed out by
    /// the next [`advance_to`](Self::advance_to), whatever time it advances to.
    #[inline]
    pub fn insert(&mut self, deadline_ms: u64, value: T) -> Key {
        self.insert_and_wake(deadline_ms, value).0
    }

    /// [`insert`](Self::insert), also returning [`wake_time`](Self::wake_time) for the new
    /// timer (which the placement knows already).
    #[inline]
    pub(crate) fn insert_and_wake(&mut self, deadline_ms: u64, value: T) -> (Key, u64) {
        let deadline = deadline_ms.min(MAX_DEADLINE_MS);
        let (list, wake) = self.target(deadline);
        let (index, generation) = self.slab.insert(value, list);
        self.push(
            list,
            Item {
                index,
                generation,
                deadline,
            },
        );
        let key = Key::new(self.id, index, generation);
        (key, wake)
    }

    /// Cancel a pending timer, returning its value; `None` if the key is stale (the timer
    /// already fired or was cancelled) or belongs to another wheel. O(1): the entry stays
    /// in its bucket as a tombstone, see the [module documentation](self).
    #[inline]
    pub fn remove(&mut self, key: Key) -> Option<T> {
        if key.wheel != self.id {
            return None;
        }
        let value = self.slab.take(key.index(), key.generation())?;
        let unsettled = &mut self.unsettled;
        unsettled.slots[unsettled.len] = key.index();
        unsettled.len += 1;
        if unsettled.len == SETTLE_BATCH {
            self.settle();
        }
        Some(value)
    }

    /// Release the slots of the cancelled timers waiting for it and count their
    /// tombstones (which may empty lists and buckets).
    #[inline(never)]
    fn settle(&mut self) {
        let n = std::mem::take(&mut self.unsettled.len);
        let batch = &mut self.unsettled.slots[..n];
        // Each slot index becomes the id of the list its tombstone is in.
        self.slab.release_all(batch);
        let lists = &mut self.lists[..];
        let mut emptied = false;
        for &id in batch.iter() {
            emptied |= lists[id as usize].bury();
        }
        if emptied {
            for at in 0..n {
                let id = ListId::from_bits(self.unsettled.slots[at]);
                let list = &self.lists[id.index()];
                if list.live() == 0 && !list.is_empty() {
                    self.emptied(id);
                }
            }
        }
    }

    /// List `id` has no live entry left: empty it, and if its bucket is now empty, take
    /// the bucket out of the queue (and of any cascade in progress), and forget it as the
    /// last placement.
    #[cold]
    fn emptied(&mut self, id: ListId) {
        self.lists[id.index()].clear();
        if let Some(b) = id.bucket() {
            if self.bucket_live(b) == 0 {
                self.list_mut(ListId::head(b)).clear();
                self.list_mut(ListId::rest(b)).clear();
                self.queue.remove(b as u32);
                self.cascading.retain(|c| c.bucket != b);
                if self.last.placement.bucket == b {
                    self.last = Span::EMPTY;
                }
            }
        }
    }

    #[inline]
    fn list(&self, id: ListId) -> &List {
        &self.lists[id.index()]
    }

    #[inline]
    fn list_mut(&mut self, id: ListId) -> &mut List {
        &mut self.lists[id.index()]
    }

    /// True if bucket `b` holds no entry, live or tombstone.
    fn bucket_is_empty(&self, b: usize) -> bool {
        self.list(ListId::rest(b)).is_empty() && self.list(ListId::head(b)).is_empty()
    }

    /// Live entries of bucket `b`.
    fn bucket_live(&self, b: usize) -> usize {
        self.list(ListId::rest(b)).live() + self.list(ListId::head(b)).live()
    }

    /// The list a pending timer's entry is in, if `key` is current.
    fn list_of(&self, key: Key) -> Option<ListId> {
        if key.wheel != self.id {
            return None;
        }
        self.slab.list_of(key.index(), key.generation())
    }

    /// True if `key` names a pending timer of this wheel.
    pub fn contains(&self, key: Key) -> bool {
        self.list_of(key).is_some()
    }

    /// When the wheel must next be advanced for this timer: `now` if it is already due,
    /// else the expiration of the bucket it sits in (possibly a coarse bucket that will
    /// only move it down). `None` if the key is stale. O(1).
    pub fn wake_time(&self, key: Key) -> Option<u64> {
        Some(match self.list_of(key)?.bucket() {
            None => self.now,
            Some(b) => self.expirations[b],
        })
    }

    /// Where a pending timer sits: its level, slot and bucket expiration; `None` if the key
    /// is stale or the timer is already due (in no bucket). O(1).
    pub fn position(&self, key: Key) -> Option<WheelPosition> {
        let b = self.list_of(key)?.bucket()?;
        Some(self.bucket_position(b))
    }

    fn bucket_position(&self, b: usize) -> WheelPosition {
        WheelPosition {
            level: b / self.wheel_size as usize,
            slot: b % self.wheel_size as usize,
            expiration_ms: self.expirations[b],
        }
    }

    /// The deadline of a pending timer. O(n) in the size of its bucket (the deadline is kept
    /// in the bucket's list, not in the slot): for tests and introspection.
    pub fn deadline(&self, key: Key) -> Option<u64> {
        let id = self.list_of(key)?;
        self.list(id)
            .items()
            .iter()
            .find(|item| item.index == key.index() && item.generation == key.generation())
            .map(|item| item.deadline)
    }

    /// Advance the clock to `now_ms`, appending every timer due at or before it to `out`
    /// (sorted by deadline, ties in insertion order) and returning how many were appended.
    ///
    /// Buckets are flushed in expiration order; the wheel's time steps to each flushed
    /// bucket's expiration, then to `now_ms`. Moving backwards is ignored (only the due list
    /// is drained).
    pub fn advance_to(&mut self, now_ms: u64, out: &mut Vec<Expired<T>>) -> usize {
        self.settle();
        let now = now_ms.min(MAX_DEADLINE_MS);
        let start = out.len();
        loop {
            self.drain_due(out);
            // A cascade whose entries may be due by now is finished before anything else.
            if let Some(i) = self.cascading.iter().position(|c| c.due_by <= now) {
                let cascade = self.cascading.swap_remove(i);
                self.cascade_chunk(cascade, usize::MAX);
                continue;
            }
            match self.queue.peek() {
                Some((expiration, bucket)) if expiration <= now => {
                    self.queue.pop();
                    self.set_time(expiration);
                    self.flush(bucket as usize);
                }
                _ => break,
            }
        }
        self.set_time(now);
        // Nothing else to do now: move one chunk of a pending cascade. Its entries are due
        // after `now`, so this fires nothing.
        if out.len() == start {
            if let Some(&cascade) = self.cascading.first() {
                if self.cascade_chunk(cascade, cascade::CHUNK) {
                    self.cascading.swap_remove(0);
                }
            }
        }
        out[start..].sort_unstable_by_key(|e| (e.deadline_ms, e.seq));
        out.len() - start
    }

    /// Remove every pending timer, returning the values (for shutdown). The clock stays.
    pub fn drain(&mut self) -> Vec<T> {
        self.settle();
        let mut out = Vec::with_capacity(self.len());
        let lists: Vec<Vec<Item>> = self.lists.iter_mut().map(List::take).collect();
        while self.queue.pop().is_some() {}
        self.cascading.clear();
        self.last = Span::EMPTY;
        for item in lists.into_iter().flatten() {
            if let Some((value, _)) = self.slab.remove(item.index, item.generation) {
                out.push(value);
            }
        }
        out
    }

    /// A picture of the levels, the non-empty buckets and the recent flushes, counting
    /// live timers only. O(levels + B log B): it never walks the timers.
    pub fn snapshot(&mut self, now_ms: u64) -> WheelSnapshot {
        self.settle();
        let levels = self
            .levels
            .iter()
            .enumerate()
            .map(|(level, l)| LevelSnapshot {
                level,
                tick_ms: l.tick,
                wheel_size: self.wheel_size as usize,
                interval_ms: l.interval,
                current_time_ms: l.current,
                cascaded: self.stats.cascaded(level),
                fired: self.stats.fired(level),
            })
            .collect();
        let queued = self.queue.iter().map(|(_, b)| b as usize);
        let cascading = self.cascading.iter().map(|c| c.bucket);
        let mut buckets: Vec<BucketSnapshot> = queued
            .chain(cascading)
            .map(|b| {
                let p = self.bucket_position(b);
                BucketSnapshot {
                    level: p.level,
                    slot: p.slot,
                    expiration_ms: p.expiration_ms,
                    entries: self.bucket_live(b),
                }
            })
            .collect();
        buckets.sort_by_key(|b| (b.expiration_ms, b.level, b.slot));
        WheelSnapshot {
            now_ms,
            current_time_ms: self.current_time(),
            pending: self.len(),
            due: self.list(ListId::DUE).live(),
            levels,
            buckets,
            flushes: self.stats.recent(),
            flushes_total: self.stats.total(),
        }
    }

    /// The list a timer due at `deadline` goes into (the due list, or a list of the finest
    /// bucket that covers it), and when the wheel must be advanced for it.
    #[inline]
    fn target(&mut self, deadline: u64) -> (ListId, u64) {
        if deadline <= self.now {
            return (ListId::DUE, self.now);
        }
        // Rounded up to the tick, so that it never fires early.
        let expiration = if self.tick_ms == 1 {
            deadline
        } else {
            deadline.div_ceil(self.tick_ms) * self.tick_ms
        };
        if self.last.contains(expiration) {
            let last = &self.last.placement;
            return (last.list, last.expiration);
        }
        self.place_new(expiration)
    }

    /// The placement of an expiration past the current time: the finest level that covers
    /// it (creating overflow levels as needed). Its bucket joins the queue if it was empty;
    /// the placement is remembered.
    #[inline(never)]
    fn place_new(&mut self, expiration: u64) -> (ListId, u64) {
        let mut level = 0;
        while !self.levels[level].covers(expiration) {
            level += 1;
            if level == self.levels.len() {
                self.add_level(self.levels[level - 1].interval);
            }
        }
        self.last = place_in(level, &self.levels, self.wheel_size, expiration);
        let placement = self.last.placement;
        let b = placement.bucket;
        if self.bucket_is_empty(b) {
            self.expirations[b] = placement.expiration;
            self.queue.push(b as u32, placement.expiration);
        }
        debug_assert_eq!(
            self.expirations[b], placement.expiration,
            "one round a bucket"
        );
        (placement.list, placement.expiration)
    }

    /// Append an item to list `id` (compacting the list first if it is full of tombstones).
    #[inline]
    fn push(&mut self, id: ListId, item: Item) {
        let slab = &self.slab;
        self.lists[id.index()].push(item, |i| slab.is_current(i.index, i.generation));
    }

    /// File an entry (taken out of its list, current) again: into the due list, or into
    /// the finest level that covers it. Returns the list.
    #[inline]
    fn place(&mut self, item: Item) -> ListId {
        let (id, _) = self.target(item.deadline);
        self.slab.relist(item.index, id);
        self.push(id, item);
        id
    }

    /// Hand out every entry of the due list.
    fn drain_due(&mut self, out: &mut Vec<Expired<T>>) {
        if self.list(ListId::DUE).is_empty() {
            return;
        }
        let items = self.list_mut(ListId::DUE).take();
        out.reserve(items.len());
        for item in &items {
            if let Some((value, _)) = self.slab.remove(item.index, item.generation) {
                out.push(Expired {
                    deadline_ms: item.deadline,
                    // Still the timer's: a released slot keeps it until it is reused.
                    seq: self.slab.seq(item.index),
                    value,
                });
            }
        }
        let used = items.len();
        self.list_mut(ListId::DUE).recycle(items, used);
    }

    /// Move every level's clock forward to `now` (never backwards).
    fn set_time(&mut self, now: u64) {
        if now <= self.now {
            return;
        }
        self.now = now;
        self.last = Span::EMPTY;
        if now >= self.levels[0].current + self.tick_ms {
            for level in &mut self.levels {
                level.set_time(now);
            }
        }
    }

    fn add_level(&mut self, tick: u64) {
        self.levels
            .push(Level::new(tick, self.wheel_size, self.now));
        let buckets = self.levels.len() * self.wheel_size as usize;
        assert!(buckets < MAX_BUCKETS, "too many buckets");
        self.lists
            .resize_with(ListId::lists_for(buckets), List::default);
        self.expirations.resize(buckets, 0);
        self.queue.reserve_buckets(buckets);
        self.stats.add_level();
    }

    /// Test hook: give the free slot `index` the generation `generation`.
    #[cfg(test)]
    fn set_generation(&mut self, index: u32, generation: u32) {
        self.settle();
        self.slab.set_generation(index, generation);
    }
}

impl<T> std::fmt::Debug for TimingWheel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimingWheel")
            .field("tick_ms", &self.tick_ms)
            .field("wheel_size", &self.wheel_size)
            .field("current_time", &self.current_time())
            .field("levels", &self.levels.len())
            .field("pending", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests;
