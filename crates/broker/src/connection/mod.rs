//! One client connection: Kafka's framing, in-order responses, and what to do with bad input.
//!
//! Every Kafka request and response is a frame: a 4-byte big-endian length, then that many
//! bytes. A request frame opens with `api_key: i16, api_version: i16, correlation_id: i32`
//! (then the client id and, for flexible versions, tagged fields); a response frame opens
//! with the correlation id.
//!
//! Clients pipeline: a producer may send several requests before the first response. Kafka
//! takes them one at a time: once it has read a request from a connection it reads nothing
//! more from it until that request is answered (its network layer mutes the channel), so a
//! request parked in a purgatory holds back not only the responses but the *handling* of
//! every request after it on the same connection. A commit sent behind a parked JoinGroup
//! is therefore checked against the generation that JoinGroup ends in. Here the reader task
//! decodes and handles each request, waits for the answer if the request was parked, and
//! pushes a *slot* with its response into a bounded queue; the writer task writes the slots
//! in order. When the queue is full the reader stops reading, so a client cannot make the
//! broker buffer without bound.
//!
//! Bad input — a negative or oversized frame length, a truncated frame, an undecodable body,
//! an unknown API key, an unsupported version — closes this connection with a warning naming
//! the peer and the reason; nothing else is affected. The one exception, as in Kafka: an
//! ApiVersions request newer than we support gets a v0 response with UNSUPPORTED_VERSION and
//! our version ranges, so the client can retry with a version we know.
//!
//! The two directions have a file each: `reader.rs` turns bytes into frames and frames into
//! decoded requests; `writer.rs` encodes the responses, in order, and writes them out. This
//! file holds what joins them: the per-connection tasks, the response slots and the
//! response budget.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

#[cfg(test)]
use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind};
use tokio::net::tcp::OwnedReadHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, warn};

use crate::apis::KafkaApis;
use crate::faults::RequestFacts;
use crate::handlers::{self, Reply, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::telemetry::{RequestName, RequestTiming};

mod inject;
mod reader;
mod writer;

use reader::{decode_frame, Decoded, FrameReader};
pub use writer::encode_response;
use writer::write_loop;

/// Response bytes one connection may have built but not yet written (see [`ResponseBudget`]).
const RESPONSE_BUDGET_BYTES: usize = 64 << 20;

/// A response waiting for its turn to be written.
struct Slot {
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    reply: Reply,
    /// When a parked request's answer came (its "remote" phase ended); `None` for one
    /// answered by its handler.
    answered: Option<Instant>,
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

/// Serves one connection until the client leaves or misbehaves, or `closed` turns true
/// (the broker was killed: the connection closes with nothing more written).
pub async fn serve(
    apis: Arc<KafkaApis>,
    stream: TcpStream,
    peer: SocketAddr,
    mut closed: watch::Receiver<bool>,
) {
    let rm = &apis.replica_manager;
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
        outcome = read_loop(&apis, reader, slots_tx, &budget, peer) => outcome,
        // The writer only stops early on a write error: the socket is gone.
        _ = &mut write_task => return,
        _ = closed.wait_for(|closed| *closed) => {
            debug!(%peer, "connection closed: the broker stopped");
            write_task.abort();
            return;
        }
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
    apis: &KafkaApis,
    reader: OwnedReadHalf,
    slots: mpsc::Sender<Slot>,
    budget: &ResponseBudget,
    peer: SocketAddr,
) -> Close {
    let rm = &apis.replica_manager;
    let mut reader = FrameReader::new(reader);
    loop {
        let frame = match reader.read_frame(rm.config.socket_request_max_bytes).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Close::Eof,
            Err(close) => return close,
        };
        let received = Instant::now();
        let mut injected = None;
        let slot = match decode_frame(frame, peer) {
            Ok(Decoded::Answered(slot)) => slot,
            Ok(Decoded::Request {
                mut ctx,
                api_key,
                request,
            }) => {
                let name = RequestName::of(api_key, &request);
                ctx.trace = rm.telemetry.begin(name, &ctx, received, rm.now_ms());
                let (trace, api_version, correlation_id) =
                    (ctx.trace, ctx.api_version, ctx.correlation_id);
                // With no rule armed (the usual case) a request costs one atomic load here:
                // its facts are only read when there is a rule to match them against.
                let fired = if rm.faults.is_armed() {
                    rm.faults.check(&RequestFacts::of(
                        api_key,
                        api_version,
                        &ctx.client_id,
                        rm.config.broker_id,
                        &request,
                    ))
                } else {
                    None
                };
                let request = match fired {
                    None => Some(request),
                    Some(fired) => match inject::inject(rm, &ctx, request, fired).await {
                        Ok(mut fault) => {
                            let request = fault.request.take();
                            injected = Some(fault);
                            request
                        }
                        Err(close) => return close,
                    },
                };
                let reserved = request
                    .as_ref()
                    .map_or(0, |request| response_reservation(rm, request));
                budget.reserve(reserved).await;
                let local_start = Instant::now();
                let mut slot = match request {
                    Some(request) => handle(apis, ctx, api_key, request, reserved),
                    // A rule answered it without the handler.
                    None => Slot {
                        correlation_id,
                        api_key,
                        api_version,
                        reply: injected
                            .as_mut()
                            .and_then(|fault| fault.reply.take())
                            .unwrap_or(Reply::Nothing),
                        answered: None,
                        reserved: 0,
                        timing: None,
                    },
                };
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
        let mut slot = slot;
        if let Reply::Later(parked) = slot.reply {
            // Read nothing more until the parked request is answered, as Kafka does.
            match parked.await {
                Ok(response) => {
                    slot.reply = Reply::now(response);
                    slot.answered = Some(Instant::now());
                }
                // Dropped unanswered: the broker is shutting down.
                Err(_) => return Close::Reason("the broker stopped before answering".into()),
            }
        }
        if let Some(fault) = &mut injected {
            slot.reply = inject::finish_reply(slot.reply, fault);
        }
        let closing = matches!(slot.reply, Reply::Close(_));
        if slots.send(slot).await.is_err() {
            return Close::Reason("response writer stopped".into());
        }
        if closing {
            // Read nothing more; the writer sends what is owed, then closes.
            return Close::AfterResponses;
        }
        let Some(fault) = injected else { continue };
        if fault.then_silent {
            // Blackholed or dropped: what the client sends from now on goes unanswered,
            // until it gives up and closes the connection.
            return reader
                .discard_until_closed(rm.config.socket_request_max_bytes)
                .await;
        }
        if let Some(ms) = fault.throttle_ms {
            // Muted, as Kafka mutes a throttled channel: nothing more is read until then.
            let (muted, _) = rm.faults.hold(&fault.ctx, fault.rule, "throttle", ms);
            if muted.await.is_err() {
                return Close::Reason("the broker stopped during a throttle".into());
            }
        }
    }
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
    apis: &KafkaApis,
    ctx: RequestContext,
    api_key: ApiKey,
    request: RequestKind,
    reserved: usize,
) -> Slot {
    let reply = apis.handle(&ctx, request);
    Slot {
        correlation_id: ctx.correlation_id,
        api_key,
        api_version: ctx.api_version,
        reply,
        answered: None,
        reserved,
        timing: None,
    }
}

/// Decodes a frame and runs its handler, without a response budget (for tests).
#[cfg(test)]
fn handle_frame(apis: &KafkaApis, frame: Bytes, peer: SocketAddr) -> Result<Slot, Close> {
    Ok(match decode_frame(frame, peer)? {
        Decoded::Answered(slot) => slot,
        Decoded::Request {
            ctx,
            api_key,
            request,
        } => handle(apis, ctx, api_key, request, 0),
    })
}
#[cfg(test)]
mod tests {
    //! Untrusted bytes through the decoder and every handler: whatever arrives, the broker
    //! answers or closes the connection, and never panics.

    use super::*;
    use crate::handlers::SUPPORTED_APIS;
    use bytes::{BufMut, BytesMut};
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
        let apis = KafkaApis::new(ReplicaManager::new(crate::test_util::manual_config(|_| {})));
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
                    let result = handle_frame(&apis, frame(api as i16, version, &body), peer);
                    if let Ok(slot) = result {
                        if let Reply::Later(mut rx) = slot.reply {
                            apis.replica_manager.timer.advance_by(120_000);
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
