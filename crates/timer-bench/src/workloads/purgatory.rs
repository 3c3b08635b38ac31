//! `purgatory --num N --rate R --pct50 A --pct75 B --timeout T --keys K --key-space-size S`:
//! Kafka's `TestPurgatoryPerformance` workload against this crate's purgatory.
//!
//! A generator thread creates N delayed operations as a Poisson process of rate R per
//! second (exponential inter-arrival times; it sleeps when it is ahead of schedule and
//! runs flat out when behind). Each operation's completion latency is drawn from a
//! log-normal distribution with median A ms and 75th percentile B ms, i.e.
//! `mu = ln A`, `sigma = (ln B - ln A) / 0.6745`. An operation whose latency is below the
//! timeout T is completed directly at that time by a completer (as Kafka's benchmark does
//! with `forceComplete`, so its timeout is cancelled and it must leave the watcher lists);
//! the others expire at T. Every operation watches the same K keys, drawn once from
//! `0..S`. The run ends when every operation has completed.
//!
//! As in Kafka's benchmark, `try_complete` reports whether the operation's completion time
//! has passed, on a millisecond clock (Kafka's `System.currentTimeMillis`; here Linux's
//! `CLOCK_MONOTONIC_COARSE`, which costs a few nanoseconds instead of a full clock read).
//! The completer is a separate thread with its own `BinaryHeap` of completion times (Kafka
//! uses a `DelayQueue` thread for the same job); the generator hands it operations in
//! batches of 256, so the harness adds little to the generator's own cost.
//!
//! Reports: `elapsed_ms` (start to last completion), `target_rate`, `actual_rate`
//! (operations enqueued per second of generator time), `cpu_ms` (process CPU time, user +
//! system), the peak of `watched()` and `delayed()` sampled by the generator, and the
//! counts of expired and completed operations.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rand::seq::index::sample;
use rand_distr::{Distribution, Exp, LogNormal};
use timewheel::{
    DelayedOperation, OperationHandle, Purgatory, PurgatoryConfig, Timer, TimerConfig,
};

use crate::rng::SplitMix;
use crate::{Flags, Report};

/// Counts completions and wakes the main thread after the last one.
struct Latch {
    remaining: AtomicUsize,
    done: Mutex<bool>,
    wakeup: Condvar,
}

impl Latch {
    fn count_down(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.done.lock().unwrap() = true;
            self.wakeup.notify_all();
        }
    }

    fn wait(&self) {
        let mut done = self.done.lock().unwrap();
        while !*done {
            done = self.wakeup.wait(done).unwrap();
        }
    }
}

/// A millisecond clock that is cheap to read (the kernel updates it every tick).
fn coarse_now_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass, which lives on our stack.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts);
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

/// Kafka's `FakeOperation`: completable once its completion time has passed.
struct FakeOperation {
    /// On the [`coarse_now_ms`] clock.
    completes_at_ms: u64,
    latch: Arc<Latch>,
}

impl DelayedOperation for FakeOperation {
    type Cause = ();

    fn try_complete(&self) -> bool {
        coarse_now_ms() >= self.completes_at_ms
    }

    fn on_complete(&self, _how: timewheel::Completion) {
        self.latch.count_down();
    }
}

/// An operation to force-complete at `due`; ordered by (`due`, `seq`).
struct Completion {
    due: Instant,
    seq: u64,
    handle: OperationHandle<FakeOperation>,
}

impl PartialEq for Completion {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}

impl Eq for Completion {}

impl PartialOrd for Completion {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Completion {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.due, self.seq).cmp(&(other.due, other.seq))
    }
}

/// Kafka's benchmark completion queue: force-completes operations at their completion
/// time, on its own thread.
struct Completer {
    inbox: Mutex<(Vec<Completion>, bool)>,
    wakeup: Condvar,
}

impl Completer {
    /// Hand over a batch (and, with `last`, say that no more will come).
    fn send(&self, batch: &mut Vec<Completion>, last: bool) {
        let mut inbox = self.inbox.lock().unwrap();
        inbox.0.append(batch);
        inbox.1 |= last;
        self.wakeup.notify_one();
    }

    /// The completer thread: merge batches into a heap, complete what is due, sleep until
    /// the next completion (at most 1 ms, to pick up new batches).
    fn run(&self) {
        let mut heap: BinaryHeap<Reverse<Completion>> = BinaryHeap::new();
        let mut incoming = Vec::new();
        loop {
            let finished = {
                let mut inbox = self.inbox.lock().unwrap();
                std::mem::swap(&mut inbox.0, &mut incoming);
                inbox.1
            };
            heap.extend(incoming.drain(..).map(Reverse));
            let now = Instant::now();
            while heap.peek().is_some_and(|Reverse(c)| c.due <= now) {
                let Reverse(c) = heap.pop().expect("peeked");
                c.handle.force_complete();
            }
            if finished && heap.is_empty() {
                return;
            }
            let wait = heap
                .peek()
                .map_or(Duration::from_millis(1), |Reverse(c)| {
                    c.due.saturating_duration_since(now)
                })
                .min(Duration::from_millis(1));
            let inbox = self.inbox.lock().unwrap();
            if inbox.0.is_empty() && !inbox.1 {
                drop(self.wakeup.wait_timeout(inbox, wait).unwrap());
            }
        }
    }
}

/// Process CPU time (user + system) so far, from /proc/self/stat; `None` off Linux.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name; utime and stime are the 14th and 15th
    // fields overall, in clock ticks (USER_HZ, 100 on Linux).
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Run the workload.
pub fn run(flags: &Flags) -> Result<(), String> {
    let num: usize = flags.num("num", 2_000_000)?;
    let rate: f64 = flags.num("rate", 1_000_000.0)?;
    let pct50: f64 = flags.num("pct50", 200.0)?;
    let pct75: f64 = flags.num("pct75", 400.0)?;
    let timeout: u64 = flags.num("timeout", 200)?;
    let keys: usize = flags.num("keys", 3)?;
    let key_space: usize = flags.num("key-space-size", 100)?;
    let seed: u64 = flags.num("seed", 42)?;
    if num == 0 || rate <= 0.0 || keys == 0 || keys > key_space {
        return Err("need --num > 0, --rate > 0 and 0 < --keys <= --key-space-size".into());
    }
    if !(pct50 > 0.0 && pct75 >= pct50) {
        return Err("need 0 < --pct50 <= --pct75".into());
    }
    if !flags.wants("timewheel") {
        return Ok(());
    }

    let mut rng = SplitMix::new(seed);
    let watch_keys: Vec<u64> = sample(&mut rng, key_space, keys)
        .into_iter()
        .map(|k| k as u64)
        .collect();
    let arrivals = Exp::new(rate).map_err(|e| e.to_string())?;
    let sigma = (pct75.ln() - pct50.ln()) / 0.6745;
    let latencies = LogNormal::new(pct50.ln(), sigma).map_err(|e| e.to_string())?;

    let timer = Timer::system(TimerConfig::default());
    let completer = Arc::new(Completer {
        inbox: Mutex::new((Vec::new(), false)),
        wakeup: Condvar::new(),
    });
    let completer_thread = {
        let completer = completer.clone();
        std::thread::Builder::new()
            .name("completer".into())
            .spawn(move || completer.run())
            .map_err(|e| e.to_string())?
    };
    let mut batch = Vec::with_capacity(256);
    let purgatory: Purgatory<u64, FakeOperation> =
        Purgatory::new("bench", timer.clone(), PurgatoryConfig::default());
    let latch = Arc::new(Latch {
        remaining: AtomicUsize::new(num),
        done: Mutex::new(false),
        wakeup: Condvar::new(),
    });

    let (mut peak_watched, mut peak_delayed) = (0, 0);
    let cpu_start = cpu_time();
    let start = Instant::now();
    let mut arrival = 0.0f64; // seconds since start
    for i in 0..num {
        arrival += arrivals.sample(&mut rng);
        let due = start + Duration::from_secs_f64(arrival);
        let now = Instant::now();
        if due > now + Duration::from_micros(200) {
            std::thread::sleep(due - now);
        }
        let latency_ms: f64 = latencies.sample(&mut rng);
        let op = FakeOperation {
            completes_at_ms: coarse_now_ms() + latency_ms.min(1e12) as u64,
            latch: latch.clone(),
        };
        let handle = purgatory.try_complete_else_watch(op, timeout, watch_keys.clone());
        if latency_ms < timeout as f64 {
            batch.push(Completion {
                due: Instant::now() + Duration::from_secs_f64(latency_ms / 1000.0),
                seq: i as u64,
                handle,
            });
            if batch.len() == 256 {
                completer.send(&mut batch, false);
            }
        }
        if i % 1024 == 0 {
            peak_watched = peak_watched.max(purgatory.watched());
            peak_delayed = peak_delayed.max(purgatory.delayed());
        }
    }
    let generated = start.elapsed();
    completer.send(&mut batch, true);
    latch.wait();
    completer_thread.join().map_err(|_| "completer panicked")?;
    let elapsed = start.elapsed();
    let cpu = match (cpu_start, cpu_time()) {
        (Some(a), Some(b)) => (b - a).as_millis().to_string(),
        _ => "n/a".to_string(),
    };
    let actual_rate = num as f64 / generated.as_secs_f64();

    Report::new("purgatory", "timewheel")
        .field("num", num)
        .field("elapsed_ms", elapsed.as_millis())
        .field("target_rate", rate.round())
        .field("actual_rate", actual_rate.round())
        .field("cpu_ms", cpu)
        .field("peak_watched", peak_watched)
        .field("peak_delayed", peak_delayed)
        .field("expired", purgatory.expired())
        .field("completed", purgatory.completed())
        .print();
    crate::say(&format!(
        "purgatory rate_pct_of_target={:.1}",
        100.0 * actual_rate / rate
    ));
    timer.shutdown();
    Ok(())
}
