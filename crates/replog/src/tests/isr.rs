//! High watermark, ISR shrink and expand, and the last-caught-up rule, on a manual clock.

use super::{both_fetch, three_replicas, three_replicas_with};
use crate::test_util::BatchBuilder;
use crate::{AppendError, FollowerError, LogConfig, Marks, Partition, ReplicationState};

const LAG: u64 = 30_000;

#[test]
fn new_partition_has_every_replica_in_sync() {
    let p = three_replicas();
    assert_eq!(p.replicas(), &[1, 2, 3]);
    assert_eq!(p.isr(), vec![1, 2, 3]);
    assert_eq!((p.isr_len(), p.min_insync_replicas()), (3, 2));
    assert_eq!((p.leader_id(), p.leader_epoch()), (1, 0));
    let f = p.follower(2).unwrap();
    assert_eq!(
        (
            f.log_end_offset,
            f.last_fetch_time_ms,
            f.last_caught_up_time_ms
        ),
        (0, None, 0)
    );
    assert!(f.in_isr);
    assert!(p.follower(1).is_none(), "the leader is not a follower");
}

#[test]
fn replicas_are_normalised_leader_first_without_repeats() {
    let p = Partition::new("t", 0, 5, vec![3, 5, 3, 4], LogConfig::default(), 0);
    assert_eq!(p.replicas(), &[5, 3, 4]);
    assert_eq!(p.isr(), vec![5, 3, 4]);
    let p = Partition::new("t", 0, 9, vec![1, 2], LogConfig::default(), 0);
    assert_eq!(p.replicas(), &[9, 1, 2]);
}

#[test]
fn the_minimum_isr_in_force_is_capped_by_the_replication_factor() {
    // min.insync.replicas = 2 (the default) on topics with one and two replicas.
    let mut single = Partition::new("t", 0, 1, vec![1], LogConfig::default(), 0);
    assert_eq!(
        (single.min_insync_replicas(), single.effective_min_isr()),
        (2, 1)
    );
    let info = single
        .append_as_leader(BatchBuilder::new(3).bytes(), -1, 1)
        .expect("acks=all is accepted on a single-replica topic");
    assert!(
        info.change.high_watermark_advanced(),
        "the leader alone is the whole ISR"
    );
    assert_eq!(single.high_watermark(), 3);
    assert_eq!(single.replication_state(3), ReplicationState::Replicated);

    let mut pair = Partition::new("t", 0, 1, vec![1, 2], LogConfig::default(), 0);
    assert_eq!(pair.effective_min_isr(), 2);
    pair.append_as_leader(BatchBuilder::new(1).bytes(), -1, 1)
        .unwrap();
    assert_eq!(pair.replication_state(1), ReplicationState::Pending);
    pair.update_follower_fetch(2, 1, 2).unwrap();
    assert_eq!(pair.replication_state(1), ReplicationState::Replicated);

    // With three replicas the configured minimum of 2 is in force.
    let p = three_replicas_with(LogConfig {
        min_insync_replicas: 5,
        ..LogConfig::default()
    });
    assert_eq!(p.effective_min_isr(), 3);
}

#[test]
fn acks_all_is_refused_below_the_minimum_isr_and_nothing_is_appended() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).bytes(), 0).unwrap();
    // Both followers fall behind and leave the ISR.
    assert_eq!(p.maybe_shrink_isr(LAG + 1).removed, vec![2, 3]);
    let err = p
        .append_as_leader(BatchBuilder::new(1).bytes(), -1, LAG + 2)
        .unwrap_err();
    assert_eq!(
        err,
        AppendError::NotEnoughReplicas {
            isr_size: 1,
            min_isr: 2
        }
    );
    assert_eq!(p.log_end_offset(), 1);
    // acks=1 is still accepted.
    p.append_as_leader(BatchBuilder::new(1).bytes(), 1, LAG + 2)
        .unwrap();
    assert_eq!(p.log_end_offset(), 2);
}

#[test]
fn replicated_below_min_isr_when_the_isr_shrank_after_the_hw_passed() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).bytes(), 0).unwrap();
    both_fetch(&mut p, 1, 1);
    assert_eq!(p.replication_state(1), ReplicationState::Replicated);
    // More data the followers never fetch: they leave the ISR, the HW stays put.
    p.append(BatchBuilder::new(1).bytes(), 2).unwrap();
    assert_eq!(p.maybe_shrink_isr(LAG + 3).removed, vec![2, 3]);
    assert_eq!(p.high_watermark(), 1);
    assert_eq!(
        p.replication_state(1),
        ReplicationState::ReplicatedBelowMinIsr
    );
    assert_eq!(p.replication_state(2), ReplicationState::Pending);
}

#[test]
fn high_watermark_is_the_minimum_leo_over_the_isr() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(10).bytes(), 1).unwrap();
    let u = p.update_follower_fetch(2, 10, 2).unwrap();
    assert!(
        !u.change.high_watermark_advanced(),
        "follower 3 still has nothing"
    );
    assert_eq!(u.change.after.high_watermark, 0);
    let u = p.update_follower_fetch(3, 4, 3).unwrap();
    assert!(u.change.high_watermark_advanced());
    assert_eq!(p.high_watermark(), 4);
    p.update_follower_fetch(3, 10, 4).unwrap();
    assert_eq!(p.high_watermark(), 10);
}

#[test]
fn high_watermark_never_moves_backwards() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(10).bytes(), 1).unwrap();
    both_fetch(&mut p, 8, 2);
    assert_eq!(p.high_watermark(), 8);
    // A follower that truncated and fetches from further back does not pull the HW down.
    let u = p.update_follower_fetch(2, 3, 3).unwrap();
    assert_eq!(
        (
            u.change.after.high_watermark,
            u.change.high_watermark_advanced()
        ),
        (8, false)
    );
    assert_eq!(p.follower(2).unwrap().log_end_offset, 3);
    assert_eq!(p.high_watermark(), 8);
}

#[test]
fn follower_without_a_fetch_for_lag_plus_one_ms_leaves_the_isr() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(1).bytes(), 100).unwrap();
    p.update_follower_fetch(2, 1, 100).unwrap(); // 2 caught up at t=100; 3 never fetches
                                                 // Follower 3 was last caught up at creation (t=0).
    assert!(
        p.maybe_shrink_isr(LAG).removed.is_empty(),
        "exactly lag ms: still in sync"
    );
    assert_eq!(p.maybe_shrink_isr(LAG + 1).removed, vec![3]);
    assert_eq!(p.isr(), vec![1, 2]);
    assert!(!p.follower(3).unwrap().in_isr);
    // ISR {1, 2} still satisfies min ISR 2, and both hold offset 0: HW = 1.
    assert_eq!(p.high_watermark(), 1);
}

#[test]
fn follower_whose_last_fetch_was_caught_up_stays_within_the_lag() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(2).bytes(), 500).unwrap();
    both_fetch(&mut p, 2, 1_000); // caught up to LEO 2 at t=1000
    p.append(BatchBuilder::new(2).bytes(), 1_500).unwrap(); // LEO 4; nobody fetches again
    assert!(p.maybe_shrink_isr(1_000 + LAG).removed.is_empty());
    assert_eq!(p.isr(), vec![1, 2, 3]);
    // One ms later neither is caught up any more.
    assert_eq!(p.maybe_shrink_isr(1_000 + LAG + 1).removed, vec![2, 3]);
    assert_eq!(p.isr(), vec![1]);
}

#[test]
fn follower_at_the_leader_leo_is_never_removed_even_when_silent() {
    // Kafka's isCaughtUp: LEO equal to the leader's counts, however old the fetch.
    let mut p = three_replicas();
    assert!(p.maybe_shrink_isr(10 * LAG).removed.is_empty());
    p.append(BatchBuilder::new(1).bytes(), 10 * LAG).unwrap();
    both_fetch(&mut p, 1, 10 * LAG);
    assert!(p.maybe_shrink_isr(100 * LAG).removed.is_empty());
}

#[test]
fn out_of_sync_follower_rejoins_when_its_leo_reaches_the_hw() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(4).bytes(), 1).unwrap();
    p.update_follower_fetch(2, 4, 2).unwrap();
    assert_eq!(p.maybe_shrink_isr(LAG + 1).removed, vec![3]);
    assert_eq!(p.high_watermark(), 4, "ISR {{1, 2}} both at 4");
    p.append(BatchBuilder::new(4).bytes(), LAG + 2).unwrap(); // LEO 8, HW 4

    let u = p.update_follower_fetch(3, 3, LAG + 3).unwrap();
    assert!(u.change.new_isr.is_none(), "LEO 3 < HW 4: not back yet");
    assert_eq!(p.isr(), vec![1, 2]);

    let u = p.update_follower_fetch(3, 4, LAG + 4).unwrap();
    assert!(u.change.new_isr.is_some(), "LEO 4 >= HW 4: back in the ISR");
    assert_eq!(p.isr(), vec![1, 2, 3]);
    assert!(p.follower(3).unwrap().in_isr);
    // Now the HW waits for follower 3 as well.
    p.update_follower_fetch(2, 8, LAG + 5).unwrap();
    assert_eq!(p.high_watermark(), 4);
    p.update_follower_fetch(3, 8, LAG + 6).unwrap();
    assert_eq!(p.high_watermark(), 8);
}

#[test]
fn high_watermark_does_not_advance_while_the_isr_is_below_min_isr() {
    let mut p = three_replicas(); // min ISR 2
    p.append(BatchBuilder::new(1).bytes(), 1).unwrap();
    assert_eq!(p.maybe_shrink_isr(LAG + 1).removed, vec![2, 3]);
    assert_eq!(p.isr(), vec![1]);
    assert!(!p.has_min_insync_replicas());
    // The leader alone holds offsets 0..3, but ISR {1} < min ISR 2: HW stays 0.
    p.append(BatchBuilder::new(2).bytes(), LAG + 2).unwrap();
    assert_eq!(p.high_watermark(), 0);

    // Follower 2 fetches at offset 0 = HW: it rejoins, ISR {1, 2} = min ISR, HW moves.
    let u = p.update_follower_fetch(2, 0, LAG + 3).unwrap();
    assert!(u.change.new_isr.is_some() && !u.change.high_watermark_advanced());
    let u = p.update_follower_fetch(2, 3, LAG + 4).unwrap();
    assert!(u.change.high_watermark_advanced());
    assert_eq!(p.high_watermark(), 3);
}

#[test]
fn with_min_isr_one_a_lone_leader_commits_on_append() {
    let mut p = three_replicas_with(LogConfig {
        min_insync_replicas: 1,
        ..Default::default()
    });
    p.maybe_shrink_isr(LAG + 1);
    p.append(BatchBuilder::new(1).bytes(), LAG + 1).unwrap();
    assert_eq!(p.maybe_shrink_isr(LAG + 2).removed, vec![2, 3]);
    assert_eq!(
        p.high_watermark(),
        1,
        "shrinking to {{1}} lets the HW reach the LEO"
    );
    let info = p.append(BatchBuilder::new(2).bytes(), LAG + 3).unwrap();
    assert!(info.change.high_watermark_advanced());
    assert_eq!(
        (info.change.after.high_watermark, p.high_watermark()),
        (3, 3)
    );
    assert_eq!(info.change.before.high_watermark, 1);
}

#[test]
fn each_change_says_what_it_moved_before_and_after() {
    let mut p = Partition::new("t", 0, 1, vec![1, 2, 3], LogConfig::default(), 0);
    let info = p.append(BatchBuilder::new(3).bytes(), 1).unwrap();
    let marks = |log_end_offset, high_watermark| Marks {
        log_end_offset,
        high_watermark,
        last_stable_offset: high_watermark,
    };
    assert_eq!(
        (info.change.before, info.change.after),
        (marks(0, 0), marks(3, 0))
    );
    assert!(info.change.log_grew() && !info.change.high_watermark_advanced());

    // Follower 2 fetches everything: the HW waits for follower 3.
    let u = p.update_follower_fetch(2, 3, 2).unwrap();
    assert_eq!(u.follower_log_end_offset_before, 0);
    assert_eq!(
        (u.change.before, u.change.after),
        (marks(3, 0), marks(3, 0))
    );
    // Follower 3 too: the HW moves, nobody joined or left the ISR.
    let u = p.update_follower_fetch(3, 3, 3).unwrap();
    assert_eq!(
        (u.change.before, u.change.after),
        (marks(3, 0), marks(3, 3))
    );
    assert!(u.change.high_watermark_advanced() && u.change.new_isr.is_none());

    // Follower 3 stops; more data; the ISR check drops it and reports the smaller ISR.
    p.append(BatchBuilder::new(1).bytes(), 4).unwrap();
    p.update_follower_fetch(2, 4, 5).unwrap();
    let shrink = p.maybe_shrink_isr(LAG + 10);
    assert_eq!(shrink.removed, vec![3]);
    assert_eq!(shrink.change.new_isr, Some(vec![1, 2]));
    assert_eq!(
        shrink.change.after,
        marks(4, 4),
        "without 3 the HW reaches 2's offset"
    );
    // It comes back: its fetch reports the ISR it rejoined.
    let u = p.update_follower_fetch(3, 4, LAG + 11).unwrap();
    assert_eq!(u.change.new_isr, Some(vec![1, 2, 3]));
}

#[test]
fn last_caught_up_time_follows_kafkas_rule() {
    let mut p = three_replicas();
    let caught_up = |p: &Partition| p.follower(2).unwrap().last_caught_up_time_ms;

    // Leader LEO 5. First fetch, behind, no previous fetch: unchanged (creation time 0).
    p.append(BatchBuilder::new(5).bytes(), 10).unwrap();
    p.update_follower_fetch(2, 2, 100).unwrap();
    assert_eq!(caught_up(&p), 0);
    let f = p.follower(2).unwrap();
    assert_eq!(
        (f.last_fetch_time_ms, f.last_fetch_leader_log_end_offset),
        (Some(100), Some(5))
    );

    // Branch 1: fetch at the leader's current LEO -> caught up now.
    p.update_follower_fetch(2, 5, 200).unwrap();
    assert_eq!(caught_up(&p), 200);

    // Leader moves to LEO 8 before the next fetch (at t=300).
    p.append(BatchBuilder::new(3).bytes(), 250).unwrap();
    // Branch 2: fetch offset 5 < LEO 8, but >= the leader LEO as of the previous fetch (5):
    // the follower was caught up at the previous fetch time, 200 (already recorded).
    p.update_follower_fetch(2, 5, 300).unwrap();
    assert_eq!(caught_up(&p), 200);
    // The previous fetch (t=300) saw leader LEO 8. The leader moves on to 10, and at
    // t=400 the follower fetches at 8: it had everything of t=300, so caught up = 300.
    p.append(BatchBuilder::new(2).bytes(), 350).unwrap();
    p.update_follower_fetch(2, 8, 400).unwrap();
    assert_eq!(caught_up(&p), 300);

    // Branch 3: behind both the current LEO (10) and the previous fetch's LEO (10): unchanged.
    p.update_follower_fetch(2, 9, 500).unwrap();
    assert_eq!(caught_up(&p), 300);

    // Time never goes back: a caught-up fetch stamped earlier keeps the later value.
    p.update_follower_fetch(2, 10, 250).unwrap();
    assert_eq!(caught_up(&p), 300);
}

/// The fetch offset of a follower that has exactly what the leader sent it last time:
/// the leader's LEO as of its previous fetch.
fn offset_received_last_time(p: &Partition, id: i32) -> i64 {
    p.follower(id)
        .unwrap()
        .last_fetch_leader_log_end_offset
        .unwrap_or(0)
}

#[test]
fn a_follower_keeping_pace_with_a_busy_leader_stays_in_the_isr() {
    // The leader appends between every two fetches, so no fetch is ever at the current
    // LEO (rule 1 never applies); rule 2 keeps the caught-up time fresh.
    let lag = 1_000;
    let mut p = three_replicas_with(LogConfig {
        replica_lag_time_max_ms: lag,
        ..Default::default()
    });
    let mut now = 0;
    for _ in 0..50 {
        now += 400;
        p.append(BatchBuilder::new(1).bytes(), now - 200).unwrap();
        for id in [2, 3] {
            let offset = offset_received_last_time(&p, id);
            p.update_follower_fetch(id, offset, now).unwrap();
            assert!(offset < p.log_end_offset());
        }
        assert!(p.maybe_shrink_isr(now + 500).removed.is_empty());
    }
    assert_eq!(p.isr(), vec![1, 2, 3]);
    assert_eq!(p.follower(2).unwrap().last_caught_up_time_ms, now - 400);
    assert_eq!(p.high_watermark(), p.log_end_offset() - 1);

    // Follower 3 now always lacks one offset of what it was sent: neither rule applies,
    // its caught-up time freezes, and it is dropped once that is more than `lag` old.
    let frozen = p.follower(3).unwrap().last_caught_up_time_ms;
    for _ in 0..5 {
        now += 400;
        p.append(BatchBuilder::new(3).bytes(), now - 200).unwrap();
        let offset = offset_received_last_time(&p, 2);
        p.update_follower_fetch(2, offset, now).unwrap();
        let offset = offset_received_last_time(&p, 3) - 1;
        p.update_follower_fetch(3, offset, now).unwrap();
        p.maybe_shrink_isr(now);
        assert_eq!(
            p.follower(3).unwrap().in_isr,
            now - frozen <= lag,
            "t={now}"
        );
        assert!(p.follower(2).unwrap().in_isr);
    }
    assert_eq!(p.isr(), vec![1, 2]);
    assert_eq!(p.follower(3).unwrap().last_caught_up_time_ms, frozen);
}

#[test]
fn follower_fetch_errors_leave_state_unchanged() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(3).bytes(), 1).unwrap();
    let before = p.follower(2).unwrap().clone();
    assert_eq!(
        p.update_follower_fetch(9, 0, 5),
        Err(FollowerError::NotAReplica { replica_id: 9 })
    );
    assert!(matches!(
        p.update_follower_fetch(1, 0, 5),
        Err(FollowerError::NotAReplica { .. })
    ));
    let err = p.update_follower_fetch(2, 4, 5).unwrap_err();
    assert_eq!(
        err,
        FollowerError::OffsetOutOfRange {
            fetch_offset: 4,
            log_start_offset: 0,
            log_end_offset: 3
        }
    );
    assert_eq!(err.kafka_error_code(), 1);
    assert_eq!(
        FollowerError::NotAReplica { replica_id: 9 }.kafka_error_code(),
        6
    );
    assert!(p.update_follower_fetch(2, -1, 5).is_err());
    assert_eq!(p.follower(2).unwrap(), &before);
}

#[test]
fn snapshot_shows_followers_and_serializes() {
    let mut p = three_replicas();
    p.append(BatchBuilder::new(5).bytes(), 1).unwrap();
    p.update_follower_fetch(2, 5, 10).unwrap();
    p.update_follower_fetch(3, 2, 10).unwrap();
    let s = p.snapshot();
    assert_eq!((s.leader, s.log_end_offset, s.high_watermark), (1, 5, 2));
    assert_eq!(s.isr, vec![1, 2, 3]);
    assert_eq!(s.followers.len(), 2);
    assert_eq!((s.followers[0].id, s.followers[0].lag), (2, 0));
    assert_eq!((s.followers[1].id, s.followers[1].lag), (3, 3));
    assert_eq!(s.followers[0].last_caught_up_time_ms, 10);
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["followers"][1]["lag"], 3);
    assert_eq!(json["topic"], "t");
    serde_json::to_string(p.follower(2).unwrap()).unwrap();
}

#[test]
fn an_altered_min_isr_applies_at_once_both_ways() {
    // The followers never fetch: after the lag they leave the ISR, and with min ISR 2 the
    // high watermark is held (KIP-966).
    let mut p = three_replicas();
    p.append_as_leader(BatchBuilder::new(2).bytes(), 1, 1)
        .unwrap();
    assert_eq!(p.maybe_shrink_isr(LAG + 1).removed, vec![2, 3]);
    assert_eq!(p.high_watermark(), 0);
    // Lowered to 1: the leader alone is enough, and the HW moves now, not on the next
    // append.
    let lowered = p.set_config(LogConfig {
        min_insync_replicas: 1,
        ..LogConfig::default()
    });
    assert!(lowered.high_watermark_advanced());
    assert_eq!(p.high_watermark(), 2);
    // Raised to 3 (above the ISR of 1): acks=all is refused, acks=1 still appends.
    p.set_config(LogConfig {
        min_insync_replicas: 3,
        ..LogConfig::default()
    });
    assert!(matches!(
        p.append_as_leader(BatchBuilder::new(1).bytes(), -1, LAG + 2),
        Err(AppendError::NotEnoughReplicas { .. })
    ));
    assert!(p
        .append_as_leader(BatchBuilder::new(1).bytes(), 1, LAG + 2)
        .is_ok());
    assert_eq!(p.snapshot().min_insync_replicas, 3);
}
