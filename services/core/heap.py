"""Keep Python's cyclic garbage collector off the objects a server builds once.

A Plaudit process holds about 670,000 tracked objects once it has started (FastAPI, pydantic,
SQLAlchemy, transformers and a tokenizer, the models), and each full collection walks all of
them: 0.5 to 0.7 s on two cores, every few seconds under load. Measured (issue 19) with
``bench/bench_overhead.py``'s pairwise route at 64 clients against the 50 ms stand-in judge:
5 full collections took 3.7 s of a 13 s phase, a quarter of the server's time.

:func:`freeze_startup_objects` moves every object alive at that moment into the permanent
generation (``gc.freeze``, Python 3.7+), which collections skip; objects made later are
collected as before. A cycle among frozen objects is never freed, so it is called once,
when start-up and model loading are done (``Resources.start_loading``), and what exists is
meant to live as long as the process. It does nothing until :func:`freeze_in_this_process`
is called: ``plaudit serve`` and its worker processes call it, while tests and embedding
programs build and drop many apps in one process, whose objects must stay collectable.

It also makes the collector run less often (:data:`SERVING_THRESHOLDS`). Requests in flight
hold thousands of young objects each (a G=8 group: 56 prompts, a reply of about 1,700 listed
tokens), and Python's default thresholds (700, 10, 10) collected them again and again while
they were still in use. Measured with ``bench/bench_overhead.py`` at 64 clients against the
50 ms stand-in judge, four alternating runs each way on two cores: a pairwise request's CPU
0.72 to 0.78 ms with the defaults, 0.66 to 0.69 with these; a G=8 group's 2.28 to 2.63 ms,
2.25 to 2.50 (BENCHMARKS.md, "Collector thresholds, rows, keys and listed tokens").
Cyclic garbage still goes: the youngest generation is collected every 10,000 net
allocations, the oldest every few million. Measured on Python 3.11 (the image's); from 3.14
the collector is incremental and reads its thresholds otherwise, so they are left at that
version's defaults there.
"""

from __future__ import annotations

import gc
import logging
import sys
import time

log = logging.getLogger(__name__)
_enabled = False
#: ``gc.set_threshold`` of a serving process once it has started (see above).
SERVING_THRESHOLDS = (10_000, 20, 20)


def freeze_in_this_process(enabled: bool = True) -> None:
    """Let :func:`freeze_startup_objects` freeze: this process serves until it exits."""
    global _enabled
    _enabled = enabled


def freeze_startup_objects(stage: str) -> int:
    """Collect what start-up left behind, freeze the survivors and set the serving
    thresholds; returns how many objects the permanent generation holds now (0, doing
    nothing, unless enabled)."""
    if not _enabled:
        return 0
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    if sys.version_info < (3, 14):  # 3.14's incremental collector reads them otherwise
        gc.set_threshold(*SERVING_THRESHOLDS)
    frozen = gc.get_freeze_count()
    log.debug(
        "%s: %d objects frozen out of garbage collection (%.0f ms)",
        stage,
        frozen,
        (time.perf_counter() - started) * 1000,
    )
    return frozen
