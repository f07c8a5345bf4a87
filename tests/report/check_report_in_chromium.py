#!/usr/bin/python3
"""Loads a `dseek report` page in Debian's headless Chromium (through chromedriver's
WebDriver HTTP API: no Selenium needed) and checks it: no message of level SEVERE on the
console (a script error, a failed load), a screenshot is written, and the values the page
plots (the data-x/data-y attributes of its series, the data-value of its five measures'
cards) equal the events of the run in events.jsonl.

    check_report_in_chromium.py REPORT.html RUN_DIR SCREENSHOT.png

Exits 0 when every check passes; otherwise prints what differs and exits 1.
"""
import base64
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPORT, RUN_DIR, SCREENSHOT = (pathlib.Path(a).resolve() for a in sys.argv[1:4])
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as reply:
        return json.loads(reply.read())["value"]


def events(node_dir):
    lines = (node_dir / "events.jsonl").read_text().splitlines()
    return [json.loads(l) for l in lines if l.strip()]


def expected_series():
    """(chart, node, field) -> (xs, ys) as the report must plot them."""
    out = {}
    for node_dir in sorted(RUN_DIR.glob("node-*")):
        node = int(node_dir.name[5:])
        evs = events(node_dir)
        steps = [e for e in evs if e["event"] == "step"]
        for chart, field in [("loss", "loss"), ("tokens_per_s", "tokens_per_s_per_node"),
                             ("mfu", "mfu"), ("comm_share", "comm_share")]:
            points = [(e["step"], e[field]) for e in steps if field in e]
            if points:
                out[(chart, node, field)] = ([p[0] for p in points], [p[1] for p in points])
        evals = [(e["step"], e["val_loss"]) for e in evs if e["event"] == "eval"]
        if evals:
            out[("loss", node, "val_loss")] = ([p[0] for p in evals], [p[1] for p in evals])
    return out


def parse(values):
    return [None if v == "null" else float(v) for v in values.split(" ")] if values else []


driver_port = free_port()
profile = tempfile.mkdtemp(prefix="dseek-chromium-")
driver = subprocess.Popen([shutil.which("chromedriver") or "/usr/bin/chromedriver",
                           f"--port={driver_port}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
session = None
try:
    deadline = time.monotonic() + 30
    while True:
        try:
            if request(driver_port, "GET", "/status", timeout=5)["ready"]:
                break
        except OSError:
            pass
        if time.monotonic() > deadline or driver.poll() is not None:
            sys.exit("chromedriver did not become ready in 30 s")
        time.sleep(0.2)
    capabilities = {"capabilities": {"alwaysMatch": {
        "browserName": "chrome",
        "goog:loggingPrefs": {"browser": "ALL"},
        "goog:chromeOptions": {
            "binary": "/usr/lib/chromium/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,2400", f"--user-data-dir={profile}",
                     # No network: a page that tried to fetch anything would log an error.
                     "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]}}}}
    session = request(driver_port, "POST", "/session", capabilities)["sessionId"]
    base = f"/session/{session}"
    request(driver_port, "POST", base + "/url", {"url": REPORT.as_uri()})
    script = lambda body: request(driver_port, "POST", base + "/execute/sync", {"script": body, "args": []})
    check(script("return document.readyState") == "complete", "the page did not finish loading")

    # Move the pointer over a chart so that its script runs, then read the console.
    plot = request(driver_port, "POST", base + "/element",
                   {"using": "css selector", "value": "svg.plot"})
    element = list(plot.values())[0]
    request(driver_port, "POST", base + "/actions", {"actions": [{
        "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"},
        "actions": [{"type": "pointerMove", "origin": {"element-6066-11e4-a52e-4f735466cecf": element},
                     "x": 10, "y": 10, "duration": 0}]}]})
    readout = script("return document.querySelector('#loss .readout').textContent")
    check(readout.startswith("loss node"), f"the pointer readout did not run: {readout!r}")
    logs = request(driver_port, "POST", base + "/se/log", {"type": "browser"})
    severe = [entry["message"] for entry in logs if entry["level"] == "SEVERE"]
    check(not severe, f"console errors: {severe}")

    # The plotted values.
    plotted = script("""return Array.from(document.querySelectorAll('polyline.series')).map(function (p) {
        return {chart: p.closest('svg').dataset.chart, node: p.dataset.node, field: p.dataset.field,
                x: p.dataset.x, y: p.dataset.y}; });""")
    got = {(p["chart"], int(p["node"]), p["field"]): (parse(p["x"]), parse(p["y"])) for p in plotted}
    want = expected_series()
    check(set(got) == set(want), f"series plotted {sorted(got)} != series in the events {sorted(want)}")
    for key in want:
        if key in got:
            check(got[key][0] == want[key][0], f"{key}: x differs")
            check(got[key][1] == want[key][1], f"{key}: y differs: {got[key][1][:5]} vs {want[key][1][:5]}")
    check(any(k[0] == "loss" and k[2] == "loss" for k in want), "no loss series to compare")

    # The five measures' cards against the events (medians over every node's steps).
    cards = script("""return Array.from(document.querySelectorAll('.measure')).map(function (m) {
        return [m.dataset.measure, m.dataset.value]; });""")
    cards = dict(cards)
    all_steps = [e for d in sorted(RUN_DIR.glob("node-*")) for e in events(d) if e["event"] == "step"]
    for measure in ["mfu", "comm_share"]:
        values = [e[measure] for e in all_steps if e.get(measure) is not None]
        check(values and abs(float(cards[measure]) - statistics.median(values)) <= 1e-12 * abs(statistics.median(values)),
              f"card {measure} {cards.get(measure)} != median of the events")
    fractions = [e["memory_fraction"] for e in all_steps if "memory_fraction" in e]
    check(fractions and float(cards["memory_fraction"]) == max(fractions), "memory card != the largest fraction")
    check(set(cards) == {"mfu", "comm_share", "memory_fraction", "final_loss", "scaling_efficiency"},
          f"cards: {sorted(cards)}")
    timeline = script("return document.querySelectorAll('#timeline circle.event').length")
    check(timeline > 0, "the timeline has no event")

    shot = request(driver_port, "GET", base + "/screenshot")
    SCREENSHOT.write_bytes(base64.b64decode(shot))
    check(SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
    print(f"screenshot: {SCREENSHOT} ({SCREENSHOT.stat().st_size} bytes); "
          f"{len(got)} series, {timeline} timeline events compared")
finally:
    if session is not None:
        try:
            request(driver_port, "DELETE", f"/session/{session}", timeout=30)
        except OSError:
            pass
    driver.terminate()
    try:
        driver.wait(timeout=10)
    except subprocess.TimeoutExpired:
        driver.kill()
        driver.wait()
    shutil.rmtree(profile, ignore_errors=True)

for failure in failures:
    print("FAIL:", failure)
sys.exit(1 if failures else 0)
