//! The reading side of a connection: size-prefixed frames out of the socket, then each
//! frame's header checked and its body decoded into a request (or a reason to close).

use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::Decodable;
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;
use tracing::debug;

use super::{Close, Slot};
use crate::handlers::{self, api_versions, Reply, RequestContext};

/// A frame whose bytes stop arriving for this long is abandoned (the client is gone or
/// hostile); an idle connection between frames may stay open indefinitely.
const MID_FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// The smallest legal request: api key, api version, correlation id.
const MIN_REQUEST_BYTES: usize = 8;

/// Bytes asked of the socket per read while looking for frames.
///
/// One read usually brings in a whole request, or several pipelined ones, where reading the
/// length prefix and then the body took two. And a read that returns less than it asked for
/// tells tokio the socket is drained (epoll is edge-triggered), so the next read waits for
/// readiness instead of making a system call that ends in EAGAIN: one `recvfrom` per
/// request instead of three.
const READ_CHUNK: usize = 16 * 1024;

/// Reads size-prefixed frames from a connection through a buffer.
///
/// Each frame still gets an allocation of its own, exactly its size: a produce's batches are
/// stored in the log as received, and must not pin a shared read buffer. Frames that fit
/// in the buffer are copied out of it (small: a memcpy is cheaper than a system call);
/// larger ones are read straight into their own buffer, which grows as bytes arrive rather
/// than trusting the length prefix up front, so a client announcing 100 MiB and sending
/// nothing costs almost nothing.
pub(super) struct FrameReader {
    reader: OwnedReadHalf,
    buf: BytesMut,
    /// Where frames larger than [`READ_CHUNK`] are read (see [`FrameReader::read_frame`]).
    large: BytesMut,
}

/// A large frame's buffer is reused for the next one up to this size.
const KEEP_LARGE_FRAME_BUFFER_BYTES: usize = 4 << 20;

impl FrameReader {
    pub(super) fn new(reader: OwnedReadHalf) -> Self {
        FrameReader {
            reader,
            buf: BytesMut::new(),
            large: BytesMut::new(),
        }
    }

    /// Reads and drops frames until the client closes the connection (a fault rule
    /// blackholed it): every frame is still checked, so bad input closes it as usual.
    pub(super) async fn discard_until_closed(&mut self, max_bytes: usize) -> Close {
        loop {
            match self.read_frame(max_bytes).await {
                Ok(Some(_)) => {}
                Ok(None) => return Close::Eof,
                Err(close) => return close,
            }
        }
    }

    /// Reads one frame. `Ok(None)` is a clean end of stream between frames.
    pub(super) async fn read_frame(&mut self, max_bytes: usize) -> Result<Option<Bytes>, Close> {
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
pub(super) enum Decoded {
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
pub(super) fn decode_frame(frame: Bytes, peer: SocketAddr) -> Result<Decoded, Close> {
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
            answered: None,
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
