"""The view's APIs for scripts: /metrics read by Prometheus' own text parser after a known
sequence of events, `purgatory ctl trace` printing a produce's story, /api/requests.

The metrics test runs a broker on the manual clock, so that the sequence is exact: three
acks=all produces wait for two paused followers and expire when the clock is advanced past
their timeout; later the ISR check drops the followers.
"""

import json
import os
import re
import subprocess
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from conftest import BINARY, ROOT, Broker, wait_for


def call(broker, method, path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(broker.admin + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def scrape(broker):
    with urllib.request.urlopen(broker.admin + "/metrics", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {}
    for f in families.values():
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return families, samples


def value(samples, name, **labels):
    return samples[(name, tuple(sorted(labels.items())))]


def follow_topic(broker, topic):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    wait_for("followers following " + topic, lambda: all(
        any(p["topic"] == topic for p in f["partitions"]) for f in broker.state()["followers"]))


@pytest.fixture(scope="module")
def manual_broker():
    b = Broker(["--clock", "manual"])
    yield b
    b.stop()


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    yield b
    b.stop()


def test_metrics_have_kafkas_names_and_count_a_known_sequence(manual_broker):
    b = manual_broker
    follow_topic(b, "m")
    for replica in (2, 3):
        call(b, "POST", f"/api/followers/{replica}/pause", b"")
    for i in range(3):
        call(b, "POST", "/api/send", {"topic": "m", "client_id": "metrics-test", "timeout_ms": 1000, "value": f"v{i}"})
    wait_for("three produces parked", lambda: b.state()["purgatories"]["produce"]["delayed"] == 3)

    families, samples = scrape(b)
    assert value(samples, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Produce") == 3
    assert value(samples, "kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 3
    assert value(samples, "kafka_server_delayedproducemetrics_expires_total") == 0

    advanced = call(b, "POST", "/api/clock/advance", b"1000")
    assert advanced["fired"] >= 3

    def answered():
        done = call(b, "GET", "/api/requests?client=metrics-test&request=Produce&done=1")["requests"]
        return len(done) == 3 and done

    wait_for("the three produces answered", answered)
    assert all(r["cause"]["kind"] == "expired" and r["error"] == "REQUEST_TIMED_OUT" for r in answered())

    families, samples = scrape(b)
    # kafka.server:type=DelayedProduceMetrics,name=ExpiresPerSec (aggregate and per partition)
    assert families["kafka_server_delayedproducemetrics_expires"].type == "counter"
    assert value(samples, "kafka_server_delayedproducemetrics_expires_total") == 3
    assert value(samples, "kafka_server_delayedproducemetrics_expires_total", topic="m", partition="0") == 3
    assert value(samples, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Produce") == 0
    assert value(samples, "kafka_server_delayedoperationpurgatory_numdelayedoperations", delayedOperation="Fetch") >= 0
    # kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Produce", version="9") == 3
    assert value(samples, "kafka_network_requestmetrics_remotetimems_count", request="Produce") == 3
    assert value(samples, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == 3
    assert families["kafka_network_requestmetrics_totaltimems"].type == "gauge"
    total_p99 = value(samples, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99")
    remote_p50 = value(samples, "kafka_network_requestmetrics_remotetimems", request="Produce", quantile="0.50")
    assert total_p99 >= remote_p50 > 0
    for phase in ("requestqueuetimems", "localtimems", "responsequeuetimems", "responsesendtimems"):
        for q in ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999"):
            assert value(samples, f"kafka_network_requestmetrics_{phase}", request="Produce", quantile=q) >= 0
    assert value(samples, "kafka_network_requestmetrics_requests_total", request="Metadata", version="12") >= 3
    # The follower fetches that expired are the ones the request log says expired.
    followers = call(b, "GET", "/api/requests?request=FetchFollower&done=1&limit=4096")["requests"]
    expired = sum(1 for r in followers if r["cause"]["kind"] == "expired")
    assert value(samples, "kafka_server_delayedfetchmetrics_expires_total", fetcherType="follower") == expired
    assert value(samples, "kafka_server_delayedfetchmetrics_expires_total", fetcherType="consumer") == 0
    # Partitions and the log.
    tp = {"topic": "m", "partition": "0"}
    assert value(samples, "kafka_log_log_logendoffset", **tp) == 3
    assert value(samples, "kafka_cluster_partition_replicascount", **tp) == 3
    assert value(samples, "kafka_cluster_partition_insyncreplicascount", **tp) == 3
    assert value(samples, "kafka_cluster_partition_underreplicated", **tp) == 0
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 0
    assert value(samples, "purgatory_timer_pending_timers") >= 1

    # The followers stay behind past replica.lag.time.max.ms: the ISR check drops them.
    call(b, "POST", "/api/clock/advance", b"45000")
    wait_for("the ISR shrink", lambda: b.state()["partitions"][0]["isr"] == [1])
    families, samples = scrape(b)
    assert value(samples, "kafka_server_replicamanager_isrshrinks_total") == 1
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value(samples, "kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert value(samples, "kafka_server_replicamanager_atminisrpartitioncount") == 0
    assert value(samples, "kafka_cluster_partition_insyncreplicascount", **tp) == 1
    assert value(samples, "kafka_cluster_partition_underminisr", **tp) == 1
    # A follower catching up rejoins.
    call(b, "POST", "/api/followers/2/resume", b"")
    wait_for("follower 2 back in the ISR", lambda: 2 in b.state()["partitions"][0]["isr"])
    families, samples = scrape(b)
    assert value(samples, "kafka_server_replicamanager_isrexpands_total") == 1
    assert value(samples, "kafka_server_replicamanager_atminisrpartitioncount") == 1

    # The reference lists every metric.
    reference = open(os.path.join(ROOT, "docs", "reference.md")).read()
    for name, family in families.items():
        shown = name + "_total" if family.type == "counter" else name
        assert f"`{shown}`" in reference, f"docs/reference.md does not list {shown}"


def test_ctl_trace_prints_a_produce_story_as_it_happens(broker):
    follow_topic(broker, "traced")
    admin = broker.admin.replace("http://", "")
    ctl = subprocess.Popen([BINARY, "ctl", "--admin", admin, "trace", "--request", "Produce", "--count", "1", "--phases"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        # It says where it starts before it waits: from then on, nothing is missed.
        assert ctl.stderr.readline().startswith("following requests from #")
        call(broker, "POST", "/api/send", {"topic": "traced", "client_id": "ctl-test"})
        out, err = ctl.communicate(timeout=30)
    finally:
        ctl.kill()
    assert ctl.returncode == 0, err
    lines = out.splitlines()
    story = lines[0]
    assert re.fullmatch(
        r"produce #\d+ client=ctl-test traced-0 appended @0 → parked \(needs HW 1, deadline \d+ ms\)"
        r" → follower ([23]) fetch @1 → follower (?!\1)[23] fetch @1 → HW 1 → completed after [\d.]+ ms",
        story), story
    steps = lines[1:-1]
    assert [re.sub(r"^\s*\+[\d.]+ ms\s+", "", s) for s in steps][:2] == [
        "appended @0", "parked (needs HW 1, deadline " + re.search(r"deadline (\d+)", story).group(1) + " ms)"]
    assert re.match(r"\s+phases \(ms\): request queue [\d.]+  local [\d.]+  remote [\d.]+  "
                    r"response queue [\d.]+  response send [\d.]+  total [\d.]+$", lines[-1]), lines[-1]


def test_api_requests_filters_by_client_and_topic(broker):
    follow_topic(broker, "filtered")
    call(broker, "POST", "/api/send", {"topic": "filtered", "client_id": "filter-a"})
    call(broker, "POST", "/api/send", {"topic": "filtered", "client_id": "filter-b", "acks": 1})
    wait_for("both answered", lambda: len(call(broker, "GET", "/api/requests?topic=filtered&done=1&request=Produce")["requests"]) == 2)
    a = call(broker, "GET", "/api/requests?client=filter-a&request=Produce")["requests"]
    assert [r["client_id"] for r in a] == ["filter-a"]
    assert a[0]["purgatory"] == "Produce" and a[0]["phases_ms"]["remote"] > 0
    b = call(broker, "GET", "/api/requests?client=filter-b&request=Produce")["requests"]
    assert b[0]["acks"] == 1 and b[0]["purgatory"] is None and b[0]["phases_ms"]["remote"] == 0
    assert b[0]["story"].endswith(re.search(r"answered \(acks=1\) in [\d.]+ ms$", b[0]["story"]).group(0))
    none = call(broker, "GET", "/api/requests?topic=no-such-topic")["requests"]
    assert none == []
    followers = call(broker, "GET", "/api/requests?followers=0&limit=500")["requests"]
    assert not any(r["request"] == "FetchFollower" for r in followers)


def test_the_stream_paces_its_frames_while_things_change_and_sends_none_when_idle():
    """The page's stream: while produces flow it keeps sending frames, paced (about one
    every 90 ms, not one per change); while nothing changes it sends none (a manual
    clock: no timeout or long poll moves on by itself), and the next change sends one."""
    import statistics
    import threading
    import time

    from confluent_kafka import Producer

    b = Broker(["--clock", "manual"])
    try:
        follow_topic(b, "rate")
        arrivals = []
        stream = urllib.request.urlopen(b.admin + "/api/view/stream", timeout=60)

        def read():
            try:
                for line in stream:
                    if line.startswith(b"event: frame"):
                        arrivals.append(time.monotonic())
            except OSError:
                pass  # the broker stopped at the end of the test

        threading.Thread(target=read, daemon=True).start()
        wait_for("the first frame", lambda: arrivals)

        # Busy: acks=all produces one after the other, each completed by the followers.
        stop = threading.Event()
        delivered = []

        def produce():
            p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
            while not stop.is_set():
                p.produce("rate", b"x", on_delivery=lambda err, _m: delivered.append(err))
                p.flush(10)

        producer = threading.Thread(target=produce)
        busy_from = time.monotonic()
        producer.start()
        try:
            wait_for("30 frames while produces flow",
                     lambda: len([t for t in arrivals if t > busy_from]) >= 31, timeout=30)
        finally:
            stop.set()
            producer.join()
        assert delivered and all(err is None for err in delivered)
        busy = [t for t in arrivals if t > busy_from][:31]
        gaps = [b2 - b1 for b1, b2 in zip(busy, busy[1:])]
        # At most 11 a second by design (one every 90 ms), however many changes there
        # were: hundreds of produces went by. A slow machine only makes gaps longer.
        assert len(delivered) > len(busy), "more changes than frames"
        assert statistics.median(gaps) >= 0.08, gaps

        # Idle: once the last produce's frame is out, nothing changes and nothing is sent.
        wait_for("the stream to settle", lambda: time.monotonic() - arrivals[-1] > 0.5)
        settled = len(arrivals)
        time.sleep(2)  # a window to count in, not a wait for an event
        assert len(arrivals) == settled, "frames sent while nothing changed"
        # The stream was alive all along: the next change is sent.
        call(b, "POST", "/api/clock/advance", b"1")
        wait_for("the frame of the clock's step", lambda: len(arrivals) > settled)
    finally:
        b.stop()  # which ends the stream and its reader


def test_a_frame_lists_the_first_pending_operations_and_the_buckets_of_all():
    """With many produces parked, a frame carries the 12 with the earliest deadlines (each
    with its request), counts all of them, and lists every wheel bucket that holds one, so
    the page outlines them all; /api/state still lists every one."""
    b = Broker(["--clock", "manual"])
    try:
        follow_topic(b, "many")
        for replica in (2, 3):
            call(b, "POST", f"/api/followers/{replica}/pause", b"")
        for i in range(20):
            # Timeouts from 5 ms to 2.4 s: their timers land in buckets of three levels.
            call(b, "POST", "/api/send", {"topic": "many", "client_id": f"many-{i}", "timeout_ms": 5 + 125 * i,
                                          "value": f"v{i}"})
        wait_for("twenty produces parked", lambda: b.state()["purgatories"]["produce"]["delayed"] == 20)

        every = b.state()["purgatories"]["produce"]["pending"]
        assert len(every) == 20
        produce = call(b, "GET", "/api/view")["state"]["purgatories"]["produce"]
        assert produce["pending_total"] == 20
        shown = produce["pending"]
        assert len(shown) == 12
        deadlines = sorted(op["deadline_ms"] for op in every)
        assert [op["deadline_ms"] for op in shown] == deadlines[:12]
        assert all(op["request"]["client_id"].startswith("many-") for op in shown)

        buckets = {}
        for op in every:
            key = (op["bucket"]["level"], op["bucket"]["slot"])
            buckets[key] = buckets.get(key, 0) + 1
        assert len({level for level, _ in buckets}) == 3
        listed = {(x["level"], x["slot"]): x["operations"] for x in produce["pending_buckets"]}
        assert listed == buckets
    finally:
        b.stop()


def test_the_stream_count_is_bounded_and_a_closed_stream_frees_its_place():
    """Each open stream costs the broker frames; a client opening them without end gets 503
    with a reason once 32 are open, and a place again once one closes."""
    import http.client
    import urllib.error

    b = Broker()
    try:
        host, port = b.admin.removeprefix("http://").split(":")
        streams = []
        for _ in range(32):
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("GET", "/api/view/stream")
            response = conn.getresponse()
            assert response.status == 200
            assert response.readline().startswith(b"event: frame")
            streams.append((conn, response))
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(b.admin + "/api/view/stream", timeout=10)
        assert refused.value.code == 503
        assert "32 live view streams are open" in json.load(refused.value)["error"]
        # /api/view and the rest of the admin API are not limited.
        assert "state" in call(b, "GET", "/api/view")

        conn, _ = streams.pop()
        conn.close()

        def reopened():
            try:
                with urllib.request.urlopen(b.admin + "/api/view/stream", timeout=10) as r:
                    return r.status == 200 and r.readline().startswith(b"event: frame")
            except urllib.error.HTTPError as e:
                assert e.code == 503
                return False
        wait_for("a place for a new stream once one closed", reopened)
    finally:
        for conn, _ in streams:
            conn.close()
        b.stop()


def test_a_topic_created_while_the_followers_are_parked_is_replicated_on_a_frozen_clock():
    """On the manual clock a follower's parked fetch has no timeout to end it. A topic
    created while the followers wait on another one still gets replicated with the clock
    untouched: the broker ends their parked fetches once they are told of the topic, and
    the request log says why."""
    from confluent_kafka import Producer
    b = Broker(["--clock", "manual"])
    try:
        clock = b.state()["now_ms"]
        follow_topic(b, "parked-on")
        delivered = []
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0})
        p.produce("parked-on", b"first", on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(30) == 0 and delivered == [None]
        wait_for("both followers parked on parked-on", lambda: {
            r["replica_id"] for r in call(b, "GET", "/api/requests?request=FetchFollower&limit=50")["requests"]
            if r["state"] == "parked"} == {2, 3})
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("created-later", 1, 3)])["created-later"].result(timeout=30)
        p.produce("created-later", b"second", on_delivery=lambda err, msg: delivered.append(err))
        assert p.flush(30) == 0
        assert delivered == [None, None]
        assert b.state()["now_ms"] == clock
        woken = [r for r in call(b, "GET", "/api/requests?request=FetchFollower&done=1&limit=500")["requests"]
                 if r["cause"]["kind"] == "partitions_changed"]
        assert {r["replica_id"] for r in woken} == {2, 3}
        assert "topics changed" in woken[0]["story"]
    finally:
        b.stop()
