"""What acks=all buys: three brokers, a leader killed while its followers are paused.

The sequence of the README's "What acks=all does here, and what it buys":
1. pause both followers' fetchers of a partition,
2. write with acks=1 and, at the same time, with acks=all (idempotent),
3. kill the leader, resume the followers, restart the old leader,
4. count what was acknowledged and is gone.

acks=1 was acknowledged by the leader alone, so what it wrote during the pause goes when
the old leader comes back as a follower and truncates to the new leader's log. acks=all
was acknowledged by nobody in that window: its producer retried on the new leader, and
nothing it was told is stored is lost. The second test shows the limit: with an ISR
shrunk to the leader alone and `unclean.leader.election.enable=true`, acks=all loses too.

Each test prints its counts; the assertions are on what a consumer reads back.
"""

import os
import re
import tempfile

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import ROOT, Cluster, wait_for

RECORDS = 10


def create(cluster, name, **configs):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(name, 1, 3, config={k: str(v) for k, v in configs.items()})
    for f in admin.create_topics([topic]).values():
        f.result(30)
    wait_for(f"{name} led with a full ISR", lambda: (cluster.partition(name) or {}).get("isr") == [1, 2, 3])


class Tracker:
    """A producer and what it was told is stored."""

    def __init__(self, cluster, acks, **extra):
        self.acked = []
        self.failed = []
        self.producer = Producer({
            "bootstrap.servers": cluster.bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 60000,
            **extra,
        })

    def send(self, topic, values):
        for v in values:
            self.producer.produce(topic, value=v.encode(), partition=0, on_delivery=self._done)
        self.producer.poll(0)

    def _done(self, err, msg):
        (self.failed if err else self.acked).append(msg.value().decode())

    def flush(self):
        assert self.producer.flush(60) == 0, "every record was answered"


def read_all(cluster, topic):
    """Every record of partition 0 up to its high watermark."""
    end = cluster.partition(topic)["high_watermark"]
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap,
        "group.id": f"reader-{topic}",
        "enable.auto.commit": False,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    try:
        while len(values) < end:
            m = consumer.poll(10)
            assert m is not None, f"read {len(values)} of {end} records"
            if m.error():
                continue
            values.append(m.value().decode())
    finally:
        consumer.close()
    return values


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


def test_acks_1_loses_what_only_the_killed_leader_held_and_acks_all_loses_nothing(cluster):
    topic = "what-acks-buys"
    create(cluster, topic, **{"min.insync.replicas": 2})
    assert cluster.partition(topic)["leader"] == 1, "partition 0 of a new topic is led by broker 1"
    one = Tracker(cluster, "1", **{"enable.idempotence": False})
    everyone = Tracker(cluster, "all", **{"enable.idempotence": True})
    everyone.send(topic, [f"before-{i}" for i in range(RECORDS)])
    everyone.flush()

    # 1. The followers stop fetching.
    for follower in (2, 3):
        cluster.pause(follower)
    # 2. acks=1 is answered by the leader alone; acks=all waits in the produce purgatory.
    one.send(topic, [f"acks1-{i}" for i in range(RECORDS)])
    one.flush()
    assert len(one.acked) == RECORDS
    everyone.send(topic, [f"acksall-{i}" for i in range(RECORDS)])
    wait_for("the acks=all produce to park", lambda: cluster.state()["purgatories"]["produce"]["delayed"] > 0)
    assert len(everyone.acked) == RECORDS, "nothing written during the pause is acknowledged with acks=all"

    # 3. Kill the leader: a clean election from the ISR, one leader epoch up.
    killed = cluster.broker(1, "kill")
    elected = [c for c in killed["changes"] if c["type"] == "leader_elected" and c["tp"]["topic"] == topic]
    assert len(elected) == 1 and elected[0]["clean"], killed["changes"]
    new_leader = elected[0]["new_leader"]
    assert new_leader in (2, 3) and elected[0]["leader_epoch"] == 1
    assert [b["alive"] for b in cluster.get("/api/brokers")] == [False, True, True]
    for follower in (2, 3):
        cluster.fetchers(follower, "resume")
    # The acks=all producer's retries land on the new leader and are replicated there.
    everyone.flush()
    assert not everyone.failed, everyone.failed
    cluster.broker(1, "restart")
    wait_for("broker 1 to catch up and rejoin the ISR", lambda: sorted(cluster.partition(topic)["isr"]) == [1, 2, 3])

    # 4. What was acknowledged and is gone.
    stored = read_all(cluster, topic)
    lost_one = [v for v in one.acked if v not in stored]
    lost_all = [v for v in everyone.acked if v not in stored]
    duplicates = len(stored) - len(set(stored))
    print(f"\nacks=1: {len(one.acked)} acknowledged, {len(lost_one)} lost; "
          f"acks=all: {len(everyone.acked)} acknowledged, {len(lost_all)} lost; "
          f"duplicates {duplicates}; new leader {new_leader}")
    assert len(lost_one) == RECORDS, "acks=1 lost every record written during the pause"
    assert lost_all == []
    assert duplicates == 0
    assert [v for v in stored if v.startswith("acksall-")] == [f"acksall-{i}" for i in range(RECORDS)]
    # The old leader said which offsets it dropped: from where the new leader's epoch
    # begins, past the acks=1 records (and the acks=all ones it held unacknowledged).
    dropped = re.search(r"truncated offsets (\d+)\.\.(\d+) \((\d+) records\) to follow the leader's log", cluster.log_text())
    assert dropped, "the truncation is logged"
    start, end, count = map(int, dropped.groups())
    print(f"broker 1 truncated offsets {start}..{end} ({count} records)")
    assert start == RECORDS and end >= 2 * RECORDS and count == end - start
    # The live view's replication events tell the election and the truncation.
    events = [e for e in cluster.get("/api/view")["events"] if e["topic"] == topic]
    texts = [e["text"] for e in events]
    assert f"election: leader 1 → {new_leader}, leader epoch 1, ISR {sorted([2, 3], key=lambda b: b != new_leader)}" in texts, texts
    assert f"broker 1 truncated offsets {start}..{end} ({count} records) to follow the leader" in texts, texts
    replica_logs = {r["broker"]: r for r in cluster.partition(topic)["replica_logs"]}
    assert replica_logs[1]["leader_epoch"] == 1 and not replica_logs[1]["leader"]


def test_unclean_election_with_a_shrunken_isr_loses_even_acks_all():
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        with open(os.path.join(ROOT, "config", "broker.toml")) as base:
            f.write(base.read().replace('"replica.lag.time.max.ms" = 30000', '"replica.lag.time.max.ms" = 500'))
    cluster = Cluster(3, config=f.name)
    try:
        topic = "unclean"
        create(cluster, topic, **{"min.insync.replicas": 1, "unclean.leader.election.enable": "true"})
        everyone = Tracker(cluster, "all", **{"enable.idempotence": True})
        everyone.send(topic, [f"replicated-{i}" for i in range(RECORDS)])
        everyone.flush()
        for follower in (2, 3):
            cluster.pause(follower)
        # The followers fall behind these records: after replica.lag.time.max.ms the
        # leader drops them from the ISR, and with min.insync.replicas=1 it then
        # acknowledges acks=all alone.
        everyone.send(topic, [f"leader-only-{i}" for i in range(RECORDS)])
        wait_for("the ISR to shrink to the leader", lambda: cluster.partition(topic)["isr"] == [1])
        everyone.flush()
        assert len(everyone.acked) == 2 * RECORDS
        killed = cluster.broker(1, "kill")
        elected = [c for c in killed["changes"] if c["type"] == "leader_elected" and c["tp"]["topic"] == topic]
        assert len(elected) == 1 and not elected[0]["clean"], killed["changes"]
        for follower in (2, 3):
            cluster.fetchers(follower, "resume")
        cluster.broker(1, "restart")
        wait_for("broker 1 back in the ISR", lambda: 1 in cluster.partition(topic)["isr"])
        stored = read_all(cluster, topic)
        lost = [v for v in everyone.acked if v not in stored]
        print(f"\nunclean election: {len(everyone.acked)} acknowledged with acks=all, {len(lost)} lost")
        assert lost == [f"leader-only-{i}" for i in range(RECORDS)]
    finally:
        cluster.stop()
        os.unlink(f.name)


def coordinator_of(cluster, group):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    (future,) = admin.describe_consumer_groups([group]).values()
    return future.result(30).coordinator.id


def test_a_group_consumer_continues_from_its_commits_after_its_coordinator_is_killed(cluster):
    topic, group = "group-failover", "failover-readers"
    create(cluster, topic, **{"min.insync.replicas": 2})
    writer = Tracker(cluster, "all", **{"enable.idempotence": True})
    writer.send(topic, [f"r{i}" for i in range(4 * RECORDS)])
    writer.flush()
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
    })
    consumer.subscribe([topic])
    seen = []

    def read(n):
        while len(seen) < n:
            m = consumer.poll(10)
            assert m is not None, f"read {len(seen)} of {n} records"
            if not m.error():
                seen.append(m.value().decode())

    try:
        read(2 * RECORDS)
        consumer.commit(asynchronous=False)
        coordinator = coordinator_of(cluster, group)
        # Whoever coordinates the group dies; its __consumer_offsets partition gets a new
        # leader, which loads the group's commits from its own copy of the log.
        killed = cluster.broker(coordinator, "kill")
        assert any(c["type"] == "leader_elected" and c["tp"]["topic"] == "__consumer_offsets"
                   for c in killed["changes"]), "the coordinator led __consumer_offsets partitions"
        read(4 * RECORDS)
        consumer.commit(asynchronous=False)
        moved_to = coordinator_of(cluster, group)
    finally:
        consumer.close()
    print(f"\ncoordinator {coordinator} killed, the group moved to {moved_to}; read {len(seen)} records")
    assert moved_to != coordinator
    assert seen == [f"r{i}" for i in range(4 * RECORDS)], "no record read twice or skipped"
    # A new member of the group starts from the commit made through the new coordinator.
    fresh = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    try:
        (committed,) = fresh.committed([TopicPartition(topic, 0)], timeout=30)
    finally:
        fresh.close()
    assert committed.offset == 4 * RECORDS
    cluster.broker(coordinator, "restart")


def ctl(cluster, *args):
    import subprocess
    from conftest import BINARY
    done = subprocess.run([BINARY, "ctl", "--admin", cluster.admin.removeprefix("http://"), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_controlled_shutdown_moves_leadership_first_so_no_produce_fails(cluster):
    topic = "shutdown-moves"
    create(cluster, topic, **{"min.insync.replicas": 2})
    writer = Tracker(cluster, "all", **{"enable.idempotence": True})
    writer.send(topic, [f"before-{i}" for i in range(RECORDS)])
    writer.flush()
    # `ctl broker 1 shutdown`, with records in flight.
    writer.send(topic, [f"during-{i}" for i in range(RECORDS)])
    out = ctl(cluster, "broker", "1", "shutdown")
    print("\n" + out)
    assert f"{topic}-0: leader 1 -> 2, leader epoch 1, ISR [2, 3]" in out
    assert "broker 1 shut down" in out
    assert "broker 1 dead" in out
    writer.send(topic, [f"after-{i}" for i in range(RECORDS)])
    writer.flush()
    assert writer.failed == [], "no produce fails across a controlled shutdown"
    stored = read_all(cluster, topic)
    assert sorted(stored) == sorted(writer.acked) and len(stored) == 3 * RECORDS
    out = ctl(cluster, "broker", "1", "restart")
    assert re.search(r"broker 1 registered \(incarnation \d+\)", out), out
    wait_for("broker 1 back in the ISR", lambda: sorted(cluster.partition(topic)["isr"]) == [1, 2, 3])
    # `ctl broker ID kill` is the crash: the same election, told the same way.
    out = ctl(cluster, "broker", "2", "kill")
    assert re.search(rf"{topic}-0: leader 2 -> [13], leader epoch 2, ISR \[[13], [13]\]", out), out
    assert "broker 2 died" in out and "broker 2 dead" in out
    ctl(cluster, "broker", "2", "restart")
    wait_for("broker 1 back in the ISR again", lambda: sorted(cluster.partition(topic)["isr"]) == [1, 2, 3])
    # A broker that is running cannot be restarted; an unknown one is not found.
    import urllib.error
    for path, status in (("/api/brokers/1/restart", 409), ("/api/brokers/9/kill", 404), ("/api/brokers/1/explode", 404)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.post(path)
        assert refused.value.code == status, path


def test_with_no_command_the_binary_runs_three_brokers_and_broker_1_leads_demo():
    """`cargo run --release`'s embedded defaults: listeners on 9092-9094, admin on 8080."""
    import json
    import socket
    import subprocess
    import urllib.request
    from conftest import BINARY
    for port in (9092, 9093, 9094, 8080):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} is taken: the defaults need it"
    log = open(os.path.join(ROOT, "target", "pytest-no-command.log"), "w")
    proc = subprocess.Popen([BINARY], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        # Without --ready-file the bound addresses come as one line on stdout, once every
        # listener serves (the logs go to stderr).
        ready = json.loads(proc.stdout.readline())
        assert ready == {
            "brokers": [{"id": i, "listener": f"127.0.0.1:{p}", "advertised": f"127.0.0.1:{p}"}
                        for i, p in ((1, 9092), (2, 9093), (3, 9094))],
            "bootstrap": "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094",
            "admin": "127.0.0.1:8080",
        }

        def brokers():
            with urllib.request.urlopen("http://127.0.0.1:8080/api/brokers", timeout=2) as r:
                return json.load(r)
        assert [(b["id"], b["listener"], b["alive"]) for b in brokers()] == [
            (1, "127.0.0.1:9092", True), (2, "127.0.0.1:9093", True), (3, "127.0.0.1:9094", True)]
        p = Producer({"bootstrap.servers": "127.0.0.1:9092", "acks": "all"})
        p.produce("demo", value=b"hello")
        assert p.flush(30) == 0
        with urllib.request.urlopen("http://127.0.0.1:8080/api/state", timeout=5) as r:
            demo = next(x for x in json.load(r)["partitions"] if x["topic"] == "demo" and x["partition"] == 0)
        assert (demo["leader"], demo["replicas"], demo["high_watermark"]) == (1, [1, 2, 3], 1)
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_a_scenario_file_kills_and_restarts_brokers_through_ctl(cluster, tmp_path):
    topic = "scenario-driven"
    create(cluster, topic, **{"min.insync.replicas": 2})
    before = {b["id"]: b["incarnation"] for b in cluster.get("/api/brokers")}
    epoch_before = cluster.partition(topic)["leader_epoch"]
    scenario = tmp_path / "kill-restart.toml"
    scenario.write_text("""
name = "kill and restart"
description = "broker 1 dies while broker 3 is paused, and comes back"
[[step]]
at_ms = 0
broker = 3
action = "pause"
[[step]]
at_ms = 50
broker = 1
action = "kill"
[[step]]
at_ms = 100
broker = 3
action = "resume"
[[step]]
at_ms = 150
broker = 1
action = "restart"
""")
    out = ctl(cluster, "scenario", str(scenario))
    print("\n" + out)
    assert [line.split(" ms  ", 1)[1] for line in out.splitlines() if line.startswith("t=")] == [
        "broker 3: pause", "broker 1: kill", "broker 3: resume", "broker 1: restart"]
    after = {b["id"]: (b["incarnation"], b["alive"]) for b in cluster.get("/api/brokers")}
    assert after[1] == (before[1] + 1, True), "killed and restarted once"
    assert after[3] == (before[3], True)
    assert cluster.partition(topic)["leader_epoch"] == epoch_before + 1, "one election"
    # Resumed: its fetcher to broker 1 reconnects once broker 1 listens again.
    wait_for("broker 3's fetchers running", lambda: all(
        f["state"] == "running" for f in cluster.state()["followers"] if f["replica_id"] == 3))
    # A broker step the file cannot take is refused before anything runs.
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[[step]]\nat_ms = 0\nbroker = 1\naction = "crash"\n')
    import subprocess
    from conftest import BINARY
    refused = subprocess.run([BINARY, "ctl", "--admin", cluster.admin.removeprefix("http://"), "scenario", str(bad)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "broker 1 cannot crash" in refused.stderr, refused.stderr


def test_the_scenarios_api_plays_a_posted_file_and_refuses_what_it_cannot_play(cluster):
    import urllib.error
    listed = {s["name"]: s for s in cluster.get("/api/scenarios")}
    assert listed["leader-killed"]["brokers"] and not listed["paused-follower"]["brokers"]
    before = next(b["incarnation"] for b in cluster.get("/api/brokers") if b["id"] == 2)
    posted = cluster.post("/api/scenarios/run", b"""
name = "quick"
[[step]]
at_ms = 0
broker = 2
action = "kill"
[[step]]
at_ms = 200
broker = 2
action = "restart"
""")
    assert [(s["at_ms"], s["target"], s["action"]) for s in posted["steps"]] == [
        (0, "broker 2", "kill"), (200, "broker 2", "restart")]
    for path, body, status in (
            ("/api/scenarios/run", b'name = "again"\n[[step]]\nat_ms = 0\nbroker = 3\naction = "pause"\n', 409),
            ("/api/scenarios/run", b"not toml [", 400),
            ("/api/scenarios/run?name=nope", b"", 404),
    ):
        with pytest.raises(urllib.error.HTTPError) as refused:
            cluster.post(path, body)
        assert refused.value.code == status, path
    wait_for("broker 2 killed and restarted", lambda: next(
        (b["alive"], b["incarnation"]) for b in cluster.get("/api/brokers") if b["id"] == 2) == (True, before + 1))
    # Simulated followers' scenarios do not run on a cluster.
    wait_for("the scenario to end", lambda: _can_post(cluster, "/api/scenarios/run?name=paused-follower") == 409)


def _can_post(cluster, path):
    import urllib.error
    try:
        cluster.post(path)
        return 202
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        return e.code if "simulated followers" in body else -e.code
