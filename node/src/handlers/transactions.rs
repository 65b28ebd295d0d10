//! The transactional producer's requests — AddPartitionsToTxn (v0-3, a client's; v4-5, a
//! partition leader's verification, KIP-890),
//! AddOffsetsToTxn, EndTxn, and TxnOffsetCommit (to the group's coordinator) —
//! answered by the transaction coordinator (`txn_coordinator/`), and WriteTxnMarkers, which a
//! coordinator sends to the leaders of a transaction's partitions over the inter-broker
//! listener. InitProducerId with a transactional id is in `init_producer_id.rs`. For
//! operators (`kafka-transactions`): DescribeTransactions and ListTransactions (this shard's
//! coordinator), DescribeProducers (the partitions this shard leads).

use std::rc::Rc;

use kafka_protocol::messages::add_offsets_to_txn_request::AddOffsetsToTxnRequest;
use kafka_protocol::messages::add_offsets_to_txn_response::AddOffsetsToTxnResponse;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnRequest;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
    AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_request::DescribeProducersRequest;
use kafka_protocol::messages::describe_producers_response::{
    DescribeProducersResponse, PartitionResponse as ProducersPartition,
    ProducerState as ActiveProducer, TopicResponse as ProducersTopic,
};
use kafka_protocol::messages::describe_transactions_request::DescribeTransactionsRequest;
use kafka_protocol::messages::describe_transactions_response::{
    DescribeTransactionsResponse, TopicData, TransactionState as DescribedTransaction,
};
use kafka_protocol::messages::end_txn_request::EndTxnRequest;
use kafka_protocol::messages::end_txn_response::EndTxnResponse;
use kafka_protocol::messages::list_transactions_request::ListTransactionsRequest;
use kafka_protocol::messages::list_transactions_response::{
    ListTransactionsResponse, TransactionState as ListedTransaction,
};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequest;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::write_txn_markers_request::WriteTxnMarkersRequest;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use kafka_protocol::messages::ProducerId;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use transactions::coordinator::ProducerIdAndEpoch;
use transactions::TxnVersion;

use crate::group_coordinator::membership::Caller;
use crate::group_coordinator::records::OffsetValue;
use crate::handlers::authorized::{authorized, on_cluster};
use crate::handlers::groups::Client;
use crate::limits::TXN_STATE_WRITE_TIMEOUT;
use crate::metadata::OFFSETS_TOPIC;
use crate::partition::internal::InTransaction;
use crate::partition::txns::TxnMarker;
use crate::security::acl::{Operation, ResourceType};
use crate::shard::{now_ms, ShardCtx};
use crate::txn_coordinator::TxnCheck;
use crate::txn_coordinator::{self, txn_error, TxnHost};

/// AddPartitionsToTxn: v0-3 a client's (below), v4+ a broker's (`from_broker`).
pub async fn add_partitions(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version >= 4 {
        from_broker(ctx, client, req, version).await
    } else {
        from_client(ctx, client, req, version).await
    }
}

/// AddPartitionsToTxn v4+ (KIP-890), from a partition leader, batched over transactions
/// (CLUSTER_ACTION): `verify_only` asks whether the partitions are in each producer's ongoing
/// transaction — a transactional produce's first batch on a partition waits for the answer;
/// without it the partitions are added, as a client's AddPartitionsToTxn would. v4 answers
/// TRANSACTION_ABORTABLE (v5's) as INVALID_TXN_STATE, as Kafka.
async fn from_broker(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let mut resp = AddPartitionsToTxnResponse::default();
    if !on_cluster(ctx, client, Operation::ClusterAction) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return resp;
    }
    let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
    for txn in req.transactions {
        let id = txn.transactional_id.0.to_string();
        let producer = ProducerIdAndEpoch {
            producer_id: txn.producer_id.0,
            epoch: txn.producer_epoch,
        };
        let partitions: Vec<(String, i32)> = txn
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|&p| (t.name.0.to_string(), p)))
            .collect();
        let check = if txn.verify_only {
            TxnCheck::Verify
        } else {
            TxnCheck::Add
        };
        let answers =
            txn_coordinator::check_partitions(host.clone(), &id, producer, partitions, check).await;
        let answers = answers.into_iter().map(|(tp, e)| {
            let e = match e {
                Some(ResponseError::TransactionAbortable) if version < 5 => {
                    Some(ResponseError::InvalidTxnState)
                }
                e => e,
            };
            (tp, e)
        });
        resp.results_by_transaction.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topic_results(answers)),
        );
    }
    resp
}

/// Per-topic partition results of AddPartitionsToTxn.
fn topic_results(
    answers: impl IntoIterator<Item = ((String, i32), Option<ResponseError>)>,
) -> Vec<AddPartitionsToTxnTopicResult> {
    super::by_topic(answers.into_iter().map(|((t, p), e)| (t, (p, e))))
        .into_iter()
        .map(|(topic, results)| {
            let mut tr = AddPartitionsToTxnTopicResult::default();
            tr.name = kafka_protocol::messages::TopicName(topic.into());
            tr.results_by_partition = results
                .into_iter()
                .map(|(p, e)| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(e.map_or(0, |e| e.code()))
                })
                .collect();
            tr
        })
        .collect()
}

/// AddPartitionsToTxn v0-3 (one transaction, a client's). Every partition gets the same answer:
/// the coordinator's, or — when some partition cannot be added at all (not authorized,
/// unknown) — those partitions their error and the others OPERATION_NOT_ATTEMPTED, as Kafka.
async fn from_client(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.0.to_string();
    let mut wanted: Vec<((String, i32), Option<ResponseError>)> = Vec::new();
    for t in &req.v3_and_below_topics {
        let name = t.name.0.to_string();
        let problem = if !authorized(ctx, client, Operation::Write, ResourceType::Topic, &name) {
            Some(ResponseError::TopicAuthorizationFailed)
        } else if crate::metadata::is_internal(&name) {
            // Offsets join a transaction through AddOffsetsToTxn.
            Some(ResponseError::TopicAuthorizationFailed)
        } else {
            None
        };
        for &p in &t.partitions {
            let unknown = ctx.snapshot().partition(&name, p).is_none();
            let problem = problem.or(unknown.then_some(ResponseError::UnknownTopicOrPartition));
            wanted.push(((name.clone(), p), problem));
        }
    }
    let all = |e: Option<ResponseError>| -> Vec<((String, i32), Option<ResponseError>)> {
        wanted.iter().map(|(tp, _)| (tp.clone(), e)).collect()
    };
    let answers = if !authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &id,
    ) {
        all(Some(ResponseError::TransactionalIdAuthorizationFailed))
    } else if wanted.iter().any(|(_, p)| p.is_some()) {
        wanted
            .iter()
            .map(|(tp, p)| {
                (
                    tp.clone(),
                    Some(p.unwrap_or(ResponseError::OperationNotAttempted)),
                )
            })
            .collect()
    } else {
        let producer = ProducerIdAndEpoch {
            producer_id: req.v3_and_below_producer_id.0,
            epoch: req.v3_and_below_producer_epoch,
        };
        let partitions: Vec<(String, i32)> = wanted.iter().map(|(tp, _)| tp.clone()).collect();
        let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
        let added = txn_coordinator::add_partitions(
            host,
            &id,
            producer,
            &partitions,
            TxnVersion::V0,
            now_ms(),
        );
        all(added.await.err().map(|e| txn_error(e, version, 2)))
    };
    AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(topic_results(answers))
}

/// The number of `__consumer_offsets` partitions (the configured count before it exists).
fn offsets_partitions(ctx: &ShardCtx) -> i32 {
    ctx.snapshot()
        .topics
        .get(OFFSETS_TOPIC)
        .map_or(ctx.config().group.offsets_topic_partitions, |t| {
            t.partitions.len() as i32
        })
}

/// TxnOffsetCommit v5 (transaction version 2): adds `group`'s `__consumer_offsets` partition to
/// the transaction through its coordinator; the error the commit's partitions get if not
/// (coordinator trouble as COORDINATOR_LOAD_IN_PROGRESS, which the producer retries).
async fn add_offsets_partition(
    ctx: &Rc<ShardCtx>,
    req: &TxnOffsetCommitRequest,
    group: &str,
) -> Option<ResponseError> {
    let p = crate::group_coordinator::partition_for(group, offsets_partitions(ctx));
    let producer = ProducerIdAndEpoch {
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
    };
    let partitions = vec![(OFFSETS_TOPIC.to_owned(), p)];
    let verdicts = ctx
        .check_in_transaction(&req.transactional_id.0, producer, partitions, TxnCheck::Add)
        .await;
    let e = verdicts.into_iter().find_map(|(_, e)| e)?;
    Some(match e {
        ResponseError::ConcurrentTransactions
        | ResponseError::NetworkException
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator => ResponseError::CoordinatorLoadInProgress,
        e => e,
    })
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction (WRITE
/// on the transactional id, READ on the group).
pub async fn add_offsets(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.0.to_string();
    let group = req.group_id.0.to_string();
    let mut resp = AddOffsetsToTxnResponse::default();
    let error = if !authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &id,
    ) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !authorized(ctx, client, Operation::Read, ResourceType::Group, &group) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        let partitions = offsets_partitions(ctx);
        let producer = ProducerIdAndEpoch {
            producer_id: req.producer_id.0,
            epoch: req.producer_epoch,
        };
        let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
        let added = txn_coordinator::add_offsets(host, &id, producer, &group, partitions, now_ms());
        added.await.err().map(|e| txn_error(e, version, 2))
    };
    resp.error_code = error.map_or(0, |e| e.code());
    resp
}

/// TxnOffsetCommit: a consumer group's offsets committed in the producer's transaction, by
/// the group's coordinator (READ on the group and on each topic); visible once the
/// transaction commits.
pub async fn txn_offset_commit(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let now = now_ms();
    let group = req.group_id.0.to_string();
    let group_ok = authorized(ctx, client, Operation::Read, ResourceType::Group, &group);
    let txn_ok = authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &req.transactional_id.0,
    );
    let mut answers: Vec<(String, i32, Option<ResponseError>)> = Vec::new();
    let mut offsets = Vec::new();
    for t in &req.topics {
        let name = t.name.0.to_string();
        let topic_ok = authorized(ctx, client, Operation::Read, ResourceType::Topic, &name);
        for p in &t.partitions {
            let refused = if !txn_ok {
                Some(ResponseError::TransactionalIdAuthorizationFailed)
            } else if !group_ok {
                Some(ResponseError::GroupAuthorizationFailed)
            } else if !topic_ok {
                Some(ResponseError::TopicAuthorizationFailed)
            } else {
                offsets.push((
                    name.clone(),
                    p.partition_index,
                    OffsetValue {
                        offset: p.committed_offset,
                        leader_epoch: if version >= 2 {
                            p.committed_leader_epoch
                        } else {
                            -1
                        },
                        metadata: p
                            .committed_metadata
                            .as_ref()
                            .map(|m| m.to_string())
                            .unwrap_or_default(),
                        commit_timestamp: now,
                    },
                ));
                None
            };
            answers.push((name.clone(), p.partition_index, refused));
        }
    }
    if !offsets.is_empty() && version >= 5 {
        // Transaction version 2: no AddOffsetsToTxn came first; the group's offsets partition
        // joins the transaction here, before any offset is written in it.
        if let Some(e) = add_offsets_partition(ctx, &req, &group).await {
            for a in answers.iter_mut().filter(|a| a.2.is_none()) {
                a.2 = Some(e);
            }
            offsets.clear();
        }
    }
    if !offsets.is_empty() {
        let txn = InTransaction {
            producer_id: req.producer_id.0,
            producer_epoch: req.producer_epoch,
        };
        let who = Caller {
            member_id: &req.member_id,
            instance_id: req.group_instance_id.as_deref(),
            generation: if version >= 3 { req.generation_id } else { -1 },
        };
        let committed = ctx
            .groups()
            .txn_commit(&**ctx, &group, txn, who, offsets, now)
            .await;
        let mut results = match committed {
            Ok(results) => results.into_iter(),
            Err(e) => vec![Err(e); answers.iter().filter(|a| a.2.is_none()).count()].into_iter(),
        };
        for a in answers.iter_mut().filter(|a| a.2.is_none()) {
            a.2 = results
                .next()
                .and_then(|r| r.err())
                .map(|e| txn_error(e, version, 3));
        }
    }
    let mut resp = TxnOffsetCommitResponse::default();
    for (topic, results) in super::by_topic(answers.into_iter().map(|(t, p, e)| (t, (p, e)))) {
        resp.topics.push(
            TxnOffsetCommitResponseTopic::default()
                .with_name(kafka_protocol::messages::TopicName(topic.into()))
                .with_partitions(
                    results
                        .into_iter()
                        .map(|(p, e)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(e.map_or(0, |e| e.code()))
                        })
                        .collect(),
                ),
        );
    }
    resp
}

/// EndTxn v0-4: the transaction prepared to commit or abort (its markers follow).
pub async fn end_txn(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: EndTxnRequest,
    version: i16,
) -> EndTxnResponse {
    let id = req.transactional_id.0.to_string();
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if !authorized(
        ctx,
        client,
        Operation::Write,
        ResourceType::TransactionalId,
        &id,
    ) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return resp;
    }
    let producer = ProducerIdAndEpoch {
        producer_id: req.producer_id.0,
        epoch: req.producer_epoch,
    };
    let host: Rc<dyn txn_coordinator::TxnHost> = ctx.clone();
    let txn_version = if version >= 5 {
        TxnVersion::V2
    } else {
        TxnVersion::V0
    };
    let ended = txn_coordinator::end_txn(host, &id, producer, req.committed, txn_version, now_ms());
    match ended.await {
        Ok(Some(next)) => {
            resp.producer_id = ProducerId(next.producer_id);
            resp.producer_epoch = next.epoch;
        }
        Ok(None) => {}
        Err(e) => resp.error_code = txn_error(e, version, 2).code(),
    }
    resp
}

/// WriteTxnMarkers v1 (from a transaction coordinator, CLUSTER_ACTION): each marker appended to
/// each of its partitions this shard leads, answered once every in-sync replica has it.
pub async fn write_txn_markers(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: WriteTxnMarkersRequest,
) -> WriteTxnMarkersResponse {
    let allowed = on_cluster(ctx, client, Operation::ClusterAction);
    let now = now_ms();
    let mut resp = WriteTxnMarkersResponse::default();
    for m in req.markers {
        let mut result = WritableTxnMarkerResult::default().with_producer_id(m.producer_id);
        for t in &m.topics {
            let name = t.name.0.to_string();
            let m = &m;
            let writes = t.partition_indexes.iter().map(|&p| {
                let name = name.clone();
                async move {
                    let error = if !allowed {
                        Some(ResponseError::ClusterAuthorizationFailed)
                    } else {
                        write_marker(ctx, (&name, p), m, now).await.err()
                    };
                    WritableTxnMarkerPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(error.map_or(0, |e| e.code()))
                }
            });
            let partitions = futures_util::future::join_all(writes).await;
            result.topics.push(
                WritableTxnMarkerTopicResult::default()
                    .with_name(t.name.clone())
                    .with_partitions(partitions),
            );
        }
        resp.markers.push(result);
    }
    resp
}

/// Appends one marker to one partition this shard leads and waits for the high watermark.
async fn write_marker(
    ctx: &Rc<ShardCtx>,
    (topic, p): (&str, i32),
    m: &kafka_protocol::messages::write_txn_markers_request::WritableTxnMarker,
    now: i64,
) -> Result<(), ResponseError> {
    let part = ctx.writable_partition(topic, p).map_err(|r| r.error)?;
    let epoch = ctx.leader_epoch(&part);
    let marker = TxnMarker {
        producer_id: m.producer_id.0,
        producer_epoch: m.producer_epoch,
        commit: m.transaction_result,
        coordinator_epoch: m.coordinator_epoch,
        version: TxnVersion::from_level(i16::from(m.transaction_version)),
    };
    let appended = part.append_marker(&marker, epoch, now).await.map_err(|r| {
        tracing::debug!(topic, partition = p, error = %r.message, "marker refused");
        r.error
    })?;
    let done = async { Some(part.wait_acknowledgeable(&appended).await) };
    let expired = async {
        glommio::timer::sleep(TXN_STATE_WRITE_TIMEOUT).await;
        None
    };
    match futures_lite::future::or(done, expired).await {
        Some(r) => r.map_err(|r| r.error)?,
        None => return Err(ResponseError::RequestTimedOut),
    }
    if topic == OFFSETS_TOPIC {
        // The group coordinator of this partition settles the transaction's offsets.
        let partitions = ctx
            .snapshot()
            .topics
            .get(OFFSETS_TOPIC)
            .map_or(0, |t| t.partitions.len());
        let commit = m.transaction_result;
        ctx.groups()
            .complete_txn(p, partitions as i32, m.producer_id.0, commit, now);
    }
    Ok(())
}

/// DescribeTransactions: each transactional id's state on this coordinator (DESCRIBE on it;
/// the partitions shown only of topics the caller may describe).
pub fn describe_transactions(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut resp = DescribeTransactionsResponse::default();
    for id in req.transactional_ids {
        let mut st = DescribedTransaction::default();
        st.producer_id = ProducerId(-1);
        st.producer_epoch = -1;
        st.transaction_start_time_ms = -1;
        st.transaction_state = StrBytes::from_static_str("");
        let name = id.0.to_string();
        st.transactional_id = id;
        if !authorized(
            ctx,
            client,
            Operation::Describe,
            ResourceType::TransactionalId,
            &name,
        ) {
            st.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
            resp.transaction_states.push(st);
            continue;
        }
        match txn_coordinator::describe(&**ctx, &name) {
            Err(e) => st.error_code = e.code(),
            Ok(m) => {
                st.transaction_state = StrBytes::from_static_str(m.state.name());
                st.transaction_timeout_ms = m.timeout_ms;
                st.transaction_start_time_ms = m.start_ms;
                st.producer_id = ProducerId(m.producer_id);
                st.producer_epoch = m.producer_epoch;
                let visible = m.partitions.iter().filter(|(t, _)| {
                    authorized(ctx, client, Operation::Describe, ResourceType::Topic, t)
                });
                st.topics = super::by_topic(visible.cloned())
                    .into_iter()
                    .map(|(topic, partitions)| {
                        TopicData::default()
                            .with_topic(kafka_protocol::messages::TopicName(topic.into()))
                            .with_partitions(partitions)
                    })
                    .collect();
            }
        }
        resp.transaction_states.push(st);
    }
    resp
}

/// ListTransactions v0-2: the transactions this shard coordinates (an admin client asks every
/// broker), filtered by state, producer id, (v1) how long they have run and (v2) a regular
/// expression the whole id matches (INVALID_REGULAR_EXPRESSION when it does not compile); the
/// caller sees the ids it may describe.
pub fn list_transactions(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: ListTransactionsRequest,
    version: i16,
) -> ListTransactionsResponse {
    let mut resp = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for f in &req.state_filters {
        match transactions::TxnState::from_name(f) {
            Some(s) => states.push(s),
            None => resp.unknown_state_filters.push(f.clone()),
        }
    }
    // Unknown state names match nothing (Kafka's rule): with only those, nothing is listed.
    if !req.state_filters.is_empty() && states.is_empty() {
        return resp;
    }
    let pattern = match req
        .transactional_id_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
    {
        Some(p) if version >= 2 => match id_pattern(p) {
            Ok(re) => Some(re),
            Err(e) => {
                tracing::debug!(pattern = p, error = %e, "ListTransactions pattern refused");
                resp.error_code = ResponseError::InvalidRegularExpression.code();
                return resp;
            }
        },
        _ => None,
    };
    let pids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let longer_than = if version >= 1 {
        req.duration_filter
    } else {
        -1
    };
    let now = now_ms();
    let listed = ctx.txn_coordinator().each(|id, m| {
        let wanted = (states.is_empty() || states.contains(&m.state))
            && (pids.is_empty() || pids.contains(&m.producer_id))
            && (longer_than < 0 || (m.start_ms >= 0 && now - m.start_ms > longer_than))
            && pattern.as_ref().is_none_or(|re| re.is_match(id));
        wanted.then(|| (id.to_owned(), m.producer_id, m.state))
    });
    for (id, pid, state) in listed {
        if !authorized(
            ctx,
            client,
            Operation::Describe,
            ResourceType::TransactionalId,
            &id,
        ) {
            continue;
        }
        resp.transaction_states.push(
            ListedTransaction::default()
                .with_transactional_id(kafka_protocol::messages::TransactionalId(id.into()))
                .with_producer_id(ProducerId(pid))
                .with_transaction_state(StrBytes::from_static_str(state.name())),
        );
    }
    resp
}

/// ListTransactions' pattern as Kafka applies it (`Pattern.matches`: the whole id), with
/// Rust's `regex` syntax (RE2's, as Kafka's consumer-group patterns; no look-around or
/// back-references), its size bounded.
fn id_pattern(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(crate::limits::ID_PATTERN_BYTES_MAX)
        .build()
}

/// DescribeProducers: the producers each asked partition remembers (READ on the topic; the
/// partition led by this shard, else NOT_LEADER_OR_FOLLOWER).
pub fn describe_producers(
    ctx: &Rc<ShardCtx>,
    client: &Client,
    req: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let mut resp = DescribeProducersResponse::default();
    for t in req.topics {
        let name = t.name.0.to_string();
        let allowed = authorized(ctx, client, Operation::Read, ResourceType::Topic, &name);
        let mut tr = ProducersTopic::default().with_name(t.name.clone());
        for p in t.partition_indexes {
            let mut pr = ProducersPartition::default().with_partition_index(p);
            if !allowed {
                pr.error_code = ResponseError::TopicAuthorizationFailed.code();
            } else {
                match ctx.writable_partition(&name, p) {
                    Err(r) => {
                        pr.error_code = r.error.code();
                        pr.error_message = Some(StrBytes::from_string(r.message));
                    }
                    Ok(part) => {
                        pr.active_producers = part
                            .describe_producers()
                            .into_iter()
                            .map(|d| {
                                ActiveProducer::default()
                                    .with_producer_id(ProducerId(d.producer_id))
                                    .with_producer_epoch(i32::from(d.epoch))
                                    .with_last_sequence(d.last_sequence)
                                    .with_last_timestamp(d.last_timestamp)
                                    .with_coordinator_epoch(d.coordinator_epoch)
                                    .with_current_txn_start_offset(d.current_txn_start_offset)
                            })
                            .collect();
                    }
                }
            }
            tr.partitions.push(pr);
        }
        resp.topics.push(tr);
    }
    resp
}
