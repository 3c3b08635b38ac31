//! Scenarios: timelines of follower faults, read from TOML and played against followers.
//!
//! # The Kafka concept
//!
//! Whether an `acks=all` produce is answered in a millisecond, after a second, or with
//! `REQUEST_TIMED_OUT` depends entirely on what the in-sync followers do: a slow follower
//! delays the high watermark, a paused one freezes it until the leader drops it from the
//! ISR (`replica.lag.time.max.ms`), and with both paused and `min.insync.replicas = 2`
//! produces time out, then are refused with `NOT_ENOUGH_REPLICAS` once the ISR has shrunk.
//! A scenario scripts such a story so it can be replayed and watched.
//!
//! # File format
//!
//! ```toml
//! name = "paused follower"
//! description = "Follower 3 stops fetching for 55 s."
//! duration_ms = 90000          # optional; without it the scenario runs until stopped
//!
//! [broker]                     # optional: broker settings the story assumes (printed)
//! "replica.lag.time.max.ms" = 30000
//!
//! [[follower]]
//! id = 2
//! [[follower]]
//! id = 3
//! fetch_delay_ms = 0           # optional starting knobs: fetch_delay_ms, max_bytes, lag_ms
//!
//! [[step]]
//! at_ms = 5000                 # from the start of the scenario
//! follower = 3
//! action = "pause"             # pause | resume | crash | restart | delay | max_bytes | lag
//! note = "why, in plain words" # optional, logged with the step
//!
//! [[step]]
//! at_ms = 60000
//! follower = 3
//! action = "delay"
//! value = 250                  # required by delay (ms), max_bytes (bytes), lag (ms)
//! ```
//!
//! With several brokers (`purgatory serve --brokers N`), a step can name a `broker`
//! instead of a `follower`: `kill`, `shutdown` (controlled) and `restart` act on the
//! broker, and `pause`, `resume`, `delay` and `lag` on all of its replica fetchers.
//! `purgatory ctl scenario FILE` plays such a file through the admin API:
//!
//! ```toml
//! [[step]]
//! at_ms = 5000
//! broker = 1
//! action = "kill"              # kill | shutdown | restart | pause | resume | delay | lag
//! ```
//!
//! A step may also arm or clear the broker's fault rules (`POST /api/faults`): it names
//! neither a follower nor a broker, and carries the rule as an inline table, with the keys
//! and values `POST /api/faults` takes. Such a step needs the broker, so it plays from the
//! page, `POST /api/scenarios/run` or `purgatory ctl scenario FILE`:
//!
//! ```toml
//! [[step]]
//! at_ms = 2000
//! action = "fault"
//! fault = { api = "Produce", topic = "orders", error = "NOT_LEADER_OR_FOLLOWER", times = 3 }
//!
//! [[step]]
//! at_ms = 9000
//! action = "clear_faults"      # removes every rule, armed by the scenario or not
//! ```
//!
//! Times and durations are bounded ([`MAX_SCENARIO_MS`], [`MAX_FOLLOWER_WAIT_MS`]): a file
//! past them is refused with the reason, not played for centuries.
//!
//! [`run_scenario`] spawns the followers itself; [`run_timeline`] plays the steps through
//! any [`StepApplier`], so a broker can run the same files against followers it embeds.

use crate::config::FollowerConfig;
use crate::follower::{Follower, FollowerHandle, FollowerStatus};
use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use tokio::time::{sleep_until, Instant};
use tracing::{error, info};

/// The latest time a step may have, and the longest `duration_ms`: 7 days.
pub const MAX_SCENARIO_MS: u64 = 7 * 24 * 3_600_000;

/// The longest fetch delay or lag a follower can be given: one hour. Past it a follower is
/// stopped in all but name, and `pause` says that plainly.
pub const MAX_FOLLOWER_WAIT_MS: u64 = 3_600_000;

/// `ms` as a follower's fetch delay or lag, or why it is refused: it must be 0 to
/// [`MAX_FOLLOWER_WAIT_MS`].
pub fn follower_wait_ms(what: &str, ms: i64) -> Result<u64> {
    match u64::try_from(ms) {
        Ok(ms) if ms <= MAX_FOLLOWER_WAIT_MS => Ok(ms),
        _ => bail!("{what} {ms} ms is not between 0 and {MAX_FOLLOWER_WAIT_MS} (one hour)"),
    }
}

/// One thing done at a point of the timeline: to a follower, a broker, or the broker's
/// fault rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop fetching, keep the connection ([`FollowerHandle::pause`]).
    Pause,
    /// Fetch again ([`FollowerHandle::resume`]).
    Resume,
    /// Drop the connection and all data ([`FollowerHandle::crash`]).
    Crash,
    /// Reconnect and catch up ([`FollowerHandle::restart`]).
    Restart,
    /// Set the delay before each fetch, in ms ([`FollowerHandle::set_fetch_delay_ms`]).
    Delay(u64),
    /// Set the fetch `max_bytes` ([`FollowerHandle::set_max_bytes`]).
    MaxBytes(i32),
    /// Set "stay N ms behind" ([`FollowerHandle::set_lag_ms`]).
    Lag(u64),
    /// A broker of a cluster crashes, keeping its log (broker steps only).
    Kill,
    /// A broker of a cluster shuts down cleanly (broker steps only).
    Shutdown,
    /// Arm a fault rule: its JSON, as `POST /api/faults` takes it (fault steps only).
    AddFault(String),
    /// Remove every fault rule (fault steps only).
    ClearFaults,
}

/// What a step acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A follower, by replica id.
    Follower(i32),
    /// A broker of a cluster, by broker id.
    Broker(i32),
    /// The broker's fault rules (`/api/faults`), process-wide.
    Faults,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Follower(id) => write!(f, "follower {id}"),
            Target::Broker(id) => write!(f, "broker {id}"),
            Target::Faults => f.write_str("fault rules"),
        }
    }
}

impl Action {
    /// Parses the TOML form: `action` plus the `value` some actions need.
    pub fn parse(action: &str, value: Option<i64>) -> Result<Action> {
        let needs_value = |what: &str| -> Result<i64> {
            value.with_context(|| format!("action \"{action}\" needs a `value` ({what})"))
        };
        let wait = |v: i64| follower_wait_ms(&format!("action \"{action}\": value"), v);
        let a = match action {
            "pause" => Action::Pause,
            "resume" => Action::Resume,
            "crash" => Action::Crash,
            "restart" => Action::Restart,
            "delay" => Action::Delay(wait(needs_value("milliseconds")?)?),
            "lag" => Action::Lag(wait(needs_value("milliseconds")?)?),
            "kill" => Action::Kill,
            "shutdown" => Action::Shutdown,
            "max_bytes" => {
                let v = needs_value("bytes")?;
                match i32::try_from(v) {
                    Ok(b) if b >= 1 => Action::MaxBytes(b),
                    _ => bail!("action \"max_bytes\": value {v} is not between 1 and {}", i32::MAX),
                }
            }
            "clear_faults" => Action::ClearFaults,
            "fault" => bail!("action \"fault\" needs a `fault` table: the rule, as POST /api/faults takes it"),
            other => bail!(
                "unknown action \"{other}\" (expected pause, resume, crash, restart, delay, max_bytes or lag; for a broker also kill or shutdown; for the fault rules fault or clear_faults)"
            ),
        };
        if value.is_some()
            && matches!(
                a,
                Action::Pause
                    | Action::Resume
                    | Action::Crash
                    | Action::Restart
                    | Action::Kill
                    | Action::Shutdown
                    | Action::ClearFaults
            )
        {
            bail!("action \"{action}\" takes no `value`");
        }
        Ok(a)
    }

    /// Parses a fault step's `fault` table into the rule's JSON, as `POST /api/faults`
    /// takes it. The broker validates the rule itself; here it only has to be a table.
    pub fn fault(table: &toml::Value) -> Result<Action> {
        if !table.is_table() {
            bail!("`fault` must be a table of the rule's keys, e.g. fault = {{ api = \"Produce\", error = \"NOT_LEADER_OR_FOLLOWER\", times = 3 }}");
        }
        let json = serde_json::to_string(table).context("the `fault` table as JSON")?;
        Ok(Action::AddFault(json))
    }

    /// Whether the action can be done to `target`: kill and shutdown only to a broker,
    /// crash and max_bytes only to a follower, fault steps only to the fault rules.
    pub fn applies_to(&self, target: Target) -> bool {
        match self {
            Action::AddFault(_) | Action::ClearFaults => target == Target::Faults,
            _ if target == Target::Faults => false,
            Action::Kill | Action::Shutdown => matches!(target, Target::Broker(_)),
            Action::Crash | Action::MaxBytes(_) => matches!(target, Target::Follower(_)),
            _ => true,
        }
    }

    /// Applies the action to a follower through its handle. Broker and fault actions do
    /// nothing to a follower: [`Scenario::parse`] refuses them on one.
    pub fn apply_to(&self, follower: &FollowerHandle) {
        match *self {
            Action::Pause => follower.pause(),
            Action::Resume => follower.resume(),
            Action::Crash => follower.crash(),
            Action::Restart => follower.restart(),
            Action::Delay(ms) => follower.set_fetch_delay_ms(ms),
            Action::MaxBytes(b) => follower.set_max_bytes(b),
            Action::Lag(ms) => follower.set_lag_ms(ms),
            Action::Kill | Action::Shutdown | Action::AddFault(_) | Action::ClearFaults => {}
        }
    }

    /// What the action does, in plain words.
    pub fn describe(&self) -> String {
        match *self {
            Action::Pause => "pause: stop fetching but keep the connection open".to_owned(),
            Action::Resume => "resume: fetch again from its log end offset".to_owned(),
            Action::Crash => {
                "crash: drop the connection and everything it had replicated".to_owned()
            }
            Action::Restart => {
                "restart: reconnect and catch up from its own log end offset".to_owned()
            }
            Action::Delay(0) => "delay 0: fetch again as soon as each response arrives".to_owned(),
            Action::Delay(ms) => format!("delay {ms} ms: sleep {ms} ms before every fetch"),
            Action::MaxBytes(b) => format!("max_bytes {b}: ask for at most {b} bytes per fetch"),
            Action::Lag(0) => "lag 0: stop trailing the leader".to_owned(),
            Action::Lag(ms) => {
                format!("lag {ms} ms: hold fetched data {ms} ms before appending it")
            }
            Action::Kill => {
                "kill: crash the broker (its log stays); the controller elects new leaders"
                    .to_owned()
            }
            Action::Shutdown => {
                "shutdown: move its leaderships away, then stop the broker".to_owned()
            }
            Action::AddFault(ref rule) => format!("fault: arm the rule {rule}"),
            Action::ClearFaults => "clear_faults: remove every fault rule".to_owned(),
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Pause => f.write_str("pause"),
            Action::Resume => f.write_str("resume"),
            Action::Crash => f.write_str("crash"),
            Action::Restart => f.write_str("restart"),
            Action::Delay(ms) => write!(f, "delay {ms}"),
            Action::MaxBytes(b) => write!(f, "max_bytes {b}"),
            Action::Lag(ms) => write!(f, "lag {ms}"),
            Action::Kill => f.write_str("kill"),
            Action::Shutdown => f.write_str("shutdown"),
            Action::AddFault(ref rule) => write!(f, "fault {rule}"),
            Action::ClearFaults => f.write_str("clear_faults"),
        }
    }
}

/// One step of a scenario's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// When, in ms from the start of the scenario.
    pub at_ms: u64,
    /// Which follower or broker.
    pub target: Target,
    /// What to do.
    pub action: Action,
    /// Why, in plain words (optional; logged with the step).
    pub note: Option<String>,
}

/// A follower taking part in a scenario, with optional starting knobs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScenarioFollower {
    /// Replica id.
    pub id: i32,
    /// Starting fetch delay (ms).
    pub fetch_delay_ms: Option<u64>,
    /// Starting fetch `max_bytes`.
    pub max_bytes: Option<i32>,
    /// Starting "stay N ms behind" (ms).
    pub lag_ms: Option<u64>,
}

/// A parsed, validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// What the scenario shows.
    pub description: String,
    /// How long it runs; `None` runs until stopped.
    pub duration_ms: Option<u64>,
    /// Broker settings the scenario assumes (informational, e.g. `min.insync.replicas`).
    pub broker: BTreeMap<String, toml::Value>,
    /// The followers, in file order.
    pub followers: Vec<ScenarioFollower>,
    /// The steps, sorted by time (steps at the same time keep their file order).
    pub steps: Vec<Step>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: String,
    duration_ms: Option<u64>,
    #[serde(default)]
    broker: BTreeMap<String, toml::Value>,
    #[serde(default, rename = "follower")]
    followers: Vec<RawFollower>,
    #[serde(default, rename = "step")]
    steps: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFollower {
    id: i32,
    fetch_delay_ms: Option<u64>,
    max_bytes: Option<i32>,
    lag_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    at_ms: u64,
    follower: Option<i32>,
    broker: Option<i32>,
    action: String,
    value: Option<i64>,
    fault: Option<toml::Value>,
    note: Option<String>,
}

impl Scenario {
    /// Parses and validates a scenario from TOML text.
    pub fn parse(text: &str) -> Result<Scenario> {
        let raw: RawScenario = toml::from_str(text).context("invalid scenario TOML")?;
        if raw.followers.is_empty() && raw.steps.iter().any(|s| s.follower.is_some()) {
            bail!("scenario \"{}\" declares no [[follower]]", raw.name);
        }
        if raw.followers.is_empty() && raw.steps.is_empty() {
            bail!(
                "scenario \"{}\" declares no [[follower]] and no [[step]]",
                raw.name
            );
        }
        if let Some(d) = raw.duration_ms.filter(|&d| d > MAX_SCENARIO_MS) {
            bail!("duration_ms {d} is past the longest scenario, {MAX_SCENARIO_MS} ms (7 days)");
        }
        let mut ids = BTreeSet::new();
        let mut followers = Vec::new();
        for f in raw.followers {
            if f.id < 0 {
                bail!("follower id {} is negative", f.id);
            }
            if !ids.insert(f.id) {
                bail!("follower {} is declared twice", f.id);
            }
            if let Some(b) = f.max_bytes {
                if b < 1 {
                    bail!("follower {}: max_bytes {b} must be at least 1", f.id);
                }
            }
            for (what, ms) in [("fetch_delay_ms", f.fetch_delay_ms), ("lag_ms", f.lag_ms)] {
                if let Some(ms) = ms {
                    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
                    follower_wait_ms(&format!("follower {}: {what}", f.id), ms)?;
                }
            }
            followers.push(ScenarioFollower {
                id: f.id,
                fetch_delay_ms: f.fetch_delay_ms,
                max_bytes: f.max_bytes,
                lag_ms: f.lag_ms,
            });
        }
        let mut steps = Vec::new();
        for (i, s) in raw.steps.into_iter().enumerate() {
            let n = i + 1;
            if s.at_ms > MAX_SCENARIO_MS {
                bail!(
                    "step {n} is at {} ms, past the longest scenario, {MAX_SCENARIO_MS} ms (7 days)",
                    s.at_ms
                );
            }
            let for_faults = matches!(s.action.as_str(), "fault" | "clear_faults");
            let target = match (s.follower, s.broker) {
                (None, None) if for_faults => Target::Faults,
                (Some(id), None) if !for_faults => Target::Follower(id),
                (None, Some(id)) if !for_faults => Target::Broker(id),
                _ if for_faults => bail!(
                    "step {n} (at {} ms): a {} step acts on the broker's fault rules, so it names neither `follower` nor `broker` (a rule matches a broker with its own `broker` key)",
                    s.at_ms,
                    s.action
                ),
                _ => bail!(
                    "step {n} (at {} ms) must name exactly one of `follower` and `broker`",
                    s.at_ms
                ),
            };
            if let Target::Follower(id) = target {
                if !ids.contains(&id) {
                    bail!(
                        "step {n} (at {} ms) targets follower {id}, which is not a declared [[follower]]",
                        s.at_ms
                    );
                }
            }
            if let Some(d) = raw.duration_ms {
                if s.at_ms > d {
                    bail!(
                        "step {n} is at {} ms, after the scenario ends (duration_ms = {d})",
                        s.at_ms
                    );
                }
            }
            let action = match (&s.fault, s.action.as_str()) {
                (Some(table), "fault") if s.value.is_none() => Action::fault(table),
                (Some(_), "fault") => Err(anyhow::anyhow!("action \"fault\" takes no `value`")),
                (Some(_), other) => Err(anyhow::anyhow!(
                    "action \"{other}\" takes no `fault` table (only action = \"fault\" does)"
                )),
                (None, action) => Action::parse(action, s.value),
            }
            .with_context(|| format!("step {n}"))?;
            if !action.applies_to(target) {
                bail!("step {n}: {target} cannot {action}");
            }
            steps.push(Step {
                at_ms: s.at_ms,
                target,
                action,
                note: s.note,
            });
        }
        steps.sort_by_key(|s| s.at_ms); // stable: same-time steps keep file order
        Ok(Scenario {
            name: raw.name,
            description: raw.description,
            duration_ms: raw.duration_ms,
            broker: raw.broker,
            followers,
            steps,
        })
    }

    /// Reads and parses a scenario file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Scenario> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading scenario {}", path.display()))?;
        Scenario::parse(&text).with_context(|| format!("in scenario {}", path.display()))
    }

    /// A scenario with healthy followers `ids`, no steps, no end: plain mode.
    pub fn healthy(ids: &[i32]) -> Scenario {
        Scenario {
            name: "healthy".to_owned(),
            description: "Followers that fetch as fast as they can.".to_owned(),
            duration_ms: None,
            broker: BTreeMap::new(),
            followers: ids
                .iter()
                .map(|&id| ScenarioFollower {
                    id,
                    ..Default::default()
                })
                .collect(),
            steps: Vec::new(),
        }
    }

    /// The declared follower ids, in file order.
    pub fn follower_ids(&self) -> Vec<i32> {
        self.followers.iter().map(|f| f.id).collect()
    }

    /// Renames the followers: the i-th declared follower becomes `ids[i]`, in its steps too.
    /// `ids` must have one distinct id per declared follower.
    pub fn with_replica_ids(&self, ids: &[i32]) -> Result<Scenario> {
        if ids.len() != self.followers.len() {
            bail!(
                "scenario \"{}\" has {} follower(s) ({:?}) but {} replica id(s) were given",
                self.name,
                self.followers.len(),
                self.follower_ids(),
                ids.len()
            );
        }
        if ids.iter().collect::<BTreeSet<_>>().len() != ids.len() {
            bail!("replica ids {ids:?} are not distinct");
        }
        let map: BTreeMap<i32, i32> = self
            .follower_ids()
            .into_iter()
            .zip(ids.iter().copied())
            .collect();
        let mut s = self.clone();
        for f in &mut s.followers {
            f.id = map[&f.id];
        }
        for step in &mut s.steps {
            if let Target::Follower(id) = step.target {
                step.target = Target::Follower(map[&id]);
            }
        }
        Ok(s)
    }

    /// The config of follower `f` of this scenario: `base` with its id and starting knobs.
    pub fn follower_config(&self, f: &ScenarioFollower, base: &FollowerConfig) -> FollowerConfig {
        let mut c = base.clone();
        c.replica_id = f.id;
        if let Some(ms) = f.fetch_delay_ms {
            c.fetch_delay_ms = ms;
        }
        if let Some(b) = f.max_bytes {
            c.fetch_max_bytes = b;
        }
        if let Some(ms) = f.lag_ms {
            c.lag_ms = ms;
        }
        c
    }

    /// Logs the scenario's story: description, assumed broker settings, timeline.
    pub fn log_summary(&self) {
        info!("scenario \"{}\": {}", self.name, self.description.trim());
        for (k, v) in &self.broker {
            info!("  expects the broker to run with {k} = {v}");
        }
        for f in &self.followers {
            info!(
                "  follower {} starts with fetch delay {} ms, lag {} ms{}",
                f.id,
                f.fetch_delay_ms.unwrap_or(0),
                f.lag_ms.unwrap_or(0),
                f.max_bytes
                    .map(|b| format!(", max_bytes {b}"))
                    .unwrap_or_default()
            );
        }
        for s in &self.steps {
            info!("  at {}: {} -> {}", fmt_ms(s.at_ms), s.target, s.action);
        }
        match self.duration_ms {
            Some(d) => info!("  ends at {}", fmt_ms(d)),
            None => info!("  runs until stopped"),
        }
    }
}

fn fmt_ms(ms: u64) -> String {
    format!("{}.{:03} s", ms / 1000, ms % 1000)
}

/// Something that can apply a scenario step to a follower: the handles of spawned followers,
/// a broker's embedded followers, or a test double.
pub trait StepApplier {
    /// Applies `action` to `target`; fails if there is no such follower or broker.
    fn apply(&self, target: Target, action: &Action) -> Result<()>;
}

/// The id of a follower step; a broker or fault step fails: followers alone have neither
/// brokers nor fault rules.
fn follower_id(target: Target) -> Result<i32> {
    match target {
        Target::Follower(id) => Ok(id),
        Target::Broker(id) => bail!(
            "a step for broker {id} needs a cluster: play the scenario with `purgatory ctl scenario FILE` against `purgatory serve --brokers N`"
        ),
        Target::Faults => bail!(
            "a fault step needs the broker's fault rules: play the scenario with `purgatory ctl scenario FILE` or from the broker's page"
        ),
    }
}

impl StepApplier for BTreeMap<i32, FollowerHandle> {
    fn apply(&self, target: Target, action: &Action) -> Result<()> {
        let follower = follower_id(target)?;
        let h = self
            .get(&follower)
            .with_context(|| format!("no follower with replica id {follower}"))?;
        action.apply_to(h);
        Ok(())
    }
}

impl StepApplier for [FollowerHandle] {
    fn apply(&self, target: Target, action: &Action) -> Result<()> {
        let follower = follower_id(target)?;
        let h = self
            .iter()
            .find(|h| h.replica_id() == follower)
            .with_context(|| format!("no follower with replica id {follower}"))?;
        action.apply_to(h);
        Ok(())
    }
}

impl<F> StepApplier for F
where
    F: Fn(Target, &Action) -> Result<()>,
{
    fn apply(&self, target: Target, action: &Action) -> Result<()> {
        self(target, action)
    }
}

/// Plays the scenario's steps, each at its time (counted from the call), through `applier`,
/// then waits out `duration_ms` if there is one. Returns after the last step otherwise.
///
/// Stops at the first step that cannot be applied (an unknown follower).
pub async fn run_timeline<A>(scenario: &Scenario, applier: &A) -> Result<()>
where
    A: StepApplier + ?Sized,
{
    let start = Instant::now();
    for step in &scenario.steps {
        sleep_until(crate::instant_after(start, step.at_ms)).await;
        match &step.note {
            Some(note) => info!(
                "t={}: {} -> {} ({})",
                fmt_ms(step.at_ms),
                step.target,
                step.action.describe(),
                note.trim()
            ),
            None => info!(
                "t={}: {} -> {}",
                fmt_ms(step.at_ms),
                step.target,
                step.action.describe()
            ),
        }
        if let Err(e) = applier.apply(step.target, &step.action) {
            error!("t={}: could not apply the step: {e:#}", fmt_ms(step.at_ms));
            return Err(e.context(format!("step at {} ms", step.at_ms)));
        }
    }
    if let Some(d) = scenario.duration_ms {
        sleep_until(crate::instant_after(start, d)).await;
        info!("t={}: scenario \"{}\" is over", fmt_ms(d), scenario.name);
    }
    Ok(())
}

/// Spawns the scenario's followers from `base` (see [`Scenario::follower_config`]).
pub fn spawn_followers(
    scenario: &Scenario,
    base: &FollowerConfig,
) -> BTreeMap<i32, FollowerHandle> {
    scenario
        .followers
        .iter()
        .map(|f| (f.id, Follower::spawn(scenario.follower_config(f, base))))
        .collect()
}

/// Signals every follower to stop when dropped (so a cancelled scenario cleans up).
struct StopOnDrop(BTreeMap<i32, FollowerHandle>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for h in self.0.values() {
            h.signal_shutdown();
        }
    }
}

/// Runs a whole scenario against the leader at `bootstrap`: spawns its followers (default
/// config), plays the timeline, and at the end shuts the followers down and returns their
/// final status. Without `duration_ms` it runs until the future is dropped, which also
/// stops the followers.
pub async fn run_scenario(scenario: &Scenario, bootstrap: &str) -> Result<Vec<FollowerStatus>> {
    run_scenario_with(scenario, &FollowerConfig::new(2, bootstrap)).await
}

/// [`run_scenario`] with a base follower config (the replica id is taken from the scenario).
pub async fn run_scenario_with(
    scenario: &Scenario,
    base: &FollowerConfig,
) -> Result<Vec<FollowerStatus>> {
    let followers = StopOnDrop(spawn_followers(scenario, base));
    run_timeline(scenario, &followers.0).await?;
    if scenario.duration_ms.is_none() {
        std::future::pending::<()>().await;
    }
    let statuses = followers.0.values().map(FollowerHandle::status).collect();
    for h in followers.0.values() {
        h.shutdown().await;
    }
    Ok(statuses)
}

#[cfg(test)]
mod tests;
