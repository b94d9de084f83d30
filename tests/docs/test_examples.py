"""Every command example in README.md and docs/ runs against a live embedded server (issue 21).

The server is the real ``plaudit serve all`` on the embedded default (SQLite, in-process jobs,
the bundled SmolLM2 judge and MiniLM embedder) with a fixed fence secret, so that a grade shown
as a value is the grade a reader gets. Examples run in page order, each page in one shell
environment: a variable an example exports (a rubric id) is there for the next one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.docs.examples import Example, compare, examples, http_problems, json_values
from tests.serving import serving

ROOT = Path(__file__).resolve().parents[2]


def _pages() -> list[Path]:
    """README, then the site's pages in its nav order (a later page may use what an earlier one
    made, as a reader going through the site would), then any page the nav leaves out."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    in_nav: list[Path] = []

    def walk(entries: Any) -> None:
        for entry in entries:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                if isinstance(value, list):
                    walk(value)
                elif (ROOT / "docs" / value).is_file():
                    in_nav.append(ROOT / "docs" / value)

    walk(config["nav"])
    rest = [page for page in sorted((ROOT / "docs").rglob("*.md")) if page not in in_nav]
    return [ROOT / "README.md", *in_nav, *rest]


PAGES = _pages()
ALL = [example for page in PAGES for example in examples(page, ROOT)]
RUNNABLE = [example for example in ALL if example.skip is None]

pytestmark = pytest.mark.slow


_SHARED: dict[str, str] = {}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("examples")
    _SHARED.update(PLAUDIT_DATA_DIR=str(root / "data"))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PLAUDIT_")},
        **_SHARED,
        "PLAUDIT_JUDGE_FENCE_SECRET": "docs-examples",
        "PLAUDIT_MEMORY_REVISE_EVERY": "2",
    }
    with serving("all", root, env, within=600) as url:
        yield url, root


def test_every_example_runs_or_says_why_not() -> None:
    assert RUNNABLE, "no runnable example found"
    unexplained = [example.name for example in ALL if example.skip == "no reason given"]
    assert not unexplained, f"skipped without a reason: {unexplained}"


@pytest.mark.parametrize("example", RUNNABLE, ids=lambda example: example.name)
def test_example(example: Example, live: tuple[str, Path]) -> None:
    url, root = live
    port = url.rsplit(":", 1)[1]
    script = example.script.replace("localhost:8000", f"127.0.0.1:{port}").replace(
        "127.0.0.1:8000", f"127.0.0.1:{port}"
    )
    if example.language == "python":
        script = f"python - <<'PLAUDIT_EXAMPLE'\n{script}\nPLAUDIT_EXAMPLE"
    stdout = _run(script, example.page, root)
    if example.output_kind == "json" and example.output is not None:
        shown, actual = json_values(example.output), json_values(stdout)
        assert len(actual) >= len(shown), f"printed {len(actual)} JSON values:\n{stdout}"
        problems = [
            problem
            for shown_value, actual_value in zip(shown, actual[-len(shown) :], strict=True)
            for problem in compare(shown_value, actual_value, example.compare_values)
        ]
        assert not problems, f"{example.name} prints otherwise than shown: {problems}\n{stdout}"
    elif example.output_kind == "http" and example.output is not None:
        head = stdout.replace("\r\n", "\n").split("\n\n", 1)[0]
        problems = http_problems(example.output, head)
        assert not problems, f"{example.name}: {problems}\n{stdout}"


def _run(script: str, page: str, root: Path) -> str:
    """Runs ``script`` in bash in the page's environment (kept in a file between examples)."""
    state = root / (page.replace("/", "_") + ".env")
    state.touch()
    wrapped = (
        f"set -eo pipefail\nsource {state}\ncd {root}\n{script}\n"
        f"export -p | grep -v -E ' (BASHOPTS|BASH_VERSINFO|EUID|PPID|SHELLOPTS|UID)=' > {state}\n"
    )
    bin_dir = str(Path(sys.executable).parent)
    # The commands share the server's data folder, as on one machine: a dataset that an example
    # fetches with `plaudit data fetch` is there for the server's jobs.
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **_SHARED}
    done = subprocess.run(
        ["bash", "-c", wrapped], capture_output=True, text=True, env=env, cwd=root, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout
