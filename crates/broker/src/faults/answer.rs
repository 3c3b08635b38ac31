//! The answer an `error` rule gives, built from the request itself.
//!
//! Two cases, as a client would see them from a real broker:
//!
//! - **Partition-level.** On the APIs that answer per partition (Produce, Fetch,
//!   ListOffsets, OffsetCommit, DeleteRecords, OffsetForLeaderEpoch), a rule that names a
//!   topic or a partition takes the partitions it covers out of the request and answers
//!   them with its error. What is left goes to the handler as usual, and the error
//!   partitions join its answer. Nothing is appended for an error partition, since the
//!   handler never sees it. A fetch with error partitions answers at once, as a fetch
//!   whose read failed does on Kafka.
//! - **Request-level.** A rule that names no partition answers every partition of such
//!   a request with its error. On every other API the error goes where that API carries
//!   one: the top-level `error_code`, or each topic, group or resource it names. Metadata
//!   is the exception: it is answered as usual (brokers included, as Kafka always does),
//!   and the error goes on each topic the rule covers, with no partitions.
//!
//! An `acks=0` produce has no answer to carry an error: the connection closes, Kafka's
//! way of telling such a producer that something failed.

use bytes::Bytes;
use kafka_protocol::messages::{
    add_partitions_to_txn_response, alter_configs_response, create_partitions_response,
    create_topics_response, delete_groups_response, delete_records_response,
    delete_topics_response, describe_configs_response, describe_groups_response,
    describe_producers_response, describe_transactions_response, fetch_response,
    find_coordinator_response, incremental_alter_configs_response, list_offsets_response,
    offset_commit_response, offset_fetch_response, offset_for_leader_epoch_response,
    produce_response, txn_offset_commit_response, AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse, AlterConfigsResponse, ApiVersionsResponse, BrokerId,
    CreatePartitionsResponse, CreateTopicsResponse, DeleteGroupsResponse, DeleteRecordsResponse,
    DeleteTopicsResponse, DescribeConfigsResponse, DescribeGroupsResponse, DescribeLogDirsResponse,
    DescribeProducersResponse, DescribeTransactionsResponse, EndTxnResponse, FetchResponse,
    FindCoordinatorResponse, HeartbeatResponse, IncrementalAlterConfigsResponse,
    InitProducerIdResponse, JoinGroupResponse, LeaveGroupResponse, ListGroupsResponse,
    ListOffsetsResponse, ListTransactionsResponse, OffsetCommitResponse, OffsetDeleteResponse,
    OffsetFetchResponse, OffsetForLeaderEpochResponse, ProduceResponse, ProducerId, RequestKind,
    ResponseKind, SyncGroupResponse, TopicName, TxnOffsetCommitResponse,
};

use super::rule::Match;
use crate::handlers::sb;
use crate::partition::TopicPartition;

/// Changes a handler's answer once it has one.
pub type Patch = Box<dyn FnOnce(&mut ResponseKind) + Send>;

/// What an error rule makes of a request.
pub enum ErrorPlan {
    /// Answer this, without handling the request.
    Answer(ResponseKind),
    /// Handle this request (what is left of it), then patch its answer.
    Handle(RequestKind, Patch),
}

/// The partitions taken out of a request, by topic.
type Taken = Vec<(TopicName, Vec<i32>)>;

/// The plan for `request`, answered with `code` where `rule` says.
/// Also returns the partitions that answer the error, for the request log.
pub fn plan(
    request: RequestKind,
    version: i16,
    rule: &Match,
    code: i16,
) -> (ErrorPlan, Vec<TopicPartition>) {
    let mut failed = Vec::new();
    let plan = plan_into(request, version, rule, code, &mut failed);
    (plan, failed)
}

fn plan_into(
    request: RequestKind,
    version: i16,
    rule: &Match,
    code: i16,
    failed: &mut Vec<TopicPartition>,
) -> ErrorPlan {
    // Partition-level only when the rule names partitions; else every partition.
    let covers = |t: &str, p: i32| !rule.names_partitions() || rule.covers(t, p);
    match request {
        RequestKind::Produce(mut r) => {
            let taken = take(
                &mut r.topic_data,
                |t| &t.name,
                |t| &mut t.partition_data,
                |p| p.index,
                covers,
                failed,
            );
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::Produce(r) => Some(&mut r.responses),
                    _ => None,
                },
                |t| &t.name,
                |name| produce_response::TopicProduceResponse::default().with_name(name),
                |t| &mut t.partition_responses,
                move |p| {
                    produce_response::PartitionProduceResponse::default()
                        .with_index(p)
                        .with_error_code(code)
                        .with_base_offset(-1)
                        .with_log_append_time_ms(-1)
                        .with_log_start_offset(-1)
                },
            );
            rest_or_answer(
                r.topic_data.is_empty() && r.acks != 0,
                RequestKind::Produce(r),
                ResponseKind::Produce(ProduceResponse::default()),
                patch,
            )
        }
        RequestKind::Fetch(mut r) => {
            if matches!(code, 70 | 71) {
                // FETCH_SESSION_ID_NOT_FOUND and INVALID_FETCH_SESSION_EPOCH belong to the
                // whole fetch session, so they go in the top-level error code.
                return ErrorPlan::Answer(ResponseKind::Fetch(
                    FetchResponse::default().with_error_code(code),
                ));
            }
            let taken = take(
                &mut r.topics,
                |t| &t.topic,
                |t| &mut t.partitions,
                |p| p.partition,
                covers,
                failed,
            );
            // A fetch with a failed partition answers at once, as Kafka's does.
            r.max_wait_ms = 0;
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::Fetch(r) => Some(&mut r.responses),
                    _ => None,
                },
                |t| &t.topic,
                |name| fetch_response::FetchableTopicResponse::default().with_topic(name),
                |t| &mut t.partitions,
                move |p| {
                    fetch_response::PartitionData::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                        .with_high_watermark(-1)
                        .with_last_stable_offset(-1)
                        .with_log_start_offset(-1)
                        .with_preferred_read_replica(BrokerId(-1))
                        .with_records(Some(Bytes::new()))
                },
            );
            rest_or_answer(
                r.topics.is_empty(),
                RequestKind::Fetch(r),
                ResponseKind::Fetch(FetchResponse::default()),
                patch,
            )
        }
        RequestKind::ListOffsets(mut r) => {
            let taken = take(
                &mut r.topics,
                |t| &t.name,
                |t| &mut t.partitions,
                |p| p.partition_index,
                covers,
                failed,
            );
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::ListOffsets(r) => Some(&mut r.topics),
                    _ => None,
                },
                |t| &t.name,
                |name| list_offsets_response::ListOffsetsTopicResponse::default().with_name(name),
                |t| &mut t.partitions,
                move |p| {
                    list_offsets_response::ListOffsetsPartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1)
                },
            );
            rest_or_answer(
                r.topics.is_empty(),
                RequestKind::ListOffsets(r),
                ResponseKind::ListOffsets(ListOffsetsResponse::default()),
                patch,
            )
        }
        RequestKind::OffsetCommit(mut r) => {
            let taken = take(
                &mut r.topics,
                |t| &t.name,
                |t| &mut t.partitions,
                |p| p.partition_index,
                covers,
                failed,
            );
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::OffsetCommit(r) => Some(&mut r.topics),
                    _ => None,
                },
                |t| &t.name,
                |name| offset_commit_response::OffsetCommitResponseTopic::default().with_name(name),
                |t| &mut t.partitions,
                move |p| {
                    offset_commit_response::OffsetCommitResponsePartition::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                },
            );
            rest_or_answer(
                r.topics.is_empty(),
                RequestKind::OffsetCommit(r),
                ResponseKind::OffsetCommit(OffsetCommitResponse::default()),
                patch,
            )
        }
        RequestKind::DeleteRecords(mut r) => {
            let taken = take(
                &mut r.topics,
                |t| &t.name,
                |t| &mut t.partitions,
                |p| p.partition_index,
                covers,
                failed,
            );
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::DeleteRecords(r) => Some(&mut r.topics),
                    _ => None,
                },
                |t| &t.name,
                |name| delete_records_response::DeleteRecordsTopicResult::default().with_name(name),
                |t| &mut t.partitions,
                move |p| {
                    delete_records_response::DeleteRecordsPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(code)
                        .with_low_watermark(-1)
                },
            );
            rest_or_answer(
                r.topics.is_empty(),
                RequestKind::DeleteRecords(r),
                ResponseKind::DeleteRecords(DeleteRecordsResponse::default()),
                patch,
            )
        }
        RequestKind::OffsetForLeaderEpoch(mut r) => {
            let taken = take(
                &mut r.topics,
                |t| &t.topic,
                |t| &mut t.partitions,
                |p| p.partition,
                covers,
                failed,
            );
            let patch = answer_taken(
                taken,
                |resp| match resp {
                    ResponseKind::OffsetForLeaderEpoch(r) => Some(&mut r.topics),
                    _ => None,
                },
                |t| &t.topic,
                |name| {
                    offset_for_leader_epoch_response::OffsetForLeaderTopicResult::default()
                        .with_topic(name)
                },
                |t| &mut t.partitions,
                move |p| {
                    offset_for_leader_epoch_response::EpochEndOffset::default()
                        .with_partition(p)
                        .with_error_code(code)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1)
                },
            );
            rest_or_answer(
                r.topics.is_empty(),
                RequestKind::OffsetForLeaderEpoch(r),
                ResponseKind::OffsetForLeaderEpoch(OffsetForLeaderEpochResponse::default()),
                patch,
            )
        }
        RequestKind::Metadata(mut r) => {
            // Answered as usual, without creating topics for an answer that says they failed.
            r.allow_auto_topic_creation = false;
            let rule = rule.clone();
            let patch = move |response: &mut ResponseKind| {
                if let ResponseKind::Metadata(resp) = response {
                    for t in &mut resp.topics {
                        let name = t.name.as_ref().map_or("", |n| n.0.as_str());
                        if rule.topic.as_deref().is_none_or(|wanted| wanted == name) {
                            t.error_code = code;
                            t.partitions.clear();
                        }
                    }
                }
            };
            ErrorPlan::Handle(RequestKind::Metadata(r), Box::new(patch))
        }
        other => ErrorPlan::Answer(whole(other, version, code)),
    }
}

/// Takes the partitions `covers` picks out of `topics`, dropping topics left empty.
fn take<T, P>(
    topics: &mut Vec<T>,
    name: impl Fn(&T) -> &TopicName,
    partitions: impl Fn(&mut T) -> &mut Vec<P>,
    index: impl Fn(&P) -> i32,
    covers: impl Fn(&str, i32) -> bool,
    failed: &mut Vec<TopicPartition>,
) -> Taken {
    let mut taken = Vec::new();
    for topic in topics.iter_mut() {
        let topic_name = name(topic).clone();
        let mut picked = Vec::new();
        partitions(topic).retain(|p| {
            let hit = covers(&topic_name.0, index(p));
            if hit {
                picked.push(index(p));
                failed.push(TopicPartition::new(&topic_name.0, index(p)));
            }
            !hit
        });
        if !picked.is_empty() {
            taken.push((topic_name, picked));
        }
    }
    topics.retain_mut(|t| !partitions(t).is_empty());
    taken
}

/// The patch that puts the `taken` partitions into a handler's answer, each as the entry
/// `error_entry` makes for its index, under its topic's entry (added if the handler's
/// answer has none). The other arguments say where that API's answer keeps them: its
/// topics (`None` for another API's answer), a topic's name, a new topic entry, and a
/// topic's partitions.
fn answer_taken<T, P>(
    taken: Taken,
    topics: impl Fn(&mut ResponseKind) -> Option<&mut Vec<T>> + Send + 'static,
    name: impl Fn(&T) -> &TopicName + Send + 'static,
    new_topic: impl Fn(TopicName) -> T + Send + 'static,
    partitions: impl Fn(&mut T) -> &mut Vec<P> + Send + 'static,
    error_entry: impl Fn(i32) -> P + Send + 'static,
) -> impl FnOnce(&mut ResponseKind) + Send + 'static {
    move |response: &mut ResponseKind| {
        let Some(entries) = topics(response) else {
            return;
        };
        for (wanted, parts) in taken {
            let at = match entries.iter().position(|t| name(t) == &wanted) {
                Some(at) => at,
                None => {
                    entries.push(new_topic(wanted));
                    entries.len() - 1
                }
            };
            partitions(&mut entries[at]).extend(parts.into_iter().map(&error_entry));
        }
    }
}

fn rest_or_answer(
    nothing_left: bool,
    rest: RequestKind,
    empty: ResponseKind,
    patch: impl FnOnce(&mut ResponseKind) + Send + 'static,
) -> ErrorPlan {
    if nothing_left {
        let mut response = empty;
        patch(&mut response);
        ErrorPlan::Answer(response)
    } else {
        ErrorPlan::Handle(rest, Box::new(patch))
    }
}

/// A request-level error answer for the APIs without partitions of their own.
fn whole(request: RequestKind, version: i16, code: i16) -> ResponseKind {
    match request {
        RequestKind::ApiVersions(_) => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(code))
        }
        RequestKind::FindCoordinator(r) => {
            let coordinators = r
                .coordinator_keys
                .iter()
                .map(|key| {
                    find_coordinator_response::Coordinator::default()
                        .with_key(key.clone())
                        .with_node_id(BrokerId(-1))
                        .with_host(sb(""))
                        .with_port(-1)
                        .with_error_code(code)
                })
                .collect();
            ResponseKind::FindCoordinator(
                FindCoordinatorResponse::default()
                    .with_error_code(code)
                    .with_node_id(BrokerId(-1))
                    .with_host(sb(""))
                    .with_port(-1)
                    .with_coordinators(coordinators),
            )
        }
        RequestKind::JoinGroup(r) => ResponseKind::JoinGroup(
            JoinGroupResponse::default()
                .with_error_code(code)
                .with_generation_id(-1)
                .with_protocol_name(if version >= 7 { None } else { Some(sb("")) })
                .with_member_id(r.member_id),
        ),
        RequestKind::SyncGroup(_) => {
            ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
        }
        RequestKind::Heartbeat(_) => {
            ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::LeaveGroup(_) => {
            ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
        }
        RequestKind::OffsetFetch(r) => {
            let groups = r
                .groups
                .iter()
                .map(|g| {
                    offset_fetch_response::OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code)
                })
                .collect();
            // v0-1 have no top-level error code: each partition carries it.
            let topics = r
                .topics
                .iter()
                .flatten()
                .map(|t| {
                    offset_fetch_response::OffsetFetchResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partition_indexes
                                .iter()
                                .map(|&p| {
                                    offset_fetch_response::OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(-1)
                                        .with_committed_leader_epoch(-1)
                                        .with_metadata(Some(sb("")))
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::OffsetFetch(
                OffsetFetchResponse::default()
                    .with_error_code(code)
                    .with_topics(if version <= 1 { topics } else { Vec::new() })
                    .with_groups(groups),
            )
        }
        RequestKind::ListGroups(_) => {
            ResponseKind::ListGroups(ListGroupsResponse::default().with_error_code(code))
        }
        RequestKind::DescribeGroups(r) => ResponseKind::DescribeGroups(
            DescribeGroupsResponse::default().with_groups(
                r.groups
                    .into_iter()
                    .map(|g| {
                        describe_groups_response::DescribedGroup::default()
                            .with_group_id(g)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteGroups(r) => ResponseKind::DeleteGroups(
            DeleteGroupsResponse::default().with_results(
                r.groups_names
                    .into_iter()
                    .map(|g| {
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::OffsetDelete(_) => {
            ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(code))
        }
        RequestKind::InitProducerId(_) => ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ),
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(
            CreateTopicsResponse::default().with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        create_topics_response::CreatableTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(code)
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteTopics(r) => {
            let by_name = r.topic_names.into_iter().map(Some);
            let by_state = r.topics.into_iter().map(|t| t.name);
            ResponseKind::DeleteTopics(
                DeleteTopicsResponse::default().with_responses(
                    by_name
                        .chain(by_state)
                        .map(|name| {
                            delete_topics_response::DeletableTopicResult::default()
                                .with_name(name)
                                .with_error_code(code)
                        })
                        .collect(),
                ),
            )
        }
        RequestKind::CreatePartitions(r) => ResponseKind::CreatePartitions(
            CreatePartitionsResponse::default().with_results(
                r.topics
                    .into_iter()
                    .map(|t| {
                        create_partitions_response::CreatePartitionsTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeConfigs(r) => ResponseKind::DescribeConfigs(
            DescribeConfigsResponse::default().with_results(
                r.resources
                    .into_iter()
                    .map(|res| {
                        describe_configs_response::DescribeConfigsResult::default()
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(
            AlterConfigsResponse::default().with_responses(
                r.resources
                    .into_iter()
                    .map(|res| {
                        alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse::default().with_responses(
                r.resources
                    .into_iter()
                    .map(|res| {
                        incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name)
                            .with_error_code(code)
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeLogDirs(_) => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(code))
        }
        RequestKind::AddPartitionsToTxn(r) => ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(
                r.v3_and_below_topics
                    .into_iter()
                    .map(|t| {
                        add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                            .with_name(t.name)
                            .with_results_by_partition(
                                t.partitions
                                    .into_iter()
                                    .map(|p| {
                                        add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                            .with_partition_index(p)
                                            .with_partition_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeProducers(r) => ResponseKind::DescribeProducers(
            DescribeProducersResponse::default().with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        describe_producers_response::TopicResponse::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partition_indexes
                                    .into_iter()
                                    .map(|p| {
                                        describe_producers_response::PartitionResponse::default()
                                            .with_partition_index(p)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeTransactions(r) => ResponseKind::DescribeTransactions(
            DescribeTransactionsResponse::default().with_transaction_states(
                r.transactional_ids
                    .into_iter()
                    .map(|id| {
                        describe_transactions_response::TransactionState::default()
                            .with_transactional_id(id)
                            .with_error_code(code)
                            .with_producer_id(ProducerId(-1))
                            .with_producer_epoch(-1)
                    })
                    .collect(),
            ),
        ),
        RequestKind::ListTransactions(_) => ResponseKind::ListTransactions(
            ListTransactionsResponse::default().with_error_code(code),
        ),
        RequestKind::AddOffsetsToTxn(_) => {
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
        }
        RequestKind::EndTxn(_) => {
            ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(code))
        }
        RequestKind::TxnOffsetCommit(r) => ResponseKind::TxnOffsetCommit(
            TxnOffsetCommitResponse::default().with_topics(
                r.topics
                    .into_iter()
                    .map(|t| {
                        txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                            .with_name(t.name)
                            .with_partitions(
                                t.partitions
                                    .into_iter()
                                    .map(|p| {
                                        txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            ),
        ),
        // Every API this broker serves is answered above or in `plan`; SUPPORTED_APIS keeps
        // the decoder from handing over any other.
        _ => ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(code)),
    }
}
