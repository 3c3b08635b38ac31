//! A small async Kafka client connection: size-prefixed frames, request headers and
//! correlation ids, typed with the `kafka-protocol` crate.
//!
//! # The Kafka concept
//!
//! The Kafka protocol is a sequence of frames over one TCP connection. Each frame is a
//! 4-byte big-endian length followed by that many bytes. A request frame starts with a
//! **request header**: `api_key` (which API, e.g. 1 = Fetch), `api_version`, a
//! `correlation_id` chosen by the client, and a `client_id`. Header v1 is for the older,
//! "non-flexible" API versions; header v2 adds tagged fields and is used by the "flexible"
//! versions (e.g. Fetch v12+, Metadata v9+). The response frame starts with a **response
//! header** carrying the same correlation id (v0, or v1 with tagged fields; ApiVersions always
//! answers with v0 so that a client that guessed a too-new version can still read it).
//!
//! A broker answers the requests of one connection **in order**, so a client may pipeline
//! several requests and read the answers back one by one; a request the broker parks (a
//! long-polling Fetch, an `acks=all` Produce) holds back every answer behind it.
//!
//! [`KafkaConnection`] is deliberately thin: it sends any request at any version you ask
//! for and checks only the framing and the correlation id. The follower simulator uses it,
//! and so can tests that want to drive a broker by hand (including with hostile bytes, via
//! [`KafkaConnection::send_raw`]).
//!
//! # Cancellation
//!
//! If a future returned by a method of this type is dropped half way (e.g. it lost a
//! `tokio::select!`), part of a frame may have been written or read: throw the connection
//! away.

use anyhow::{bail, Context, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Default limit on the size of a response frame this client will accept: 128 MiB.
///
/// The length prefix comes from the network, so it is checked before anything is allocated.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 128 * 1024 * 1024;

/// Bytes asked of the socket per read while looking for frames. One read usually brings in
/// a whole response, where reading the length prefix and then the body took two; and a read
/// that returns less than it asked for tells tokio the socket is drained (epoll is
/// edge-triggered), so the next read waits for readiness instead of making a system call
/// that ends in EAGAIN. A follower on the acks=all path makes one `recvfrom` per Fetch
/// response instead of three.
const READ_CHUNK: usize = 16 * 1024;

/// One client connection to a Kafka broker.
#[derive(Debug)]
pub struct KafkaConnection {
    stream: TcpStream,
    peer: SocketAddr,
    client_id: Option<String>,
    next_correlation_id: i32,
    max_frame_bytes: usize,
    /// Bytes read but not yet returned as frames.
    read_buf: BytesMut,
    /// Request frames are encoded here; it keeps its capacity between requests.
    write_buf: BytesMut,
    /// Length of the last frame received.
    last_frame_len: usize,
}

impl KafkaConnection {
    /// Connects to `addr` (`host:port`) with `TCP_NODELAY` set and client id
    /// `"followersim"`.
    pub async fn connect(addr: &str) -> Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        Self::from_stream(stream)
    }

    /// Wraps an already connected stream.
    pub fn from_stream(stream: TcpStream) -> Result<Self> {
        stream.set_nodelay(true).context("setting TCP_NODELAY")?;
        let peer = stream.peer_addr().context("reading the peer address")?;
        Ok(KafkaConnection {
            stream,
            peer,
            client_id: Some("followersim".to_owned()),
            next_correlation_id: 1,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            read_buf: BytesMut::new(),
            write_buf: BytesMut::new(),
            last_frame_len: 0,
        })
    }

    /// Sets the `client_id` put in every request header (`None` sends a null string).
    pub fn set_client_id(&mut self, client_id: Option<String>) {
        self.client_id = client_id;
    }

    /// Builder-style [`set_client_id`](Self::set_client_id).
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(client_id.into());
        self
    }

    /// Sets the largest response frame accepted (see [`DEFAULT_MAX_FRAME_BYTES`]).
    pub fn set_max_frame_bytes(&mut self, bytes: usize) {
        self.max_frame_bytes = bytes;
    }

    /// The broker's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// Length of the last frame received (its allocation's size, for frames longer than
    /// 16 KiB: those are read into a buffer of their own).
    pub fn last_frame_len(&self) -> usize {
        self.last_frame_len
    }

    /// Takes the next correlation id (they count up from 1, wrapping at `i32::MAX`).
    pub fn next_correlation_id(&mut self) -> i32 {
        let id = self.next_correlation_id;
        self.next_correlation_id = if id == i32::MAX { 1 } else { id + 1 };
        id
    }

    /// Sends `req` at `version` and waits for its response.
    ///
    /// Any version may be asked for; if `kafka-protocol` cannot encode the request at that
    /// version the error says so and nothing is sent. Do not use this for requests that get
    /// no response (Produce with `acks=0`): use [`write_request`](Self::write_request).
    pub async fn send<Req: Request>(&mut self, req: &Req, version: i16) -> Result<Req::Response> {
        let correlation_id = self.write_request(req, version).await?;
        let (got, resp) = self.read_response::<Req>(version).await?;
        if got != correlation_id {
            bail!(
                "response correlation id {got} does not match request {correlation_id} (api key {})",
                Req::KEY
            );
        }
        Ok(resp)
    }

    /// Writes one request without waiting for the answer; returns its correlation id.
    ///
    /// Use with [`read_response`](Self::read_response) to pipeline several requests.
    pub async fn write_request<Req: Request>(&mut self, req: &Req, version: i16) -> Result<i32> {
        let correlation_id = self.next_correlation_id();
        self.write_buf.clear();
        encode_request_into(
            &mut self.write_buf,
            req,
            version,
            correlation_id,
            self.client_id.as_deref(),
        )?;
        let written = self.stream.write_all(&self.write_buf).await;
        if self.write_buf.capacity() > 1 << 20 {
            // Do not keep a big request's buffer for ever.
            self.write_buf = BytesMut::new();
        }
        written.with_context(|| format!("writing a request to {}", self.peer))?;
        Ok(correlation_id)
    }

    /// Reads the next response frame and decodes it as the response to a `Req` sent at
    /// `version`. Returns the correlation id it carries and the response.
    pub async fn read_response<Req: Request>(
        &mut self,
        version: i16,
    ) -> Result<(i32, Req::Response)> {
        let Some(mut frame) = self.recv_frame().await? else {
            bail!("{} closed the connection", self.peer);
        };
        let header_version = <Req::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut frame, header_version)
            .context("decoding the response header")?;
        let resp =
            <Req::Response as Decodable>::decode(&mut frame, version).with_context(|| {
                format!(
                    "decoding the response to api key {} v{version} (correlation id {})",
                    Req::KEY,
                    header.correlation_id
                )
            })?;
        Ok((header.correlation_id, resp))
    }

    /// Writes `payload` as one frame (the 4-byte length prefix is added). The payload is sent
    /// as is, so it can be any bytes at all: a made-up api key, a truncated body, garbage.
    pub async fn send_raw(&mut self, payload: &[u8]) -> Result<()> {
        let len = i32::try_from(payload.len()).context("payload longer than i32::MAX")?;
        let mut frame = BytesMut::with_capacity(4 + payload.len());
        frame.put_i32(len);
        frame.put_slice(payload);
        self.send_raw_bytes(&frame).await
    }

    /// Writes `bytes` to the socket exactly as given, without a length prefix (for lying
    /// length prefixes and frames split across writes).
    pub async fn send_raw_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream
            .write_all(bytes)
            .await
            .with_context(|| format!("writing to {}", self.peer))
    }

    /// Reads one frame (without its length prefix). Returns `Ok(None)` if the broker closed
    /// the connection cleanly before a new frame started.
    pub async fn recv_frame(&mut self) -> Result<Option<Bytes>> {
        while self.read_buf.len() < 4 {
            if self.fill().await? == 0 {
                // Also within a length prefix, as `read_exact` would have it.
                return Ok(None);
            }
        }
        let len = i32::from_be_bytes(self.read_buf[..4].try_into().expect("four bytes"));
        let len = usize::try_from(len)
            .ok()
            .filter(|&l| l <= self.max_frame_bytes)
            .with_context(|| {
                format!(
                    "{} sent a frame length of {len}, outside 0..={}",
                    self.peer, self.max_frame_bytes
                )
            })?;
        self.last_frame_len = len;
        if len <= READ_CHUNK {
            while self.read_buf.len() < 4 + len {
                if self.fill().await? == 0 {
                    bail!(
                        "reading a {len}-byte frame from {}: early end of stream",
                        self.peer
                    );
                }
            }
            self.read_buf.advance(4);
            return Ok(Some(self.read_buf.split_to(len).freeze()));
        }
        // A large frame: what is buffered is its start; read the rest straight into a buffer
        // of its own rather than through the small one.
        self.read_buf.advance(4);
        let buffered = self.read_buf.len().min(len);
        let mut frame = BytesMut::with_capacity(len);
        frame.extend_from_slice(&self.read_buf[..buffered]);
        self.read_buf.advance(buffered);
        while frame.len() < len {
            let mut limited = (&mut self.stream).take((len - frame.len()) as u64);
            let n = limited
                .read_buf(&mut frame)
                .await
                .with_context(|| format!("reading a {len}-byte frame from {}", self.peer))?;
            if n == 0 {
                bail!(
                    "reading a {len}-byte frame from {}: early end of stream",
                    self.peer
                );
            }
        }
        Ok(Some(frame.freeze()))
    }

    /// One read into the buffer; 0 at the end of the stream.
    async fn fill(&mut self) -> Result<usize> {
        self.read_buf.reserve(READ_CHUNK);
        self.stream
            .read_buf(&mut self.read_buf)
            .await
            .with_context(|| format!("reading from {}", self.peer))
    }

    /// Shuts down the writing side, then drops the connection.
    pub async fn close(mut self) {
        // Best effort: the peer may already be gone.
        let _ = self.stream.shutdown().await;
    }
}

/// Encodes a whole request frame (length prefix, request header, body).
///
/// The header version follows `Req::header_version(version)`: v1 for non-flexible versions,
/// v2 (with tagged fields) for flexible ones.
pub fn encode_request<Req: Request>(
    req: &Req,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<Bytes> {
    let mut buf = BytesMut::new();
    encode_request_into(&mut buf, req, version, correlation_id, client_id)?;
    Ok(buf.freeze())
}

/// Appends a whole request frame to `buf` (as [`encode_request`]).
fn encode_request_into<Req: Request>(
    buf: &mut BytesMut,
    req: &Req,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<()> {
    let header = RequestHeader::default()
        .with_request_api_key(Req::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|c| StrBytes::from_string(c.to_owned())));
    let header_version = <Req as HeaderVersion>::header_version(version);
    let start = buf.len();
    buf.put_i32(0); // length, patched below
    let encoded = header
        .encode(buf, header_version)
        .context("encoding the request header")
        .and_then(|()| {
            req.encode(buf, version)
                .with_context(|| format!("encoding api key {} at version {version}", Req::KEY))
        })
        .and_then(|()| {
            i32::try_from(buf.len() - start - 4).context("request larger than i32::MAX")
        });
    match encoded {
        Ok(len) => {
            buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            buf.truncate(start);
            Err(e)
        }
    }
}

/// Decodes a request frame body (without the length prefix) into its header and the
/// remaining body bytes. Handy for tests that play the broker side.
pub fn decode_request_header(frame: &mut Bytes) -> Result<RequestHeader> {
    if frame.remaining() < 4 {
        bail!("frame too short for a request header");
    }
    kafka_protocol::protocol::decode_request_header_from_buffer(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};
    use tokio::net::TcpListener;

    #[test]
    fn encodes_header_v2_for_flexible_versions() {
        let req = MetadataRequest::default();
        let frame = encode_request(&req, 12, 7, Some("me")).expect("encode");
        let mut body = frame.slice(4..);
        let header = decode_request_header(&mut body).expect("header");
        assert_eq!(header.request_api_key, 3);
        assert_eq!(header.request_api_version, 12);
        assert_eq!(header.correlation_id, 7);
        assert_eq!(header.client_id.as_deref(), Some("me"));
        let decoded = MetadataRequest::decode(&mut body, 12).expect("body");
        assert_eq!(decoded, req);
        assert_eq!(body.remaining(), 0);
    }

    /// A one-shot fake broker: answers one ApiVersions request, then checks an oversized
    /// length prefix is refused without allocating.
    #[tokio::test]
    async fn round_trip_and_frame_limit() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accept");
            let mut conn = KafkaConnection::from_stream(stream).expect("wrap");
            let mut frame = conn.recv_frame().await.expect("read").expect("frame");
            let header = decode_request_header(&mut frame).expect("header");
            assert_eq!(header.request_api_key, 18);
            let resp = ApiVersionsResponse::default().with_error_code(0);
            let mut out = BytesMut::new();
            ResponseHeader::default()
                .with_correlation_id(header.correlation_id)
                .encode(&mut out, 0)
                .expect("encode");
            resp.encode(&mut out, 3).expect("encode");
            conn.send_raw(&out).await.expect("write");
            // Now lie about a frame's length.
            conn.send_raw_bytes(&i32::MAX.to_be_bytes())
                .await
                .expect("write");
            conn
        });
        let mut client = KafkaConnection::connect(&addr.to_string())
            .await
            .expect("connect");
        client.set_max_frame_bytes(1024);
        let resp = client
            .send(&ApiVersionsRequest::default(), 3)
            .await
            .expect("round trip");
        assert_eq!(resp.error_code, 0);
        let err = client.recv_frame().await.unwrap_err();
        assert!(err.to_string().contains("frame length"), "{err}");
        drop(server.await.expect("server"));
    }
}
