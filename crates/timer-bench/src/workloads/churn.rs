//! `churn --pending P --ops M --cancel random|fifo`: steady state of a busy purgatory.
//!
//! P timers pending (delays uniform in [1, 30000) ms); then M times: cancel one pending
//! timer (a uniformly random one, or the oldest) and add a new one of 30000 ms, the way
//! requests complete early and new ones arrive. Time does not move. Reports nanoseconds per
//! cancel+add pair (wall clock, `ns_per_op`, and the thread's CPU time, `cpu_ns_per_op`,
//! which time spent descheduled on a busy machine does not inflate) and live bytes per
//! pending timer, after filling and after the churn (when tombstones and spare capacity
//! have built up).

use std::num::NonZeroU32;
use std::time::Instant;

use timewheel::TimingWheel;

use crate::alloc::live_bytes;
use crate::cpu::thread_cpu;
use crate::floor::SlotsOnly;
use crate::heap::HeapTimer;
use crate::impls::{in_tokio, FencedWheel, LockedWheel, SharedTimer, TimerImpl, TokioDelayQueue};
use crate::rng::SplitMix;
use crate::workloads::add_cancel::id;
use crate::{print_ratios, Flags, Report};

/// Which pending timer each step cancels.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Victim {
    /// A uniformly random one.
    Random,
    /// The oldest.
    Fifo,
}

impl Victim {
    /// From `random` or `fifo`.
    pub fn parse(text: &str) -> Result<Victim, String> {
        match text {
            "random" => Ok(Victim::Random),
            "fifo" => Ok(Victim::Fifo),
            other => Err(format!("--cancel must be random or fifo, not {other:?}")),
        }
    }

    /// `random` or `fifo`.
    pub fn name(self) -> &'static str {
        match self {
            Victim::Random => "random",
            Victim::Fifo => "fifo",
        }
    }
}

/// Run the workload for every implementation.
pub fn run(flags: &Flags) -> Result<(), String> {
    let pending: usize = flags.num("pending", 1_000_000)?;
    let ops: usize = flags.num("ops", 2_000_000)?;
    let seed: u64 = flags.num("seed", 42)?;
    let victim = Victim::parse(&flags.text("cancel", "random"))?;
    if pending == 0 || ops == 0 {
        return Err("--pending and --ops must be positive".into());
    }
    let mut reports = Vec::new();
    if flags.wants("timewheel") {
        reports.push(measure::<TimingWheel<NonZeroU32>>(
            pending, ops, victim, seed,
        ));
    }
    if flags.wants("timewheel-timer") {
        reports.push(measure::<SharedTimer>(pending, ops, victim, seed));
    }
    if flags.wants("timewheel-locked") {
        reports.push(measure::<LockedWheel>(pending, ops, victim, seed));
    }
    if flags.wants("timewheel-fenced") {
        reports.push(measure::<FencedWheel>(pending, ops, victim, seed));
    }
    if flags.wants("binary-heap") {
        reports.push(measure::<HeapTimer<NonZeroU32>>(pending, ops, victim, seed));
    }
    if flags.wants("delay-queue") {
        reports.push(in_tokio(|| {
            measure::<TokioDelayQueue>(pending, ops, victim, seed)
        }));
    }
    if flags.wants("slots-only") {
        reports.push(measure::<SlotsOnly<NonZeroU32>>(pending, ops, victim, seed));
    }
    for r in &reports {
        r.print();
    }
    print_ratios(&reports, &["ns_per_op", "cpu_ns_per_op"]);
    Ok(())
}

/// Fill a fresh `I` with `pending` timers and time `ops` cancel+add pairs on it.
pub fn measure<I: TimerImpl>(pending: usize, ops: usize, victim: Victim, seed: u64) -> Report {
    let mut rng = SplitMix::new(seed);
    let mut handles: Vec<I::Handle> = Vec::with_capacity(pending);
    let before = live_bytes();
    let mut timer = I::with_capacity(pending);
    for i in 0..pending {
        handles.push(timer.add(rng.range(1, 30_000), id(i)));
    }
    let bytes = live_bytes().saturating_sub(before) as f64 / pending as f64;

    let mut cancelled = 0usize;
    let start = Instant::now();
    let cpu_start = thread_cpu();
    match victim {
        Victim::Random => {
            for _ in 0..ops {
                let i = rng.below(pending as u64) as usize;
                cancelled += usize::from(timer.cancel(handles[i]));
                handles[i] = timer.add(30_000, id(i));
            }
        }
        Victim::Fifo => {
            // handles[oldest] is the oldest pending timer; its replacement is the newest.
            let mut oldest = 0;
            for _ in 0..ops {
                cancelled += usize::from(timer.cancel(handles[oldest]));
                handles[oldest] = timer.add(30_000, id(oldest));
                oldest += 1;
                if oldest == pending {
                    oldest = 0;
                }
            }
        }
    }
    let elapsed = start.elapsed();
    let cpu = thread_cpu().saturating_sub(cpu_start);
    assert_eq!(cancelled, ops, "{}: every cancel must succeed", I::NAME);
    // After the churn the structure carries whatever its cancels left behind (tombstones,
    // spare capacity): the steady-state cost of a pending timer.
    let bytes_after = live_bytes().saturating_sub(before) as f64 / pending as f64;
    drop(timer);

    Report::new("churn", I::NAME)
        .field("pending", pending)
        .field("ops", ops)
        .field("cancel", victim.name())
        .float("ns_per_op", elapsed.as_nanos() as f64 / ops as f64)
        .float("cpu_ns_per_op", cpu.as_nanos() as f64 / ops as f64)
        .float("bytes_per_entry", bytes)
        .float("bytes_per_entry_after", bytes_after)
}
