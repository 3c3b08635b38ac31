//! Property tests: no input bytes make `append` panic, and random sequences of
//! operations keep the offsets' invariants.

use bytes::Bytes;
use proptest::prelude::*;

use super::{both_fetch, three_replicas};
use crate::batch::{batch_headers, record_offsets_and_timestamps};
use crate::test_util::{fix_crc, BatchBuilder};
use crate::{LogConfig, Partition, ReadBound};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = batch_headers(&bytes).count();
        let _ = record_offsets_and_timestamps(&bytes);
        let mut p = three_replicas();
        let before = p.log_end_offset();
        match p.append(Bytes::from(bytes), 1) {
            Ok(info) => prop_assert_eq!(info.last_offset + 1, p.log_end_offset()),
            Err(_) => prop_assert_eq!(p.log_end_offset(), before),
        }
    }

    #[test]
    fn mutated_valid_batches_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
        recompute_crc in any::<bool>(),
    ) {
        let mut bytes = [BatchBuilder::new(3).build(), BatchBuilder::new(2).build()].concat();
        for (at, value) in edits {
            let at = at % bytes.len();
            bytes[at] = value;
        }
        if recompute_crc {
            // Get past the CRC check so the header rules and record walker are exercised.
            let first_len = BatchBuilder::new(3).build().len();
            fix_crc(&mut bytes[..first_len]);
        }
        bytes.truncate(cut % (bytes.len() + 1));
        let mut p = three_replicas();
        let _ = batch_headers(&bytes).count();
        let _ = record_offsets_and_timestamps(&bytes);
        if let Ok(info) = p.append(Bytes::from(bytes), 1) {
            prop_assert!(info.last_offset >= info.base_offset);
            prop_assert_eq!(p.log_end_offset(), info.last_offset + 1);
            let leo = p.log_end_offset();
            both_fetch(&mut p, leo, 2);
            let _ = p.offset_for_timestamp(0, crate::ReadBound::LogEnd);
            let _ = p.offset_for_max_timestamp(crate::ReadBound::HighWatermark);
        }
    }

    #[test]
    fn random_operations_keep_the_offset_invariants(
        ops in proptest::collection::vec((0u8..6, 0i64..40, 0u64..20_000), 1..80),
    ) {
        let config = LogConfig {
            replica_lag_time_max_ms: 10_000,
            retention_bytes: 300,
            ..Default::default()
        };
        let mut p = Partition::new("t", 0, 1, vec![1, 2, 3], config, 0);
        let mut now = 0u64;
        let mut last_hw = 0;
        for (op, n, dt) in ops {
            now += dt;
            match op {
                0 => { p.append(BatchBuilder::new(n as usize % 4 + 1).bytes(), now).unwrap(); }
                1 | 2 => {
                    let id = if op == 1 { 2 } else { 3 };
                    let offset = p.log_end_offset() - n % (p.log_end_offset() + 1);
                    let _ = p.update_follower_fetch(id, offset, now);
                }
                3 => { p.maybe_shrink_isr(now); }
                4 => { p.enforce_retention(); }
                _ => {
                    let offset = n.min(p.log_end_offset());
                    if let Ok(r) = p.read(offset, 100, ReadBound::HighWatermark) {
                        for h in batch_headers(&r.records) {
                            prop_assert!(h.last_offset() < p.high_watermark());
                        }
                    }
                }
            }
            prop_assert!(p.high_watermark() >= last_hw, "HW moved back");
            last_hw = p.high_watermark();
            prop_assert!(p.log_start_offset() <= p.high_watermark());
            prop_assert!(p.high_watermark() <= p.log_end_offset());
            prop_assert!(p.isr().contains(&1));
            prop_assert_eq!(
                p.bytes_available(p.log_start_offset(), ReadBound::LogEnd),
                p.size_bytes()
            );
        }
    }
}
