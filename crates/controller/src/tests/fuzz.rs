//! Random sequences of failures, restarts, shutdowns, ISR changes and preferred
//! elections: the image's invariants always hold, and every change obeys the epoch
//! rules (leader epoch +1 exactly when the leader changes, partition epoch +1 exactly
//! when anything changes, one change per changed partition).

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::cluster;
use crate::{Change, Controller, PartitionState, TopicPartition};

#[derive(Debug, Clone)]
enum Op {
    Fail(i32),
    Restart(i32),
    Shutdown(i32),
    /// The leader of partition `index` (in image order) asks for an ISR of its
    /// replicas picked by `mask`, with its current epochs.
    AlterIsr {
        index: usize,
        mask: u8,
    },
    Preferred {
        index: usize,
    },
    PreferredAll,
    ToggleUnclean,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1..=4i32).prop_map(Op::Fail),
        (1..=4i32).prop_map(Op::Restart),
        (1..=4i32).prop_map(Op::Shutdown),
        (0..9usize, any::<u8>()).prop_map(|(index, mask)| Op::AlterIsr { index, mask }),
        (0..9usize).prop_map(|index| Op::Preferred { index }),
        Just(Op::PreferredAll),
        Just(Op::ToggleUnclean),
    ]
}

fn partitions(c: &Controller) -> BTreeMap<TopicPartition, PartitionState> {
    c.image()
        .partitions()
        .map(|(tp, p)| (tp, p.clone()))
        .collect()
}

/// Runs `op`; the changes it returned, none if it was refused.
fn apply(c: &mut Controller, op: &Op) -> Vec<Change> {
    let result = match op {
        Op::Fail(b) => c.broker_failed(*b),
        Op::Restart(b) => c.broker_restarted(*b),
        Op::Shutdown(b) => c.controlled_shutdown(*b),
        Op::AlterIsr { index, mask } => {
            let all = partitions(c);
            let (tp, p) = all.iter().nth(index % all.len()).unwrap();
            let isr: Vec<i32> = p
                .replicas
                .iter()
                .enumerate()
                .filter(|&(i, &r)| mask & (1 << i) != 0 || r == p.leader)
                .map(|(_, &r)| r)
                .collect();
            c.alter_partition(tp, p.leader, p.leader_epoch, p.partition_epoch, &isr)
                .map(|out| out.change.into_iter().collect())
        }
        Op::Preferred { index } => {
            let all = partitions(c);
            let tp = all.keys().nth(index % all.len()).unwrap().clone();
            c.elect_preferred(&tp)
        }
        Op::PreferredAll => Ok(c.elect_preferred_leaders()),
        Op::ToggleUnclean => {
            let on = c.image().topic("b").unwrap().unclean_leader_election;
            c.set_unclean_leader_election("b", !on)
        }
    };
    result.unwrap_or_default()
}

/// Runs `ops` on a four-broker cluster, checking after each one.
fn check_history(ops: &[Op]) -> Result<(), TestCaseError> {
    let mut c = cluster(4);
    c.create_topic("a", 5, 3, false).unwrap();
    c.create_topic("b", 3, 2, true).unwrap();
    c.create_topic("c", 1, 1, false).unwrap();
    for op in ops {
        let before = partitions(&c);
        let changes = apply(&mut c, op);
        prop_assert_eq!(c.image().invariant_violation(), None);
        let after = partitions(&c);
        let mut changed = 0;
        for (tp, old) in &before {
            let new = &after[tp];
            let leader_moved = i32::from(new.leader != old.leader);
            let any_change = i32::from(new != old);
            prop_assert_eq!(new.leader_epoch, old.leader_epoch + leader_moved, "{}", tp);
            prop_assert_eq!(
                new.partition_epoch,
                old.partition_epoch + any_change,
                "{}",
                tp
            );
            prop_assert_eq!(&new.replicas, &old.replicas);
            changed += any_change as usize;
        }
        let mut about_partitions = 0;
        for change in &changes {
            let Some(tp) = change.topic_partition() else {
                continue;
            };
            about_partitions += 1;
            let (leader_epoch, partition_epoch) = match change {
                Change::LeaderElected {
                    leader_epoch,
                    partition_epoch,
                    ..
                }
                | Change::NoLeader {
                    leader_epoch,
                    partition_epoch,
                    ..
                }
                | Change::IsrChanged {
                    leader_epoch,
                    partition_epoch,
                    ..
                } => (*leader_epoch, *partition_epoch),
                other => panic!("unexpected {other:?}"),
            };
            let now = &after[tp];
            prop_assert_eq!(
                (leader_epoch, partition_epoch),
                (now.leader_epoch, now.partition_epoch)
            );
        }
        prop_assert_eq!(
            about_partitions,
            changed,
            "one change per changed partition"
        );
    }
    Ok(())
}

proptest! {
    #[test]
    fn random_histories_keep_the_invariants_and_the_epoch_rules(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        check_history(&ops)?;
    }
}
