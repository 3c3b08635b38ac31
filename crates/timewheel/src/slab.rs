//! Slab storage with intrusive doubly linked lists: where the wheel's timers live.
//!
//! In Kafka every pending timer is a `TimerTaskEntry` object on the JVM heap, and each
//! bucket (`TimerTaskList`) is a circular doubly linked list of those objects. Adding a
//! timer allocates; cancelling unlinks the object and leaves it to the garbage collector.
//!
//! Here every pending timer occupies one slot of a single `Vec` (the *slab*), and a bucket
//! is a list threaded through the slots by `u32` indices (the links are *intrusive*: they
//! sit inside the entry itself, not in separate nodes). That gives:
//!
//! * **O(1) insert and O(1) unlink** given a slot index, with no allocation once the `Vec`
//!   has grown to the high-water mark of pending timers;
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
//! 16-byte payload such as `Arc<dyn TimerTask>` it is 64. Cancelling a random timer among
//! millions costs a cache miss on its entry and on its two neighbours; a straddling entry
//! would add a third.
//!
//! Invariants (checked by the unit tests and, in debug builds, by `debug_assert!`):
//! * an occupied slot has `value: Some(_)` and is linked in exactly one list, except
//!   transiently while its owner moves it;
//! * a vacant slot has `value: None`; it is either on the free list (its `next` field links
//!   the free list) or *vacated but still linked*, waiting for its owner to unlink and
//!   release it (the wheel defers the unlinking of cancelled timers, see `wheel.rs`);
//! * `len` is the number of occupied slots.
//!
//! Costs: `insert` amortised O(1) (the `Vec` doubles when full), `free` O(1), list
//! operations O(1); memory is `capacity * size_of::<Entry<T>>()`.

/// The "null" index: end of a list, or "not linked".
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
    /// Previous entry in the same list, or [`NIL`].
    pub(crate) prev: u32,
    /// Next entry in the same list (or in the free list when vacant), or [`NIL`].
    pub(crate) next: u32,
    /// Which list the entry is linked in (the owner decides what the ids mean).
    pub(crate) list: u32,
    /// The payload; `None` while the slot is vacant.
    pub(crate) value: Option<T>,
}

/// The head of an intrusive list: first and last slot, and how many entries it holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct List {
    pub(crate) head: u32,
    pub(crate) tail: u32,
    pub(crate) len: u32,
}

impl List {
    /// An empty list.
    pub(crate) const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };

    /// True if the list holds no entry.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
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
            self.free_head = entry.next;
            entry.deadline = deadline;
            entry.seq = seq;
            entry.prev = NIL;
            entry.next = NIL;
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
                prev: NIL,
                next: NIL,
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

    /// Take the value out of an occupied slot that may still be linked (a cancelled timer
    /// whose unlinking is deferred). Outstanding keys become stale at once; the slot must
    /// be unlinked and [`release`](Slab::release)d later.
    #[inline]
    pub(crate) fn vacate(&mut self, index: u32) -> T {
        self.len -= 1;
        self.entries[index as usize]
            .value
            .take()
            .expect("vacating a vacant slot")
    }

    /// Put a vacant, unlinked slot on the free list.
    #[inline]
    pub(crate) fn release(&mut self, index: u32) {
        let entry = &mut self.entries[index as usize];
        debug_assert_eq!(entry.list, NIL, "releasing a slot that is still linked");
        debug_assert!(entry.value.is_none(), "releasing an occupied slot");
        entry.next = self.free_head;
        self.free_head = index;
    }

    /// Read one field of the slot at `index` (if any) so that its cache line is on its
    /// way; see the wheel's deferred unlinking. Returns something to fold into a
    /// `black_box` so that the read is not optimised away.
    #[inline]
    pub(crate) fn touch(&self, index: u32) -> u64 {
        match self.entries.get(index as usize) {
            Some(entry) => entry.seq,
            None => 0,
        }
    }

    /// Append an occupied, unlinked slot at the tail of `list`, whose id is `list_id`.
    #[inline]
    pub(crate) fn push_back(&mut self, list: &mut List, list_id: u32, index: u32) {
        let tail = list.tail;
        {
            let entry = &mut self.entries[index as usize];
            entry.prev = tail;
            entry.next = NIL;
            entry.list = list_id;
        }
        if tail == NIL {
            list.head = index;
        } else {
            self.entries[tail as usize].next = index;
        }
        list.tail = index;
        list.len += 1;
    }

    /// Unlink a slot from `list` (which must be the list it is in). O(1).
    #[inline]
    pub(crate) fn unlink(&mut self, list: &mut List, index: u32) {
        let (prev, next) = {
            let entry = &mut self.entries[index as usize];
            let links = (entry.prev, entry.next);
            entry.prev = NIL;
            entry.next = NIL;
            entry.list = NIL;
            links
        };
        if prev == NIL {
            list.head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
        list.len -= 1;
    }

    /// Detach the whole chain of `list` at once and return its first slot; walk it with
    /// [`Slab::take_next`]. The list is left empty. O(1).
    pub(crate) fn detach(list: &mut List) -> u32 {
        let head = list.head;
        *list = List::EMPTY;
        head
    }

    /// While walking a detached chain: mark `index` as unlinked and return the slot after it.
    pub(crate) fn take_next(&mut self, index: u32) -> u32 {
        let entry = &mut self.entries[index as usize];
        let next = entry.next;
        entry.prev = NIL;
        entry.next = NIL;
        entry.list = NIL;
        next
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

    fn collect(slab: &Slab<u32>, list: &List) -> Vec<u32> {
        let mut out = Vec::new();
        let mut i = list.head;
        while i != NIL {
            out.push(*slab.entry(i).value.as_ref().unwrap());
            i = slab.entry(i).next;
        }
        assert_eq!(out.len(), list.len as usize);
        out
    }

    #[test]
    fn push_unlink_and_reuse() {
        let mut slab = Slab::with_capacity(4);
        let mut list = List::EMPTY;
        let keys: Vec<Key> = (0..4).map(|v| slab.insert(0, v as u64, v)).collect();
        for k in &keys {
            slab.push_back(&mut list, 7, k.index);
        }
        assert_eq!(collect(&slab, &list), vec![0, 1, 2, 3]);

        // Unlink from the middle, the head and the tail.
        for (k, expect) in [
            (keys[1], vec![0, 2, 3]),
            (keys[0], vec![2, 3]),
            (keys[3], vec![2]),
        ] {
            slab.unlink(&mut list, k.index);
            slab.free(k.index);
            assert_eq!(collect(&slab, &list), expect);
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
    fn detach_walks_the_chain() {
        let mut slab = Slab::with_capacity(3);
        let mut list = List::EMPTY;
        for v in 0..3 {
            let k = slab.insert(0, v as u64, v);
            slab.push_back(&mut list, 0, k.index);
        }
        let mut i = Slab::<u32>::detach(&mut list);
        assert!(list.is_empty());
        let mut seen = Vec::new();
        while i != NIL {
            let next = slab.take_next(i);
            seen.push(slab.free(i));
            i = next;
        }
        assert_eq!(seen, vec![0, 1, 2]);
        assert_eq!(slab.len(), 0);
    }
}
