//! Scenario files played by the broker itself, from the page or over HTTP.
//!
//! - `GET /api/scenarios`: the scenarios built into the binary (`config/scenarios/`), each
//!   with its name, description, whether it is for several brokers, and its steps.
//! - `POST /api/scenarios/run?name=leader-killed` plays a built-in one; with a TOML body
//!   instead, that file. It answers at once, with the steps it will play; the steps then
//!   run at their times on the admin listener's runtime, each as the matching control
//!   does it (`/api/followers/...`, `/api/brokers/...`), and each is logged. One scenario
//!   plays at a time (409 while one runs).
//!
//! A scenario for several brokers (its steps name `broker = N`) needs a cluster, and one
//! for followers needs embedded followers; either is refused with 409 otherwise. Fault
//! steps (`action = "fault"`, `"clear_faults"`) arm and clear the broker's fault rules, as
//! `POST /api/faults` does, and play with either; their rules are checked before the
//! scenario starts, so a bad one is a 400 rather than a step that fails halfway.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use followersim::scenario::{run_timeline, Action, Scenario, Target};
use serde_json::{json, Value};
use tracing::{info, warn};

use super::{authorize, error, AdminState};
use crate::faults::RuleSpec;

/// The scenario files built into the binary, by name (file name without `.toml`).
const BUILT_IN: &[(&str, &str)] = &[
    (
        "leader-killed",
        include_str!("../../../../config/scenarios/leader-killed.toml"),
    ),
    (
        "paused-follower",
        include_str!("../../../../config/scenarios/paused-follower.toml"),
    ),
    (
        "both-paused",
        include_str!("../../../../config/scenarios/both-paused.toml"),
    ),
    (
        "crash-restart",
        include_str!("../../../../config/scenarios/crash-restart.toml"),
    ),
    (
        "slow-follower",
        include_str!("../../../../config/scenarios/slow-follower.toml"),
    ),
];

fn for_cluster(s: &Scenario) -> bool {
    s.steps
        .iter()
        .any(|st| matches!(st.target, Target::Broker(_)))
}

fn for_followers(s: &Scenario) -> bool {
    s.steps
        .iter()
        .any(|st| matches!(st.target, Target::Follower(_)))
}

/// Checks every fault step's rule as `POST /api/faults` would: the first bad one, with its
/// step's time, is the answer.
pub(crate) fn check_fault_steps(s: &Scenario) -> Result<(), String> {
    for step in &s.steps {
        if let Action::AddFault(rule) = &step.action {
            RuleSpec::parse(rule)
                .map_err(|e| format!("the fault step at {} ms: {e}", step.at_ms))?;
        }
    }
    Ok(())
}

fn describe(name: &str, s: &Scenario) -> Value {
    json!({
        "name": name,
        "title": s.name,
        "description": s.description.trim(),
        "brokers": for_cluster(s),
        "duration_ms": s.duration_ms,
        "steps": s.steps.iter().map(|st| json!({
            "at_ms": st.at_ms,
            "target": st.target.to_string(),
            "action": st.action.to_string(),
            "note": st.note,
        })).collect::<Vec<_>>(),
    })
}

pub(super) async fn get_scenarios() -> Json<Value> {
    let list: Vec<Value> = BUILT_IN
        .iter()
        .filter_map(|(name, text)| Scenario::parse(text).ok().map(|s| describe(name, &s)))
        .collect();
    Json(Value::Array(list))
}

pub(super) async fn post_run(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let (name, parsed) = match query.get("name") {
        Some(name) => match BUILT_IN.iter().find(|(n, _)| n == name) {
            Some((name, text)) => (name.to_string(), Scenario::parse(text)),
            None => {
                let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
                return error(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no built-in scenario {name:?}; built in: {}",
                        names.join(", ")
                    ),
                );
            }
        },
        None if body.trim().is_empty() => {
            return error(
                StatusCode::BAD_REQUEST,
                "give ?name=<built-in scenario> or a scenario TOML as the body",
            )
        }
        None => ("posted".to_string(), Scenario::parse(&body)),
    };
    let scenario = match parsed {
        Ok(s) => s,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("{e:#}")),
    };
    if let Err(e) = check_fault_steps(&scenario) {
        return error(StatusCode::BAD_REQUEST, e);
    }
    let cluster = s.cluster.clone();
    match (for_cluster(&scenario), &cluster) {
        (true, None) => {
            return error(
                StatusCode::CONFLICT,
                "this scenario kills and restarts brokers: start several with --brokers N",
            )
        }
        (false, Some(_)) if for_followers(&scenario) => {
            return error(
                StatusCode::CONFLICT,
                "this scenario steers simulated followers: run it against `purgatory serve` (one leader and its followers)",
            )
        }
        _ => {}
    }
    let playing = s.scenario_playing.clone();
    if playing.swap(true, Ordering::AcqRel) {
        return error(StatusCode::CONFLICT, "a scenario is playing already");
    }
    let answer = describe(&name, &scenario);
    info!(target: "purgatory::admin", scenario = %scenario.name, steps = scenario.steps.len(), %peer, "scenario started");
    let followers = s.followers.clone();
    let faults = s.rm.faults.clone();
    tokio::spawn(async move {
        let applier = |target: Target, action: &Action| -> anyhow::Result<()> {
            match (target, &cluster) {
                (Target::Faults, _) => {
                    match action {
                        Action::AddFault(rule) => {
                            let id = faults.add_json(rule).map_err(anyhow::Error::msg)?;
                            info!(target: "purgatory::admin", id, %rule, "scenario armed a fault rule");
                        }
                        Action::ClearFaults => {
                            let removed = faults.clear();
                            info!(target: "purgatory::admin", removed, "scenario cleared the fault rules");
                        }
                        other => anyhow::bail!("the fault rules cannot {other}"),
                    }
                    Ok(())
                }
                (Target::Broker(id), Some(cluster)) => {
                    let cluster = cluster.clone();
                    let action = action.clone();
                    // The lifecycle calls run on the brokers' runtime; the timeline goes on.
                    tokio::spawn(async move {
                        let done = match &action {
                            Action::Kill => cluster.kill(id).await.map(drop),
                            Action::Shutdown => cluster.controlled_shutdown(id).await.map(drop),
                            Action::Restart => cluster.restart(id).await.map(drop),
                            other => {
                                for f in cluster.fetchers(id).unwrap_or_default() {
                                    other.apply_to(&f);
                                }
                                Ok(())
                            }
                        };
                        if let Err(e) = done {
                            warn!(broker = id, action = %action, "scenario step refused: {e}");
                        }
                    });
                    Ok(())
                }
                (Target::Follower(id), None) => {
                    let f = followers
                        .get(id)
                        .ok_or_else(|| anyhow::anyhow!("no embedded follower {id}"))?;
                    action.apply_to(&f);
                    Ok(())
                }
                (target, _) => anyhow::bail!("{target} is not here"),
            }
        };
        if let Err(e) = run_timeline(&scenario, &applier).await {
            warn!("scenario \"{}\" stopped: {e:#}", scenario.name);
        }
        info!(target: "purgatory::admin", scenario = %scenario.name, "scenario over");
        playing.store(false, Ordering::Release);
    });
    (StatusCode::ACCEPTED, Json(answer)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_scenario_parses() {
        for (name, text) in BUILT_IN {
            let s = Scenario::parse(text).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(for_cluster(&s), *name == "leader-killed", "{name}");
        }
    }
}
