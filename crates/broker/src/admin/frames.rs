//! The live view's frames: what the page is sent, built from `/api/state` and the request
//! log, one stream per open page.
//!
//! A frame is `/api/state` (each purgatory's first pending operations, each with its
//! request attached) plus the clock, the requests that arrived or changed since the
//! stream's previous frame, and the replication events since then. The state part is built
//! once for all streams and shared for a moment; the rest is each stream's own.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::warn;

use super::clock::clock_json;
use super::{admin_state_json, error, AdminState};
use crate::telemetry::RequestFilter;

/// Requests listed in a stream's first frame (the page shows 30, and filters them).
const FIRST_FRAME_REQUESTS: usize = 60;
/// New requests sent per frame at most: the page keeps the newest, and a busy broker's
/// thousands a second could not be read anyway. Frames carry each request's one-line
/// story, not its steps.
const FRAME_REQUESTS: usize = 20;
/// Pending operations listed per purgatory in a frame, each with its request: the page
/// shows 12. The rest are counted (`pending_total`) and their wheel buckets listed
/// (`pending_buckets`), so the wheel can still outline every bucket holding a parked
/// produce. A busy broker has hundreds parked, and listing them all made a frame 150 kB.
const FRAME_PENDING: usize = 12;
/// Replication events sent per frame at most.
const FRAME_EVENTS: usize = 40;
/// A stream reuses the state another stream built less than this long ago.
const STATE_REUSE: Duration = Duration::from_millis(45);
/// Live view streams served at once. Each costs the broker a frame 11 times a second (the
/// requests and events new to it; the state is shared); a page left open in many tabs, or
/// a client opening streams in a loop, gets 503 beyond this.
const MAX_STREAMS: usize = 32;
/// How often a stream looks for changes: 11 frames a second at most, a little over the
/// 10 a busy broker should show, and no more (every open page gets its own).
const FRAME_INTERVAL: Duration = Duration::from_millis(90);

/// What one stream has sent so far.
struct Cursor {
    /// Requests numbered up to this one have been considered.
    requests_after: u64,
    /// Requests sent while not yet done: sent again until they are.
    open: BTreeSet<u64>,
    /// Replication events up to this number have been sent.
    events_after: u64,
    /// Include follower fetches.
    followers: bool,
}

impl Cursor {
    fn new(followers: bool) -> Self {
        Cursor {
            requests_after: 0,
            open: BTreeSet::new(),
            events_after: 0,
            followers,
        }
    }
}

/// The `[request N]` a traced operation's description ends with.
fn request_tag(description: &str) -> Option<u64> {
    let rest = description.strip_suffix(']')?;
    let at = rest.rfind(" [request ")?;
    rest[at + " [request ".len()..].parse().ok()
}

/// The part of a frame that is the same for every stream at one moment: the state, with
/// each purgatory's first pending operations and their requests, serialized once.
struct SharedState {
    built: Instant,
    /// The state as JSON.
    json: String,
    /// The state without the clock readings that move by themselves: what tells whether
    /// the picture changed.
    key: String,
    /// Goes up each time a new state's `key` differs from the one before: two frames from
    /// states of the same version show the same picture.
    version: u64,
}

/// What the live view's streams share: the newest [`SharedState`], and how many streams
/// are open.
#[derive(Default)]
pub(super) struct ViewShared {
    state: Mutex<Option<Arc<SharedState>>>,
    streams: AtomicUsize,
    /// The 10-second window (broker clock) of the last logged refusal: a client knocking
    /// in a loop gets its 503 every time, the log one line per window.
    refusal_logged: AtomicU64,
}

/// Builds the shared state now.
fn build_shared_state(s: &AdminState) -> SharedState {
    let telemetry = &s.rm.telemetry;
    let mut state = admin_state_json(s);
    // The first pending operations, each with its request if the request log knows it.
    if let Some(purgatories) = state["purgatories"].as_object_mut() {
        for purgatory in purgatories.values_mut().filter(|p| p.is_object()) {
            purgatory["pending_buckets"] = pending_buckets(&purgatory["pending"]);
            if let Some(pending) = purgatory["pending"].as_array_mut() {
                pending.truncate(FRAME_PENDING);
            }
            for op in purgatory["pending"].as_array_mut().into_iter().flatten() {
                let seq = op["description"].as_str().and_then(request_tag);
                if let Some(mut view) = seq.and_then(|seq| telemetry.request(seq)) {
                    view.steps.clear();
                    op["request"] = serde_json::to_value(view).unwrap_or(Value::Null);
                }
            }
        }
    }
    let json = state.to_string();
    state["now_ms"].take();
    state["timer"]["now_ms"].take();
    SharedState {
        built: Instant::now(),
        json,
        key: state.to_string(),
        version: 0,
    }
}

/// Makes `built` the newest shared state, numbering its version after the one it replaces.
fn replace_shared_state(
    newest: &mut Option<Arc<SharedState>>,
    mut built: SharedState,
) -> Arc<SharedState> {
    if let Some(previous) = newest.as_ref() {
        built.version = previous.version + u64::from(previous.key != built.key);
    }
    let built = Arc::new(built);
    *newest = Some(built.clone());
    built
}

/// The shared state, built anew unless another stream built it less than
/// [`STATE_REUSE`] ago: however many pages are open, the broker snapshots its purgatories,
/// partitions and wheel about 22 times a second at most.
fn shared_state(s: &AdminState) -> Arc<SharedState> {
    let mut newest = s.view.state.lock();
    if let Some(state) = newest
        .as_ref()
        .filter(|st| st.built.elapsed() < STATE_REUSE)
    {
        return state.clone();
    }
    replace_shared_state(&mut newest, build_shared_state(s))
}

/// Builds a stream's next frame (JSON text) from `state` and moves its cursor on.
/// Also returns what tells whether anything happened since the stream's last frame: new
/// requests or events (`None`: something did), or else the state's version and the
/// clock's key.
fn frame(
    s: &AdminState,
    state: &SharedState,
    cursor: &mut Cursor,
) -> (String, Option<(u64, String)>) {
    let telemetry = &s.rm.telemetry;
    let filter = RequestFilter {
        no_followers: !cursor.followers,
        ..RequestFilter::default()
    };
    let first = cursor.requests_after == 0;
    let limit = if first {
        FIRST_FRAME_REQUESTS
    } else {
        FRAME_REQUESTS
    };
    let mut requests = telemetry.recent_requests(cursor.requests_after, limit, &filter);
    cursor.requests_after = telemetry.next_request_seq().saturating_sub(1);
    // Requests sent before while still open, again (they may have completed since).
    let fresh: BTreeSet<u64> = requests.iter().map(|r| r.seq).collect();
    for seq in std::mem::take(&mut cursor.open) {
        if !fresh.contains(&seq) {
            if let Some(view) = telemetry.request(seq) {
                requests.push(view);
            }
        }
    }
    for r in &mut requests {
        r.steps.clear();
    }
    // Followed until done: the newest open ones, as many as a frame carries new ones.
    let mut open: Vec<u64> = requests
        .iter()
        .filter(|r| r.state != "done")
        .map(|r| r.seq)
        .collect();
    open.sort_unstable_by(|a, b| b.cmp(a));
    open.truncate(FRAME_REQUESTS);
    cursor.open = open.into_iter().collect();
    let events = telemetry.events.newest(cursor.events_after, FRAME_EVENTS);
    cursor.events_after = telemetry.events.next_seq().saturating_sub(1);

    let mut clock = clock_json(s);
    let text = format!(
        r#"{{"state":{},"clock":{},"requests":{},"events":{},"token_required":{}}}"#,
        state.json,
        clock,
        serde_json::to_string(&requests).unwrap_or_else(|_| "[]".into()),
        serde_json::to_string(&events).unwrap_or_else(|_| "[]".into()),
        s.token.is_some(),
    );
    let key = if requests.is_empty() && events.is_empty() {
        clock["now_ms"].take();
        Some((state.version, clock.to_string()))
    } else {
        None
    };
    (text, key)
}

/// The wheel buckets holding the timeouts of a purgatory's pending operations, with how
/// many each holds: `[{"level", "slot", "operations"}]`, in the order first met.
fn pending_buckets(pending: &Value) -> Value {
    let mut buckets: Vec<(u64, u64, u64)> = Vec::new();
    for op in pending.as_array().into_iter().flatten() {
        let bucket = &op["bucket"];
        let (Some(level), Some(slot)) = (bucket["level"].as_u64(), bucket["slot"].as_u64()) else {
            continue;
        };
        match buckets.iter_mut().find(|b| b.0 == level && b.1 == slot) {
            Some(b) => b.2 += 1,
            None => buckets.push((level, slot, 1)),
        }
    }
    buckets
        .into_iter()
        .map(|(level, slot, operations)| json!({"level": level, "slot": slot, "operations": operations}))
        .collect()
}

/// `?followers=1`: include follower fetches in the frames' request lists.
#[derive(Deserialize)]
pub(super) struct StreamQuery {
    followers: Option<String>,
}

/// One frame as a page that just opened gets it (the state as it is now, the newest
/// requests and events): what `GET /api/view` serves, as JSON text.
pub fn first_frame(s: &AdminState, followers: bool) -> String {
    let state = replace_shared_state(&mut s.view.state.lock(), build_shared_state(s));
    frame(s, &state, &mut Cursor::new(followers)).0
}

pub(super) async fn get_view(
    State(s): State<AdminState>,
    Query(q): Query<StreamQuery>,
) -> Response {
    let frame = first_frame(&s, q.followers.as_deref() == Some("1"));
    ([(CONTENT_TYPE, "application/json")], frame).into_response()
}

/// Counts a stream as open for as long as it lives.
struct OpenStream(Arc<ViewShared>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) async fn get_stream(
    State(s): State<AdminState>,
    Query(q): Query<StreamQuery>,
) -> Response {
    let open = s.view.streams.fetch_add(1, Ordering::AcqRel);
    let guard = OpenStream(s.view.clone());
    if open >= MAX_STREAMS {
        drop(guard);
        let window = s.rm.now_ms() / 10_000 + 1;
        if s.view.refusal_logged.swap(window, Ordering::Relaxed) != window {
            warn!(
                open,
                "refusing live view streams: too many open (logged once per 10 s)"
            );
        }
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{open} live view streams are open, the most this broker serves; close one"),
        );
    }
    let cursor = Cursor::new(q.followers.as_deref() == Some("1"));
    let mut interval = tokio::time::interval(FRAME_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = (s, cursor, None::<(u64, String)>, interval, guard);
    let frames = stream::unfold(
        start,
        |(s, mut cursor, mut last, mut interval, guard)| async move {
            loop {
                interval.tick().await;
                let state = shared_state(&s);
                let (frame, key) = frame(&s, &state, &mut cursor);
                if key.is_none() || key != last {
                    last = key;
                    let event = Event::default().event("frame").data(frame);
                    return Some((
                        Ok::<_, Infallible>(event),
                        (s, cursor, last, interval, guard),
                    ));
                }
            }
        },
    );
    Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_tags_are_read_from_the_end_of_a_description() {
        assert_eq!(
            request_tag("DelayedProduce: produce #7 from \"x [request 9]\" (p) waits for demo-0: HW >= 3 [request 42]"),
            Some(42)
        );
        assert_eq!(request_tag("DelayedJoin: waits for members"), None);
        assert_eq!(request_tag("x [request nine]"), None);
    }
}
