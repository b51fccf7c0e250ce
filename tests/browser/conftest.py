"""Headless Chromium (Debian's chromium and chromium-driver, driven by selenium) that can reach
127.0.0.1 only: every other host name fails to resolve and every other address goes to a
proxy that does not exist. Its network log shows what a page asked for.

The tests skip, saying why, where no browser is installed (`.ci/run` installs one when it
can). Selenium's calls block: tests run them in a thread (``asyncio.to_thread``) so that the
server, on the test's event loop, keeps answering.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.conftest import ROOT

# Screenshots of every run (git-ignored); UPDATE_SCREENSHOTS=1 also refreshes docs/screenshots/.
ARTIFACTS = ROOT / "test-artifacts" / "browser"
DOC_SCREENSHOTS = ROOT / "docs" / "screenshots"
WINDOW = (1440, 900)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
LOCAL_SCHEMES = frozenset({"data", "blob", "about"})


def browser_paths() -> tuple[str, str] | str:
    """(chromium, chromedriver), or why they cannot be used."""
    browser = next((found for name in BROWSERS if (found := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    if browser is None or driver is None:
        return "no chromium/chromedriver on PATH (apt-get install chromium chromium-driver)"
    return browser, driver


def offline_options(binary: str) -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--hide-scrollbars",
        # the network: 127.0.0.1 and nothing else
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=127.0.0.1",
        # and none of Chromium's own traffic
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-sync",
        "--no-first-run",
        "--no-pings",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    return options


@pytest.fixture(scope="package")  # quit when the browser tests are done, not at the session's end
def chrome() -> Iterator[WebDriver]:
    found = browser_paths()
    if isinstance(found, str):
        print(f"SKIPPED: {found}")
        pytest.skip(found)
    binary, driver_path = found
    try:
        driver = webdriver.Chrome(service=Service(driver_path), options=offline_options(binary))
    except WebDriverException as exc:
        reason = f"chromium does not start here: {exc.msg}"
        print(f"SKIPPED: {reason}")
        pytest.skip(reason)
    driver.set_script_timeout(30)  # a hang guard, not a bound
    yield driver
    driver.quit()


@pytest.fixture
def browser(chrome: WebDriver) -> Iterator[WebDriver]:
    """The shared browser on a blank page, its logs emptied; left on a blank page, so that
    no stream of the page keeps the server from shutting down."""
    chrome.get("about:blank")
    chrome.get_log("performance")
    chrome.get_log("browser")
    yield chrome
    chrome.get("about:blank")


def requests_sent(driver: WebDriver) -> list[dict[str, Any]]:
    """Every request (and WebSocket) the pages made since the last call: {url, method, body}."""
    sent = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            request = params["request"]
            sent.append(
                {
                    "url": request["url"],
                    "method": request["method"],
                    "body": request.get("postData"),
                }
            )
        elif message["method"] == "Network.webSocketCreated":
            sent.append({"url": params["url"], "method": "WEBSOCKET", "body": None})
    return sent


def not_local(requests: list[dict[str, Any]]) -> list[str]:
    """The URLs among these that went anywhere but 127.0.0.1."""
    return [
        r["url"]
        for r in requests
        if urlsplit(r["url"]).scheme not in LOCAL_SCHEMES
        and urlsplit(r["url"]).hostname != "127.0.0.1"
    ]


def console_errors(driver: WebDriver, expected: str | None = None) -> list[str]:
    """The page's errors (a blocked load, a script error, a refused CSP) but ``expected``."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and not (expected and expected in e["message"])
    ]


def save_screenshot(driver: WebDriver, name: str, full_page: bool = False) -> Path:
    """A PNG of the page (the whole page, or the window) in test-artifacts/, and in
    docs/screenshots/ with UPDATE_SCREENSHOTS=1."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    width, height = WINDOW
    if full_page:
        height = driver.execute_script("return document.documentElement.scrollHeight")
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        DOC_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOC_SCREENSHOTS / f"{name}.png")
    return path
