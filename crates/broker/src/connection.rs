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
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::error_codes as ec;
use crate::handlers::{self, api_versions, Reply, RequestContext};
use crate::replica_manager::ReplicaManager;

/// A frame whose bytes stop arriving for this long is abandoned (the client is gone or
/// hostile); an idle connection between frames may stay open indefinitely.
const MID_FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// The smallest legal request: api key, api version, correlation id.
const MIN_REQUEST_BYTES: usize = 8;

/// A response waiting for its turn to be written.
struct Slot {
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    reply: Reply,
}

/// Why a connection was closed.
#[derive(Debug)]
enum Close {
    /// The client closed it cleanly between frames.
    Eof,
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
    let mut write_task = tokio::spawn(write_loop(writer, slots_rx, peer));
    let outcome = tokio::select! {
        outcome = read_loop(&rm, reader, slots_tx, peer) => outcome,
        // The writer only stops early on a write error: the socket is gone.
        _ = &mut write_task => return,
    };
    match outcome {
        Close::Eof => {
            // Let the writer finish the responses still owed, then it ends.
            let _ = write_task.await;
            debug!(%peer, "connection closed by client");
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
    peer: SocketAddr,
) -> Close {
    loop {
        let frame = match read_frame(&mut reader, rm.config.socket_request_max_bytes).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Close::Eof,
            Err(close) => return close,
        };
        let slot = match handle_frame(rm, frame, peer) {
            Ok(slot) => slot,
            Err(close) => return close,
        };
        if slots.send(slot).await.is_err() {
            return Close::Reason("response writer stopped".into());
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

/// Decodes a request frame and runs its handler.
fn handle_frame(rm: &Arc<ReplicaManager>, frame: Bytes, peer: SocketAddr) -> Result<Slot, Close> {
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
        return Ok(Slot {
            correlation_id,
            api_key,
            api_version: 0,
            reply: Reply::now(ResponseKind::ApiVersions(api_versions::response(
                ec::UNSUPPORTED_VERSION,
            ))),
        });
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
    };
    let reply = handlers::dispatch(rm, &ctx, request);
    Ok(Slot {
        correlation_id,
        api_key,
        api_version,
        reply,
    })
}

async fn write_loop(mut writer: OwnedWriteHalf, mut slots: mpsc::Receiver<Slot>, peer: SocketAddr) {
    while let Some(slot) = slots.recv().await {
        let response = match slot.reply {
            Reply::Nothing => continue,
            Reply::Now(response) => *response,
            Reply::Later(rx) => match rx.await {
                Ok(response) => response,
                // The operation was dropped without answering (broker shutting down).
                Err(_) => return,
            },
        };
        let frame = match encode_response(slot.correlation_id, slot.api_version, &response) {
            Ok(frame) => frame,
            Err(e) => {
                warn!(%peer, api_key = ?slot.api_key, version = slot.api_version, error = %e, "could not encode response; closing connection");
                return;
            }
        };
        if let Err(e) = writer.write_all(&frame).await {
            debug!(%peer, error = %e, "write failed; client gone");
            return;
        }
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
}
