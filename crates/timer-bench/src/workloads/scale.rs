//! `scale`: how the cost of a timer grows with the number of pending timers.
//!
//! The seed articles argue that a hierarchical timing wheel beats a priority queue
//! because its insert and cancel stay O(1) however many timers wait. This sweep shows it:
//! the churn workload (`churn.rs`: cancel one pending timer, add one of 30 s) at pending
//! counts from 1k to 10M, for the bare wheel, the shared `Timer`, the lazy binary heap,
//! tokio's `DelayQueue`, and Kafka's own `SystemTimer` when `java` and `mvn` are present
//! (through the harness in `crates/timer-bench/java`, which runs the same workload on the
//! class as Apache Kafka publishes it), and under them all `slots-only`, the floor: the
//! generation-checked slot that any of them must read to cancel (`floor.rs`).
//!
//! Every measurement runs in a process of its own (this binary's `churn`, or Kafka's JVM).
//! The machine is shared and noisy, so the sweep runs in *rounds*: each round measures
//! every size and every implementation once, implementations in an order that rotates
//! from round to round, and every ratio is taken within one round, then summarised by its
//! median. Times are the measuring thread's CPU time per cancel+add pair (time spent
//! descheduled does not count); wall-clock time is in the CSV too.
//!
//! Writes `scale.csv` (every measurement) and `scale.svg` (median ns/op against pending,
//! both axes logarithmic, one panel per cancel pattern) into `--out`.
//!
//! ```text
//! scale [--sizes 1000,10000,...] [--rounds 3] [--ops 2000000] [--cancel random,fifo]
//!       [--out crates/timer-bench/results] [--java yes|no] [--impl NAME,...]
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::workloads::churn::Victim;
use crate::{say, Flags};

/// The implementations the sweep measures, in the plot's legend order.
const IMPLS: [&str; 6] = [
    "timewheel",
    "timewheel-timer",
    "binary-heap",
    "delay-queue",
    "kafka-system-timer",
    "slots-only",
];

/// The ratios printed after the sweep: (baseline, ours), each per round then the median.
const RATIOS: [(&str, &str); 7] = [
    ("binary-heap", "timewheel"),
    ("binary-heap", "timewheel-timer"),
    ("kafka-system-timer", "timewheel-timer"),
    (KAFKA_THREAD, "timewheel-timer"),
    ("delay-queue", "timewheel"),
    // How far above the floor: the cost that is the structure's own.
    ("timewheel", "slots-only"),
    ("binary-heap", "slots-only"),
];

/// Kafka's figure in the ratios is its process's CPU time (its garbage collector
/// included); this name stands for its measuring thread's alone.
const KAFKA_THREAD: &str = "kafka-system-timer(thread)";

/// One measurement.
struct Sample {
    round: usize,
    cancel: Victim,
    pending: usize,
    implementation: &'static str,
    ns_per_op: f64,
    cpu_ns_per_op: f64,
    /// The measuring thread's CPU time (the same as `cpu_ns_per_op` but for Kafka's JVM).
    thread_cpu_ns_per_op: f64,
}

/// Run the sweep.
pub fn run(flags: &Flags) -> Result<(), String> {
    let sizes = list(
        &flags.text("sizes", "1000,10000,100000,1000000,4000000,10000000"),
        "sizes",
    )?;
    let rounds: usize = flags.num("rounds", 3)?;
    let ops: usize = flags.num("ops", 2_000_000)?;
    let seed: u64 = flags.num("seed", 42)?;
    let cancels = flags
        .text("cancel", "random,fifo")
        .split(',')
        .map(Victim::parse)
        .collect::<Result<Vec<_>, _>>()?;
    let out = PathBuf::from(flags.text("out", "crates/timer-bench/results"));
    if sizes.is_empty() || sizes.contains(&0) || rounds == 0 || ops == 0 {
        return Err("--sizes, --rounds and --ops must be positive".into());
    }
    let java = if flags.wants("kafka-system-timer") && flags.text("java", "yes") == "yes" {
        match KafkaHarness::build() {
            Ok(harness) => Some(harness),
            Err(why) => {
                say(&format!("scale impl=kafka-system-timer missing: {why}"));
                None
            }
        }
    } else {
        None
    };
    let impls: Vec<&'static str> = IMPLS
        .into_iter()
        .filter(|name| flags.wants(name))
        .filter(|&name| name != "kafka-system-timer" || java.is_some())
        .collect();

    let mut samples = Vec::new();
    for round in 0..rounds {
        for &cancel in &cancels {
            for &pending in &sizes {
                // Rotate the order each round, so no implementation always runs first (on
                // a cold cache) or right after the one that leaves the most to clean up.
                let mut order = impls.clone();
                order.rotate_left(round % impls.len().max(1));
                for name in order {
                    let (ns, cpu, thread) = match name {
                        "kafka-system-timer" => match &java {
                            Some(harness) => harness.run(pending, ops, cancel, seed)?,
                            None => continue,
                        },
                        _ => one(name, pending, ops, cancel, seed)?,
                    };
                    say(&format!(
                        "scale impl={name} round={round} cancel={} pending={pending} ops={ops} \
                         ns_per_op={ns:.2} cpu_ns_per_op={cpu:.2} thread_cpu_ns_per_op={thread:.2}",
                        cancel.name()
                    ));
                    samples.push(Sample {
                        round,
                        cancel,
                        pending,
                        implementation: name,
                        ns_per_op: ns,
                        cpu_ns_per_op: cpu,
                        thread_cpu_ns_per_op: thread,
                    });
                }
            }
        }
    }
    print_ratios(&samples, &cancels, &sizes, rounds);
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    write(&out.join("scale.csv"), &csv(&samples))?;
    write(
        &out.join("scale.svg"),
        &svg(&samples, &cancels, &impls, ops),
    )?;
    say(&format!(
        "scale wrote {} and {}",
        out.join("scale.csv").display(),
        out.join("scale.svg").display()
    ));
    Ok(())
}

/// A comma-separated list of numbers.
fn list(text: &str, name: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|n| {
            n.trim()
                .replace('_', "")
                .parse()
                .map_err(|_| format!("--{name}: not a number: {n:?}"))
        })
        .collect()
}

/// One churn measurement of a Rust implementation, in a process of its own (this binary's
/// `churn` workload): (wall, CPU, thread CPU) ns per cancel+add pair (one thread: its CPU
/// time is the process's).
///
/// A process of its own, as Kafka's JVM gets, so that no implementation inherits another's
/// leftovers: memory the allocator has already faulted in (which spares the next one the
/// page faults of growing its arrays), or a heap fragmented by it.
fn one(
    name: &str,
    pending: usize,
    ops: usize,
    cancel: Victim,
    seed: u64,
) -> Result<(f64, f64, f64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg("churn")
        .args(["--pending", &pending.to_string()])
        .args(["--ops", &ops.to_string()])
        .args(["--cancel", cancel.name()])
        .args(["--seed", &seed.to_string()])
        .args(["--impl", name]);
    let stdout = stdout_of(&mut command, &format!("churn --impl {name}"))?;
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().any(|kv| kv == format!("impl={name}")))
        .ok_or_else(|| format!("churn --impl {name} printed {stdout:?}"))?;
    match (field(line, "ns_per_op"), field(line, "cpu_ns_per_op")) {
        (Some(ns), Some(cpu)) => Ok((ns, cpu, cpu)),
        _ => Err(format!("churn --impl {name} printed {line:?}")),
    }
}

/// Run a measuring process (`what` names it in errors) and return what it printed; a
/// failure to start or a failed exit is an error carrying its stderr.
fn stdout_of(command: &mut Command, what: &str) -> Result<String, String> {
    let output = command.output().map_err(|e| format!("{what}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The number after `key=` in a `key=value ...` line.
fn field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// Kafka's `SystemTimer` through the Java harness: its classpath, built once.
struct KafkaHarness {
    classpath: String,
}

impl KafkaHarness {
    /// Build the harness with Maven (fetching `kafka-server-common` from Maven Central the
    /// first time) and read its classpath.
    fn build() -> Result<KafkaHarness, String> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("java");
        for tool in ["java", "mvn"] {
            let found = Command::new(tool)
                .arg("-version")
                .output()
                .is_ok_and(|o| o.status.success());
            if !found {
                return Err(format!("{tool} not found"));
            }
        }
        let status = Command::new("mvn")
            .args(["-q", "-B", "-f"])
            .arg(dir.join("pom.xml"))
            .args([
                "package",
                "dependency:build-classpath",
                "-Dmdep.outputFile=target/classpath.txt",
            ])
            .status()
            .map_err(|e| format!("mvn: {e}"))?;
        if !status.success() {
            return Err(format!("mvn package failed ({status})"));
        }
        let deps = std::fs::read_to_string(dir.join("target/classpath.txt"))
            .map_err(|e| format!("the harness's classpath: {e}"))?;
        let classes = dir.join("target/classes");
        Ok(KafkaHarness {
            classpath: format!("{}:{}", classes.display(), deps.trim()),
        })
    }

    /// One churn run in a JVM of its own: (wall, process CPU, thread CPU) ns per
    /// cancel+add pair.
    fn run(
        &self,
        pending: usize,
        ops: usize,
        cancel: Victim,
        seed: u64,
    ) -> Result<(f64, f64, f64), String> {
        let mut command = Command::new("java");
        command
            .args(["-Xmx8g", "-cp", &self.classpath])
            .arg("purgatory.bench.KafkaTimerChurn")
            .args([
                pending.to_string(),
                ops.to_string(),
                cancel.name().to_string(),
                seed.to_string(),
            ]);
        let stdout = stdout_of(&mut command, "the Kafka harness")?;
        match (
            field(&stdout, "ns_per_op"),
            field(&stdout, "cpu_ns_per_op"),
            field(&stdout, "thread_cpu_ns_per_op"),
        ) {
            (Some(ns), Some(cpu), Some(thread)) => Ok((ns, cpu, thread)),
            _ => Err(format!("the Kafka harness printed {stdout:?}")),
        }
    }
}

/// The median of some numbers (the mean of the middle two for an even count).
fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// The CPU ns/op of one implementation at one point of one round ([`KAFKA_THREAD`]: Kafka's
/// measuring thread's).
fn find(
    samples: &[Sample],
    round: usize,
    cancel: Victim,
    pending: usize,
    name: &str,
) -> Option<f64> {
    let (name, thread) = match name {
        KAFKA_THREAD => ("kafka-system-timer", true),
        _ => (name, false),
    };
    samples
        .iter()
        .find(|s| {
            s.round == round
                && s.cancel == cancel
                && s.pending == pending
                && s.implementation == name
        })
        .map(|s| {
            if thread {
                s.thread_cpu_ns_per_op
            } else {
                s.cpu_ns_per_op
            }
        })
}

/// Per round then median: every baseline over ours at each size, and each size's cost over
/// the 10k one (how flat the cost stays).
fn print_ratios(samples: &[Sample], cancels: &[Victim], sizes: &[usize], rounds: usize) {
    for &cancel in cancels {
        for &pending in sizes {
            for (base, ours) in RATIOS {
                let per_round: Vec<f64> = (0..rounds)
                    .filter_map(|r| {
                        Some(
                            find(samples, r, cancel, pending, base)?
                                / find(samples, r, cancel, pending, ours)?,
                        )
                    })
                    .collect();
                print_ratio(&format!("{base}/{ours}"), cancel, pending, per_round);
            }
            if pending != 10_000 {
                for name in ["timewheel", "timewheel-timer", "binary-heap", "slots-only"] {
                    let per_round: Vec<f64> = (0..rounds)
                        .filter_map(|r| {
                            Some(
                                find(samples, r, cancel, pending, name)?
                                    / find(samples, r, cancel, 10_000, name)?,
                            )
                        })
                        .collect();
                    print_ratio(
                        &format!("{name}@{pending}/{name}@10000"),
                        cancel,
                        pending,
                        per_round,
                    );
                }
            }
        }
    }
}

fn print_ratio(what: &str, cancel: Victim, pending: usize, per_round: Vec<f64>) {
    let rounds: Vec<String> = per_round.iter().map(|r| format!("{r:.2}")).collect();
    if let Some(m) = median(per_round) {
        say(&format!(
            "scale ratio={what} cancel={} pending={pending} median={m:.2} rounds=[{}]",
            cancel.name(),
            rounds.join(" ")
        ));
    }
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

fn csv(samples: &[Sample]) -> String {
    let mut text =
        String::from("round,cancel,pending,impl,ns_per_op,cpu_ns_per_op,thread_cpu_ns_per_op\n");
    for s in samples {
        let _ = writeln!(
            text,
            "{},{},{},{},{:.2},{:.2},{:.2}",
            s.round,
            s.cancel.name(),
            s.pending,
            s.implementation,
            s.ns_per_op,
            s.cpu_ns_per_op,
            s.thread_cpu_ns_per_op
        );
    }
    text
}

/// Colours of the plot's lines, by implementation (in [`IMPLS`] order).
const COLOURS: [&str; 6] = [
    "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#7f7f7f", "#9467bd",
];

/// Size of one panel of the plot, and its margins.
const PANEL_W: f64 = 420.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 60.0;
const TOP: f64 = 40.0;
const GAP: f64 = 70.0;

/// The plot: one panel per cancel pattern, median CPU ns/op against pending, log-log.
fn svg(samples: &[Sample], cancels: &[Victim], impls: &[&'static str], ops: usize) -> String {
    let sizes: Vec<f64> = samples.iter().map(|s| s.pending as f64).collect();
    let costs: Vec<f64> = samples.iter().map(|s| s.cpu_ns_per_op).collect();
    let decade = |v: f64, up: bool| {
        let e = v.max(1.0).log10();
        10f64.powf(if up { e.ceil() } else { e.floor() })
    };
    let x_lo = decade(sizes.iter().copied().fold(f64::MAX, f64::min), false);
    let x_hi = decade(sizes.iter().copied().fold(1.0, f64::max), true);
    let y_lo = decade(costs.iter().copied().fold(f64::MAX, f64::min), false);
    let y_hi = decade(costs.iter().copied().fold(1.0, f64::max), true);
    let x_of = |v: f64| {
        LEFT + PANEL_W * (v.log10() - x_lo.log10()) / (x_hi.log10() - x_lo.log10()).max(1e-9)
    };
    let y_of = |v: f64| {
        TOP + PANEL_H * (1.0 - (v.log10() - y_lo.log10()) / (y_hi.log10() - y_lo.log10()).max(1e-9))
    };

    let width = cancels.len() as f64 * (LEFT + PANEL_W + GAP) + 20.0;
    let height = TOP + PANEL_H + 130.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (p, &cancel) in cancels.iter().enumerate() {
        let dx = p as f64 * (LEFT + PANEL_W + GAP);
        let _ = writeln!(s, r#"<g transform="translate({dx},0)">"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14">churn, {} cancel: CPU ns per cancel+add, {ops} ops (median of rounds)</text>"#,
            LEFT + PANEL_W / 2.0,
            cancel.name()
        );
        // Grid and axes: a line per decade, light lines at 2x and 5x.
        let mut v = y_lo;
        while v <= y_hi * 1.001 {
            for (k, major) in [(1.0, true), (2.0, false), (5.0, false)] {
                let t = v * k;
                if t > y_hi * 1.001 {
                    continue;
                }
                let y = y_of(t);
                let colour = if major { "#bbb" } else { "#eee" };
                let _ = writeln!(
                    s,
                    r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="{colour}"/>"#,
                    LEFT + PANEL_W
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
                    LEFT - 6.0,
                    y + 4.0,
                    number(t)
                );
            }
            v *= 10.0;
        }
        let mut v = x_lo;
        while v <= x_hi * 1.001 {
            let x = x_of(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{}" stroke="#bbb"/>"##,
                TOP + PANEL_H
            );
            let _ = writeln!(
                s,
                r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
                TOP + PANEL_H + 16.0,
                number(v)
            );
            v *= 10.0;
        }
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">pending timers (log)</text>"#,
            LEFT + PANEL_W / 2.0,
            TOP + PANEL_H + 34.0
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(16,{}) rotate(-90)" text-anchor="middle">ns per op (log)</text>"#,
            TOP + PANEL_H / 2.0
        );
        for (i, &name) in impls.iter().enumerate() {
            let colour = IMPLS
                .iter()
                .position(|&n| n == name)
                .map_or("black", |k| COLOURS[k]);
            let mut points = Vec::new();
            let mut pendings: Vec<usize> = samples
                .iter()
                .filter(|x| x.cancel == cancel && x.implementation == name)
                .map(|x| x.pending)
                .collect();
            pendings.sort_unstable();
            pendings.dedup();
            for pending in pendings {
                let values = samples
                    .iter()
                    .filter(|x| {
                        x.cancel == cancel && x.implementation == name && x.pending == pending
                    })
                    .map(|x| x.cpu_ns_per_op)
                    .collect();
                if let Some(m) = median(values) {
                    points.push((x_of(pending as f64), y_of(m)));
                }
            }
            let path: Vec<String> = points
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                path.join(" ")
            );
            for (x, y) in &points {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#
                );
            }
            // Legend below the panel, two columns.
            let lx = LEFT + (i % 3) as f64 * 150.0;
            let ly = TOP + PANEL_H + 58.0 + (i / 3) as f64 * 18.0;
            let _ = writeln!(
                s,
                r#"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
                lx + 20.0,
                lx + 26.0,
                ly + 4.0,
                legend(name)
            );
        }
        let _ = writeln!(s, "</g>");
    }
    let _ = writeln!(s, "</svg>");
    s
}

/// An implementation's name in the plot's legend.
fn legend(name: &str) -> String {
    match name {
        "slots-only" => "slots-only (the floor)".to_string(),
        other => other.to_string(),
    }
}

/// 1000 as `1k`, 1000000 as `1M`, small numbers as they are.
fn number(v: f64) -> String {
    let v = v.round() as u64;
    match v {
        _ if v >= 1_000_000 && v % 1_000_000 == 0 => format!("{}M", v / 1_000_000),
        _ if v >= 1_000 && v % 1_000 == 0 => format!("{}k", v / 1_000),
        _ => v.to_string(),
    }
}
