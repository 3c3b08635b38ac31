//! The shipped follower scenarios, played against a real broker over the wire.
//!
//! The broker runs on a manual clock and each scenario step's `at_ms` is read on that
//! clock: the test advances time to the step, applies it to an embedded follower (the
//! `followersim` library, fetching over TCP), and checks what a user would see — produce
//! deliveries from librdkafka, and the broker's `/api/state` over HTTP.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;

use common::{create_topic, producer, spawn_send, wait_until, TestBroker};
use followersim::scenario::{Action, Scenario};
use followersim::{FollowerConfig, FollowerState};
use purgatory::admin::{self, AdminState};
use purgatory::followers::EmbeddedFollowers;
use serde_json::Value;

/// One HTTP/1.1 request to the admin API: (status, body). The admin API answers with a
/// complete body and `Connection: close`, so reading to the end is the whole answer.
fn http(
    admin: &str,
    method: &str,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(admin)?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n{auth}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw.as_str(), ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

struct Cluster {
    tb: TestBroker,
    followers: EmbeddedFollowers,
    admin: String,
}

impl Cluster {
    async fn start(token: Option<&str>) -> Cluster {
        let tb = TestBroker::start_manual(|_| {}).await;
        let template = FollowerConfig {
            fetch_max_wait_ms: 500,
            metadata_refresh_ms: 100,
            ..FollowerConfig::default()
        };
        let followers = EmbeddedFollowers::start_for(tb.rm(), &tb.bootstrap(), &[2, 3], &template);
        let state = AdminState::new(
            tb.rm().clone(),
            tb.broker.group_coordinator().clone(),
            followers.clone(),
            token.map(str::to_string),
        );
        let admin = admin::start("127.0.0.1:0", state)
            .expect("admin listener")
            .to_string();
        Cluster {
            tb,
            followers,
            admin,
        }
    }

    /// `GET /api/state`, as a person (or the web view) would read it.
    fn state(&self) -> Value {
        let (status, body) = http(&self.admin, "GET", "/api/state", "", None).expect("state");
        assert_eq!(status, 200);
        serde_json::from_str(&body).expect("JSON")
    }

    fn partition(&self, topic: &str) -> Value {
        self.state()["partitions"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["topic"] == topic).cloned())
            .expect("partition in /api/state")
    }

    fn isr(&self, topic: &str) -> Vec<i64> {
        self.partition(topic)["isr"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_i64)
            .collect()
    }

    fn follower_leo(&self, topic: &str, id: i64) -> i64 {
        let p = self.partition(topic);
        let f = p["followers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .cloned()
            .unwrap();
        f["log_end_offset"].as_i64().unwrap()
    }

    fn produces_parked(&self) -> i64 {
        self.state()["purgatories"]["produce"]["delayed"]
            .as_i64()
            .unwrap()
    }

    /// Moves the broker clock to `t`, firing ISR checks and timeouts on the way.
    fn advance_to(&self, t: u64) {
        self.tb.rm().timer.advance_to(t);
    }

    /// Applies a scenario step to its embedded follower.
    fn apply(&self, step: &followersim::scenario::Step) {
        let followersim::scenario::Target::Follower(id) = step.target else {
            panic!("a follower step");
        };
        let follower = self.followers.get(id).expect("follower in scenario");
        step.action.apply_to(&follower);
    }
}

fn scenario(name: &str) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/scenarios")
        .join(name);
    Scenario::from_file(path).expect("scenario parses")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_follower_holds_every_acks_all_produce_until_the_isr_shrinks() {
    let sc = scenario("paused-follower.toml");
    let c = Cluster::start(None).await;
    create_topic(&c.tb.bootstrap(), "paused", 1, 3).await;
    let p = producer(&c.tb.bootstrap(), &[("request.timeout.ms", "600000")]);
    spawn_send(&p, "paused", "warm-up")
        .await
        .unwrap()
        .expect("healthy followers acknowledge");
    assert_eq!(c.isr("paused"), vec![1, 2, 3]);

    // Step 1 (5 s): replica 3 pauses.
    let pause = &sc.steps[0];
    assert_eq!(
        (pause.target, &pause.action),
        (followersim::scenario::Target::Follower(3), &Action::Pause)
    );
    c.advance_to(pause.at_ms);
    c.apply(pause);
    wait_until("follower 3 to stop fetching", || {
        c.followers.get(3).unwrap().status().state == FollowerState::Paused
    })
    .await;

    // Every acks=all produce now waits: the HW is frozen at replica 3's LEO. The first is
    // parked; the ones the producer sends after it on the same connection are not even
    // read until it is answered (Kafka takes one request per connection at a time).
    let mut sends = vec![spawn_send(&p, "paused", "held 0")];
    wait_until("the produce to be parked", || c.produces_parked() == 1).await;
    for i in 1..3 {
        sends.push(spawn_send(&p, "paused", &format!("held {i}")));
    }
    let state = c.state();
    let pending = state["purgatories"]["produce"]["pending"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(pending.len(), 1);
    assert!(pending[0]["description"]
        .as_str()
        .unwrap()
        .contains("paused-0: HW >= 2"));
    assert_eq!(c.partition("paused")["high_watermark"], 1);

    // Within replica.lag.time.max.ms of its last caught-up fetch nothing changes...
    c.advance_to(pause.at_ms + 30_000);
    assert_eq!(c.isr("paused"), vec![1, 2, 3]);
    assert_eq!(c.produces_parked(), 1);
    assert_eq!(
        c.partition("paused")["log_end_offset"],
        2,
        "the produces behind the parked one are not read yet"
    );
    // ...by the next ISR check it is out, the HW jumps, and all three complete.
    c.advance_to(pause.at_ms + 45_000);
    assert_eq!(c.isr("paused"), vec![1, 2]);
    let offsets: Vec<i64> = futures_offsets(sends).await;
    assert_eq!(offsets, vec![1, 2, 3]);
    assert_eq!(c.produces_parked(), 0);
    assert_eq!(c.partition("paused")["high_watermark"], 4);

    // Step 2 (60 s): replica 3 resumes, catches up and rejoins the ISR.
    let resume = &sc.steps[1];
    assert_eq!(resume.action, Action::Resume);
    c.advance_to(resume.at_ms);
    c.apply(resume);
    wait_until("replica 3 to rejoin the ISR", || {
        c.isr("paused") == vec![1, 2, 3]
    })
    .await;
    wait_until("replica 3 to reach the log end", || {
        c.follower_leo("paused", 3) == 4
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crashed_follower_restarts_from_zero_catches_up_and_rejoins() {
    let sc = scenario("crash-restart.toml");
    let c = Cluster::start(None).await;
    create_topic(&c.tb.bootstrap(), "crashy", 1, 3).await;
    let p = producer(&c.tb.bootstrap(), &[("request.timeout.ms", "600000")]);
    for i in 0..5 {
        spawn_send(&p, "crashy", &format!("before {i}"))
            .await
            .unwrap()
            .expect("acknowledged");
    }
    wait_until("replica 3 at offset 5", || c.follower_leo("crashy", 3) == 5).await;

    // 10 s: crash. The leader still counts replica 3 in the ISR, so a produce waits.
    let [crash1, restart1, crash2, restart2] =
        [&sc.steps[0], &sc.steps[1], &sc.steps[2], &sc.steps[3]];
    c.advance_to(crash1.at_ms);
    c.apply(crash1);
    let held = spawn_send(&p, "crashy", "while down");
    wait_until("the produce to be parked", || c.produces_parked() == 1).await;

    // 20 s: restart. It replicates from offset 0; the HW moves; it never left the ISR.
    c.advance_to(restart1.at_ms);
    assert_eq!(c.isr("crashy"), vec![1, 2, 3]);
    c.apply(restart1);
    assert_eq!(
        held.await
            .unwrap()
            .expect("completes once replica 3 caught up"),
        (0, 5)
    );
    assert_eq!(c.follower_leo("crashy", 3), 6);
    assert_eq!(c.isr("crashy"), vec![1, 2, 3]);

    // 40 s: crash again, long enough to leave the ISR; the produce completes without it.
    c.advance_to(crash2.at_ms);
    c.apply(crash2);
    let held = spawn_send(&p, "crashy", "while down longer");
    wait_until("the produce to be parked", || c.produces_parked() == 1).await;
    c.advance_to(crash2.at_ms + 45_000);
    assert_eq!(c.isr("crashy"), vec![1, 2]);
    assert_eq!(
        held.await.unwrap().expect("completes with the ISR shrunk"),
        (0, 6)
    );

    // 90 s: restart; catches up from 0 to 7 and rejoins.
    c.advance_to(restart2.at_ms);
    c.apply(restart2);
    wait_until("replica 3 to rejoin the ISR", || {
        c.isr("crashy") == vec![1, 2, 3]
    })
    .await;
    wait_until("replica 3 to reach the log end", || {
        c.follower_leo("crashy", 3) == 7
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_is_required_for_state_changing_calls() {
    let c = Cluster::start(Some("s3cret")).await;
    let post = |path: &str, body: &str, token: Option<&str>| {
        http(&c.admin, "POST", path, body, token).expect("HTTP")
    };

    // Connected first, so that "still running" below says the refused calls changed nothing.
    wait_until("follower 2 to connect", || {
        c.followers.get(2).unwrap().status().state == FollowerState::Running
    })
    .await;
    assert_eq!(post("/api/followers/2/pause", "", None).0, 401);
    assert_eq!(post("/api/followers/2/pause", "", Some("wrong")).0, 401);
    assert_eq!(
        c.followers.get(2).unwrap().status().state,
        FollowerState::Running
    );

    let (status, body) = post("/api/followers/2/pause", "", Some("s3cret"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        c.followers.get(2).unwrap().status().state,
        FollowerState::Paused
    );
    assert_eq!(post("/api/followers/2/resume", "", Some("s3cret")).0, 200);

    // The live view's controls follow the same rule: freezing the clock, resuming it and
    // sending a produce all need the token.
    assert_eq!(post("/api/clock/freeze", "", None).0, 401);
    assert_eq!(post("/api/clock/resume", "", Some("wrong")).0, 401);
    assert_eq!(post("/api/send", "{\"topic\": \"t\"}", None).0, 401);
    // With it the call gets past the rule: this cluster's clock is manual, so the clock
    // itself refuses (it is stepped, never frozen).
    let (status, body) = post("/api/clock/freeze", "", Some("s3cret"));
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("manual clock"), "{body}");

    // Clear errors: unknown follower 404, bad value 400; reading needs no token.
    assert_eq!(post("/api/followers/9/pause", "", Some("s3cret")).0, 404);
    assert_eq!(
        post("/api/followers/2/delay", "soon", Some("s3cret")).0,
        400
    );
    assert_eq!(post("/api/followers/2/delay", "-5", Some("s3cret")).0, 400);
    assert_eq!(post("/api/followers/2/explode", "", Some("s3cret")).0, 404);
    let (status, body) = post("/api/followers/2/delay", "{\"ms\": 250}", Some("s3cret"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(c.followers.get(2).unwrap().status().fetch_delay_ms, 250);
    assert_eq!(
        http(&c.admin, "GET", "/api/state", "", None).unwrap().0,
        200
    );
}

async fn futures_offsets(
    sends: Vec<tokio::task::JoinHandle<Result<(i32, i64), rdkafka::error::KafkaError>>>,
) -> Vec<i64> {
    let mut out = Vec::new();
    for s in sends {
        out.push(s.await.unwrap().expect("acknowledged").1);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_followers_replicate_a_new_topic_without_waiting_for_a_metadata_refresh() {
    let tb = TestBroker::start(|_| {}).await;
    // Their own Metadata poll is an hour away: only the broker's topic-change signal (the
    // LeaderAndIsr of this mock) can tell them about the new topic.
    let template = FollowerConfig {
        metadata_refresh_ms: 3_600_000,
        ..FollowerConfig::default()
    };
    let followers = EmbeddedFollowers::start_for(tb.rm(), &tb.bootstrap(), &[2, 3], &template);
    wait_until("both followers connected", || {
        followers
            .statuses()
            .iter()
            .all(|s| s.state == FollowerState::Running && s.connected)
    })
    .await;
    create_topic(&tb.bootstrap(), "fresh", 1, 3).await;
    let p = producer(
        &tb.bootstrap(),
        &[("request.timeout.ms", "30000"), ("retries", "0")],
    );
    let delivered = spawn_send(&p, "fresh", "first").await.unwrap();
    assert_eq!(delivered.expect("replicated by both followers"), (0, 0));
    followers.shutdown().await;
}
