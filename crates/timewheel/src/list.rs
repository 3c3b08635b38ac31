//! Bucket lists: Kafka's `TimerTaskList`, as a vector of items with tombstones.
//!
//! A bucket's timers are listed as [`Item`]s in a [`List`]. An item names the timer's slot
//! and generation (see `slab.rs`) and carries its deadline, which only flushes read. Cancelling a timer does not unlink its item: the slot is released and the
//! item stays behind as a *tombstone*, counted in [`List::dead`], until the list is
//! flushed, emptied or compacted. An item is *current* while its slot still holds the
//! generation it names; generations are never reused (see `slab.rs`), so that test is
//! exact.
//!
//! A list that keeps receiving timers while older ones are cancelled is compacted when it
//! is full and at least half tombstones, instead of growing; a list whose last live timer
//! is cancelled is emptied at once.

/// A list is compacted only once it holds at least this many tombstones.
pub(crate) const COMPACT_MIN: usize = 64;

/// A list at least this long grows by a quarter instead of doubling.
const LARGE_LIST: usize = 4096;

/// Which list an entry is in: the wheel's *due* list, or one of the two lists of a bucket
/// (its *head* or the *rest*; see "Incremental cascades" in `wheel/mod.rs`).
///
/// It is also the list's index in the wheel's array of lists: 0 for the due list,
/// `1 + 2 * bucket` for a bucket's rest, `2 + 2 * bucket` for its head. Packed in 32 bits
/// so that a slot can hold it. Nothing outside this type computes with the number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListId(u32);

/// The largest bucket number a [`ListId`] can name (plus one).
pub(crate) const MAX_BUCKETS: usize = (u32::MAX / 2 - 1) as usize;

impl ListId {
    /// The due list.
    pub(crate) const DUE: ListId = ListId(0);

    /// The *rest* list of bucket `bucket` (`bucket < MAX_BUCKETS`).
    pub(crate) fn rest(bucket: usize) -> ListId {
        debug_assert!(bucket < MAX_BUCKETS);
        ListId(1 + 2 * bucket as u32)
    }

    /// The *head* list of bucket `bucket` (`bucket < MAX_BUCKETS`).
    pub(crate) fn head(bucket: usize) -> ListId {
        debug_assert!(bucket < MAX_BUCKETS);
        ListId(2 + 2 * bucket as u32)
    }

    /// The bucket this list belongs to; `None` for the due list.
    pub(crate) fn bucket(self) -> Option<usize> {
        self.0.checked_sub(1).map(|n| (n / 2) as usize)
    }

    /// The list's index in the wheel's array of lists.
    #[inline]
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }

    /// How many lists `buckets` buckets and the due list make.
    pub(crate) fn lists_for(buckets: usize) -> usize {
        1 + 2 * buckets
    }

    /// The raw bits, for the slab to store.
    #[inline]
    pub(crate) fn to_bits(self) -> u32 {
        self.0
    }

    /// Back from [`to_bits`](ListId::to_bits).
    #[inline]
    pub(crate) fn from_bits(bits: u32) -> ListId {
        ListId(bits)
    }
}

/// One listed timer: its slot and generation, and its deadline. A tombstone once that
/// timer is gone. 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    /// When the timer is due, in milliseconds on the wheel's clock.
    pub(crate) deadline: u64,
}

/// A list of items, some of which may be tombstones: O(1) push, iteration in insertion
/// order, compaction in one pass.
#[derive(Debug, Default)]
pub(crate) struct List {
    items: Vec<Item>,
    /// How many of `items` are tombstones.
    dead: usize,
}

impl List {
    /// True if the list holds no item, live or tombstone.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of live items.
    pub(crate) fn live(&self) -> usize {
        self.items.len() - self.dead
    }

    /// Number of items, tombstones included.
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Items the buffer holds without growing.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.items.capacity()
    }

    /// The items, tombstones included, in insertion order.
    pub(crate) fn items(&self) -> &[Item] {
        &self.items
    }

    /// Append an item. When the buffer is full and at least half of it (and at least
    /// [`COMPACT_MIN`]) is tombstones, the tombstones are dropped first (`is_current` tells
    /// which items are live) instead of growing the buffer.
    #[inline]
    pub(crate) fn push(&mut self, item: Item, is_current: impl Fn(&Item) -> bool) {
        if self.items.len() == self.items.capacity() {
            self.make_room(is_current);
        }
        self.items.push(item);
    }

    #[cold]
    #[inline(never)]
    fn make_room(&mut self, is_current: impl Fn(&Item) -> bool) {
        if self.dead >= COMPACT_MIN && 2 * self.dead >= self.items.len() {
            let live = self.live();
            self.compact(is_current);
            debug_assert_eq!(self.items.len(), live, "tombstones miscounted");
            self.dead = 0;
            return;
        }
        // Double a small buffer, grow a large one by a quarter: a list holding most of a
        // million timers should not carry as many again in spare capacity.
        let cap = self.items.capacity();
        let more = if cap < LARGE_LIST {
            cap.max(8)
        } else {
            cap / 4
        };
        self.items.reserve_exact(more);
    }

    /// Drop the tombstones, keeping the live items in order.
    ///
    /// Every item is copied to the write cursor, which then moves on only if the item is
    /// live: no branch depends on liveness. Which items are live is random (the slots they
    /// name are spread over the slab), so a branch on it would mispredict about half the
    /// time, and each mispredict throws away the slab reads already started for the items
    /// after it; without one, the processor keeps dozens of those reads in flight.
    fn compact(&mut self, is_current: impl Fn(&Item) -> bool) {
        let items = &mut self.items[..];
        let mut kept = 0;
        for read in 0..items.len() {
            let item = items[read];
            items[kept] = item;
            kept += usize::from(is_current(&item));
        }
        self.items.truncate(kept);
    }

    /// Count one more tombstone. True if the list has no live item left (the caller then
    /// [`clear`](List::clear)s it).
    #[inline]
    pub(crate) fn bury(&mut self) -> bool {
        self.dead += 1;
        debug_assert!(self.dead <= self.items.len());
        self.dead == self.items.len()
    }

    /// Drop every item (all of them tombstones, or already handled), keeping a buffer of
    /// moderate size for the next ones.
    pub(crate) fn clear(&mut self) {
        self.items.clear();
        self.dead = 0;
        if self.items.capacity() > LARGE_LIST {
            self.items.shrink_to(LARGE_LIST);
        }
    }

    /// Take every item out (live and tombstones), leaving the list empty.
    pub(crate) fn take(&mut self) -> Vec<Item> {
        self.dead = 0;
        std::mem::take(&mut self.items)
    }

    /// Take up to `max` items off the end (a chunk of an incremental cascade) into `out`.
    /// The caller reports the tombstones among them with [`forget_dead`](List::forget_dead).
    pub(crate) fn take_tail(&mut self, max: usize, out: &mut Vec<Item>) {
        let start = self.items.len().saturating_sub(max);
        out.extend(self.items.drain(start..));
    }

    /// `n` tombstones left the list (in a chunk taken by [`take_tail`](List::take_tail)).
    pub(crate) fn forget_dead(&mut self, n: usize) {
        self.dead -= n;
    }

    /// Give an emptied buffer back so the next pushes do not reallocate. A buffer much
    /// larger than the `used` items it last held is shrunk first.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn item(index: u32) -> Item {
        Item {
            index,
            generation: 0,
            deadline: 0,
        }
    }

    #[test]
    fn list_ids_name_the_due_list_or_a_buckets_head_or_rest() {
        assert_eq!(ListId::DUE.bucket(), None);
        assert_eq!(ListId::rest(7).bucket(), Some(7));
        assert_eq!(ListId::head(7).bucket(), Some(7));
        assert_eq!(
            ListId::head(MAX_BUCKETS - 1).bucket(),
            Some(MAX_BUCKETS - 1)
        );
        assert!(
            ListId::head(MAX_BUCKETS - 1).to_bits() < u32::MAX,
            "u32::MAX is no list"
        );
        let id = ListId::head(3);
        assert_eq!(ListId::from_bits(id.to_bits()), id);
        let ids = [
            ListId::DUE,
            ListId::rest(0),
            ListId::head(0),
            ListId::rest(1),
        ];
        let indices: Vec<usize> = ids.iter().map(|id| id.index()).collect();
        assert_eq!(indices, vec![0, 1, 2, 3]);
        assert_eq!(ListId::lists_for(2), 5);
    }

    #[test]
    fn a_full_list_of_tombstones_compacts_instead_of_growing() {
        let mut list = List::default();
        let live = |i: &Item| i.index % 4 == 0 || i.index == 10_000;
        while list.len() < 256 || list.len() < list.items.capacity() {
            let n = list.len() as u32;
            list.push(item(n), live);
            if n % 4 != 0 {
                list.bury();
            }
        }
        let cap = list.items.capacity();
        list.push(item(10_000), live);
        assert_eq!(list.items.capacity(), cap, "compacted, not grown");
        assert_eq!(list.live(), list.len());
        assert!(list.items().iter().all(live));
    }

    #[test]
    fn burying_the_last_live_item_reports_it() {
        let mut list = List::default();
        list.push(item(0), |_| true);
        list.push(item(1), |_| true);
        assert!(!list.bury());
        assert!(list.bury());
        list.clear();
        assert!(list.is_empty());
        assert_eq!(list.live(), 0);
    }
}
