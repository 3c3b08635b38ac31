//! The slab: where the wheel's timers live, Kafka's `TimerTaskEntry` objects.
//!
//! In Kafka every pending timer is an object on the JVM heap. Here it is a *slot* of a
//! `Vec`, found by index, reused through a free list (last in, first out, so the next
//! insert writes the slot a cancel just touched, still in the cache). No allocation per
//! timer once the vector has grown.
//!
//! A slot holds the timer's payload, the list it is in (see `list.rs`) and a
//! *generation*: how many timers have occupied the slot before. A [`Key`] (and a list
//! [`Item`](crate::list::Item)) names a slot *and* a generation, so once the timer is gone
//! (fired or cancelled, the slot perhaps reused) the key is stale and refused.
//!
//! **Generations are never reused.** A slot's generation is bumped when its timer goes;
//! a slot whose last occupant had generation [`LAST_GENERATION`] is *retired* instead: it
//! never joins the free list again. So a (slot, generation) pair names at most one timer
//! for the life of the slab, and a stale key or a tombstone can never be taken for a later
//! timer, however many timers pass through the slot. The cost is one slot (16 to 32 bytes)
//! per 2^32 - 1 timers through it.
//!
//! A released slot therefore always holds a generation no key or item carries (its next
//! occupant's, or [`RETIRED`]), so "is this item current?" is one comparison of
//! generations.
//!
//! **Insertion order.** A slot also holds its timer's insertion number ([`Slab::seq`]),
//! which orders timers with equal deadlines when they fire. It is 32 bits: when the
//! counter would reach `u32::MAX`, the pending timers are renumbered `0..n` in the order
//! they were inserted (`renumber`: O(n log n), once per `2^32 - n` insertions), so the
//! numbers of pending timers always compare as their insertion order. Keeping the number
//! in the slot (4 bytes there) rather than in the list items keeps the items at 16 bytes:
//! lists are written and compacted in bulk, several times per timer.
//!
//! There is no `unsafe` here: every access is a checked index, and the fields are private,
//! so nothing outside this file can break the invariants:
//! * an occupied slot has `value: Some(_)` and `link` names its list;
//! * a *taken* slot (between [`Slab::take`] and [`Slab::release`]) has `value: None` and
//!   keeps its generation and list;
//! * a released slot has `value: None`; if it is on the free list, its `link` is the next
//!   free slot and its generation is the one its next occupant gets (bumped on release);
//!   if it is retired, it is on no list and its generation is [`RETIRED`];
//! * `len` is the number of occupied slots;
//! * occupied slots' insertion numbers are below `next_seq`, in the order the timers were
//!   inserted.

use crate::list::ListId;

/// "No slot": the end of the free list.
const NIL: u32 = u32::MAX;

/// The last generation a slot gives out.
const LAST_GENERATION: u32 = u32::MAX - 1;

/// The generation of a retired slot: never given out.
const RETIRED: u32 = u32::MAX;

/// Names one timer in a [`TimingWheel`](crate::TimingWheel): the wheel, the slot and the
/// slot's generation when the timer was inserted.
///
/// Keys are `Copy` (12 bytes). A key whose timer is gone is *stale*: every operation on it
/// is a harmless no-op, however many timers have used the slot since (generations are
/// never reused). A key is refused by every wheel but the one that issued it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C, packed(4))]
pub struct Key {
    /// The slot (high 32 bits) and its generation (low 32 bits) in one field, so that a
    /// key is written as one 8-byte store and one 4-byte store: a caller copies a returned
    /// key with an 8-byte load, which the processor can forward from one 8-byte store but
    /// not from two 4-byte ones (it then waits for both to reach the cache). Packed to
    /// 4-byte alignment so that the key stays 12 bytes (fields are only ever copied out,
    /// never borrowed).
    slot: u64,
    pub(crate) wheel: u32,
}

impl Key {
    /// The key of slot `index` at `generation` in wheel `wheel`.
    #[inline]
    pub(crate) fn new(wheel: u32, index: u32, generation: u32) -> Key {
        Key {
            slot: pack(index, generation),
            wheel,
        }
    }

    /// The key whose [`bits`](Key::bits) are `bits`, in wheel `wheel`.
    #[inline]
    pub(crate) fn from_bits(wheel: u32, bits: u64) -> Key {
        Key { slot: bits, wheel }
    }

    /// The slot and generation packed in 64 bits, without the wheel id.
    #[inline]
    pub(crate) fn bits(self) -> u64 {
        self.slot
    }

    /// The slot's index.
    #[inline]
    pub(crate) fn index(self) -> u32 {
        (self.slot >> 32) as u32
    }

    /// The slot's generation when the timer was inserted.
    #[inline]
    pub(crate) fn generation(self) -> u32 {
        self.slot as u32
    }
}

/// A slot index and a generation in one `u64`: the index high, the generation low.
#[inline]
fn pack(index: u32, generation: u32) -> u64 {
    (u64::from(index) << 32) | u64::from(generation)
}

/// One timer's slot. 16 bytes for a 4-byte payload with a niche (`NonZeroU32`), 32 for
/// the timer's 16-byte task.
struct Slot<T> {
    generation: u32,
    /// Occupied: the list (a [`ListId`]'s bits). Free: the next free slot, or [`NIL`].
    link: u32,
    /// Occupied: the insertion number (see "Insertion order").
    seq: u32,
    value: Option<T>,
}

/// A growable array of slots with a free list.
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// First free slot (the free list runs through `Slot::link`), or [`NIL`].
    free_head: u32,
    len: usize,
    /// Slots whose generations are used up (see the module docs).
    retired: usize,
    /// The next insertion number.
    next_seq: u32,
}

impl<T> Slab<T> {
    /// An empty slab with room for `capacity` timers before it reallocates.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let slab = Slab {
            slots: Vec::with_capacity(capacity),
            free_head: NIL,
            len: 0,
            retired: 0,
            next_seq: 0,
        };
        advise_huge_pages(&slab.slots);
        slab
    }

    /// Make room for `additional` more slots than the slab has (in use or free).
    pub(crate) fn reserve(&mut self, additional: usize) {
        let needed = self.slots.len().saturating_add(additional);
        if needed > self.slots.capacity() {
            self.reallocate(needed);
        }
    }

    /// Grow by half (amortised O(1) per insert).
    #[cold]
    fn grow(&mut self) {
        let capacity = self.slots.capacity();
        self.reallocate(capacity + (capacity / 2).max(64));
    }

    /// Move the slots to a buffer of `capacity` slots, advised to use huge pages before
    /// anything is written to it (advice after the copy would come too late: the copy
    /// would already have faulted the buffer in with small pages).
    fn reallocate(&mut self, capacity: usize) {
        let mut slots = Vec::with_capacity(capacity);
        advise_huge_pages(&slots);
        slots.append(&mut self.slots);
        self.slots = slots;
    }

    /// Number of occupied slots.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Number of slots the slab can hold without reallocating (the tests bound it).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Store `value`, listed in `list`, in a free slot (the most recently released one)
    /// and return its slot index and generation.
    ///
    /// # Panics
    /// If `u32::MAX - 1` slots are in use.
    #[inline]
    pub(crate) fn insert(&mut self, value: T, list: ListId) -> (u32, u32) {
        if self.next_seq == u32::MAX {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.len += 1;
        if let Some(slot) = self.slots.get_mut(self.free_head as usize) {
            let index = self.free_head;
            self.free_head = slot.link;
            slot.link = list.to_bits();
            slot.seq = seq;
            slot.value = Some(value);
            return (index, slot.generation);
        }
        let index = u32::try_from(self.slots.len())
            .ok()
            .filter(|&i| i != NIL)
            .expect("a timing wheel holds at most u32::MAX - 1 timers");
        if self.slots.len() == self.slots.capacity() {
            self.grow();
        }
        self.slots.push(Slot {
            generation: 0,
            link: list.to_bits(),
            seq,
            value: Some(value),
        });
        (index, 0)
    }

    /// The insertion number of the timer in slot `index` (occupied, or released and not
    /// reused yet): timers inserted earlier have smaller numbers. Numbers change only when
    /// a timer is inserted (see "Insertion order").
    #[inline]
    pub(crate) fn seq(&self, index: u32) -> u32 {
        self.slots[index as usize].seq
    }

    /// Number the pending timers `0..n` in the order they were inserted.
    #[cold]
    #[inline(never)]
    fn renumber(&mut self) {
        let mut pending: Vec<(u32, u32)> = (0..self.slots.len() as u32)
            .filter(|&i| self.slots[i as usize].value.is_some())
            .map(|i| (self.slots[i as usize].seq, i))
            .collect();
        pending.sort_unstable();
        for (seq, &(_, index)) in pending.iter().enumerate() {
            self.slots[index as usize].seq = seq as u32;
        }
        self.next_seq = pending.len() as u32;
    }

    /// The occupied slot `index` if it holds generation `generation`.
    #[inline]
    fn current(&self, index: u32, generation: u32) -> Option<&Slot<T>> {
        let slot = self.slots.get(index as usize)?;
        (slot.generation == generation && slot.value.is_some()).then_some(slot)
    }

    /// True if slot `index` holds the timer of generation `generation` (a taken slot still
    /// does, until it is released).
    #[inline]
    pub(crate) fn is_current(&self, index: u32, generation: u32) -> bool {
        self.slots
            .get(index as usize)
            .is_some_and(|slot| slot.generation == generation)
    }

    /// The list the timer (`index`, `generation`) is in, if it is still there.
    #[inline]
    pub(crate) fn list_of(&self, index: u32, generation: u32) -> Option<ListId> {
        self.current(index, generation)
            .map(|slot| ListId::from_bits(slot.link))
    }

    /// Record that the timer (`index`, `generation`), which must be current, moved to
    /// `list`.
    #[inline]
    pub(crate) fn relist(&mut self, index: u32, list: ListId) {
        let slot = &mut self.slots[index as usize];
        debug_assert!(slot.value.is_some());
        slot.link = list.to_bits();
    }

    /// Take the timer (`index`, `generation`) out, if it is current: its value and the list
    /// its item is in (that item is a tombstone from now on). The slot is released.
    #[inline]
    pub(crate) fn remove(&mut self, index: u32, generation: u32) -> Option<(T, ListId)> {
        let value = self.take(index, generation)?;
        Some((value, self.release(index)))
    }

    /// The first half of [`remove`](Slab::remove): take the value out of the timer
    /// (`index`, `generation`) if it is current. The key is stale at once, but the slot
    /// keeps its generation and list (its item still counts as live in that list, and
    /// `is_current` still says so) until the owner [`release`](Slab::release)s it.
    #[inline]
    pub(crate) fn take(&mut self, index: u32, generation: u32) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        self.len -= 1;
        Some(value)
    }

    /// The second half of [`remove`](Slab::remove): put a slot whose value was taken back
    /// on the free list with the next generation (or retire it if its generations are used
    /// up), and return the list its item is in (a tombstone from now on).
    #[inline]
    pub(crate) fn release(&mut self, index: u32) -> ListId {
        let mut one = [index];
        self.release_all(&mut one);
        ListId::from_bits(one[0])
    }

    /// [`release`](Slab::release) every slot of `batch`, replacing each slot index with the
    /// bits of the [`ListId`] its item is in.
    #[inline]
    pub(crate) fn release_all(&mut self, batch: &mut [u32]) {
        // Locals, so that the compiler keeps them in registers across the stores.
        let slots = &mut self.slots[..];
        let mut free_head = self.free_head;
        for entry in batch {
            let index = *entry;
            let slot = &mut slots[index as usize];
            debug_assert!(slot.value.is_none(), "only a taken slot is released");
            *entry = slot.link;
            if slot.generation == LAST_GENERATION {
                self.retired += 1;
                slot.generation = RETIRED;
                slot.link = NIL;
            } else {
                slot.generation += 1;
                slot.link = free_head;
                free_head = index;
            }
        }
        self.free_head = free_head;
    }

    /// Test hook: the next insertion number is `seq` (at least the current one), as if
    /// that many timers had been inserted.
    #[cfg(test)]
    pub(crate) fn skip_to_seq(&mut self, seq: u32) {
        assert!(seq >= self.next_seq);
        self.next_seq = seq;
    }

    /// Number of retired slots.
    #[cfg(test)]
    pub(crate) fn retired(&self) -> usize {
        self.retired
    }

    /// Test hook: give the free slot `index` the generation `generation`, as if that many
    /// timers had passed through it.
    #[cfg(test)]
    pub(crate) fn set_generation(&mut self, index: u32, generation: u32) {
        let slot = &mut self.slots[index as usize];
        assert!(slot.value.is_none(), "only a free slot");
        assert!(generation <= LAST_GENERATION);
        slot.generation = generation;
    }
}

/// Ask the kernel to back a large vector's buffer with huge pages (`madvise` on the whole
/// 2 MiB pages inside it): a cancel reads a slot at random, and with millions of timers
/// 4 KiB pages make most of those reads a TLB miss (a page walk) besides the cache miss.
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
            // SAFETY: the range lies inside this vector's own allocation and starts on a
            // page boundary; MADV_HUGEPAGE changes neither the contents nor the validity of
            // the memory, only how the kernel backs it. Errors are ignored: it is advice.
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

    #[test]
    fn a_timer_slot_is_32_bytes() {
        // What task.rs and the wheel's memory figures say.
        assert_eq!(std::mem::size_of::<Slot<crate::task::Task>>(), 32);
    }

    #[test]
    fn a_key_is_12_bytes_and_keeps_its_parts() {
        // What the README says.
        assert_eq!(std::mem::size_of::<Key>(), 12);
        let key = Key::new(7, u32::MAX - 1, 3);
        assert_eq!(
            (key.wheel, key.index(), key.generation()),
            (7, u32::MAX - 1, 3)
        );
        assert_eq!(Key::from_bits(7, key.bits()), key);
    }

    #[test]
    fn keys_go_stale_and_slots_are_reused_last_in_first_out() {
        let mut slab = Slab::with_capacity(4);
        let a = slab.insert('a', ListId::rest(1));
        let b = slab.insert('b', ListId::DUE);
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.list_of(b.0, b.1), Some(ListId::DUE));
        assert_eq!(slab.remove(a.0, a.1), Some(('a', ListId::rest(1))));
        assert_eq!(slab.remove(a.0, a.1), None, "stale");
        let c = slab.insert('c', ListId::head(2));
        assert_eq!(c.0, a.0, "the released slot is reused");
        assert_ne!(c.1, a.1, "with the next generation");
        assert!(!slab.is_current(a.0, a.1));
        assert!(slab.is_current(c.0, c.1));
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.remove(99, 0), None, "no such slot");
    }

    #[test]
    fn a_slot_whose_generations_run_out_is_retired_not_wrapped() {
        let mut slab = Slab::with_capacity(2);
        let first = slab.insert(0u32, ListId::DUE);
        slab.remove(first.0, first.1);
        // As if 2^32 - 3 more timers had passed through the slot.
        slab.set_generation(first.0, LAST_GENERATION - 1);
        let next_to_last = slab.insert(1, ListId::DUE);
        assert_eq!(next_to_last, (first.0, LAST_GENERATION - 1));
        slab.remove(next_to_last.0, next_to_last.1);
        let last = slab.insert(2, ListId::DUE);
        assert_eq!(last, (first.0, LAST_GENERATION));
        assert_eq!(slab.remove(last.0, last.1), Some((2, ListId::DUE)));
        assert_eq!(slab.retired(), 1);
        // The generation does not wrap to 0: the slot is never handed out again, so the
        // very first key (generation 0) can never match a later timer.
        let after = slab.insert(3, ListId::DUE);
        assert_ne!(after.0, first.0);
        assert_eq!(slab.remove(first.0, first.1), None);
        assert_eq!(slab.remove(last.0, last.1), None);
        assert!(!slab.is_current(first.0, 0));
        assert!(!slab.is_current(last.0, last.1));
        assert!(slab.is_current(after.0, after.1));
    }
}
