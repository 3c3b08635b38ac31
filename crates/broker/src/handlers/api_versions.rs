//! ApiVersions: the first request every modern client sends, to learn which versions of
//! each API it may use. The response header is always v0, even for the flexible v3+ body,
//! so a client can read it before it knows anything else about the broker.
//!
//! v3+ also carries the cluster's features. This broker finalizes one,
//! `transaction.version` at level 2 (KIP-890 part 2, Kafka 4's default): clients that know
//! it (the Java client 4.x, franz-go) then let Produce v12 and TxnOffsetCommit v5 add
//! their partitions to the transaction, and expect EndTxn v5 to bump the epoch of every
//! transaction.

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::{RequestContext, SUPPORTED_APIS};

/// Answers with every API we implement and its version range.
pub fn handle(ctx: &RequestContext, _req: ApiVersionsRequest) -> ResponseKind {
    let response = response(0);
    ResponseKind::ApiVersions(if ctx.api_version >= FEATURES {
        with_features(response)
    } else {
        response
    })
}

/// The first ApiVersions version whose answer carries the features.
const FEATURES: i16 = 3;

/// The response body; also used (at v0, with UNSUPPORTED_VERSION) when a client asks with a
/// version newer than ours, so it can retry with one we know.
pub fn response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = SUPPORTED_APIS
        .iter()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

/// `response` with the cluster's features (v3+ only: older answers cannot carry them).
fn with_features(response: ApiVersionsResponse) -> ApiVersionsResponse {
    response
        .with_supported_features(vec![SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION_LEVEL)])
        .with_finalized_features_epoch(FINALIZED_FEATURES_EPOCH)
        .with_finalized_features(vec![FinalizedFeatureKey::default()
            .with_name(StrBytes::from_static_str(TRANSACTION_VERSION))
            .with_min_version_level(TRANSACTION_VERSION_LEVEL)
            .with_max_version_level(TRANSACTION_VERSION_LEVEL)])
}

/// The feature that says which transaction protocol the cluster runs.
const TRANSACTION_VERSION: &str = "transaction.version";

/// Transaction version 2: implicit adds and an epoch bump per transaction.
const TRANSACTION_VERSION_LEVEL: i16 = 2;

/// The epoch of the finalized features: they never change in this broker's life.
const FINALIZED_FEATURES_EPOCH: i64 = 1;
