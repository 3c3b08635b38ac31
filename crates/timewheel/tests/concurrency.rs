//! Concurrency on the system clock. These tests assert counts (everything completes,
//! exactly once), never durations; the channel timeouts only turn a hang into a failure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use timewheel::{Completion, DelayedOperation, Purgatory, PurgatoryConfig, Timer, TimerConfig};

const HANG_GUARD: Duration = Duration::from_secs(60);

/// Completable only on its 20th `try_complete`.
struct TwentiethTry {
    tries: AtomicUsize,
    completions: Arc<AtomicUsize>,
}

impl DelayedOperation for TwentiethTry {
    type Cause = ();

    fn try_complete(&self) -> bool {
        self.tries.fetch_add(1, Ordering::SeqCst) + 1 >= 20
    }
    fn on_complete(&self, _how: Completion) {
        self.completions.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn twenty_threads_complete_a_hundred_operations_exactly_once() {
    let timer = Timer::system(TimerConfig::default());
    let purgatory = Arc::new(Purgatory::new("race", timer, PurgatoryConfig::default()));
    let completions = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for i in 0..100u32 {
        handles.push(purgatory.try_complete_else_watch(
            TwentiethTry {
                tries: AtomicUsize::new(0),
                completions: completions.clone(),
            },
            600_000,
            vec![i % 10],
        ));
    }
    assert_eq!(purgatory.delayed(), 100);

    let threads = 20;
    let barrier = Arc::new(Barrier::new(threads));
    let completed_by_calls = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (p, barrier, by_calls) = (
                purgatory.clone(),
                barrier.clone(),
                completed_by_calls.clone(),
            );
            thread::spawn(move || {
                barrier.wait();
                // Keep checking until every operation is done; each round tries every
                // pending operation once, so this ends after about 18 rounds in all.
                let mut round = 0u32;
                let give_up = Instant::now() + HANG_GUARD;
                while p.completed() < 100 && Instant::now() < give_up {
                    let n = p.check_and_complete(&((t as u32 + round) % 10));
                    by_calls.fetch_add(n, Ordering::SeqCst);
                    round += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert!(handles.iter().all(|h| h.is_completed()));
    assert_eq!(
        completions.load(Ordering::SeqCst),
        100,
        "on_complete exactly 100 times"
    );
    assert_eq!(
        completed_by_calls.load(Ordering::SeqCst),
        100,
        "each counted by one call"
    );
    assert_eq!((purgatory.delayed(), purgatory.expired()), (0, 0));
}

/// Records which path completed it.
struct Raced {
    completions: AtomicUsize,
    expirations: AtomicUsize,
    done: mpsc::Sender<()>,
}

impl DelayedOperation for Raced {
    type Cause = ();

    fn try_complete(&self) -> bool {
        false
    }
    fn on_complete(&self, how: Completion) {
        self.completions.fetch_add(1, Ordering::SeqCst);
        if how == Completion::Expired {
            self.expirations.fetch_add(1, Ordering::SeqCst);
            self.done.send(()).unwrap();
        }
    }
}

#[test]
fn completion_racing_expiry_completes_each_operation_once() {
    let timer = Timer::system(TimerConfig::default());
    let purgatory = Arc::new(Purgatory::new(
        "race",
        timer.clone(),
        PurgatoryConfig::default(),
    ));
    let (done_tx, done_rx) = mpsc::channel();
    let n = 3_000;
    let (handle_tx, handle_rx) = mpsc::channel();

    // A completer thread force-completes operations as soon as they are created, while
    // their 0-2 ms timeouts fire on the driver thread.
    let completer = thread::spawn(move || {
        let mut won = 0;
        for h in handle_rx {
            let h: timewheel::OperationHandle<Raced> = h;
            if h.force_complete() {
                won += 1;
            }
        }
        won
    });
    let mut handles = Vec::new();
    for i in 0..n {
        let h = purgatory.try_complete_else_watch(
            Raced {
                completions: AtomicUsize::new(0),
                expirations: AtomicUsize::new(0),
                done: done_tx.clone(),
            },
            (i % 3) as u64,
            vec![i % 7],
        );
        handle_tx.send(h.clone()).unwrap();
        handles.push(h);
    }
    drop(handle_tx);
    let forced = completer.join().unwrap();
    // Every operation that the completer did not win must expire: wait for those.
    for _ in 0..(n as usize - forced) {
        done_rx
            .recv_timeout(HANG_GUARD)
            .expect("remaining operations expire");
    }
    // A timeout whose operation was force-completed may already have been taken out of
    // the wheel by the driver (so the cancel found nothing) and not have run yet; it still
    // counts as delayed until it runs. The driver runs tasks in due-time order, so a task
    // due after every timeout is a barrier: once it has run, they all have.
    let (barrier_tx, barrier_rx) = mpsc::channel();
    timer.schedule(5, move || barrier_tx.send(()).unwrap());
    barrier_rx
        .recv_timeout(HANG_GUARD)
        .expect("barrier task ran");
    let mut expired = 0;
    for h in &handles {
        let op = h.operation();
        assert!(h.is_completed());
        assert_eq!(
            op.completions.load(Ordering::SeqCst),
            1,
            "on_complete exactly once"
        );
        expired += op.expirations.load(Ordering::SeqCst);
    }
    assert_eq!(
        forced + expired,
        n as usize,
        "each completed by exactly one path"
    );
    assert_eq!(purgatory.expired() as usize, expired);
    assert_eq!(purgatory.completed() as usize, n as usize);
    assert_eq!(purgatory.delayed(), 0);
}

#[test]
fn concurrent_schedule_and_cancel_keep_counts_exact() {
    let timer = Timer::system(TimerConfig::default());
    let fired = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (timer, fired, tx) = (timer.clone(), fired.clone(), tx.clone());
            thread::spawn(move || {
                let mut kept = 0;
                for i in 0..2_000u64 {
                    let (fired, tx) = (fired.clone(), tx.clone());
                    let h = timer.schedule(((i + t) % 5) as i64, move || {
                        fired.fetch_add(1, Ordering::SeqCst);
                        tx.send(()).unwrap();
                    });
                    // Cancel every other one; a cancel may lose to the driver, which is
                    // fine as long as the counts add up.
                    if i % 2 == 0 && timer.cancel(h) {
                        continue;
                    }
                    kept += 1;
                }
                kept
            })
        })
        .collect();
    let kept: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    drop(tx);
    for _ in 0..kept {
        rx.recv_timeout(HANG_GUARD).expect("every kept timer fires");
    }
    assert_eq!(fired.load(Ordering::SeqCst), kept);
    assert_eq!(timer.pending(), 0);
}
