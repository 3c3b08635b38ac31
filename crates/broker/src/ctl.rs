//! `purgatory ctl`: a command-line client for the admin HTTP API.
//!
//! `purgatory ctl state` prints what the broker holds — partitions with their HW, LEO and
//! ISR, the purgatories and what each parked request waits for, the timing wheel, the
//! followers — in plain words. `purgatory ctl groups` prints the consumer groups with their
//! members and the DelayedJoin / DelayedSync / DelayedHeartbeat each waits in.
//! `purgatory ctl follower 2 pause` steers a follower. `purgatory ctl trace` streams each
//! request's story as it finishes. Any failure (broker unreachable, unknown follower, bad
//! value) exits non-zero.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

/// Sends one HTTP/1.1 request and returns (status, body). Kept dependency-free: the admin
/// API is small and always answers with a complete JSON body and `Connection: close`.
pub fn http(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> anyhow::Result<(u16, String)> {
    let mut stream = TcpStream::connect(admin)
        .with_context(|| format!("cannot reach the admin API at {admin}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .context("malformed HTTP status line")?;
    Ok((status, body.to_string()))
}

fn call(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> anyhow::Result<Value> {
    let (status, body) = http(admin, method, path, body, token)?;
    let json: Value = serde_json::from_str(&body).unwrap_or(Value::String(body.clone()));
    if status >= 400 {
        let message = json
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or(&body)
            .to_string();
        bail!("HTTP {status}: {message}");
    }
    Ok(json)
}

/// `ctl state`: prints the broker's state (or the raw JSON).
pub fn state(admin: &str, raw_json: bool) -> anyhow::Result<()> {
    let state = call(admin, "GET", "/api/state", "", None)?;
    if raw_json {
        println!("{}", serde_json::to_string_pretty(&state)?);
        return Ok(());
    }
    print!("{}", render_state(&state));
    Ok(())
}

/// `ctl groups`: prints every consumer group (or the raw JSON of its part of the state).
pub fn groups(admin: &str, raw_json: bool) -> anyhow::Result<()> {
    let state = call(admin, "GET", "/api/state", "", None)?;
    if raw_json {
        let part = serde_json::json!({
            "now_ms": state["now_ms"],
            "groups": state["groups"],
            "rebalance": state["purgatories"]["rebalance"],
            "heartbeat": state["purgatories"]["heartbeat"],
        });
        println!("{}", serde_json::to_string_pretty(&part)?);
        return Ok(());
    }
    print!("{}", render_groups(&state));
    Ok(())
}

/// Renders the groups of `/api/state` as text: each group, its members, and the delayed
/// operations that belong to it.
pub fn render_groups(state: &Value) -> String {
    let s = |v: &Value| {
        v.as_i64().map(|n| n.to_string()).unwrap_or_else(|| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
    };
    let now = state["now_ms"].as_i64().unwrap_or(0);
    let groups = &state["groups"];
    let mut out = format!(
        "groups {}  members {}  committed offsets {}  (limits: {} groups, {} members, {} offsets)\n",
        s(&groups["total"]),
        s(&groups["members"]),
        s(&groups["committed_offsets"]),
        s(&groups["limits"]["groups"]),
        s(&groups["limits"]["members"]),
        s(&groups["limits"]["committed_offsets"]),
    );
    let pending: Vec<&Value> = ["rebalance", "heartbeat"]
        .iter()
        .flat_map(|p| {
            state["purgatories"][p]["pending"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .collect();
    for g in groups["list"].as_array().into_iter().flatten() {
        let id = g["group_id"].as_str().unwrap_or("?");
        out += &format!(
            "\ngroup {id}  {}  generation {}  protocol {}/{}  leader {}  ({}, state since {} ms)\n",
            s(&g["state"]),
            s(&g["generation_id"]),
            g["protocol_type"].as_str().unwrap_or("-"),
            g["protocol"].as_str().unwrap_or("-"),
            g["leader"].as_str().unwrap_or("-"),
            s(&g["offsets_partition"]),
            s(&g["state_since_ms"]),
        );
        for m in g["members"].as_array().into_iter().flatten() {
            let deadline = m["session_deadline_ms"].as_i64().unwrap_or(0);
            let waiting = if m["awaiting_join"].as_bool() == Some(true) {
                "  JoinGroup parked"
            } else if m["awaiting_sync"].as_bool() == Some(true) {
                "  SyncGroup parked"
            } else {
                ""
            };
            let assignment = match m["assigned_partitions"].as_i64() {
                Some(n) => format!("{n} partition(s) {}", m["assignment"]),
                None => format!("{} byte(s)", s(&m["assignment_bytes"])),
            };
            out += &format!(
                "  member {}{}  client {}  host {}  session {} ms, expires at {deadline} ms (in {} ms)  assignment {assignment}{waiting}\n",
                s(&m["member_id"]),
                if m["leader"].as_bool() == Some(true) { " (leader)" } else { "" },
                s(&m["client_id"]),
                s(&m["client_host"]),
                s(&m["session_timeout_ms"]),
                deadline - now,
            );
        }
        let list = |key: &str| {
            g[key]
                .as_array()
                .map(|a| a.iter().map(&s).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        };
        if !list("pending_members").is_empty() {
            out += &format!("  pending member ids: {}\n", list("pending_members"));
        }
        if !list("awaiting_sync_from").is_empty() {
            out += &format!(
                "  waiting for SyncGroup from: {}\n",
                list("awaiting_sync_from")
            );
        }
        let offsets: Vec<String> = g["offsets"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                format!(
                    "{}-{} @ {}",
                    s(&o["topic"]),
                    s(&o["partition"]),
                    s(&o["offset"])
                )
            })
            .collect();
        out += &format!(
            "  committed offsets: {} [{}]  being replicated: {}\n",
            s(&g["committed_offsets"]),
            offsets.join(", "),
            s(&g["pending_offset_commits"])
        );
        let mine: Vec<&&Value> = pending
            .iter()
            .filter(|op| {
                op["keys"].as_array().into_iter().flatten().any(|k| {
                    let k = k.as_str().unwrap_or("");
                    k == format!("join:{id}")
                        || k == format!("sync:{id}")
                        || k.starts_with(&format!("{id}/"))
                })
            })
            .collect();
        for op in mine {
            out += &format!(
                "    deadline {} ms (in {} ms)  {}\n",
                s(&op["deadline_ms"]),
                op["deadline_ms"].as_i64().unwrap_or(0) - now,
                op["description"].as_str().unwrap_or("")
            );
        }
    }
    out
}

/// `ctl follower ID ACTION [VALUE]`.
pub fn follower(
    admin: &str,
    token: Option<&str>,
    id: &str,
    action: &str,
    value: Option<&str>,
) -> anyhow::Result<()> {
    let needs_value = matches!(action, "delay" | "lag" | "max-bytes");
    if needs_value && value.is_none() {
        bail!("`{action}` needs a value, e.g. `purgatory ctl follower {id} {action} 250`");
    }
    let result = call(
        admin,
        "POST",
        &format!("/api/followers/{id}/{action}"),
        value.unwrap_or(""),
        token,
    )?;
    let state = result
        .pointer("/status/state")
        .and_then(Value::as_str)
        .unwrap_or("?");
    println!("follower {id}: {action} done (now {state})");
    Ok(())
}

/// `ctl clock advance MS`.
pub fn advance_clock(admin: &str, token: Option<&str>, ms: u64) -> anyhow::Result<()> {
    let result = call(admin, "POST", "/api/clock/advance", &ms.to_string(), token)?;
    println!(
        "clock advanced by {ms} ms: now {} ms, {} timer task(s) fired",
        result["now_ms"], result["fired"]
    );
    Ok(())
}

/// Renders `/api/state` as text for people.
pub fn render_state(state: &Value) -> String {
    let mut out = String::new();
    let s = |v: &Value| {
        v.as_i64()
            .map(|n| n.to_string())
            .unwrap_or_else(|| v.to_string())
    };
    out += &format!(
        "broker {}  clock {} at {} ms  log bytes {}\n",
        s(&state["broker_id"]),
        state["clock"].as_str().unwrap_or("?"),
        s(&state["now_ms"]),
        s(&state["log_bytes"])
    );
    out += "\npartitions\n";
    for p in state["partitions"].as_array().into_iter().flatten() {
        out += &format!(
            "  {}-{}  LEO {}  HW {}  replicas {}  ISR {}\n",
            p["topic"].as_str().unwrap_or("?"),
            s(&p["partition"]),
            s(&p["log_end_offset"]),
            s(&p["high_watermark"]),
            p["replicas"],
            p["isr"]
        );
        for f in p["followers"].as_array().into_iter().flatten() {
            out += &format!(
                "      follower {}  LEO {}  lag {}  last fetch {}  {}\n",
                s(&f["id"]),
                s(&f["log_end_offset"]),
                s(&f["lag"]),
                if f["last_fetch_time_ms"].is_null() {
                    "never".to_string()
                } else {
                    format!("at {} ms", s(&f["last_fetch_time_ms"]))
                },
                if f["in_isr"].as_bool() == Some(true) {
                    "in ISR"
                } else {
                    "OUT of ISR"
                }
            );
        }
    }
    out += "\npurgatories\n";
    for name in ["produce", "fetch", "rebalance", "heartbeat"] {
        let pg = &state["purgatories"][name];
        if pg.is_null() {
            continue;
        }
        out += &format!(
            "  {name}: watched {}  delayed {}  expired {}\n",
            s(&pg["watched"]),
            s(&pg["delayed"]),
            s(&pg["expired"])
        );
        for op in pg["pending"].as_array().into_iter().flatten() {
            out += &format!(
                "      deadline {} ms  keys {}  {}\n",
                s(&op["deadline_ms"]),
                op["keys"],
                op["description"].as_str().unwrap_or("")
            );
        }
    }
    let timer = &state["timer"];
    out += &format!("\ntiming wheel (now {} ms)\n", s(&timer["current_time_ms"]));
    for level in timer["levels"].as_array().into_iter().flatten() {
        out += &format!(
            "  level tick {} ms x {} buckets\n",
            s(&level["tick_ms"]),
            s(&level["wheel_size"])
        );
    }
    for b in timer["buckets"].as_array().into_iter().flatten() {
        out += &format!(
            "    level {} slot {}: {} entr(ies), expires {} ms\n",
            s(&b["level"]),
            s(&b["slot"]),
            s(&b["entries"]),
            s(&b["expiration_ms"])
        );
    }
    out += "\nembedded followers\n";
    let followers = state["followers"].as_array().cloned().unwrap_or_default();
    if followers.is_empty() {
        out += "  (none)\n";
    }
    for f in followers {
        out += &format!(
            "  replica {}  {}  fetch delay {} ms  lag mode {} ms\n",
            s(&f["replica_id"]),
            f["state"].as_str().unwrap_or("?"),
            s(&f["fetch_delay_ms"]),
            s(&f["lag_ms"])
        );
    }
    out
}

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
    let first = call(admin, "GET", "/api/requests?limit=0", "", None)?;
    let mut after = first["next_seq"].as_u64().unwrap_or(1).saturating_sub(1);
    let mut finished = first["finished"].as_u64().unwrap_or(0);
    eprintln!("following requests from #{} (Ctrl-C to stop)", after + 1);
    let mut shown: HashSet<u64> = HashSet::new();
    let mut count = 0u64;
    let stdout = std::io::stdout();
    loop {
        let path = format!(
            "/api/requests?after={after}&limit=4096&finished_after={finished}&wait_ms=10000{filters}"
        );
        let answer = call(admin, "GET", &path, "", None)?;
        finished = answer["finished"].as_u64().unwrap_or(finished);
        let mut requests: Vec<&Value> = answer["requests"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        requests.reverse(); // oldest first
        let mut oldest_open = None;
        let mut newest = after;
        for r in requests {
            let seq = r["seq"].as_u64().unwrap_or(0);
            newest = newest.max(seq);
            if r["state"] != "done" {
                oldest_open = Some(oldest_open.map_or(seq, |o: u64| o.min(seq)));
                continue;
            }
            if !shown.insert(seq) {
                continue;
            }
            let mut out = stdout.lock();
            writeln!(out, "{}", r["story"].as_str().unwrap_or(""))?;
            if options.phases {
                write!(out, "{}", render_phases(r))?;
            }
            out.flush()?;
            count += 1;
            if options.count.is_some_and(|n| count >= n) {
                return Ok(());
            }
        }
        after = match oldest_open {
            Some(open) => open - 1,
            None => newest,
        };
        shown.retain(|&seq| seq > after);
    }
}

/// A request's steps and Kafka phase times, indented, for `ctl trace --phases`.
pub fn render_phases(r: &Value) -> String {
    let mut out = String::new();
    for step in r["steps"].as_array().into_iter().flatten() {
        let at = step["at_ms"]
            .as_f64()
            .map(|t| format!("+{t:.3} ms"))
            .unwrap_or_default();
        out += &format!("    {at:>14}  {}\n", step["text"].as_str().unwrap_or(""));
    }
    let ph = &r["phases_ms"];
    let f = |k: &str| {
        ph[k]
            .as_f64()
            .map(|v| format!("{v:.3}"))
            .unwrap_or_else(|| "-".into())
    };
    out += &format!(
        "    phases (ms): request queue {}  local {}  remote {}  response queue {}  response send {}  total {}\n",
        f("request_queue"),
        f("local"),
        f("remote"),
        f("response_queue"),
        f("response_send"),
        f("total")
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
        let r = serde_json::json!({
            "steps": [{"at_ms": 0.1, "text": "appended @42"}, {"at_ms": 0.41, "text": "completed"}],
            "phases_ms": {"request_queue": 0.01, "local": 0.05, "remote": 0.3, "response_queue": 0.0,
                          "response_send": 0.02, "total": 0.38}
        });
        let text = render_phases(&r);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].ends_with("+0.100 ms  appended @42"), "{text}");
        assert!(lines[2].contains("remote 0.300"), "{text}");
    }
}
