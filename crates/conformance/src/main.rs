//! `conformance`: the same scenarios, sent to Apache Kafka and to this broker, answers
//! compared field by field.
//!
//! Kafka is the oracle. `scripts/kafka-reference.sh start` runs a real Kafka 4.4 cluster (a
//! KRaft controller and brokers 1, 2 and 3); this harness starts our broker itself (or takes
//! one already running), runs every scenario of the corpus against both, the two sides
//! side by side, and prints a table: scenario, Kafka's answer, ours, and whether they match.
//! A difference is either fixed, or listed with its reason in the README's "Differences
//! from Kafka" and on the scenario (`differs`); any other difference fails the run.
//!
//!     scripts/kafka-reference.sh start
//!     cargo run --release -p conformance -- --kafka 127.0.0.1:29091 [--short] [--only produce/]
//!     scripts/kafka-reference.sh stop

mod corpus;
mod observe;
mod target;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;

use corpus::{Ctx, Scenario};
use observe::{diff, FieldDiff, Observation};
use target::{find_coordinator_request, OursProcess, Target};

#[derive(Parser, Debug)]
#[command(about = "Compare this broker's answers with Apache Kafka's, scenario by scenario")]
struct Args {
    /// Kafka's bootstrap address (any broker of the reference cluster).
    #[arg(long, default_value = "127.0.0.1:29091")]
    kafka: String,
    /// Where scripts/kafka-reference.sh keeps its pid files (to stop Kafka's brokers 2, 3).
    #[arg(long, default_value = "target/kafka-reference")]
    kafka_dir: PathBuf,
    /// Our broker's binary; the harness starts it on ports the kernel picks.
    #[arg(long, default_value = "target/release/purgatory")]
    ours_bin: String,
    /// The config our broker is started with.
    #[arg(long, default_value = "config/broker.toml")]
    ours_config: String,
    /// An already running broker of ours (`host:port`) instead of starting one; needs
    /// `--ours-admin`.
    #[arg(long, requires = "ours_admin")]
    ours: Option<String>,
    /// The admin listener of `--ours`.
    #[arg(long)]
    ours_admin: Option<String>,
    /// Only the short corpus (the test command's): quick scenarios, followers stopped for
    /// a few seconds at most.
    #[arg(long)]
    short: bool,
    /// Only scenarios whose name contains this (repeatable).
    #[arg(long)]
    only: Vec<String>,
    /// Print both whole answers for every scenario that differs, not only the fields.
    #[arg(long)]
    verbose: bool,
    /// Also write the table as Markdown to this file.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

/// How one scenario came out.
struct Outcome {
    name: &'static str,
    kafka: Result<Observation>,
    ours: Result<Observation>,
    verdict: Verdict,
}

#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Match,
    /// Differs only in documented fields.
    Documented(Vec<FieldDiff>),
    /// Differs in fields no one has explained.
    Mismatch(Vec<FieldDiff>),
    /// The harness could not run it on one side.
    Failed,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args = Args::parse();
    let selected: Vec<Scenario> = corpus::all()
        .into_iter()
        .filter(|s| !args.short || s.short)
        .filter(|s| args.only.is_empty() || args.only.iter().any(|o| s.name.contains(o.as_str())))
        .collect();

    let mut ours_process = None;
    let (ours_bootstrap, ours_admin) = match (&args.ours, &args.ours_admin) {
        (Some(b), Some(a)) => (b.clone(), a.clone()),
        _ => {
            let p = OursProcess::start(
                &args.ours_bin,
                &args.ours_config,
                std::path::Path::new("target"),
                &[],
            )
            .await
            .context("starting our broker")?;
            let pair = (p.bootstrap.clone(), p.admin.clone());
            eprintln!(
                "conformance: our broker on {} (log: {})",
                pair.0,
                p.log.display()
            );
            ours_process = Some(p);
            pair
        }
    };
    let mut kafka = Target::kafka(&args.kafka, &args.kafka_dir)
        .await
        .context("connecting to Kafka's reference cluster (scripts/kafka-reference.sh start)")?;
    let mut ours = Target::ours(&ours_bootstrap, &ours_admin).await?;

    let run_id = format!("{:x}", corpus::now_ms() % 0xffffff);
    let started = Instant::now();
    let mut outcomes = Vec::new();
    for (index, scenario) in selected.iter().enumerate() {
        let leaders = Arc::new(offsets_leaders(&mut kafka).await?);
        let ctx = Ctx::new(&run_id, index, leaders);
        // Both brokers at once: a scenario mostly waits (for replication, for timeouts),
        // and what it records is coarse enough ("at once" or "after the wait" of a second
        // or more) not to depend on the other one running.
        let (kafka_seen, ours_seen) = tokio::join!(
            run_one(&mut kafka, scenario, &ctx),
            run_one(&mut ours, scenario, &ctx)
        );
        let verdict = judge(scenario, &kafka_seen, &ours_seen);
        print_outcome(scenario, &kafka_seen, &ours_seen, &verdict, args.verbose);
        outcomes.push(Outcome {
            name: scenario.name,
            kafka: kafka_seen,
            ours: ours_seen,
            verdict,
        });
    }
    drop(ours_process);

    let count = |f: fn(&Verdict) -> bool| outcomes.iter().filter(|o| f(&o.verdict)).count();
    let matched = count(|v| *v == Verdict::Match);
    let documented = count(|v| matches!(v, Verdict::Documented(_)));
    let failed = outcomes.len() - matched - documented;
    println!(
        "\n{} scenarios in {:.0} s: {matched} match Kafka, {documented} differ as documented, {failed} differ unexplained or failed",
        outcomes.len(),
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &args.markdown {
        std::fs::write(path, markdown(&selected, &outcomes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    // A closing line test runners read: N passed, N failed.
    println!(
        "conformance: {} passed, {failed} failed",
        matched + documented
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Runs one scenario; whatever happened, the target's followers run again afterwards.
async fn run_one(t: &mut Target, scenario: &Scenario, ctx: &Ctx) -> Result<Observation> {
    let seen = (scenario.run)(t, ctx).await;
    if t.followers_stopped() {
        if let Err(e) = t.resume_followers().await {
            eprintln!(
                "conformance: {}: resuming the followers failed: {e:#}",
                t.label()
            );
        }
    }
    seen
}

fn judge(scenario: &Scenario, kafka: &Result<Observation>, ours: &Result<Observation>) -> Verdict {
    let (Ok(k), Ok(o)) = (kafka, ours) else {
        return Verdict::Failed;
    };
    let diffs = diff(k, o);
    if diffs.is_empty() {
        return Verdict::Match;
    }
    let explained = |d: &FieldDiff| scenario.differs.iter().any(|(field, _)| *field == d.key);
    if diffs.iter().all(explained) {
        Verdict::Documented(diffs)
    } else {
        Verdict::Mismatch(diffs)
    }
}

fn one_line(o: &Result<Observation>) -> String {
    match o {
        Ok(o) => o
            .fields()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        Err(e) => format!("harness error: {e:#}"),
    }
}

fn print_outcome(
    s: &Scenario,
    kafka: &Result<Observation>,
    ours: &Result<Observation>,
    v: &Verdict,
    verbose: bool,
) {
    let mark = match v {
        Verdict::Match => "match",
        Verdict::Documented(_) => "documented difference",
        Verdict::Mismatch(_) => "DIFFERS",
        Verdict::Failed => "FAILED",
    };
    println!("{:<58} {mark}", s.name);
    match v {
        Verdict::Match => println!("    both:  {}", one_line(kafka)),
        Verdict::Documented(d) | Verdict::Mismatch(d) => {
            for f in d {
                let why = s
                    .differs
                    .iter()
                    .find(|(field, _)| *field == f.key)
                    .map(|(_, why)| format!("  ({why})"))
                    .unwrap_or_default();
                println!(
                    "    {}: Kafka {} | ours {}{why}",
                    f.key,
                    f.kafka.as_deref().unwrap_or("-"),
                    f.ours.as_deref().unwrap_or("-"),
                );
            }
        }
        Verdict::Failed => {}
    }
    if *v == Verdict::Failed || (verbose && *v != Verdict::Match) {
        println!("    Kafka: {}", one_line(kafka));
        println!("    ours:  {}", one_line(ours));
    }
}

fn markdown(scenarios: &[Scenario], outcomes: &[Outcome]) -> String {
    let mut out = String::from("| scenario | Kafka 4.4 | ours | match |\n|---|---|---|---|\n");
    for (s, o) in scenarios.iter().zip(outcomes) {
        let cell = |x: &Result<Observation>| one_line(x).replace('|', "\\|");
        let verdict = match &o.verdict {
            Verdict::Match => "yes".to_owned(),
            Verdict::Documented(d) => format!(
                "documented: {}",
                d.iter()
                    .map(|f| f.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Verdict::Mismatch(_) => "**no**".to_owned(),
            Verdict::Failed => "**failed**".to_owned(),
        };
        let ours = if o.verdict == Verdict::Match {
            "same".to_owned()
        } else {
            cell(&o.ours)
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            s.name,
            cell(&o.kafka),
            ours,
            verdict
        ));
        debug_assert_eq!(s.name, o.name);
    }
    out
}

/// Kafka's leader of each `__consumer_offsets` partition (creating the topic first), so
/// that scenarios can name groups coordinated by node 1.
async fn offsets_leaders(kafka: &mut Target) -> Result<Vec<i32>> {
    kafka
        .leader(&find_coordinator_request(0, "conformance-probe"), 4)
        .await?;
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let meta = kafka.metadata(&["__consumer_offsets"]).await?;
        if let Some(t) = meta.topics.first() {
            if t.error_code == 0
                && !t.partitions.is_empty()
                && t.partitions.iter().all(|p| p.leader_id.0 >= 0)
            {
                let mut leaders = vec![-1; t.partitions.len()];
                for p in &t.partitions {
                    if let Some(slot) = leaders.get_mut(p.partition_index as usize) {
                        *slot = p.leader_id.0;
                    }
                }
                return Ok(leaders);
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "__consumer_offsets has no leaders on Kafka after 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
