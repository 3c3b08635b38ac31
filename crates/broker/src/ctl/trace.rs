//! `purgatory ctl trace`: each request's story, printed as the request finishes.
//!
//! It long-polls `GET /api/requests` and reads each request into [`TracedRequest`]: the
//! broker's `RequestView` holds `&'static str` fields (its state, purgatory and cause
//! names) that cannot be read back from JSON, so this reads only what the trace prints,
//! with the steps and phases in the broker's own types.

use std::collections::HashSet;
use std::io::Write;

use purgatory::telemetry::requests::{PhasesView, StepView};
use serde::Deserialize;

use super::client::call_json;

/// What `ctl trace` shows.
#[derive(Debug, Default, Clone)]
pub struct TraceOptions {
    /// Only this client id.
    pub client: Option<String>,
    /// Only requests that touched this topic.
    pub topic: Option<String>,
    /// Only this Kafka request name (`Produce`, `FetchConsumer`, ...).
    pub request: Option<String>,
    /// Include replication traffic (follower fetches and the followers' other requests).
    pub followers: bool,
    /// Print each step and the Kafka phase times under the story.
    pub phases: bool,
    /// Stop after this many requests.
    pub count: Option<u64>,
}

/// The answer to `GET /api/requests` (built with `json!` in `admin::view`).
#[derive(Debug, Deserialize)]
struct RequestsAnswer {
    /// The number the next request will get.
    next_seq: u64,
    /// Requests finished since the broker started.
    finished: u64,
    /// The requests, newest first.
    #[serde(default)]
    requests: Vec<TracedRequest>,
}

/// The part of a `RequestView` that the trace prints.
#[derive(Debug, Deserialize)]
struct TracedRequest {
    seq: u64,
    /// `in_flight`, `parked` or `done`.
    state: String,
    story: String,
    /// Left out of the JSON when empty.
    #[serde(default)]
    steps: Vec<StepView>,
    phases_ms: PhasesView,
}

/// Percent-encodes a query value.
fn query_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `ctl trace`: streams each finished request's story, one line per request (Kafka's
/// phases under it with `--phases`), until interrupted or `--count` requests were shown.
///
/// It long-polls `GET /api/requests`: each answer lists the requests after the oldest one
/// still open, so a request parked for seconds is shown when it finishes, in the order
/// requests finish.
pub fn trace(admin: &str, options: &TraceOptions) -> anyhow::Result<()> {
    let mut filters = String::new();
    for (name, value) in [
        ("client", &options.client),
        ("topic", &options.topic),
        ("request", &options.request),
    ] {
        if let Some(v) = value {
            filters.push_str(&format!("&{name}={}", query_value(v)));
        }
    }
    if !options.followers {
        filters.push_str("&followers=0");
    }
    let first: RequestsAnswer = call_json(admin, "GET", "/api/requests?limit=0", "", None)?;
    let mut after = first.next_seq.saturating_sub(1);
    let mut finished = first.finished;
    eprintln!("following requests from #{} (Ctrl-C to stop)", after + 1);
    let mut shown: HashSet<u64> = HashSet::new();
    let mut count = 0u64;
    let stdout = std::io::stdout();
    loop {
        let path = format!(
            "/api/requests?after={after}&limit=4096&finished_after={finished}&wait_ms=10000{filters}"
        );
        let answer: RequestsAnswer = call_json(admin, "GET", &path, "", None)?;
        finished = answer.finished;
        let mut oldest_open = None;
        let mut newest = after;
        // Oldest first.
        for r in answer.requests.iter().rev() {
            newest = newest.max(r.seq);
            if r.state != "done" {
                oldest_open = Some(oldest_open.map_or(r.seq, |o: u64| o.min(r.seq)));
                continue;
            }
            if !shown.insert(r.seq) {
                continue;
            }
            let mut out = stdout.lock();
            writeln!(out, "{}", r.story)?;
            if options.phases {
                write!(out, "{}", render_phases(&r.steps, &r.phases_ms))?;
            }
            out.flush()?;
            count += 1;
            if options.count.is_some_and(|n| count >= n) {
                return Ok(());
            }
        }
        after = match oldest_open {
            Some(open) => open.saturating_sub(1),
            None => newest,
        };
        shown.retain(|&seq| seq > after);
    }
}

/// A request's steps and Kafka phase times, indented, for `ctl trace --phases`.
fn render_phases(steps: &[StepView], phases: &PhasesView) -> String {
    let mut out = String::new();
    for step in steps {
        let at = step
            .at_ms
            .map(|t| format!("+{t:.3} ms"))
            .unwrap_or_default();
        out += &format!("    {at:>14}  {}\n", step.text);
    }
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
    out += &format!(
        "    phases (ms): request queue {}  local {}  remote {}  response queue {}  response send {}  total {}\n",
        f(phases.request_queue),
        f(phases.local),
        f(phases.remote),
        f(phases.response_queue),
        f(phases.response_send),
        f(phases.total)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("rdkafka"), "rdkafka");
        assert_eq!(query_value("a b&c=<d>"), "a%20b%26c%3D%3Cd%3E");
    }

    #[test]
    fn phases_are_printed_one_per_line_under_the_story() {
        let r: TracedRequest = serde_json::from_value(serde_json::json!({
            "seq": 7, "state": "done", "story": "produce #7", "cause": {"kind": "immediate"},
            "steps": [{"at_ms": 0.1, "text": "appended @42"}, {"at_ms": 0.41, "text": "completed"}],
            "phases_ms": {"request_queue": 0.01, "local": 0.05, "remote": 0.3, "response_queue": 0.0,
                          "response_send": 0.02, "total": null}
        }))
        .expect("a request");
        let text = render_phases(&r.steps, &r.phases_ms);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with("+0.100 ms  appended @42"), "{text}");
        assert!(lines[2].contains("remote 0.300"), "{text}");
        assert!(lines[2].ends_with("total -"), "{text}");
    }

    #[test]
    fn a_request_without_steps_has_none() {
        let r: TracedRequest = serde_json::from_str(
            r#"{"seq": 1, "state": "parked", "story": "s", "phases_ms": {"request_queue": null,
                "local": null, "remote": null, "response_queue": null, "response_send": null,
                "total": null}}"#,
        )
        .expect("a request");
        assert!(r.steps.is_empty());
    }
}
