//! Slab storage and index lists: where the wheel's timers live.
//!
//! In Kafka every pending timer is a `TimerTaskEntry` object on the JVM heap, and each
//! bucket (`TimerTaskList`) is a circular doubly linked list of those objects. Adding a
//! timer allocates; cancelling unlinks the object and leaves it to the garbage collector.
//!
//! Here every pending timer occupies one *slot* of a `Vec` (the *slab*), and a bucket is
//! a [`List`]: a vector of [`Item`]s, each naming a slot, the stamp of the timer that was
//! listed there and that timer's deadline. A slot knows which list its timer is in but not
//! where in it: a cancelled timer is not unlinked. Its slot is freed, and its item stays
//! listed as a *tombstone* until the list is flushed or compacted (see `wheel.rs`); an item
//! is current only while its slot is occupied by the timer with its stamp. That gives:
//!
//! * **O(1) insert** (push the item at the end of the list) and **O(1) cancel** touching
//!   one slot (check the stamp, take the value out; later, from the cache, the owner
//!   [`release`](Slab::release)s it onto the free list), with no allocation per timer once
//!   the vectors have grown;
//! * **warm slot reuse**: the free list is last in, first out, so the next inserts reuse
//!   the slots just cancelled, still in the cache. Everything an insert writes about a
//!   timer is in its slot (warm) or its item (at the end of a list, warm), so an insert
//!   misses the cache nowhere;
//! * **small slots**: a slot holds only what a cancel needs (stamp, list id, the high
//!   bits of the insertion number, value: 16 bytes for a payload of up to 4 bytes). The
//!   deadline, which only placements and flushes read, travels in the item. With a million
//!   timers a random cancel then hits a 16 MiB array, which a server's last-level cache
//!   largely holds; with the deadline in the slot it would be 24 or 32 MiB, and measurably
//!   slower (see the crate README);
//! * **cache-friendly flushes and compactions**: firing, cascading or compacting a list
//!   reads its items in order, deadlines included. A compaction decides whether an item is
//!   current from the *tags* (a byte per slot: the generation of its occupant, or of its
//!   next one once released), small enough to stay cached, and never reads a slot (see
//!   [`Slab::compact`]). A flush reads the slots of the items it moves, a chunk
//!   ahead so that the misses overlap. Walking a linked list instead is one dependent miss
//!   after another;
//! * **stale-key detection**: a [`Key`] (like an [`Item`]) carries its timer's *stamp*:
//!   the low 24 bits of its insertion number (`seq`) above an 8-bit count of the slot's
//!   occupants. A key whose timer already fired or was cancelled (its slot perhaps reused
//!   by a later timer) no longer matches and is refused instead of cancelling an unrelated
//!   timer. A mix-up would need the slot to have been reused a multiple of 256 times, by
//!   a timer inserted a multiple of 2^24 insertions later, while the old key (or
//!   tombstone) is still around.
//!
//! Slots are aligned to 16 bytes, so that one never straddles two cache lines: 16 bytes
//! with a payload of up to 4 bytes, 32 with a 16-byte payload such as
//! `Arc<dyn TimerTask>`.
//!
//! Invariants (checked by the unit tests and, in debug builds, by `debug_assert!`):
//! * an occupied slot has `value: Some(_)`, the low byte of its stamp as its tag, and
//!   exactly one current item, in the list its `link` names (except transiently while its
//!   owner moves it);
//! * a released slot has `value: None`, is on the free list, and has as its tag the low
//!   byte its next occupant's stamp will have, which no item of its past occupants carries
//!   unless the slot has had a multiple of 256 occupants since;
//! * between [`take`](Slab::take) (or [`vacate`](Slab::vacate)) and
//!   [`release`](Slab::release) a slot has `value: None` but keeps its stamp, tag and list:
//!   its owner has yet to count the tombstone, and until then the item counts as live in
//!   its list (see [`Slab::compact`]);
//! * `len` is the number of occupied slots.
//!
//! Costs: everything O(1) (amortised where a `Vec` grows); memory is `capacity *`
//! [`bytes_per_slot`](Slab::bytes_per_slot), plus 16 bytes per listed item.

/// The "null" index: "not in a list".
pub(crate) const NIL: u32 = u32::MAX;

/// Names one timer in a [`TimingWheel`](crate::TimingWheel): its slot index plus a stamp
/// (the low bits of its insertion number and of its slot's occupant count).
///
/// Keys are `Copy` and 8 bytes; a key whose timer is gone is *stale* and every operation
/// on it is a harmless no-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) stamp: u32,
}

impl Key {
    /// The list item for this key's timer, due at `deadline`.
    #[inline]
    pub(crate) fn item(self, deadline: u64) -> Item {
        Item {
            index: self.index,
            stamp: self.stamp,
            deadline,
        }
    }
}

/// One pending timer's slot: what a cancel touches. 16 bytes for a payload of up to 4
/// bytes (or one with a niche, like `Option<NonZeroU32>`), 32 for a 16-byte payload such
/// as `Arc<dyn TimerTask>`. Aligned so that it never straddles two cache lines.
#[repr(align(16))]
pub(crate) struct Slot<T> {
    /// The occupant's stamp (the [`Key`] stamp): see [`stamp_for`].
    stamp: u32,
    /// Occupied: which list the timer is in (the owner decides what the ids mean), or
    /// [`NIL`]. Vacant and released: the next slot on the free list, or [`NIL`].
    link: u32,
    /// The occupant's insertion number above the 24 bits its stamp holds.
    seq_hi: u32,
    /// The payload; `None` while the slot is vacant.
    value: Option<T>,
}

/// One listed timer: its slot, the stamp of the timer that was listed and that timer's
/// deadline. It is a tombstone once that timer is gone (the slot is vacant or holds a
/// later timer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) index: u32,
    pub(crate) stamp: u32,
    /// When the timer is due, in milliseconds on the wheel's clock.
    pub(crate) deadline: u64,
}

/// A list of items, some of which may be tombstones: O(1) push, iteration in memory
/// order, compaction in one pass.
#[derive(Clone, Debug, Default)]
pub(crate) struct List {
    pub(crate) items: Vec<Item>,
    /// How many of `items` are tombstones.
    pub(crate) dead: usize,
}

impl List {
    /// True if the list holds no entry, live or tombstone.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// True if one more item fits without growing or compacting (see
    /// [`Slab::append`]).
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.items.len() < self.items.capacity()
    }

    /// Push `item` into the spare capacity: the insert fast path, which has checked
    /// [`has_room`](List::has_room) already and so needs no call to grow.
    ///
    /// # Safety
    /// The list must have room ([`has_room`](List::has_room)).
    #[inline]
    pub(crate) unsafe fn push_within_capacity(&mut self, item: Item) {
        debug_assert!(self.has_room());
        let len = self.items.len();
        // SAFETY: the caller guarantees `len < capacity`, so the write lands in the
        // buffer's spare capacity and the new length covers initialised items only.
        unsafe {
            self.items.as_mut_ptr().add(len).write(item);
            self.items.set_len(len + 1);
        }
    }

    /// Number of live (occupied) entries.
    pub(crate) fn live(&self) -> usize {
        self.items.len() - self.dead
    }

    /// Make room for more items: double a small buffer, but grow a large one by a quarter,
    /// so that a list holding most of a million timers does not carry up to as many again
    /// in spare capacity. Still amortised O(1) per push (a geometric growth), and cheap:
    /// a large buffer is reallocated by remapping its pages, not by copying them.
    #[cold]
    #[inline(never)]
    pub(crate) fn grow(&mut self) {
        let cap = self.items.capacity();
        let more = if cap < LARGE_LIST {
            cap.max(8)
        } else {
            cap / 4
        };
        self.items.reserve_exact(more);
    }

    /// Take the indices out (live and tombstones), leaving the list empty (but keeping a
    /// spare buffer is up to the caller: see [`List::recycle`]).
    pub(crate) fn take(&mut self) -> Vec<Item> {
        self.dead = 0;
        std::mem::take(&mut self.items)
    }

    /// Give an emptied buffer back so the next round of pushes does not reallocate. A
    /// buffer much larger than the `used` entries it last held is shrunk, so one burst does
    /// not pin memory forever.
    pub(crate) fn recycle(&mut self, mut buffer: Vec<Item>, used: usize) {
        buffer.clear();
        let keep = (2 * used).max(16);
        if buffer.capacity() > 2 * keep {
            buffer.shrink_to(keep);
        }
        if self.items.is_empty() && self.items.capacity() < buffer.capacity() {
            self.items = buffer;
        }
    }
}

use crate::wheel::COMPACT_MIN;

/// How many low bits of a timer's insertion number its stamp holds (see [`stamp_for`]).
const SEQ_IN_STAMP: u32 = 24;

/// The stamp of a slot's next occupant, inserted as number `seq`, given the stamp of the
/// previous occupant: the low 24 bits of `seq` above an 8-bit generation that counts the
/// slot's occupants. Consecutive occupants of a slot therefore always differ in the low
/// byte, which is all a compaction compares (see [`Slab::compact`]); keys compare all 32
/// bits. The insertion number is the stamp's 24 bits plus the slot's `seq_hi`, 56 bits in
/// all, enough for a million insertions a second for two thousand years.
#[inline]
fn stamp_for(seq: u64, previous: u32) -> u32 {
    ((seq as u32) << 8) | u32::from(next_generation(previous))
}

/// The generation byte of the occupant after the one whose stamp is `previous`.
#[inline]
fn next_generation(previous: u32) -> u8 {
    previous.wrapping_add(1) as u8
}

/// A list at least this long (64 KiB of items) grows by a quarter instead of doubling.
const LARGE_LIST: usize = 4096;

/// A growable array of slots with a free list and a tag per slot.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// First released vacant slot (the free list runs through `Slot::link`), or [`NIL`].
    free_head: u32,
    /// `tags[i]` is the low byte (the generation) of slot `i`'s stamp while it is
    /// occupied, and the one its next occupant's stamp will have while it is vacant (it is
    /// written on release, so that inserts do not touch it): a dense copy that compactions
    /// read, 1 byte a slot, so that it stays in the cache.
    tags: Vec<u8>,
    len: usize,
}

impl<T> Slab<T> {
    /// An empty slab with room for `capacity` timers before it reallocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let slots = Vec::with_capacity(capacity);
        advise_huge_pages(&slots);
        Slab {
            slots,
            free_head: NIL,
            tags: Vec::with_capacity(capacity),
            len: 0,
        }
    }

    /// Bytes per timer in the slab: a slot and its tag. Its item, in a list,
    /// is another `size_of::<Item>()` (16).
    pub(crate) fn bytes_per_slot() -> usize {
        std::mem::size_of::<Slot<T>>() + 1
    }

    /// Number of occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of slots the slab can hold without reallocating.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Store a value in a free slot (reusing the most recently released one) and return
    /// its key. The caller must list it in list `link`, with an item made by
    /// [`Key::item`].
    #[inline]
    pub(crate) fn insert(&mut self, seq: u64, value: T, link: u32) -> Key {
        if self.has_released() {
            // SAFETY: checked just above.
            unsafe { self.insert_released(seq, value, link) }
        } else {
            self.insert_new(seq, value, link)
        }
    }

    /// True if a released slot is waiting to be reused, so that
    /// [`insert_released`](Slab::insert_released) applies.
    #[inline]
    pub(crate) fn has_released(&self) -> bool {
        self.free_head != NIL
    }

    /// [`insert`](Slab::insert) into the most recently released slot. Writes one slot,
    /// calls nothing and allocates nothing: the insert fast path.
    ///
    /// # Safety
    /// A released slot must be waiting ([`has_released`](Slab::has_released)).
    #[inline]
    pub(crate) unsafe fn insert_released(&mut self, seq: u64, value: T, link: u32) -> Key {
        let index = self.free_head;
        let at = index as usize;
        debug_assert!(at < self.slots.len() && self.slots[at].value.is_none());
        self.len += 1;
        // SAFETY: the caller guarantees the free list is not empty, and it only holds
        // indices of slots that exist (`release` indexes the slot before linking it).
        let slot = unsafe { self.slots.get_unchecked_mut(at) };
        self.free_head = slot.link;
        let stamp = stamp_for(seq, slot.stamp);
        *slot = Slot {
            stamp,
            link,
            seq_hi: (seq >> SEQ_IN_STAMP) as u32,
            value: Some(value),
        };
        debug_assert_eq!(self.tags[at], stamp as u8, "tag set on release");
        Key { index, stamp }
    }

    /// [`insert`](Slab::insert) into a new slot at the end.
    #[inline(never)]
    fn insert_new(&mut self, seq: u64, value: T, link: u32) -> Key {
        let stamp = stamp_for(seq, u32::MAX);
        let index = u32::try_from(self.slots.len())
            .ok()
            .filter(|&i| i != NIL)
            .expect("timing wheel holds at most u32::MAX - 1 timers");
        if self.slots.len() == self.slots.capacity() {
            self.grow();
        }
        self.len += 1;
        self.slots.push(Slot {
            stamp,
            link,
            seq_hi: (seq >> SEQ_IN_STAMP) as u32,
            value: Some(value),
        });
        self.tags.push(stamp as u8);
        Key { index, stamp }
    }

    /// Double the capacity (at least 64 slots), advising huge pages for the new buffer.
    #[cold]
    fn grow(&mut self) {
        let more = self.slots.capacity().max(64);
        self.slots.reserve_exact(more);
        self.tags
            .reserve_exact(self.slots.capacity() - self.tags.len());
        advise_huge_pages(&self.slots);
    }

    /// The slot's index if `key` still names the timer it was issued for.
    #[inline]
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let slot = self.slots.get(key.index as usize)?;
        (slot.stamp == key.stamp && slot.value.is_some()).then_some(key.index)
    }

    /// Take the value out of the slot `key` names, if `key` is not stale: the first half
    /// of a cancel (see [`vacate`](Slab::vacate)); the slot's index is `key.index`.
    #[inline]
    pub(crate) fn take(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.stamp != key.stamp {
            return None;
        }
        let value = slot.value.take()?;
        self.len -= 1;
        Some(value)
    }

    /// The full insertion number of the timer listed as `item`, which must be current.
    #[inline]
    pub(crate) fn seq(&self, item: Item) -> u64 {
        (u64::from(self.slots[item.index as usize].seq_hi) << SEQ_IN_STAMP)
            | u64::from(item.stamp >> 8)
    }

    /// The list an occupied slot is in.
    #[inline]
    pub(crate) fn list_of(&self, index: u32) -> u32 {
        self.slots[index as usize].link
    }

    /// True if `item` names the timer that occupies its slot (it is not a tombstone).
    /// The tag is checked first, so a list of mostly tombstones is sifted without reading
    /// their slots. Meant for when no cancelled slot awaits its release; compaction, which
    /// may run in between, uses [`Slab::counts_as_live`].
    #[inline]
    pub(crate) fn is_current(&self, item: Item) -> bool {
        self.tag_matches(item) && {
            let slot = &self.slots[item.index as usize];
            slot.value.is_some() & (slot.stamp == item.stamp)
        }
    }

    /// True if `item`'s generation byte matches its slot's tag: always so for a current
    /// item, rarely for a tombstone (see [`Slab::compact`]). Reads only the small tag
    /// array, so a list of mostly tombstones is sifted without touching their slots.
    #[inline]
    pub(crate) fn tag_matches(&self, item: Item) -> bool {
        self.tags[item.index as usize] == item.stamp as u8
    }

    /// True if `item` still counts as live in its list's accounting: its timer occupies
    /// the slot, or was taken out of it but not yet [`release`](Slab::release)d (its
    /// tombstone is counted on release). The tag tells a released slot (it already has the
    /// next generation's tag) from one awaiting release; the stamp tells a later occupant
    /// with the same tag.
    #[inline]
    fn counts_as_live(&self, item: Item) -> bool {
        let index = item.index as usize;
        (self.tags[index] == item.stamp as u8) & (self.slots[index].stamp == item.stamp)
    }

    /// Ask the processor to start loading the slot `item` names.
    #[inline]
    pub(crate) fn prefetch(&self, item: Item) {
        if let Some(slot) = self.slots.get(item.index as usize) {
            prefetch(slot);
        }
    }

    /// Free an occupied slot, returning its value: it goes on the free list at once,
    /// whether or not its item is still listed (the item is a tombstone from now on).
    /// Outstanding keys become stale (the slot is vacant, and a later occupant has another
    /// insertion number).
    #[inline]
    pub(crate) fn free(&mut self, index: u32) -> T {
        let value = self.vacate(index);
        self.release(index);
        value
    }

    /// The first half of [`free`](Slab::free): take the value out, making outstanding keys
    /// stale at once. Only `len` drops now; the slot is reused only after its owner has
    /// [`release`](Slab::release)d it.
    #[inline]
    pub(crate) fn vacate(&mut self, index: u32) -> T {
        self.len -= 1;
        self.slots[index as usize]
            .value
            .take()
            .expect("vacating a vacant slot")
    }

    /// The second half of [`free`](Slab::free): put a vacated slot on the free list (its
    /// item, if still listed, is a tombstone from now on). Returns the list it was in.
    #[inline]
    pub(crate) fn release(&mut self, index: u32) -> u32 {
        let mut one = [index];
        self.release_batch(&mut one);
        one[0]
    }

    /// [`release`](Slab::release) every slot in `batch`, replacing each index with the id
    /// of the list its item is in (where its tombstone is to be counted). One tight pass:
    /// the slots were touched by their cancels just before, so this runs from the cache.
    #[inline]
    pub(crate) fn release_batch(&mut self, batch: &mut [u32]) {
        let slots = &mut self.slots[..];
        let tags = &mut self.tags[..];
        let mut free_head = self.free_head;
        for entry in batch.iter_mut() {
            let index = *entry;
            let slot = &mut slots[index as usize];
            debug_assert!(slot.value.is_none(), "releasing an occupied slot");
            *entry = std::mem::replace(&mut slot.link, free_head);
            // The slot's next occupant will have the next generation: its tag is written
            // now, in a batch of releases, rather than by the insert (see `stamp_for`).
            // From now on no item of this timer's matches the tag, whether or not the
            // slot is reused.
            tags[index as usize] = next_generation(slot.stamp);
            free_head = index;
        }
        self.free_head = free_head;
    }

    /// Append the current `item`, whose slot is in no list, to `list`, whose id is
    /// `list_id`. Amortised O(1).
    #[inline]
    pub(crate) fn push(&mut self, list: &mut List, list_id: u32, item: Item) {
        debug_assert!(self.is_current(item));
        self.slots[item.index as usize].link = list_id;
        self.append(list, item);
    }

    /// Append `item` to `list`: amortised O(1), and only a length check unless the list
    /// is full (see [`make_room`](Slab::make_room)).
    #[inline]
    pub(crate) fn append(&self, list: &mut List, item: Item) {
        if list.items.len() == list.items.capacity() {
            self.make_room(list);
        }
        list.items.push(item);
    }

    /// Room in a full list: one at least half of whose items are tombstones (and at least
    /// [`COMPACT_MIN`]) is compacted, so that it reuses its own buffer instead of growing
    /// and a list that timers keep arriving in stays within about twice its live
    /// entries; any other grows (see [`List::grow`]).
    #[cold]
    #[inline(never)]
    fn make_room(&self, list: &mut List) {
        if list.dead >= COMPACT_MIN && 2 * list.dead >= list.items.len() {
            self.compact(list);
        } else {
            list.grow();
        }
    }

    /// Drop every tombstone from `list`; current items keep their order.
    ///
    /// One sequential, branch-free pass over the items compares each item's generation
    /// byte with its slot's tag, never reading the slots: a live item always matches, and
    /// a tombstone does not, unless its slot has since had a multiple of 256 more
    /// occupants. The list's live count exposes that rare case (more items kept than live
    /// entries), and then a second pass over the kept items checks them against the
    /// slots.
    ///
    /// "Live" is as the list's count has it: a timer taken out of its slot whose release
    /// (which counts its tombstone) is still to come keeps its item, like a live one.
    pub(crate) fn compact(&self, list: &mut List) {
        let expected = list.live();
        let items = &mut list.items;
        let len = items.len();
        let tags = &self.tags[..];
        debug_assert!(items.iter().all(|i| (i.index as usize) < tags.len()));
        let mut kept = 0;
        // This loop runs for about two items per cancel in a cancel-heavy workload, so it
        // is kept short: no bounds checks, no branch on what it finds.
        let step = |items: &mut Vec<Item>, at: usize, kept: &mut usize| {
            // SAFETY: `at < len` and `kept <= at`; every listed index names an existing
            // slot (slots are never removed), and `tags` covers every slot (asserted above
            // in debug builds).
            unsafe {
                let item = *items.get_unchecked(at);
                *items.get_unchecked_mut(*kept) = item;
                let tag = *tags.get_unchecked(item.index as usize);
                *kept += usize::from(tag == item.stamp as u8);
            }
        };
        // The tags are read in list order, which is random in memory: ask for them well
        // ahead, beyond what the processor would reach by itself.
        let ahead = len.saturating_sub(COMPACT_PREFETCH);
        for at in 0..ahead {
            // SAFETY: `at + COMPACT_PREFETCH < len`, and `tags` covers every listed index.
            unsafe {
                let next = items.get_unchecked(at + COMPACT_PREFETCH).index as usize;
                prefetch(tags.get_unchecked(next));
            }
            step(items, at, &mut kept);
        }
        for at in ahead..len {
            step(items, at, &mut kept);
        }
        items.truncate(kept);
        debug_assert!(kept >= expected, "a current item was dropped");
        if kept != expected {
            // Some tag matched by coincidence: settle it with the full stamps.
            items.retain(|&item| self.counts_as_live(item));
        }
        debug_assert_eq!(items.len(), expected, "tombstone count");
        list.dead = 0;
    }

    /// Empty a list that holds only tombstones (their slots are already free).
    pub(crate) fn clear_dead(&self, list: &mut List) {
        debug_assert_eq!(list.live(), 0, "clearing a list with live entries");
        debug_assert!(list.items.iter().all(|&i| !self.is_current(i)));
        list.items.clear();
        if list.items.capacity() > LARGE_LIST {
            // A large buffer emptied by cancels: give most of its memory back. Shrunk in
            // place, not freed: freeing large blocks among many small frees (the
            // cancelled operations) makes the system allocator's frees much slower.
            list.items.shrink_to(LARGE_LIST);
        }
        list.dead = 0;
    }

    /// Mark a slot taken out of its list wholesale (by [`List::take`]) as in no list.
    #[inline]
    pub(crate) fn mark_unlisted(&mut self, index: u32) {
        self.slots[index as usize].link = NIL;
    }
}

/// How far ahead a compaction prefetches the tags it will read.
const COMPACT_PREFETCH: usize = 64;

/// Ask the processor to start loading `value` into the cache.
#[inline]
fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it never faults and changes nothing visible, and
    // the pointer comes from a reference.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(value as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

/// Ask Linux to back a large slab with transparent huge pages.
///
/// Cancelling one timer among millions touches a random entry: with 4 KiB pages nearly
/// every such access also misses the TLB, and under virtualisation a TLB miss is a long
/// two-dimensional page walk. With 2 MiB pages the page tables of even a 64 MiB slab stay
/// cached. This is only advice (the kernel may ignore it, and does when THP is disabled);
/// slabs under 4 MiB are left alone.
fn advise_huge_pages<T>(entries: &Vec<T>) {
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let bytes = entries.capacity() * std::mem::size_of::<T>();
        if bytes < 2 * HUGE {
            return;
        }
        let start = entries.as_ptr() as usize;
        let end = start + bytes;
        let first = (start + HUGE - 1) & !(HUGE - 1);
        if first < end {
            // SAFETY: the range lies inside this Vec's own allocation and is page
            // aligned; MADV_HUGEPAGE changes neither the contents nor the validity of the
            // memory, only how the kernel backs it. Errors are ignored: it is advice.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = entries;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(slab: &Slab<u32>, list: &List) -> Vec<u32> {
        list.items
            .iter()
            .filter(|&&item| slab.is_current(item))
            .map(|item| *slab.slots[item.index as usize].value.as_ref().unwrap())
            .collect()
    }

    #[test]
    fn tombstones_compaction_and_reuse() {
        let mut slab = Slab::with_capacity(4);
        let mut list = List::default();
        let keys: Vec<Key> = (0..4).map(|v| slab.insert(v as u64, v, NIL)).collect();
        for k in &keys {
            slab.push(&mut list, 7, k.item(0));
            assert_eq!(slab.list_of(k.index), 7);
        }
        assert_eq!(values(&slab, &list), vec![0, 1, 2, 3]);

        // Freeing leaves a tombstone in the list; the key is stale at once.
        assert_eq!(slab.free(keys[1].index), 1);
        list.dead += 1;
        assert_eq!(slab.free(keys[3].index), 3);
        list.dead += 1;
        assert_eq!(slab.resolve(keys[1]), None);
        assert_eq!(slab.len(), 2);
        assert_eq!((list.items.len(), list.live()), (4, 2));
        assert_eq!(values(&slab, &list), vec![0, 2]);

        // The freed slot is reused at once (LIFO) with a new stamp, and listed again in
        // the same list: the old item stays a tombstone, stale keys stay stale.
        let k = slab.insert(9, 9, NIL);
        assert_eq!(k.index, keys[3].index);
        assert_ne!(k.stamp, keys[3].stamp);
        slab.push(&mut list, 7, k.item(0));
        assert_eq!(slab.resolve(k), Some(k.index));
        assert_eq!(slab.resolve(keys[3]), None);
        assert_eq!(values(&slab, &list), vec![0, 2, 9]);

        // Compaction drops the tombstones and keeps the order.
        slab.compact(&mut list);
        let indices: Vec<u32> = list.items.iter().map(|i| i.index).collect();
        assert_eq!(indices, vec![keys[0].index, keys[2].index, k.index]);
        assert_eq!(list.dead, 0);

        // A list of tombstones only is cleared wholesale.
        let mut other = List::default();
        let k2 = slab.insert(10, 10, NIL);
        slab.push(&mut other, 8, k2.item(0));
        assert_eq!(slab.free(k2.index), 10);
        other.dead += 1;
        slab.clear_dead(&mut other);
        assert!(other.is_empty());
        assert_eq!(slab.len(), 3);
    }

    #[test]
    fn entries_never_straddle_cache_lines() {
        use std::mem::{align_of, size_of};
        use std::num::NonZeroU32;
        use std::sync::Arc;
        assert_eq!(size_of::<Slot<NonZeroU32>>(), 16);
        assert_eq!(size_of::<Slot<Arc<dyn Fn() + Send + Sync>>>(), 32);
        assert_eq!(align_of::<Slot<u8>>(), 16);
        assert_eq!(size_of::<Item>(), 16);
    }

    #[test]
    fn currentness_follows_many_slots() {
        let mut slab = Slab::with_capacity(0);
        let keys: Vec<Key> = (0..200).map(|v| slab.insert(v as u64, v, NIL)).collect();
        for k in keys.iter().step_by(3) {
            slab.free(k.index);
        }
        let item = |k: &Key| k.item(0);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(slab.is_current(item(k)), i % 3 != 0);
        }
        assert_eq!(slab.len(), 200 - 67);
        let again = slab.insert(1000, 1000, NIL);
        assert!(slab.is_current(item(&again)));
        assert!(keys
            .iter()
            .all(|k| k.index != again.index || !slab.is_current(item(k))));
    }

    #[test]
    fn take_and_recycle_keep_a_right_sized_buffer() {
        let mut slab = Slab::with_capacity(3);
        let mut list = List::default();
        for v in 0..3 {
            let k = slab.insert(v as u64, v, NIL);
            slab.push(&mut list, 0, k.item(0));
        }
        let items = list.take();
        assert!(list.is_empty());
        let mut seen = Vec::new();
        for &item in &items {
            slab.mark_unlisted(item.index);
            seen.push(slab.free(item.index));
        }
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(slab.len(), 0);
        list.recycle(items, 3);
        assert!(list.is_empty() && list.items.capacity() >= 3);

        let mut huge = Vec::with_capacity(10_000);
        huge.push(Item {
            index: 1,
            stamp: 1,
            deadline: 0,
        });
        let mut other = List::default();
        other.recycle(huge, 1);
        assert!(
            other.items.capacity() <= 64,
            "an oversized buffer is shrunk"
        );
    }

    #[test]
    fn a_large_list_grows_by_a_quarter_and_shrinks_once_emptied() {
        let n = 8 * LARGE_LIST;
        let mut slab = Slab::with_capacity(n);
        let mut list = List::default();
        let keys: Vec<Key> = (0..n)
            .map(|v| {
                let k = slab.insert(v as u64, v as u32, NIL);
                slab.push(&mut list, 0, k.item(v as u64));
                k
            })
            .collect();
        let cap = list.items.capacity();
        assert!(cap >= n && cap <= n + n / 4, "capacity {cap} for {n} items");

        // Cancel all but one in eight, then compact: the buffer stays (new timers will
        // fill it; shrinking it here would free memory among the callers' own frees).
        for (v, k) in keys.iter().enumerate() {
            if v % 8 != 0 {
                slab.free(k.index);
                list.dead += 1;
            }
        }
        slab.compact(&mut list);
        assert_eq!(list.items.len(), n / 8);
        assert_eq!(list.items.capacity(), cap);

        // Cancel the rest: the emptied list keeps only a small buffer.
        for k in keys.iter().step_by(8) {
            slab.free(k.index);
            list.dead += 1;
        }
        slab.clear_dead(&mut list);
        assert!(list.is_empty() && list.items.capacity() <= LARGE_LIST);
        assert_eq!(slab.len(), 0);
    }

    #[test]
    fn a_tombstone_whose_tag_matches_a_later_occupant_is_still_dropped() {
        let mut slab = Slab::with_capacity(2);
        let mut list = List::default();
        let mut seq = 0..;
        let mut next = || seq.next().unwrap();
        let old = slab.insert(next(), 0u32, NIL);
        slab.push(&mut list, 1, old.item(10));
        slab.free(old.index);
        list.dead += 1;
        // Reuse the slot until its generation comes round to the tombstone's again.
        let mut again = old;
        for _ in 0..255 {
            again = slab.insert(next(), 1, NIL);
            assert_eq!(again.index, old.index);
            slab.free(again.index);
        }
        let new = slab.insert(next(), 2, NIL);
        assert_eq!(new.index, old.index);
        assert_eq!(new.stamp as u8, old.stamp as u8, "same generation byte");
        assert_ne!(new.stamp, old.stamp);
        assert_ne!(again.stamp as u8, new.stamp as u8);
        slab.push(&mut list, 1, new.item(20));
        assert_eq!(list.live(), 1);

        slab.compact(&mut list);
        assert_eq!(list.items, vec![new.item(20)]);
        assert_eq!(slab.resolve(old), None);
        assert_eq!(slab.resolve(new), Some(new.index));
        assert_eq!(slab.seq(new.item(20)), 256);

        // Now with a cancelled timer awaiting its release in the same list: it still
        // counts as live there (its tombstone is counted on release), so it is kept.
        let pending = slab.insert(next(), 3, NIL);
        slab.push(&mut list, 1, pending.item(30));
        list.items.push(old.item(10)); // the colliding tombstone again
        list.dead += 1;
        assert_eq!(slab.take(pending), Some(3));
        slab.compact(&mut list);
        assert_eq!(list.items, vec![new.item(20), pending.item(30)]);
        assert_eq!(list.live(), 2);
        // Its release then makes it a tombstone like any other.
        slab.release(pending.index);
        list.dead += 1;
        slab.compact(&mut list);
        assert_eq!(list.items, vec![new.item(20)]);
    }
}
