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
from tests.test_engine import procs, publisher  # noqa: F401  (procs is a fixture)

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
    assert re.search(rf"partitions \d+/{len(targets)} done, [1-9]\d* in flight", dom), dom[:3000]
    assert 'class="bar"><div style="width:' in dom
    # recent events: the engine's last 50, whichever kinds they are at this moment (observations, steps ...)
    events = re.search(r'<table id="events">.*?<tbody>(.*?)</tbody>', dom, re.S).group(1)
    assert re.search(r"<tr><td>\d\d:\d\d:\d\d</td><td>(Step|Partition|Throttle|Request)[A-Za-z]+</td>", events), events[:2000]
    assert re.search(r'<div id="summary"[^>]*>worker <code>[^<]+</code> · <span class="ok">running</span>', dom)

    shot = tmp_path / "status.png"
    chromium(tmp_path, "--window-size=1200,900", f"--screenshot={shot}", worker.web + "/")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 900)
    colours = image.getcolors(maxcolors=1 << 20)
    assert len(colours) > 20  # text, bars, tables: not a blank page
    background = max(colours)[0] / (1200 * 900)
    assert background < 0.97  # something is drawn on a good part of the page
