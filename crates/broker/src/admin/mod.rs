//! The admin HTTP listener: look inside the broker, and steer its simulated followers.
//!
//! - `GET  /api/state` — every partition (replicas, ISR, LEO, HW, each follower's LEO, lag
//!   and last fetch, its topic's `configs`), every purgatory (watched / delayed / expired counts and the pending
//!   operations with what each waits for), the timing wheel, the embedded followers, and
//!   the consumer groups (state, generation, protocol, leader, members with their session
//!   deadlines and assignments).
//! - `POST /api/followers/{id}/pause|resume|crash|restart` — fault control.
//! - `POST /api/followers/{id}/delay` — extra delay before each fetch, in ms (body `250`,
//!   `{"ms": 250}` or `?ms=250`); likewise `/max-bytes` (`bytes`) and `/lag` (`ms`).
//! - `POST /api/clock/advance` — on a manual clock, move time forward by `ms`.
//! - `GET|POST|DELETE /api/faults`, `DELETE /api/faults/{id}` — fault rules per API
//!   (`faults.rs`, `crate::faults`).
//! - `GET /api/scenarios`, `POST /api/scenarios/run?name=...` (or a TOML body): scenario
//!   files played by the broker itself (`scenarios.rs`).
//! - With several brokers (`--brokers N`): `GET /api/brokers`, and
//!   `POST /api/brokers/{id}/kill|restart|shutdown` (`brokers.rs`). The follower controls
//!   then take a broker id and steer all of that broker's replica fetchers.
//!
//! Anything that changes state answers only loopback peers unless `admin.token` is set;
//! then any peer may call it with `Authorization: Bearer <token>`, and no one without it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tracing::info;

use crate::cluster::Cluster;
use crate::coordinator::GroupCoordinator;
use crate::followers::EmbeddedFollowers;
use crate::replica_manager::ReplicaManager;
use crate::txn::TransactionCoordinator;

mod brokers;
mod clock;
mod faults;
mod frames;
pub mod metrics;
mod scenarios;
mod send;
pub mod view;

/// Most pending operations listed per purgatory in `/api/state`.
const MAX_PENDING_SHOWN: usize = 200;
/// Most groups listed in `/api/state`.
const MAX_GROUPS_SHOWN: usize = 200;

/// What the admin handlers share.
#[derive(Clone)]
pub struct AdminState {
    /// The broker.
    pub rm: Arc<ReplicaManager>,
    /// Its group coordinator.
    pub coordinator: Arc<GroupCoordinator>,
    /// Followers running inside this process (may be empty).
    pub followers: EmbeddedFollowers,
    /// Bearer token required for mutating calls, if configured.
    pub token: Option<String>,
    /// The cluster `rm`'s broker belongs to, with `--brokers N`.
    pub cluster: Option<Arc<Cluster>>,
    /// Its transaction coordinator, if the state shows transactions.
    pub transactions: Option<Arc<TransactionCoordinator>>,
    /// What the live view's streams share.
    view: Arc<frames::ViewShared>,
    /// Whether a scenario is playing (`scenarios.rs`): one at a time.
    scenario_playing: Arc<std::sync::atomic::AtomicBool>,
}

impl AdminState {
    /// The admin listener's view of a broker (`token`: see `admin.token`).
    pub fn new(
        rm: Arc<ReplicaManager>,
        coordinator: Arc<GroupCoordinator>,
        followers: EmbeddedFollowers,
        token: Option<String>,
    ) -> Self {
        AdminState {
            rm,
            coordinator,
            followers,
            token,
            cluster: None,
            transactions: None,
            view: Arc::default(),
            scenario_playing: Arc::default(),
        }
    }

    /// The same, for a broker of `cluster`: the state shows every broker, and the broker
    /// controls work.
    pub fn with_cluster(mut self, cluster: Arc<Cluster>) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The same, with `transactions` shown in the state: every transactional id, and each
    /// open transaction's age against its timeout.
    pub fn with_transactions(mut self, transactions: Arc<TransactionCoordinator>) -> Self {
        self.transactions = Some(transactions);
        self
    }
}

/// Binds the admin listener and serves it on a thread of its own. Returns the bound address.
///
/// The admin listener has its own thread and tokio runtime, not the broker's one thread
/// (`server::runtime`). What it does is heavy next to a Kafka request and comes in bursts:
/// a live-view frame snapshots every purgatory, partition and the wheel and writes tens of
/// kilobytes of JSON, 11 times a second per open page. On the broker's thread each frame
/// held up the requests queued behind it, and its large short-lived strings came from the
/// same malloc arena as every request's buffers, which made allocation a larger share of
/// the broker's time under acks=all load with the page open (docs/performance.md). On its
/// own thread a
/// frame builds on another core when there is one, from its own arena. Everything the
/// handlers touch is shared across threads already (locks, atomics, tokio channels), so
/// they run unchanged.
pub fn start(listen: &str, state: AdminState) -> anyhow::Result<SocketAddr> {
    let cannot_start = || {
        format!(
            "cannot start the admin HTTP listener on {listen}; choose another address with \
             --admin-listen HOST:PORT (`admin.listeners` in the config file), or turn it off \
             with --no-admin"
        )
    };
    let listener = std::net::TcpListener::bind(listen).with_context(cannot_start)?;
    listener.set_nonblocking(true).with_context(cannot_start)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build the admin listener's runtime")?;
    let app = router(state);
    std::thread::Builder::new()
        .name("admin-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                let service = app.into_make_service_with_connect_info::<SocketAddr>();
                let served = match TcpListener::from_std(listener) {
                    Ok(listener) => axum::serve(listener, service).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = served {
                    tracing::error!(error = %e, "admin listener stopped");
                }
            })
        })
        .context("cannot start the admin listener's thread")?;
    info!(%addr, "admin HTTP listener ready (GET /api/state)");
    Ok(addr)
}

/// The routes, for embedding or testing.
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/api/state", get(get_state))
        .route("/api/followers", get(get_followers))
        .route("/api/followers/{id}/{action}", post(post_follower))
        .route("/api/clock/advance", post(post_clock_advance))
        .route("/api/brokers", get(brokers::get_brokers))
        .route("/api/brokers/{id}/{action}", post(brokers::post_broker))
        .route(
            "/api/faults",
            get(faults::get_faults)
                .post(faults::post_fault)
                .delete(faults::delete_faults),
        )
        .route("/api/faults/{id}", delete(faults::delete_fault))
        .route("/api/scenarios", get(scenarios::get_scenarios))
        .route("/api/scenarios/run", post(scenarios::post_run))
        // The live view (`/`, its stream, `/api/requests`, clock freeze, send) and `/metrics`.
        .merge(view::routes())
        .route("/metrics", get(metrics::get_metrics))
        .with_state(state)
}

/// A JSON error body with a status.
fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// A topic's configs as a partition entry of `/api/state` shows them (`configs`): the
/// effective value of each config this broker acts on, and every value set for the
/// topic (CreateTopics, IncrementalAlterConfigs, AlterConfigs), by Kafka name.
pub(crate) fn topic_configs_json(topic: &crate::topics::Topic) -> Value {
    use crate::topics::config::{
        MAX_MESSAGE_BYTES, MIN_INSYNC_REPLICAS, RETENTION_BYTES, UNCLEAN_LEADER_ELECTION_ENABLE,
    };
    let mut configs = serde_json::Map::new();
    for name in [
        MIN_INSYNC_REPLICAS,
        RETENTION_BYTES,
        MAX_MESSAGE_BYTES,
        UNCLEAN_LEADER_ELECTION_ENABLE,
    ] {
        if let Some(e) = topic.config.entry(name) {
            configs.insert(name.into(), json!(e.value));
        }
    }
    for (name, value) in topic.config.overrides() {
        configs.insert(name.clone(), json!(value));
    }
    Value::Object(configs)
}

/// The whole picture, as served by `GET /api/state`.
///
/// `now_ms` is read after every snapshot, so it is never earlier than anything the
/// snapshots show: a member or an operation that is gone was removed at or before `now_ms`
/// (a script that sees a timeout's effect also sees a clock at or past its deadline).
pub fn state_json(
    rm: &ReplicaManager,
    coordinator: &GroupCoordinator,
    followers: &EmbeddedFollowers,
    cluster: Option<&Cluster>,
) -> Value {
    let (brokers, partitions) = match cluster {
        Some(cluster) => (
            brokers::brokers_json(cluster),
            brokers::partitions_json(cluster),
        ),
        None => {
            let partitions: Vec<Value> = rm
                .topics()
                .iter()
                .flat_map(|t| {
                    let configs = topic_configs_json(t);
                    t.partitions.iter().map(move |p| {
                        let mut value =
                            serde_json::to_value(p.lock().snapshot()).unwrap_or(Value::Null);
                        if let Some(obj) = value.as_object_mut() {
                            obj.insert("configs".into(), configs.clone());
                        }
                        value
                    })
                })
                .collect();
            (brokers::single_broker_json(rm), Value::Array(partitions))
        }
    };
    let purgatories = json!({
        "produce": rm.produce_purgatory.snapshot(MAX_PENDING_SHOWN),
        "fetch": rm.fetch_purgatory.snapshot(MAX_PENDING_SHOWN),
        "delete_records": rm.delete_records_purgatory.snapshot(MAX_PENDING_SHOWN),
        "rebalance": coordinator.rebalance_purgatory.snapshot(MAX_PENDING_SHOWN),
        "heartbeat": coordinator.heartbeat_purgatory.snapshot(MAX_PENDING_SHOWN),
        "fault_delay": rm.faults.delays.snapshot(MAX_PENDING_SHOWN),
    });
    let groups = coordinator.snapshot(MAX_GROUPS_SHOWN);
    let timer = rm.timer.snapshot();
    let followers = match cluster {
        Some(cluster) => cluster.fetcher_statuses(),
        None => followers.statuses(),
    };
    json!({
        "broker_id": rm.config.broker_id,
        "now_ms": rm.now_ms(),
        "clock": rm.config.clock,
        "log_bytes": rm.log_bytes(),
        "brokers": brokers,
        "partitions": partitions,
        "purgatories": purgatories,
        "groups": groups,
        "timer": timer,
        "followers": followers,
        "faults": rm.faults.list(),
    })
}

async fn get_state(State(s): State<AdminState>) -> Json<Value> {
    Json(admin_state_json(&s))
}

/// [`state_json`] for an admin listener, with its transactions if it shows them.
pub fn admin_state_json(s: &AdminState) -> Value {
    let mut state = state_json(&s.rm, &s.coordinator, &s.followers, s.cluster.as_deref());
    if let (Some(txn), Some(obj)) = (&s.transactions, state.as_object_mut()) {
        obj.insert("transactions".into(), transactions_json(txn, s.rm.now_ms()));
    }
    state
}

/// Every transactional id: its producer, state, timeout, partitions, and for an open or
/// ending transaction how long it has been open (`open_ms`, else null).
fn transactions_json(txn: &TransactionCoordinator, now_ms: u64) -> Value {
    Value::Array(
        txn.snapshot()
            .into_iter()
            .map(|m| {
                json!({
                    "transactional_id": m.transactional_id,
                    "producer_id": m.producer_id,
                    "producer_epoch": m.producer_epoch,
                    "state": m.state.name(),
                    "timeout_ms": m.timeout_ms,
                    "open_ms": m.state.in_flight().then(|| now_ms.saturating_sub(m.started_ms)),
                    "partitions": m.partitions.iter().map(|tp| tp.to_string()).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

async fn get_followers(State(s): State<AdminState>) -> Json<Value> {
    Json(serde_json::to_value(s.followers.statuses()).unwrap_or(Value::Null))
}

/// Loopback-only unless a token is configured; with a token, the token is required.
fn authorize(s: &AdminState, peer: SocketAddr, headers: &HeaderMap) -> Result<(), Box<Response>> {
    match &s.token {
        Some(token) => {
            let presented = headers
                .get(axum::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            if presented == Some(token.as_str()) {
                Ok(())
            } else {
                Err(Box::new(error(
                    StatusCode::UNAUTHORIZED,
                    "this call needs Authorization: Bearer <admin.token>",
                )))
            }
        }
        None if peer.ip().is_loopback() => Ok(()),
        None => Err(Box::new(error(
            StatusCode::FORBIDDEN,
            "state-changing calls are loopback-only unless admin.token is configured",
        ))),
    }
}

/// Reads a number from `?name=`, a JSON body `{"name": n}`, or a plain-text body.
fn number_arg(query: &HashMap<String, String>, body: &str, name: &str) -> Result<i64, String> {
    if let Some(v) = query.get(name) {
        return v
            .trim()
            .parse()
            .map_err(|_| format!("`{name}` must be an integer, got {v:?}"));
    }
    let body = body.trim();
    if body.is_empty() {
        return Err(format!(
            "missing `{name}` (query ?{name}=N, JSON {{\"{name}\": N}} or a plain number body)"
        ));
    }
    if let Ok(n) = body.parse::<i64>() {
        return Ok(n);
    }
    let json: Value = serde_json::from_str(body)
        .map_err(|_| format!("cannot read `{name}` from body {body:?}"))?;
    json.get(name)
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("JSON body must have an integer `{name}`"))
}

#[derive(Serialize)]
struct Done {
    follower: i32,
    action: String,
    status: Value,
}

async fn post_follower(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let Ok(id) = id.parse::<i32>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("follower id must be an integer, got {id:?}"),
        );
    };
    if let Some(cluster) = &s.cluster {
        return brokers::fetcher_control(cluster, id, &action, &query, &body, peer);
    }
    let Some(follower) = s.followers.get(id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!(
                "no embedded follower {id} (embedded followers: {:?})",
                s.followers.ids()
            ),
        );
    };
    let non_negative = |name: &str| match number_arg(&query, &body, name) {
        Ok(n) if n >= 0 => Ok(n),
        Ok(n) => Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            format!("`{name}` must be >= 0, got {n}"),
        ))),
        Err(e) => Err(Box::new(error(StatusCode::BAD_REQUEST, e))),
    };
    match action.as_str() {
        "pause" => follower.pause(),
        "resume" => follower.resume(),
        "crash" => follower.crash(),
        "restart" => follower.restart(),
        "delay" => match wait_arg(&query, &body) {
            Ok(ms) => follower.set_fetch_delay_ms(ms),
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        },
        "lag" => match wait_arg(&query, &body) {
            Ok(ms) => follower.set_lag_ms(ms),
            Err(e) => return error(StatusCode::BAD_REQUEST, e),
        },
        "max-bytes" => match non_negative("bytes") {
            Ok(b) if b >= 1 && b <= i64::from(i32::MAX) => follower.set_max_bytes(b as i32),
            Ok(b) => return error(StatusCode::BAD_REQUEST, format!("`bytes` must be in 1..={}, got {b}", i32::MAX)),
            Err(r) => return *r,
        },
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!("unknown action {other:?}: use pause, resume, crash, restart, delay, lag or max-bytes"),
            )
        }
    }
    info!(target: "purgatory::admin", follower = id, %action, %peer, "follower control");
    let status = serde_json::to_value(follower.status()).unwrap_or(Value::Null);
    Json(Done {
        follower: id,
        action,
        status,
    })
    .into_response()
}

/// A follower's fetch delay or lag (`ms`, in the query or the body): 0 to
/// [`followersim::scenario::MAX_FOLLOWER_WAIT_MS`], as a scenario step takes it, or why not.
fn wait_arg(query: &HashMap<String, String>, body: &str) -> Result<u64, String> {
    let ms = number_arg(query, body, "ms")?;
    followersim::scenario::follower_wait_ms("`ms`", ms).map_err(|e| e.to_string())
}

/// The longest single step of a manual clock: 7 days. A step fires every timer task it
/// passes, and periodic ones (the ISR check every `replica.lag.time.max.ms / 2`) once per
/// period, so an unbounded step could run for hours; and the clock must stay far below
/// i64::MAX, where deadlines computed from it would overflow.
pub const MAX_CLOCK_STEP_MS: i64 = 7 * 24 * 3_600_000;

/// A clock step as asked for, or why it is refused.
fn clock_step(ms: i64) -> Result<u64, String> {
    u64::try_from(ms)
        .ok()
        .filter(|&ms| ms <= MAX_CLOCK_STEP_MS as u64)
        .ok_or_else(|| {
            format!("`ms` is {ms}: one step takes 0 to {MAX_CLOCK_STEP_MS} ms (7 days); step again for more")
        })
}

async fn post_clock_advance(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    if !s.rm.timer.is_manual() {
        return error(
            StatusCode::CONFLICT,
            "the broker's system clock is running: freeze it first (POST /api/clock/freeze), or start it with --clock manual",
        );
    }
    let ms = match number_arg(&query, &body, "ms").and_then(clock_step) {
        Ok(ms) => ms,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let rm = s.rm.clone();
    // Firing timers runs delayed-operation callbacks: keep them off the async workers.
    let fired = tokio::task::spawn_blocking(move || rm.timer.advance_by(ms))
        .await
        .unwrap_or(0);
    Json(json!({ "now_ms": s.rm.now_ms(), "fired": fired })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(token: Option<&str>) -> AdminState {
        let rm = ReplicaManager::new(crate::test_util::manual_config(|_| {}));
        AdminState::new(
            rm.clone(),
            GroupCoordinator::new(&rm),
            EmbeddedFollowers::none(),
            token.map(str::to_string),
        )
    }

    fn bearer(token: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn without_a_token_only_loopback_peers_may_change_state() {
        let s = state(None);
        assert!(authorize(&s, "127.0.0.1:5000".parse().unwrap(), &HeaderMap::new()).is_ok());
        assert!(authorize(&s, "[::1]:5000".parse().unwrap(), &HeaderMap::new()).is_ok());
        let denied =
            authorize(&s, "192.0.2.7:5000".parse().unwrap(), &bearer("anything")).unwrap_err();
        assert_eq!(denied.status(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn with_a_token_every_peer_needs_it_and_loopback_is_no_exception() {
        let s = state(Some("s3cret"));
        assert!(authorize(&s, "192.0.2.7:5000".parse().unwrap(), &bearer("s3cret")).is_ok());
        let no_token =
            authorize(&s, "127.0.0.1:5000".parse().unwrap(), &HeaderMap::new()).unwrap_err();
        assert_eq!(no_token.status(), StatusCode::UNAUTHORIZED);
        let wrong = authorize(&s, "192.0.2.7:5000".parse().unwrap(), &bearer("guess")).unwrap_err();
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn a_clock_step_is_bounded_to_seven_days_and_never_negative() {
        assert_eq!(clock_step(0), Ok(0));
        assert_eq!(clock_step(MAX_CLOCK_STEP_MS), Ok(604_800_000));
        for hostile in [
            -1,
            MAX_CLOCK_STEP_MS + 1,
            99_999_999_999_999,
            i64::MAX,
            i64::MIN,
        ] {
            let refused = clock_step(hostile).unwrap_err();
            assert!(refused.contains(&format!("`ms` is {hostile}")), "{refused}");
            assert!(refused.contains("0 to 604800000 ms"), "{refused}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_clock_steps_get_a_400_and_leave_the_clock_where_it_was() {
        let s = state(None);
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let before = s.rm.now_ms();
        let advance = |ms: String| {
            post_clock_advance(
                State(s.clone()),
                ConnectInfo(peer),
                HeaderMap::new(),
                Query(HashMap::from([("ms".to_string(), ms)])),
                String::new(),
            )
        };
        for ms in ["99999999999999", "9223372036854775807", "-5"] {
            let answer = advance(ms.to_string()).await;
            assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "ms={ms}");
            assert_eq!(s.rm.now_ms(), before, "ms={ms} moved the clock");
        }
        // The largest legal step completes, and the clock is where it says.
        let answer = advance(MAX_CLOCK_STEP_MS.to_string()).await;
        assert_eq!(answer.status(), StatusCode::OK);
        assert_eq!(s.rm.now_ms(), before + MAX_CLOCK_STEP_MS as u64);
    }

    #[test]
    fn numbers_come_from_query_plain_body_or_json() {
        let q = HashMap::from([("ms".to_string(), "25".to_string())]);
        assert_eq!(number_arg(&q, "", "ms"), Ok(25));
        assert_eq!(number_arg(&HashMap::new(), " 250 ", "ms"), Ok(250));
        assert_eq!(number_arg(&HashMap::new(), "{\"ms\": 7}", "ms"), Ok(7));
        assert!(number_arg(&HashMap::new(), "", "ms").is_err());
        assert!(number_arg(&HashMap::new(), "{\"bytes\": 7}", "ms").is_err());
        assert!(number_arg(&HashMap::new(), "soon", "ms").is_err());
    }
}
