"""The web pages in a real browser (Debian's chromium, headless, driven by selenium through its
chromedriver): a person signs in with a tenant's token, sees that tenant's jobs and not another's,
opens a job and sees its staged pipeline and timeline; a screenshot of the job page is taken and
its text checked. Skipped, saying why, where chromium or its driver is not installed."""
from __future__ import annotations

import shutil
import subprocess
import sys
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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    work = tmp_path_factory.mktemp("browser")
    root = work / "data"
    root.mkdir()
    (root / "t.jsonl").write_text("".join(f'{{"a": {i}}}\n' for i in range(1000)))
    tokens = work / "tokens.yaml"
    exe = str(Path(sys.executable).with_name("jumpgate"))
    token = {t: subprocess.run([exe, "tokens", "add", "--file", str(tokens), "--tenant", t], capture_output=True,
                               text=True, check=True).stdout.strip() for t in ("acme", "globex")}
    srv = LocalServer(root, work / "cache", work / "server.log", extra_args=["--tokens", str(tokens)])
    jobs = {}
    try:
        for tenant in ("acme", "globex"):
            with Jumpgate(srv.url, token=token[tenant]) as jg:
                jg.run({"name": f"{tenant}-report", "operations": [
                    read_op("r", "t.jsonl", SCHEMA),
                    {"kind": "filter", "name": "f", "input": "r", "condition": "a > 500"},
                    {"kind": "send", "name": "out", "input": "f", "transport": "tcp", "host": "127.0.0.1",
                     "port": 0}]}, timeout=120)
                jobs[tenant] = jg.last_job.job_id
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


def click_and_wait(browser, by: str, what: str, until) -> None:
    """Click what leads to another page and wait until `until(browser)` holds on it (reading the
    page right after the click can still find the old one, or one half replaced)."""
    browser.find_element(by, what).click()
    WebDriverWait(browser, 15, ignored_exceptions=(StaleElementReferenceException, WebDriverException)).until(until)


def body_has(text: str):
    return lambda b: text in b.find_element(By.TAG_NAME, "body").text


def test_sign_in_see_only_the_tenants_jobs_and_open_one(site, browser):
    srv, token, jobs, work = site
    browser.get(srv.url + "/ui/jobs")
    assert browser.current_url.endswith("/ui/login"), browser.current_url  # asked to sign in
    browser.find_element(By.NAME, "token").send_keys("jg_000000000000_" + "0" * 64)
    click_and_wait(browser, By.CSS_SELECTOR, "button[type=submit]", body_has("not known"))

    browser.find_element(By.NAME, "token").send_keys(token["acme"])
    click_and_wait(browser, By.CSS_SELECTOR, "button[type=submit]", body_has("signed in as tenant acme"))
    assert browser.current_url.endswith("/ui/jobs"), browser.current_url
    text = browser.find_element(By.TAG_NAME, "body").text
    assert "signed in as tenant acme" in text and jobs["acme"] in text and "acme-report" in text
    assert jobs["globex"] not in text and "globex-report" not in text
    assert browser.execute_script("return document.cookie") == ""  # HttpOnly: no script reads the token

    click_and_wait(browser, By.LINK_TEXT, jobs["acme"], body_has("Staged networked pipeline"))
    page = browser.find_element(By.TAG_NAME, "body").text
    for expected in ("read", "filter", "stage 0", "succeeded", "software.scan_json"):
        assert expected in page, (expected, page[:2000])
    shot = work / "job-page.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    browser.get(f"{srv.url}/ui/jobs/{jobs['globex']}")  # another tenant's job does not exist for acme
    assert "no job" in browser.find_element(By.TAG_NAME, "body").text
    browser.get(srv.url + "/ui/logout")
    assert browser.current_url.endswith("/ui/login")
