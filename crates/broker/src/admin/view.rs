//! The live view: a page served at `/` that shows the timing wheel, the purgatories, the
//! partitions and recent requests as they change, with controls for the followers, the
//! clock and a test produce.
//!
//! - `GET /` and `GET /assets/{file}`: the page, embedded in the binary (no build step,
//!   nothing fetched from elsewhere), with the one library it draws with, Preact, vendored
//!   beside it (`assets/preact-10.29.8.mjs`, the library's own build).
//! - `GET /api/view/stream`: server-sent events, one `frame` event whenever something
//!   changed, at most every 90 ms (so 11 a second while the broker is busy, none while
//!   nothing moves; a comment every 15 s keeps the connection open).
//!   `?followers=1` includes follower fetches in the frames' request lists. The state in
//!   a frame is built once for all open streams (reused for 45 ms); at most 32 streams are
//!   served at once, and a 33rd is refused with 503.
//! - `GET /api/view`: one frame, for scripts and tests.
//! - `GET /api/requests`: recent requests with their phases and stories (see
//!   [`get_requests`]).
//! - `POST /api/clock/freeze`, `POST /api/clock/resume`: stop a running clock (it is then
//!   stepped with `POST /api/clock/advance`) and let it run again.
//! - `POST /api/send`: produce one record over a real Kafka connection to this broker's
//!   own listener (see `post_send`).
//!
//! A frame is `/api/state` (each pending operation that the request log knows gets its
//! request attached) plus the clock, the requests that arrived or changed since the
//! previous frame, and the replication events since then.

//! The pieces: `frames.rs` (the frames and their stream), `clock.rs` (freeze and resume),
//! `send.rs` (the test produce), `metrics.rs` (`/metrics`).

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use super::clock::{post_freeze, post_resume};
use super::frames::{get_stream, get_view};
use super::send::post_send;
use super::{error, AdminState};
use crate::telemetry::RequestFilter;

pub use super::frames::first_frame;

const INDEX_HTML: &str = include_str!("../../assets/index.html");
const VIEW_JS: &str = include_str!("../../assets/view.js");
const VIEW_CSS: &str = include_str!("../../assets/view.css");
const PREACT_JS: &str = include_str!("../../assets/preact-10.29.8.mjs");

/// The page's routes.
pub(super) fn routes() -> Router<AdminState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{file}", get(asset))
        .route("/api/view", get(get_view))
        .route("/api/view/stream", get(get_stream))
        .route("/api/requests", get(get_requests))
        .route("/api/clock/freeze", post(post_freeze))
        .route("/api/clock/resume", post(post_resume))
        .route("/api/send", post(post_send))
}

async fn index() -> Response {
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
        ],
        INDEX_HTML,
    )
        .into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "view.js" => (VIEW_JS, "text/javascript; charset=utf-8"),
        "view.css" => (VIEW_CSS, "text/css; charset=utf-8"),
        "preact-10.29.8.mjs" => (PREACT_JS, "text/javascript; charset=utf-8"),
        _ => return error(StatusCode::NOT_FOUND, format!("no asset {file:?}")),
    };
    ([(CONTENT_TYPE, kind), (CACHE_CONTROL, "no-cache")], body).into_response()
}

/// `GET /api/requests`: the most recent requests, newest first, each with its Kafka
/// phases (ms), what ended its wait and its story.
///
/// Query: `limit` (default 50), `after` (only requests numbered above), `client`, `topic`,
/// `request` (a Kafka request name: `Produce`, `FetchConsumer`, ...), `followers=0` (leave
/// out follower fetches), `done=1` (finished ones only), and for a long poll
/// `finished_after=F&wait_ms=MS`: answer once more than `F` requests have finished (the
/// `finished` field of an earlier answer), or after `wait_ms` (at most 30 s). A number out
/// of its range (`limit` at most 4096), or not a number, is a 400 that says the range.
/// The most requests one `GET /api/requests` answers with.
const MAX_REQUESTS_LIMIT: u64 = 4096;
/// The longest long poll of `GET /api/requests`.
const MAX_REQUESTS_WAIT_MS: u64 = 30_000;

/// Query parameter `name` as a number from 0 to `max`, if given; else why not.
fn query_number(q: &HashMap<String, String>, name: &str, max: u64) -> Result<Option<u64>, String> {
    let Some(text) = q.get(name) else {
        return Ok(None);
    };
    match text.parse::<u64>() {
        Ok(n) if n <= max => Ok(Some(n)),
        _ => Err(format!(
            "`{name}` is {text:?}: it takes a whole number from 0 to {max}"
        )),
    }
}

pub async fn get_requests(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    // Every number has a range; one outside it, or not a number, is a 400 with the range.
    let numbers = (|| {
        Ok::<_, String>((
            query_number(&q, "limit", MAX_REQUESTS_LIMIT)?,
            query_number(&q, "after", u64::MAX)?,
            query_number(&q, "finished_after", u64::MAX)?,
            query_number(&q, "wait_ms", MAX_REQUESTS_WAIT_MS)?,
        ))
    })();
    let (limit, after, finished_after, wait_ms) = match numbers {
        Ok(numbers) => numbers,
        Err(e) => return super::error(axum::http::StatusCode::BAD_REQUEST, e),
    };
    let telemetry = &s.rm.telemetry;
    if let (Some(seen), Some(wait)) = (finished_after, wait_ms) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait);
        while telemetry.finished() <= seen && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let filter = RequestFilter {
        client: q.get("client").cloned(),
        topic: q.get("topic").cloned(),
        request: q.get("request").cloned(),
        no_followers: q.get("followers").map(String::as_str) == Some("0"),
        done_only: q.get("done").map(String::as_str) == Some("1"),
    };
    let limit = limit.unwrap_or(50) as usize;
    let finished = telemetry.finished();
    let requests = telemetry.recent_requests(after.unwrap_or(0), limit, &filter);
    Json(json!({
        "next_seq": telemetry.next_request_seq(),
        "finished": finished,
        "requests": requests,
    }))
    .into_response()
}
