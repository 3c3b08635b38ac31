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

use std::io::IoSlice;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};
use tracing::{debug, warn};

use crate::apis::KafkaApis;
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
pub async fn serve(apis: Arc<KafkaApis>, stream: TcpStream, peer: SocketAddr) {
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
                let mut slot = handle(apis, ctx, api_key, request, reserved);
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

/// Bytes asked of the socket per read while looking for frames.
///
/// One read usually brings in a whole request, or several pipelined ones, where reading the
/// length prefix and then the body took two. And a read that returns less than it asked for
/// tells tokio the socket is drained (epoll is edge-triggered), so the next read waits for
/// readiness instead of making a system call that ends in EAGAIN: one `recvfrom` per
/// request instead of three. (In the acks=all benchmark the broker reads three frames per
/// message and the followers two; see README.md.)
const READ_CHUNK: usize = 16 * 1024;

/// Reads size-prefixed frames from a connection through a buffer.
///
/// Each frame still gets an allocation of its own, exactly its size: a produce's batches are
/// stored in the log as received, and must not pin a shared read buffer. Frames that fit
/// in the buffer are copied out of it (small: a memcpy is cheaper than a system call);
/// larger ones are read straight into their own buffer, which grows as bytes arrive rather
/// than trusting the length prefix up front, so a client announcing 100 MiB and sending
/// nothing costs almost nothing.
struct FrameReader {
    reader: OwnedReadHalf,
    buf: BytesMut,
    /// Where frames larger than [`READ_CHUNK`] are read (see [`FrameReader::read_frame`]).
    large: BytesMut,
}

/// A large frame's buffer is reused for the next one up to this size.
const KEEP_LARGE_FRAME_BUFFER_BYTES: usize = 4 << 20;

impl FrameReader {
    fn new(reader: OwnedReadHalf) -> Self {
        FrameReader {
            reader,
            buf: BytesMut::new(),
            large: BytesMut::new(),
        }
    }

    /// Reads one frame. `Ok(None)` is a clean end of stream between frames.
    async fn read_frame(&mut self, max_bytes: usize) -> Result<Option<Bytes>, Close> {
        // The length prefix.
        while self.buf.len() < 4 {
            if self.fill().await? == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(Close::Reason(
                        "truncated frame: connection ended inside the length prefix".into(),
                    ))
                };
            }
        }
        let size = i32::from_be_bytes(self.buf[..4].try_into().expect("four bytes"));
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
        // A frame that fits in the read buffer: read it there, copy it out.
        if size <= READ_CHUNK {
            while self.buf.len() < 4 + size {
                if self.fill().await? == 0 {
                    return Err(Close::Reason(format!(
                        "truncated frame: got {} of {size} bytes before the connection ended",
                        self.buf.len() - 4
                    )));
                }
            }
            self.buf.advance(4);
            let frame = Bytes::copy_from_slice(&self.buf[..size]);
            self.buf.advance(size);
            return Ok(Some(frame));
        }
        // A large frame: what is buffered is its start; read the rest into its own buffer.
        // That buffer is the previous large frame's allocation when the handler is done with
        // it (`reserve` reclaims a buffer no `Bytes` points into any more): a producer
        // sending ~1 MB batches would otherwise cost fresh pages (page faults, zeroing) for
        // every request.
        self.buf.advance(4);
        let body = &mut self.large;
        let buffered = self.buf.len().min(size);
        body.reserve(size.min(64 * 1024).max(buffered));
        body.extend_from_slice(&self.buf[..buffered]);
        self.buf.advance(buffered);
        while body.len() < size {
            let want = (size - body.len()).min(1 << 20);
            body.reserve(want);
            let mut limited = (&mut self.reader).take(want as u64);
            match tokio::time::timeout(MID_FRAME_TIMEOUT, limited.read_buf(body)).await {
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
        let frame = body.split().freeze();
        if size > KEEP_LARGE_FRAME_BUFFER_BYTES {
            // Do not hold on to an outsized allocation between requests.
            self.large = BytesMut::new();
        }
        Ok(Some(frame))
    }

    /// One read into the buffer; 0 at the end of the stream. Between frames it may wait for
    /// ever (an idle connection); inside a frame at most [`MID_FRAME_TIMEOUT`].
    async fn fill(&mut self) -> Result<usize, Close> {
        // Reuses the buffer's space once everything in it has been consumed.
        self.buf.reserve(READ_CHUNK);
        if self.buf.is_empty() {
            return Ok(self.reader.read_buf(&mut self.buf).await?);
        }
        match tokio::time::timeout(MID_FRAME_TIMEOUT, self.reader.read_buf(&mut self.buf)).await {
            Ok(read) => Ok(read?),
            Err(_) if self.buf.len() < 4 => Err(Close::Reason(
                "stalled inside a frame's length prefix".into(),
            )),
            Err(_) => Err(Close::Reason(format!(
                "stalled after {} bytes of a frame",
                self.buf.len() - 4
            ))),
        }
    }
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
    apis: &KafkaApis,
    ctx: RequestContext,
    api_key: ApiKey,
    request: RequestKind,
    reserved: usize,
) -> Slot {
    let reply = handlers::dispatch(apis, &ctx, request);
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

/// Responses written in one `write` when several are ready at once, up to about this many
/// bytes (pipelined produces that one high-watermark move completes together).
const COALESCE_BYTES: usize = 256 * 1024;

/// The writer's buffer keeps its capacity between responses up to this size; a larger
/// one is freed once written.
const KEEP_WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Record sets at least this large go from the log to the socket by reference (a `writev`
/// entry) rather than being copied into the response buffer; see [`OutBuf`].
const SPLICE_RECORDS_BYTES: usize = 32 * 1024;

/// Writes the responses in request order.
///
/// Responses are encoded into one buffer that is reused, so steady traffic allocates
/// nothing for them. Once the slot at the head of the queue has its response, the slots
/// queued behind it whose responses are ready too are encoded after it and the lot goes
/// out in one `write` (a system call and a loopback TCP send per response saved); a slot
/// still waiting stops the batch and is awaited next.
async fn write_loop(
    mut writer: OwnedWriteHalf,
    mut slots: mpsc::Receiver<Slot>,
    budget: Arc<ResponseBudget>,
    peer: SocketAddr,
    telemetry: Arc<Telemetry>,
) {
    // Closes a request's record in the request log (phase times, metrics).
    let finish = |timing: Option<RequestTiming>,
                  answered: Option<Instant>,
                  send_start: Instant,
                  outcome: Outcome| {
        if let Some(timing) = timing {
            telemetry.finish(&timing, answered, send_start, Instant::now(), outcome);
        }
    };
    let mut out = OutBuf::default();
    // The requests whose responses are in `out`: (timing, answered at, encoding started at),
    // finished in the request log once the write is done. Reused between writes.
    let mut in_out: Vec<(Option<RequestTiming>, Option<Instant>, Instant)> = Vec::new();
    // A slot taken off the queue whose response was not ready yet: it goes first next time.
    let mut carried: Option<Slot> = None;
    loop {
        let first = match carried.take() {
            Some(slot) => slot,
            None => match slots.recv().await {
                Some(slot) => slot,
                None => return,
            },
        };
        let mut next = Some(first);
        let mut may_wait = true;
        let mut reserved = 0;
        let mut failed = false;
        while let Some(slot) = next.take() {
            let Slot {
                correlation_id,
                api_key,
                api_version,
                reply,
                reserved: slot_reserved,
                timing,
            } = slot;
            let response = match reply {
                Reply::Close(reason) => {
                    // The responses queued before this one still go out first.
                    warn!(%peer, ?api_key, correlation_id, %reason, "closing connection");
                    finish(timing, None, Instant::now(), Outcome::Closed);
                    failed = true;
                    break;
                }
                Reply::Nothing => None,
                Reply::Now(response) => Some((None, *response)),
                Reply::Later(rx) if may_wait => match rx.await {
                    Ok(response) => Some((Some(Instant::now()), response)),
                    // The operation was dropped without answering (broker shutting down).
                    Err(_) => return,
                },
                Reply::Later(mut rx) => match rx.try_recv() {
                    Ok(response) => Some((Some(Instant::now()), response)),
                    Err(oneshot::error::TryRecvError::Empty) => {
                        carried = Some(Slot {
                            correlation_id,
                            api_key,
                            api_version,
                            reply: Reply::Later(rx),
                            reserved: slot_reserved,
                            timing,
                        });
                        break;
                    }
                    Err(oneshot::error::TryRecvError::Closed) => return,
                },
            };
            may_wait = false;
            reserved += slot_reserved;
            match response {
                None => finish(timing, None, Instant::now(), Outcome::NoResponse),
                Some((answered, response)) => {
                    let send_start = Instant::now();
                    if let Err(e) = out.push_response(correlation_id, api_version, &response) {
                        warn!(%peer, ?api_key, version = api_version, error = %e, "could not encode response; closing connection");
                        finish(timing, answered, send_start, Outcome::Closed);
                        failed = true;
                        break;
                    }
                    in_out.push((timing, answered, send_start));
                }
            }
            if out.len() >= COALESCE_BYTES {
                break;
            }
            next = slots.try_recv().ok();
        }
        // The responses before a failed one still go out, in order, as they always did.
        let written = out.write_to(&mut writer).await;
        budget.release(reserved);
        let outcome = if written.is_ok() {
            Outcome::Sent
        } else {
            Outcome::Closed
        };
        for (timing, answered, send_start) in in_out.drain(..) {
            finish(timing, answered, send_start, outcome);
        }
        if let Err(e) = written {
            debug!(%peer, error = %e, "write failed; client gone");
            return;
        }
        if failed {
            return;
        }
    }
}

/// Response frames waiting to be written: encoded bytes, with the large record sets of
/// fetch responses left where they are and spliced in at write time.
///
/// A follower fetching behind a `linger.ms=5` producer gets about 1 MB of records per
/// response. Encoding copies them into the response buffer (a pass over the data, and
/// fresh pages whenever that buffer had to grow), then the kernel copies them again into the
/// socket. Here `kafka-protocol` encodes into [`Splicing`], which recognises a record set
/// it was handed by its address and length and notes it as a [`Segment`] instead of copying
/// it; [`OutBuf::write_to`] then hands the kernel the buffer's pieces and the record sets
/// in one `writev`.
#[derive(Default)]
struct OutBuf {
    /// Everything but the spliced record sets.
    head: BytesMut,
    /// Record sets to insert, in order of position.
    segments: Vec<Segment>,
    /// Total bytes of `segments`.
    spliced: usize,
}

/// A record set written by reference, before `head[at..]`.
struct Segment {
    at: usize,
    bytes: Bytes,
}

impl OutBuf {
    /// Bytes to write (head and spliced records).
    fn len(&self) -> usize {
        self.head.len() + self.spliced
    }

    /// Where the byte at `logical` (counting spliced records) is in `head`. A position
    /// inside a spliced record set maps to the head position after it.
    fn physical(&self, logical: usize) -> usize {
        let mut spliced_before = 0;
        for segment in &self.segments {
            let starts = segment.at + spliced_before;
            if logical <= starts {
                break;
            }
            if logical < starts + segment.bytes.len() {
                return segment.at;
            }
            spliced_before += segment.bytes.len();
        }
        logical - spliced_before
    }

    /// Appends one response frame; on failure nothing is appended.
    fn push_response(
        &mut self,
        correlation_id: i32,
        api_version: i16,
        response: &ResponseKind,
    ) -> anyhow::Result<()> {
        let (head_len, segments) = (self.head.len(), self.segments.len());
        // Only fetch responses carry bulk data worth splicing.
        let large: Vec<Bytes> = match response {
            ResponseKind::Fetch(fetch) => fetch
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter())
                .filter_map(|p| p.records.clone())
                .filter(|r| r.len() >= SPLICE_RECORDS_BYTES)
                .collect(),
            _ => Vec::new(),
        };
        let encoded = match response {
            ResponseKind::Fetch(fetch) if !large.is_empty() => {
                let mut buf = Splicing {
                    out: self,
                    large: &large,
                };
                frame_into(
                    &mut buf,
                    correlation_id,
                    response.header_version(api_version),
                    |buf| fetch.encode(buf, api_version),
                )
            }
            _ => encode_response_into(&mut self.head, correlation_id, api_version, response),
        };
        if encoded.is_err() {
            self.head.truncate(head_len);
            for s in self.segments.drain(segments..) {
                self.spliced -= s.bytes.len();
            }
        }
        encoded
    }

    /// Writes everything with vectored writes, then empties the buffer (keeping its capacity
    /// up to [`KEEP_WRITE_BUFFER_BYTES`]).
    async fn write_to(&mut self, writer: &mut OwnedWriteHalf) -> std::io::Result<()> {
        let written = if self.segments.is_empty() {
            writer.write_all(&self.head).await
        } else {
            let mut slices = Vec::with_capacity(2 * self.segments.len() + 1);
            let mut from = 0;
            for segment in &self.segments {
                slices.push(IoSlice::new(&self.head[from..segment.at]));
                slices.push(IoSlice::new(&segment.bytes));
                from = segment.at;
            }
            slices.push(IoSlice::new(&self.head[from..]));
            slices.retain(|s| !s.is_empty());
            write_all_vectored(writer, &mut slices).await
        };
        self.segments.clear();
        self.spliced = 0;
        if self.head.capacity() > KEEP_WRITE_BUFFER_BYTES {
            self.head = BytesMut::new();
        } else {
            self.head.clear();
        }
        written
    }
}

async fn write_all_vectored(
    writer: &mut OwnedWriteHalf,
    mut slices: &mut [IoSlice<'_>],
) -> std::io::Result<()> {
    while !slices.is_empty() {
        let n = writer.write_vectored(slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        IoSlice::advance_slices(&mut slices, n);
    }
    Ok(())
}

/// The [`ByteBufMut`] a response is encoded into when it has record sets to splice: bytes
/// go to the [`OutBuf`]'s head, except a `put_slice` of exactly one of the `large` record
/// sets (same address, same length), which becomes a [`Segment`].
///
/// Offsets (`offset`, `seek`, `range`) are logical, spliced bytes included, so a frame's
/// size is measured as it will be on the wire (`range` patches the frame's length prefix
/// after the body is encoded; it never reaches into a record set).
struct Splicing<'a> {
    out: &'a mut OutBuf,
    large: &'a [Bytes],
}

// SAFETY: every method forwards to the `BytesMut` head, whose implementation upholds the
// trait's contract; `put_slice` either forwards too or writes nothing to the head.
unsafe impl BufMut for Splicing<'_> {
    fn remaining_mut(&self) -> usize {
        self.out.head.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's promise about `cnt` is about `chunk_mut`, which is the head's.
        unsafe { self.out.head.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.out.head.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        if src.len() >= SPLICE_RECORDS_BYTES {
            if let Some(records) = self
                .large
                .iter()
                .find(|r| r.as_ptr() == src.as_ptr() && r.len() == src.len())
            {
                self.out.segments.push(Segment {
                    at: self.out.head.len(),
                    bytes: records.clone(),
                });
                self.out.spliced += records.len();
                return;
            }
        }
        self.out.head.put_slice(src);
    }
}

impl ByteBufMut for Splicing<'_> {
    fn offset(&self) -> usize {
        self.out.len()
    }

    fn seek(&mut self, offset: usize) {
        let physical = self.out.physical(offset);
        self.out.head.resize(physical, 0);
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        let start = self.out.physical(r.start);
        &mut self.out.head[start..start + r.len()]
    }
}

/// Encodes `size | response header | body` at `api_version`; the response kind knows its
/// API, and the header version follows from it (always v0 for ApiVersions).
pub fn encode_response(
    correlation_id: i32,
    api_version: i16,
    response: &ResponseKind,
) -> anyhow::Result<Bytes> {
    let mut buf = BytesMut::new();
    encode_response_into(&mut buf, correlation_id, api_version, response)?;
    Ok(buf.freeze())
}

/// Appends one response frame to `buf` (as [`encode_response`]). On failure `buf` may hold
/// part of it: the caller truncates.
fn encode_response_into(
    buf: &mut BytesMut,
    correlation_id: i32,
    api_version: i16,
    response: &ResponseKind,
) -> anyhow::Result<()> {
    frame_into(
        buf,
        correlation_id,
        response.header_version(api_version),
        |buf| response.encode(buf, api_version),
    )
}

/// Appends `size | response header | body` to `buf`, the body written by `body`.
fn frame_into<B: ByteBufMut>(
    buf: &mut B,
    correlation_id: i32,
    header_version: i16,
    body: impl FnOnce(&mut B) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let start = buf.offset();
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    buf.put_i32(0);
    header.encode(buf, header_version)?;
    body(buf)?;
    let size = (buf.offset() - start - 4) as i32;
    buf.range(start..start + 4)
        .copy_from_slice(&size.to_be_bytes());
    Ok(())
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
        let apis = KafkaApis::new(ReplicaManager::new(config));
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

    #[test]
    fn spliced_fetch_responses_are_byte_for_byte_the_encoded_ones() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        use kafka_protocol::messages::{FetchResponse, TopicName};
        let records = |n: usize, fill: u8| Some(Bytes::from(vec![fill; n]));
        let fetch =
            FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
                .with_topic(TopicName("t".into()))
                .with_partitions(vec![
                    PartitionData::default()
                        .with_partition_index(0)
                        .with_records(records(SPLICE_RECORDS_BYTES, 1)),
                    PartitionData::default()
                        .with_partition_index(1)
                        .with_records(records(10, 2)),
                    PartitionData::default()
                        .with_partition_index(2)
                        .with_records(records(3 * SPLICE_RECORDS_BYTES + 7, 3)),
                ])]);
        let response = ResponseKind::Fetch(fetch);
        let metadata = ResponseKind::Metadata(Default::default());
        let mut expected = Vec::new();
        let mut out = OutBuf::default();
        for (i, r) in [&metadata, &response, &metadata, &response]
            .into_iter()
            .enumerate()
        {
            for version in [4, 11, 12] {
                let cid = (10 * i) as i32 + i32::from(version);
                expected.extend_from_slice(&encode_response(cid, version, r).unwrap());
                out.push_response(cid, version, r).unwrap();
            }
        }
        assert_eq!(
            out.segments.len(),
            2 * 2 * 3,
            "the two large record sets of each fetch"
        );
        assert_eq!(out.len(), expected.len());
        let mut got = Vec::new();
        let mut from = 0;
        for segment in &out.segments {
            got.extend_from_slice(&out.head[from..segment.at]);
            got.extend_from_slice(&segment.bytes);
            from = segment.at;
        }
        got.extend_from_slice(&out.head[from..]);
        assert!(
            got == expected,
            "spliced bytes differ from the encoded response"
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
