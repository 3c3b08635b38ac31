//! Unit tests of the wheel: placement, the cascade, tombstones, generations.

use super::*;
use crate::list::COMPACT_MIN;
use crate::snapshot::WheelPosition;

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
    let capacity = wheel.lists.iter().map(List::capacity).sum::<usize>();
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
    let capacity: usize = wheel.lists.iter().map(List::capacity).sum();
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
        let items: usize = wheel.lists.iter().map(List::len).sum();
        let lists = wheel.lists.len();
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

#[test]
fn a_slot_at_its_last_generation_is_retired_so_old_keys_and_tombstones_stay_dead() {
    // A tombstone at 1 000 ms names (slot s, generation 0). If generations wrapped, the
    // slot's occupant after 2^32 more would be (s, 0) again: that tombstone would fire it at
    // 1 000 ms, long before its deadline, and the old key would cancel it.
    let mut wheel = TimingWheel::new(1, 20, 0);
    let keep = wheel.insert(1_000, 0u32); // keeps the 1 000 ms bucket's list alive
    let old = wheel.insert(1_000, 1);
    assert_eq!(wheel.remove(old), Some(1));
    // Drive the slot to its last generation, as 2^32 - 2 timers through it would.
    wheel.set_generation(old.index(), u32::MAX - 1);
    let last = wheel.insert(100_000, 2);
    assert_eq!(
        (last.index(), last.generation()),
        (old.index(), u32::MAX - 1)
    );
    assert_eq!(wheel.remove(last), Some(2));
    wheel.next_expiration(); // settles the cancel: the slot is released now
                             // The slot is retired: the next timers get other slots, never (s, 0) again.
    let mut later = Vec::new();
    for i in 0..10 {
        let key = wheel.insert(100_000, 10 + i);
        assert_ne!(key.index(), old.index());
        later.push(key);
    }
    assert_eq!(wheel.remove(old), None, "a stale key cancels nothing");
    assert_eq!(wheel.remove(last), None);
    assert!(!wheel.contains(old));
    let mut out = Vec::new();
    wheel.advance_to(99_999, &mut out);
    let fired: Vec<u32> = out.iter().map(|e| e.value).collect();
    assert_eq!(
        fired,
        vec![0],
        "only the live 1 000 ms timer; nothing early"
    );
    out.clear();
    wheel.advance_to(100_000, &mut out);
    assert_eq!(out.len(), 10);
    assert!(out.iter().all(|e| e.deadline_ms == 100_000));
    let _ = keep;
}

#[test]
fn keys_of_another_wheel_are_refused() {
    let mut a = TimingWheel::new(1, 20, 0);
    let mut b = TimingWheel::new(1, 20, 0);
    let ka = a.insert(50, 'a');
    let kb = b.insert(50, 'b');
    // Same slot, same generation: only the wheel tells them apart.
    assert_eq!((ka.index(), ka.generation()), (kb.index(), kb.generation()));
    assert_eq!(a.remove(kb), None);
    assert!(!a.contains(kb));
    assert_eq!(a.position(kb), None);
    assert_eq!(b.remove(kb), Some('b'));
    assert_eq!(a.remove(ka), Some('a'));
}

#[test]
fn positions_name_the_bucket_and_follow_the_cascade() {
    let mut wheel = TimingWheel::new(1, 20, 0);
    let k = wheel.insert(450, 1u32);
    let due = wheel.insert(0, 2u32);
    assert_eq!(wheel.position(due), None, "already due: in no bucket");
    assert_eq!(
        wheel.position(k),
        Some(WheelPosition {
            level: 2,
            slot: 1,
            expiration_ms: 400
        })
    );
    let mut out = Vec::new();
    wheel.advance_to(400, &mut out);
    assert_eq!(
        wheel.position(k).map(|p| p.level),
        Some(2),
        "cascade pending"
    );
    wheel.advance_to(401, &mut out);
    assert_eq!(
        wheel.position(k),
        Some(WheelPosition {
            level: 1,
            slot: 2,
            expiration_ms: 440
        })
    );
    wheel.advance_to(440, &mut out);
    assert_eq!(
        wheel.position(k),
        Some(WheelPosition {
            level: 0,
            slot: 10,
            expiration_ms: 450
        })
    );
    wheel.advance_to(450, &mut out);
    assert_eq!(wheel.position(k), None);
    assert_eq!(out.len(), 2);
}

#[test]
fn snapshots_count_what_each_level_moved_down_and_fired() {
    let mut wheel = TimingWheel::new(1, 20, 0);
    for d in [405, 450, 460, 800, 3] {
        wheel.insert(d, d as u32);
    }
    let mut out = Vec::new();
    wheel.advance_to(500, &mut out);
    let snap = wheel.snapshot(500);
    let per_level: Vec<(u64, u64)> = snap.levels.iter().map(|l| (l.cascaded, l.fired)).collect();
    // Level 2's bucket [400, 800) moved 405, 450 and 460 down; level 1 moved 450 on to
    // level 0 and fired 460 (its bucket [460, 480) expires exactly at that deadline);
    // level 0 fired 3, 405 and 450. 800 is still pending.
    assert_eq!(per_level, vec![(0, 3), (1, 1), (3, 0)]);
    let flushes: Vec<(usize, usize, u64, u64, u64)> = snap
        .flushes
        .iter()
        .map(|f| (f.level, f.slot, f.expiration_ms, f.moved_down, f.fired))
        .collect();
    assert_eq!(
        flushes,
        vec![
            (0, 3, 3, 0, 1),
            (2, 1, 400, 3, 0),
            (0, 5, 405, 0, 1),
            (1, 2, 440, 1, 0),
            (0, 10, 450, 0, 1),
            (1, 3, 460, 0, 1),
        ]
    );
    assert_eq!(snap.flushes_total, 6);
    assert!(snap
        .flushes
        .windows(2)
        .all(|w| w[1].number == w[0].number + 1));
    // The ring keeps the last 64.
    for d in 501..700 {
        wheel.insert(d, 0);
    }
    wheel.advance_to(700, &mut out);
    let snap = wheel.snapshot(700);
    assert_eq!(snap.flushes.len(), cascade::RECENT);
    assert_eq!(snap.flushes.last().unwrap().number + 1, snap.flushes_total);
}

#[test]
fn a_chunked_cascade_adds_its_later_moves_to_its_flush_record() {
    let mut wheel = TimingWheel::new(1, 20, 0);
    for i in 0..5_000u32 {
        wheel.insert(420 + u64::from(i % 300), i);
    }
    let mut out = Vec::new();
    wheel.advance_to(400, &mut out);
    let first = wheel.snapshot(400).flushes.last().copied().unwrap();
    // The head was empty; one chunk moved in the same advance (nothing else to do).
    assert_eq!((first.level, first.moved_down), (2, cascade::CHUNK as u64));
    // More chunks follow on the next advances, which fire nothing yet.
    wheel.advance_to(401, &mut out);
    wheel.advance_to(402, &mut out);
    let snap = wheel.snapshot(402);
    let record = snap
        .flushes
        .iter()
        .find(|f| f.number == first.number)
        .unwrap();
    assert_eq!(record.moved_down, 5_000);
    assert_eq!(snap.levels[2].cascaded, 5_000);
    assert!(out.is_empty());
}

#[test]
fn ties_keep_their_insertion_order_when_the_insertion_numbers_are_renumbered() {
    let mut wheel = TimingWheel::new(1, 20, 0);
    let early = wheel.insert(100, 1);
    wheel.insert(50, 0);
    wheel.remove(early);
    wheel.insert(100, 2);
    // As if almost 2^32 timers had been inserted since: the third insertion from here
    // finds the counter at its end and renumbers the pending timers.
    wheel.slab.skip_to_seq(u32::MAX - 2);
    let keys: Vec<Key> = (3..=7).map(|value| wheel.insert(100, value)).collect();
    let seqs: Vec<u32> = keys.iter().map(|k| wheel.slab.seq(k.index())).collect();
    assert_eq!(
        seqs,
        vec![2, 3, 4, 5, 6],
        "renumbered 0..n in insertion order"
    );
    assert_eq!(fire(&mut wheel, 50), vec![(50, 0)]);
    let fired: Vec<u32> = fire(&mut wheel, 100).into_iter().map(|(_, v)| v).collect();
    assert_eq!(fired, vec![2, 3, 4, 5, 6, 7]);
}
