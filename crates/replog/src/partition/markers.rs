//! Transaction markers: the leader appends the COMMIT or ABORT its transaction coordinator
//! decided (Kafka's `WriteTxnMarkers`), and every append, the leader's and a follower's,
//! keeps the transaction index up to date ([`crate::transactions`]).

use bytes::Bytes;

use super::{AppendInfo, Partition};
use crate::batch::BatchHeader;
use crate::error::AppendError;
use crate::transactions::{control_type, encode_marker, ControlType};

impl Partition {
    /// Appends a transaction marker for `producer_id` as the leader: the control batch a
    /// coordinator writes to end the producer's transaction on this partition, committed
    /// or aborted. Refused with [`AppendError::InvalidProducerEpoch`] if the partition
    /// knows a newer epoch of the producer (a fenced coordinator's late marker), and on a
    /// follower. From the marker on, the producer's epoch here is at least
    /// `producer_epoch`.
    pub fn append_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: ControlType,
        now_ms: u64,
    ) -> Result<AppendInfo, AppendError> {
        self.refuse_append_unless_leader()?;
        if let Some(known) = self.producers.producer(producer_id) {
            if producer_epoch < known.producer_epoch {
                return Err(AppendError::InvalidProducerEpoch {
                    producer_id,
                    producer_epoch,
                    current_epoch: known.producer_epoch,
                });
            }
        }
        let timestamp = i64::try_from(now_ms).unwrap_or(i64::MAX);
        let batch = encode_marker(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            control,
            timestamp,
        );
        self.append_trusted(Bytes::from(batch), now_ms)
    }

    /// Takes note of one batch being stored at `base_offset` (`data` is its bytes): a
    /// transactional batch opens its producer's transaction, a marker ends it and moves
    /// the producer's epoch here up to the marker's.
    pub(super) fn note_transaction(&mut self, header: &BatchHeader, base_offset: i64, data: &[u8]) {
        if !header.is_transactional() {
            return;
        }
        let marker = control_type(data, header);
        if marker.is_some() {
            self.producers
                .on_marker(header.producer_id, header.producer_epoch);
        }
        self.txns.on_append(header, base_offset, marker);
        self.txns.on_high_watermark(self.high_watermark);
    }
}
