//! The live view: a page served at `/` that shows the timing wheel, the purgatories, the
//! partitions and recent requests as they change, with controls for the followers, the
//! clock and a test produce.
//!
//! - `GET /` and `GET /assets/{file}`: the page, embedded in the binary (no build step,
//!   nothing fetched from elsewhere).
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

use std::collections::{BTreeSet, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::{Bytes, BytesMut};
use futures_util::stream;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{MetadataRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::{json, Value};
use timewheel::Timer;
use tracing::{info, warn};

use super::clock;
use super::{authorize, error, state_json, AdminState};
use crate::telemetry::RequestFilter;

const INDEX_HTML: &str = include_str!("../../assets/index.html");
const VIEW_JS: &str = include_str!("../../assets/view.js");
const VIEW_CSS: &str = include_str!("../../assets/view.css");

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
/// 10 a busy broker should show, and no more (each frame is built for each open page).
const FRAME_INTERVAL: Duration = Duration::from_millis(90);

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
        _ => return error(StatusCode::NOT_FOUND, format!("no asset {file:?}")),
    };
    ([(CONTENT_TYPE, kind), (CACHE_CONTROL, "no-cache")], body).into_response()
}

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

/// The clock, as the page needs it.
fn clock_json(s: &AdminState) -> Value {
    let timer = &s.rm.timer;
    json!({
        "mode": s.rm.config.clock,
        "frozen": clock::is_frozen(timer),
        "steppable": timer.is_manual(),
        "can_freeze": clock::can_freeze(timer),
        "now_ms": timer.now_ms(),
        "tick_ms": timer.config().tick_ms,
        "wheel_size": timer.config().wheel_size,
    })
}

/// The part of a frame that is the same for every stream at one moment: the state, with
/// each purgatory's first pending operations and their requests, serialized once.
pub struct SharedState {
    built: Instant,
    /// The state as JSON.
    json: String,
    /// The same without the clock readings that move by themselves: two frames whose keys
    /// are equal show the same picture.
    key: String,
}

/// What the live view's streams share: the newest [`SharedState`], and how many streams
/// are open.
#[derive(Default)]
pub struct ViewShared {
    state: Mutex<Option<Arc<SharedState>>>,
    streams: AtomicUsize,
}

/// Builds the shared state now.
fn build_shared_state(s: &AdminState) -> SharedState {
    let telemetry = &s.rm.telemetry;
    let mut state = state_json(&s.rm, &s.coordinator, &s.followers);
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
    }
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
    let state = Arc::new(build_shared_state(s));
    *newest = Some(state.clone());
    state
}

/// Builds a stream's next frame (JSON text) from `state` and moves its cursor on.
/// Also returns what tells whether anything happened since the stream's last frame: new
/// requests or events (`None`: something did), or else the state's and the clock's key.
fn frame(s: &AdminState, state: &SharedState, cursor: &mut Cursor) -> (String, Option<String>) {
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
        Some(format!("{}{}", state.key, clock))
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

#[derive(Deserialize)]
struct StreamQuery {
    followers: Option<String>,
}

/// One frame as a page that just opened gets it (the state as it is now, the newest
/// requests and events): what `GET /api/view` serves, as JSON text.
pub fn first_frame(s: &AdminState, followers: bool) -> String {
    let state = Arc::new(build_shared_state(s));
    *s.view.state.lock() = Some(state.clone());
    frame(s, &state, &mut Cursor::new(followers)).0
}

async fn get_view(State(s): State<AdminState>, Query(q): Query<StreamQuery>) -> Response {
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

async fn get_stream(State(s): State<AdminState>, Query(q): Query<StreamQuery>) -> Response {
    let open = s.view.streams.fetch_add(1, Ordering::AcqRel);
    let guard = OpenStream(s.view.clone());
    if open >= MAX_STREAMS {
        drop(guard);
        warn!(open, "refusing a live view stream: too many open");
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{open} live view streams are open, the most this broker serves; close one"),
        );
    }
    let cursor = Cursor::new(q.followers.as_deref() == Some("1"));
    let mut interval = tokio::time::interval(FRAME_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = (s, cursor, None::<String>, interval, guard);
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

/// `GET /api/requests`: the most recent requests, newest first, each with its Kafka
/// phases (ms), what ended its wait and its story.
///
/// Query: `limit` (default 50), `after` (only requests numbered above), `client`, `topic`,
/// `request` (a Kafka request name: `Produce`, `FetchConsumer`, ...), `followers=0` (leave
/// out follower fetches), `done=1` (finished ones only), and for a long poll
/// `finished_after=F&wait_ms=MS`: answer once more than `F` requests have finished (the
/// `finished` field of an earlier answer), or after `wait_ms` (at most 30 s).
pub async fn get_requests(
    State(s): State<AdminState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let num = |name: &str| q.get(name).and_then(|v| v.parse::<u64>().ok());
    let telemetry = &s.rm.telemetry;
    if let (Some(seen), Some(wait)) = (num("finished_after"), num("wait_ms")) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait.min(30_000));
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
    let limit = num("limit").unwrap_or(50).min(4096) as usize;
    let finished = telemetry.finished();
    let requests = telemetry.recent_requests(num("after").unwrap_or(0), limit, &filter);
    Json(json!({
        "next_seq": telemetry.next_request_seq(),
        "finished": finished,
        "requests": requests,
    }))
    .into_response()
}

async fn post_freeze(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    change_clock(&s, peer, &headers, clock::freeze, "clock frozen")
}

async fn post_resume(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    change_clock(&s, peer, &headers, clock::resume, "clock resumed")
}

/// Freezes or resumes the broker's clock for an authorized caller, answering with the
/// clock's new state (409 if it already was so).
fn change_clock(
    s: &AdminState,
    peer: SocketAddr,
    headers: &HeaderMap,
    change: fn(&Timer) -> Result<(), String>,
    what: &str,
) -> Response {
    if let Err(denied) = authorize(s, peer, headers) {
        return *denied;
    }
    match change(&s.rm.timer) {
        Ok(()) => {
            info!(target: "purgatory::admin", %peer, now_ms = s.rm.now_ms(), "{what}");
            Json(clock_json(s)).into_response()
        }
        Err(why) => error(StatusCode::CONFLICT, why),
    }
}

/// What `POST /api/send` produces.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SendRequest {
    topic: String,
    #[serde(default)]
    partition: i32,
    #[serde(default = "default_acks")]
    acks: i16,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    key: Option<String>,
    #[serde(default = "default_timeout")]
    timeout_ms: i32,
    #[serde(default)]
    client_id: Option<String>,
}

fn default_acks() -> i16 {
    -1
}

fn default_timeout() -> i32 {
    30_000
}

/// Client id of the page's test producer.
pub const SEND_CLIENT_ID: &str = "purgatory-view";

/// `POST /api/send` with a JSON body `{"topic": "demo", "acks": -1, "value": "hi",
/// "partition": 0, "key": null, "timeout_ms": 30000, "client_id": "purgatory-view"}`
/// (only `topic` is required): connects to the broker's own Kafka listener like any
/// client, sends Metadata (which creates the topic if it does not exist and
/// auto-creation is on) and then one Produce v9 with one record, and answers at once
/// with the produce's correlation id; the produce's answer arrives on that connection
/// when its `DelayedProduce` completes or expires, and shows in the request log.
async fn post_send(
    State(s): State<AdminState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: String,
) -> Response {
    if let Err(denied) = authorize(&s, peer, &headers) {
        return *denied;
    }
    let send: SendRequest = match serde_json::from_str(&body) {
        Ok(send) => send,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("bad body: {e}")),
    };
    if !matches!(send.acks, -1..=1) {
        return error(StatusCode::BAD_REQUEST, "acks must be -1 (all), 0 or 1");
    }
    if send.topic.is_empty() {
        return error(StatusCode::BAD_REQUEST, "topic must not be empty");
    }
    let Some(port) = s.rm.bound_port() else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the Kafka listener is not bound yet",
        );
    };
    match send_one(port, send).await {
        Ok(sent) => Json(sent).into_response(),
        Err(e) => error(StatusCode::BAD_GATEWAY, format!("{e:#}")),
    }
}

async fn send_one(port: i32, send: SendRequest) -> anyhow::Result<Value> {
    use anyhow::Context;
    let client_id = send
        .client_id
        .clone()
        .unwrap_or_else(|| SEND_CLIENT_ID.to_string());
    // Loopback reaches the listener whatever address it is bound to, as the followers do.
    let mut conn = followersim::KafkaConnection::connect(&format!("127.0.0.1:{port}"))
        .await?
        .with_client_id(client_id.clone());
    let topic = TopicName(StrBytes::from_string(send.topic.clone()));
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(topic.clone()))
        ]))
        .with_allow_auto_topic_creation(true);
    let answer = conn.send(&metadata, 12).await.context("Metadata")?;
    // A topic Metadata could not create (an illegal name, auto-creation off) is still
    // produced to, as a client may: the broker's answer to that is worth seeing too.
    let metadata_error = answer
        .topics
        .first()
        .filter(|t| t.error_code != 0)
        .map(|t| crate::telemetry::error_name(t.error_code));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key: send.key.map(Bytes::from),
        value: Some(Bytes::from(
            send.value
                .unwrap_or_else(|| "sent from the live view".to_string()),
        )),
        headers: Default::default(),
    };
    let mut batch = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut batch,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .context("encoding the record batch")?;
    let produce = ProduceRequest::default()
        .with_acks(send.acks)
        .with_timeout_ms(send.timeout_ms)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic)
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(send.partition)
                .with_records(Some(batch.freeze()))])]);
    let correlation_id = conn.write_request(&produce, 9).await.context("Produce")?;
    let what = format!(
        "produce #{correlation_id} from {client_id:?} to {}-{} (acks={})",
        send.topic, send.partition, send.acks
    );
    info!(target: "purgatory::admin", "live view: {what} sent");
    if send.acks != 0 {
        // The answer comes when the DelayedProduce completes or expires.
        tokio::spawn(async move {
            match conn.read_response::<ProduceRequest>(9).await {
                Ok((_, response)) => {
                    let code = response
                        .responses
                        .first()
                        .and_then(|t| t.partition_responses.first())
                        .map_or(0, |p| p.error_code);
                    info!(
                        target: "purgatory::admin",
                        error = %crate::telemetry::error_name(code),
                        "live view: {what} answered"
                    );
                }
                Err(e) => {
                    warn!(target: "purgatory::admin", error = %e, "live view: {what}: no answer")
                }
            }
            conn.close().await;
        });
    }
    Ok(json!({
        "client_id": client_id,
        "metadata_error": metadata_error,
        "correlation_id": correlation_id,
        "topic": send.topic,
        "partition": send.partition,
        "acks": send.acks,
    }))
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
