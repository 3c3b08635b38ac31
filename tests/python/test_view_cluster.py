"""The live view of a three-broker cluster in a real browser (headless chromium, selenium):
the Brokers panel kills, restarts and pauses brokers, and the partitions show the
election (leader and epoch) and every replica's log. Screenshots go to
target/view-screenshots/.
"""

import pytest
from confluent_kafka import Producer

from conftest import Cluster, wait_for
from test_view import browser, shot, text_of  # noqa: F401  (browser is a fixture)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(3)
    yield c
    c.stop()


def click_broker(driver, broker_id, label):
    driver.execute_script("""
        const row = document.querySelector(`[data-broker="${arguments[0]}"]`);
        [...row.querySelectorAll('button')].find((b) => b.textContent === arguments[1]).click();
    """, broker_id, label)


def alive(cluster, broker_id):
    return next(b["alive"] for b in cluster.get("/api/brokers") if b["id"] == broker_id)


def test_the_page_kills_and_restarts_a_broker_and_shows_the_election(cluster, browser):  # noqa: F811
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce("demo", value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    browser.get(cluster.admin + "/")
    wait_for("the page's first frame", lambda: browser.execute_script("return window.purgatoryFrames || 0") > 0)
    wait_for("the brokers panel", lambda: text_of(browser, '[data-broker="1"]') is not None)
    assert "alive" in text_of(browser, '[data-broker="1"]')
    assert "leader 1, epoch 0" in text_of(browser, '.partition[data-tp="demo-0"]')

    click_broker(browser, 1, "kill")
    wait_for("broker 1 dead", lambda: not alive(cluster, 1))
    wait_for("the page to show it dead", lambda: "dead" in (text_of(browser, '[data-broker="1"]') or ""))
    wait_for("the page to show the election",
             lambda: "leader 2, epoch 1" in (text_of(browser, '.partition[data-tp="demo-0"]') or ""))
    assert "election" in text_of(browser, "#status")
    wait_for("the election among the replication events",
             lambda: "election: leader 1 → 2, leader epoch 1, ISR [2, 3]" in (text_of(browser, "#events") or ""))
    assert "broker 1 (dead)" in text_of(browser, '[data-replica-logs="demo-0"]')
    shot(browser, "cluster-broker-1-killed.png")

    click_broker(browser, 1, "restart")
    wait_for("broker 1 back", lambda: alive(cluster, 1))
    wait_for("broker 1 back in the ISR", lambda: sorted(cluster.partition("demo")["isr"]) == [1, 2, 3])
    wait_for("the page to show it following at epoch 1",
             lambda: "broker 1: follower epoch 1, LEO 20" in (text_of(browser, '[data-replica-logs="demo-0"]') or ""))

    # *shut down* is the controlled shutdown: broker 2, which leads demo-0 now, hands it
    # back to broker 1 first.
    click_broker(browser, 2, "shut down")
    wait_for("broker 2 shut down", lambda: not alive(cluster, 2))
    wait_for("leadership moved back to broker 1",
             lambda: "leader 1, epoch 2" in (text_of(browser, '.partition[data-tp="demo-0"]') or ""))
    click_broker(browser, 2, "restart")
    wait_for("broker 2 back in the ISR", lambda: sorted(cluster.partition("demo")["isr"]) == [1, 2, 3])

    click_broker(browser, 3, "pause fetchers")
    wait_for("broker 3's fetchers paused",
             lambda: all(f["state"] == "paused" for f in cluster.state()["followers"] if f["replica_id"] == 3))
    click_broker(browser, 3, "resume fetchers")
    wait_for("broker 3's fetchers running",
             lambda: all(f["state"] == "running" for f in cluster.state()["followers"] if f["replica_id"] == 3))
    shot(browser, "cluster-restarted.png")


def test_the_page_plays_the_leader_killed_scenario(cluster, browser):  # noqa: F811
    browser.get(cluster.admin + "/")
    wait_for("the page's first frame", lambda: browser.execute_script("return window.purgatoryFrames || 0") > 0)
    wait_for("the cluster's scenarios in the list", lambda: browser.execute_script(
        "return [...document.querySelectorAll('#scenario-select option')].map((o) => o.value)") == ["leader-killed"])
    incarnation = next(b["incarnation"] for b in cluster.get("/api/brokers") if b["id"] == 1)
    browser.execute_script("document.getElementById('scenario-run').click()")
    wait_for("the status line to list the steps", lambda: "@5,000 broker 1 kill" in (text_of(browser, "#status") or ""))
    # The steps run at their times: the followers pause, broker 1 dies at 5 s and is back at 8 s.
    wait_for("broker 1 killed by the scenario", lambda: not alive(cluster, 1), timeout=30)
    wait_for("broker 1 restarted by the scenario", lambda: next(
        (b["alive"], b["incarnation"]) for b in cluster.get("/api/brokers") if b["id"] == 1) == (True, incarnation + 1),
        timeout=30)
    wait_for("every fetcher running again", lambda: all(
        f["state"] == "running" for f in cluster.state()["followers"]), timeout=30)
    shot(browser, "cluster-scenario-played.png")
