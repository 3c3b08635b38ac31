"""The live view in a real browser: Debian's chromium, headless, driven by selenium.

The page alone shows a DelayedProduce from a real client (confluent-kafka) from creation
to completion: both followers paused with the page's buttons, the produce parked in the
Produce purgatory with its required offset and its timing-wheel bucket, the followers
resumed, the produce completed with remote time in its timeline. Then the page's clock
controls freeze the broker's clock and step it until a produce sent with the page's own
send form expires. Screenshots go to target/view-screenshots/.

And: client ids and topics made of HTML and script are shown as text.
"""

import json
import os
import re
import shutil
import tempfile
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import ROOT, Broker, wait_for

SHOTS = os.path.join(ROOT, "target", "view-screenshots")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def call(broker, method, path, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(broker.admin + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def broker():
    b = Broker()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def browser():
    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), (
        "the browser test needs Debian's chromium and chromium-driver (scripts/test.sh installs them)")
    profile = tempfile.mkdtemp(prefix="purgatory-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1600,1000"]:
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    # A 1600x1000 page, whatever the headless window's decorations take.
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1600, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
    os.makedirs(SHOTS, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def open_page(driver, broker):
    driver.get(broker.admin + "/")
    wait_for("the page's first frame", lambda: driver.execute_script("return window.purgatoryFrames || 0") > 0)


def shot(driver, name):
    driver.save_screenshot(os.path.join(SHOTS, name))


# The page changes its tables on every frame (11 a second): panels are patched in place,
# but request rows and the wheel's marks come and go, so elements are read and clicked in
# one script call rather than held on to (the typing test holds on to one on purpose).

def click(driver, css):
    driver.execute_script("document.querySelector(arguments[0]).click()", css)


def click_follower(driver, replica, action):
    driver.execute_script("""
        const row = document.querySelector(`.follower[data-follower="${arguments[0]}"]`);
        [...row.querySelectorAll('button')].find((b) => b.textContent === arguments[1]).click();
    """, replica, action)


def text_of(driver, css):
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", css)


def follower_state(broker, replica):
    return next(f["state"] for f in broker.state()["followers"] if f["replica_id"] == replica)


def pending_rows(driver, client):
    """The Produce purgatory's pending operations on the page from `client`."""
    return driver.execute_script("""
        return [...document.querySelectorAll('tr.pending-op[data-purgatory="Produce"]')]
          .filter((r) => r.querySelector('td.client').textContent === arguments[0])
          .map((r) => ({
            text: r.textContent,
            required: (r.querySelector('.required-offset') || {}).textContent,
            bucket: r.querySelector('td.bucket').textContent,
          }));
    """, client)


def request_row(driver, client, request="Produce", topic_prefix=None):
    """The newest row of the request table from `client` (and topic), as data."""
    return driver.execute_script("""
        const rows = [...document.querySelectorAll(`tr.request[data-request="${arguments[1]}"]`)]
          .filter((r) => r.querySelector('td.client').textContent === arguments[0])
          .filter((r) => arguments[2] === null || r.querySelector('td.tps').textContent.startsWith(arguments[2]));
        if (!rows.length) return null;
        const r = rows[0];
        return {
          cls: r.className, remote: r.getAttribute('data-remote-ms'), text: r.textContent,
          phases: r.querySelector('.phases').textContent, cause: r.querySelector('td.cause').textContent,
          tps: r.querySelector('td.tps').textContent, client: r.querySelector('td.client').textContent,
          has_remote_segment: !!r.querySelector('.bar .ph.remote'),
        };
    """, client, request, topic_prefix)


def done_row(driver, client, topic_prefix=None):
    r = request_row(driver, client, topic_prefix=topic_prefix)
    return r if r is not None and "state-done" in r["cls"] else None


def test_the_page_follows_a_delayed_produce_from_a_real_client(broker, browser):
    topic = "view-demo"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    wait_for("followers following the topic", lambda: all(
        any(p["topic"] == topic for p in f["partitions"]) for f in broker.state()["followers"]))
    open_page(browser, broker)

    # Pause both followers with the page's buttons.
    for replica in (2, 3):
        click_follower(browser, replica, "pause")
        wait_for(f"follower {replica} paused", lambda r=replica: follower_state(broker, r) == "paused")

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "client.id": "view-test", "message.timeout.ms": 60000})
    reports = []
    producer.produce(topic, b"watched", on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    producer.poll(0)

    # The DelayedProduce appears in the Produce purgatory: required offset 1 (the HW the
    # batch at offset 0 needs) and the wheel bucket its timeout sits in.
    wait_for("the parked produce on the page", lambda: pending_rows(browser, "view-test"))
    row = pending_rows(browser, "view-test")[0]
    assert row["required"] == "1", row
    assert "vs HW 0 on view-demo-0" in row["text"], row
    m = re.match(r"L(\d+)·slot (\d+) \(flush @([\d,]+)\)", row["bucket"])
    assert m, row
    pending = broker.state()["purgatories"]["produce"]["pending"]
    assert len(pending) == 1
    position = pending[0]["bucket"]
    assert (int(m.group(1)), int(m.group(2))) == (position["level"], position["slot"]), (row, position)
    assert int(m.group(3).replace(",", "")) == position["expiration_ms"]
    # Its bucket is outlined in the wheel, and listed in the bucket queue.
    seg = browser.execute_script(
        "const s = document.querySelector(`path.seg[data-level='${arguments[0]}'][data-slot='${arguments[1]}']`);"
        "return [s.getAttribute('class'), Number(s.getAttribute('data-entries'))];",
        position["level"], position["slot"])
    assert "holds-produce" in seg[0] and seg[1] >= 1, seg
    chips = browser.execute_script("return [...document.querySelectorAll('#bucket-queue .chip')].map((c) => c.textContent)")
    assert any(c.startswith(f'L{position["level"]}·s{position["slot"]} ') for c in chips), chips
    shot(browser, "parked.png")

    # Resume the followers: their fetches move the HW past the batch and complete it.
    for replica in (2, 3):
        click_follower(browser, replica, "resume")
    producer.flush(30)
    assert reports == [(None, 0)]

    wait_for("the produce completed on the page", lambda: done_row(browser, "view-test"))
    done = done_row(browser, "view-test")
    assert float(done["remote"]) > 0, done
    assert re.search(r"remote [\d.,]+", done["phases"]), done
    assert done["has_remote_segment"], done
    assert re.match(r"HW 1 at follower [23] fetch #\d+ @1", done["cause"]), done
    wait_for("the purgatory emptied", lambda: not pending_rows(browser, "view-test"))
    shot(browser, "completed.png")


def test_the_page_freezes_steps_and_resumes_the_clock_until_a_produce_expires(broker, browser):
    open_page(browser, broker)
    for replica in (2, 3):
        click_follower(browser, replica, "pause")
        wait_for(f"follower {replica} paused", lambda r=replica: follower_state(broker, r) == "paused")
    click(browser, "#freeze")
    wait_for("the clock frozen", lambda: "FROZEN" in text_of(browser, "#clock"))
    frozen_at = broker.state()["now_ms"]

    # Send an acks=all produce with the page's own form, 500 ms timeout.
    topic = browser.find_element(By.ID, "send-topic")
    topic.clear()
    topic.send_keys("view-demo")
    Select(browser.find_element(By.ID, "send-acks")).select_by_value("-1")
    timeout = browser.find_element(By.ID, "send-timeout")
    timeout.clear()
    timeout.send_keys("500")
    click(browser, "#send-button")
    wait_for("the page's produce parked", lambda: pending_rows(browser, "purgatory-view"))
    assert broker.state()["now_ms"] == frozen_at, "a frozen clock does not move"

    # Step 499 ms: not yet due. One more ms: it expires, on the page.
    stepn = browser.find_element(By.ID, "stepn")
    stepn.clear()
    stepn.send_keys("499")
    click(browser, "#stepN")
    wait_for("the clock stepped", lambda: broker.state()["now_ms"] == frozen_at + 499)
    assert broker.state()["purgatories"]["produce"]["delayed"] == 1, "not due yet"
    shot(browser, "frozen.png")
    click(browser, "#step1")

    wait_for("the produce expired on the page", lambda: done_row(browser, "purgatory-view"))
    cause = done_row(browser, "purgatory-view")["cause"]
    assert "expired" in cause and "REQUEST_TIMED_OUT" in cause, cause
    assert broker.state()["now_ms"] == frozen_at + 500

    click(browser, "#resume")
    wait_for("the clock running again", lambda: broker.state()["now_ms"] > frozen_at + 500)
    wait_for("the page shows it running", lambda: "FROZEN" not in text_of(browser, "#clock"))
    for replica in (2, 3):
        click_follower(browser, replica, "resume")


def test_topics_and_client_ids_made_of_html_are_shown_as_text(broker, browser):
    open_page(browser, broker)
    browser.execute_script("window.__xss = 0; window.alert = () => { window.__xss = 99; };")
    hostile_client = '<img src=x onerror="window.__xss=1">'
    hostile_topic = '<script>window.__xss=2</script>'
    # A parked produce from a client whose id is HTML (legal topic, followers paused)...
    for replica in (2, 3):
        call(broker, "POST", f"/api/followers/{replica}/pause", b"")
    call(broker, "POST", "/api/send", {"topic": "view-demo", "client_id": hostile_client, "timeout_ms": 60000})
    # ...and a produce to a topic whose name is a script (Kafka refuses the name; the
    # request is still in the request log, with the name).
    sent = call(broker, "POST", "/api/send", {"topic": hostile_topic, "client_id": hostile_client})
    assert sent["metadata_error"] == "INVALID_TOPIC_EXCEPTION"

    wait_for("the hostile client's parked produce", lambda: pending_rows(browser, hostile_client))

    wait_for("the produce to the script-named topic", lambda: done_row(browser, hostile_client, hostile_topic))
    row = done_row(browser, hostile_client, hostile_topic)
    assert row["client"] == hostile_client and row["tps"].startswith(hostile_topic), row
    assert "UNKNOWN_TOPIC_OR_PARTITION" in row["text"], row
    # Typed into the filter, it still matches as text.
    browser.find_element(By.ID, "filter-topic").send_keys(hostile_topic)
    wait_for("the filtered table", lambda: done_row(browser, hostile_client, hostile_topic) is not None)
    assert request_row(browser, "view-test") is None, "filtered out"
    browser.execute_script(
        "const f = document.getElementById('filter-topic'); f.value = ''; f.dispatchEvent(new Event('input'))")
    # Nothing was parsed as markup: no image, no extra script, nothing ran.
    assert browser.execute_script("return window.__xss") == 0
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert len(browser.find_elements(By.TAG_NAME, "script")) == 1
    shot(browser, "escaped.png")
    for replica in (2, 3):
        call(broker, "POST", f"/api/followers/{replica}/resume", b"")


def test_a_fetch_delay_typed_into_the_page_survives_the_frames_and_is_applied(broker, browser):
    """The panels are patched, not rebuilt, on each frame: a value being typed into a
    follower's delay box stays while frames stream in, and its button applies it."""
    open_page(browser, broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0,
                         "client.id": "view-typing"})
    box = browser.find_element(By.CSS_SELECTOR, '.follower[data-follower="3"] input')
    box.clear()
    box.send_keys("250")
    frames = browser.execute_script("return window.purgatoryFrames")
    # Traffic moves the followers' fetch positions, so frames keep coming and the
    # followers' panel changes in each.
    end = time.time() + 30
    while browser.execute_script("return window.purgatoryFrames") < frames + 5 and time.time() < end:
        producer.produce("view-demo", b"tick")
        producer.poll(0.05)
    producer.flush(10)
    assert browser.execute_script("return window.purgatoryFrames") >= frames + 5
    assert browser.execute_script("return arguments[0].isConnected", box), "the box was rebuilt"
    assert box.get_attribute("value") == "250"
    click_follower(browser, 3, "set delay")
    wait_for("follower 3's fetch delay", lambda: next(
        f["fetch_delay_ms"] for f in broker.state()["followers"] if f["replica_id"] == 3) == 250)
    call(broker, "POST", "/api/followers/3/delay", b"0")


def test_the_replication_log_keeps_its_rows_and_says_when_it_is_paced(broker, browser):
    """Log rows are matched by what they show, not by place: when newer events arrive on
    top, the row an eye was on keeps its text and moves down, instead of every row taking
    its neighbour's text. Past 40 events a second the log is redrawn once a second and its
    heading says so; when the traffic stops, the note goes."""
    open_page(browser, broker)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1", "linger.ms": 0,
                         "client.id": "view-log"})
    newest = "return (document.querySelector('#events li:not(.empty)') || {}).textContent || null"
    producer.produce("view-demo", b"first")
    producer.flush(10)
    wait_for("a replication event on the page", lambda: browser.execute_script(newest) is not None)
    watched = browser.execute_script("""
        window.watchedRow = document.querySelector('#events li:not(.empty)');
        return window.watchedRow.textContent;
    """)
    producer.produce("view-demo", b"second")
    producer.flush(10)
    wait_for("newer events above it", lambda: browser.execute_script(newest) != watched)
    now = browser.execute_script("""
        const li = window.watchedRow;
        return li.isConnected && {text: li.textContent, first: li === document.querySelector('#events li')};
    """)
    assert now, "the watched row's element was dropped after one produce"
    assert now["text"] == watched, "the watched row took another event's text"
    assert not now["first"]

    busy_seen = False
    end = time.time() + 30
    while time.time() < end and not busy_seen:
        for _ in range(20):
            producer.produce("view-demo", b"more")
        producer.poll(0.02)
        busy_seen = "busy" in (text_of(browser, "#events-pace") or "")
    producer.flush(10)
    assert busy_seen, "the replication log never said it was busy under a steady produce load"
    wait_for("the busy note to clear once the traffic stopped", lambda: text_of(browser, "#events-pace") == "")


def test_the_page_adds_a_fault_rule_counts_its_hits_marks_its_requests_and_removes_it(broker, browser):
    """The fault panel: a rule typed into its form is armed, a real producer retrying
    through it raises its hit count on the page, the request table marks each request the
    rule fired on, and the rule's button removes it."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("view-faults", 1, 3)])["view-faults"].result(10)
    open_page(browser, broker)
    box = browser.find_element(By.ID, "fault-rule")
    box.clear()
    box.send_keys(json.dumps({"api": "Produce", "client_id": "view-fault",
                              "error": "NOT_LEADER_OR_FOLLOWER", "times": 2}))
    click(browser, ".fault-form button[type=submit]")
    wait_for("the rule on the page", lambda: text_of(browser, "tr.fault-rule") is not None)
    (rule,) = call(broker, "GET", "/api/faults")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0,
                         "client.id": "view-fault", "retry.backoff.ms": 50})
    producer.produce("view-faults", b"through")
    assert producer.flush(30) == 0
    wait_for("two hits on the page", lambda: text_of(
        browser, f'tr.fault-rule[data-rule="{rule["id"]}"] .fault-hits') == "2")
    marked = lambda: browser.execute_script("""
        return [...document.querySelectorAll('tr.request[data-request="Produce"]')]
          .filter((r) => r.querySelector('td.client').textContent === 'view-fault')
          .map((r) => (r.querySelector('.fault') || {}).textContent || '');
    """)
    wait_for("the faulted produces marked", lambda: sum(
        f"rule {rule['id']}: error NOT_LEADER_OR_FOLLOWER" in m for m in marked()) == 2)
    wait_for("the produce that went through, unmarked", lambda: "" in marked())
    shot(browser, "fault-rules.png")
    browser.execute_script(
        f"document.querySelector('tr.fault-rule[data-rule=\"{rule['id']}\"] button').click()")
    wait_for("the rule removed", lambda: call(broker, "GET", "/api/faults") == [])
    wait_for("the panel says so", lambda: "no fault rules" in (text_of(browser, "#faults") or ""))


def test_the_page_shows_an_open_transaction_holding_the_lso_below_the_hw(broker, browser):
    """A transaction left open (confluent-kafka): the partition's bar gets an LSO mark below
    the HW, its header says the LSO, and a line names the open transaction; the commit
    takes them away."""
    topic = "view-txn"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(10)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "view-txn-producer"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"held", partition=0)
    assert p.flush(30) == 0
    plain = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(3):
        plain.produce(topic, f"after-{i}".encode(), partition=0)
    assert plain.flush(30) == 0
    open_page(browser, broker)
    tp = f"{topic}-0"
    wait_for("the LSO on the page", lambda: text_of(browser, f'.partition[data-tp="{tp}"] .lso-value') == "0")
    assert browser.execute_script(
        "return !!document.querySelector(arguments[0])", f'.partition[data-tp="{tp}"] .logbar .lso')
    line = text_of(browser, f'[data-open-txns="{tp}"]')
    assert "since offset 0" in line and "read_committed consumers wait at the LSO" in line, line
    txn = text_of(browser, '[data-txn="view-txn-producer"]')
    assert re.search(r"Ongoing, producer \d+ epoch 0, open \d+\.\d s of 60\.0 s on \[view-txn-0\]", txn), txn
    # A read_committed consumer's fetch parks for the LSO, and the purgatory panel says so.
    from confluent_kafka import Consumer, TopicPartition
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "view-txn-reader",
                       "isolation.level": "read_committed", "client.id": "view-txn-reader"})
    reader.assign([TopicPartition(topic, 0, 0)])
    try:
        def parked_for_the_lso():
            reader.poll(0.05)
            return browser.execute_script("""
                return [...document.querySelectorAll('tr.pending-op[data-purgatory="Fetch"]')]
                  .some((r) => r.textContent.includes(arguments[0]));
            """, f"LSO past 0 on {tp} (LSO 0, HW 4)")
        wait_for("a read_committed fetch parked for the LSO", parked_for_the_lso)
        shot(browser, "open-transaction.png")
    finally:
        reader.close()
    p.commit_transaction(30)
    wait_for("the open transaction to leave the page",
             lambda: text_of(browser, f'[data-open-txns="{tp}"]') is None
             and text_of(browser, f'.partition[data-tp="{tp}"] .lso-value') is None
             and text_of(browser, '[data-txn="view-txn-producer"]') is None)
