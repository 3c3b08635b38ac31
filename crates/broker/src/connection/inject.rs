//! What a fired fault rule does to one request on this connection (`crate::faults`).
//!
//! The rule was chosen before the handler ran; here it becomes what the read loop does
//! instead of (or around) the usual handle-and-answer:
//!
//! - `error`: answer from the request itself, or hand the handler what is left of the
//!   request and patch the error partitions into its answer (`faults::answer`);
//! - `delay_ms`: wait on the timing wheel (a `DelayedFault`), then handle as usual;
//! - `throttle_ms`: handle as usual, set `throttle_time_ms` in the answer, and read
//!   nothing more from the connection until the throttle is over;
//! - `disconnect`: close the connection, after the answers owed before this request;
//! - `blackhole`: never answer, and take no more requests from the connection;
//! - `drop_response`: handle as usual (a produce is appended), but never answer; then as
//!   `blackhole`.

use kafka_protocol::messages::{RequestKind, ResponseKind};

use super::Close;
use crate::faults::answer::{self, ErrorPlan, Patch};
use crate::faults::{Action, Fired};
use crate::handlers::{Reply, RequestContext};
use crate::replica_manager::ReplicaManager;
use crate::telemetry::{FaultNote, PartitionNote};

/// What the read loop does with a request a rule fired on.
pub(super) struct Injected {
    /// The request to handle, if it is to be handled (else `reply` answers it).
    pub request: Option<RequestKind>,
    /// The reply when the handler is not called.
    pub reply: Option<Reply>,
    /// Changes the handler's answer.
    pub patch: Option<Patch>,
    /// Set `throttle_time_ms` and mute the connection this long after answering.
    pub throttle_ms: Option<u64>,
    /// Answer nothing, now or ever again, on this connection.
    pub then_silent: bool,
    /// The rule.
    pub rule: u64,
    /// Who sent the request (a throttle's hold names it).
    pub ctx: RequestContext,
}

impl Injected {
    fn handle(request: RequestKind, rule: u64, ctx: &RequestContext) -> Self {
        Injected {
            ctx: ctx.clone(),
            request: Some(request),
            reply: None,
            patch: None,
            throttle_ms: None,
            then_silent: false,
            rule,
        }
    }

    fn reply(reply: Reply, rule: u64, ctx: &RequestContext) -> Self {
        Injected {
            request: None,
            reply: Some(reply),
            ..Injected::handle(RequestKind::ApiVersions(Default::default()), rule, ctx)
        }
    }
}

/// Applies `fired` to `request`. A `delay_ms` rule waits here, on the timing wheel.
pub(super) async fn inject(
    rm: &ReplicaManager,
    ctx: &RequestContext,
    request: RequestKind,
    fired: Fired,
) -> Result<Injected, Close> {
    let rule = fired.rule;
    rm.telemetry.note_fault(
        ctx.trace,
        FaultNote {
            rule,
            action: fired.action.describe(),
        },
    );
    Ok(match fired.action {
        Action::Error(code) => match error_plan(rm, ctx, request, &fired, code) {
            ErrorPlan::Answer(response) => Injected::reply(Reply::now(response), rule, ctx),
            ErrorPlan::Handle(rest, patch) => Injected {
                patch: Some(patch),
                ..Injected::handle(rest, rule, ctx)
            },
        },
        Action::Delay(ms) => {
            let (held, _) = rm.faults.hold(ctx, rule, "delay", ms);
            if held.await.is_err() {
                return Err(Close::Reason(
                    "the broker stopped during a fault delay".into(),
                ));
            }
            Injected::handle(request, rule, ctx)
        }
        Action::Throttle(ms) => Injected {
            throttle_ms: Some(ms),
            ..Injected::handle(request, rule, ctx)
        },
        Action::Disconnect => Injected::reply(
            Reply::Close(format!("fault rule {rule}: disconnect")),
            rule,
            ctx,
        ),
        Action::Blackhole => Injected {
            then_silent: true,
            ..Injected::reply(Reply::Nothing, rule, ctx)
        },
        Action::DropResponse => Injected {
            then_silent: true,
            ..Injected::handle(request, rule, ctx)
        },
    })
}

/// An error rule's plan, with the partitions it fails noted in the request log.
fn error_plan(
    rm: &ReplicaManager,
    ctx: &RequestContext,
    request: RequestKind,
    fired: &Fired,
    code: i16,
) -> ErrorPlan {
    let (plan, failed) = answer::plan(request, ctx.api_version, &fired.matches, code);
    let notes = failed.into_iter().map(|tp| PartitionNote {
        tp,
        offset: -1,
        last_offset: -1,
        required: None,
        error: Some(code),
    });
    rm.telemetry.note_parked(ctx.trace, notes, None);
    plan
}

/// Applies what the rule does to the handler's (now known) reply.
pub(super) fn finish_reply(reply: Reply, injected: &mut Injected) -> Reply {
    if injected.then_silent {
        return Reply::Nothing;
    }
    match reply {
        Reply::Now(mut response) => {
            if let Some(patch) = injected.patch.take() {
                patch(&mut response);
            }
            if let Some(ms) = injected.throttle_ms {
                set_throttle(&mut response, i32::try_from(ms).unwrap_or(i32::MAX));
            }
            Reply::Now(response)
        }
        // An acks=0 produce with an error partition: no answer can carry the error, so
        // the connection closes, as Kafka's does.
        Reply::Nothing if injected.patch.is_some() => Reply::Close(format!(
            "fault rule {}: an error on an acks=0 produce closes the connection",
            injected.rule
        )),
        other => other,
    }
}

/// Sets `throttle_time_ms` in an answer (every API this broker serves carries one).
fn set_throttle(response: &mut ResponseKind, ms: i32) {
    macro_rules! throttle {
        ($($api:ident),* $(,)?) => {
            match response {
                $(ResponseKind::$api(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    throttle!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        InitProducerId,
        OffsetForLeaderEpoch,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        DeleteRecords,
        CreatePartitions,
        OffsetDelete,
        DescribeLogDirs,
    );
}
