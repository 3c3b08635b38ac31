//! Bucket lists: Kafka's `TimerTaskList`, as a vector of items with tombstones.
//!
//! A bucket's timers are listed as [`Item`]s in a [`List`]. An item names the timer's slot
//! and generation (see `slab.rs`) and carries its deadline and insertion number, which only
//! flushes read. Cancelling a timer does not unlink its item: the slot is released and the
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
/// Packed in 32 bits so that a slot can hold it: `2 * bucket` for the rest, `2 * bucket + 1`
/// for the head, `u32::MAX` for the due list. Nothing outside this type looks at the bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ListId(u32);

/// The largest bucket number a [`ListId`] can name.
pub(crate) const MAX_BUCKETS: usize = (u32::MAX / 2) as usize;

impl ListId {
    /// The due list.
    pub(crate) const DUE: ListId = ListId(u32::MAX);

    /// The *rest* list of bucket `bucket` (`bucket < MAX_BUCKETS`).
    pub(crate) fn rest(bucket: usize) -> ListId {
        debug_assert!(bucket < MAX_BUCKETS);
        ListId((bucket as u32) << 1)
    }

    /// The *head* list of bucket `bucket` (`bucket < MAX_BUCKETS`).
    pub(crate) fn head(bucket: usize) -> ListId {
        debug_assert!(bucket < MAX_BUCKETS);
        ListId(((bucket as u32) << 1) | 1)
    }

    /// The bucket this list belongs to; `None` for the due list.
    pub(crate) fn bucket(self) -> Option<usize> {
        (self != ListId::DUE).then_some((self.0 >> 1) as usize)
    }

    /// True for a bucket's head list.
    pub(crate) fn is_head(self) -> bool {
        self != ListId::DUE && self.0 & 1 == 1
    }

    /// The raw bits, for the slab to store.
    pub(crate) fn to_bits(self) -> u32 {
        self.0
    }

    /// Back from [`to_bits`](ListId::to_bits).
    pub(crate) fn from_bits(bits: u32) -> ListId {
        ListId(bits)
    }
}

/// One listed timer: its slot and generation, deadline and insertion number. A tombstone
/// once that timer is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub(crate) index: u32,
    pub(crate) generation: u32,
    /// When the timer is due, in milliseconds on the wheel's clock.
    pub(crate) deadline: u64,
    /// Insertion number: the tie-breaker between equal deadlines.
    pub(crate) seq: u64,
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
            let before = self.items.len();
            self.items.retain(is_current);
            debug_assert_eq!(
                before - self.items.len(),
                self.dead,
                "tombstones miscounted"
            );
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
            seq: index as u64,
        }
    }

    #[test]
    fn list_ids_name_the_due_list_or_a_buckets_head_or_rest() {
        assert_eq!(ListId::DUE.bucket(), None);
        assert!(!ListId::DUE.is_head());
        assert_eq!(ListId::rest(7).bucket(), Some(7));
        assert!(!ListId::rest(7).is_head());
        assert_eq!(ListId::head(7).bucket(), Some(7));
        assert!(ListId::head(7).is_head());
        assert_ne!(ListId::head(MAX_BUCKETS - 1), ListId::DUE);
        let id = ListId::head(3);
        assert_eq!(ListId::from_bits(id.to_bits()), id);
    }

    #[test]
    fn a_full_list_of_tombstones_compacts_instead_of_growing() {
        let mut list = List::default();
        let live = |i: &Item| i.index % 4 == 0;
        while list.len() < 256 || list.len() < list.items.capacity() {
            let n = list.len() as u32;
            list.push(item(n), live);
            if n % 4 != 0 {
                list.bury();
            }
        }
        let cap = list.items.capacity();
        list.push(item(10_000), |i| i.index % 4 == 0 || i.index == 10_000);
        assert_eq!(list.items.capacity(), cap, "compacted, not grown");
        assert_eq!(list.live(), list.len());
        assert!(list.items().iter().all(|i| i.index % 4 == 0));
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
