//! `timer-bench`: the timewheel crate's benchmark binary.
//!
//! ```text
//! cargo run --release -p timer-bench -- WORKLOAD [flags]
//!
//!   add-cancel --n N                        add N timers (delays uniform in [1, 60000) ms),
//!                                           then cancel them in shuffled order
//!   churn --pending P --ops M --cancel random|fifo
//!                                           P pending timers (delays in [1, 30000) ms), then M
//!                                           times: cancel one (random, or the oldest) and add
//!                                           one of 30000 ms
//!   expire --n N --window-ms W              system clock: N timers with delays in [1, W] ms,
//!                                           run until all fired; lateness percentiles
//!   purgatory --num N --rate R --pct50 A --pct75 B --timeout T --keys K --key-space-size S
//!                                           Kafka's TestPurgatoryPerformance workload
//!
//!   scale [--sizes 1000,10000,...] [--rounds R] [--ops M] [--cancel random,fifo] [--out DIR]
//!                                           churn at every pending count for every
//!                                           implementation (Kafka's SystemTimer too, through
//!                                           crates/timer-bench/java, when java and mvn are
//!                                           present), in interleaved rounds; per-round ratios
//!                                           and medians; DIR/scale.csv and DIR/scale.svg
//!
//!   common flags: --seed S (default 42), --impl NAME[,NAME...] (run only those)
//! ```
//!
//! The timer workloads run against this crate (`impl=timewheel`, plus `timewheel-timer`
//! for the shared, locked `Timer`, and in churn `timewheel-locked`, the bare wheel behind a
//! mutex, and `timewheel-fenced`, the bare wheel with a lock's two atomic read-modify-writes
//! per call and no lock), a `BinaryHeap` with tombstones (`binary-heap`) and
//! `tokio_util::time::DelayQueue` (`delay-queue`); churn and scale also run `slots-only`,
//! not a timer but the floor under all of them (`floor.rs`). Each prints one line per implementation,
//! `WORKLOAD impl=NAME key=value ...`, then one `WORKLOAD ratio=BASELINE/timewheel ...` line
//! per baseline (a ratio above 1 means ours is faster). This is a plain binary rather than
//! a criterion bench because the workloads are whole scenarios with their own metrics
//! (lateness percentiles, achieved request rate, bytes per entry), not micro-benchmarks.

mod alloc;
mod cpu;
mod floor;
mod heap;
mod impls;
mod rng;
mod workloads;

use std::collections::HashMap;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;

/// Parsed `--flag value` pairs.
pub struct Flags {
    values: HashMap<String, String>,
}

impl Flags {
    fn parse(args: &[String]) -> Result<Flags, String> {
        let mut values = HashMap::new();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("expected a --flag, got {flag:?}"))?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            values.insert(name.to_string(), value.clone());
        }
        Ok(Flags { values })
    }

    /// A numeric flag, or its default.
    pub fn num<T: std::str::FromStr>(&self, name: &str, default: T) -> Result<T, String> {
        match self.values.get(name) {
            None => Ok(default),
            Some(v) => v
                .replace('_', "")
                .parse()
                .map_err(|_| format!("--{name}: not a number: {v:?}")),
        }
    }

    /// A string flag, or its default.
    pub fn text(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_string())
    }

    /// True if `--impl` is absent or names this implementation (`--impl a,b` names two).
    pub fn wants(&self, impl_name: &str) -> bool {
        match self.values.get("impl") {
            None => true,
            Some(v) => v.split(',').any(|name| name == impl_name),
        }
    }
}

/// One result line: `WORKLOAD impl=NAME key=value ...`.
pub struct Report {
    workload: &'static str,
    impl_name: &'static str,
    fields: Vec<(&'static str, String)>,
}

impl Report {
    /// An empty line for `workload` / `impl_name`.
    pub fn new(workload: &'static str, impl_name: &'static str) -> Report {
        Report {
            workload,
            impl_name,
            fields: Vec::new(),
        }
    }

    /// Append `key=value`.
    pub fn field(mut self, key: &'static str, value: impl ToString) -> Report {
        self.fields.push((key, value.to_string()));
        self
    }

    /// Append `key=value` with two decimals.
    pub fn float(self, key: &'static str, value: f64) -> Report {
        self.field(key, format!("{value:.2}"))
    }

    /// The value of `key`, if it is a number.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.fields
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.parse().ok())
    }

    /// Print the line.
    pub fn print(&self) {
        let mut line = format!("{} impl={}", self.workload, self.impl_name);
        for (k, v) in &self.fields {
            line.push_str(&format!(" {k}={v}"));
        }
        say(&line);
    }
}

/// Print a line to stdout, ignoring a closed pipe (e.g. `timer-bench ... | head -1`).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// Print `WORKLOAD ratio=BASELINE/timewheel key=x ...` for every baseline, for `keys`
/// (lower is better for all of them, so ratio > 1 means ours is faster).
pub fn print_ratios(reports: &[Report], keys: &[&str]) {
    let Some(ours) = reports.iter().find(|r| r.impl_name == "timewheel") else {
        return;
    };
    for base in reports.iter().filter(|r| r.impl_name != "timewheel") {
        let mut line = format!("{} ratio={}/timewheel", base.workload, base.impl_name);
        for key in keys {
            if let (Some(b), Some(o)) = (base.get(key), ours.get(key)) {
                if o > 0.0 {
                    line.push_str(&format!(" {key}={:.2}", b / o));
                }
            }
        }
        say(&line);
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: timer-bench WORKLOAD [flags]\n\
         workloads: add-cancel --n N\n\
         \x20          churn --pending P --ops M --cancel random|fifo\n\
         \x20          expire --n N --window-ms W\n\
         \x20          purgatory --num N --rate R --pct50 A --pct75 B --timeout T --keys K --key-space-size S\n\
         \x20          scale [--sizes N,N,...] [--rounds R] [--ops M] [--cancel random,fifo] [--out DIR] [--java yes|no]\n\
         common:    --seed S, --impl NAME[,NAME...]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(workload) = args.first() else {
        return usage();
    };
    let flags = match Flags::parse(&args[1..]) {
        Ok(flags) => flags,
        Err(e) => {
            eprintln!("timer-bench: {e}");
            return usage();
        }
    };
    let result = match workload.as_str() {
        "add-cancel" => workloads::add_cancel::run(&flags),
        "churn" => workloads::churn::run(&flags),
        "expire" => workloads::expire::run(&flags),
        "purgatory" => workloads::purgatory::run(&flags),
        "scale" => workloads::scale::run(&flags),
        _ => return usage(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("timer-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
