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
//! * **generation tags**: every slot carries a generation counter that is bumped when the
//!   slot is freed. A [`Key`] remembers the generation it was issued with, so a stale key
//!   (its timer already fired or was cancelled, the slot perhaps reused) is recognised and
//!   refused instead of cancelling some unrelated timer.
//!
//! Invariants (checked by the unit tests and, in debug builds, by `debug_assert!`):
//! * an occupied slot has `value: Some(_)` and is linked in exactly one list;
//! * a vacant slot has `value: None`; its `next` field links the free list;
//! * `len` is the number of occupied slots.
//!
//! Costs: `insert` amortised O(1) (the `Vec` doubles when full), `free` O(1), list
//! operations O(1); memory is `capacity * size_of::<Entry<T>>()`.

/// The "null" index: end of a list, or "not linked".
pub(crate) const NIL: u32 = u32::MAX;

/// A handle to one occupied slot: its index plus the generation it was issued with.
///
/// Keys are `Copy` and cheap; a key whose timer is gone is *stale* and every operation on
/// it is a harmless no-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

/// One slot of the slab.
///
/// The field order keeps the entry compact: with an 8-byte payload it is 40 bytes, with a
/// 16-byte payload (`Arc<dyn TimerTask>`, what the [`Timer`](crate::Timer) stores) 48.
pub(crate) struct Entry<T> {
    /// When the timer is due, in milliseconds on the wheel's clock.
    pub(crate) deadline: u64,
    /// Insertion sequence number: breaks ties between timers with the same deadline so
    /// that they fire in insertion order.
    pub(crate) seq: u64,
    /// Previous entry in the same list, or [`NIL`].
    pub(crate) prev: u32,
    /// Next entry in the same list (or in the free list when vacant), or [`NIL`].
    pub(crate) next: u32,
    /// Bumped every time the slot is freed; see [`Key`].
    pub(crate) generation: u32,
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
        Slab {
            entries: Vec::with_capacity(capacity),
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
                generation: entry.generation,
            }
        } else {
            let index = u32::try_from(self.entries.len())
                .ok()
                .filter(|&i| i != NIL)
                .expect("timing wheel holds at most u32::MAX - 1 timers");
            self.entries.push(Entry {
                deadline,
                seq,
                prev: NIL,
                next: NIL,
                generation: 0,
                list: NIL,
                value: Some(value),
            });
            Key {
                index,
                generation: 0,
            }
        }
    }

    /// The slot's index if `key` still names an occupied slot of its generation.
    pub(crate) fn resolve(&self, key: Key) -> Option<u32> {
        let entry = self.entries.get(key.index as usize)?;
        (entry.generation == key.generation && entry.value.is_some()).then_some(key.index)
    }

    /// Shared access to an occupied slot.
    pub(crate) fn entry(&self, index: u32) -> &Entry<T> {
        &self.entries[index as usize]
    }

    /// Free an occupied slot that has already been unlinked, returning its value.
    /// Bumps the generation so that outstanding keys become stale.
    pub(crate) fn free(&mut self, index: u32) -> T {
        let entry = &mut self.entries[index as usize];
        debug_assert_eq!(entry.list, NIL, "freeing a slot that is still linked");
        let value = entry.value.take().expect("freeing a vacant slot");
        entry.generation = entry.generation.wrapping_add(1);
        entry.next = self.free_head;
        self.free_head = index;
        self.len -= 1;
        value
    }

    /// Append an occupied, unlinked slot at the tail of `list`, whose id is `list_id`.
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
        // generation.
        assert_eq!(slab.resolve(keys[3]), None);
        let k = slab.insert(0, 9, 9);
        assert_eq!(k.index, keys[3].index);
        assert_ne!(k.generation, keys[3].generation);
        assert_eq!(slab.resolve(k), Some(k.index));
        assert_eq!(slab.resolve(keys[3]), None);
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
