//! `expire --n N --window-ms W`: how late timers fire on the real clock.
//!
//! N timers with delays drawn uniformly from [1, W] ms are scheduled as fast as possible
//! from the main thread while a driver fires them; the run ends when all have fired. For
//! every timer the lateness is (when it ran) - (when it was scheduled + its delay), in
//! real time, recorded in an HDR histogram. Reports the wall time and lateness
//! percentiles, and counts any timer that fired early (there should be none).
//!
//! Each implementation runs the way it would be used:
//! * `timewheel`: a system-clock [`Timer`]; each timer is a closure that records itself;
//! * `binary-heap`: the same architecture around [`HeapTimer`] (a mutex-protected heap and
//!   a driver thread sleeping on a condition variable until the earliest deadline, in
//!   nanoseconds);
//! * `delay-queue`: a task on a current-thread tokio runtime owning the `DelayQueue`, fed
//!   through an unbounded channel, polling `poll_expired`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use timewheel::{Timer, TimerConfig};
use tokio_util::time::DelayQueue;

use crate::heap::HeapTimer;
use crate::rng::SplitMix;
use crate::{Flags, Report};

/// Lateness samples, in microseconds, plus a count of early firings.
struct Lateness {
    histogram: Histogram<u64>,
    early: usize,
}

impl Lateness {
    fn new() -> Lateness {
        Lateness {
            histogram: Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("histogram"),
            early: 0,
        }
    }

    fn record(&mut self, intended: Instant, now: Instant) {
        if now < intended {
            self.early += 1;
        }
        let late = now.saturating_duration_since(intended).as_micros() as u64;
        self.histogram.saturating_record(late.max(1));
    }

    fn report(&self, impl_name: &'static str, n: usize, window: u64, wall: Duration) -> Report {
        let ms = |q: f64| self.histogram.value_at_quantile(q) as f64 / 1000.0;
        Report::new("expire", impl_name)
            .field("n", n)
            .field("window_ms", window)
            .field("wall_ms", wall.as_millis())
            .float("late_p50_ms", ms(0.50))
            .float("late_p99_ms", ms(0.99))
            .float("late_max_ms", self.histogram.max() as f64 / 1000.0)
            .field("early", self.early)
    }
}

/// Run the workload for every implementation.
pub fn run(flags: &Flags) -> Result<(), String> {
    let n: usize = flags.num("n", 100_000)?;
    let window: u64 = flags.num("window-ms", 1_000)?;
    let seed: u64 = flags.num("seed", 42)?;
    if n == 0 || window == 0 {
        return Err("--n and --window-ms must be positive".into());
    }
    let mut rng = SplitMix::new(seed);
    let delays: Vec<u64> = (0..n).map(|_| rng.range(1, window + 1)).collect();
    let mut reports = Vec::new();
    if flags.wants("timewheel") {
        reports.push(ours(&delays, window));
    }
    if flags.wants("binary-heap") {
        reports.push(heap(&delays, window));
    }
    if flags.wants("delay-queue") {
        reports.push(delay_queue(&delays, window));
    }
    for r in &reports {
        r.print();
    }
    crate::print_ratios(&reports, &["late_p50_ms", "late_p99_ms"]);
    Ok(())
}

fn ours(delays: &[u64], window: u64) -> Report {
    struct Shared {
        lateness: Mutex<Lateness>,
        remaining: AtomicUsize,
        done: Mutex<mpsc::Sender<Instant>>,
    }
    let n = delays.len();
    let timer = Timer::system(TimerConfig::default());
    let (tx, rx) = mpsc::channel();
    let shared = Arc::new(Shared {
        lateness: Mutex::new(Lateness::new()),
        remaining: AtomicUsize::new(n),
        done: Mutex::new(tx),
    });
    let start = Instant::now();
    for &d in delays {
        let shared = shared.clone();
        let intended = Instant::now() + Duration::from_millis(d);
        timer.schedule(d as i64, move || {
            let now = Instant::now();
            shared.lateness.lock().unwrap().record(intended, now);
            if shared.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                let _ = shared.done.lock().unwrap().send(now);
            }
        });
    }
    let end = rx.recv().expect("all timers fired");
    timer.shutdown();
    let lateness = shared.lateness.lock().unwrap();
    lateness.report("timewheel", n, window, end - start)
}

fn heap(delays: &[u64], window: u64) -> Report {
    struct State {
        heap: HeapTimer<Instant>,
        /// When the driver will wake (ns since base), u64::MAX when idle.
        sleeping_until: u64,
    }
    struct Shared {
        base: Instant,
        state: Mutex<State>,
        wakeup: Condvar,
    }
    let n = delays.len();
    let shared = Arc::new(Shared {
        base: Instant::now(),
        state: Mutex::new(State {
            heap: HeapTimer::with_capacity(n),
            sleeping_until: u64::MAX,
        }),
        wakeup: Condvar::new(),
    });
    let driver = {
        let shared = shared.clone();
        thread::spawn(move || {
            let mut lateness = Lateness::new();
            let mut fired = 0;
            let mut state = shared.state.lock().unwrap();
            loop {
                let now = Instant::now();
                let now_ns = (now - shared.base).as_nanos() as u64;
                let mut last = now;
                while let Some((_, intended)) = state.heap.pop_due(now_ns) {
                    // Each timer is stamped when it is handed out, as ours are when their
                    // task runs (not once per batch).
                    last = Instant::now();
                    lateness.record(intended, last);
                    fired += 1;
                }
                if fired == n {
                    return (lateness, last);
                }
                match state.heap.next_deadline() {
                    Some(next) => {
                        state.sleeping_until = next;
                        let wait = (shared.base + Duration::from_nanos(next))
                            .saturating_duration_since(Instant::now());
                        state = shared.wakeup.wait_timeout(state, wait).unwrap().0;
                    }
                    None => {
                        state.sleeping_until = u64::MAX;
                        state = shared.wakeup.wait(state).unwrap();
                    }
                }
                state.sleeping_until = 0;
            }
        })
    };
    let start = Instant::now();
    for &d in delays {
        let intended = Instant::now() + Duration::from_millis(d);
        let deadline = (intended - shared.base).as_nanos() as u64;
        let mut state = shared.state.lock().unwrap();
        state.heap.add(deadline, intended);
        if deadline < state.sleeping_until {
            state.sleeping_until = 0;
            shared.wakeup.notify_one();
        }
    }
    let (lateness, end) = driver.join().expect("heap driver");
    lateness.report("binary-heap", n, window, end - start)
}

fn delay_queue(delays: &[u64], window: u64) -> Report {
    let n = delays.len();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let driver = thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("tokio runtime");
        runtime.block_on(async move {
            let mut queue: DelayQueue<Instant> = DelayQueue::with_capacity(n);
            let mut lateness = Lateness::new();
            let mut fired = 0;
            let mut open = true;
            loop {
                tokio::select! {
                    msg = rx.recv(), if open => match msg {
                        Some(intended) => {
                            queue.insert_at(intended, intended.into());
                        }
                        None => open = false,
                    },
                    Some(expired) = std::future::poll_fn(|cx| queue.poll_expired(cx)),
                        if !queue.is_empty() =>
                    {
                        let now = Instant::now();
                        lateness.record(expired.into_inner(), now);
                        fired += 1;
                        if fired == n {
                            return (lateness, now);
                        }
                    }
                }
            }
        })
    });
    let start = Instant::now();
    for &d in delays {
        tx.send(Instant::now() + Duration::from_millis(d))
            .expect("delay queue task alive");
    }
    drop(tx);
    let (lateness, end) = driver.join().expect("delay queue driver");
    lateness.report("delay-queue", n, window, end - start)
}
