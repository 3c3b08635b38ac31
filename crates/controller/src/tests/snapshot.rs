//! The snapshot and the changes serialize for the state API and the live view.

use super::{cluster, tp};
use crate::{Change, ElectionReason, MetadataSnapshot};

#[test]
fn the_snapshot_names_every_partition_and_round_trips_through_json() {
    let mut c = cluster(3);
    c.create_topic("t", 2, 2, true).unwrap();
    c.broker_failed(3).unwrap();
    let snap = c.snapshot();
    assert_eq!(snap.brokers.len(), 3);
    assert!(!snap.brokers[2].alive);
    let json = serde_json::to_value(&snap).unwrap();
    let p1 = &json["topics"][0]["partitions"][1];
    assert_eq!(p1["partition"], 1);
    assert_eq!(p1["replicas"], serde_json::json!([2, 3]));
    assert_eq!(p1["isr"], serde_json::json!([2]));
    assert_eq!(p1["leader"], 2);
    assert_eq!(p1["leader_epoch"], 0);
    assert_eq!(p1["partition_epoch"], 1);
    assert_eq!(json["topics"][0]["unclean_leader_election"], true);
    let back: MetadataSnapshot = serde_json::from_value(json).unwrap();
    assert_eq!(back, snap);
}

#[test]
fn changes_serialize_with_a_type_tag() {
    let change = Change::LeaderElected {
        tp: tp("t", 0),
        old_leader: 1,
        new_leader: 2,
        leader_epoch: 1,
        isr: vec![2],
        partition_epoch: 1,
        clean: false,
        reason: ElectionReason::LeaderFailed,
    };
    let json = serde_json::to_value(&change).unwrap();
    assert_eq!(json["type"], "leader_elected");
    assert_eq!(json["reason"], "leader_failed");
    assert_eq!(json["tp"]["topic"], "t");
    assert_eq!(serde_json::from_value::<Change>(json).unwrap(), change);
}
