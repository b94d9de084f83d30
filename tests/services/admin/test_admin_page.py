"""The admin page at ``/admin`` in a real headless Chromium against a real ``plaudit serve all``
(embedded set-up, API keys on): the memory is filled through the API a trainer would use, then a
person logs in, reads the run's plot, steps, rubric diff and search, and rolls a rubric back;
the rollback is then checked through the API (issue 12). A held revision is approved with its
button, and the API shows it applied."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from services.core.db.tables import utcnow
from services.memory.models import MemoryRevision
from services.memory.repository import new_id
from tests.services.core.jobs.conftest import IDLE_JUDGE
from tests.serving import serving

pytestmark = pytest.mark.slow

ADMIN, TRAINER = "admin-key-for-the-page", "trainer-key-for-the-page"
RUN = "run-admin-page"
CRITERIA = [
    {"text": "States the boiling point of water at sea level (100 C)", "weight": 3},
    {"text": "Mentions that altitude lowers the boiling point", "weight": 2},
    {"text": "Claims water boils at 50 C at sea level", "weight": 2, "kind": "pitfall"},
]


@pytest.fixture(scope="module")
def admin_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the served app keeps its data (``data/plaudit.db``: the embedded SQLite)."""
    return tmp_path_factory.mktemp("admin-page")


@pytest.fixture(scope="module")
def admin_url(admin_root: Path) -> Iterator[str]:
    root = admin_root
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")}
    env.update(
        IDLE_JUDGE,
        OMP_NUM_THREADS="1",
        PLAUDIT_DATA_DIR=str(root / "data"),
        PLAUDIT_LOG_LEVEL="WARNING",
        PLAUDIT_API_KEYS=json.dumps({ADMIN: ["admin"], TRAINER: ["reward"]}),
        PLAUDIT_MEMORY_REVISE_EVERY="1000",  # no revision job: this test is about the page
    )
    with serving("all", root, env, within=300) as url:
        yield url


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


@pytest.fixture(scope="module")
def filled(admin_url: str) -> dict[str, Any]:
    """A rubric with two versions and three steps of a run in the memory (ingested as a
    trainer that scores elsewhere would send them)."""
    with _client(admin_url, TRAINER) as trainer, _client(admin_url, ADMIN) as admin:
        created = trainer.post("/v1/rubrics", json={"name": "boiling", "criteria": CRITERIA})
        assert created.status_code == 201, created.text
        rubric = created.json()
        edited = [dict(c) for c in rubric["criteria"]]
        edited[1]["text"] = "Explains that at altitude water boils below 100 C"
        edited.append({"text": "Gives the answer in one or two sentences", "weight": 1})
        update = {"name": "boiling", "criteria": edited, "note": "reworded c2, added c4"}
        second = trainer.put(f"/v1/rubrics/{rubric['id']}", json=update)
        assert second.status_code == 200 and second.json()["version"] == 2, second.text
        for step, rate in ((1, 0.25), (2, 0.5), (3, 0.9)):
            groups = [
                {
                    "prompt": "At what temperature does water boil?",
                    "completions": [f"Water boils at 100 C (try {step}.{i})." for i in range(4)],
                    "rewards": [rate, rate / 2, rate, 1 - rate],
                    "verdicts": [
                        {"c1": rate, "c2": 1 - rate, "c3": 0.05, "c4": 0.5} for _ in range(4)
                    ],
                }
            ]
            body = {"rubric_id": f"{rubric['id']}@2", "groups": groups, "close": True}
            sent = trainer.post(f"/v1/memory/runs/{RUN}/steps/{step}", json=body)
            assert sent.status_code == 202, sent.text
        while admin.get(f"/v1/memory/runs/{RUN}/steps").json().get("total", 0) < 3:
            time.sleep(0.25)
        return {"rubric": rubric}


#: Screenshots of the page for a person to review (issue 21), beside the other test output.
SHOTS = Path(os.environ.get("PLAUDIT_TEST_OUTPUT", Path(__file__).parents[3] / "test-output"))


def _shot(browser: webdriver.Chrome, name: str) -> None:
    folder = SHOTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    browser.set_window_size(1400, 2200)
    assert browser.save_screenshot(str(folder / f"admin-{name}.png"))
    browser.set_window_size(1280, 900)


def _wait(browser: webdriver.Chrome, css: str, *, visible: bool = True) -> Any:
    condition = ec.visibility_of_element_located if visible else ec.presence_of_element_located
    return WebDriverWait(browser, 60).until(condition((By.CSS_SELECTOR, css)))


def test_the_page_asks_for_an_admin_key_and_refuses_others(
    browser: webdriver.Chrome, admin_url: str, filled: dict[str, Any]
) -> None:
    browser.get(f"{admin_url}/admin")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{admin_url}/admin")
    _wait(browser, "#key").send_keys(TRAINER)
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
    WebDriverWait(browser, 60).until(
        lambda b: "admin scope" in b.find_element(By.ID, "login-error").text
    )
    assert not browser.find_element(By.ID, "app").is_displayed()


def test_an_admin_browses_the_run_and_rolls_the_rubric_back(
    browser: webdriver.Chrome, admin_url: str, filled: dict[str, Any]
) -> None:
    rubric_id = filled["rubric"]["id"]
    browser.get(f"{admin_url}/admin")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{admin_url}/admin")
    _wait(browser, "#key").send_keys(ADMIN)
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()

    # the run, its rubric and the plot: the reward mean and one line per criterion
    _wait(browser, f"#runs a[data-run='{RUN}']")
    _wait(browser, "#plot svg")
    series = {
        line.get_attribute("data-series")
        for line in browser.find_elements(By.CSS_SELECTOR, "#plot polyline.series")
    }
    assert {"reward mean", "c1 pass rate", "c2 pass rate"} <= series, series
    # lines that coincide stay visible: each criterion's line has its own dash pattern
    dashes = [
        line.get_attribute("stroke-dasharray")
        for line in browser.find_elements(By.CSS_SELECTOR, "#plot polyline.series")
    ]
    assert len(set(dashes)) == len(dashes), dashes
    # the rubric's name beside its id, and who is signed in (the key's owner id, not the key)
    WebDriverWait(browser, 60).until(
        lambda b: b.find_element(By.ID, "run-rubric").text == f"boiling ({rubric_id})"
    )
    assert browser.find_element(By.ID, "rubric-name").text == "boiling"
    who = browser.find_element(By.ID, "who").text
    assert who.startswith("signed in as key_") and "admin" in who and ADMIN not in who
    assert browser.find_element(By.ID, "run-paused").text == "active"

    # three steps, newest first; one opens with its summary
    rows = browser.find_elements(By.CSS_SELECTOR, "#steps tbody tr")
    assert [r.get_attribute("data-step") for r in rows] == ["3", "2", "1"]
    rows[0].click()
    _wait(browser, "#step")
    assert browser.find_element(By.ID, "step-number").text == "3"
    assert browser.find_element(By.ID, "step-summary").text.strip()

    # the rubric's history and the diff from version 1 to 2
    _wait(browser, "#versions tbody tr[data-version='2']")
    diff = browser.find_element(By.ID, "diff").text
    assert "+ c4" in diff and "Gives the answer in one or two sentences" in diff
    assert "~ c2" in diff and "Explains that at altitude" in diff

    # search answers static and dynamic hits
    browser.find_element(By.ID, "search-text").send_keys("boiling point at altitude")
    browser.find_element(By.CSS_SELECTOR, "#search-form button").click()
    _wait(browser, "#search-results")
    assert browser.find_elements(By.CSS_SELECTOR, "#search-static li, #search-dynamic li")

    # roll back to version 1 with the button, accept the confirmation
    browser.find_element(By.CSS_SELECTOR, "button.rollback[data-version='1']").click()
    WebDriverWait(browser, 10).until(ec.alert_is_present())
    browser.switch_to.alert.accept()
    WebDriverWait(browser, 60).until(
        lambda b: "Rolled back" in b.find_element(By.ID, "rollback-done").text
    )
    assert browser.find_element(By.ID, "rubric-current").text == "1"
    # the rollback shows in the versions (as a note on v1) and among the revisions
    note = browser.find_element(By.CSS_SELECTOR, "#versions tr[data-version='1'] .rollback-note")
    assert "rolled back from v2" in note.text and "admin page" in note.text
    row = _wait(browser, "#revisions tr[data-state='rolled_back']")
    assert "v2 → v1" in row.text and "rolled back by an admin" in row.text
    _shot(browser, "after-rollback")

    # the API agrees, and the rollback is recorded in the memory
    with _client(admin_url, ADMIN) as admin:
        current = admin.get(f"/v1/rubrics/{rubric_id}").json()
        assert current["current_version"] == 1 and current["version"] == 1
        records = admin.get(
            "/v1/memory/records", params={"kind": "rubric_update", "run_id": RUN}
        ).json()["items"]
        rollbacks = [r for r in records if r["data"].get("operation") == "rollback"]
        assert rollbacks, records


def _hold_a_revision(database: Path, rubric: dict[str, Any]) -> str:
    """A held revision, written into the served app's database as the oscillation guard leaves
    one (the served editor is an idle judge that proposes nothing): c2 weighed one more."""
    c2 = next(c for c in rubric["criteria"] if c["id"] == "c2")
    operation = {
        "op": "reweight",
        "id": "c2",
        "text": "",
        "weight": c2["weight"] + 1,
        "kind": "required",
        "accepted": True,
        "reason": None,
        "before": {"text": c2["text"], "weight": c2["weight"]},
    }
    now = utcnow()
    revision_id = new_id("rv")
    row = MemoryRevision(
        id=revision_id,
        run_id=RUN,
        rubric_id=rubric["id"],
        step=3,
        state="held",
        from_version=rubric["version"],
        operations=[operation],
        rationale="c2 separates the groups: weigh it more",
        evidence=[],
        reason="undoes a recent edit: moves c2's weight back (written by the test)",
        detail={},
        created_at=now,
        updated_at=now,
    )
    engine = create_engine(f"sqlite:///{database}")
    try:
        with Session(engine) as session, session.begin():
            session.add(row)
    finally:
        engine.dispose()
    return revision_id


def test_an_admin_approves_a_held_revision(
    browser: webdriver.Chrome, admin_url: str, admin_root: Path, filled: dict[str, Any]
) -> None:
    rubric_id = filled["rubric"]["id"]
    with _client(admin_url, ADMIN) as admin:
        rubric = admin.get(f"/v1/rubrics/{rubric_id}").json()
    revision_id = _hold_a_revision(admin_root / "data" / "plaudit.db", rubric)

    browser.get(f"{admin_url}/admin")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{admin_url}/admin")
    _wait(browser, "#key").send_keys(ADMIN)
    browser.find_element(By.CSS_SELECTOR, "#key-form button").click()
    row = _wait(browser, f"#revisions tr[data-revision='{revision_id}']")
    assert "held for your decision" in row.text
    assert row.find_elements(By.CSS_SELECTOR, "button.dismiss")
    # what the admin decides on: the operation with the criterion's text and the weight change,
    # the analyst's reason, why the guard held it, and the evidence step
    c2 = next(c for c in rubric["criteria"] if c["id"] == "c2")
    operation = row.find_element(By.CSS_SELECTOR, "ul.ops li").text
    assert "reweight c2" in operation and c2["text"] in operation, operation
    assert f"weight {c2['weight']:g} → {c2['weight'] + 1:g}" in operation, operation
    assert "Analyst: c2 separates the groups" in row.text
    assert "moves c2's weight back" in row.text and "Evidence: step 3" in row.text
    _shot(browser, "held-revision")
    row.find_element(By.CSS_SELECTOR, "button.approve").click()
    WebDriverWait(browser, 10).until(ec.alert_is_present())
    assert "moves c2's weight back" in browser.switch_to.alert.text
    browser.switch_to.alert.accept()
    WebDriverWait(browser, 60).until(
        lambda b: "Approved" in b.find_element(By.ID, "revision-done").text
    )
    row = _wait(browser, f"#revisions tr[data-revision='{revision_id}']")
    assert "applied" in row.text and not row.find_elements(By.CSS_SELECTOR, "button")
    new_version = rubric["latest_version"] + 1
    assert browser.find_element(By.ID, "rubric-current").text == str(new_version)
    _shot(browser, "approved")

    # the API agrees: the revision applied, a new current version, the record of who approved
    with _client(admin_url, ADMIN) as admin:
        revisions = admin.get(f"/v1/memory/runs/{RUN}/revisions").json()["items"]
        [approved] = [r for r in revisions if r["id"] == revision_id]
        assert approved["state"] == "applied", approved
        assert (approved["from_version"], approved["to_version"]) == (
            rubric["version"],
            new_version,
        )
        assert approved["detail"]["approved"]["by"]
        current = admin.get(f"/v1/rubrics/{rubric_id}").json()
        assert (current["version"], current["current_version"]) == (new_version, new_version)
        weights = {c["id"]: c["weight"] for c in current["criteria"]}
        assert weights["c2"] == next(c["weight"] for c in rubric["criteria"] if c["id"] == "c2") + 1
        records = admin.get(
            "/v1/memory/records", params={"kind": "rubric_update", "run_id": RUN}
        ).json()["items"]
        [record] = [r for r in records if r["data"].get("revision_id") == revision_id]
        assert record["data"]["to_version"] == new_version
        assert record["data"]["approved"]["by"] == approved["detail"]["approved"]["by"]


def test_the_landing_page_links_the_admin_page_and_the_icon_is_served(admin_url: str) -> None:
    landing = httpx.get(f"{admin_url}/")
    assert 'href="/admin"' in landing.text
    icon = httpx.get(f"{admin_url}/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.text.startswith("<svg")
