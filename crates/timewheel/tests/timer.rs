//! Timer behaviour on the manual clock (deterministic), plus a few system-clock checks that
//! assert only what must always hold (nothing fires early, everything fires once).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use timewheel::{Timer, TimerConfig, TimerHandle};

/// A fired-task log: (task id, deadline, clock reading when it ran).
type Log = Arc<Mutex<Vec<(usize, u64, u64)>>>;

fn schedule_logged(timer: &Timer, log: &Log, id: usize, delay: i64) -> (TimerHandle, u64) {
    let deadline = timer.deadline_after(delay);
    let (log, t) = (log.clone(), timer.clone());
    let handle = timer.schedule(delay, move || {
        log.lock().unwrap().push((id, deadline, t.now_ms()));
    });
    (handle, deadline)
}

#[test]
fn due_now_timers_fire_on_the_next_advance() {
    let timer = Timer::manual(TimerConfig::default());
    let log: Log = Default::default();
    schedule_logged(&timer, &log, 0, 0);
    schedule_logged(&timer, &log, 1, -7);
    assert_eq!(timer.pending(), 2);
    assert!(
        log.lock().unwrap().is_empty(),
        "scheduling never runs a task"
    );
    assert_eq!(timer.advance_by(0), 2);
    assert_eq!(*log.lock().unwrap(), vec![(0, 0, 0), (1, 0, 0)]);

    // Same at a later time, and on an advance that jumps far ahead.
    timer.advance_to(1_000);
    schedule_logged(&timer, &log, 2, 0);
    assert_eq!(timer.advance_to(5_000), 1);
    assert_eq!(log.lock().unwrap()[2], (2, 1_000, 1_000));
    assert_eq!(timer.pending(), 0);
}

/// The multi-level scenario: with `wheel_size = 3` the delays below reach level 5.
fn multi_level_delays() -> Vec<i64> {
    let mut delays: Vec<i64> = (0..5).collect();
    delays.extend(10..100);
    delays.extend(10..100);
    delays.extend(100..500);
    delays
}

fn check_multi_level_run(log: &[(usize, u64, u64)], n: usize) {
    assert_eq!(log.len(), n, "every timer fires");
    let mut seen = vec![false; n];
    for &(id, deadline, ran_at) in log {
        assert!(!seen[id], "timer {id} fired twice");
        seen[id] = true;
        assert!(
            ran_at >= deadline,
            "timer {id} fired early: {ran_at} < {deadline}"
        );
        assert_eq!(
            ran_at, deadline,
            "with tick 1 a timer fires at its deadline"
        );
    }
    let order: Vec<(u64, usize)> = log.iter().map(|&(id, d, _)| (d, id)).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "due-time order, ties in scheduling order");
}

#[test]
fn multi_level_wheel_fires_once_never_early_in_order_one_big_advance() {
    let timer = Timer::manual(TimerConfig {
        tick_ms: 1,
        wheel_size: 3,
    });
    let log: Log = Default::default();
    let delays = multi_level_delays();
    for (id, &d) in delays.iter().enumerate() {
        schedule_logged(&timer, &log, id, d);
    }
    let levels = timer.snapshot().levels;
    // 3, 9, 27, 81, 243, 729 ms: a 499 ms timer needs the sixth level.
    assert_eq!(levels.len(), 6);
    assert_eq!(levels[5].tick_ms, 243);
    assert_eq!(levels[5].interval_ms, 729);

    assert_eq!(timer.advance_to(498), delays.len() - 1);
    assert_eq!(timer.advance_to(10_000), 1);
    check_multi_level_run(&log.lock().unwrap(), delays.len());
    assert_eq!(timer.pending(), 0);
}

#[test]
fn multi_level_wheel_fires_once_never_early_in_order_millisecond_steps() {
    let timer = Timer::manual(TimerConfig {
        tick_ms: 1,
        wheel_size: 3,
    });
    let log: Log = Default::default();
    let delays = multi_level_delays();
    for (id, &d) in delays.iter().enumerate() {
        schedule_logged(&timer, &log, id, d);
    }
    let mut ran = 0;
    for t in 0..=500 {
        let due_now = delays.iter().filter(|&&d| d as u64 == t).count();
        let n = timer.advance_to(t);
        assert_eq!(n, due_now, "at {t} ms exactly the timers due at {t} ms run");
        ran += n;
    }
    assert_eq!(ran, delays.len());
    check_multi_level_run(&log.lock().unwrap(), delays.len());
}

#[test]
fn cancelled_timers_never_fire_and_counts_stay_exact() {
    let timer = Timer::manual(TimerConfig::default());
    let log: Log = Default::default();
    let (a, _) = schedule_logged(&timer, &log, 0, 10);
    let (b, _) = schedule_logged(&timer, &log, 1, 10_000);
    let (c, _) = schedule_logged(&timer, &log, 2, 5);
    assert_eq!(timer.pending(), 3);

    assert!(timer.cancel(a));
    assert!(!timer.cancel(a), "cancelling twice");
    assert!(timer.cancel(b));
    assert_eq!(timer.pending(), 1);
    assert!(timer
        .snapshot()
        .buckets
        .iter()
        .all(|b| b.expiration_ms == 5));

    assert_eq!(timer.advance_to(20_000), 1);
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "only the uncancelled timer ran"
    );
    assert!(!timer.cancel(c), "cancel after firing");
    assert!(!timer.is_pending(c));

    // Re-insert after cancel: the freed slot is reused, the old handles stay stale.
    let (d, _) = schedule_logged(&timer, &log, 3, 10);
    assert_eq!(timer.pending(), 1);
    assert!(
        !timer.cancel(a),
        "a stale handle must not cancel the slot's new timer"
    );
    assert!(!timer.cancel(b));
    assert!(timer.is_pending(d));
    assert_eq!(timer.advance_by(10), 1);
    assert_eq!(log.lock().unwrap().last().unwrap().0, 3);
    assert_eq!(timer.pending(), 0);

    // Handles of another timer are refused.
    let other = Timer::manual(TimerConfig::default());
    let (e, _) = schedule_logged(&timer, &log, 4, 1);
    let (f, _) = schedule_logged(&other, &log, 5, 1);
    assert!(!other.cancel(e));
    assert!(!timer.cancel(f));
    assert!(timer.cancel(e) && other.cancel(f));
}

#[test]
fn tasks_can_schedule_and_cancel_from_inside_a_task() {
    let timer = Timer::manual(TimerConfig::default());
    let log: Log = Default::default();
    let (victim, _) = schedule_logged(&timer, &log, 99, 8);
    let (t, l) = (timer.clone(), log.clone());
    timer.schedule(5, move || {
        // Runs at 5 ms with the clock reading 5; schedules a timer due at 7 and cancels
        // one due at 8, without deadlocking on the timer's lock.
        assert_eq!(t.now_ms(), 5);
        schedule_logged(&t, &l, 1, 2);
        assert!(t.cancel(victim));
    });
    assert_eq!(
        timer.advance_to(10),
        2,
        "the task at 5 and the one it scheduled at 7"
    );
    assert_eq!(*log.lock().unwrap(), vec![(1, 7, 7)]);
}

#[test]
fn coarse_ticks_round_deadlines_up_never_early() {
    let timer = Timer::manual(TimerConfig {
        tick_ms: 10,
        wheel_size: 4,
    });
    let log: Log = Default::default();
    schedule_logged(&timer, &log, 0, 11);
    schedule_logged(&timer, &log, 1, 20);
    schedule_logged(&timer, &log, 2, 35);
    assert_eq!(timer.advance_to(19), 0);
    assert_eq!(timer.advance_to(20), 2);
    assert_eq!(timer.advance_to(100), 1);
    assert_eq!(
        *log.lock().unwrap(),
        vec![(0, 11, 20), (1, 20, 20), (2, 35, 40)]
    );
}

#[test]
fn snapshot_shows_levels_and_non_empty_buckets() {
    let timer = Timer::manual(TimerConfig::default());
    timer.advance_to(3);
    timer.schedule(0, || {});
    timer.schedule(4, || {});
    timer.schedule(4, || {});
    timer.schedule(30_000, || {});
    let snap = timer.snapshot();
    assert_eq!(snap.now_ms, 3);
    assert_eq!(snap.pending, 4);
    assert_eq!(snap.due, 1);
    let ticks: Vec<(u64, u64)> = snap
        .levels
        .iter()
        .map(|l| (l.tick_ms, l.interval_ms))
        .collect();
    assert_eq!(
        ticks,
        vec![(1, 20), (20, 400), (400, 8_000), (8_000, 160_000)]
    );
    let buckets: Vec<(usize, usize, u64, usize)> = snap
        .buckets
        .iter()
        .map(|b| (b.level, b.slot, b.expiration_ms, b.entries))
        .collect();
    // 7 ms: level 0, slot 7. 30003 ms: level 3, bucket [24000, 32000), slot 3.
    assert_eq!(buckets, vec![(0, 7, 7, 2), (3, 3, 24_000, 1)]);

    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["levels"][1]["tick_ms"], 20);
    assert_eq!(json["levels"][1]["wheel_size"], 20);
    assert_eq!(json["levels"][1]["current_time_ms"], 0);
    assert_eq!(json["buckets"][1]["expiration_ms"], 24_000);
    assert_eq!(json["buckets"][1]["entries"], 1);
}

#[test]
fn shutdown_drops_pending_tasks_without_running_them() {
    let timer = Timer::manual(TimerConfig::default());
    let ran = Arc::new(AtomicUsize::new(0));
    let witness = Arc::new(());
    for d in [0, 5, 50_000] {
        let (ran, w) = (ran.clone(), witness.clone());
        timer.schedule(d, move || {
            let _keep = w;
            ran.fetch_add(1, Ordering::SeqCst);
        });
    }
    assert_eq!(Arc::strong_count(&witness), 4);
    timer.shutdown();
    assert_eq!(timer.pending(), 0);
    assert_eq!(
        Arc::strong_count(&witness),
        1,
        "pending closures were dropped"
    );
    let late = timer.schedule(0, || panic!("must not run"));
    assert!(!timer.cancel(late));
    assert_eq!(timer.advance_by(100_000), 0);
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    timer.shutdown(); // idempotent
}

#[test]
fn advancing_a_system_timer_is_a_no_op() {
    let timer = Timer::system(TimerConfig::default());
    assert!(!timer.is_manual());
    assert_eq!(timer.advance_to(1_000_000), 0);
    assert_eq!(timer.advance_by(1_000), 0);
}

/// Generous bound that only turns a hang into a failure; nothing is asserted about speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

#[test]
fn system_timer_fires_each_timer_once_and_never_early() {
    let timer = Timer::system(TimerConfig::default());
    let (tx, rx) = mpsc::channel();
    let n = 200;
    for i in 0..n {
        let delay = (i % 25) as i64;
        let tx = tx.clone();
        let scheduled = Instant::now();
        timer.schedule(delay, move || {
            tx.send((i, scheduled.elapsed(), delay)).unwrap();
        });
    }
    let mut seen = vec![false; n];
    for _ in 0..n {
        let (i, waited, delay) = rx.recv_timeout(HANG_GUARD).expect("timer fired");
        assert!(!seen[i], "timer {i} fired twice");
        seen[i] = true;
        assert!(
            waited >= Duration::from_millis(delay as u64),
            "timer {i} fired early: {waited:?} < {delay} ms"
        );
    }
    assert_eq!(timer.pending(), 0);
    // Cancelled timers never fire on the system clock either: cancel one due in 20 ms,
    // then wait for a timer due after it. Had the cancelled one run, it would have run
    // first, so its flag is checked once the later one has fired.
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let cancelled = timer.schedule(20, move || {
        r.fetch_add(1, Ordering::SeqCst);
    });
    // True unless this thread stalled for 20 ms; then the timer ran, as it should have.
    let was_cancelled = timer.cancel(cancelled);
    let (later_tx, later_rx) = mpsc::channel();
    timer.schedule(25, move || later_tx.send(()).unwrap());
    later_rx
        .recv_timeout(HANG_GUARD)
        .expect("the later timer fired");
    let expected = usize::from(!was_cancelled);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        expected,
        "a cancelled timer ran"
    );
    timer.shutdown();
}

#[test]
fn system_timer_driver_survives_panicking_tasks_and_shutdown_from_a_task() {
    let timer = Timer::system(TimerConfig::default());
    let (tx, rx) = mpsc::channel();
    timer.schedule(0, || panic!("a task panics (expected in this test)"));
    let (t, tx2) = (timer.clone(), tx.clone());
    timer.schedule(1, move || {
        tx2.send("after the panic").unwrap();
        // Shutting down from the driver thread itself must not deadlock.
        t.shutdown();
        tx2.send("shut down").unwrap();
    });
    assert_eq!(rx.recv_timeout(HANG_GUARD).unwrap(), "after the panic");
    assert_eq!(rx.recv_timeout(HANG_GUARD).unwrap(), "shut down");
    drop(tx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn system_timer_serves_many_tokio_tasks_at_once() {
    let timer = Timer::system(TimerConfig::default());
    let mut joins = Vec::new();
    for i in 0..64u64 {
        let timer = timer.clone();
        joins.push(tokio::spawn(async move {
            let mut fired = 0;
            for round in 0..8u64 {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let delay = ((i + round) % 7) as i64;
                let start = Instant::now();
                // Due 1 ms before the one `rx` waits for: had it run, it would have run
                // before `rx` completes.
                let ran = Arc::new(AtomicUsize::new(0));
                let r = ran.clone();
                let cancelled = timer.schedule(delay + 10, move || {
                    r.fetch_add(1, Ordering::SeqCst);
                });
                timer.schedule(delay + 11, move || {
                    let _ = tx.send(());
                });
                // True unless this task stalled for 10 ms (then the timer ran, rightly).
                let was_cancelled = timer.cancel(cancelled);
                rx.await.expect("timer fired");
                let expected = usize::from(!was_cancelled);
                assert_eq!(
                    ran.load(Ordering::SeqCst),
                    expected,
                    "a cancelled timer ran"
                );
                assert!(start.elapsed() >= Duration::from_millis(delay as u64 + 11));
                fired += 1;
            }
            fired
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.unwrap();
    }
    assert_eq!(total, 64 * 8);
    assert_eq!(timer.pending(), 0);
}

#[test]
fn a_frozen_system_timer_stops_steps_like_a_manual_one_and_resumes_without_a_jump() {
    let timer = Timer::system(TimerConfig::default());
    assert!(timer.is_system() && !timer.is_frozen() && !timer.is_manual());
    assert_eq!(
        timer.advance_by(1_000),
        0,
        "a running system timer is not stepped"
    );
    let log: Log = Default::default();
    assert!(timer.freeze());
    assert!(!timer.freeze(), "already frozen");
    assert!(timer.is_frozen() && timer.is_manual());
    let frozen = timer.now_ms();
    let (_, first) = schedule_logged(&timer, &log, 0, 30);
    let (_, second) = schedule_logged(&timer, &log, 1, 60);
    assert_eq!(
        (first, second),
        (frozen + 30, frozen + 60),
        "relative to the frozen time"
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(timer.now_ms(), frozen, "time stands still");
    assert!(log.lock().unwrap().is_empty(), "nothing fires while frozen");

    // Steps fire what falls due, on this thread, at its due time.
    assert_eq!(timer.advance_by(29), 0);
    assert_eq!(timer.advance_by(1), 1);
    assert_eq!(*log.lock().unwrap(), vec![(0, first, first)]);
    assert_eq!(timer.now_ms(), frozen + 30);

    // Resume: time goes on from frozen + 30, not from the real time elapsed meanwhile
    // (at least the 100 ms slept above). It moves on by no more than the real time since
    // the resume, however slowly this thread runs.
    let resuming = Instant::now();
    assert!(timer.resume());
    assert!(!timer.resume(), "not frozen any more");
    assert!(!timer.is_frozen() && !timer.is_manual());
    let resumed = timer.now_ms();
    let since_resume = resuming.elapsed().as_millis() as u64;
    assert!(
        resumed >= frozen + 30 && resumed <= frozen + 30 + since_resume + 1,
        "no jump: {resumed} after freezing at {frozen}, stepping 30 ms and {since_resume} ms running"
    );
    // The second timer fires on the driver, once, never early.
    let give_up = Instant::now() + HANG_GUARD;
    while log.lock().unwrap().len() < 2 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
    let fired = log.lock().unwrap().clone();
    assert_eq!(fired.len(), 2, "each timer once: {fired:?}");
    assert_eq!((fired[1].0, fired[1].1), (1, second));
    assert!(fired[1].2 >= second, "never early: {fired:?}");
    assert_eq!(timer.pending(), 0);

    // Freeze again, step past a timer, resume: it does not fire a second time. A later
    // timer firing on the driver shows the driver has run past it.
    assert!(timer.freeze());
    schedule_logged(&timer, &log, 2, 5);
    assert_eq!(timer.advance_by(5), 1);
    assert!(timer.resume());
    schedule_logged(&timer, &log, 3, 1);
    let give_up = Instant::now() + HANG_GUARD;
    while log.lock().unwrap().len() < 4 && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ids: Vec<usize> = log.lock().unwrap().iter().map(|e| e.0).collect();
    assert_eq!(ids, vec![0, 1, 2, 3], "the stepped timer fired once");
    timer.shutdown();
}

#[test]
fn a_manual_timer_stays_manual() {
    let timer = Timer::manual(TimerConfig::default());
    assert!(timer.is_manual() && !timer.is_frozen() && !timer.is_system());
    assert!(!timer.freeze());
    assert!(!timer.resume());
    assert!(timer.is_manual());
    let fired = Arc::new(AtomicUsize::new(0));
    let f = fired.clone();
    timer.schedule(10, move || {
        f.fetch_add(1, Ordering::SeqCst);
    });
    assert_eq!(timer.advance_by(10), 1);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
}

#[test]
fn the_wheel_snapshot_shows_positions_and_the_cascade() {
    let timer = Timer::manual(TimerConfig::default());
    let h = timer.schedule(450, || {});
    assert_eq!(
        timer
            .position(h)
            .map(|p| (p.level, p.slot, p.expiration_ms)),
        Some((2, 1, 400))
    );
    timer.advance_to(400);
    timer.advance_to(401); // the cascade of [400, 800) moves on while nothing is due
    assert_eq!(timer.position(h).map(|p| p.level), Some(1));
    timer.advance_to(450);
    assert_eq!(timer.position(h), None, "fired");
    let snap = timer.snapshot();
    let moved: Vec<(u64, u64)> = snap.levels.iter().map(|l| (l.cascaded, l.fired)).collect();
    assert_eq!(moved, vec![(0, 1), (1, 0), (1, 0)]);
    let flushed: Vec<(usize, u64, u64, u64)> = snap
        .flushes
        .iter()
        .map(|f| (f.level, f.expiration_ms, f.moved_down, f.fired))
        .collect();
    assert_eq!(
        flushed,
        vec![(2, 400, 1, 0), (1, 440, 1, 0), (0, 450, 0, 1)]
    );
    let json = serde_json::to_value(&snap).unwrap();
    assert_eq!(json["flushes"][0]["level"], 2);
    assert_eq!(json["levels"][2]["cascaded"], 1);
}
