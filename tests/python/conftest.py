"""Start the real `purgatory` binary for the Python real-client tests.

Each test module gets a fresh broker on free loopback ports, with its two embedded
followers (replica ids 2 and 3) replicating over the wire and the admin API enabled.
"""

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY = os.environ.get("PURGATORY_BIN", os.path.join(ROOT, "target", "release", "purgatory"))
JAVA_TESTS = os.path.join(ROOT, "tests", "java")


def free_ports(n):
    """`n` distinct free ports. The sockets are held until all are bound: ports asked for
    one after the other can come back equal once the first socket is closed."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def launch(server, args, log_name, ready):
    """Starts `args` as `server.proc`, logging to target/`log_name`, until `ready()` stops
    raising OSError: True once it does, False if a port was taken (the caller picks
    others), an error if the process stopped or never answered."""
    server.log = open(os.path.join(ROOT, "target", log_name), "w")
    server.proc = subprocess.Popen(args, stdout=server.log, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            ready()
            return True
        except OSError:
            if server.proc.poll() is not None:
                server.log.close()
                with open(server.log.name) as f:
                    if "Address already in use" in f.read():
                        return False
                raise RuntimeError("the broker stopped; see " + server.log.name)
            time.sleep(0.05)
    server.stop()
    raise RuntimeError("the broker did not start; see " + server.log.name)


class Broker:
    def __init__(self, extra_args=()):
        # A port found free can be taken before the broker binds it (the kernel hands the
        # same range to outgoing connections): a broker that stops on that starts again on
        # other ports.
        for _ in range(5):
            if self._start(extra_args):
                return
        raise RuntimeError("broker did not start: its ports were taken 5 times")

    def _start(self, extra_args):
        """Starts the broker on free ports: True once it answers, False if a port was taken."""
        self.port, self.admin_port = free_ports(2)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        args = [
            BINARY, "serve",
            "--config", os.path.join(ROOT, "config", "broker.toml"),
            "--listen", self.bootstrap,
            "--admin-listen", f"127.0.0.1:{self.admin_port}",
            *extra_args,
        ]
        return launch(self, args, f"pytest-broker-{self.port}.log", self.state)

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
    the kernel picks (`--listen 127.0.0.1:0`), found from `GET /api/brokers`."""

    def __init__(self, brokers=3, config=None, extra_args=()):
        for _ in range(5):
            if self._start(brokers, config, extra_args):
                return
        raise RuntimeError("cluster did not start: its admin port was taken 5 times")

    def _start(self, brokers, config, extra_args):
        (self.admin_port,) = free_ports(1)
        self.admin = f"http://127.0.0.1:{self.admin_port}"
        args = [
            BINARY, "serve",
            "--config", config or os.path.join(ROOT, "config", "broker.toml"),
            "--brokers", str(brokers),
            "--listen", "127.0.0.1:0",
            "--admin-listen", f"127.0.0.1:{self.admin_port}",
            *extra_args,
        ]

        def ready():
            self.listeners = {b["id"]: b["listener"] for b in self.get("/api/brokers")}
            self.bootstrap = ",".join(self.listeners.values())

        return launch(self, args, f"pytest-cluster-{self.admin_port}.log", ready)

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
