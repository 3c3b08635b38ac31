//! The `purgatory` command: run the broker (`serve`, the default), or talk to a running
//! one's admin API (`ctl`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand};
use purgatory::admin::{self, AdminState};
use purgatory::config::{BrokerConfig, ClockMode};
use purgatory::followers::EmbeddedFollowers;
use purgatory::Broker;
use tracing_subscriber::EnvFilter;

mod ctl;
mod ready;

/// A mock Kafka broker that makes delayed operations real and visible.
#[derive(Parser)]
#[command(name = "purgatory", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the broker (the default when no command is given).
    #[command(after_long_help = READY_HELP)]
    Serve(ServeArgs),
    /// Talk to a running broker's admin API.
    Ctl(CtlArgs),
}

#[derive(clap::Args)]
struct CtlArgs {
    /// Admin API address.
    #[arg(
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    admin: String,
    /// Bearer token, if the broker has `admin.token` set.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PURGATORY_ADMIN_TOKEN",
        global = true
    )]
    token: Option<String>,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Subcommand)]
enum CtlCommand {
    /// Show partitions (HW, LEO, ISR), purgatories, the timing wheel and followers.
    State {
        /// Print the raw JSON of GET /api/state.
        #[arg(long)]
        json: bool,
    },
    /// Show the consumer groups: state, generation, members, pending delayed operations.
    Groups {
        /// Print the groups' part of GET /api/state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show the transactional ids: state, producer id and epoch, partitions, and each open
    /// transaction's age against its timeout.
    Transactions {
        /// Print the transactions' part of GET /api/state as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Steer an embedded follower: pause, resume, crash, restart, delay MS, lag MS, max-bytes N.
    Follower {
        /// Replica id (2, 3, ...).
        id: String,
        /// pause | resume | crash | restart | delay | lag | max-bytes
        action: String,
        /// The value for delay (ms), lag (ms) or max-bytes (bytes).
        value: Option<String>,
    },
    /// With several brokers (`serve --brokers N`): kill, restart or shut down a broker, and
    /// print the controller's elections and ISR changes.
    Broker {
        /// Broker id (1, 2, ...).
        id: String,
        /// kill | restart | shutdown
        #[arg(value_parser = ["kill", "restart", "shutdown"])]
        action: String,
    },
    /// Play a scenario file's timeline through the admin API: follower steps, and with
    /// several brokers, broker steps (kill, shutdown, restart, and fetcher controls).
    Scenario {
        /// The scenario TOML (config/scenarios/*.toml).
        file: String,
    },
    /// Stream each request's story as it finishes: `produce #17 client=rdkafka demo-0
    /// appended @42 → parked (needs HW 43) → follower 2 fetch @43 → ... → completed`.
    Trace {
        /// Only this client id.
        #[arg(long)]
        client: Option<String>,
        /// Only requests that touched this topic.
        #[arg(long)]
        topic: Option<String>,
        /// Only this Kafka request name (Produce, FetchConsumer, FetchFollower, Metadata, ...).
        #[arg(long)]
        request: Option<String>,
        /// Include replication traffic (follower fetches, the followers' other requests).
        #[arg(long)]
        followers: bool,
        /// Under each story, one line per step and Kafka's phase times.
        #[arg(long)]
        phases: bool,
        /// Exit after this many requests.
        #[arg(long, value_name = "N")]
        count: Option<u64>,
    },
    /// Fault rules per API: `fault add '{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER",
    /// "times": 3}'`, `fault list`, `fault clear [ID]`.
    Fault {
        /// add | list | clear
        #[arg(value_parser = ["add", "list", "clear"])]
        action: String,
        /// For add: the rule as JSON (see GET /api/faults). For clear: one rule's id
        /// (without it, every rule is removed).
        value: Option<String>,
        /// For list: print the raw JSON of GET /api/faults.
        #[arg(long)]
        json: bool,
    },
    /// Advance a manual clock: `clock advance MS`.
    Clock {
        /// Only `advance`.
        #[arg(value_parser = ["advance"])]
        action: String,
        /// Milliseconds.
        ms: u64,
    },
}

/// `serve --help`'s account of the ready announcement (`ready.rs`).
const READY_HELP: &str = "\
Once every listener is bound and serving (the Kafka listeners and the admin API), the broker \
says where, as one JSON object:

  {\"brokers\":[{\"id\":1,\"listener\":\"127.0.0.1:41234\",\"advertised\":\"127.0.0.1:41234\"}],
   \"bootstrap\":\"127.0.0.1:41234\",\"admin\":\"127.0.0.1:41235\"}

`brokers` lists every Kafka listener: its broker id, the address it is bound to, and the \
host:port Metadata advertises (always the bound port). `bootstrap` is the advertised \
addresses joined by commas, for a client's bootstrap.servers. `admin` is the admin HTTP \
listener's address, or null with --no-admin.

With --ready-file PATH the object is written to PATH (a temporary file in the same \
directory, renamed into place: a reader never sees half of it; a PATH left by an earlier \
run is removed at start). Without, it is printed as one line on stdout. Logs go to stderr.

Any listener may be given port 0 (--listen 127.0.0.1:0, --admin-listen 127.0.0.1:0): the \
kernel picks a free port, and the announcement tells which. Tests start the broker that way \
rather than guessing free ports.";

/// Brokers started when the binary runs with no command: enough for a leader to fail and
/// an ISR of two to remain.
const DEFAULT_BROKERS: i32 = 3;

#[derive(clap::Args, Default)]
struct ServeArgs {
    /// Broker config file (TOML, Kafka-named keys). Defaults to config/broker.toml if present.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Kafka listener address, e.g. 127.0.0.1:9092 (overrides `listeners`). Port 0: one
    /// the kernel picks, told by the ready announcement (--ready-file).
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Host advertised to clients in Metadata (overrides `advertised.host`).
    #[arg(long, value_name = "HOST")]
    advertised_host: Option<String>,
    /// `system` or `manual` (overrides `clock`).
    #[arg(long, value_name = "MODE")]
    clock: Option<String>,
    /// Overrides `replica.lag.time.max.ms`.
    #[arg(long, value_name = "MS")]
    replica_lag_time_max_ms: Option<u64>,
    /// Overrides `min.insync.replicas`.
    #[arg(long, value_name = "N")]
    min_insync_replicas: Option<i32>,
    /// Number of simulated followers (overrides `follower.count`).
    #[arg(long, value_name = "N")]
    followers: Option<i32>,
    /// Do not run followers in-process (play them with `followersim` instead).
    #[arg(long)]
    no_embedded_followers: bool,
    /// Embedded followers' extra delay before each fetch (overrides `follower.fetch.delay.ms`).
    #[arg(long, value_name = "MS")]
    follower_delay_ms: Option<u64>,
    /// Admin HTTP listener (overrides `admin.listeners`). Port 0: one the kernel picks.
    #[arg(long, value_name = "HOST:PORT")]
    admin_listen: Option<String>,
    /// Do not serve the admin HTTP API.
    #[arg(long)]
    no_admin: bool,
    /// Run N brokers in this process (ids 1..N, listeners on consecutive ports from
    /// `--listen`, or each on a port the kernel picks if its port is 0), each following
    /// the others over the Kafka protocol. 1: a single broker,
    /// no followers. Without it: one leader and its simulated followers (with no command
    /// at all, as `cargo run --release` runs it: three brokers).
    #[arg(long, value_name = "N")]
    brokers: Option<i32>,
    /// Once every listener serves, write their addresses to FILE as JSON, atomically,
    /// instead of printing them as one line on stdout (see the end of `serve --help`).
    #[arg(long, value_name = "FILE")]
    ready_file: Option<PathBuf>,
}

const DEFAULT_CONFIG: &str = "config/broker.toml";

fn load_config(args: &ServeArgs) -> anyhow::Result<BrokerConfig> {
    let mut config = match &args.config {
        Some(path) => BrokerConfig::from_file(path)?,
        None if std::path::Path::new(DEFAULT_CONFIG).exists() => {
            BrokerConfig::from_file(DEFAULT_CONFIG.as_ref())?
        }
        None => BrokerConfig::default(),
    };
    if let Some(listen) = &args.listen {
        config.listen = listen.clone();
    }
    if let Some(host) = &args.advertised_host {
        config.advertised_host = Some(host.clone());
    }
    if let Some(clock) = &args.clock {
        config.clock = match clock.as_str() {
            "system" => ClockMode::System,
            "manual" => ClockMode::Manual,
            other => anyhow::bail!("--clock must be `system` or `manual`, not {other:?}"),
        };
    }
    if let Some(ms) = args.replica_lag_time_max_ms {
        config.replica_lag_time_max_ms = ms;
    }
    if let Some(n) = args.min_insync_replicas {
        config.min_insync_replicas = n;
    }
    if let Some(n) = args.followers {
        config.follower_count = n;
        config.default_replication_factor =
            config.default_replication_factor.min((n + 1) as i16).max(1);
    }
    if args.no_embedded_followers {
        config.embedded_followers = false;
    }
    if let Some(ms) = args.follower_delay_ms {
        config.follower_fetch_delay_ms = ms;
    }
    if let Some(listen) = &args.admin_listen {
        config.admin_listen = listen.clone();
    }
    if args.no_admin {
        config.admin_enable = false;
    }
    config.validate().context("invalid configuration")?;
    Ok(config)
}

fn main() -> std::process::ExitCode {
    // Errors are for people: one line with its causes, no backtrace.
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    // Without RUST_LOG: lifecycle, ISR changes and rebalances at info, but not the lines
    // written for every request: each delayed operation's life (`purgatory::purgatory`) and
    // each high-watermark move (`purgatory::replication`). Formatting them cost a large
    // share of the broker's CPU under acks=all load (docs/performance.md), and the live
    // view and `ctl trace` tell each request's story anyway. `RUST_LOG=purgatory=info`
    // turns them back on.
    // Logs go to stderr: stdout carries only the ready announcement (`ready.rs`), so
    // that whoever started the broker can read it as one line.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| {
            EnvFilter::new("info,purgatory::purgatory=warn,purgatory::replication=warn")
        }))
        .init();
    let cli = Cli::parse();
    let args = match cli.command {
        Some(Command::Serve(args)) => args,
        // No command at all (`cargo run --release`): the embedded default, three brokers.
        None => ServeArgs {
            brokers: Some(DEFAULT_BROKERS),
            ..ServeArgs::default()
        },
        Some(Command::Ctl(ctl)) => return run_ctl(ctl),
    };
    let mut config = load_config(&args)?;
    let ready_file = args.ready_file.as_deref();
    if let Some(path) = ready_file {
        ready::clear(path)?;
    }
    let runtime = purgatory::server::runtime()?;
    match args.brokers {
        Some(n) if n > 1 => runtime.block_on(serve_cluster(config, n, ready_file)),
        Some(n) if n < 1 => anyhow::bail!("--brokers must be at least 1, got {n}"),
        Some(_) => {
            // One broker and no followers: every topic has replication factor 1.
            config.follower_count = 0;
            config.embedded_followers = false;
            config.default_replication_factor = 1;
            runtime.block_on(serve(config, ready_file))
        }
        None => runtime.block_on(serve(config, ready_file)),
    }
}

/// `--brokers N`: N brokers in this process. The admin listener shows broker 1.
async fn serve_cluster(
    config: BrokerConfig,
    brokers: i32,
    ready_file: Option<&Path>,
) -> anyhow::Result<()> {
    let cluster = purgatory::cluster::Cluster::start(config, brokers).await?;
    let first = cluster
        .broker(1)
        .ok_or_else(|| anyhow::anyhow!("broker 1 did not start"))?;
    let rm = first.replica_manager().clone();
    let mut listeners = Vec::new();
    for id in cluster.ids() {
        if let Some(b) = cluster.broker(id) {
            tracing::info!(broker = id, listen = %b.local_addr(), "broker ready");
            listeners.push(listener(b));
        }
    }
    let mut admin_addr = None;
    if rm.config.admin_enable {
        let state = AdminState::new(
            rm.clone(),
            first.group_coordinator().clone(),
            EmbeddedFollowers::none(),
            rm.config.admin_token.clone(),
        )
        .with_cluster(cluster.clone())
        .with_transactions(first.txn_coordinator().clone());
        admin_addr = Some(admin::start(&rm.config.admin_listen, state)?);
    }
    ready::announce(ready_file, &ready::Announcement::new(listeners, admin_addr))?;
    tokio::signal::ctrl_c().await?;
    tracing::info!("shutting down");
    cluster.shutdown().await;
    Ok(())
}

/// Broker `b`'s listener, as the ready announcement tells it.
fn listener(b: &Broker) -> ready::Listener {
    let (host, port) = purgatory::handlers::metadata::advertised(b.replica_manager());
    ready::Listener {
        id: b.replica_manager().config.broker_id,
        listener: b.local_addr(),
        advertised: format!("{host}:{port}"),
    }
}

async fn serve(config: BrokerConfig, ready_file: Option<&Path>) -> anyhow::Result<()> {
    let broker = Broker::start(config).await?;
    let rm = broker.replica_manager().clone();
    let followers = if rm.config.embedded_followers && rm.config.follower_count > 0 {
        // Followers reach the listener over loopback, whatever address it is bound to.
        let bootstrap = format!("127.0.0.1:{}", broker.local_addr().port());
        let ids: Vec<i32> = rm.config.all_replica_ids().into_iter().skip(1).collect();
        // The simulated followers keep offsets, not records: nobody reads their copies,
        // and records kept there would sit outside `log.memory.max.bytes`.
        let template = followersim::FollowerConfig {
            fetch_max_wait_ms: rm.config.follower_fetch_max_wait_ms,
            fetch_delay_ms: rm.config.follower_fetch_delay_ms,
            retain_bytes: 0,
            ..followersim::FollowerConfig::default()
        };
        EmbeddedFollowers::start_for(&rm, &bootstrap, &ids, &template)
    } else {
        EmbeddedFollowers::none()
    };
    let mut admin_addr = None;
    if rm.config.admin_enable {
        let state = AdminState::new(
            rm.clone(),
            broker.group_coordinator().clone(),
            followers.clone(),
            rm.config.admin_token.clone(),
        )
        .with_transactions(broker.txn_coordinator().clone());
        admin_addr = Some(admin::start(&rm.config.admin_listen, state)?);
    }
    ready::announce(
        ready_file,
        &ready::Announcement::new(vec![listener(&broker)], admin_addr),
    )?;
    tokio::signal::ctrl_c().await?;
    tracing::info!("shutting down");
    followers.shutdown().await;
    broker.shutdown();
    Ok(())
}

fn run_ctl(ctl: CtlArgs) -> anyhow::Result<()> {
    let token = ctl.token.as_deref();
    match ctl.command {
        CtlCommand::State { json } => ctl::state(&ctl.admin, json),
        CtlCommand::Groups { json } => ctl::groups(&ctl.admin, json),
        CtlCommand::Transactions { json } => ctl::transactions(&ctl.admin, json),
        CtlCommand::Follower { id, action, value } => {
            ctl::follower(&ctl.admin, token, &id, &action, value.as_deref())
        }
        CtlCommand::Clock { ms, .. } => ctl::advance_clock(&ctl.admin, token, ms),
        CtlCommand::Broker { id, action } => ctl::broker(&ctl.admin, token, &id, &action),
        CtlCommand::Scenario { file } => ctl::scenario(&ctl.admin, token, &file),
        CtlCommand::Fault {
            action,
            value,
            json,
        } => ctl::fault(&ctl.admin, token, &action, value.as_deref(), json),
        CtlCommand::Trace {
            client,
            topic,
            request,
            followers,
            phases,
            count,
        } => ctl::trace(
            &ctl.admin,
            &ctl::TraceOptions {
                client,
                topic,
                request,
                followers,
                phases,
                count,
            },
        ),
    }
}
