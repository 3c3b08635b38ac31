//! What a rule can match a request on, read once from the decoded request.
//!
//! Only what a rule names is looked at: the topics and partitions a request names, and
//! the group ids. A request that names topics without partitions (Metadata, CreateTopics,
//! DescribeConfigs on a topic) matches a rule's `topic` but never its `partition`.

use kafka_protocol::messages::{ApiKey, RequestKind};

use super::rule::Match;

/// The facts of one request.
#[derive(Debug, Default)]
pub struct RequestFacts<'a> {
    /// Its API, if we decoded it.
    pub api: Option<ApiKey>,
    /// Its version.
    pub version: i16,
    /// The client's `client.id`.
    pub client_id: &'a str,
    /// The broker it was sent to.
    pub broker: i32,
    /// Each topic it names, with the partitions it names there (maybe none).
    pub topics: Vec<(&'a str, Vec<i32>)>,
    /// The group ids it names.
    pub groups: Vec<&'a str>,
}

impl<'a> RequestFacts<'a> {
    /// Reads the facts of `request`.
    pub fn of(
        api: ApiKey,
        version: i16,
        client_id: &'a str,
        broker: i32,
        request: &'a RequestKind,
    ) -> Self {
        let mut facts = RequestFacts {
            api: Some(api),
            version,
            client_id,
            broker,
            ..Default::default()
        };
        facts.read(request);
        facts
    }

    fn topic(&mut self, name: &'a str, partitions: impl IntoIterator<Item = i32>) {
        self.topics.push((name, partitions.into_iter().collect()));
    }

    fn read(&mut self, request: &'a RequestKind) {
        match request {
            RequestKind::Produce(r) => {
                for t in &r.topic_data {
                    self.topic(&t.name.0, t.partition_data.iter().map(|p| p.index));
                }
            }
            RequestKind::Fetch(r) => {
                for t in &r.topics {
                    self.topic(&t.topic.0, t.partitions.iter().map(|p| p.partition));
                }
            }
            RequestKind::ListOffsets(r) => {
                for t in &r.topics {
                    self.topic(&t.name.0, t.partitions.iter().map(|p| p.partition_index));
                }
            }
            RequestKind::DeleteRecords(r) => {
                for t in &r.topics {
                    self.topic(&t.name.0, t.partitions.iter().map(|p| p.partition_index));
                }
            }
            RequestKind::OffsetForLeaderEpoch(r) => {
                for t in &r.topics {
                    self.topic(&t.topic.0, t.partitions.iter().map(|p| p.partition));
                }
            }
            RequestKind::Metadata(r) => {
                for t in r.topics.iter().flatten() {
                    if let Some(name) = &t.name {
                        self.topic(&name.0, []);
                    }
                }
            }
            RequestKind::CreateTopics(r) => {
                for t in &r.topics {
                    self.topic(&t.name.0, []);
                }
            }
            RequestKind::DeleteTopics(r) => {
                for name in &r.topic_names {
                    self.topic(&name.0, []);
                }
                for t in &r.topics {
                    if let Some(name) = &t.name {
                        self.topic(&name.0, []);
                    }
                }
            }
            RequestKind::CreatePartitions(r) => {
                for t in &r.topics {
                    self.topic(&t.name.0, []);
                }
            }
            RequestKind::DescribeConfigs(r) => {
                for res in r.resources.iter().filter(|res| res.resource_type == 2) {
                    self.topic(&res.resource_name, []);
                }
            }
            RequestKind::AlterConfigs(r) => {
                for res in r.resources.iter().filter(|res| res.resource_type == 2) {
                    self.topic(&res.resource_name, []);
                }
            }
            RequestKind::IncrementalAlterConfigs(r) => {
                for res in r.resources.iter().filter(|res| res.resource_type == 2) {
                    self.topic(&res.resource_name, []);
                }
            }
            RequestKind::DescribeLogDirs(r) => {
                for t in r.topics.iter().flatten() {
                    self.topic(&t.topic.0, t.partitions.iter().copied());
                }
            }
            RequestKind::AddPartitionsToTxn(r) => {
                for t in &r.v3_and_below_topics {
                    self.topic(&t.name.0, t.partitions.iter().copied());
                }
            }
            RequestKind::AddOffsetsToTxn(r) => self.groups.push(&r.group_id.0),
            RequestKind::DescribeProducers(r) => {
                for t in &r.topics {
                    self.topic(&t.name.0, t.partition_indexes.iter().copied());
                }
            }
            RequestKind::TxnOffsetCommit(r) => {
                self.groups.push(&r.group_id.0);
                for t in &r.topics {
                    self.topic(&t.name.0, t.partitions.iter().map(|p| p.partition_index));
                }
            }
            RequestKind::OffsetCommit(r) => {
                self.groups.push(&r.group_id.0);
                for t in &r.topics {
                    self.topic(&t.name.0, t.partitions.iter().map(|p| p.partition_index));
                }
            }
            RequestKind::OffsetFetch(r) => {
                if !r.group_id.0.is_empty() {
                    self.groups.push(&r.group_id.0);
                }
                for t in r.topics.iter().flatten() {
                    self.topic(&t.name.0, t.partition_indexes.iter().copied());
                }
                for g in &r.groups {
                    self.groups.push(&g.group_id.0);
                    for t in g.topics.iter().flatten() {
                        self.topic(&t.name.0, t.partition_indexes.iter().copied());
                    }
                }
            }
            RequestKind::OffsetDelete(r) => {
                self.groups.push(&r.group_id.0);
                for t in &r.topics {
                    self.topic(&t.name.0, t.partitions.iter().map(|p| p.partition_index));
                }
            }
            // Key type 0 is a group; 1 a transactional id.
            RequestKind::FindCoordinator(r) if r.key_type == 0 => {
                if !r.key.is_empty() {
                    self.groups.push(&r.key);
                }
                self.groups
                    .extend(r.coordinator_keys.iter().map(|k| k.as_str()));
            }
            RequestKind::JoinGroup(r) => self.groups.push(&r.group_id.0),
            RequestKind::SyncGroup(r) => self.groups.push(&r.group_id.0),
            RequestKind::Heartbeat(r) => self.groups.push(&r.group_id.0),
            RequestKind::LeaveGroup(r) => self.groups.push(&r.group_id.0),
            RequestKind::DescribeGroups(r) => {
                self.groups.extend(r.groups.iter().map(|g| g.0.as_str()))
            }
            RequestKind::DeleteGroups(r) => self
                .groups
                .extend(r.groups_names.iter().map(|g| g.0.as_str())),
            _ => {}
        }
    }

    /// Does the rule's match hold for this request?
    pub fn matches(&self, m: &Match) -> bool {
        if self.api != Some(m.api) || self.version < m.versions.0 || self.version > m.versions.1 {
            return false;
        }
        if m.client_id.as_deref().is_some_and(|c| c != self.client_id)
            || m.broker.is_some_and(|b| b != self.broker)
            || m.group
                .as_deref()
                .is_some_and(|g| !self.groups.contains(&g))
        {
            return false;
        }
        match (&m.topic, m.partition) {
            (None, None) => true,
            (Some(topic), None) => self.topics.iter().any(|(t, _)| t == topic),
            (_, Some(_)) => self
                .topics
                .iter()
                .any(|(t, ps)| ps.iter().any(|&p| m.covers(t, p))),
        }
    }
}
