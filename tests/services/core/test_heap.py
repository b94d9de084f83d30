"""A served process freezes its start-up objects out of garbage collection (issue 19); other
processes (this test suite among them) keep every object collectable."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.app import create_app
from services.core.heap import (
    SERVING_THRESHOLDS,
    freeze_in_this_process,
    freeze_startup_objects,
)
from services.core.models.embedder import Embedder
from services.settings import Settings
from tests.judges.scripted_backend import ScriptedBackend


class _Node:
    """A reference cycle's member, so only the cyclic collector can free it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def serving() -> Iterator[None]:
    """This process behaves as ``plaudit serve`` does, and forgets it afterwards."""
    thresholds = gc.get_threshold()
    freeze_in_this_process()
    try:
        yield
    finally:
        freeze_in_this_process(False)
        gc.unfreeze()
        gc.set_threshold(*thresholds)


def test_nothing_is_frozen_unless_the_process_serves() -> None:
    before, thresholds = gc.get_freeze_count(), gc.get_threshold()
    assert freeze_startup_objects("test") == 0
    assert gc.get_freeze_count() == before
    assert gc.get_threshold() == thresholds


@pytest.mark.usefixtures("serving")
def test_a_serving_process_still_frees_cycles_with_no_explicit_collection() -> None:
    """The raised thresholds (fewer collections while requests hold many young objects)
    still let the collector run on its own."""
    freeze_startup_objects("test")
    if sys.version_info < (3, 14):  # left at the incremental collector's defaults there
        assert gc.get_threshold() == SERVING_THRESHOLDS
    cycle = _Node()
    cycle_ref = weakref.ref(cycle)
    del cycle
    held = []
    for _ in range(3 * SERVING_THRESHOLDS[0]):
        held.append([])  # net allocations, as requests in flight make them
        if cycle_ref() is None:
            break
    assert cycle_ref() is None


@pytest.mark.usefixtures("serving")
def test_objects_alive_at_the_freeze_stay_and_later_ones_are_collected() -> None:
    old = _Node()
    assert freeze_startup_objects("test") > 0
    old_ref = weakref.ref(old)
    del old
    new = _Node()
    new_ref = weakref.ref(new)
    del new
    gc.collect()
    assert new_ref() is None  # made after the freeze: an ordinary cycle, freed
    assert old_ref() is not None  # frozen: the collector never looks at it


@pytest.mark.usefixtures("serving")
async def test_a_served_app_freezes_once_started(tmp_path: Path, embedder: Embedder) -> None:
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]
    app = create_app(settings, embedder=embedder, judge_backend=ScriptedBackend())
    gc.unfreeze()
    async with app.router.lifespan_context(app):
        await app.state.resources.loaded()
        assert gc.get_freeze_count() > 0
