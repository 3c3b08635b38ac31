//! `/api/faults`: the fault rules (`crate::faults`), over HTTP.
//!
//! - `POST /api/faults` with a JSON rule answers `{"id": n}`, or 400 with the reason.
//! - `GET /api/faults` lists the rules in the order they are checked, each as it was given
//!   plus its `id`, `hits` (times fired), `matched` (requests matched) and `does`.
//! - `DELETE /api/faults/{id}` removes one rule (404 if there is none), and
//!   `DELETE /api/faults` removes every rule, answering `{"removed": n}`.
//!
//! Adding and removing change the broker's behaviour, so they follow the admin rule:
//! loopback only, unless `admin.token` is set.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::{authorize, error, AdminState};

pub(super) async fn post_fault(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    match s.rm.faults.add_json(&body) {
        Ok(id) => Json(json!({ "id": id })).into_response(),
        Err(reason) => error(StatusCode::BAD_REQUEST, reason),
    }
}

pub(super) async fn get_faults(State(s): State<AdminState>) -> Response {
    Json(s.rm.faults.list()).into_response()
}

pub(super) async fn delete_fault(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let Ok(id) = id.parse::<u64>() else {
        return error(
            StatusCode::BAD_REQUEST,
            format!("a fault rule id is a positive integer, got {id:?}"),
        );
    };
    if s.rm.faults.remove(id) {
        Json(json!({ "removed": 1, "id": id })).into_response()
    } else {
        error(
            StatusCode::NOT_FOUND,
            format!("there is no fault rule {id}"),
        )
    }
}

pub(super) async fn delete_faults(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    Json(json!({ "removed": s.rm.faults.clear() })).into_response()
}
