//! The writing side of a connection: responses encoded in request order, coalesced into
//! as few writes as the slots' readiness allows, with large fetched record sets written
//! from the log by reference instead of copied.

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ResponseHeader, ResponseKind};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::{ResponseBudget, Slot};
use crate::handlers::Reply;
use crate::telemetry::{Outcome, RequestTiming, Telemetry};

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
/// nothing for them. The slots queued behind the first are encoded after it and the lot
/// goes out in one `write` (a system call and a loopback TCP send per response saved).
pub(super) async fn write_loop(
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
    loop {
        let Some(first) = slots.recv().await else {
            return;
        };
        let mut next = Some(first);
        let mut reserved = 0;
        let mut failed = false;
        while let Some(slot) = next.take() {
            let Slot {
                correlation_id,
                api_key,
                api_version,
                reply,
                answered,
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
                Reply::Now(response) => Some((answered, *response)),
                // The reader answers parked requests before it reads on (see
                // `connection::read_loop`), so this is only a safety net.
                Reply::Later(rx) => match rx.await {
                    Ok(response) => Some((Some(Instant::now()), response)),
                    // The operation was dropped without answering (broker shutting down).
                    Err(_) => return,
                },
            };
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
    use super::*;

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
}
