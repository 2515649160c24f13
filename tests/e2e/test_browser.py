"""The web pages in a real browser (Debian's chromium, headless, driven by selenium through its
chromedriver): a person signs in with a tenant's token, sees that tenant's jobs and not another's,
opens a job and sees its staged pipeline as a graph (a box per NCA, an arrow per edge with its
streams), what each operation asks, the implementations not chosen folded away, and its timeline;
the jobs list with times, durations, rows and pages, dry runs hidden until asked for; and the page
of a running job, held by a client that has not accepted its connection yet, updating itself until
the job has succeeded. Screenshots are taken (under pytest's temporary directory) and checked to be
PNGs. Skipped, saying why, where chromium or its driver is not installed."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

from .helpers import read_op

pytestmark = pytest.mark.e2e

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
if not (CHROMIUM and DRIVER):
    pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh installs them)",
                allow_module_level=True)

from selenium.common.exceptions import StaleElementReferenceException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SCHEMA = [{"name": "a", "type": "int64"}]
T_SCHEMA = [{"name": "a", "type": "int64"}, {"name": "k", "type": "int64"}, {"name": "s", "type": "string"}]
U_SCHEMA = [{"name": "bk", "type": "int64"}, {"name": "name", "type": "string"}]
BIG_ROWS = 6000  # of ~2 KB: far more than a connection nobody accepts takes into its buffers
BIG_SCHEMA = [{"name": "a", "type": "int32"}, {"name": "s", "type": "string"}]
DRY_RUNS = 3


def send(input: str, port: int = 0) -> dict:
    return {"kind": "send", "name": "out", "input": input, "transport": "tcp", "host": "127.0.0.1", "port": port}


def join_request() -> dict:
    """Two stages (the join's build, then its probe), four NCAs, four edges; expressions in a
    filter, the join's keys and condition, and the aggregation."""
    return {"name": "acme-join", "operations": [
        read_op("r", "t.jsonl", T_SCHEMA),
        {"kind": "filter", "name": "f", "input": "r", "condition": "a > 500 AND s <> 'x1'"},
        read_op("u", "u.jsonl", U_SCHEMA),
        {"kind": "join", "name": "j", "probe": "f", "build": "u", "type": "inner", "probe_keys": ["k"],
         "build_keys": ["bk"], "condition": "a > 0"},
        {"kind": "aggregate", "name": "g", "input": "j", "mode": "complete", "group_by": [{"name": "k", "expr": "k"}],
         "aggregates": [{"name": "n", "fn": "count_star"}, {"name": "sa", "fn": "sum", "expr": "a * 2"}]},
        send("g")]}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("browser")
    root = work / "data"
    root.mkdir()
    (root / "t.jsonl").write_text("".join(f'{{"a": {i}, "k": {i % 7}, "s": "x{i % 3}"}}\n' for i in range(1000)))
    (root / "u.jsonl").write_text("".join(f'{{"bk": {i % 7}, "name": "n{i}"}}\n' for i in range(50)))
    (root / "big.jsonl").write_text("".join(f'{{"a": {i}, "s": "{"x" * 2000}"}}\n' for i in range(BIG_ROWS)))
    tokens = work / "tokens.yaml"
    exe = str(Path(sys.executable).with_name("jumpgate"))
    token = {t: subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", t], capture_output=True,
                               text=True, check=True).stdout.strip() for t in ("acme", "globex")}
    srv = LocalServer(root, work / "cache", work / "server.log", extra_args=["--tokens", str(tokens)])
    jobs: dict = {"dry": []}
    try:
        for tenant in ("acme", "globex"):
            with Jumpgate(srv.url, token=token[tenant]) as jg:
                jg.run({"name": f"{tenant}-report", "operations": [
                    read_op("r", "t.jsonl", SCHEMA),
                    {"kind": "filter", "name": "f", "input": "r", "condition": "a > 500"}, send("f")]}, timeout=120)
                jobs[tenant] = jg.last_job.job_id
        with Jumpgate(srv.url, token=token["acme"]) as jg:
            jobs["join_rows"] = jg.run(join_request(), timeout=120)["out"].num_rows
            jobs["join"], jobs["join_answer"] = jg.last_job.job_id, jg.last_job.answer
            for _ in range(DRY_RUNS - 1):  # as the Python client's explain() does
                jobs["dry"].append(jg.explain({**join_request(), "name": "validate"}).job_id)
            dry = jg.submit({**join_request(), "name": "validate",  # as Spark's planner validates a candidate
                             "operations": join_request()["operations"][:-1] + [send("g", 9)]})
            dry.cancel()
            jobs["dry"].append(dry.job_id)
        yield srv, token, jobs, work
    finally:
        srv.stop()


@pytest.fixture
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=DRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def waiter(browser, seconds: float = 15) -> WebDriverWait:
    return WebDriverWait(browser, seconds, ignored_exceptions=(StaleElementReferenceException, WebDriverException))


def click_and_wait(browser, by: str, what: str, until) -> None:
    """Click what leads to another page and wait until `until(browser)` holds on it (reading the
    page right after the click can still find the old one, or one half replaced)."""
    browser.find_element(by, what).click()
    waiter(browser).until(until)


def body_has(text: str):
    return lambda b: text in b.find_element(By.TAG_NAME, "body").text


def body(browser) -> str:
    return browser.find_element(By.TAG_NAME, "body").text


def sign_in(browser, url: str, token: str) -> None:
    browser.get(url + "/ui/login")
    browser.find_element(By.NAME, "token").send_keys(token)
    click_and_wait(browser, By.CSS_SELECTOR, "button[type=submit]", body_has("signed in as tenant"))


def screenshot(browser, path: Path) -> None:
    assert browser.save_screenshot(str(path)), path
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, (path, len(data))


def test_sign_in_see_only_the_tenants_jobs_and_open_one(site, browser):
    srv, token, jobs, work = site
    browser.get(srv.url + "/ui/jobs")
    assert browser.current_url.endswith("/ui/login"), browser.current_url  # asked to sign in
    browser.find_element(By.NAME, "token").send_keys("jg_000000000000_" + "0" * 64)
    click_and_wait(browser, By.CSS_SELECTOR, "button[type=submit]", body_has("not known"))

    browser.find_element(By.NAME, "token").send_keys(token["acme"])
    click_and_wait(browser, By.CSS_SELECTOR, "button[type=submit]", body_has("signed in as tenant acme"))
    assert browser.current_url.endswith("/ui/jobs"), browser.current_url
    text = body(browser)
    assert "signed in as tenant acme" in text and jobs["acme"] in text and "acme-report" in text
    assert jobs["globex"] not in text and "globex-report" not in text
    assert browser.execute_script("return document.cookie") == ""  # HttpOnly: no script reads the token

    click_and_wait(browser, By.LINK_TEXT, jobs["acme"], body_has("Staged networked pipeline"))
    page = body(browser)
    for expected in ("read", "filter", "stage 0", "succeeded", "software.scan_json", "a > 500", "499 rows to clients"):
        assert expected in page, (expected, page[:2000])
    screenshot(browser, work / "job-page.png")

    browser.get(f"{srv.url}/ui/jobs/{jobs['globex']}")  # another tenant's job does not exist for acme
    assert "no job" in body(browser)
    browser.get(srv.url + "/ui/logout")
    assert browser.current_url.endswith("/ui/login")


def expected_stream_labels(answer: dict) -> dict[tuple[str, str, str], str]:
    """(from, to as drawn, edge) -> the stream label the graph must show, from the compile answer."""
    into: dict[tuple, int] = {}
    for e in answer["edges"]:
        key = (e["to"], e["to_port"], e["client"])
        into[key] = into.get(key, 0) + e["streams"]
    out = {}
    for e in answer["edges"]:
        n, first, total = e["streams"], e["first_stream"], into[(e["to"], e["to_port"], e["client"])]
        label = f"{n} stream" + ("" if n == 1 else "s")
        if total != n:
            ids = f"id {first}" if n == 1 else f"ids {first}–{first + n - 1}"
            label = f"{n} of {total} streams ({ids})"
        out[(e["from"], ("client:" if e["client"] else "") + e["to"], e["edge"])] = label
    return out


def test_the_pipeline_is_drawn_as_a_graph_and_each_operation_says_what_it_asks(site, browser):
    srv, token, jobs, work = site
    answer = jobs["join_answer"]
    assert len(answer["stages"]) == 2 and len(answer["ncas"]) == 4 and len(answer["edges"]) == 4, answer
    sign_in(browser, srv.url, token["acme"])
    browser.get(f"{srv.url}/ui/jobs/{jobs['join']}")
    svg = browser.find_element(By.CSS_SELECTOR, "svg.pipeline")
    assert svg.is_displayed()

    # one box per NCA, with its implementation, host and threads; one band per stage, and the clients'
    boxes = {g.get_attribute("data-id"): g for g in svg.find_elements(By.CSS_SELECTOR, "g.node.nca, g.node.converter")}
    assert set(boxes) == {n["id"] for n in answer["ncas"]}
    for n in answer["ncas"]:
        text = boxes[n["id"]].text
        assert n["implementation"] in text and f"on {n['host']}" in text and "thread" in text, text
    bands = [b.text for b in svg.find_elements(By.CSS_SELECTOR, "g.band")]
    assert bands == ["stage 0", "stage 1", "clients"], bands
    assert [c.get_attribute("data-send") for c in svg.find_elements(By.CSS_SELECTOR, "g.node.client")] == ["out"]
    rects = [g.find_element(By.TAG_NAME, "rect").rect for g in svg.find_elements(By.CSS_SELECTOR, "g.node")]
    for i, a in enumerate(rects):  # no box covers another
        for b in rects[i + 1:]:
            assert (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                    or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"]), (a, b)

    # one arrow per edge, labelled with its streams as the compile answer has them
    want = expected_stream_labels(answer)
    arrows = svg.find_elements(By.CSS_SELECTOR, "g.edge")
    assert len(arrows) == len(answer["edges"])
    got = {}
    for g in arrows:
        assert g.find_element(By.CSS_SELECTOR, "path.arrow").get_attribute("marker-end") == "url(#arrowhead)"
        label = [t.text for t in g.find_elements(By.TAG_NAME, "tspan")]
        got[(g.get_attribute("data-from"), g.get_attribute("data-to"), g.get_attribute("data-edge"))] = label[-1]
        assert label[1].startswith("ntf/tcp"), label
    assert got == want
    page = body(browser)
    assert "0..0" not in page and "g: k, n, sa" in page

    # each operation: the implementation chosen, what it asks, the others folded away
    ops = browser.find_element(By.ID, "operations")
    for text in ("a > 500 AND s <> 'x1'", "k = bk", "a > 0", "count(*) AS n", "sum(a * 2) AS sa", "json: t.jsonl",
                 "software.hash_join", "software.aggregate"):
        assert text in ops.text, (text, ops.text)
    folded = ops.find_elements(By.CSS_SELECTOR, "details.rejected")
    assert len(folded) == len(answer["decisions"]) - 1  # every operation but the send
    first = folded[0]
    assert first.get_attribute("open") is None
    verdict = first.find_element(By.CSS_SELECTOR, ".verdict")
    assert not verdict.is_displayed() and "✗" not in ops.text  # rejected ones are not in view...
    screenshot(browser, work / "pipeline-graph.png")
    first.find_element(By.TAG_NAME, "summary").click()
    waiter(browser, 5).until(lambda b: verdict.is_displayed())  # ...until asked for
    assert "✗" in verdict.text
    screenshot(browser, work / "pipeline-verdict-open.png")


def job_rows(browser) -> list[dict]:
    head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#jobs tr th")]
    rows = []
    for tr in browser.find_elements(By.CSS_SELECTOR, "#jobs tr.job"):
        rows.append(dict(zip(head, (td.text for td in tr.find_elements(By.TAG_NAME, "td")))))
    return rows


def test_the_jobs_list_has_times_rows_pages_and_hides_dry_runs(site, browser):
    srv, token, jobs, work = site
    sign_in(browser, srv.url, token["acme"])
    browser.get(srv.url + "/ui/jobs")
    head = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#jobs tr th")]
    assert head == ["job", "name", "tenant", "state", "submitted", "duration", "rows", "NCAs", "stages"]
    rows = {r["job"]: r for r in job_rows(browser)}
    assert not set(jobs["dry"]) & set(rows)  # hidden by default...
    assert rows[jobs["join"]]["rows"] == str(jobs["join_rows"]) and rows[jobs["acme"]]["rows"] == "499"
    for job in (jobs["join"], jobs["acme"]):
        assert rows[job]["state"] == "succeeded" and rows[job]["duration"].endswith(" s"), rows[job]
        assert rows[job]["submitted"].endswith(" UTC")
    assert f"not counting {DRY_RUNS} dry runs" in body(browser)
    screenshot(browser, work / "jobs-list.png")

    click_and_wait(browser, By.ID, "show-dry", lambda b: b.find_elements(By.ID, "hide-dry"))  # ...until asked for
    assert "dry=1" in browser.current_url
    listed = job_rows(browser)
    dry = {r["job"]: r for r in listed if r["job"] in jobs["dry"]}
    assert set(dry) == set(jobs["dry"])
    assert all(r["state"] == "cancelled dry run" and r["rows"] == "" for r in dry.values()), dry
    every = [r["job"] for r in listed]

    # pages of two, newest first, across every page once
    browser.get(srv.url + "/ui/jobs?per=2&dry=1")
    seen, pages = [], 0
    while True:
        here = [r["job"] for r in job_rows(browser)]
        pages += 1
        assert 1 <= len(here) <= 2 and f"page {pages} of " in browser.find_element(By.ID, "pager").text
        seen += here
        older = browser.find_elements(By.ID, "older")
        if not older:
            break
        click_and_wait(browser, By.ID, "older", body_has(f"page {pages + 1} of "))
    assert seen == every and pages == -(-len(every) // 2)
    screenshot(browser, work / "jobs-list-last-page.png")
    click_and_wait(browser, By.ID, "newer", body_has(f"page {pages - 1} of "))
    browser.get(srv.url + "/ui/jobs?page=banana&per=-3")  # a hand-edited address is a page, not an error
    assert job_rows(browser)


def test_a_running_jobs_page_refreshes_itself_until_the_job_has_succeeded(site, browser):
    """The job's client listens but has not accepted yet: the NCA cannot send, and the job runs on
    (for up to 10 s; docs/nca-process-protocol.md). Its page, opened then, says `running` and
    refreshes itself; once the client accepts and reads, the same page says `succeeded` with the
    rows it got, without anyone loading it again."""
    srv, token, jobs, work = site
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # so that the NCA stalls soon
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(60)
    port = listener.getsockname()[1]
    received = []

    def client() -> None:  # accepts and reads everything, when told to
        conn, _ = listener.accept()
        with conn:
            while chunk := conn.recv(1 << 20):
                received.append(len(chunk))
    sign_in(browser, srv.url, token["acme"])
    try:
        with Jumpgate(srv.url, token=token["acme"]) as jg:
            job = jg.submit({"name": "held", "operations": [read_op("r", "big.jsonl", BIG_SCHEMA), send("r", port)]})
            job.execute()
            deadline = time.monotonic() + 120
            status = job.status()
            while "stage:0" not in status["timeline"]["phases"] and status["state"] == "running":
                assert time.monotonic() < deadline, status  # the NCA is built (first time) and started
                time.sleep(0.05)
                status = job.status()
            assert status["state"] == "running", status

            browser.get(f"{srv.url}/ui/jobs/{job.job_id}")
            assert browser.find_element(By.ID, "state").text == "running"
            assert browser.find_element(By.ID, "live").get_attribute("data-state") == "running"
            assert "refreshes itself" in body(browser)
            browser.execute_script("window.notReloaded = true;")  # gone when the page loads again
            if status.get("progress") is not None:  # live counters per NCA, where the status has them
                waiter(browser, 5).until(lambda b: b.find_elements(By.CSS_SELECTOR, '#progress tr[data-nca="nca0"]'))
            screenshot(browser, work / "running-job.png")

            reader = threading.Thread(target=client)
            reader.start()
            waiter(browser, 60).until(lambda b: b.find_element(By.ID, "state").text == "succeeded")
            reader.join(30)
            assert job.status(wait=30)["state"] == "succeeded"
    finally:
        listener.close()
    assert browser.execute_script("return window.notReloaded === undefined")  # it loaded itself again
    assert not browser.find_elements(By.ID, "progress") and "refreshes itself" not in body(browser)
    assert f"{BIG_ROWS:,} rows to clients" in body(browser) and sum(received) > BIG_ROWS * 2000
    screenshot(browser, work / "running-job-done.png")
