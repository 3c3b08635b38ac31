//! The scenario files: parsing, validation, the shipped files, and the timeline.

use super::*;
use parking_lot::Mutex;
use std::path::PathBuf;
use std::time::Duration;

fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/scenarios")
}

fn shipped() -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    let dir = std::fs::read_dir(scenarios_dir()).expect("config/scenarios exists");
    for entry in dir {
        let path = entry.expect("entry").path();
        if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("")
                .to_owned();
            let s =
                Scenario::from_file(&path).unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
            out.push((name, s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn get<'a>(all: &'a [(String, Scenario)], name: &str) -> &'a Scenario {
    &all.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("config/scenarios/{name}.toml is missing"))
        .1
}

#[test]
fn every_shipped_scenario_parses_and_is_sane() {
    let all = shipped();
    for (file, s) in &all {
        assert!(!s.name.is_empty(), "{file}: no name");
        assert!(!s.description.trim().is_empty(), "{file}: no description");
        // A followers' scenario plays replicas 2 and 3; a cluster's names brokers only.
        let cluster = s.followers.is_empty();
        if !cluster {
            assert_eq!(
                s.follower_ids(),
                vec![2, 3],
                "{file}: followers should be replicas 2 and 3"
            );
        }
        assert!(
            s.steps
                .iter()
                .all(|st| matches!(st.target, Target::Broker(_)) == cluster),
            "{file}: follower steps need [[follower]]s, broker steps none"
        );
        assert!(
            s.steps.windows(2).all(|w| w[0].at_ms <= w[1].at_ms),
            "{file}: sorted"
        );
        // Every pause is resumed, every crash or kill restarted before the end, so
        // each story ends healthy.
        let targets: BTreeSet<String> = s.steps.iter().map(|st| st.target.to_string()).collect();
        for target in targets {
            let last = s.steps.iter().rev().find(|st| {
                st.target.to_string() == target
                    && matches!(
                        st.action,
                        Action::Pause
                            | Action::Resume
                            | Action::Crash
                            | Action::Restart
                            | Action::Kill
                            | Action::Shutdown
                    )
            });
            assert!(
                !matches!(
                    last.map(|st| st.action.clone()),
                    Some(Action::Pause | Action::Crash | Action::Kill | Action::Shutdown)
                ),
                "{file}: {target} ends paused, crashed or down"
            );
        }
    }
}

#[test]
fn required_scenarios_are_shipped_with_their_stories() {
    let all = shipped();

    let healthy = get(&all, "healthy");
    assert!(healthy.steps.is_empty());

    let slow = get(&all, "slow-follower");
    let slowed = slow
        .followers
        .iter()
        .any(|f| f.fetch_delay_ms.unwrap_or(0) > 0)
        || slow
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Delay(ms) if ms > 0));
    assert!(slowed, "slow-follower slows a follower");

    let paused = get(&all, "paused-follower");
    let lag_max = paused.broker["replica.lag.time.max.ms"]
        .as_integer()
        .expect("int") as u64;
    let pause = paused
        .steps
        .iter()
        .find(|s| s.action == Action::Pause)
        .expect("a pause");
    let resume = paused
        .steps
        .iter()
        .find(|s| s.action == Action::Resume && s.target == pause.target)
        .expect("a resume");
    // Kafka checks every lag/2, so the ISR has surely shrunk after 1.5 x lag.
    assert!(
        resume.at_ms - pause.at_ms >= lag_max * 3 / 2,
        "paused long enough for the ISR to shrink"
    );

    let both = get(&all, "both-paused");
    assert_eq!(both.broker["min.insync.replicas"].as_integer(), Some(2));
    let mut paused_ids: Vec<i32> = both
        .steps
        .iter()
        .filter(|s| s.action == Action::Pause)
        .filter_map(|s| match s.target {
            Target::Follower(id) => Some(id),
            Target::Broker(_) | Target::Faults => None,
        })
        .collect();
    paused_ids.sort();
    paused_ids.dedup();
    assert_eq!(paused_ids, vec![2, 3]);

    let crash = get(&all, "crash-restart");
    assert!(crash.steps.iter().any(|s| s.action == Action::Crash));
    assert!(crash.steps.iter().any(|s| s.action == Action::Restart));

    let flapping = get(&all, "flapping");
    let flips = flapping
        .steps
        .iter()
        .filter(|s| matches!(s.action, Action::Pause | Action::Crash))
        .count();
    assert!(flips >= 3, "a flapping follower goes down repeatedly");
}

#[test]
fn parses_the_example_from_the_docs() {
    let s = Scenario::parse(
        r#"
        name = "paused follower"
        description = "..."
        duration_ms = 60000
        [[follower]]
        id = 2
        [[follower]]
        id = 3
        fetch_delay_ms = 10
        [[step]]
        at_ms = 45000
        follower = 3
        action = "resume"
        [[step]]
        at_ms = 5000
        follower = 3
        action = "pause"
        [[step]]
        at_ms = 6000
        follower = 2
        action = "delay"
        value = 250
        note = "slow"
        "#,
    )
    .expect("parse");
    assert_eq!(s.duration_ms, Some(60000));
    assert_eq!(s.followers[1].fetch_delay_ms, Some(10));
    let got: Vec<(u64, Target, Action)> = s
        .steps
        .iter()
        .map(|s| (s.at_ms, s.target, s.action.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (5000, Target::Follower(3), Action::Pause),
            (6000, Target::Follower(2), Action::Delay(250)),
            (45000, Target::Follower(3), Action::Resume)
        ]
    );
    assert_eq!(s.steps[1].note.as_deref(), Some("slow"));
}

#[test]
fn fault_steps_carry_the_rule_as_json_and_need_no_follower() {
    let s = Scenario::parse(
        r#"
name = "leader moves"
[[step]]
at_ms = 2000
action = "fault"
fault = { api = "Produce", topic = "orders", error = "NOT_LEADER_OR_FOLLOWER", times = 3 }
note = "three refusals"
[[step]]
at_ms = 9000
action = "clear_faults"
"#,
    )
    .unwrap();
    assert!(s.followers.is_empty());
    let steps: Vec<(u64, Target, Action)> = s
        .steps
        .iter()
        .map(|st| (st.at_ms, st.target, st.action.clone()))
        .collect();
    let Action::AddFault(rule) = &steps[0].2 else {
        panic!("not a fault step: {:?}", steps[0]);
    };
    let rule: serde_json::Value = serde_json::from_str(rule).unwrap();
    assert_eq!(
        rule,
        serde_json::json!({"api": "Produce", "topic": "orders", "error": "NOT_LEADER_OR_FOLLOWER", "times": 3})
    );
    assert_eq!((steps[0].0, steps[0].1), (2000, Target::Faults));
    assert_eq!(steps[1], (9000, Target::Faults, Action::ClearFaults));
    // Followers alone have no fault rules: such a step stops the timeline with the reason.
    let none: BTreeMap<i32, FollowerHandle> = BTreeMap::new();
    let err = none
        .apply(Target::Faults, &Action::ClearFaults)
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("needs the broker's fault rules"),
        "{err:#}"
    );
}

#[test]
fn rejects_bad_scenarios() {
    let base = "name = \"x\"\n[[follower]]\nid = 2\n";
    let bad = [
        ("name = \"x\"\n", "no [[follower]]"),
        (&format!("{base}[[follower]]\nid = 2\n"), "declared twice"),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 3\naction = \"pause\"\n"),
            "not a declared",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"kill\"\n"),
            "follower 2 cannot kill",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nbroker = 1\naction = \"crash\"\n"),
            "broker 1 cannot crash",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nbroker = 1\nfollower = 2\naction = \"pause\"\n"),
            "exactly one of",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"explode\"\n"),
            "unknown action",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"delay\"\n"),
            "needs a `value`",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"pause\"\nvalue = 3\n"),
            "takes no `value`",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"lag\"\nvalue = -3\n"),
            "value -3 ms is not between 0 and 3600000",
        ),
        (
            &format!(
                "{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"delay\"\nvalue = 3600001\n"
            ),
            "value 3600001 ms is not between 0 and 3600000",
        ),
        (
            "name = \"x\"\n[[follower]]\nid = 2\nlag_ms = 99999999999\n",
            "follower 2: lag_ms 99999999999 ms is not between 0",
        ),
        (
            &format!(
                "{base}[[step]]\nat_ms = 9223372036854775807\nfollower = 2\naction = \"pause\"\n"
            ),
            "past the longest scenario",
        ),
        (
            &format!("duration_ms = 604800001\n{base}"),
            "duration_ms 604800001 is past the longest scenario",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"fault\"\nfault = {{ api = \"Produce\", error = 6 }}\n"),
            "names neither `follower` nor `broker`",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\naction = \"fault\"\n"),
            "needs a `fault` table",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\naction = \"fault\"\nfault = \"Produce\"\n"),
            "`fault` must be a table",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"pause\"\nfault = {{ api = \"Fetch\" }}\n"),
            "takes no `fault` table",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\naction = \"clear_faults\"\nvalue = 1\n"),
            "takes no `value`",
        ),
        (
            &format!("{base}[[step]]\nat_ms = 1\naction = \"pause\"\n"),
            "exactly one of",
        ),
        (
            &format!(
                "{base}[[step]]\nat_ms = 1\nfollower = 2\naction = \"max_bytes\"\nvalue = 0\n"
            ),
            "between 1",
        ),
        (
            &format!(
                "duration_ms = 10\n{base}[[step]]\nat_ms = 11\nfollower = 2\naction = \"pause\"\n"
            ),
            "after the scenario ends",
        ),
        (&format!("{base}colour = \"red\"\n"), "unknown field"),
    ];
    for (text, want) in bad {
        let err = format!("{:#}", Scenario::parse(text).unwrap_err());
        assert!(
            err.contains(want),
            "expected {want:?} in {err:?} for:\n{text}"
        );
    }
}

#[test]
fn broker_steps_need_no_followers_and_refuse_follower_appliers() {
    let s = Scenario::parse(
        "name = \"b\"\n[[step]]\nat_ms = 0\nbroker = 1\naction = \"kill\"\n\
         [[step]]\nat_ms = 10\nbroker = 2\naction = \"pause\"\n",
    )
    .expect("parse");
    let got: Vec<(Target, Action)> = s
        .steps
        .iter()
        .map(|s| (s.target, s.action.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (Target::Broker(1), Action::Kill),
            (Target::Broker(2), Action::Pause)
        ]
    );
    let none: BTreeMap<i32, FollowerHandle> = BTreeMap::new();
    let err = none
        .apply(Target::Broker(1), &Action::Kill)
        .expect_err("no cluster here");
    assert!(err.to_string().contains("ctl scenario"), "{err}");
}

#[test]
fn replica_ids_can_be_remapped() {
    let all = shipped();
    let s = get(&all, "paused-follower")
        .with_replica_ids(&[12, 13])
        .expect("remap");
    assert_eq!(s.follower_ids(), vec![12, 13]);
    assert!(s
        .steps
        .iter()
        .all(|st| st.target == Target::Follower(12) || st.target == Target::Follower(13)));
    assert!(get(&all, "healthy").with_replica_ids(&[4]).is_err());
    assert!(get(&all, "healthy").with_replica_ids(&[4, 4]).is_err());
}

#[tokio::test(start_paused = true)]
async fn timeline_applies_steps_in_order_at_their_time() {
    let s = Scenario::parse(
        "name = \"t\"\nduration_ms = 3000\n[[follower]]\nid = 2\n\
         [[step]]\nat_ms = 2000\nfollower = 2\naction = \"resume\"\n\
         [[step]]\nat_ms = 1000\nfollower = 2\naction = \"pause\"\n",
    )
    .expect("parse");
    let start = Instant::now();
    let seen: Mutex<Vec<(u64, Target, Action)>> = Mutex::new(Vec::new());
    let applier = |target: Target, a: &Action| -> Result<()> {
        seen.lock()
            .push((start.elapsed().as_millis() as u64, target, a.clone()));
        Ok(())
    };
    run_timeline(&s, &applier).await.expect("run");
    assert_eq!(start.elapsed(), Duration::from_millis(3000));
    assert_eq!(
        *seen.lock(),
        vec![
            (1000, Target::Follower(2), Action::Pause),
            (2000, Target::Follower(2), Action::Resume)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn timeline_stops_at_an_unknown_follower() {
    let s = Scenario::parse(
        "name = \"t\"\n[[follower]]\nid = 2\n[[step]]\nat_ms = 5\nfollower = 2\naction = \"pause\"\n",
    )
    .expect("parse");
    let none: BTreeMap<i32, FollowerHandle> = BTreeMap::new();
    assert!(run_timeline(&s, &none).await.is_err());
}
