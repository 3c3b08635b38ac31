//! The hierarchical timing wheel: Kafka's `TimingWheel`, single-threaded and generic.
//!
//! # Levels and buckets
//!
//! Level 0 has `wheel_size` buckets, each `tick_ms` wide, so it covers
//! `interval = tick_ms * wheel_size` milliseconds from its current time. Level `n + 1`
//! (an *overflow wheel* in Kafka's words) has the same number of buckets, each as wide as
//! the whole of level `n`. With Kafka's defaults (`tick_ms = 1`, `wheel_size = 20`) the
//! levels cover 20 ms, 400 ms, 8 s, 160 s, ... Overflow levels are created on demand, the
//! first time a timer lands beyond the levels that exist.
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
//! of the time span it covers. Only non-empty buckets are kept in a priority queue (the
//! bucket queue, `bucket_queue.rs`). Advancing the clock pops every bucket whose expiration has come,
//! moves the wheel's time to it and *flushes* it: each entry is placed again, which now
//! lands it in a finer level (the *cascade*) or, once it is due, fires it.
//!
//! # Due and "never early"
//!
//! Kafka files a timer by `expiration / tick`, i.e. into the bucket whose span *starts* at
//! or before it, and fires the bucket at that start, so with `tick_ms > 1` a timer can fire
//! up to `tick_ms - 1` early. This wheel files the deadline rounded *up* to the tick
//! (`ceil(deadline / tick) * tick`), so a bucket is flushed no earlier than the deadlines
//! in it, and an entry is *due* (fired at once instead of filed) when its deadline is at or
//! before the time last advanced to. With `tick_ms = 1`, the default, that is exactly
//! Kafka's rule `expiration < current_time + tick_ms`, and a timer fires exactly at its
//! deadline; with a coarser tick a timer fires at the first tick boundary at or after its
//! deadline. No timer ever fires before its deadline.
//!
//! Within one advance, expired entries are returned sorted by deadline, ties in insertion
//! order.
//!
//! # Costs
//!
//! * `insert`: O(levels) comparisons (levels is ~log(max delay) / log(wheel_size), 4 for a
//!   160 s delay with the defaults) and one 32-bit division, both skipped when the timer
//!   lands in the same bucket as the previous insert (the common case for requests with
//!   the same timeout); an amortised O(1) push onto the bucket's index list; an O(log B)
//!   queue push when the bucket was empty (B = number of non-empty buckets, a few hundred
//!   at most). No allocation once the slab and the bucket lists have grown.
//! * `remove` (cancel): O(1), touching the entry and nothing else that is likely to miss
//!   the cache: the value is taken out (the timer can never fire and its key is stale) and
//!   the entry stays in its bucket as a tombstone; see below. Amortised O(1) more for the
//!   compaction that eventually drops the tombstone.
//! * `advance_to`: O(levels) per popped bucket plus O(1) per entry moved or fired (every
//!   entry is moved at most once per level), plus sorting each batch of fired entries.
//! * memory: per pending timer a slot (16 bytes with a payload of up to 4 bytes, 32 with
//!   a 16-byte one such as `Arc<dyn TimerTask>`) and a byte of tag, and a 16-byte item
//!   (slot, stamp, deadline) in its bucket's list (tombstones at most double the lists,
//!   see below), plus `wheel_size` small bucket headers per level.
//!
//! # Incremental cascades
//!
//! Flushing a coarse bucket moves every entry in it: with Kafka's defaults a 400 ms
//! level-2 bucket can hold a third of all pending timers, and while the driver moves tens
//! of thousands of entries, the timers due right now wait. So each bucket of level 1 and up
//! keeps its entries in two lists: the *head*, entries in the bucket's first `tick` of the
//! level below (the only ones that can be due soon after the bucket's expiration), and the
//! *rest*. When the bucket expires its head is placed at once; the rest, due no earlier
//! than one lower tick later, is cascaded a chunk at a time by the following advances, in
//! between firing what is due, and finished outright by any advance that reaches that
//! time. [`next_expiration`](TimingWheel::next_expiration) reports the pending work as due
//! now, so a driver keeps going until it is done.
//!
//! # Tombstones
//!
//! Unlinking a cancelled entry from its bucket would write to a random place in the
//! bucket's index list (and, with swap-removal, to the entry moved into the hole): with
//! millions of pending timers those are cache misses on top of the one for the entry
//! itself, and each miss in the shadow of another limits how many cancels the processor
//! overlaps. So `remove` touches the entry's slot only: it checks the stamp, takes the
//! value out (the timer can never fire, its key is stale) and records the index. Every
//! [`SETTLE_BATCH`] cancels (and before anything that reads the lists: advancing,
//! draining, snapshots, [`next_expiration`](TimingWheel::next_expiration)) the batch is
//! *settled*, from the cache since the cancels just touched those slots: each slot goes
//! on the free list (so it is reused while still warm) and its tag moves on to the next
//! generation, in one pass over the batch; then the lists the slots' ids name count their
//! new tombstones, a run of equal ids at a time. Keeping that out of
//! `remove` keeps a cancel short, so that the processor has several cancels' cache misses
//! in flight at once. The item stays listed:
//!
//! * flushes, cascades and draining skip tombstones: an item is current only while its
//!   slot holds a value with the item's stamp, and the slot's *tag* (a byte per slot,
//!   small enough to stay cached; see `slab.rs`) rules out most tombstones without
//!   reading their slots;
//! * a list that timers keep arriving in is *compacted* when it is full and at least half
//!   of it is tombstones (and at least [`COMPACT_MIN`]), instead of growing: one
//!   sequential, branch-free pass over its items compares each item's generation byte
//!   with its slot's tag and keeps the current items in order. Such a list stays within
//!   about twice its live entries, at about two items read per cancel;
//! * a list that only loses timers is left as it is until its last live entry goes, when
//!   it is emptied (and a large buffer shrunk), or until its bucket is flushed. Compacting
//!   it on the way would give no memory back unless its buffer were also shrunk, and
//!   freeing large blocks in between the many small frees of the callers' cancelled
//!   operations sends the system allocator down a slow path (see the crate README);
//! * a bucket whose last live timer is cancelled is emptied when the cancel is settled
//!   and leaves the bucket queue, so the queue holds exactly the buckets with live timers
//!   and a driver never wakes for a bucket of cancelled ones.
//!
//! A cancelled timer therefore never fires, and counts (`len`, snapshots) are of live
//! timers only. The slab holds at most the pending timers plus [`SETTLE_BATCH`] slots
//! (tombstones are items, not slots). A large list grows by a quarter at a time rather
//! than doubling. In a steady state of random cancels and new timers a pending timer with
//! a small payload costs 50-60 bytes all told (16 of slot, a 16-byte item, its share of
//! tombstones and spare capacity, a byte of tag; measured by `timer-bench churn`). After
//! mass cancellations the lists the cancelled timers were in keep their size until they
//! empty or their buckets come due: memory follows the peak of pending timers, not the
//! current count, for at most the span of those buckets.
//!
//! The wheel is a plain single-threaded data structure (`&mut self` everywhere); the
//! [`Timer`](crate::Timer) wraps it in a mutex and adds a clock and a driver.

use crate::bucket_queue::BucketQueue;
use crate::slab::{Item, Key, List, Slab, NIL};
use crate::snapshot::{BucketSnapshot, LevelSnapshot, WheelSnapshot};

/// Deadlines are clamped to this (about 146 million years of milliseconds) so that no
/// arithmetic on them can overflow. A timer clamped here effectively never fires.
pub const MAX_DEADLINE_MS: u64 = 1 << 62;

/// List id of the due list. Bucket `b`'s lists have ids `2b` (the rest) and `2b + 1`
/// (the head); bucket ids are `level * wheel_size + slot`, far below this.
const DUE: u32 = NIL - 1;

/// How many entries of a pending cascade one advance moves when nothing else is due.
const CASCADE_CHUNK: usize = 2048;

/// A list is compacted only once it has at least this many tombstones (see
/// "Tombstones").
pub const COMPACT_MIN: usize = 64;

/// How many cancelled entries wait before their bookkeeping is done in one batch.
pub const SETTLE_BATCH: usize = 128;

/// Flushes read this many entries ahead of placing them (see `flush`): enough to keep the
/// memory system busy, few enough (16 KiB of entries) to stay in the L1/L2 cache.
const PREFETCH_CHUNK: usize = 256;

/// A timer that has fired: its deadline and its payload.
#[derive(Debug)]
pub struct Expired<T> {
    /// The deadline it was scheduled for (clamped to [`MAX_DEADLINE_MS`]).
    pub deadline_ms: u64,
    /// Insertion order, the tie-breaker between equal deadlines.
    seq: u64,
    /// The payload given to [`TimingWheel::insert`].
    pub value: T,
}

/// One level of the wheel.
#[derive(Clone, Copy, Debug)]
struct Level {
    /// Width of one bucket.
    tick: u64,
    /// Width of the whole level, `tick * wheel_size`, saturating at `u64::MAX`.
    interval: u64,
    /// The wheel's time rounded down to a multiple of `tick`.
    current: u64,
    /// `current / tick`: the virtual bucket number of the current bucket.
    current_vid: u64,
    /// `current_vid % wheel_size`: the slot of the current bucket.
    current_slot: u64,
}

impl Level {
    fn new(tick: u64, wheel_size: u64, now: u64) -> Level {
        let mut level = Level {
            tick,
            interval: tick.saturating_mul(wheel_size),
            current: 0,
            current_vid: 0,
            current_slot: 0,
        };
        level.set_time(now, wheel_size);
        level
    }

    fn set_time(&mut self, now: u64, wheel_size: u64) {
        self.current_vid = now / self.tick;
        self.current = self.current_vid * self.tick;
        self.current_slot = self.current_vid % wheel_size;
    }
}

/// A bucket: the indices of its entries plus its expiration while non-empty.
#[derive(Debug)]
struct Bucket {
    /// Entries not in `head`.
    list: List,
    /// Level 1 and up: entries within the first tick of the level below, placed as soon
    /// as the bucket expires (see "Incremental cascades"). Always empty on level 0.
    head: List,
    expiration: u64,
}

impl Bucket {
    fn is_empty(&self) -> bool {
        self.list.is_empty() && self.head.is_empty()
    }

    /// Number of live entries.
    fn live(&self) -> usize {
        self.list.live() + self.head.live()
    }
}

/// An expired bucket whose remaining entries are being cascaded a chunk at a time; none of
/// them is due before `due_by`.
#[derive(Clone, Copy, Debug)]
struct Cascade {
    bucket: u32,
    due_by: u64,
}

/// The list with id `id`: the due list, or one of a bucket's two lists.
#[inline]
fn list_by_id<'a>(due: &'a mut List, buckets: &'a mut [Bucket], id: u32) -> &'a mut List {
    if id == DUE {
        due
    } else {
        let bucket = &mut buckets[(id >> 1) as usize];
        if id & 1 == 1 {
            &mut bucket.head
        } else {
            &mut bucket.list
        }
    }
}

/// The list with id `id`, read-only.
fn list_by_id_ref<'a>(due: &'a List, buckets: &'a [Bucket], id: u32) -> &'a List {
    if id == DUE {
        due
    } else {
        let bucket = &buckets[(id >> 1) as usize];
        if id & 1 == 1 {
            &bucket.head
        } else {
            &bucket.list
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
    tick_ms: u64,
    wheel_size: u64,
    levels: Vec<Level>,
    /// `levels.len() * wheel_size` buckets; bucket `level * wheel_size + slot`.
    buckets: Vec<Bucket>,
    /// Entries already due, waiting for the next `advance_to` to hand them out.
    due: List,
    queue: BucketQueue,
    slab: Slab<T>,
    next_seq: u64,
    /// The time last advanced to (not rounded): deadlines at or before it are due.
    now: u64,
    /// The bucket the last placement chose, valid until the time moves; see `place`.
    last: LastBucket,
    /// Cancelled entries, vacated, waiting for their bookkeeping (see "Tombstones"):
    /// the first `unsettled_len`.
    unsettled: [u32; SETTLE_BATCH],
    unsettled_len: usize,
    /// Expired buckets still being cascaded (usually none or one).
    cascading: Vec<Cascade>,
    /// Scratch space for a cascade chunk.
    scratch: Vec<Item>,
}

/// A remembered placement: every expiration in `lo..hi` belongs in list `id` of bucket
/// `bucket`; equivalently, every deadline in `lo_d + 1..=hi_d` does (checked first, so
/// that an insert into the same bucket as the previous one needs neither the rounding nor
/// the comparison with the current time).
///
/// Timers with the same timeout, scheduled close together, land in the same bucket, so
/// remembering the last choice skips the level search and the division for most inserts.
/// The range is the bucket's span clipped to the expirations its level is the finest for;
/// it is only valid while the wheel's time stands still (`lo > hi` marks it invalid).
#[derive(Clone, Copy, Debug)]
struct LastBucket {
    lo: u64,
    hi: u64,
    lo_d: u64,
    hi_d: u64,
    id: u32,
    bucket: u32,
    expiration: u64,
}

impl LastBucket {
    const INVALID: LastBucket = LastBucket {
        lo: 1,
        hi: 0,
        lo_d: 1,
        hi_d: 0,
        id: 0,
        bucket: 0,
        expiration: 0,
    };
}

impl<T> TimingWheel<T> {
    /// A wheel whose level 0 has `wheel_size` buckets of `tick_ms`, starting at `start_ms`.
    ///
    /// # Panics
    /// If `tick_ms == 0` or `wheel_size < 2`.
    pub fn new(tick_ms: u64, wheel_size: usize, start_ms: u64) -> Self {
        Self::with_capacity(tick_ms, wheel_size, start_ms, 0)
    }

    /// Like [`TimingWheel::new`], with room for `capacity` pending timers before the slab
    /// reallocates.
    pub fn with_capacity(tick_ms: u64, wheel_size: usize, start_ms: u64, capacity: usize) -> Self {
        assert!(tick_ms >= 1, "tick_ms must be at least 1");
        assert!(wheel_size >= 2, "wheel_size must be at least 2");
        let mut wheel = TimingWheel {
            tick_ms,
            wheel_size: wheel_size as u64,
            levels: Vec::new(),
            buckets: Vec::new(),
            due: List::default(),
            queue: BucketQueue::default(),
            // Room for the cancelled entries that wait to be settled, too.
            slab: Slab::with_capacity(if capacity == 0 {
                0
            } else {
                capacity + SETTLE_BATCH
            }),
            unsettled: [NIL; SETTLE_BATCH],
            unsettled_len: 0,
            next_seq: 0,
            now: start_ms.min(MAX_DEADLINE_MS),
            last: LastBucket::INVALID,
            cascading: Vec::new(),
            scratch: Vec::new(),
        };
        wheel.add_level(tick_ms, wheel.now);
        wheel
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

    /// Bytes of memory the slab has reserved (`capacity * entry size`).
    pub fn slab_bytes(&self) -> usize {
        self.slab.capacity() * Self::entry_size()
    }

    /// Size of one slab entry for this payload type, in bytes.
    pub fn entry_size() -> usize {
        Slab::<T>::bytes_per_slot()
    }

    /// When the next advance has work to do: [`now`](Self::now) if timers are already due
    /// or a cascade is in progress, else the earliest non-empty bucket's expiration; `None`
    /// if nothing is pending.
    ///
    /// That is the instant a driver should sleep until. It may be a higher-level bucket
    /// whose flush only cascades entries without firing any. O(1) after settling the
    /// pending cancellations (which may empty buckets).
    pub fn next_expiration(&mut self) -> Option<u64> {
        self.settle();
        if !self.due.is_empty() || !self.cascading.is_empty() {
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
        let deadline = deadline_ms.min(MAX_DEADLINE_MS);
        // The common case, kept short and free of calls (so that it inlines into the
        // caller without saving registers): the same bucket as the previous insert, which
        // still holds entries (so it is queued already) and has room for one more.
        let last = &self.last;
        if last.lo_d < deadline && deadline <= last.hi_d {
            let id = last.id;
            if let Some(bucket) = self.buckets.get_mut(last.bucket as usize) {
                let list = if id & 1 == 1 {
                    &mut bucket.head
                } else {
                    &mut bucket.list
                };
                // A non-empty list is in a queued bucket.
                if !list.is_empty() && list.has_room() {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    if !self.slab.has_released() {
                        return self.insert_listed(deadline, seq, value, id);
                    }
                    // SAFETY: a released slot waits (`has_released`, just above).
                    let key = unsafe { self.slab.insert_released(seq, value, id) };
                    // SAFETY: the list has room (`has_room`, above); nothing since has
                    // touched it.
                    unsafe { list.push_within_capacity(key.item(deadline)) };
                    return key;
                }
            }
        }
        self.insert_slow(deadline, value)
    }

    /// [`insert`](Self::insert) into list `id`, already chosen, when no released slot
    /// waits to be reused: a new slot at the end of the slab.
    #[inline(never)]
    fn insert_listed(&mut self, deadline: u64, seq: u64, value: T, id: u32) -> Key {
        self.insert_into(deadline, seq, value, id)
    }

    /// [`insert`](Self::insert) in general: choose the list, then list the timer there.
    #[inline(never)]
    fn insert_slow(&mut self, deadline: u64, value: T) -> Key {
        let seq = self.next_seq;
        self.next_seq += 1;
        let id = self.target(deadline);
        self.insert_into(deadline, seq, value, id)
    }

    /// Store the timer in a slot and list it in list `id`: the end of both ways out of
    /// the fast path (inlined into each, so that neither pays a call).
    #[inline(always)]
    fn insert_into(&mut self, deadline: u64, seq: u64, value: T, id: u32) -> Key {
        let key = self.slab.insert(seq, value, id);
        self.slab.append(
            list_by_id(&mut self.due, &mut self.buckets, id),
            key.item(deadline),
        );
        key
    }

    /// Cancel a pending timer, returning its value; `None` if the key is stale (the timer
    /// already fired, was cancelled, or the slot now belongs to another timer). O(1): the
    /// entry stays in its bucket as a tombstone, see the [module documentation](self).
    #[inline]
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let value = self.slab.take(key)?;
        // `unsettled_len < SETTLE_BATCH` here (it is reset on reaching it); the mask
        // only saves a bounds check.
        self.unsettled[self.unsettled_len % SETTLE_BATCH] = key.index;
        self.unsettled_len += 1;
        if self.unsettled_len == SETTLE_BATCH {
            self.settle();
        }
        Some(value)
    }

    /// Do the bookkeeping of the cancelled entries waiting for it: free their slots and
    /// count their tombstones (which may empty a list or a whole bucket). Their entries
    /// were touched by the cancels just now, so this runs from the cache.
    #[inline(never)]
    fn settle(&mut self) {
        let n = self.unsettled_len.min(SETTLE_BATCH);
        self.unsettled_len = 0;
        if n == 0 {
            return;
        }
        // Free the slots first (one tight loop over the slab, which leaves each entry's
        // list id in its place), then count the tombstones a run of equal lists at a time:
        // most cancels of a busy wheel hit the few largest lists.
        self.slab.release_batch(&mut self.unsettled[..n]);
        let mut id = self.unsettled[0];
        let mut run = 0;
        for k in 0..n {
            let next = self.unsettled[k];
            if next != id {
                self.buried(id, run);
                id = next;
                run = 0;
            }
            run += 1;
        }
        self.buried(id, run);
    }

    /// When the wheel must next be advanced for this timer: `now` if it is already due,
    /// else the expiration of the bucket it sits in (possibly a coarse bucket that will
    /// only cascade it). `None` if the key is stale. A driver that sleeps past this would
    /// be late. O(1).
    pub fn wake_time(&self, key: Key) -> Option<u64> {
        let index = self.slab.resolve(key)?;
        let list = self.slab.list_of(index);
        Some(if list == DUE {
            self.now
        } else {
            self.buckets[(list >> 1) as usize].expiration
        })
    }

    /// Count `count` new tombstones in list `id`; empty the list (and its bucket, if that
    /// is now empty too) if they were its last live entries. Lists are compacted when they
    /// are full, not here (see "Tombstones").
    #[inline]
    fn buried(&mut self, id: u32, count: usize) {
        if id == DUE {
            self.due.dead += count;
            if self.due.live() == 0 {
                self.slab.clear_dead(&mut self.due);
            }
            return;
        }
        debug_assert_ne!(id, NIL, "a live entry is always listed");
        let bucket = id >> 1;
        let b = &mut self.buckets[bucket as usize];
        let list = if id & 1 == 1 {
            &mut b.head
        } else {
            &mut b.list
        };
        list.dead += count;
        if list.live() == 0 {
            self.bury_slow(bucket, id);
        }
    }

    /// The rare part of [`buried`](Self::buried): list `id` of `bucket` has no live entry
    /// left. Empty it; if the whole bucket is now empty, it leaves the queue.
    #[inline(never)]
    fn bury_slow(&mut self, bucket: u32, id: u32) {
        let b = &mut self.buckets[bucket as usize];
        let list = if id & 1 == 1 {
            &mut b.head
        } else {
            &mut b.list
        };
        self.slab.clear_dead(list);
        if b.live() == 0 {
            self.slab.clear_dead(&mut b.head);
            self.slab.clear_dead(&mut b.list);
            self.queue.remove(bucket);
            self.cascading.retain(|c| c.bucket != bucket);
        }
    }

    /// True if `key` names a pending timer.
    pub fn contains(&self, key: Key) -> bool {
        self.slab.resolve(key).is_some()
    }

    /// The deadline of a pending timer. O(n) in the size of its bucket: the deadline is
    /// kept in the bucket's list, not in the slot a key names (see `slab.rs`), so this is
    /// meant for tests and introspection, not for a hot path.
    pub fn deadline(&self, key: Key) -> Option<u64> {
        let index = self.slab.resolve(key)?;
        let list = list_by_id_ref(&self.due, &self.buckets, self.slab.list_of(index));
        list.items
            .iter()
            .find(|item| item.index == key.index && item.stamp == key.stamp)
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
                self.cascade_chunk(cascade.bucket, usize::MAX);
                continue;
            }
            match self.queue.peek() {
                Some((expiration, bucket)) if expiration <= now => {
                    self.queue.pop();
                    self.set_time(expiration);
                    self.flush(bucket);
                }
                _ => break,
            }
        }
        self.set_time(now);
        // Nothing else to do now: move one chunk of a pending cascade. Its entries are due
        // after `now`, so this fires nothing.
        if out.len() == start {
            if let Some(&cascade) = self.cascading.first() {
                if self.cascade_chunk(cascade.bucket, CASCADE_CHUNK) {
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
        let mut lists = vec![self.due.take()];
        let mut buckets: Vec<u32> = self.cascading.drain(..).map(|c| c.bucket).collect();
        while let Some((_, bucket)) = self.queue.pop() {
            buckets.push(bucket);
        }
        for bucket in buckets {
            lists.push(self.buckets[bucket as usize].list.take());
            lists.push(self.buckets[bucket as usize].head.take());
        }
        for list in lists {
            for item in list {
                if self.slab.is_current(item) {
                    self.slab.mark_unlisted(item.index);
                    out.push(self.slab.free(item.index));
                }
            }
        }
        out
    }

    /// A picture of the levels and non-empty buckets, counting live timers only (after
    /// settling pending cancellations, hence `&mut`). O(levels + B log B).
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
            })
            .collect();
        let queued = self.queue.iter().map(|(_, id)| id);
        let cascading = self.cascading.iter().map(|c| c.bucket);
        let mut buckets: Vec<BucketSnapshot> = queued
            .chain(cascading)
            .map(|id| BucketSnapshot {
                level: (id as u64 / self.wheel_size) as usize,
                slot: (id as u64 % self.wheel_size) as usize,
                expiration_ms: self.buckets[id as usize].expiration,
                entries: self.buckets[id as usize].live(),
            })
            .collect();
        buckets.sort_by_key(|b| (b.expiration_ms, b.level, b.slot));
        WheelSnapshot {
            now_ms,
            current_time_ms: self.current_time(),
            pending: self.len(),
            due: self.due.live(),
            levels,
            buckets,
        }
    }

    /// File an entry that is in no list: into the due list, or into the finest level that
    /// covers it.
    #[inline]
    fn place(&mut self, item: Item) {
        let id = self.target(item.deadline);
        self.slab
            .push(list_by_id(&mut self.due, &mut self.buckets, id), id, item);
    }

    /// The list a timer due at `deadline` goes into: the due list, or a list of the finest
    /// bucket that covers it. A bucket about to get its first entry joins the queue.
    #[inline]
    fn target(&mut self, deadline: u64) -> u32 {
        if deadline <= self.now {
            return DUE;
        }
        // Round up to the tick so that the entry never fires before its deadline. Since
        // deadline > now >= current, the expiration is at least one tick past `current`.
        let expiration = if self.tick_ms == 1 {
            deadline
        } else {
            deadline.div_ceil(self.tick_ms) * self.tick_ms
        };
        let mut last = self.last;
        if !(last.lo <= expiration && expiration < last.hi) {
            last = self.find_bucket(expiration);
        }
        let bucket = &mut self.buckets[last.bucket as usize];
        if bucket.is_empty() {
            bucket.expiration = last.expiration;
            self.queue.push(last.bucket, last.expiration);
        }
        debug_assert_eq!(
            bucket.expiration, last.expiration,
            "bucket holds two rounds"
        );
        last.id
    }

    /// The bucket and list for an expiration past the current time: the finest level that
    /// covers it, creating overflow levels as needed; its head list if it falls in the
    /// bucket's first tick of the level below. Remembers the choice in `self.last`.
    #[inline(never)]
    fn find_bucket(&mut self, expiration: u64) -> LastBucket {
        let mut level = 0;
        while expiration
            >= self.levels[level]
                .current
                .saturating_add(self.levels[level].interval)
        {
            level += 1;
            if level == self.levels.len() {
                let below = self.levels[level - 1];
                self.add_level(below.interval, below.current);
            }
        }
        let l = &self.levels[level];
        // How many buckets ahead of the current one: 1..wheel_size. `current` is a multiple
        // of `tick`, so this is `expiration / tick - current_vid`. The 32-bit division is the
        // common case and is cheaper than a 64-bit one.
        let offset = expiration - l.current;
        let ahead = if l.tick == 1 {
            offset
        } else if offset <= u32::MAX as u64 && l.tick <= u32::MAX as u64 {
            (offset as u32 / l.tick as u32) as u64
        } else {
            offset / l.tick
        };
        let mut slot = l.current_slot + ahead;
        if slot >= self.wheel_size {
            slot -= self.wheel_size;
        }
        let bucket_expiration = l.current + ahead * l.tick;
        let bucket = (level as u64 * self.wheel_size + slot) as u32;
        // The expirations this list takes: the bucket's span, minus what finer levels
        // cover, split at the end of the head (the first tick of the level below).
        let mut lo = bucket_expiration;
        let mut hi = bucket_expiration
            .saturating_add(l.tick)
            .min(l.current.saturating_add(l.interval));
        let mut id = bucket * 2;
        if level > 0 {
            let below = &self.levels[level - 1];
            lo = lo.max(below.current.saturating_add(below.interval));
            let head_end = bucket_expiration.saturating_add(below.tick);
            if expiration < head_end {
                hi = hi.min(head_end);
                id += 1;
            } else {
                lo = lo.max(head_end);
            }
        }
        // The deadlines whose rounded-up expiration lies in `lo..hi`, after `now`.
        let t = self.tick_ms;
        let lo_d = (lo.div_ceil(t) * t - t).max(self.now);
        let hi_d = if hi == 0 { 0 } else { (hi - 1) / t * t };
        self.last = LastBucket {
            lo,
            hi,
            lo_d,
            hi_d,
            id,
            bucket,
            expiration: bucket_expiration,
        };
        self.last
    }

    /// Re-place every entry of a bucket whose expiration has come.
    ///
    /// Entries are handled in chunks: first every entry of the chunk is read (the loads are
    /// independent, so their cache misses overlap), then each is placed, now from cache.
    /// Placing straight away would leave the processor waiting on one miss at a time.
    ///
    /// On level 0 that is the whole bucket (it is due). On coarser levels only the head is
    /// placed now; the rest is registered as a pending cascade (see "Incremental
    /// cascades").
    fn flush(&mut self, bucket: u32) {
        let level = (bucket as u64 / self.wheel_size) as usize;
        let head = self.buckets[bucket as usize].head.take();
        self.place_all(&head);
        let used = head.len();
        self.buckets[bucket as usize].head.recycle(head, used);
        if level == 0 {
            let items = self.buckets[bucket as usize].list.take();
            self.place_all(&items);
            let used = items.len();
            self.buckets[bucket as usize].list.recycle(items, used);
        } else if self.buckets[bucket as usize].list.live() > 0 {
            let due_by = self.buckets[bucket as usize].expiration + self.levels[level - 1].tick;
            self.cascading.push(Cascade { bucket, due_by });
        } else {
            // Tombstones only: nothing to cascade.
            self.slab
                .clear_dead(&mut self.buckets[bucket as usize].list);
        }
    }

    /// Place every listed entry (taken out of its list), a chunk at a time, and free the
    /// tombstones among them. Returns how many tombstones there were.
    fn place_all(&mut self, items: &[Item]) -> usize {
        let mut dead = 0;
        for chunk in items.chunks(PREFETCH_CHUNK) {
            self.touch_all(chunk);
            for &item in chunk {
                if self.slab.is_current(item) {
                    self.slab.mark_unlisted(item.index);
                    self.place(item);
                } else {
                    dead += 1;
                }
            }
        }
        dead
    }

    /// Move up to `max` entries of a cascading bucket's list to finer levels. True if the
    /// list is now empty (the cascade is over).
    fn cascade_chunk(&mut self, bucket: u32, max: usize) -> bool {
        let mut chunk = std::mem::take(&mut self.scratch);
        {
            let items = &mut self.buckets[bucket as usize].list.items;
            let start = items.len().saturating_sub(max);
            chunk.extend(items.drain(start..));
        }
        let dead = self.place_all(&chunk);
        chunk.clear();
        self.scratch = chunk;
        let list = &mut self.buckets[bucket as usize].list;
        list.dead -= dead;
        if list.live() == 0 {
            // Only tombstones left (or nothing): the cascade is over.
            self.slab.clear_dead(list);
        }
        list.is_empty()
    }

    /// Start loading the slot of every listed entry that may be current, so that their
    /// cache misses overlap (placing or firing an entry writes its slot).
    fn touch_all(&self, items: &[Item]) {
        for &item in items {
            if self.slab.tag_matches(item) {
                self.slab.prefetch(item);
            }
        }
    }

    /// Hand out every entry of the due list.
    fn drain_due(&mut self, out: &mut Vec<Expired<T>>) {
        if self.due.is_empty() {
            return;
        }
        let items = self.due.take();
        out.reserve(items.len());
        for chunk in items.chunks(PREFETCH_CHUNK) {
            self.touch_all(chunk);
            for &item in chunk {
                if !self.slab.is_current(item) {
                    continue;
                }
                self.slab.mark_unlisted(item.index);
                out.push(Expired {
                    deadline_ms: item.deadline,
                    seq: self.slab.seq(item),
                    value: self.slab.free(item.index),
                });
            }
        }
        let used = items.len();
        self.due.recycle(items, used);
    }

    /// Move every level's clock forward to `now` (never backwards).
    fn set_time(&mut self, now: u64) {
        if now > self.now {
            self.last = LastBucket::INVALID;
        }
        self.now = self.now.max(now);
        if now >= self.levels[0].current + self.tick_ms {
            for level in &mut self.levels {
                level.set_time(now, self.wheel_size);
            }
        }
    }

    fn add_level(&mut self, tick: u64, now: u64) {
        self.levels.push(Level::new(tick, self.wheel_size, now));
        let buckets = self.levels.len() * self.wheel_size as usize;
        self.buckets.resize_with(buckets, || Bucket {
            list: List::default(),
            head: List::default(),
            expiration: 0,
        });
        self.queue.reserve_buckets(buckets);
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
mod tests {
    use super::*;

    fn fire(wheel: &mut TimingWheel<u32>, now: u64) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        wheel.advance_to(now, &mut out);
        out.into_iter().map(|e| (e.deadline_ms, e.value)).collect()
    }

    #[test]
    fn overflow_levels_are_created_on_demand() {
        let mut wheel = TimingWheel::new(1, 20, 0);
        assert_eq!(wheel.levels(), 1);
        wheel.insert(19, 0);
        assert_eq!(wheel.levels(), 1);
        wheel.insert(20, 1);
        assert_eq!(wheel.levels(), 2);
        wheel.insert(30_000, 2);
        // 20 ms, 400 ms, 8 s, 160 s
        assert_eq!(wheel.levels(), 4);
        let snap = wheel.snapshot(0);
        let ticks: Vec<u64> = snap.levels.iter().map(|l| l.tick_ms).collect();
        assert_eq!(ticks, vec![1, 20, 400, 8000]);
        let placed: Vec<(usize, usize, u64)> = snap
            .buckets
            .iter()
            .map(|b| (b.level, b.slot, b.expiration_ms))
            .collect();
        assert_eq!(placed, vec![(0, 19, 19), (1, 1, 20), (3, 3, 24_000)]);
    }

    #[test]
    fn cascade_fires_exactly_at_the_deadline() {
        let mut wheel = TimingWheel::new(1, 4, 0);
        for d in [3, 4, 17, 64, 65, 1000] {
            wheel.insert(d, d as u32);
        }
        let mut fired = Vec::new();
        for t in 0..=1000 {
            for (deadline, _) in fire(&mut wheel, t) {
                assert_eq!(deadline, t);
                fired.push(deadline);
            }
        }
        assert_eq!(fired, vec![3, 4, 17, 64, 65, 1000]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration(), None);
    }

    #[test]
    fn coarse_tick_rounds_up_never_early() {
        let mut wheel = TimingWheel::new(10, 4, 0);
        wheel.insert(11, 11);
        wheel.insert(20, 20);
        assert!(fire(&mut wheel, 19).is_empty());
        assert_eq!(fire(&mut wheel, 20), vec![(11, 11), (20, 20)]);
    }

    #[test]
    fn remove_empties_the_bucket_queue() {
        let mut wheel = TimingWheel::new(1, 20, 0);
        let k = wheel.insert(100, 1);
        assert_eq!(wheel.next_expiration(), Some(100));
        assert_eq!(wheel.remove(k), Some(1));
        assert_eq!(wheel.remove(k), None);
        assert_eq!(wheel.next_expiration(), None);
        assert!(wheel.snapshot(0).buckets.is_empty());
    }

    #[test]
    fn far_deadlines_are_clamped_not_overflowed() {
        let mut wheel = TimingWheel::new(1, 2, 0);
        let k = wheel.insert(u64::MAX, 7);
        assert_eq!(wheel.deadline(k), Some(MAX_DEADLINE_MS));
        assert!(fire(&mut wheel, MAX_DEADLINE_MS - 1).is_empty());
        assert_eq!(fire(&mut wheel, u64::MAX), vec![(MAX_DEADLINE_MS, 7)]);
    }

    #[test]
    fn big_cascades_proceed_in_chunks_and_fire_on_time() {
        let mut wheel = TimingWheel::new(1, 20, 0);
        let mut keys = Vec::new();
        let mut x = 12345u64;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.push((wheel.insert(400 + x % 400, i), 400 + x % 400));
        }
        // All in one level-2 bucket [400, 800).
        assert_eq!(wheel.snapshot(0).buckets.len(), 1);
        let mut expected: Vec<(u64, u32)> = Vec::new();
        for (i, &(key, deadline)) in keys.iter().enumerate() {
            if i % 7 == 0 {
                assert!(wheel.remove(key).is_some());
            } else {
                expected.push((deadline, i as u32));
            }
        }
        let mut fired = Vec::new();
        let mut out = Vec::new();
        for t in 0..=800 {
            // At 400 only the head (deadlines 400..420) is placed; the rest follows in
            // chunks on later advances while nothing is due, and must never be late.
            wheel.advance_to(t, &mut out);
            for e in out.drain(..) {
                assert_eq!(e.deadline_ms, t, "fired exactly at its deadline");
                fired.push((e.deadline_ms, e.value));
            }
            if t == 400 {
                assert_eq!(wheel.next_expiration(), Some(400), "cascade pending");
                // Cancelling entries of a cascade in progress works too.
                for &(key, _) in keys.iter().skip(1).step_by(7).take(100) {
                    assert!(wheel.remove(key).is_some());
                }
                let gone: std::collections::HashSet<u32> = (1..keys.len())
                    .step_by(7)
                    .take(100)
                    .map(|i| i as u32)
                    .collect();
                expected.retain(|(_, v)| !gone.contains(v));
            }
        }
        expected.sort();
        assert_eq!(fired, expected);
        assert!(wheel.is_empty());
    }

    #[test]
    fn a_bucket_emptied_by_cancels_still_fires_the_next_timer_put_in_it() {
        // Fill a bucket's list to its capacity, cancel every timer in it (they are counted
        // later, in a batch), then add one more to the same bucket: the bucket must stay
        // queued, and the timer fire.
        let mut wheel = TimingWheel::new(1, 20, 0);
        let mut keys = vec![wheel.insert(1_000, 0)];
        let capacity = wheel
            .buckets
            .iter()
            .map(|b| b.list.items.capacity())
            .sum::<usize>();
        while keys.len() < capacity {
            keys.push(wheel.insert(1_000, keys.len() as u32));
        }
        for key in keys {
            assert!(wheel.remove(key).is_some());
        }
        wheel.insert(1_001, 99);
        let mut out = Vec::new();
        assert_eq!(wheel.advance_to(2_000, &mut out), 1);
        assert_eq!((out[0].deadline_ms, out[0].value), (1_001, 99));
    }

    #[test]
    fn a_tombstone_matching_its_reused_slots_tag_is_still_dropped() {
        // One slot, reused over and over: 100 cancelled timers leave tombstones for it
        // in bucket A (generations 0-99), then 206 more pass through bucket B, so the
        // next occupant has generation 306, whose low byte (50) matches a tombstone's.
        // When A is compacted, that tombstone must not be taken for the live timer.
        let mut wheel = TimingWheel::new(1, 20, 0);
        let settle = |w: &mut TimingWheel<u32>| {
            w.next_expiration();
        };
        // A live timer keeps A's list from being emptied along the way.
        wheel.insert(30_000, 999);
        let mut slot = None;
        for i in 0..100 {
            let key = wheel.insert(30_000, i);
            assert_eq!(*slot.get_or_insert(key.index), key.index, "the same slot");
            wheel.remove(key);
            settle(&mut wheel);
        }
        for i in 0..206 {
            let key = wheel.insert(5_000, i);
            assert_eq!(Some(key.index), slot);
            wheel.remove(key);
            settle(&mut wheel);
        }
        let live = wheel.insert(30_000, 1_000);
        assert_eq!(Some(live.index), slot);
        assert_eq!(live.stamp as u8, 306u32 as u8, "generation 306 wraps to 50");
        // Fill A's list until it compacts on the next push (full, and at least half
        // tombstones); one tombstone then matches its slot's tag besides the live items.
        let mut expect = vec![999, 1_000];
        let a = wheel.slab.list_of(live.index);
        let list = |w: &TimingWheel<u32>| list_by_id_ref(&w.due, &w.buckets, a).items.len();
        let mut i = 2_000;
        loop {
            let l = list_by_id_ref(&wheel.due, &wheel.buckets, a);
            if l.items.len() == l.items.capacity() {
                break;
            }
            wheel.insert(30_000, i);
            expect.push(i);
            i += 1;
        }
        let before = list(&wheel);
        wheel.insert(30_000, i);
        expect.push(i);
        assert!(list(&wheel) < before, "compacted");
        assert_eq!(list(&wheel), expect.len(), "only live items are left");
        let mut out = Vec::new();
        wheel.advance_to(30_000, &mut out);
        let fired: Vec<u32> = out.iter().map(|e| e.value).collect();
        assert_eq!(fired, expect);
    }

    #[test]
    fn every_insert_path_into_one_bucket_counts_and_fires() {
        // Inserts into the bucket the previous insert chose take one of three paths: a
        // new slot at the end of the slab, a released slot reused in place, or (when the
        // list is full) the general path, which makes room. All must count and fire.
        let mut wheel = TimingWheel::new(1, 20, 0);
        let mut keys = Vec::new();
        for i in 0..1_000u32 {
            // New slots only: nothing has been released yet.
            keys.push(wheel.insert(5_000 + u64::from(i % 7), i));
            assert_eq!(wheel.len(), i as usize + 1);
        }
        // Cancel every other timer (settled in batches), then refill the released slots:
        // the list fills up and makes room again along the way.
        for key in keys.iter().step_by(2) {
            assert!(wheel.remove(*key).is_some());
        }
        assert_eq!(wheel.len(), 500);
        for i in 1_000..1_600u32 {
            wheel.insert(5_000 + u64::from(i % 7), i);
        }
        assert_eq!(wheel.len(), 1_100);
        let fired = fire(&mut wheel, 5_006);
        assert_eq!(fired.len(), 1_100);
        assert!(wheel.is_empty());
        let mut expected: Vec<(u64, u32)> = (1..1_000)
            .step_by(2)
            .chain(1_000..1_600)
            .map(|i| (5_000 + u64::from(i % 7), i))
            .collect();
        // Due-time order; equal deadlines in insertion order.
        expected.sort_by_key(|&(deadline, i)| (deadline, i));
        assert_eq!(fired, expected);
    }

    #[test]
    fn a_list_that_keeps_receiving_timers_reuses_its_buffer() {
        // Requests with the same timeout keep arriving in one bucket while older ones
        // complete early: the list compacts itself instead of growing without end.
        let mut wheel = TimingWheel::new(1, 20, 0);
        let mut keys = std::collections::VecDeque::new();
        let mut x = 7u64;
        for i in 0..200_000u32 {
            keys.push_back(wheel.insert(30_000, i));
            if keys.len() > 1_000 {
                // Cancel a random one of the pending timers.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % keys.len() as u64) as usize;
                let key = keys.swap_remove_back(at).unwrap();
                assert!(wheel.remove(key).is_some());
            }
        }
        assert_eq!(wheel.len(), 1_000);
        let capacity: usize = wheel
            .buckets
            .iter()
            .map(|b| b.list.items.capacity() + b.head.items.capacity())
            .sum();
        assert!(
            capacity <= 4 * 1_000 + 4 * COMPACT_MIN,
            "capacity {capacity}"
        );
        let mut out = Vec::new();
        wheel.advance_to(30_000, &mut out);
        assert_eq!(out.len(), 1_000);
    }

    #[test]
    fn tombstones_are_compacted_and_never_fire() {
        use std::collections::BTreeMap;
        let mut wheel = TimingWheel::new(1, 20, 0);
        // The reference: (deadline, insertion order) -> value.
        let mut model: BTreeMap<(u64, u64), u32> = BTreeMap::new();
        let mut keys: Vec<(Key, u64, u64)> = Vec::new();
        let mut x = 99u64;
        let mut next = 0u64;
        let mut now = 0u64;
        let mut out = Vec::new();
        let mut peak = 0;
        for round in 0..40u64 {
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if x % 3 != 0 || keys.is_empty() {
                    let deadline = now + 1 + x % 3_000;
                    let key = wheel.insert(deadline, next as u32);
                    model.insert((deadline, next), next as u32);
                    keys.push((key, deadline, next));
                    next += 1;
                } else {
                    let (key, deadline, seq) = keys.swap_remove((x / 3) as usize % keys.len());
                    let expect = model.remove(&(deadline, seq));
                    assert_eq!(wheel.remove(key), expect, "cancel result");
                    assert_eq!(wheel.remove(key), None, "second cancel");
                }
            }
            assert_eq!(wheel.len(), model.len());
            let snap = wheel.snapshot(now);
            let listed: usize = snap.buckets.iter().map(|b| b.entries).sum();
            assert_eq!(
                listed + snap.due,
                model.len(),
                "snapshots count live timers"
            );
            // Tombstones stay bounded: a list is compacted when full, emptied when all its
            // entries are tombstones and recycled when flushed, so what is listed stays
            // within a small multiple of the most timers ever pending.
            peak = peak.max(model.len());
            let items: usize = wheel.due.items.len()
                + wheel
                    .buckets
                    .iter()
                    .map(|b| b.list.items.len() + b.head.items.len())
                    .sum::<usize>();
            let lists = 1 + 2 * wheel.buckets.len();
            assert!(items <= 4 * peak + lists * COMPACT_MIN, "{items} listed");
            assert!(wheel.slab.capacity() <= 2 * (model.len() + 4_000));
            // Fire what is due by the next step and compare with the model.
            now += 1 + round * 37 % 500;
            wheel.advance_to(now, &mut out);
            let fired: Vec<(u64, u32)> = out.drain(..).map(|e| (e.deadline_ms, e.value)).collect();
            let due: Vec<((u64, u64), u32)> =
                model.range(..(now + 1, 0)).map(|(&k, &v)| (k, v)).collect();
            for (k, _) in &due {
                model.remove(k);
            }
            let expect: Vec<(u64, u32)> = due.into_iter().map(|((d, _), v)| (d, v)).collect();
            assert_eq!(fired, expect, "fired in due order, cancelled ones never");
            keys.retain(|&(_, d, _)| d > now);
        }
    }

    #[test]
    fn drain_returns_everything() {
        let mut wheel = TimingWheel::new(1, 20, 5);
        for d in [0, 5, 6, 50, 5000] {
            wheel.insert(d, d as u32);
        }
        let mut all = wheel.drain();
        all.sort();
        assert_eq!(all, vec![0, 5, 6, 50, 5000]);
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration(), None);
    }
}
