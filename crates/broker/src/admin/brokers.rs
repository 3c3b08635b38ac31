//! The brokers of a cluster (`--brokers N`) over HTTP: who is alive, each partition as
//! the controller and each replica see it, and the calls that kill, restart and shut
//! down a broker.
//!
//! - `GET /api/brokers`: `[{id, alive, listener, incarnation}]`.
//! - `POST /api/brokers/{id}/kill`: a crash that keeps the log (see
//!   [`crate::cluster`]'s lifecycle); `restart` brings it back as a follower; `shutdown`
//!   is a controlled shutdown. Each answers the controller's changes, in order: the
//!   elections, the ISR changes, the leader epochs.
//!
//! In `/api/state`, each partition is the snapshot of the broker that leads it (of its
//! first replica while it has no leader), with `leader`, `leader_epoch`, `replicas` and
//! `isr` as the controller has them, and `replica_logs`: every replica's own log end,
//! high watermark, role and epoch, which is where a truncation shows.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tracing::info;

use super::{authorize, error, wait_arg, AdminState};
use crate::cluster::{Cluster, LifecycleError};
use crate::replica_manager::ReplicaManager;

/// Every broker of `cluster`.
pub(super) fn brokers_json(cluster: &Cluster) -> Value {
    let snapshot = cluster.snapshot();
    let brokers: Vec<Value> = snapshot
        .brokers
        .iter()
        .map(|b| {
            let listener = cluster
                .broker(b.id)
                .map(|broker| broker.local_addr().to_string())
                .unwrap_or_else(|| b.address.clone());
            json!({
                "id": b.id,
                "alive": b.alive,
                "listener": listener,
                "incarnation": b.incarnation,
            })
        })
        .collect();
    Value::Array(brokers)
}

/// The one broker of a single-broker process.
pub(super) fn single_broker_json(rm: &ReplicaManager) -> Value {
    let (host, port) = crate::handlers::metadata::advertised(rm);
    json!([{
        "id": rm.config.broker_id,
        "alive": true,
        "listener": format!("{host}:{port}"),
        "incarnation": 0,
    }])
}

/// Every partition of `cluster`, from its leader's log and the controller.
pub(super) fn partitions_json(cluster: &Cluster) -> Value {
    let snapshot = cluster.snapshot();
    let mut out = Vec::new();
    for topic in &snapshot.topics {
        for p in &topic.partitions {
            let state = &p.state;
            let shown_by = if state.leader >= 0 {
                state.leader
            } else {
                state.replicas.first().copied().unwrap_or(-1)
            };
            let local = |id: i32| {
                cluster
                    .broker(id)
                    .and_then(|b| b.replica_manager().partition(&topic.name, p.partition))
            };
            let Some(handle) = local(shown_by) else {
                continue;
            };
            let mut value = serde_json::to_value(handle.lock().snapshot()).unwrap_or(Value::Null);
            let replica_logs: Vec<Value> = state
                .replicas
                .iter()
                .filter_map(|&id| {
                    let handle = local(id)?;
                    let log = handle.lock();
                    Some(json!({
                        "broker": id,
                        "alive": cluster.is_alive(id),
                        "leader": log.is_leader(),
                        "leader_epoch": log.leader_epoch(),
                        "log_start_offset": log.log_start_offset(),
                        "log_end_offset": log.log_end_offset(),
                        "high_watermark": log.high_watermark(),
                    }))
                })
                .collect();
            let configs = cluster
                .broker(shown_by)
                .and_then(|b| b.replica_manager().topic(&topic.name))
                .map_or(Value::Null, |t| super::topic_configs_json(&t));
            if let Some(obj) = value.as_object_mut() {
                obj.insert("configs".into(), configs);
                obj.insert("leader".into(), json!(state.leader));
                obj.insert("leader_epoch".into(), json!(state.leader_epoch));
                obj.insert("partition_epoch".into(), json!(state.partition_epoch));
                obj.insert("replicas".into(), json!(state.replicas));
                obj.insert("isr".into(), json!(state.isr));
                obj.insert("replica_logs".into(), Value::Array(replica_logs));
            }
            out.push(value);
        }
    }
    Value::Array(out)
}

pub(super) async fn get_brokers(State(s): State<AdminState>) -> Json<Value> {
    Json(match &s.cluster {
        Some(cluster) => brokers_json(cluster),
        None => single_broker_json(&s.rm),
    })
}

pub(super) async fn post_broker(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let Some(cluster) = s.cluster.clone() else {
        return error(
            StatusCode::CONFLICT,
            "this is a single broker: start several with --brokers N to kill, restart or shut one down",
        );
    };
    let Ok(id) = id.parse::<i32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("broker id must be an integer, got {id:?}"),
        );
    };
    // The brokers run on the broker runtime; this handler on the admin one. The
    // lifecycle calls only await tokio primitives and socket binds, which any runtime
    // can drive.
    let done = match action.as_str() {
        "kill" => cluster.kill(id).await,
        "restart" => cluster.restart(id).await,
        "shutdown" => cluster.controlled_shutdown(id).await,
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!("unknown action {other:?}: use kill, restart or shutdown"),
            )
        }
    };
    match done {
        Ok(changes) => {
            info!(target: "purgatory::admin", broker = id, %action, %peer, "broker control");
            Json(json!({
                "broker": id,
                "action": action,
                "changes": changes,
                "brokers": brokers_json(&cluster),
            }))
            .into_response()
        }
        Err(e @ LifecycleError::UnknownBroker(_)) => error(StatusCode::NOT_FOUND, e.to_string()),
        Err(e @ LifecycleError::WrongState { .. }) => error(StatusCode::CONFLICT, e.to_string()),
        Err(e @ (LifecycleError::Listen { .. } | LifecycleError::Stopped)) => {
            error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
        }
    }
}

/// `/api/followers/{id}/...` with several brokers: the control applies to every replica
/// fetcher of broker `id`.
pub(super) fn fetcher_control(
    cluster: &Cluster,
    id: i32,
    action: &str,
    query: &HashMap<String, String>,
    body: &str,
    peer: SocketAddr,
) -> Response {
    let Some(fetchers) = cluster.fetchers(id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("there is no broker {id} (brokers: {:?})", cluster.ids()),
        );
    };
    if fetchers.is_empty() && !cluster.is_alive(id) {
        return error(
            StatusCode::CONFLICT,
            format!("broker {id} is not running: restart it first"),
        );
    }
    match action {
        "pause" => fetchers.iter().for_each(|f| f.pause()),
        "resume" => fetchers.iter().for_each(|f| f.resume()),
        "delay" => match wait_arg(query, body) {
            Ok(ms) => fetchers.iter().for_each(|f| f.set_fetch_delay_ms(ms)),
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        },
        "lag" => match wait_arg(query, body) {
            Ok(ms) => fetchers.iter().for_each(|f| f.set_lag_ms(ms)),
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        },
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!(
                    "unknown action {other:?} for a broker's fetchers: use pause, resume, delay or lag (kill and restart are /api/brokers/{id}/kill|restart)"
                ),
            )
        }
    }
    info!(target: "purgatory::admin", broker = id, %action, %peer, "fetcher control");
    let statuses: Vec<Value> = fetchers
        .iter()
        .map(|f| serde_json::to_value(f.status()).unwrap_or(Value::Null))
        .collect();
    Json(json!({ "follower": id, "action": action, "fetchers": statuses })).into_response()
}
