//! A fault rule as a script writes it, and the checks that turn it into one the broker runs.
//!
//! A rule is a JSON object with three parts, each a few keys:
//!
//! ```text
//! {"api": "Produce", "topic": "t", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3}
//!  └── match ──────────────────┘  └── action ───────────────────┘  └ trigger ┘
//! ```
//!
//! - **Match**: `api` (Kafka's name, any case, or its key number; required), `min_version`
//!   and `max_version`, `client_id`, `topic`, `partition`, `broker` (the broker id that
//!   receives the request) and `group` (a group id the request names).
//! - **Action**, exactly one: `error` (a Kafka error name or code), `delay_ms`,
//!   `throttle_ms`, or `action` with `disconnect`, `blackhole` or `drop_response`.
//! - **Trigger**, at most one (none means `always`): `times: n` (the first n matching
//!   requests), `nth: n` (only the nth), `probability: p` with an optional `seed` (the same
//!   seed gives the same hits on every run), or `always: true`.
//!
//! Everything a rule holds is bounded, so no rule can make the broker wait for ever,
//! overflow a deadline or hold much memory; past a bound, [`RuleSpec::validate`] says which
//! key and what range it takes, and the admin API answers 400 with that.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::ResponseError;
use serde::Deserialize;
use serde_json::Value;

use crate::handlers::supported_range;
use crate::telemetry::error_name;

/// The longest `delay_ms` or `throttle_ms` a rule may ask for: one hour.
pub const MAX_WAIT_MS: u64 = 3_600_000;
/// The largest `times` or `nth`.
pub const MAX_COUNT: u64 = 1_000_000_000;
/// The longest client id, topic or group id a rule may name (Kafka's topic names stop at
/// 249 characters; client and group ids are strings of at most i16::MAX bytes on the wire,
/// but a rule has no use for more than this).
pub const MAX_NAME_LEN: usize = 1024;

/// A rule as it arrives: every key optional, so that [`RuleSpec::validate`] can name what
/// is missing or wrong instead of a parser's message.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    api: Option<Value>,
    min_version: Option<i64>,
    max_version: Option<i64>,
    client_id: Option<String>,
    topic: Option<String>,
    partition: Option<i64>,
    #[serde(alias = "broker_id")]
    broker: Option<i64>,
    #[serde(alias = "group_id")]
    group: Option<String>,
    error: Option<Value>,
    delay_ms: Option<i64>,
    throttle_ms: Option<i64>,
    action: Option<String>,
    times: Option<i64>,
    nth: Option<i64>,
    probability: Option<f64>,
    seed: Option<u64>,
    always: Option<bool>,
}

/// Which requests a rule applies to. `None` matches anything.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    /// The API.
    pub api: ApiKey,
    /// Its versions, inclusive.
    pub versions: (i16, i16),
    /// The client's `client.id`.
    pub client_id: Option<String>,
    /// A topic the request names.
    pub topic: Option<String>,
    /// A partition the request names (of `topic`, if given).
    pub partition: Option<i32>,
    /// The broker the request was sent to.
    pub broker: Option<i32>,
    /// A group id the request names.
    pub group: Option<String>,
}

impl Match {
    /// Does the rule narrow the request down to partitions? Then an error goes only on
    /// those partitions, on APIs that answer per partition.
    pub fn names_partitions(&self) -> bool {
        self.topic.is_some() || self.partition.is_some()
    }

    /// Does `(topic, partition)` fall in the rule?
    pub fn covers(&self, topic: &str, partition: i32) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
            && self.partition.is_none_or(|p| p == partition)
    }
}

/// What a rule does to a request it fires on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Answer with this Kafka error code (on the matched partitions, or the whole request).
    Error(i16),
    /// Hold the request this long on the broker's timing wheel, then handle it.
    Delay(u64),
    /// Answer with `throttle_time_ms` set, then read nothing more from the connection for
    /// that long.
    Throttle(u64),
    /// Close the connection instead of answering.
    Disconnect,
    /// Take the request and never answer it, nor anything after it on the connection.
    Blackhole,
    /// Handle the request (a produce is appended) but never send the answer; the
    /// connection then answers nothing more, as if the network had dropped it.
    DropResponse,
}

impl Action {
    /// How the rule list and the request log name it: `error NOT_LEADER_OR_FOLLOWER (6)`.
    pub fn describe(&self) -> String {
        match *self {
            Action::Error(code) => format!("error {} ({code})", error_name(code)),
            Action::Delay(ms) => format!("delay {ms} ms"),
            Action::Throttle(ms) => format!("throttle {ms} ms"),
            Action::Disconnect => "disconnect".into(),
            Action::Blackhole => "blackhole".into(),
            Action::DropResponse => "drop_response".into(),
        }
    }
}

/// When a rule fires on a request it matches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trigger {
    /// Every time.
    Always,
    /// The first n times.
    Times(u64),
    /// Only on the nth matching request (1 is the first).
    Nth(u64),
    /// With this probability, drawn from a generator seeded with `seed`.
    Probability {
        /// Between 0 (exclusive) and 1 (inclusive).
        p: f64,
        /// The generator's seed.
        seed: u64,
    },
}

/// A checked rule.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Which requests.
    pub matches: Match,
    /// What to do.
    pub action: Action,
    /// When.
    pub trigger: Trigger,
}

impl RuleSpec {
    /// Parses a rule from its JSON text, naming what is wrong if it is not one.
    pub fn parse(body: &str) -> Result<Rule, String> {
        let spec: RuleSpec =
            serde_json::from_str(body).map_err(|e| format!("not a fault rule: {e}"))?;
        spec.validate()
    }

    /// Checks every key and its range.
    pub fn validate(self) -> Result<Rule, String> {
        let api = match &self.api {
            None => {
                return Err("`api` is required: a Kafka API name or key, e.g. \"Produce\"".into())
            }
            Some(value) => parse_api(value)?,
        };
        let Some((min, max)) = supported_range(api) else {
            return Err(format!("this broker does not serve {api:?}"));
        };
        let min_version = version("min_version", self.min_version, min)?;
        let max_version = version("max_version", self.max_version, max)?;
        if min_version > max_version {
            return Err(format!(
                "`min_version` {min_version} is above `max_version` {max_version}"
            ));
        }
        let action = self.action_of()?;
        let trigger = self.trigger_of()?;
        let matches = Match {
            api,
            versions: (min_version, max_version),
            client_id: name("client_id", self.client_id)?,
            topic: name("topic", self.topic)?,
            partition: id("partition", self.partition)?,
            broker: id("broker", self.broker)?,
            group: name("group", self.group)?,
        };
        Ok(Rule {
            matches,
            action,
            trigger,
        })
    }

    fn action_of(&self) -> Result<Action, String> {
        let given = [
            self.error.is_some(),
            self.delay_ms.is_some(),
            self.throttle_ms.is_some(),
            self.action.is_some(),
        ];
        match given.iter().filter(|&&g| g).count() {
            0 => {
                return Err(
                    "give one action: `error`, `delay_ms`, `throttle_ms`, or `action` \
                     (disconnect, blackhole or drop_response)"
                        .into(),
                )
            }
            1 => {}
            _ => {
                return Err(
                    "give only one of `error`, `delay_ms`, `throttle_ms` and `action`".into(),
                )
            }
        }
        if let Some(error) = &self.error {
            return parse_error(error).map(Action::Error);
        }
        if let Some(ms) = self.delay_ms {
            return wait("delay_ms", ms).map(Action::Delay);
        }
        if let Some(ms) = self.throttle_ms {
            return wait("throttle_ms", ms).map(Action::Throttle);
        }
        match self.action.as_deref() {
            Some("disconnect") => Ok(Action::Disconnect),
            Some("blackhole") => Ok(Action::Blackhole),
            Some("drop_response") => Ok(Action::DropResponse),
            Some(other) => Err(format!(
                "unknown action {other:?}: one of disconnect, blackhole, drop_response"
            )),
            None => Err("no action".into()),
        }
    }

    fn trigger_of(&self) -> Result<Trigger, String> {
        let given = [
            self.times.is_some(),
            self.nth.is_some(),
            self.probability.is_some(),
            self.always.is_some(),
        ];
        if given.iter().filter(|&&g| g).count() > 1 {
            return Err("give at most one of `times`, `nth`, `probability` and `always`".into());
        }
        if self.seed.is_some() && self.probability.is_none() {
            return Err("`seed` goes with `probability`".into());
        }
        if let Some(n) = self.times {
            return count("times", n).map(Trigger::Times);
        }
        if let Some(n) = self.nth {
            return count("nth", n).map(Trigger::Nth);
        }
        if let Some(p) = self.probability {
            if !(p > 0.0 && p <= 1.0) {
                return Err(format!(
                    "`probability` is {p}: it takes a number above 0 and at most 1"
                ));
            }
            return Ok(Trigger::Probability {
                p,
                seed: self.seed.unwrap_or(0),
            });
        }
        match self.always {
            Some(false) => Err("`always: false` fires never: remove the rule instead".into()),
            _ => Ok(Trigger::Always),
        }
    }
}

/// An API by Kafka's name (`Produce`, `produce`, `OffsetCommit`) or key number.
fn parse_api(value: &Value) -> Result<ApiKey, String> {
    match value {
        Value::Number(n) => {
            let key = n
                .as_i64()
                .and_then(|k| i16::try_from(k).ok())
                .and_then(|k| ApiKey::try_from(k).ok());
            key.ok_or_else(|| format!("`api` {n} is not a Kafka API key"))
        }
        Value::String(name) => {
            let wanted: String = name.chars().filter(|c| *c != '_').collect();
            ApiKey::iter()
                .find(|k| format!("{k:?}").eq_ignore_ascii_case(&wanted))
                .ok_or_else(|| format!("`api` {name:?} is not a Kafka API name"))
        }
        other => Err(format!("`api` is {other}: give a name or a key")),
    }
}

/// A Kafka error by name (`NOT_LEADER_OR_FOLLOWER`, any case) or code. `NONE` (0) is not an
/// error, and neither is a code Kafka does not define.
fn parse_error(value: &Value) -> Result<i16, String> {
    let code = match value {
        Value::Number(n) => n
            .as_i64()
            .and_then(|c| i16::try_from(c).ok())
            .filter(|&c| known_error(c))
            .ok_or_else(|| format!("`error` {n} is not a Kafka error code"))?,
        Value::String(name) => (-1..=i16::from(u8::MAX))
            .filter(|&c| known_error(c))
            .find(|&c| error_name(c).eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("`error` {name:?} is not a Kafka error name"))?,
        other => return Err(format!("`error` is {other}: give a name or a code")),
    };
    if code == 0 {
        return Err("`error` NONE (0) is not an error".into());
    }
    Ok(code)
}

fn known_error(code: i16) -> bool {
    code == 0
        || matches!(
            ResponseError::try_from_code(code),
            Some(e) if !matches!(e, ResponseError::Unknown(_))
        )
}

fn version(key: &str, value: Option<i64>, default: i16) -> Result<i16, String> {
    match value {
        None => Ok(default),
        Some(v) => i16::try_from(v)
            .ok()
            .filter(|v| *v >= 0)
            .ok_or_else(|| format!("`{key}` is {v}: it takes 0 to {}", i16::MAX)),
    }
}

fn name(key: &str, value: Option<String>) -> Result<Option<String>, String> {
    match value {
        Some(v) if v.is_empty() || v.len() > MAX_NAME_LEN => Err(format!(
            "`{key}` takes 1 to {MAX_NAME_LEN} bytes, not {}",
            v.len()
        )),
        v => Ok(v),
    }
}

fn id(key: &str, value: Option<i64>) -> Result<Option<i32>, String> {
    value
        .map(|v| {
            i32::try_from(v)
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| format!("`{key}` is {v}: it takes 0 to {}", i32::MAX))
        })
        .transpose()
}

fn wait(key: &str, ms: i64) -> Result<u64, String> {
    u64::try_from(ms)
        .ok()
        .filter(|ms| (1..=MAX_WAIT_MS).contains(ms))
        .ok_or_else(|| format!("`{key}` is {ms}: it takes 1 to {MAX_WAIT_MS} ms (one hour)"))
}

fn count(key: &str, n: i64) -> Result<u64, String> {
    u64::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_COUNT).contains(n))
        .ok_or_else(|| format!("`{key}` is {n}: it takes 1 to {MAX_COUNT}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Rule, String> {
        RuleSpec::parse(json)
    }

    #[test]
    fn the_issue_examples_parse() {
        let rule = parse(
            r#"{"api": "Produce", "topic": "t", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3}"#,
        )
        .unwrap();
        assert_eq!(rule.matches.api, ApiKey::Produce);
        assert_eq!(rule.matches.topic.as_deref(), Some("t"));
        assert_eq!(rule.action, Action::Error(6));
        assert_eq!(rule.trigger, Trigger::Times(3));

        let rule =
            parse(r#"{"api": "Fetch", "client_id": "c1", "delay_ms": 800, "times": 1}"#).unwrap();
        assert_eq!(rule.action, Action::Delay(800));
        assert_eq!(rule.matches.client_id.as_deref(), Some("c1"));

        let rule = parse(r#"{"api": "Metadata", "action": "disconnect", "times": 1}"#).unwrap();
        assert_eq!(rule.action, Action::Disconnect);
    }

    #[test]
    fn apis_and_errors_by_name_any_case_or_number() {
        let rule = parse(r#"{"api": 0, "error": 6}"#).unwrap();
        assert_eq!(
            (rule.matches.api, rule.action),
            (ApiKey::Produce, Action::Error(6))
        );
        let rule = parse(r#"{"api": "offset_commit", "error": "rebalance_in_progress"}"#).unwrap();
        assert_eq!(rule.matches.api, ApiKey::OffsetCommit);
        assert_eq!(rule.action, Action::Error(27));
        assert_eq!(rule.trigger, Trigger::Always);
        // The version range defaults to what this broker serves.
        assert_eq!(
            rule.matches.versions,
            supported_range(ApiKey::OffsetCommit).unwrap()
        );
    }

    #[test]
    fn hostile_rules_are_refused_with_the_reason() {
        let cases = [
            (r#"{"api": "Nope", "error": 6}"#, "not a Kafka API name"),
            (r#"{"api": 9999, "error": 6}"#, "not a Kafka API key"),
            (
                r#"{"api": "Produce", "error": "NOT_AN_ERROR"}"#,
                "not a Kafka error name",
            ),
            (
                r#"{"api": "Produce", "error": 31000}"#,
                "not a Kafka error code",
            ),
            (r#"{"api": "Produce", "error": 0}"#, "not an error"),
            (
                r#"{"api": "Produce", "error": 6, "times": -1}"#,
                "`times` is -1",
            ),
            (r#"{"api": "Produce", "error": 6, "nth": 0}"#, "`nth` is 0"),
            (
                r#"{"api": "Fetch", "delay_ms": 99999999999999}"#,
                "`delay_ms` is 99999999999999",
            ),
            (r#"{"api": "Fetch", "delay_ms": -5}"#, "`delay_ms` is -5"),
            (
                r#"{"api": "Fetch", "throttle_ms": 0}"#,
                "`throttle_ms` is 0",
            ),
            (
                r#"{"api": "Fetch", "delay_ms": 5, "error": 6}"#,
                "only one of",
            ),
            (r#"{"api": "Fetch"}"#, "give one action"),
            (r#"{"error": 6}"#, "`api` is required"),
            (r#"{"api": "Fetch", "action": "explode"}"#, "unknown action"),
            (
                r#"{"api": "Fetch", "error": 6, "probability": 1.5}"#,
                "`probability` is 1.5",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "probability": 0}"#,
                "`probability` is 0",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "times": 1, "nth": 2}"#,
                "at most one of",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "seed": 4}"#,
                "`seed` goes with",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "partition": -1}"#,
                "`partition` is -1",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "min_version": 9, "max_version": 5}"#,
                "is above",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "colour": "red"}"#,
                "unknown field",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "topic": ""}"#,
                "`topic` takes 1 to",
            ),
            (
                r#"{"api": "Fetch", "error": 6, "times": "3"}"#,
                "not a fault rule",
            ),
            (r#"[1, 2]"#, "not a fault rule"),
            (r#"{"api": "ShareFetch", "error": 6}"#, "does not serve"),
        ];
        for (json, reason) in cases {
            let err = parse(json).expect_err(json);
            assert!(
                err.contains(reason),
                "{json}: {err:?} should say {reason:?}"
            );
        }
    }
}
