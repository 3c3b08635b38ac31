//! ApiVersions: the first request every modern client sends, to learn which versions of
//! each API it may use. The response header is always v0, even for the flexible v3+ body,
//! so a client can read it before it knows anything else about the broker.

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};

use super::{RequestContext, SUPPORTED_APIS};

/// Answers with every API we implement and its version range.
pub fn handle(_ctx: &RequestContext, _req: ApiVersionsRequest) -> ResponseKind {
    ResponseKind::ApiVersions(response(0))
}

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
