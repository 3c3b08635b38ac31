//! `add-cancel --n N`: the cost of one add and one cancel.
//!
//! Add N timers with delays drawn uniformly from [1, 60000) ms (time does not move), then
//! cancel all of them in a shuffled order. Reports nanoseconds per add and per cancel and
//! the live bytes per pending timer after the adds.

use std::num::NonZeroU32;
use std::time::Instant;

use rand::seq::SliceRandom;
use timewheel::TimingWheel;

use crate::alloc::live_bytes;
use crate::heap::HeapTimer;
use crate::impls::{in_tokio, SharedTimer, TimerImpl, TokioDelayQueue};
use crate::rng::SplitMix;
use crate::{print_ratios, Flags, Report};

/// Run the workload for every implementation.
pub fn run(flags: &Flags) -> Result<(), String> {
    let n: usize = flags.num("n", 1_000_000)?;
    let seed: u64 = flags.num("seed", 42)?;
    if n == 0 {
        return Err("--n must be positive".into());
    }
    let mut rng = SplitMix::new(seed);
    let delays: Vec<u64> = (0..n).map(|_| rng.range(1, 60_000)).collect();
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.shuffle(&mut rng);

    let mut reports = Vec::new();
    if flags.wants("timewheel") {
        reports.push(measure::<TimingWheel<NonZeroU32>>(&delays, &order));
    }
    if flags.wants("timewheel-timer") {
        reports.push(measure::<SharedTimer>(&delays, &order));
    }
    if flags.wants("binary-heap") {
        reports.push(measure::<HeapTimer<NonZeroU32>>(&delays, &order));
    }
    if flags.wants("delay-queue") {
        reports.push(in_tokio(|| measure::<TokioDelayQueue>(&delays, &order)));
    }
    for r in &reports {
        r.print();
    }
    print_ratios(&reports, &["add_ns", "cancel_ns"]);
    Ok(())
}

/// The payload of timer `i`.
pub fn id(i: usize) -> NonZeroU32 {
    NonZeroU32::new(i as u32 + 1).expect("ids start at 1")
}

fn measure<I: TimerImpl>(delays: &[u64], order: &[u32]) -> Report {
    let n = delays.len();
    let mut handles: Vec<I::Handle> = Vec::with_capacity(n);
    let before = live_bytes();
    let mut timer = I::with_capacity(n);

    let start = Instant::now();
    for (i, &d) in delays.iter().enumerate() {
        handles.push(timer.add(d, id(i)));
    }
    let add = start.elapsed();
    let bytes = live_bytes().saturating_sub(before) as f64 / n as f64;

    let start = Instant::now();
    let mut cancelled = 0usize;
    for &i in order {
        cancelled += usize::from(timer.cancel(handles[i as usize]));
    }
    let cancel = start.elapsed();
    assert_eq!(cancelled, n, "{}: every cancel must succeed", I::NAME);
    drop(timer);

    Report::new("add-cancel", I::NAME)
        .field("n", n)
        .float("add_ns", add.as_nanos() as f64 / n as f64)
        .float("cancel_ns", cancel.as_nanos() as f64 / n as f64)
        .float("bytes_per_entry", bytes)
}
