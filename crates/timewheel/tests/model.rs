//! Property test: the manual-clock timer against a simple reference model.
//!
//! The model keeps pending timers in a sorted map and fires, on every advance, exactly the
//! ones whose firing time has come, ordered by (firing time, deadline, scheduling order).
//! A timer's firing time is its deadline rounded up to the tick, or, if it was already due
//! when scheduled (deadline at or before the clock), the clock at that moment: it runs on
//! the next advance. With `tick_ms = 1` that is simply "in deadline order, ties in
//! scheduling order, each exactly at its deadline".
//!
//! Random sequences of schedule / cancel / advance, on random wheel shapes, must produce
//! the same fired tasks in the same order at the same clock readings, the same return
//! values from `cancel` and `advance_to`, and the same `pending()` counts.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use timewheel::{Timer, TimerConfig, TimerHandle};

#[derive(Clone, Debug)]
enum Op {
    Schedule { delay: i64 },
    Cancel { pick: usize },
    Advance { by: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (-3i64..700).prop_map(|delay| Op::Schedule { delay }),
        1 => (2_000i64..200_000).prop_map(|delay| Op::Schedule { delay }),
        2 => any::<usize>().prop_map(|pick| Op::Cancel { pick }),
        3 => (0u64..120).prop_map(|by| Op::Advance { by }),
        1 => (0u64..20_000).prop_map(|by| Op::Advance { by }),
    ]
}

#[derive(Default)]
struct Model {
    now: u64,
    /// (fire time, deadline, id) -> ()
    pending: BTreeMap<(u64, u64, usize), ()>,
    /// id -> key in `pending` while pending
    keys: Vec<Option<(u64, u64, usize)>>,
}

impl Model {
    fn schedule(&mut self, id: usize, delay: i64, tick: u64) {
        let deadline = if delay <= 0 {
            self.now
        } else {
            self.now + delay as u64
        };
        let fire = if deadline <= self.now {
            self.now
        } else {
            deadline.div_ceil(tick) * tick
        };
        let key = (fire, deadline, id);
        self.pending.insert(key, ());
        self.keys.push(Some(key));
    }

    fn cancel(&mut self, id: usize) -> bool {
        match self.keys[id].take() {
            Some(key) => self.pending.remove(&key).is_some(),
            None => false,
        }
    }

    /// Fire everything due by `t`; returns (id, deadline, clock reading) in order.
    fn advance_to(&mut self, t: u64) -> Vec<(usize, u64, u64)> {
        let mut fired = Vec::new();
        while let Some((&(fire, deadline, id), _)) = self.pending.iter().next() {
            if fire > t {
                break;
            }
            self.pending.remove(&(fire, deadline, id));
            self.keys[id] = None;
            fired.push((id, deadline, fire.max(self.now)));
        }
        self.now = self.now.max(t);
        fired
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn timer_matches_the_reference_model(
        tick in 1u64..=4,
        wheel_size in 2usize..=8,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let timer = Timer::manual(TimerConfig { tick_ms: tick, wheel_size });
        let log: Arc<Mutex<Vec<(usize, u64, u64)>>> = Default::default();
        let mut handles: Vec<TimerHandle> = Vec::new();
        let mut model = Model::default();

        for op in ops {
            match op {
                Op::Schedule { delay } => {
                    let id = handles.len();
                    let deadline = timer.deadline_after(delay);
                    let (log, t) = (log.clone(), timer.clone());
                    handles.push(timer.schedule(delay, move || {
                        log.lock().unwrap().push((id, deadline, t.now_ms()));
                    }));
                    model.schedule(id, delay, tick);
                }
                Op::Cancel { pick } => {
                    if handles.is_empty() {
                        continue;
                    }
                    let id = pick % handles.len();
                    prop_assert_eq!(timer.cancel(handles[id]), model.cancel(id), "cancel {}", id);
                }
                Op::Advance { by } => {
                    let t = timer.now_ms() + by;
                    let expected = model.advance_to(t);
                    let ran = timer.advance_to(t);
                    let got: Vec<_> = log.lock().unwrap().drain(..).collect();
                    prop_assert_eq!(ran, expected.len());
                    for &(id, deadline, at) in &got {
                        prop_assert!(at >= deadline, "timer {} fired early", id);
                    }
                    prop_assert_eq!(got, expected);
                    prop_assert_eq!(timer.now_ms(), t);
                }
            }
            prop_assert_eq!(timer.pending(), model.pending.len());
        }
        // Finally everything left fires, once, in order.
        let end = timer.now_ms() + 400_000;
        let expected = model.advance_to(end);
        prop_assert_eq!(timer.advance_to(end), expected.len());
        prop_assert_eq!(log.lock().unwrap().clone(), expected);
        prop_assert_eq!(timer.pending(), 0);
    }
}
