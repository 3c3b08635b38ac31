//! `purgatory ctl`: a command-line client for the admin HTTP API.
//!
//! `purgatory ctl state` prints what the broker holds — partitions with their HW, LEO and
//! ISR, the purgatories and what each parked request waits for, the timing wheel, the
//! followers — in plain words. `purgatory ctl groups` prints the consumer groups with their
//! members and the DelayedJoin / DelayedSync / DelayedHeartbeat each waits in.
//! `purgatory ctl follower 2 pause` steers a follower. `purgatory ctl trace` streams each
//! request's story as it finishes. Any failure (broker unreachable, unknown follower, bad
//! value, an answer it cannot read) exits non-zero.
//!
//! The answers are read into the types the broker serializes them from (partition,
//! purgatory, wheel, group and follower snapshots), so a field renamed on one side is a
//! compile error or a clear error message, not a `null` in the output. Only the envelopes
//! the broker builds with `json!` get small structs here, with just the fields printed.
//! `--json` prints the broker's JSON as it came.
//!
//! This is part of the `purgatory` binary, not the library: nothing in the broker uses it.

mod client;
mod render;
mod trace;

use followersim::FollowerStatus;
use purgatory::config::ClockMode;
use purgatory::coordinator::GroupsSnapshot;
use replog::PartitionSnapshot;
use serde::Deserialize;
use serde_json::Value;
use timewheel::{PurgatorySnapshot, WheelSnapshot};

use client::{call_json, parse};
pub use trace::{trace, TraceOptions};

/// What `ctl state` prints of `GET /api/state` (built by `admin::state_json`).
#[derive(Debug, Deserialize)]
struct StateAnswer {
    broker_id: i32,
    now_ms: u64,
    clock: ClockMode,
    log_bytes: u64,
    partitions: Vec<PartitionSnapshot>,
    #[serde(default)]
    purgatories: Purgatories,
    timer: WheelSnapshot,
    followers: Vec<FollowerStatus>,
}

/// The four purgatories of `/api/state`; one that is missing is not shown.
#[derive(Debug, Default, Deserialize)]
struct Purgatories {
    produce: Option<PurgatorySnapshot>,
    fetch: Option<PurgatorySnapshot>,
    delete_records: Option<PurgatorySnapshot>,
    rebalance: Option<PurgatorySnapshot>,
    heartbeat: Option<PurgatorySnapshot>,
}

/// What `ctl groups` prints of `GET /api/state`.
#[derive(Debug, Deserialize)]
struct GroupsAnswer {
    now_ms: u64,
    groups: GroupsSnapshot,
    #[serde(default)]
    purgatories: GroupPurgatories,
}

/// The coordinator's purgatories, where the groups' delayed operations wait.
#[derive(Debug, Default, Deserialize)]
struct GroupPurgatories {
    rebalance: Option<PurgatorySnapshot>,
    heartbeat: Option<PurgatorySnapshot>,
}

/// `ctl groups --json`: the groups' part of `/api/state`, as the broker wrote it. A part
/// that is missing is `null`.
#[derive(Debug, Deserialize)]
struct GroupsJson {
    #[serde(default)]
    now_ms: Value,
    #[serde(default)]
    groups: Value,
    #[serde(default)]
    purgatories: GroupsJsonPurgatories,
}

/// The two purgatories of [`GroupsJson`], as the broker wrote them.
#[derive(Debug, Default, Deserialize)]
struct GroupsJsonPurgatories {
    #[serde(default)]
    rebalance: Value,
    #[serde(default)]
    heartbeat: Value,
}

/// The answer to `POST /api/followers/{id}/{action}`: the follower's status after it.
#[derive(Debug, Deserialize)]
struct FollowerDone {
    #[serde(default)]
    status: Option<FollowerStatus>,
    /// With several brokers: each replica fetcher of the broker.
    #[serde(default)]
    fetchers: Option<Vec<FollowerStatus>>,
}

/// The answer to `POST /api/brokers/{id}/{action}`.
#[derive(Debug, Deserialize)]
struct BrokerDone {
    changes: Vec<controller::Change>,
    brokers: Vec<BrokerLine>,
}

/// One broker in `GET /api/brokers`.
#[derive(Debug, Deserialize)]
struct BrokerLine {
    id: i32,
    alive: bool,
    listener: String,
}

/// The answer to `POST /api/clock/advance`.
#[derive(Debug, Deserialize)]
struct ClockAdvanced {
    now_ms: u64,
    fired: u64,
}

/// `ctl state`: prints the broker's state (or the raw JSON).
pub fn state(admin: &str, raw_json: bool) -> anyhow::Result<()> {
    let answer = client::call(admin, "GET", "/api/state", "", None)?;
    if raw_json {
        let json: Value = parse("GET", "/api/state", &answer)?;
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(());
    }
    let state: StateAnswer = parse("GET", "/api/state", &answer)?;
    print!("{}", render::state(&state));
    Ok(())
}

/// `ctl groups`: prints every consumer group (or the raw JSON of its part of the state).
pub fn groups(admin: &str, raw_json: bool) -> anyhow::Result<()> {
    let answer = client::call(admin, "GET", "/api/state", "", None)?;
    if raw_json {
        let state: GroupsJson = parse("GET", "/api/state", &answer)?;
        let part = serde_json::json!({
            "now_ms": state.now_ms,
            "groups": state.groups,
            "rebalance": state.purgatories.rebalance,
            "heartbeat": state.purgatories.heartbeat,
        });
        println!("{}", serde_json::to_string_pretty(&part)?);
        return Ok(());
    }
    let state: GroupsAnswer = parse("GET", "/api/state", &answer)?;
    print!("{}", render::groups(&state));
    Ok(())
}

/// `ctl transactions [--json]`: the transactional ids of `GET /api/state`, one line each.
pub fn transactions(admin: &str, raw_json: bool) -> anyhow::Result<()> {
    let answer = client::call(admin, "GET", "/api/state", "", None)?;
    let state: Value = parse("GET", "/api/state", &answer)?;
    let txns = state
        .get("transactions")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    if raw_json {
        println!("{}", serde_json::to_string_pretty(&txns)?);
        return Ok(());
    }
    print!("{}", render::transactions(&txns));
    Ok(())
}

/// `ctl follower ID ACTION [VALUE]`.
pub fn follower(
    admin: &str,
    token: Option<&str>,
    id: &str,
    action: &str,
    value: Option<&str>,
) -> anyhow::Result<()> {
    let needs_value = matches!(action, "delay" | "lag" | "max-bytes");
    if needs_value && value.is_none() {
        anyhow::bail!("`{action}` needs a value, e.g. `purgatory ctl follower {id} {action} 250`");
    }
    let done: FollowerDone = call_json(
        admin,
        "POST",
        &format!("/api/followers/{id}/{action}"),
        value.unwrap_or(""),
        token,
    )?;
    if let Some(fetchers) = done.fetchers {
        let states: Vec<String> = fetchers
            .iter()
            .map(|f| format!("{} ({})", f.bootstrap, render::wire_name(&f.state)))
            .collect();
        println!(
            "broker {id}: {action} done on its {} replica fetcher(s): {}",
            fetchers.len(),
            states.join(", ")
        );
        return Ok(());
    }
    let state = done
        .status
        .map_or_else(|| "?".to_string(), |s| render::wire_name(&s.state));
    println!("follower {id}: {action} done (now {state})");
    Ok(())
}

/// `ctl broker ID kill|restart|shutdown`: prints what the controller changed.
pub fn broker(admin: &str, token: Option<&str>, id: &str, action: &str) -> anyhow::Result<()> {
    let done: BrokerDone = call_json(
        admin,
        "POST",
        &format!("/api/brokers/{id}/{action}"),
        "",
        token,
    )?;
    print!("{}", render::broker_changes(id, action, &done.changes));
    for b in &done.brokers {
        let alive = if b.alive { "alive" } else { "dead" };
        println!("  broker {} {alive} {}", b.id, b.listener);
    }
    Ok(())
}

/// `ctl scenario FILE`: plays a scenario file's steps, each at its time from now, through
/// the admin API: follower steps as the follower controls, broker steps (`broker = N`) as
/// kill, shutdown and restart of that broker or as controls of its replica fetchers, and
/// fault steps as `POST /api/faults` (its rule checked before the first step plays) and
/// `DELETE /api/faults`. Returns once the last step is done (and `duration_ms` is over, if
/// the file sets it).
pub fn scenario(admin: &str, token: Option<&str>, path: &str) -> anyhow::Result<()> {
    use followersim::scenario::{run_timeline, Action, Target};
    let scenario = followersim::scenario::Scenario::from_file(path)?;
    for step in &scenario.steps {
        if let Action::AddFault(rule) = &step.action {
            purgatory::faults::RuleSpec::parse(rule)
                .map_err(|e| anyhow::anyhow!("{path}: the fault step at {} ms: {e}", step.at_ms))?;
        }
    }
    println!(
        "scenario \"{}\": {} step(s)",
        scenario.name,
        scenario.steps.len()
    );
    let start = std::time::Instant::now();
    let applier = |target: Target, action: &Action| -> anyhow::Result<()> {
        let (method, call, body) = match (target, action) {
            (Target::Faults, Action::AddFault(rule)) => {
                ("POST", "/api/faults".into(), rule.clone())
            }
            (Target::Faults, Action::ClearFaults) => {
                ("DELETE", "/api/faults".into(), String::new())
            }
            (Target::Faults, other) => anyhow::bail!("the fault rules cannot {other}"),
            (Target::Broker(id), Action::Kill) => {
                ("POST", format!("/api/brokers/{id}/kill"), String::new())
            }
            (Target::Broker(id), Action::Shutdown) => {
                ("POST", format!("/api/brokers/{id}/shutdown"), String::new())
            }
            (Target::Broker(id), Action::Restart) => {
                ("POST", format!("/api/brokers/{id}/restart"), String::new())
            }
            (Target::Broker(id) | Target::Follower(id), action) => {
                let (name, body) = match action {
                    Action::Delay(ms) => ("delay", ms.to_string()),
                    Action::Lag(ms) => ("lag", ms.to_string()),
                    Action::MaxBytes(b) => ("max-bytes", b.to_string()),
                    other => {
                        let name = match other {
                            Action::Pause => "pause",
                            Action::Resume => "resume",
                            Action::Crash => "crash",
                            Action::Restart => "restart",
                            _ => anyhow::bail!("{target} cannot {other}"),
                        };
                        (name, String::new())
                    }
                };
                ("POST", format!("/api/followers/{id}/{name}"), body)
            }
        };
        let _: Value = call_json(admin, method, &call, &body, token)?;
        println!(
            "t={:>6} ms  {target}: {action}",
            start.elapsed().as_millis()
        );
        Ok(())
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    runtime.block_on(run_timeline(&scenario, &applier))?;
    println!("scenario \"{}\" done", scenario.name);
    Ok(())
}

/// One rule of `GET /api/faults`: the fields `ctl fault list` prints; the rest of the rule
/// as it was given is printed as its keys.
#[derive(Debug, Deserialize)]
struct FaultLine {
    id: u64,
    hits: u64,
    matched: u64,
    does: String,
    #[serde(flatten)]
    given: serde_json::Map<String, Value>,
}

/// `ctl fault add JSON | list | clear [ID]`.
pub fn fault(
    admin: &str,
    token: Option<&str>,
    action: &str,
    value: Option<&str>,
    raw_json: bool,
) -> anyhow::Result<()> {
    match (action, value) {
        ("add", Some(rule)) => {
            let added: Value = call_json(admin, "POST", "/api/faults", rule, token)?;
            println!("fault rule {} added", added["id"]);
        }
        ("add", None) => anyhow::bail!(
            "`fault add` needs a rule, e.g. purgatory ctl fault add '{{\"api\": \"Produce\", \"error\": \"NOT_LEADER_OR_FOLLOWER\", \"times\": 3}}'"
        ),
        ("list", _) => {
            let answer = client::call(admin, "GET", "/api/faults", "", token)?;
            if raw_json {
                let json: Value = parse("GET", "/api/faults", &answer)?;
                println!("{}", serde_json::to_string_pretty(&json)?);
                return Ok(());
            }
            let rules: Vec<FaultLine> = parse("GET", "/api/faults", &answer)?;
            print!("{}", render::faults(&rules));
        }
        ("clear", Some(id)) => {
            let _: Value = call_json(admin, "DELETE", &format!("/api/faults/{id}"), "", token)?;
            println!("fault rule {id} removed");
        }
        ("clear", None) => {
            let removed: Value = call_json(admin, "DELETE", "/api/faults", "", token)?;
            println!("{} fault rule(s) removed", removed["removed"]);
        }
        (other, _) => anyhow::bail!("unknown fault action {other:?}: add, list or clear"),
    }
    Ok(())
}

/// `ctl clock advance MS`.
pub fn advance_clock(admin: &str, token: Option<&str>, ms: u64) -> anyhow::Result<()> {
    let result: ClockAdvanced =
        call_json(admin, "POST", "/api/clock/advance", &ms.to_string(), token)?;
    println!(
        "clock advanced by {ms} ms: now {} ms, {} timer task(s) fired",
        result.now_ms, result.fired
    );
    Ok(())
}
