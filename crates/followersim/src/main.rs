//! `followersim`: run simulated Kafka followers against a leader, healthy or scripted.
//!
//! ```text
//! followersim --bootstrap 127.0.0.1:9092 --replica-ids 2,3          # healthy, until Ctrl-C
//! followersim --scenario config/scenarios/paused-follower.toml --bootstrap 127.0.0.1:9092
//! ```
//!
//! Each follower fetches from the leader with its replica id, exactly as a Kafka follower's
//! fetcher does, so the leader's high watermark (and every `acks=all` produce) moves at the
//! followers' pace. A scenario changes that pace over time; every step is logged in plain
//! words. Set `RUST_LOG` (e.g. `RUST_LOG=followersim=debug`) for more detail.

use anyhow::{Context, Result};
use clap::Parser;
use followersim::scenario::{run_timeline, spawn_followers};
use followersim::{FollowerConfig, FollowerHandle, Scenario};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use tracing::info;

/// Simulated Kafka follower replicas that fetch from the leader over the wire.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The leader's Kafka listener.
    #[arg(long, default_value = "127.0.0.1:9092", value_name = "HOST:PORT")]
    bootstrap: String,

    /// Scenario file (TOML) to play; without it the followers just run, healthy.
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,

    /// Replica ids of the followers. Without a scenario: which followers to run (default
    /// 2,3). With one: renames the scenario's followers, in the order they are declared.
    #[arg(
        long = "replica-ids",
        alias = "replica-id",
        value_delimiter = ',',
        value_name = "IDS"
    )]
    replica_ids: Vec<i32>,

    /// Starting delay before each fetch, in ms (plain mode; scenarios set their own).
    #[arg(long, default_value_t = 0)]
    fetch_delay_ms: u64,

    /// Starting "stay N ms behind" lag, in ms (plain mode; scenarios set their own).
    #[arg(long, default_value_t = 0)]
    lag_ms: u64,

    /// How long the leader may park each Fetch (max_wait_ms).
    #[arg(long, default_value_t = 500)]
    max_wait_ms: i32,

    /// max_bytes of each Fetch.
    #[arg(long, default_value_t = 10 * 1024 * 1024)]
    max_bytes: i32,

    /// How often to re-read Metadata for new or deleted topics, in ms.
    #[arg(long, default_value_t = 1000)]
    metadata_refresh_ms: u64,

    /// Log each follower's offsets every N ms (0: never).
    #[arg(long, default_value_t = 5000)]
    status_interval_ms: u64,
}

fn log_status(followers: &BTreeMap<i32, FollowerHandle>) {
    for h in followers.values() {
        let s = h.status();
        let parts: Vec<String> = s
            .partitions
            .iter()
            .map(|p| {
                format!(
                    "{}-{} LEO {} (leader HW {}{})",
                    p.topic,
                    p.partition,
                    p.log_end_offset,
                    p.leader_high_watermark_seen,
                    if p.in_isr_seen { "" } else { ", out of ISR" }
                )
            })
            .collect();
        info!(
            "follower {}: {:?}, {} fetches, {} bytes; {}",
            s.replica_id,
            s.state,
            s.counters.fetches_sent,
            s.counters.bytes_fetched,
            if parts.is_empty() {
                "no partitions yet".to_owned()
            } else {
                parts.join(", ")
            }
        );
    }
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let args = Args::parse();

    let scenario = match &args.scenario {
        Some(path) => {
            let s = Scenario::from_file(path)?;
            if args.replica_ids.is_empty() {
                s
            } else {
                s.with_replica_ids(&args.replica_ids)?
            }
        }
        None => {
            let ids = if args.replica_ids.is_empty() {
                vec![2, 3]
            } else {
                args.replica_ids.clone()
            };
            Scenario::healthy(&ids)
        }
    };
    let base = FollowerConfig {
        bootstrap: args.bootstrap.clone(),
        fetch_max_wait_ms: args.max_wait_ms,
        fetch_max_bytes: args.max_bytes,
        metadata_refresh_ms: args.metadata_refresh_ms,
        fetch_delay_ms: args.fetch_delay_ms,
        lag_ms: args.lag_ms,
        ..FollowerConfig::default()
    };

    info!(
        "followers {:?} fetching from the leader at {}",
        scenario.follower_ids(),
        args.bootstrap
    );
    scenario.log_summary();
    let followers = spawn_followers(&scenario, &base);

    let status_every = Duration::from_millis(args.status_interval_ms.max(1));
    let status_loop = async {
        if args.status_interval_ms == 0 {
            return std::future::pending::<()>().await;
        }
        let mut tick = tokio::time::interval(status_every);
        tick.tick().await;
        loop {
            tick.tick().await;
            log_status(&followers);
        }
    };
    let story = async {
        run_timeline(&scenario, &followers).await?;
        if scenario.duration_ms.is_none() {
            info!("all steps done; running until Ctrl-C");
            std::future::pending::<()>().await;
        }
        anyhow::Ok(())
    };
    let result = tokio::select! {
        r = story => r,
        _ = status_loop => Ok(()),
        c = tokio::signal::ctrl_c() => {
            c.context("waiting for Ctrl-C")?;
            info!("Ctrl-C: stopping");
            Ok(())
        }
    };
    log_status(&followers);
    for h in followers.values() {
        h.shutdown().await;
    }
    result
}
