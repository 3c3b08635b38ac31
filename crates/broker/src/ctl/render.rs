//! The text `ctl state`, `ctl groups` and `ctl fault list` print: the broker's state in plain words, one
//! line per partition, follower, purgatory, pending operation, wheel level and bucket,
//! group and member.
//!
//! Names of enums (the clock mode, a follower's state) are printed as the broker writes
//! them in its JSON, and lists of ids or keys as compact JSON arrays, so the text reads
//! the same as the JSON it comes from.

use std::fmt::Write;

use serde::Serialize;
use serde_json::Value;
use timewheel::PendingSnapshot;

use super::{FaultLine, GroupsAnswer, StateAnswer};

/// How `value` is named in the broker's JSON (`"manual"`, `"paused"`): the string it
/// serializes to, or `?` if it is not one.
pub fn wire_name<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "?".to_string(),
    }
}

/// A list as a compact JSON array: `[1,2,3]`, `["demo-0","demo-1"]`.
fn json_list<T: Serialize>(items: &[T]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_string())
}

/// A time on the broker clock as a signed number, for differences that may be negative
/// (a deadline already passed). One beyond `i64` counts as 0.
fn signed(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(0)
}

/// `GET /api/state` as text for people.
pub(super) fn state(state: &StateAnswer) -> String {
    let mut out = String::new();
    out += &format!(
        "broker {}  clock {} at {} ms  log bytes {}\n",
        state.broker_id,
        wire_name(&state.clock),
        state.now_ms,
        state.log_bytes
    );
    out += "\npartitions\n";
    for p in &state.partitions {
        out += &format!(
            "  {}-{}  LEO {}  HW {}  replicas {}  ISR {}\n",
            p.topic,
            p.partition,
            p.log_end_offset,
            p.high_watermark,
            json_list(&p.replicas),
            json_list(&p.isr)
        );
        for f in &p.followers {
            out += &format!(
                "      follower {}  LEO {}  lag {}  last fetch {}  {}\n",
                f.id,
                f.log_end_offset,
                f.lag,
                match f.last_fetch_time_ms {
                    None => "never".to_string(),
                    Some(at) => format!("at {at} ms"),
                },
                if f.in_isr { "in ISR" } else { "OUT of ISR" }
            );
        }
    }
    out += "\npurgatories\n";
    let purgatories = &state.purgatories;
    for (name, pg) in [
        ("produce", &purgatories.produce),
        ("fetch", &purgatories.fetch),
        ("delete_records", &purgatories.delete_records),
        ("rebalance", &purgatories.rebalance),
        ("heartbeat", &purgatories.heartbeat),
    ] {
        let Some(pg) = pg else { continue };
        out += &format!(
            "  {name}: watched {}  delayed {}  expired {}\n",
            pg.watched, pg.delayed, pg.expired
        );
        for op in &pg.pending {
            out += &format!(
                "      deadline {} ms  keys {}  {}\n",
                op.deadline_ms,
                json_list(&op.keys),
                op.description
            );
        }
    }
    let timer = &state.timer;
    out += &format!("\ntiming wheel (now {} ms)\n", timer.current_time_ms);
    for level in &timer.levels {
        out += &format!(
            "  level tick {} ms x {} buckets\n",
            level.tick_ms, level.wheel_size
        );
    }
    for b in &timer.buckets {
        out += &format!(
            "    level {} slot {}: {} entr(ies), expires {} ms\n",
            b.level, b.slot, b.entries, b.expiration_ms
        );
    }
    out += "\nembedded followers\n";
    if state.followers.is_empty() {
        out += "  (none)\n";
    }
    for f in &state.followers {
        out += &format!(
            "  replica {}  {}  fetch delay {} ms  lag mode {} ms\n",
            f.replica_id,
            wire_name(&f.state),
            f.fetch_delay_ms,
            f.lag_ms
        );
    }
    out
}

/// The groups of `/api/state` as text: each group, its members, and the delayed
/// operations that belong to it.
pub(super) fn groups(state: &GroupsAnswer) -> String {
    let now = signed(state.now_ms);
    let groups = &state.groups;
    let mut out = format!(
        "groups {}  members {}  committed offsets {}  (limits: {} groups, {} members, {} offsets)\n",
        groups.total,
        groups.members,
        groups.committed_offsets,
        groups.limits.groups,
        groups.limits.members,
        groups.limits.committed_offsets,
    );
    let pending: Vec<&PendingSnapshot> =
        [&state.purgatories.rebalance, &state.purgatories.heartbeat]
            .into_iter()
            .flatten()
            .flat_map(|p| &p.pending)
            .collect();
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_string());
    for g in &groups.list {
        let id = &g.group_id;
        out += &format!(
            "\ngroup {id}  {}  generation {}  protocol {}/{}  leader {}  ({}, state since {} ms)\n",
            g.state,
            g.generation_id,
            or_dash(&g.protocol_type),
            or_dash(&g.protocol),
            or_dash(&g.leader),
            g.offsets_partition,
            g.state_since_ms,
        );
        for m in &g.members {
            let deadline = signed(m.session_deadline_ms);
            let waiting = if m.awaiting_join {
                "  JoinGroup parked"
            } else if m.awaiting_sync {
                "  SyncGroup parked"
            } else {
                ""
            };
            let assignment = match m.assigned_partitions {
                Some(n) => format!("{n} partition(s) {}", json_list(&m.assignment)),
                None => format!("{} byte(s)", m.assignment_bytes),
            };
            out += &format!(
                "  member {}{}  client {}  host {}  session {} ms, expires at {deadline} ms (in {} ms)  assignment {assignment}{waiting}\n",
                m.member_id,
                if m.leader { " (leader)" } else { "" },
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                deadline.saturating_sub(now),
            );
        }
        let pending_members = g.pending_members.join(", ");
        if !pending_members.is_empty() {
            out += &format!("  pending member ids: {pending_members}\n");
        }
        let awaiting_sync_from = g.awaiting_sync_from.join(", ");
        if !awaiting_sync_from.is_empty() {
            out += &format!("  waiting for SyncGroup from: {awaiting_sync_from}\n");
        }
        let offsets: Vec<String> = g
            .offsets
            .iter()
            .map(|o| format!("{}-{} @ {}", o.topic, o.partition, o.offset))
            .collect();
        out += &format!(
            "  committed offsets: {} [{}]  being replicated: {}\n",
            g.committed_offsets,
            offsets.join(", "),
            g.pending_offset_commits
        );
        let (join, sync, prefix) = (format!("join:{id}"), format!("sync:{id}"), format!("{id}/"));
        let mine = pending.iter().filter(|op| {
            op.keys
                .iter()
                .any(|k| *k == join || *k == sync || k.starts_with(&prefix))
        });
        for op in mine {
            out += &format!(
                "    deadline {} ms (in {} ms)  {}\n",
                op.deadline_ms,
                signed(op.deadline_ms).saturating_sub(now),
                op.description
            );
        }
    }
    out
}

/// What `ctl broker ID ACTION` prints: one line per controller change, in order.
pub fn broker_changes(id: &str, action: &str, changes: &[controller::Change]) -> String {
    use controller::Change;
    let mut out = format!("broker {id}: {action} done, {} change(s)\n", changes.len());
    for change in changes {
        let line = match change {
            Change::BrokerDied { id, controlled, .. } => {
                let how = if *controlled { "shut down" } else { "died" };
                format!("broker {id} {how}")
            }
            Change::BrokerRegistered {
                id, incarnation, ..
            } => format!("broker {id} registered (incarnation {incarnation})"),
            Change::LeaderElected {
                tp,
                old_leader,
                new_leader,
                leader_epoch,
                isr,
                clean,
                ..
            } => format!(
                "{}-{}: leader {old_leader} -> {new_leader}, leader epoch {leader_epoch}, ISR {isr:?}{}",
                tp.topic,
                tp.partition,
                if *clean { "" } else { " (UNCLEAN: records only the old ISR held are lost)" }
            ),
            Change::NoLeader {
                tp,
                old_leader,
                leader_epoch,
                ..
            } => format!(
                "{}-{}: leader {old_leader} gone and no replica can lead: offline (leader epoch {leader_epoch})",
                tp.topic, tp.partition
            ),
            Change::IsrChanged { tp, old, new, .. } => {
                format!("{}-{}: ISR {old:?} -> {new:?}", tp.topic, tp.partition)
            }
            other => format!("{other:?}"),
        };
        out.push_str("  ");
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// `ctl fault list`: one line per rule, in the order the broker checks them.
///
/// ```text
/// 3  Produce topic=t: error NOT_LEADER_OR_FOLLOWER (6), times 3 (2 hits, 2 matched)
/// ```
pub(super) fn faults(rules: &[FaultLine]) -> String {
    if rules.is_empty() {
        return "no fault rules\n".into();
    }
    let mut out = String::new();
    for rule in rules {
        let key = |k: &str| {
            rule.given
                .get(k)
                .map(|v| v.to_string().trim_matches('"').to_string())
        };
        let api = key("api").unwrap_or_default();
        let mut matched = Vec::new();
        for k in [
            "client_id",
            "topic",
            "partition",
            "broker",
            "group",
            "min_version",
            "max_version",
        ] {
            if let Some(v) = key(k) {
                matched.push(format!("{k}={v}"));
            }
        }
        let trigger = ["times", "nth", "probability"]
            .iter()
            .find_map(|k| key(k).map(|v| format!("{k} {v}")))
            .unwrap_or_else(|| "always".into());
        let _ = writeln!(
            out,
            "{:>3}  {api}{}{}: {}, {trigger} ({} hits, {} matched)",
            rule.id,
            if matched.is_empty() { "" } else { " " },
            matched.join(" "),
            rule.does,
            rule.hits,
            rule.matched,
        );
    }
    out
}

/// `ctl transactions`: one line per transactional id, the open ones with their age
/// against their timeout.
pub fn transactions(txns: &Value) -> String {
    let list = txns.as_array().map(Vec::as_slice).unwrap_or_default();
    if list.is_empty() {
        return "no transactional ids\n".to_string();
    }
    let mut out = String::new();
    for t in list {
        let text = |key: &str| {
            t.get(key)
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        };
        let number = |key: &str| t.get(key).and_then(Value::as_i64);
        let partitions: Vec<&str> = t
            .get("partitions")
            .and_then(Value::as_array)
            .map(|ps| ps.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let open = match (number("open_ms"), number("timeout_ms")) {
            (Some(open), Some(timeout)) => format!(
                ", open {:.1} s of {:.1} s on [{}]",
                open as f64 / 1000.0,
                timeout as f64 / 1000.0,
                partitions.join(", ")
            ),
            _ => String::new(),
        };
        out.push_str(&format!(
            "{}  {}  producer {} epoch {}{open}\n",
            text("transactional_id"),
            text("state"),
            number("producer_id").unwrap_or(-1),
            number("producer_epoch").unwrap_or(-1),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::client::parse;
    use super::*;

    /// `testdata/state.json` is a cut-down `/api/state` answer of a running broker (a
    /// paused follower, a produce parked for replication, a group rebalancing); the `.txt`
    /// files are what `ctl state` and `ctl groups` printed for it before ctl read typed
    /// snapshots.
    const STATE: &str = include_str!("testdata/state.json");

    #[test]
    fn state_prints_as_before() {
        let answer: StateAnswer = parse("GET", "/api/state", STATE).expect("the fixture");
        assert_eq!(state(&answer), include_str!("testdata/state.txt"));
    }

    #[test]
    fn groups_print_as_before() {
        let answer: GroupsAnswer = parse("GET", "/api/state", STATE).expect("the fixture");
        assert_eq!(groups(&answer), include_str!("testdata/groups.txt"));
    }
}
