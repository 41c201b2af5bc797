"""The engine's status page in a real headless browser (Debian's chromium).

The page is static HTML that fetches ``/status`` and draws the requests: the
test runs an engine on the demo's simulated cluster, submits the demo's request, lets chromium load
the page (its virtual-time budget lets the page's script run), and checks
both the DOM it rendered and a screenshot.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from engine.cli.demo import DEFAULT_SCENARIO as DEMO_SCENARIO

from engine.sim.scenario import load as load_scenario
from tests.engine_harness import SimCluster, Worker, wait_for
from tests.test_engine import procs, publisher, scenario_doc  # noqa: F401  (procs is a fixture)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium); .ci/run installs it"
)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=4000"]


def chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    profile = tmp_path / f"chromium-{len(list(tmp_path.iterdir()))}"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=60)


def card(dom: str, rid: str) -> tuple[str, str]:
    """A request's card on the page: (its data-outcome, its HTML up to the next card or section)."""
    m = re.search(rf'<div class="card request" data-request="{re.escape(rid)}" data-outcome="([^"]+)">', dom)
    assert m, dom[:3000]
    rest = dom[m.end():]
    return m.group(1), re.split(r'<div class="card request"|<h2>', rest, maxsplit=1)[0]


def test_status_page_renders_the_running_request(broker, topics, tmp_path, procs):  # noqa: F811
    from PIL import Image

    prefix = topics.events[: -len("events")]
    demo = yaml.safe_load(DEMO_SCENARIO.read_text())  # the demo's cluster and request, slowed down
    sim = SimCluster(demo, speed=2, tmp_path=tmp_path)
    procs.append(sim)
    worker = Worker(broker, prefix, f"sim+{sim.url}")
    procs.append(worker)
    worker.wait_active()
    targets = list(load_scenario(str(sim.scenario_path)).targets)
    with publisher(broker, topics) as p:
        rid = p.submit(targets)
    wait_for(lambda: worker.active() and worker.active()["in_flight"] and worker.active(), 60, "steps in flight")

    dom = chromium(tmp_path, "--dump-dom", worker.web + "/").stdout
    assert f'data-request="{rid}"' in dom, dom[:2000]
    outcome, body = card(dom, rid)
    assert outcome == "running"
    assert re.search(r'<span class="count">[1-9]\d*</span> in flight', body), body
    assert f"(of {len(targets)})" in body and '<div class="seg-in_flight" style="width:' in body
    # the sim-cluster runs at 2x: rates are labelled in cluster time
    assert "its clock runs <b>2x</b> the wall clock" in dom
    # recent events: the engine's last 50, whichever kinds they are at this moment (observations, steps ...)
    events = re.search(r'<table id="events">.*?<tbody>(.*?)</tbody>', dom, re.S).group(1)
    assert re.search(r"<tr><td>\d\d:\d\d:\d\d</td><td>(Step|Partition|Request)[A-Za-z]+</td>", events), events[:2000]
    assert "<td>Throttles" not in events and "Observed</td>" not in events  # left out: they flood the list
    assert re.search(r'<div id="summary"[^>]*>worker <code>[^<]+</code> · <span class="ok">running</span>', dom)

    shot = tmp_path / "status.png"
    chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", worker.web + "/")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 900)
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 20  # text, bars, tables: not a blank page
    background = max(colours)[0] / (1200 * 900)
    assert background < 0.97  # something is drawn on a good part of the page


def test_a_request_rolled_back_entirely_shows_rolled_back_and_a_rejection_stays_in_view(
    broker, topics, tmp_path, procs,  # noqa: F811
):
    from PIL import Image

    from engine.core import events as ev
    from engine.sim import scenario as S
    from tests.engine_harness import EventTail

    prefix = topics.events[: -len("events")]
    doc = scenario_doc(40, brokers=5, size="300 MB")
    sim = SimCluster(doc, speed=5, tmp_path=tmp_path)
    procs.append(sim)
    worker = Worker(broker, prefix, f"sim+{sim.url}")
    procs.append(worker)
    worker.wait_active()
    targets = tuple(S.from_document(doc).targets)
    tail = EventTail(broker, topics.events)
    with publisher(broker, topics) as p:
        rid = p.submit(targets)
        wait_for(lambda: tail.payloads(ev.StepCompleted), 60, "a first step completed")  # something to copy back
        p.cancel(rid, rollback=True, include_completed=True)  # the completed partitions go back too
        p.cancel("no-such-request")
    wait_for(lambda: any(isinstance(e, ev.RequestCompleted) for e in tail.payloads()), 120, "the rollback to end")
    ended = [e for e in tail.payloads(ev.RequestCompleted)][0]
    tail.close()
    assert (ended.completed, ended.reverted) == (0, len(targets))
    wait_for(lambda: (worker.active() or {}).get("attention"), 30, "the rejection on /status")

    dom = chromium(tmp_path, "--dump-dom", worker.web + "/").stdout
    outcome, body = card(dom, rid)
    assert outcome == "rolled back"  # not "completed"
    assert '<span class="outcome warn">rolled back</span>' in body
    assert '<span class="count">0</span> completed' in body
    assert f'<span class="count">{len(targets)}</span> rolled back' in body
    assert '<div class="seg-rolled_back" style="width:100.00%"' in body and '<div class="seg-completed"' not in body
    attention = re.search(r'<div id="attention"[^>]*>(.*?)</div>\s*<h2>', dom, re.S).group(1)
    assert "cancel of request no-such-request rejected: unknown request 'no-such-request'" in attention
    assert 'class="entry error" data-kind="rejected"' in attention
    in_flight = re.search(r'<table id="in-flight">.*?</table>', dom, re.S).group(0)
    assert 'class="muted">none: no step is copying or waiting for the cluster</td>' in in_flight  # not a bare header

    shot = tmp_path / "rolled-back.png"
    chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", worker.web + "/")
    image = Image.open(shot).convert("RGB")
    amber = sum(n for n, rgb in image.getcolors(maxcolors=1 << 20) if rgb == (0xD0, 0x8A, 0x00))
    assert amber > 1000  # the rolled-back bar is drawn, in its colour
