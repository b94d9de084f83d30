"""The landing page and the API docs render in a real browser with no network but loopback."""

from __future__ import annotations

import httpx
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

import services


def _wait_for(browser: webdriver.Chrome, css: str) -> list[object]:
    WebDriverWait(browser, 60).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))
    return list(browser.find_elements(By.CSS_SELECTOR, css))


def test_swagger_ui_renders_the_operations_offline(
    browser: webdriver.Chrome, ordinal_url: str
) -> None:
    browser.get(f"{ordinal_url}/docs")
    operations = _wait_for(browser, ".swagger-ui .opblock")
    assert len(operations) >= 3  # the ordinal routes, runs, health
    assert "/v1/ordinal/advantages" in browser.page_source
    # Every asset came from this server: no CDN was needed.
    html = httpx.get(f"{ordinal_url}/docs").text
    assert "cdn" not in html.lower() and "/static/docs/swagger-ui-bundle.js" in html


def test_redoc_renders_offline(browser: webdriver.Chrome, ordinal_url: str) -> None:
    browser.get(f"{ordinal_url}/redoc")
    _wait_for(browser, "h1")
    WebDriverWait(browser, 60).until(lambda b: "/v1/ordinal/advantages" in b.page_source)


def test_landing_page_says_what_serves(browser: webdriver.Chrome, ordinal_url: str) -> None:
    browser.get(ordinal_url)
    rows = {
        row.find_element(By.TAG_NAME, "th").text: row.find_element(By.TAG_NAME, "td").text
        for row in browser.find_elements(By.CSS_SELECTOR, "#about tr")
    }
    assert rows["version"] == services.__version__
    assert "ordinal" in rows["services"]
    # An ordinal server asks no judge, so the page names none (its component adds no lines).
    assert "judge backend" not in rows
    links = [a.get_attribute("href") for a in browser.find_elements(By.TAG_NAME, "a")]
    assert f"{ordinal_url}/docs" in links and f"{ordinal_url}/redoc" in links
