//! Slab storage and index lists: where the wheel's timers live.
//!
//! In Kafka every pending timer is a `TimerTaskEntry` object on the JVM heap, and each
//! bucket (`TimerTaskList`) is a circular doubly linked list of those objects. Adding a
//! timer allocates; cancelling unlinks the object and leaves it to the garbage collector.
//!
//! Here every pending timer occupies one slot of a single `Vec` (the *slab*), and a bucket
//! is a [`List`]: a vector of slot indices, while every entry remembers its position in
//! its list (a back-pointer). That gives:
//!
//! * **O(1) insert** (push the index at the end of the list) and **O(1) removal** (move
//!   the list's last index into the hole and fix that entry's position), with no
//!   allocation per timer once the vectors have grown;
//! * **cache-friendly flushes**: firing or cascading a bucket reads its indices in order
//!   and then touches each entry independently of the others, so the processor overlaps
//!   the cache misses. Walking a linked list instead is one dependent miss after another,
//!   and with millions of timers every hop misses (Kafka's lists, and this crate's first
//!   version, paid that on every flush);
//! * **slot reuse**: a freed slot goes on a free list (LIFO, so the next insert reuses the
//!   slot that is still warm in the cache);
//! * **stale-key detection**: every entry records its insertion number (`seq`), and a
//!   [`Key`] carries the low 32 bits of it. A key whose timer already fired or was
//!   cancelled (its slot perhaps reused by a later timer) no longer matches and is refused
//!   instead of cancelling an unrelated timer. A mix-up would need the slot to be reused by
//!   a timer inserted exactly a multiple of 2^32 insertions later while the old key is
//!   still held.
//!
//! Entries are aligned to 32 bytes, so that one never straddles two cache lines: with a
//! payload of up to 4 bytes an entry is exactly 32 bytes (two per cache line), with a
//! 16-byte payload such as `Arc<dyn TimerTask>` it is 64. A list costs 4 more bytes per
//! entry.
//!
//! Invariants (checked by the unit tests and, in debug builds, by `debug_assert!`):
//! * an occupied slot has `value: Some(_)` and sits in exactly one list, at `pos`, except
//!   transiently while its owner moves it;
//! * a vacant slot has `value: None`; it is either on the free list (its `pos` field links
//!   the free list) or *vacated but still listed*, waiting for its owner to remove and
//!   release it (the wheel defers the removal of cancelled timers, see `wheel.rs`);
//! * `len` is the number of occupied slots.
//!
//! Costs: `insert` amortised O(1) (the `Vec` doubles when full), `free` O(1), list
//! operations amortised O(1); memory is `capacity * size_of::<Entry<T>>()` plus 4 bytes
//! per listed entry.

/// The "null" index: end of the free list, or "not in a list".
pub(crate) const NIL: u32 = u32::MAX;

/// Names one timer in a [`TimingWheel`](crate::TimingWheel): its slot index plus a stamp
/// (the low bits of its insertion number).
///
/// Keys are `Copy` and 8 bytes; a key whose timer is gone is *stale* and every operation
/// on it is a harmless no-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) stamp: u32,
}

/// One slot of the slab: 32 bytes for a payload of up to 4 bytes (or one with a niche,
/// like `Option<NonZeroU32>`), 64 for a 16-byte payload such as `Arc<dyn TimerTask>`.
#[repr(align(32))]
pub(crate) struct Entry<T> {
    /// When the timer is due, in milliseconds on the wheel's clock.
    pub(crate) deadline: u64,
    /// Insertion number: breaks ties between timers with the same deadline (they fire in
    /// insertion order), and its low 32 bits are the [`Key`] stamp.
    pub(crate) seq: u64,
    /// Position in its list; when vacant and free, the next free slot (or [`NIL`]).
    pub(crate) pos: u32,
    /// Which list the entry is in (the owner decides what the ids mean), or [`NIL`].
    pub(crate) list: u32,
    /// The payload; `None` while the slot is vacant.
    pub(crate) value: Option<T>,
}

/// A list of slab indices: O(1) push, O(1) removal by position (the last index moves
/// into the hole), iteration in memory order.
#[derive(Clone, Debug, Default)]
pub(crate) struct List {
    pub(crate) items: Vec<u32>,
}

impl List {
    /// True if the list holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Take the indices out, leaving the list empty (but keeping a spare buffer is up to
    /// the caller: see [`List::recycle`]).
    pub(crate) fn take(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.items)
    }

    /// Give an emptied buffer back so the next round of pushes does not reallocate. A
    /// buffer much larger than the `used` entries it last held is shrunk, so one burst does
    /// not pin memory forever.
    pub(crate) fn recycle(&mut self, mut buffer: Vec<u32>, used: usize) {
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

/// A growable array of entries with a free list and intrusive list operations.
pub(crate) struct Slab<T> {
    entries: Vec<Entry<T>>,
    free_head: u32,
    len: usize,
}

impl<T> Slab<T> {
    /// An empty slab with room for `capacity` entries before it reallocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let entries = Vec::with_capacity(capacity);
        advise_huge_pages(&entries);
        Slab {
            entries,
            free_head: NIL,
            len: 0,
        }
    }

    /// Number of occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of slots the slab can hold without reallocating.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Store a value in a free slot (reusing the most recently freed one) and return its key.
    /// The entry is not linked in any list yet.
    #[inline]
    pub(crate) fn insert(&mut self, deadline: u64, seq: u64, value: T) -> Key {
        self.len += 1;
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = &mut self.entries[index as usize];
            debug_assert!(
                entry.value.is_none(),
                "free list points at an occupied slot"
            );
            self.free_head = entry.pos;
            entry.deadline = deadline;
            entry.seq = seq;
            entry.pos = NIL;
            entry.list = NIL;
            entry.value = Some(value);
            Key {
                index,
                stamp: seq as u32,
            }
        } else {
            let index = u32::try_from(self.entries.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("timing wheel holds at most u32::MAX - 1 timers");
            if self.entries.len() == self.entries.capacity() {
                self.grow();
            }
            self.entries.push(Entry {
                deadline,
                seq,
                pos: NIL,
                list: NIL,
                value: Some(value),
            });
            Key {
                index,
                stamp: seq as u32,
            }
        }
    }

    /// Double the capacity (at least 64 slots), advising huge pages for the new buffer.
    #[cold]
    fn grow(&mut self) {
        self.entries.reserve_exact(self.entries.capacity().max(64));
        advise_huge_pages(&self.entries);
    }

    /// The slot's index if `key` still names the timer it was issued for.
    #[inline]
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let entry = self.entries.get(key.index as usize)?;
        (entry.seq as u32 == key.stamp && entry.value.is_some()).then_some(key.index)
    }

    /// Shared access to a slot.
    #[inline]
    pub(crate) fn entry(&self, index: u32) -> &Entry<T> {
        &self.entries[index as usize]
    }

    /// Free an occupied slot that has already been unlinked, returning its value.
    /// Outstanding keys become stale (the slot is vacant, and a later occupant has another
    /// insertion number).
    #[inline]
    pub(crate) fn free(&mut self, index: u32) -> T {
        let value = self.vacate(index);
        self.release(index);
        value
    }

    /// Take the value out of an occupied slot that may still be listed (a cancelled timer
    /// whose removal is deferred). Outstanding keys become stale at once; the slot must
    /// be removed from its list and [`release`](Slab::release)d later.
    #[inline]
    pub(crate) fn vacate(&mut self, index: u32) -> T {
        self.len -= 1;
        self.entries[index as usize]
            .value
            .take()
            .expect("vacating a vacant slot")
    }

    /// Put a vacant slot that is in no list on the free list.
    #[inline]
    pub(crate) fn release(&mut self, index: u32) {
        let entry = &mut self.entries[index as usize];
        debug_assert_eq!(entry.list, NIL, "releasing a slot that is still listed");
        debug_assert!(entry.value.is_none(), "releasing an occupied slot");
        entry.pos = self.free_head;
        self.free_head = index;
    }

    /// Append a slot that is in no list to `list`, whose id is `list_id`. Amortised O(1).
    #[inline]
    pub(crate) fn push(&mut self, list: &mut List, list_id: u32, index: u32) {
        let entry = &mut self.entries[index as usize];
        entry.pos = list.items.len() as u32;
        entry.list = list_id;
        list.items.push(index);
    }

    /// Remove a slot from `list` (which must be the list it is in): the list's last index
    /// moves into its place. O(1).
    #[inline]
    pub(crate) fn remove_from(&mut self, list: &mut List, index: u32) {
        let pos = {
            let entry = &mut self.entries[index as usize];
            let pos = entry.pos;
            entry.pos = NIL;
            entry.list = NIL;
            pos
        };
        let last = list.items.pop().expect("removing from an empty list");
        if last != index {
            list.items[pos as usize] = last;
            self.entries[last as usize].pos = pos;
        }
    }

    /// Mark a slot taken out of its list wholesale (by [`List::take`]) as in no list.
    #[inline]
    pub(crate) fn mark_unlisted(&mut self, index: u32) {
        let entry = &mut self.entries[index as usize];
        entry.pos = NIL;
        entry.list = NIL;
    }
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
            .enumerate()
            .map(|(pos, &i)| {
                let e = slab.entry(i);
                assert_eq!(e.pos as usize, pos, "back-pointer");
                *e.value.as_ref().unwrap()
            })
            .collect()
    }

    #[test]
    fn push_remove_and_reuse() {
        let mut slab = Slab::with_capacity(4);
        let mut list = List::default();
        let keys: Vec<Key> = (0..4).map(|v| slab.insert(0, v as u64, v)).collect();
        for k in &keys {
            slab.push(&mut list, 7, k.index);
        }
        assert_eq!(values(&slab, &list), vec![0, 1, 2, 3]);

        // Remove from the middle (the last moves in), the head and the tail.
        for (k, expect) in [
            (keys[1], vec![0, 3, 2]),
            (keys[0], vec![2, 3]),
            (keys[3], vec![2]),
        ] {
            slab.remove_from(&mut list, k.index);
            slab.free(k.index);
            assert_eq!(values(&slab, &list), expect);
        }
        assert_eq!(slab.len(), 1);

        // The stale key no longer resolves; the freed slot is reused (LIFO) with a new
        // stamp.
        assert_eq!(slab.resolve(keys[3]), None);
        let k = slab.insert(0, 9, 9);
        assert_eq!(k.index, keys[3].index);
        assert_ne!(k.stamp, keys[3].stamp);
        assert_eq!(slab.resolve(k), Some(k.index));
        assert_eq!(slab.resolve(keys[3]), None);
    }

    #[test]
    fn entries_never_straddle_cache_lines() {
        use std::mem::{align_of, size_of};
        use std::num::NonZeroU32;
        use std::sync::Arc;
        assert_eq!(size_of::<Entry<NonZeroU32>>(), 32);
        assert_eq!(size_of::<Entry<Arc<dyn Fn() + Send + Sync>>>(), 64);
        assert_eq!(align_of::<Entry<u8>>(), 32);
    }

    #[test]
    fn take_and_recycle_keep_a_right_sized_buffer() {
        let mut slab = Slab::with_capacity(3);
        let mut list = List::default();
        for v in 0..3 {
            let k = slab.insert(0, v as u64, v);
            slab.push(&mut list, 0, k.index);
        }
        let items = list.take();
        assert!(list.is_empty());
        let mut seen = Vec::new();
        for &i in &items {
            slab.mark_unlisted(i);
            seen.push(slab.free(i));
        }
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(slab.len(), 0);
        list.recycle(items, 3);
        assert!(list.is_empty() && list.items.capacity() >= 3);

        let mut huge = Vec::with_capacity(10_000);
        huge.push(1);
        let mut other = List::default();
        other.recycle(huge, 1);
        assert!(
            other.items.capacity() <= 64,
            "an oversized buffer is shrunk"
        );
    }
}
