//! One client connection: Kafka's framing, in-order responses, and what to do with bad input.
//!
//! Every Kafka request and response is a frame: a 4-byte big-endian length, then that many
//! bytes. A request frame opens with `api_key: i16, api_version: i16, correlation_id: i32`
//! (then the client id and, for flexible versions, tagged fields); a response frame opens
//! with the correlation id.
//!
//! Clients pipeline: a producer may send several requests before the first response. Kafka
//! answers them strictly in request order, so a request parked in a purgatory holds back the
//! responses to every request after it on the same connection. Here the reader task decodes
//! and handles each request, pushing a *slot* for its response into a bounded queue; the
//! writer task awaits the slots in order. When the queue is full the reader stops reading,
//! so a client cannot make the broker buffer without bound.
//!
//! Bad input — a negative or oversized frame length, a truncated frame, an undecodable body,
//! an unknown API key, an unsupported version — closes this connection with a warning naming
//! the peer and the reason; nothing else is affected. The one exception, as in Kafka: an
//! ApiVersions request newer than we support gets a v0 response with UNSUPPORTED_VERSION and
//! our version ranges, so the client can retry with a version we know.

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, Notify};
use tracing::{debug, warn};

use crate::handlers::{self, api_versions, Reply, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::telemetry::{Outcome, RequestName, RequestTiming, Telemetry};

/// A frame whose bytes stop arriving for this long is abandoned (the client is gone or
/// hostile); an idle connection between frames may stay open indefinitely.
const MID_FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// Response bytes one connection may have built but not yet written (see [`ResponseBudget`]).
const RESPONSE_BUDGET_BYTES: usize = 64 << 20;

/// The smallest legal request: api key, api version, correlation id.
const MIN_REQUEST_BYTES: usize = 8;

/// A response waiting for its turn to be written.
struct Slot {
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    reply: Reply,
    /// Bytes reserved in the connection's [`ResponseBudget`] until this slot is written.
    reserved: usize,
    /// Its phase times so far, for the request log and metrics (`None` if untraced).
    timing: Option<RequestTiming>,
}

/// Bounds the response bytes one connection may have built but not yet written.
///
/// A client can pipeline fetches and never read the answers; each fetch response may be
/// tens of MiB. Before handling a fetch the reader reserves what its response may hold
/// (`max_bytes`, capped by `fetch.max.bytes`), waiting while earlier reservations exceed
/// the budget; the writer releases a reservation once the response is on the wire. One
/// request is always let through on an idle connection, however large.
struct ResponseBudget {
    limit: usize,
    used: AtomicUsize,
    released: Notify,
}

impl ResponseBudget {
    fn new(limit: usize) -> Self {
        ResponseBudget {
            limit,
            used: AtomicUsize::new(0),
            released: Notify::new(),
        }
    }

    /// Waits until `bytes` fit (or nothing else is reserved), then reserves them.
    async fn reserve(&self, bytes: usize) {
        loop {
            // Register for the wake-up before checking, so a release in between is not lost.
            let released = self.released.notified();
            let used = self.used.load(Ordering::Acquire);
            if used == 0 || used.saturating_add(bytes) <= self.limit {
                let reserved = used.saturating_add(bytes);
                if self
                    .used
                    .compare_exchange(used, reserved, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return;
                }
                continue;
            }
            released.await;
        }
    }

    fn release(&self, bytes: usize) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            self.released.notify_waiters();
        }
    }
}

/// Why a connection was closed.
#[derive(Debug)]
enum Close {
    /// The client closed it cleanly between frames.
    Eof,
    /// A handler asked to close it once the responses owed are written (the writer logs why).
    AfterResponses,
    /// Bad input or an I/O error; logged at warn.
    Reason(String),
}

impl<E: std::fmt::Display> From<E> for Close {
    fn from(e: E) -> Self {
        Close::Reason(e.to_string())
    }
}

/// Serves one connection until the client leaves or misbehaves.
pub async fn serve(rm: Arc<ReplicaManager>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (reader, writer) = stream.into_split();
    let (slots_tx, slots_rx) = mpsc::channel::<Slot>(rm.config.max_in_flight_per_connection);
    let budget = Arc::new(ResponseBudget::new(RESPONSE_BUDGET_BYTES));
    let telemetry = rm.telemetry.clone();
    let mut write_task = tokio::spawn(write_loop(
        writer,
        slots_rx,
        budget.clone(),
        peer,
        telemetry,
    ));
    let outcome = tokio::select! {
        outcome = read_loop(&rm, reader, slots_tx, &budget, peer) => outcome,
        // The writer only stops early on a write error: the socket is gone.
        _ = &mut write_task => return,
    };
    match outcome {
        Close::Eof => {
            // Let the writer finish the responses still owed, then it ends.
            let _ = write_task.await;
            debug!(%peer, "connection closed by client");
        }
        Close::AfterResponses => {
            let _ = write_task.await;
        }
        Close::Reason(reason) => {
            warn!(%peer, %reason, "closing connection");
            write_task.abort();
        }
    }
}

async fn read_loop(
    rm: &Arc<ReplicaManager>,
    mut reader: OwnedReadHalf,
    slots: mpsc::Sender<Slot>,
    budget: &ResponseBudget,
    peer: SocketAddr,
) -> Close {
    loop {
        let frame = match read_frame(&mut reader, rm.config.socket_request_max_bytes).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Close::Eof,
            Err(close) => return close,
        };
        let received = Instant::now();
        let slot = match decode_frame(frame, peer) {
            Ok(Decoded::Answered(slot)) => slot,
            Ok(Decoded::Request {
                mut ctx,
                api_key,
                request,
            }) => {
                let name = RequestName::of(api_key, &request);
                ctx.trace = rm.telemetry.begin(name, &ctx, received, rm.now_ms());
                let (trace, api_version) = (ctx.trace, ctx.api_version);
                let reserved = response_reservation(rm, &request);
                budget.reserve(reserved).await;
                let local_start = Instant::now();
                let mut slot = handle(rm, ctx, api_key, request, reserved);
                slot.timing = Some(RequestTiming {
                    trace,
                    name,
                    api_version,
                    received,
                    local_start,
                    local_end: Instant::now(),
                });
                slot
            }
            Err(close) => return close,
        };
        let closing = matches!(slot.reply, Reply::Close(_));
        if slots.send(slot).await.is_err() {
            return Close::Reason("response writer stopped".into());
        }
        if closing {
            // Read nothing more; the writer sends what is owed, then closes.
            return Close::AfterResponses;
        }
    }
}

/// Reads one size-prefixed frame. `Ok(None)` is a clean end of stream between frames.
async fn read_frame(reader: &mut OwnedReadHalf, max_bytes: usize) -> Result<Option<Bytes>, Close> {
    let mut size_buf = [0u8; 4];
    let first = reader.read(&mut size_buf).await?;
    if first == 0 {
        return Ok(None);
    }
    if first < 4 {
        match tokio::time::timeout(MID_FRAME_TIMEOUT, reader.read_exact(&mut size_buf[first..]))
            .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => {
                return Err(Close::Reason(
                    "truncated frame: connection ended inside the length prefix".into(),
                ))
            }
            Err(_) => {
                return Err(Close::Reason(
                    "stalled inside a frame's length prefix".into(),
                ))
            }
        }
    }
    let size = i32::from_be_bytes(size_buf);
    if size < 0 {
        return Err(Close::Reason(format!("negative frame size {size}")));
    }
    let size = size as usize;
    if size > max_bytes {
        return Err(Close::Reason(format!(
            "frame of {size} bytes exceeds socket.request.max.bytes ({max_bytes})"
        )));
    }
    if size < MIN_REQUEST_BYTES {
        return Err(Close::Reason(format!(
            "frame of {size} bytes is too short for a request header"
        )));
    }
    // Grow the buffer as bytes arrive rather than trusting the length prefix up front, so a
    // client announcing 100 MiB and sending nothing costs almost nothing.
    let mut body = BytesMut::with_capacity(size.min(64 * 1024));
    while body.len() < size {
        let want = (size - body.len()).min(1 << 20);
        body.reserve(want);
        let mut limited = (&mut *reader).take(want as u64);
        match tokio::time::timeout(MID_FRAME_TIMEOUT, limited.read_buf(&mut body)).await {
            Ok(Ok(0)) => {
                return Err(Close::Reason(format!(
                    "truncated frame: got {} of {size} bytes before the connection ended",
                    body.len()
                )))
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => {
                return Err(Close::Reason(format!(
                    "stalled after {} of {size} bytes of a frame",
                    body.len()
                )))
            }
        }
    }
    Ok(Some(body.freeze()))
}

/// A request frame after decoding.
// One lives for a moment per request and moves straight on; boxing would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
enum Decoded {
    /// Answered without a handler (an ApiVersions request newer than ours).
    Answered(Slot),
    /// A request for its handler.
    Request {
        ctx: RequestContext,
        api_key: ApiKey,
        request: RequestKind,
    },
}

/// Decodes and checks a request frame; bad input becomes a reason to close.
fn decode_frame(frame: Bytes, peer: SocketAddr) -> Result<Decoded, Close> {
    let mut peek = &frame[..];
    let raw_key = peek.get_i16();
    let api_version = peek.get_i16();
    let correlation_id = peek.get_i32();

    let api_key = ApiKey::try_from(raw_key)
        .ok()
        .filter(|k| handlers::supported_range(*k).is_some())
        .ok_or_else(|| Close::Reason(format!("unknown or unsupported API key {raw_key}")))?;
    let (min, max) = handlers::supported_range(api_key).unwrap_or((0, -1));

    if api_key == ApiKey::ApiVersions && api_version > max {
        // KIP-511: answer at v0 with our ranges so the client can downgrade.
        debug!(%peer, api_version, "ApiVersions above our maximum: answering v0 with UNSUPPORTED_VERSION");
        return Ok(Decoded::Answered(Slot {
            correlation_id,
            api_key,
            api_version: 0,
            reply: Reply::now(ResponseKind::ApiVersions(api_versions::response(
                kafka_protocol::ResponseError::UnsupportedVersion.code(),
            ))),
            reserved: 0,
            timing: None,
        }));
    }
    if api_version < min || api_version > max {
        return Err(Close::Reason(format!(
            "unsupported version {api_version} of {api_key:?} (we support {min}-{max})"
        )));
    }
    if api_key == ApiKey::Produce && api_version < handlers::PRODUCE_MIN_ACCEPTED {
        return Err(Close::Reason(format!(
            "Produce v{api_version} is not supported (v0-2 were removed in Kafka 4; use v3+)"
        )));
    }

    let mut buf = frame.clone();
    // Decoding untrusted bytes: a decoder bug must cost one connection, not the broker.
    let decoded = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let header = RequestHeader::decode(&mut buf, api_key.request_header_version(api_version))?;
        let request = RequestKind::decode(api_key, &mut buf, api_version)?;
        anyhow::Ok((header, request))
    }));
    let (header, request) = match decoded {
        Ok(Ok(parsed)) => parsed,
        Ok(Err(e)) => {
            return Err(Close::Reason(format!(
                "undecodable {api_key:?} v{api_version} request: {e}"
            )))
        }
        Err(_) => {
            return Err(Close::Reason(format!(
                "undecodable {api_key:?} v{api_version} request"
            )))
        }
    };
    let ctx = RequestContext {
        correlation_id,
        client_id: header
            .client_id
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default(),
        api_version,
        peer,
        trace: crate::telemetry::TraceId::NONE,
    };
    Ok(Decoded::Request {
        ctx,
        api_key,
        request,
    })
}

/// How many response bytes a request may produce, reserved before it is handled. Only
/// fetch responses carry bulk data.
fn response_reservation(rm: &ReplicaManager, request: &RequestKind) -> usize {
    match request {
        RequestKind::Fetch(fetch) => handlers::fetch::response_max_bytes(rm, fetch),
        _ => 0,
    }
}

/// Runs a decoded request's handler.
fn handle(
    rm: &Arc<ReplicaManager>,
    ctx: RequestContext,
    api_key: ApiKey,
    request: RequestKind,
    reserved: usize,
) -> Slot {
    let reply = handlers::dispatch(rm, &ctx, request);
    Slot {
        correlation_id: ctx.correlation_id,
        api_key,
        api_version: ctx.api_version,
        reply,
        reserved,
        timing: None,
    }
}

/// Decodes a frame and runs its handler, without a response budget (for tests).
#[cfg(test)]
fn handle_frame(rm: &Arc<ReplicaManager>, frame: Bytes, peer: SocketAddr) -> Result<Slot, Close> {
    Ok(match decode_frame(frame, peer)? {
        Decoded::Answered(slot) => slot,
        Decoded::Request {
            ctx,
            api_key,
            request,
        } => handle(rm, ctx, api_key, request, 0),
    })
}

async fn write_loop(
    mut writer: OwnedWriteHalf,
    mut slots: mpsc::Receiver<Slot>,
    budget: Arc<ResponseBudget>,
    peer: SocketAddr,
    telemetry: Arc<Telemetry>,
) {
    // Closes a request's record in the request log (phase times, metrics).
    let finish = |timing: &Option<RequestTiming>,
                  answered: Option<Instant>,
                  send_start: Instant,
                  outcome: Outcome| {
        if let Some(timing) = timing {
            telemetry.finish(timing, answered, send_start, Instant::now(), outcome);
        }
    };
    while let Some(slot) = slots.recv().await {
        let reserved = slot.reserved;
        let timing = slot.timing;
        let response = match slot.reply {
            Reply::Nothing => {
                budget.release(reserved);
                finish(&timing, None, Instant::now(), Outcome::NoResponse);
                continue;
            }
            Reply::Close(reason) => {
                warn!(%peer, api_key = ?slot.api_key, correlation_id = slot.correlation_id, %reason, "closing connection");
                finish(&timing, None, Instant::now(), Outcome::Closed);
                return;
            }
            Reply::Now(response) => (None, *response),
            Reply::Later(rx) => match rx.await {
                Ok(response) => (Some(Instant::now()), response),
                // The operation was dropped without answering (broker shutting down).
                Err(_) => return,
            },
        };
        let (answered, response) = response;
        let send_start = Instant::now();
        let frame = match encode_response(slot.correlation_id, slot.api_version, &response) {
            Ok(frame) => frame,
            Err(e) => {
                warn!(%peer, api_key = ?slot.api_key, version = slot.api_version, error = %e, "could not encode response; closing connection");
                return;
            }
        };
        drop(response);
        let written = writer.write_all(&frame).await;
        drop(frame);
        budget.release(reserved);
        if let Err(e) = written {
            finish(&timing, answered, send_start, Outcome::Closed);
            debug!(%peer, error = %e, "write failed; client gone");
            return;
        }
        finish(&timing, answered, send_start, Outcome::Sent);
    }
}

/// Encodes `size | response header | body` at `api_version`; the response kind knows its
/// API, and the header version follows from it (always v0 for ApiVersions).
pub fn encode_response(
    correlation_id: i32,
    api_version: i16,
    response: &ResponseKind,
) -> anyhow::Result<Bytes> {
    let header_version = response.header_version(api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, header_version)?;
    response.encode(&mut buf, api_version)?;
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    //! Untrusted bytes through the decoder and every handler: whatever arrives, the broker
    //! answers or closes the connection, and never panics.

    use super::*;
    use crate::config::{BrokerConfig, ClockMode};
    use crate::handlers::SUPPORTED_APIS;
    use rand::{Rng, SeedableRng};

    fn frame(api: i16, version: i16, body: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api);
        b.put_i16(version);
        b.put_i32(1);
        b.put_i16(3);
        b.put_slice(b"fuz");
        // Flexible versions carry a tagged-field count in the header.
        if api_header_is_flexible(api, version) {
            b.put_u8(0);
        }
        b.put_slice(body);
        b.freeze()
    }

    fn api_header_is_flexible(api: i16, version: i16) -> bool {
        ApiKey::try_from(api)
            .map(|k| k.request_header_version(version) >= 2)
            .unwrap_or(false)
    }

    #[test]
    fn random_and_mutated_requests_never_panic() {
        let config = BrokerConfig {
            clock: ClockMode::Manual,
            ..BrokerConfig::default()
        };
        let rm = ReplicaManager::new(config);
        let peer: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let mut handled = 0;
        for &(api, min, max) in SUPPORTED_APIS {
            for version in min..=max {
                for round in 0..400 {
                    // Small bodies of random bytes, biased towards plausible lengths and
                    // counts (small positive numbers) so decoding gets deep into messages.
                    let len = rng.gen_range(0..64);
                    let body: Vec<u8> = (0..len)
                        .map(|_| {
                            if round % 2 == 0 {
                                rng.gen_range(0..4)
                            } else {
                                rng.gen()
                            }
                        })
                        .collect();
                    let result = handle_frame(&rm, frame(api as i16, version, &body), peer);
                    if let Ok(slot) = result {
                        if let Reply::Later(mut rx) = slot.reply {
                            rm.timer.advance_by(120_000);
                            let _ = rx.try_recv();
                        }
                        handled += 1;
                    }
                }
            }
        }
        assert!(
            handled > 100,
            "only {handled} random frames decoded: the test is too shallow"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_response_budget_holds_back_the_reader_until_responses_are_written() {
        let budget = Arc::new(ResponseBudget::new(100));
        budget.reserve(60).await;
        budget.reserve(40).await; // exactly at the limit
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.reserve(30).await }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            !waiting.is_finished(),
            "over the budget: the reader must wait"
        );
        budget.release(60); // the writer put a response on the wire
        waiting.await.unwrap();
        assert_eq!(budget.used.load(Ordering::Acquire), 70);
        // One request always goes through on an idle connection, however large.
        budget.release(70);
        budget.reserve(1_000).await;
    }
}
