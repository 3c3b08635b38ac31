"""Fault rules per API (`/api/faults`), with real clients reacting as they would to a real
broker that misbehaves: retries through injected errors, a failure with its code, a slow
fetch for one client only, a dropped connection, a throttle, a request never answered, and
a seeded probability that replays exactly. The request log and `ctl trace` name the rule.
"""

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka import errors as kafka_errors

from conftest import BINARY, Broker, wait_for


def call(broker, method, path, body=None):
    """(status, JSON answer) of an admin call; errors are answers too."""
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(broker.admin + path, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def add_rule(broker, rule):
    status, answer = call(broker, "POST", "/api/faults", rule)
    assert status == 200, answer
    return answer["id"]


def rule(broker, rule_id):
    status, rules = call(broker, "GET", "/api/faults")
    assert status == 200
    return next(r for r in rules if r["id"] == rule_id)


@pytest.fixture(autouse=True)
def no_rules_left(broker):
    yield
    call(broker, "DELETE", "/api/faults")


def new_topic(broker, partitions=1):
    name = "faults-" + uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(10)
    return name


def read_all(broker, topic, want, client_id="faults-reader"):
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": "g-" + uuid.uuid4().hex[:6],
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.time() + 30
        while len(got) < want and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        # Anything beyond `want` would be a duplicate: read what else is there.
        end = time.time() + 1.0
        while time.time() < end:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
        return got
    finally:
        consumer.close()


def test_confluent_kafka_idempotent_producer_retries_through_three_not_leader_answers(broker):
    topic = new_topic(broker)
    rule_id = add_rule(broker, {"api": "Produce", "topic": topic,
                                "error": "NOT_LEADER_OR_FOLLOWER", "times": 3})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 0, "retry.backoff.ms": 50})
    failures = []
    values = [f"v{i}" for i in range(20)]
    for value in values:
        producer.produce(topic, value.encode(), partition=0,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0
    assert failures == []
    assert rule(broker, rule_id)["hits"] == 3, "the three errors were answered"
    got = read_all(broker, topic, len(values))
    assert sorted(got) == sorted(values), "every record exactly once"


def test_kafka_python_without_retries_gets_the_injected_error_with_its_code(broker):
    topic = new_topic(broker)
    add_rule(broker, {"api": "Produce", "topic": topic, "error": "TOPIC_AUTHORIZATION_FAILED",
                      "times": 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, acks="all")
    try:
        with pytest.raises(kafka_errors.TopicAuthorizationFailedError) as failed:
            producer.send(topic, b"refused", partition=0).get(timeout=30)
        assert failed.value.errno == 29
        # Only once: the next record is appended.
        producer.send(topic, b"accepted", partition=0).get(timeout=30)
    finally:
        producer.close()
    assert read_all(broker, topic, 1) == ["accepted"]


def first_record_after(broker, topic, client_id):
    """Seconds from assign to this client's first record."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": client_id,
                         "client.id": client_id, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        start = time.monotonic()
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = start + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                return time.monotonic() - start
        raise AssertionError(f"{client_id} got no record")
    finally:
        consumer.close()


def test_a_fetch_delay_holds_one_clients_first_record_and_leaves_another_alone(broker):
    topic = new_topic(broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    producer.produce(topic, b"x", partition=0)
    assert producer.flush(10) == 0
    rule_id = add_rule(broker, {"api": "Fetch", "client_id": "slow-reader", "delay_ms": 800,
                                "times": 1})
    assert first_record_after(broker, topic, "slow-reader") >= 0.8
    first_record_after(broker, topic, "quick-reader")
    listed = rule(broker, rule_id)
    assert listed["hits"] == 1
    # The other client's fetches were never matched, let alone held.
    status, log = call(broker, "GET", "/api/requests?client=quick-reader&limit=4096")
    assert status == 200 and log["requests"], log
    assert all(r["fault"] is None for r in log["requests"])
    status, log = call(broker, "GET", "/api/requests?client=slow-reader&request=FetchConsumer&limit=4096")
    held = [r for r in log["requests"] if r["fault"]]
    assert len(held) == 1 and held[0]["fault"] == {"rule": rule_id, "action": "delay 800 ms"}
    assert held[0]["phases_ms"]["total"] >= 800


def test_a_metadata_disconnect_is_survived_by_reconnecting(broker):
    topic = new_topic(broker)
    rule_id = add_rule(broker, {"api": "Metadata", "action": "disconnect", "times": 1})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(5):
        producer.produce(topic, f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0, "delivered after reconnecting"
    assert rule(broker, rule_id)["hits"] == 1
    assert sorted(read_all(broker, topic, 5)) == [f"m{i}" for i in range(5)]


def test_a_throttle_reaches_librdkafkas_throttle_callback(broker):
    topic = new_topic(broker)
    add_rule(broker, {"api": "Produce", "topic": topic, "throttle_ms": 300, "times": 1})
    throttles = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "throttle_cb": lambda event: throttles.append(event)})
    producer.produce(topic, b"t", partition=0)
    assert producer.flush(30) == 0
    wait_for("the throttle callback", lambda: producer.poll(0.1) >= 0 and bool(throttles))
    assert throttles[0].throttle_time == pytest.approx(0.3, abs=0.001)


def test_a_blackholed_request_times_out_with_the_clients_own_request_timeout(broker):
    topic = new_topic(broker)
    rule_id = add_rule(broker, {"api": "Produce", "topic": topic, "action": "blackhole", "times": 1})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, acks="all",
                             request_timeout_ms=1500)
    try:
        start = time.monotonic()
        with pytest.raises(kafka_errors.KafkaError) as failed:
            producer.send(topic, b"lost", partition=0).get(timeout=60)
        waited = time.monotonic() - start
        assert isinstance(failed.value, (kafka_errors.KafkaTimeoutError,
                                         kafka_errors.RequestTimedOutError,
                                         kafka_errors.KafkaConnectionError)), failed.value
        assert waited >= 1.5, f"gave up after {waited:.2f} s, before its request.timeout.ms"
        # It reconnects, and the next record goes through.
        producer.send(topic, b"kept", partition=0).get(timeout=30)
    finally:
        producer.close()
    assert rule(broker, rule_id)["hits"] == 1
    assert read_all(broker, topic, 1) == ["kept"], "a blackholed produce is not appended"


def refused_pattern(broker, topic, seed, n=24):
    """Which of `n` produces a seeded 50% rule refuses, as kafka-python sees it."""
    add_rule(broker, {"api": "Produce", "topic": topic, "error": "TOPIC_AUTHORIZATION_FAILED",
                      "probability": 0.5, "seed": seed})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, acks="all")
    pattern = []
    try:
        for i in range(n):
            try:
                producer.send(topic, f"p{i}".encode(), partition=0).get(timeout=30)
                pattern.append(False)
            except kafka_errors.TopicAuthorizationFailedError:
                pattern.append(True)
    finally:
        producer.close()
        call(broker, "DELETE", "/api/faults")
    return pattern


def test_a_seeded_probability_rule_gives_the_same_hits_on_two_runs(broker):
    topic = new_topic(broker)
    first = refused_pattern(broker, topic, seed=2024)
    second = refused_pattern(broker, topic, seed=2024)
    assert first == second
    assert any(first) and not all(first), first


@pytest.mark.parametrize("body,reason", [
    ({"api": "Nope", "error": 6}, "not a Kafka API name"),
    ({"api": "Produce", "error": "NOT_AN_ERROR"}, "not a Kafka error name"),
    ({"api": "Produce", "error": 6, "times": -1}, "`times` is -1"),
    ({"api": "Fetch", "delay_ms": 99999999999999}, "`delay_ms` is 99999999999999"),
    ({"api": "Fetch", "throttle_ms": -3}, "`throttle_ms` is -3"),
    ({"api": "Fetch", "error": 6, "probability": 2}, "`probability` is 2"),
    ({"api": "Fetch", "action": "explode"}, "unknown action"),
    ({"api": "Fetch"}, "give one action"),
    (b"not json", "not a fault rule"),
])
def test_hostile_rules_get_a_400_with_the_reason(broker, body, reason):
    status, answer = call(broker, "POST", "/api/faults", body)
    assert status == 400
    assert reason in answer["error"]
    status, rules = call(broker, "GET", "/api/faults")
    assert rules == [], "nothing was armed"


@pytest.mark.parametrize("action", ["delay", "lag"])
def test_a_followers_delay_and_lag_are_bounded_with_a_400(broker, action):
    """Every number the admin API takes has a range: a follower's delay or lag is 0 to one
    hour, and one past it is refused with the range, leaving the follower as it was."""
    before = call(broker, "GET", "/api/state")[1]["followers"]
    for hostile in ("99999999999999", "3600001", "-1", "9223372036854775807"):
        status, answer = call(broker, "POST", f"/api/followers/2/{action}?ms={hostile}", b"")
        assert status == 400, (hostile, answer)
        assert "not between 0 and 3600000 (one hour)" in answer["error"], answer
    assert call(broker, "GET", "/api/state")[1]["followers"][0]["fetch_delay_ms"] == before[0]["fetch_delay_ms"]
    status, answer = call(broker, "POST", f"/api/followers/2/{action}?ms=3600000", b"")
    assert status == 200, answer
    status, answer = call(broker, "POST", f"/api/followers/2/{action}?ms=0", b"")
    assert status == 200, answer


@pytest.mark.parametrize("query, reason", [
    ("limit=4097", "`limit` is \"4097\": it takes a whole number from 0 to 4096"),
    ("limit=-1", "`limit` is \"-1\""),
    ("limit=many", "`limit` is \"many\""),
    ("after=99999999999999999999999", "`after` is"),
    ("finished_after=0&wait_ms=30001", "`wait_ms` is \"30001\": it takes a whole number from 0 to 30000"),
])
def test_the_request_logs_numbers_are_bounded_with_a_400(broker, query, reason):
    status, answer = call(broker, "GET", f"/api/requests?{query}")
    assert status == 400 and reason in answer["error"], answer
    status, answer = call(broker, "GET", "/api/requests?limit=4096&after=0")
    assert status == 200 and "requests" in answer


@pytest.mark.parametrize("body, reason", [
    ({"topic": "t", "timeout_ms": 3600001}, "timeout_ms is 3600001: it takes 0 to 3600000"),
    ({"topic": "t", "timeout_ms": -1}, "timeout_ms is -1"),
    ({"topic": "t", "partition": -2}, "partition is -2"),
    ({"topic": "t", "acks": 2}, "acks must be -1 (all), 0 or 1"),
    ({"topic": "t", "timeout_ms": 99999999999999}, "bad body"),
])
def test_a_send_from_the_page_has_bounded_numbers(broker, body, reason):
    status, answer = call(broker, "POST", "/api/send", body)
    assert status == 400 and reason in answer["error"], answer


def test_rules_are_listed_removed_one_by_one_and_all_at_once(broker):
    a = add_rule(broker, {"api": "Produce", "error": 6, "times": 3})
    b = add_rule(broker, {"api": "Metadata", "action": "disconnect", "times": 1})
    status, rules = call(broker, "GET", "/api/faults")
    assert [(r["id"], r["hits"]) for r in rules] == [(a, 0), (b, 0)]
    assert call(broker, "DELETE", f"/api/faults/{a}")[0] == 200
    assert call(broker, "DELETE", f"/api/faults/{a}")[0] == 404
    assert [r["id"] for r in call(broker, "GET", "/api/faults")[1]] == [b]
    status, cleared = call(broker, "DELETE", "/api/faults")
    assert (status, cleared["removed"]) == (200, 1)


def test_ctl_fault_and_ctl_trace_name_the_rule_that_fired(broker):
    topic = new_topic(broker)
    admin = broker.admin.removeprefix("http://")
    ctl = [BINARY, "ctl", "--admin", admin]
    added = subprocess.run([*ctl, "fault", "add", json.dumps(
        {"api": "Produce", "topic": topic, "error": "NOT_LEADER_OR_FOLLOWER", "times": 1})],
        capture_output=True, text=True, timeout=30)
    assert added.returncode == 0, added.stderr
    rule_id = int(added.stdout.split()[2])
    trace = subprocess.Popen([*ctl, "trace", "--client", "traced", "--request", "Produce",
                              "--count", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        # It says when it is following; only then produce.
        assert "following requests" in trace.stderr.readline()
        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "traced",
                             "acks": "all", "retry.backoff.ms": 50})
        producer.produce(topic, b"r", partition=0)
        assert producer.flush(30) == 0
        out, _ = trace.communicate(timeout=30)
    finally:
        trace.kill()
    assert f"fault rule {rule_id} fired: error NOT_LEADER_OR_FOLLOWER (6)" in out, out
    listed = subprocess.run([*ctl, "fault", "list"], capture_output=True, text=True, timeout=30)
    assert f"{rule_id}  Produce topic={topic}: error NOT_LEADER_OR_FOLLOWER (6), times 1 (1 hits" \
        in listed.stdout, listed.stdout
    cleared = subprocess.run([*ctl, "fault", "clear"], capture_output=True, text=True, timeout=30)
    assert "1 fault rule(s) removed" in cleared.stdout


def fault_scenario(topic, times):
    """A scenario file whose steps arm a Produce fault at once and clear every rule later."""
    return f"""
name = "leader moves under the producer"
description = "Produce to {topic} answers NOT_LEADER_OR_FOLLOWER {times} times, then the rules go."
[[step]]
at_ms = 0
action = "fault"
fault = {{ api = "Produce", topic = "{topic}", error = "NOT_LEADER_OR_FOLLOWER", times = {times} }}
[[step]]
at_ms = 400
action = "clear_faults"
"""


def test_a_scenario_posted_to_the_broker_arms_and_clears_fault_rules(broker):
    topic = new_topic(broker)
    status, answer = call(broker, "POST", "/api/scenarios/run", fault_scenario(topic, 2).encode())
    assert status == 202, answer
    assert [(s["target"], s["action"].split()[0]) for s in answer["steps"]] == [
        ("fault rules", "fault"), ("fault rules", "clear_faults")]
    wait_for("the scenario's rule to be armed", lambda: call(broker, "GET", "/api/faults")[1] != [])
    armed = call(broker, "GET", "/api/faults")[1]
    assert [(r["api"], r["topic"], r["error"], r["times"]) for r in armed] == [
        ("Produce", topic, "NOT_LEADER_OR_FOLLOWER", 2)]
    client = "scenario-" + topic
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "retry.backoff.ms": 50, "client.id": client})
    failures = []
    producer.produce(topic, b"through", partition=0, on_delivery=lambda err, _m: err and failures.append(err))
    assert producer.flush(30) == 0 and failures == []
    # The request log says which rule answered which produce (the rule itself may be
    # cleared by the second step by now).
    status, log = call(broker, "GET", f"/api/requests?client={client}&request=Produce&done=1&limit=64")
    fired = [r["fault"] for r in log["requests"] if r.get("fault")]
    assert fired == [{"rule": armed[0]["id"], "action": "error NOT_LEADER_OR_FOLLOWER (6)"}] * 2, log
    wait_for("the clear_faults step", lambda: call(broker, "GET", "/api/faults")[1] == [])
    assert read_all(broker, topic, 1) == ["through"]


def test_a_scenario_with_a_bad_fault_rule_is_refused_before_any_step_plays(broker, tmp_path):
    bad = fault_scenario("t", 2).replace('error = "NOT_LEADER_OR_FOLLOWER"', 'error = "NOT_AN_ERROR"')
    status, answer = call(broker, "POST", "/api/scenarios/run", bad.encode())
    assert status == 400
    assert "the fault step at 0 ms" in answer["error"] and "NOT_AN_ERROR" in answer["error"], answer
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    ctl = [BINARY, "ctl", "--admin", broker.admin.removeprefix("http://"), "scenario", str(path)]
    played = subprocess.run(ctl, capture_output=True, text=True, timeout=30)
    assert played.returncode != 0 and "NOT_AN_ERROR" in played.stderr, played.stderr
    assert call(broker, "GET", "/api/faults")[1] == [], "nothing was armed"


def test_ctl_scenario_plays_fault_steps_through_the_admin_api(broker, tmp_path):
    topic = new_topic(broker)
    path = tmp_path / "faults.toml"
    path.write_text(fault_scenario(topic, 1))
    ctl = [BINARY, "ctl", "--admin", broker.admin.removeprefix("http://"), "scenario", str(path)]
    played = subprocess.run(ctl, capture_output=True, text=True, timeout=60)
    assert played.returncode == 0, played.stderr
    lines = [line.split(" ms  ", 1)[1] for line in played.stdout.splitlines() if line.startswith("t=")]
    assert lines[0].startswith("fault rules: fault {") and f'"topic":"{topic}"' in lines[0], played.stdout
    assert lines[1] == "fault rules: clear_faults", played.stdout
    assert call(broker, "GET", "/api/faults")[1] == []


def test_the_longest_clock_step_leaves_the_followers_quiet_and_a_longer_one_is_refused():
    """On a manual clock, `POST /api/clock/advance` takes 0 to 7 days per step. Once hostile
    steps (99999999999999 ms hung the call; i64::MAX pushed the clock past i64, and the
    followers then spun at 40,000 fetches a second) are refused, the longest legal step
    answers and leaves the clock where a follower's parked fetch waits for it: on a frozen
    clock no fetch expires, so the followers send nothing more until the clock moves."""
    b = Broker(["--clock", "manual"])
    try:
        topic = new_topic(b)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
        p.produce(topic, b"before the step", partition=0)
        assert p.flush(30) == 0
        for hostile in ("99999999999999", "9223372036854775807", "-1", "604800001"):
            status, answer = call(b, "POST", f"/api/clock/advance?ms={hostile}", b"")
            assert status == 400 and "0 to 604800000 ms (7 days)" in answer["error"], answer
        assert call(b, "GET", "/api/state")[1]["now_ms"] < 604800000, "the clock did not move"
        for _ in range(2):
            status, answer = call(b, "POST", "/api/clock/advance?ms=604800000", b"")
            assert status == 200, answer

        def follower_fetches():
            text = urllib.request.urlopen(b.admin + "/metrics", timeout=5).read().decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith('kafka_network_requestmetrics_requests_total{request="FetchFollower"'))

        seen = [follower_fetches()]

        def settled():
            seen.append(follower_fetches())
            time.sleep(0.2)
            return seen[-1] == follower_fetches()

        wait_for("the followers' fetches to park on the frozen clock", settled)
        quiet_from = follower_fetches()
        time.sleep(1.0)
        assert follower_fetches() == quiet_from, "the followers fetch with the clock frozen: they spin"
        p.produce(topic, b"after the step", partition=0)
        assert p.flush(30) == 0, "replication still moves the high watermark"
        assert read_all(b, topic, 2) == ["before the step", "after the step"]
    finally:
        b.stop()
