//! Purgatory behaviour on the manual clock: completion, expiry, accounting, cancellation,
//! purging, shutdown and snapshots. Everything is deterministic.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use timewheel::{
    Completion, DelayedOperation, OperationHandle, Purgatory, PurgatoryConfig, Timer, TimerConfig,
};

/// A test operation: completable once `ready` is set; counts its completions, keeps how
/// the last one ended, and records them in order in a shared log.
#[derive(Default)]
struct MockOp {
    name: &'static str,
    ready: AtomicBool,
    tries: AtomicUsize,
    completions: AtomicUsize,
    expirations: AtomicUsize,
    how: Mutex<Option<Completion>>,
    log: Arc<Mutex<Vec<String>>>,
}

impl MockOp {
    fn new(name: &'static str) -> MockOp {
        MockOp {
            name,
            ..Default::default()
        }
    }

    fn logged(name: &'static str, log: &Arc<Mutex<Vec<String>>>) -> MockOp {
        MockOp {
            name,
            log: log.clone(),
            ..Default::default()
        }
    }

    fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    fn completions(&self) -> usize {
        self.completions.load(Ordering::SeqCst)
    }

    fn expirations(&self) -> usize {
        self.expirations.load(Ordering::SeqCst)
    }

    /// How its completion ended, as `on_complete` was told.
    fn how(&self) -> Option<Completion> {
        *self.how.lock().unwrap()
    }
}

impl DelayedOperation for MockOp {
    type Cause = ();

    fn try_complete(&self) -> bool {
        self.tries.fetch_add(1, Ordering::SeqCst);
        self.ready.load(Ordering::SeqCst)
    }

    fn on_complete(&self, how: Completion) {
        self.completions.fetch_add(1, Ordering::SeqCst);
        if how == Completion::Expired {
            self.expirations.fetch_add(1, Ordering::SeqCst);
        }
        *self.how.lock().unwrap() = Some(how);
        self.log
            .lock()
            .unwrap()
            .push(format!("{} {how:?}", self.name));
    }

    fn describe(&self) -> String {
        format!("{} waits for ready", self.name)
    }
}

fn manual() -> Timer {
    Timer::manual(TimerConfig::default())
}

fn purgatory(timer: &Timer) -> Purgatory<&'static str, MockOp> {
    Purgatory::new("test", timer.clone(), PurgatoryConfig::default())
}

#[test]
fn check_and_complete_returns_0_then_1_then_0() {
    let timer = manual();
    let p = purgatory(&timer);
    let op = p.try_complete_else_watch(MockOp::new("r1"), 100_000, vec!["k"]);
    assert!(!op.is_completed());
    assert_eq!(
        op.operation().tries.load(Ordering::SeqCst),
        2,
        "tried before and after watching"
    );
    assert_eq!(p.check_and_complete(&"k"), 0);
    assert_eq!(p.check_and_complete(&"k"), 0);
    op.operation().set_ready();
    assert_eq!(p.check_and_complete(&"k"), 1);
    assert!(op.is_completed());
    assert_eq!(p.check_and_complete(&"k"), 0);
    assert_eq!(p.check_and_complete(&"unknown"), 0);
    assert_eq!(op.operation().completions(), 1);
    assert_eq!(op.operation().how(), Some(Completion::Satisfied(())));
    assert_eq!(op.operation().expirations(), 0);
    assert_eq!(
        (p.watched(), p.delayed(), p.expired(), p.completed()),
        (0, 0, 0, 1)
    );
    assert_eq!(timer.pending(), 0, "completion cancelled the timeout");
}

#[test]
fn an_operation_completable_at_once_is_neither_watched_nor_timed() {
    let timer = manual();
    let p = purgatory(&timer);
    let op = MockOp::new("now");
    op.set_ready();
    let h = p.try_complete_else_watch(op, 1_000, vec!["k"]);
    assert!(h.is_completed());
    assert_eq!(h.operation().tries.load(Ordering::SeqCst), 1);
    assert_eq!((p.watched(), p.delayed(), timer.pending()), (0, 0, 0));
    assert_eq!(h.operation().how(), Some(Completion::Satisfied(())));
    assert!(!h.force_complete());
}

#[test]
fn expiry_no_earlier_than_the_timeout_and_long_timeouts_stay_pending() {
    let timer = manual();
    let log = Arc::new(Mutex::new(Vec::new()));
    let p = purgatory(&timer);
    let short = p.try_complete_else_watch(MockOp::logged("short", &log), 20, vec!["a"]);
    let long = p.try_complete_else_watch(MockOp::logged("long", &log), 200_000, vec!["a"]);
    assert_eq!(short.deadline_ms(), 20);
    assert_eq!(p.delayed(), 2);

    timer.advance_to(19);
    assert!(!short.is_completed(), "expired before 20 ms");
    assert_eq!(p.expired(), 0);

    assert_eq!(timer.advance_to(20), 1);
    assert!(short.is_completed());
    assert_eq!(short.operation().completions(), 1);
    assert_eq!(short.operation().expirations(), 1);
    assert_eq!(*log.lock().unwrap(), vec!["short Expired"]);
    assert_eq!((p.expired(), p.delayed()), (1, 1));

    timer.advance_to(199_999);
    assert!(!long.is_completed(), "the 200 s operation is still pending");
    assert_eq!(p.delayed(), 1);
    timer.advance_to(200_000);
    assert!(long.is_completed());
    assert_eq!((p.expired(), p.delayed()), (2, 0));
}

#[test]
fn watched_and_delayed_accounting() {
    let timer = manual();
    let p = purgatory(&timer);
    let r1 = p.try_complete_else_watch(MockOp::new("r1"), 100_000, vec!["a"]);
    let r2 = p.try_complete_else_watch(MockOp::new("r2"), 100_000, vec!["a", "b"]);
    let r3 = p.try_complete_else_watch(MockOp::new("r3"), 100_000, vec!["a", "b", "c"]);
    assert_eq!(p.delayed(), 3);
    assert_eq!(p.watched(), 6);

    // Completing directly cancels the timeouts at once...
    assert!(r2.force_complete());
    assert!(r3.force_complete());
    assert!(
        !r3.force_complete(),
        "only the first force_complete completes"
    );
    assert_eq!(r2.operation().how(), Some(Completion::Forced));
    assert_eq!(p.delayed(), 1);
    // ...but leaves the watcher lists until their keys are checked (Kafka's behaviour).
    assert_eq!(p.watched(), 6);

    assert_eq!(p.check_and_complete(&"a"), 0);
    assert_eq!(p.watched(), 4);
    assert_eq!(p.check_and_complete(&"b"), 0);
    assert_eq!(p.watched(), 2);
    assert_eq!(p.check_and_complete(&"c"), 0);
    assert_eq!(p.watched(), 1);

    let keys: Vec<(String, usize)> = p
        .snapshot(10)
        .keys
        .into_iter()
        .map(|k| (k.key, k.watchers))
        .collect();
    assert_eq!(
        keys,
        vec![("a".to_string(), 1)],
        "keys with no watchers are removed"
    );
    assert!(!r1.is_completed());
    assert_eq!(
        r2.operation().completions() + r3.operation().completions(),
        2
    );
}

#[test]
fn completion_exactly_once_whichever_path_wins() {
    let timer = manual();
    let p = Arc::new(purgatory(&timer));

    // Timeout first, then a late force_complete and a late check: on_complete once.
    let a = p.try_complete_else_watch(MockOp::new("a"), 10, vec!["x"]);
    timer.advance_to(10);
    a.operation().set_ready();
    assert!(!a.force_complete());
    assert_eq!(p.check_and_complete(&"x"), 0);
    assert_eq!(
        (a.operation().completions(), a.operation().expirations()),
        (1, 1)
    );
    assert_eq!(a.operation().how(), Some(Completion::Expired));

    // Watcher and timeout due at the same instant. Timer tasks due together run in
    // scheduling order, so which path wins is decided by what was scheduled first.
    for watcher_first in [true, false] {
        let now = timer.now_ms();
        let slot: Arc<OnceLock<OperationHandle<MockOp>>> = Arc::new(OnceLock::new());
        let watcher = {
            let (p, slot) = (p.clone(), slot.clone());
            move || {
                let op = slot.get().unwrap();
                op.operation().set_ready();
                let completed = p.check_and_complete(&"z");
                assert_eq!(completed, usize::from(watcher_first));
            }
        };
        if watcher_first {
            timer.schedule_at(now + 5, watcher);
            slot.set(p.try_complete_else_watch(MockOp::new("c"), 5, vec!["z"]))
                .ok();
        } else {
            slot.set(p.try_complete_else_watch(MockOp::new("c"), 5, vec!["z"]))
                .ok();
            timer.schedule_at(now + 5, watcher);
        }
        let c = slot.get().unwrap();
        assert_eq!(c.deadline_ms(), now + 5);
        assert_eq!(timer.advance_to(now + 5), 2);
        assert!(c.is_completed());
        assert_eq!(c.operation().completions(), 1, "on_complete exactly once");
        let expected_expirations = usize::from(!watcher_first);
        assert_eq!(c.operation().expirations(), expected_expirations);
        let expected = if watcher_first {
            Completion::Satisfied(())
        } else {
            Completion::Expired
        };
        assert_eq!(
            c.operation().how(),
            Some(expected),
            "the path that won says how"
        );
        assert_eq!(p.delayed(), 0);
    }
    assert_eq!((p.completed(), p.expired()), (3, 2));
}

#[test]
fn cancel_for_key_cancels_silently_and_leaves_other_keys_alone() {
    let timer = manual();
    let p = purgatory(&timer);
    let a1 = p.try_complete_else_watch(MockOp::new("a1"), 1_000, vec!["a"]);
    let ab = p.try_complete_else_watch(MockOp::new("ab"), 1_000, vec!["a", "b"]);
    let b1 = p.try_complete_else_watch(MockOp::new("b1"), 1_000, vec!["b"]);
    let done = p.try_complete_else_watch(MockOp::new("done"), 1_000, vec!["a"]);
    done.force_complete();
    assert_eq!((p.watched(), p.delayed()), (5, 3));

    let cancelled = p.cancel_for_key(&"a");
    let mut names: Vec<&str> = cancelled.iter().map(|h| h.operation().name).collect();
    names.sort();
    assert_eq!(
        names,
        vec!["a1", "ab"],
        "the pending operations of key a, not the completed one"
    );
    assert!(cancelled
        .iter()
        .all(|h| h.is_cancelled() && !h.is_completed()));
    assert_eq!(p.delayed(), 1, "their timeouts are cancelled");
    assert_eq!(p.watched(), 2, "b still lists b1 and the cancelled ab");

    assert!(p.cancel_for_key(&"unknown").is_empty());
    assert!(p.cancel_for_key(&"a").is_empty());

    // No callback ran for them, even when their time comes or their other key is checked.
    ab.operation().set_ready();
    assert_eq!(p.check_and_complete(&"b"), 0);
    assert!(!ab.force_complete());
    timer.advance_to(5_000);
    for h in [&a1, &ab] {
        assert_eq!(
            (h.operation().completions(), h.operation().expirations()),
            (0, 0)
        );
    }
    // The other key's operation is untouched and expires normally.
    assert_eq!(
        (b1.operation().completions(), b1.operation().expirations()),
        (1, 1)
    );
    assert_eq!((p.delayed(), p.expired()), (0, 1));
}

#[test]
fn completed_operations_are_purged_and_memory_stays_bounded() {
    let timer = manual();
    let purge_interval = 100;
    let p: Purgatory<u32, MockOp> =
        Purgatory::new("churn", timer.clone(), PurgatoryConfig { purge_interval });
    let mut max_watched = 0;
    let mut live = std::collections::VecDeque::new();
    for i in 0..20_000u32 {
        // Each operation watches a shared key and a key of its own: fresh keys forever.
        let h = p.try_complete_else_watch(MockOp::new("op"), 60_000, vec![i % 3, 1_000 + i]);
        live.push_back(h);
        if live.len() > 50 {
            assert!(live.pop_front().unwrap().force_complete());
        }
        max_watched = max_watched.max(p.watched());
    }
    // Pending: 50 operations, 100 entries. A purge starts once the garbage exceeds both
    // purge_interval and the live entries, and the condition is looked at every 16th
    // completion (2 entries each).
    let bound = 2 * 100 + purge_interval + 2 * 16 + 2;
    assert!(
        max_watched <= bound,
        "watched grew to {max_watched} > {bound}"
    );
    let snap = p.snapshot(0);
    assert!(
        snap.keys.len() <= 3 + 50 + purge_interval,
        "{} keys",
        snap.keys.len()
    );
    assert_eq!(snap.pending_total, 50);
    assert_eq!(p.delayed(), 50);
    assert_eq!(p.completed(), 20_000 - 50);
    assert_eq!(timer.pending(), 50);
}

#[test]
fn shutdown_cancels_every_pending_operation_without_callbacks() {
    let timer = manual();
    let p = purgatory(&timer);
    let other = purgatory(&timer); // shares the timer
    let a = p.try_complete_else_watch(MockOp::new("a"), 10, vec!["a", "b"]);
    let b = p.try_complete_else_watch(MockOp::new("b"), 10_000, vec!["b"]);
    let c = p.try_complete_else_watch(MockOp::new("c"), 10, vec!["c"]);
    c.force_complete();
    let survivor = other.try_complete_else_watch(MockOp::new("s"), 10, vec!["a"]);

    p.shutdown();
    assert_eq!((p.watched(), p.delayed()), (0, 0));
    assert!(a.is_cancelled() && b.is_cancelled() && !a.is_completed());
    assert!(
        c.is_completed(),
        "already-completed operations stay completed"
    );
    assert!(!a.force_complete());
    assert_eq!(
        timer.pending(),
        1,
        "only the other purgatory's timeout is left"
    );

    // After shutdown: tried once, cancelled if not completable.
    let late = p.try_complete_else_watch(MockOp::new("late"), 10, vec!["a"]);
    assert!(late.is_cancelled());
    let ready = MockOp::new("ready");
    ready.set_ready();
    assert!(p
        .try_complete_else_watch(ready, 10, vec!["a"])
        .is_completed());
    assert_eq!((p.watched(), p.delayed()), (0, 0));

    timer.advance_to(100_000);
    for h in [&a, &b, &late] {
        assert_eq!(
            (h.operation().completions(), h.operation().expirations()),
            (0, 0)
        );
    }
    // The shared timer and the other purgatory carry on.
    assert_eq!(survivor.operation().expirations(), 1);
    assert_eq!(other.expired(), 1);
    p.shutdown(); // idempotent
}

#[test]
fn dropping_a_purgatory_releases_its_operations() {
    let timer = manual();
    let p = purgatory(&timer);
    let h = p.try_complete_else_watch(MockOp::new("a"), 1_000, vec!["a"]);
    drop(p);
    assert!(h.is_cancelled());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn snapshot_lists_keys_and_the_first_pending_operations() {
    let timer = manual();
    let p = purgatory(&timer);
    p.try_complete_else_watch(MockOp::new("late"), 3_000, vec!["p1"]);
    p.try_complete_else_watch(MockOp::new("early"), 1_000, vec!["p0", "p1"]);
    p.try_complete_else_watch(MockOp::new("mid"), 2_000, vec!["p2"]);
    let snap = p.snapshot(2);
    assert_eq!(snap.name, "test");
    assert_eq!((snap.watched, snap.delayed, snap.expired), (4, 3, 0));
    let keys: Vec<(&str, usize)> = snap
        .keys
        .iter()
        .map(|k| (k.key.as_str(), k.watchers))
        .collect();
    assert_eq!(keys, vec![("p0", 1), ("p1", 2), ("p2", 1)]);
    assert_eq!(snap.pending_total, 3);
    assert_eq!(snap.pending.len(), 2);
    assert_eq!(snap.pending[0].keys, vec!["p0", "p1"]);
    assert_eq!(snap.pending[0].deadline_ms, 1_000);
    assert_eq!(snap.pending[0].description, "early waits for ready");
    assert_eq!(snap.pending[1].deadline_ms, 2_000);
    // Which wheel bucket holds each timeout: 1 000 ms and 2 000 ms are on level 2
    // (400 ms buckets) at time 0.
    let at = |i: usize| {
        snap.pending[i]
            .bucket
            .map(|b| (b.level, b.slot, b.expiration_ms))
    };
    assert_eq!((at(0), at(1)), (Some((2, 2, 800)), Some((2, 5, 2_000))));

    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["pending"][0]["bucket"]["level"], 2);
    assert_eq!(json["keys"][1]["key"], "p1");
    assert_eq!(json["keys"][1]["watchers"], 2);
    assert_eq!(json["pending"][0]["description"], "early waits for ready");
}

#[test]
fn snapshot_positions_follow_the_timeout_down_the_wheel() {
    let timer = manual();
    let p = purgatory(&timer);
    p.try_complete_else_watch(MockOp::new("op"), 450, vec!["k"]);
    let at = |p: &Purgatory<&'static str, MockOp>| {
        p.snapshot(10).pending[0]
            .bucket
            .map(|b| (b.level, b.slot, b.expiration_ms))
    };
    assert_eq!(at(&p), Some((2, 1, 400)));
    timer.advance_to(400);
    timer.advance_to(401);
    assert_eq!(at(&p), Some((1, 2, 440)));
    timer.advance_to(440);
    assert_eq!(at(&p), Some((0, 10, 450)));
    // A zero timeout is due at once: in no bucket.
    p.try_complete_else_watch(MockOp::new("now"), 0, vec!["k"]);
    let snap = p.snapshot(10);
    assert_eq!(snap.pending[0].deadline_ms, 440);
    assert_eq!(snap.pending[0].bucket, None);
}

/// Callbacks run outside the purgatory's locks, so they may call back into it.
#[test]
fn callbacks_may_reenter_the_purgatory() {
    struct Chain {
        next: Mutex<Option<Arc<Purgatory<&'static str, Chain>>>>,
        ready: AtomicBool,
        done: Arc<AtomicUsize>,
    }
    impl DelayedOperation for Chain {
        type Cause = ();

        fn try_complete(&self) -> bool {
            self.ready.load(Ordering::SeqCst)
        }
        fn on_complete(&self, _how: Completion) {
            self.done.fetch_add(1, Ordering::SeqCst);
            if let Some(p) = self.next.lock().unwrap().take() {
                // Re-entrant calls: check another key, add an operation.
                p.check_and_complete(&"other");
                p.try_complete_else_watch(
                    Chain {
                        next: Mutex::new(None),
                        ready: AtomicBool::new(false),
                        done: self.done.clone(),
                    },
                    5,
                    vec!["k"],
                );
            }
        }
    }
    let timer = manual();
    let p = Arc::new(Purgatory::new(
        "chain",
        timer.clone(),
        PurgatoryConfig::default(),
    ));
    let done = Arc::new(AtomicUsize::new(0));
    let first = p.try_complete_else_watch(
        Chain {
            next: Mutex::new(Some(p.clone())),
            ready: AtomicBool::new(false),
            done: done.clone(),
        },
        10,
        vec!["k"],
    );
    first.operation().ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete(&"k"), 1);
    assert_eq!(p.delayed(), 1, "the operation added from on_complete");
    timer.advance_by(5);
    assert_eq!(done.load(Ordering::SeqCst), 2);
    assert_eq!(p.expired(), 1);
}

#[test]
fn a_check_hands_its_cause_to_the_operations_it_completes() {
    /// Completes once `ready`; keeps the cause it was handed.
    #[derive(Default)]
    struct Told {
        ready: AtomicBool,
        told: Mutex<Option<Completion<&'static str>>>,
    }
    impl DelayedOperation for Told {
        type Cause = &'static str;

        fn try_complete(&self) -> bool {
            self.ready.load(Ordering::SeqCst)
        }
        fn on_complete(&self, how: Completion<&'static str>) {
            *self.told.lock().unwrap() = Some(how);
        }
    }
    let timer = manual();
    let p: Purgatory<&'static str, Told> =
        Purgatory::new("told", timer.clone(), PurgatoryConfig::default());
    let op = p.try_complete_else_watch(Told::default(), 1_000, vec!["k"]);
    assert_eq!(p.check_and_complete_with(&"k", "not ready yet"), 0);
    op.operation().ready.store(true, Ordering::SeqCst);
    assert_eq!(p.check_and_complete_with(&"k", "the append"), 1);
    assert_eq!(
        *op.operation().told.lock().unwrap(),
        Some(Completion::Satisfied("the append")),
        "the cause of the check that completed it"
    );

    // Completed when added: nobody checked, so the cause is the default.
    let at_once = Told::default();
    at_once.ready.store(true, Ordering::SeqCst);
    let op = p.try_complete_else_watch(at_once, 1_000, vec!["k"]);
    assert_eq!(
        *op.operation().told.lock().unwrap(),
        Some(Completion::Satisfied(""))
    );
}
