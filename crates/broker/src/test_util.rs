//! The one manual-clock broker the unit tests build: a [`ReplicaManager`] whose time moves
//! only when a test advances it, optionally with topics. Behind the `test-util` feature
//! (like `replog::test_util`), and always in this crate's own tests.

use std::sync::Arc;

use crate::config::{BrokerConfig, ClockMode};
use crate::replica_manager::ReplicaManager;
use crate::topics::NewTopic;

/// The broker's default configuration on the manual clock, then `configure`d.
pub fn manual_config(configure: impl FnOnce(&mut BrokerConfig)) -> BrokerConfig {
    let mut config = BrokerConfig {
        clock: ClockMode::Manual,
        ..BrokerConfig::default()
    };
    configure(&mut config);
    config
}

/// A replica manager on the manual clock (`configure`d), with each `(name, partitions,
/// replication factor)` of `topics` created.
pub fn manual_broker(
    configure: impl FnOnce(&mut BrokerConfig),
    topics: &[(&str, i32, i16)],
) -> Arc<ReplicaManager> {
    let rm = ReplicaManager::new(manual_config(configure));
    for &(name, partitions, replication_factor) in topics {
        let topic = NewTopic {
            name: name.into(),
            partitions,
            replication_factor,
            configs: vec![],
        };
        if let Err(e) = rm.create_topic(topic, false) {
            panic!("the test topic {name} could not be created: {e:?}");
        }
    }
    rm
}
