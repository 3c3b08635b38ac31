"""Start the real `purgatory` binary for the Python real-client tests.

Each test module gets a fresh broker on loopback ports the kernel picks, with its two embedded
followers (replica ids 2 and 3) replicating over the wire and the admin API enabled.
"""

import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("PURGATORY_BIN", os.path.join(ROOT, "target", "release", "purgatory"))
JAVA_TESTS = os.path.join(ROOT, "tests", "java")


_launched = itertools.count(1)


def launch(server, args, name):
    """Starts `purgatory serve` with `args` as `server.proc`, every listener on a port the
    kernel picks (`--listen 127.0.0.1:0`, `--admin-listen 127.0.0.1:0`), and waits for its
    ready file (`--ready-file`): the JSON that names the bound addresses, written once every
    listener serves. Returns that JSON. Logs go to target/pytest-`name`-N.log."""
    n = f"{os.getpid()}-{next(_launched)}"
    ready_file = os.path.join(ROOT, "target", f"pytest-{name}-{n}.ready.json")
    server.log = open(os.path.join(ROOT, "target", f"pytest-{name}-{n}.log"), "w")
    server.proc = subprocess.Popen(
        [*args, "--admin-listen", "127.0.0.1:0", "--ready-file", ready_file],
        stdout=server.log, stderr=subprocess.STDOUT, cwd=ROOT,
    )
    deadline = time.time() + 30
    while not os.path.exists(ready_file):
        if server.proc.poll() is not None:
            server.log.close()
            raise RuntimeError("the broker stopped; see " + server.log.name)
        if time.time() > deadline:
            server.stop()
            raise RuntimeError("the broker did not start; see " + server.log.name)
        time.sleep(0.02)
    with open(ready_file) as f:
        ready = json.load(f)
    os.remove(ready_file)
    server.admin = "http://" + ready["admin"]
    server.bootstrap = ready["bootstrap"]
    server.listeners = {b["id"]: b["advertised"] for b in ready["brokers"]}
    return ready


class Broker:
    """One broker and its two embedded followers, on ports the kernel picks."""

    def __init__(self, extra_args=(), config=None):
        launch(self, [
            BINARY, "serve",
            "--config", config or os.path.join(ROOT, "config", "broker.toml"),
            "--listen", "127.0.0.1:0",
            *extra_args,
        ], "broker")
        self.port = int(self.bootstrap.rsplit(":", 1)[1])

    def state(self):
        with urllib.request.urlopen(self.admin + "/api/state", timeout=5) as r:
            return json.load(r)

    def follower(self, replica_id, action, body=b""):
        req = urllib.request.Request(
            f"{self.admin}/api/followers/{replica_id}/{action}", data=body, method="POST"
        )
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    yield b
    b.stop()


@pytest.fixture(scope="session")
def java_classpath():
    """The classpath of tests/java's test classes and their jars (kafka-clients 4.4), for a
    test that runs a Java client in its own `java` process. Maven compiles them once per
    session; tests/java/pom.xml writes the jars' classpath to target/test-classpath.txt as it
    does. Offline first, as the jars are usually in ~/.m2 already; online if that fails, since
    on a fresh machine these tests run before the Java ones have fetched anything. No Java or
    Maven fails the test rather than skipping it: the test command installs both."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"`{tool}` is not installed (scripts/test.sh installs it)")
    compile_tests = ["mvn", "-q", "-B", "-f", os.path.join(JAVA_TESTS, "pom.xml"), "test-compile"]
    run = subprocess.run([*compile_tests, "-o"], capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        run = subprocess.run(compile_tests, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(compile_tests)} failed:\n{run.stdout[-4000:]}{run.stderr[-4000:]}")
    with open(os.path.join(JAVA_TESTS, "target", "test-classpath.txt")) as f:
        jars = f.read().strip()
    return os.pathsep.join([os.path.join(JAVA_TESTS, "target", "test-classes"), jars])


def wait_for(what, condition, timeout=20.0):
    """Wait for an event on the broker (not a timing assertion)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for: " + what)


class Cluster:
    """`purgatory serve --brokers N`: N brokers in one process, every listener on a port
    the kernel picks, named by the ready file."""

    def __init__(self, brokers=3, config=None, extra_args=()):
        launch(self, [
            BINARY, "serve",
            "--config", config or os.path.join(ROOT, "config", "broker.toml"),
            "--brokers", str(brokers),
            "--listen", "127.0.0.1:0",
            *extra_args,
        ], "cluster")

    def get(self, path):
        with urllib.request.urlopen(self.admin + path, timeout=5) as r:
            return json.load(r)

    def post(self, path, body=b""):
        req = urllib.request.Request(self.admin + path, data=body, method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    def state(self):
        return self.get("/api/state")

    def partition(self, topic, index=0):
        for p in self.state()["partitions"]:
            if p["topic"] == topic and p["partition"] == index:
                return p
        return None

    def broker(self, broker_id, action):
        """kill, restart or shutdown; answers the controller's changes."""
        return self.post(f"/api/brokers/{broker_id}/{action}")

    def fetchers(self, broker_id, action, body=b""):
        """pause, resume, delay or lag every replica fetcher of a broker."""
        return self.post(f"/api/followers/{broker_id}/{action}", body)

    def pause(self, broker_id):
        """Pauses a broker's fetchers and waits until none has a fetch in flight (a pause
        lets the fetch under way finish, and it may bring records)."""
        self.fetchers(broker_id, "pause")

        def stopped():
            mine = [f for f in self.state()["followers"] if f["replica_id"] == broker_id]
            return all(f["state"] == "paused" and not f["fetch_in_flight"] for f in mine)

        wait_for(f"broker {broker_id}'s fetchers to stop", stopped)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
