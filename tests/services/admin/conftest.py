"""A real headless Chromium (Debian's chromium + chromium-driver) driven by Selenium.

``.ci/run`` installs both; outside CI a machine without them skips these tests, under CI=true
they fail instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from tests.conftest import IN_CI
from tests.serving import serving

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        message = "Debian's chromium and chromium-driver are not installed"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="session")
def ordinal_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``plaudit serve ordinal`` (no models: quick to start) on a free loopback port."""
    root = tmp_path_factory.mktemp("browser-serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(PLAUDIT_DATA_DIR=str(root / "data"), PLAUDIT_LOG_LEVEL="WARNING")
    with serving("ordinal", root, env, within=120) as url:
        yield url
