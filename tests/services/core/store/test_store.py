"""The artifact store library on SQLite and on the real Postgres (the ``settings`` fixture)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from services.core.errors import Conflict, InvalidInput, NotFound
from services.core.store.artifacts import ArtifactStore

SPEC = {"channels": {"judge_scale": {"weight": 1.0}}}


def spec(weight: float) -> dict[str, Any]:
    return {"channels": {"judge_scale": {"weight": weight}}}


async def test_versions_are_numbered_hashed_and_chained(store: ArtifactStore) -> None:
    first = await store.put("s", "reward_spec", SPEC, owner="key_1", metadata={"why": "start"})
    assert first.created and first.version.version == 1 and first.version.parent_version is None
    second = await store.put("s", "reward_spec", spec(2.0), expected_version=1, owner="key_2")
    v2 = second.version
    assert (v2.version, v2.parent_version, v2.owner, v2.current) == (2, 1, "key_2", True)
    assert v2.content_hash != first.version.content_hash and v2.ref == "s@2"
    current = await store.get("s")
    assert current.version == 2 and current.content == spec(2.0)
    old = await store.get("s", 1)
    assert old.content == SPEC and old.metadata == {"why": "start"} and not old.current
    assert old.created_at.tzinfo is not None
    info = await store.info("s")
    assert (info.kind, info.current_version, info.latest_version, info.owner) == (
        "reward_spec",
        2,
        2,
        "key_1",
    )


async def test_identical_content_returns_the_current_version(store: ArtifactStore) -> None:
    await store.put("s", "reward_spec", SPEC)
    again = await store.put("s", "reward_spec", {"channels": {"judge_scale": {"weight": 1.0}}})
    assert not again.created and again.version.version == 1
    # Different metadata is a new version, so are new metrics on the same content.
    relabelled = await store.put("s", "reward_spec", SPEC, metadata={"note": "x"})
    assert relabelled.created and relabelled.version.version == 2
    assert (await store.info("s")).latest_version == 2


async def test_a_version_written_without_make_current_leaves_the_pointer(
    store: ArtifactStore,
) -> None:
    first = await store.put("m", "karma_model", SPEC, make_current=False)
    assert first.version.version == 1 and first.version.current, "a new name's v1 is current"
    second = await store.put("m", "karma_model", spec(2.0), make_current=False)
    assert (second.version.version, second.version.parent_version) == (2, 1)
    assert not second.version.current
    info = await store.info("m")
    assert (info.current_version, info.latest_version) == (1, 2)
    assert (await store.get("m")).version == 1
    moved = await store.promote("m", 2)
    assert moved.artifact.current_version == 2


async def test_stale_expected_version_is_a_conflict(store: ArtifactStore) -> None:
    await store.put("s", "reward_spec", SPEC, expected_version=0)
    with pytest.raises(Conflict) as caught:
        await store.put("s", "reward_spec", spec(3.0), expected_version=0)
    assert caught.value.status_code == 409 and caught.value.param == "expected_version"
    await store.put("s", "reward_spec", spec(2.0), expected_version=1)
    with pytest.raises(Conflict, match="at version 2, not 1"):
        await store.put("s", "reward_spec", spec(3.0), expected_version=1)
    with pytest.raises(Conflict, match="does not exist"):
        await store.put("new", "reward_spec", SPEC, expected_version=4)
    with pytest.raises(Conflict, match="is a reward_spec, not a rubric"):
        await store.put("s", "rubric", SPEC)
    assert (await store.info("s")).latest_version == 2


async def test_concurrent_writers_same_expected_version_exactly_one_wins(
    store: ArtifactStore,
) -> None:
    await store.put("s", "reward_spec", SPEC)
    writers = 8
    results = await asyncio.gather(
        *(
            store.put("s", "reward_spec", spec(10.0 + i), expected_version=1)
            for i in range(writers)
        ),
        return_exceptions=True,
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1 and won[0].version.version == 2
    assert len(lost) == writers - 1 and all(isinstance(e, Conflict) for e in lost)
    versions, total = await store.list_versions("s")
    assert total == 2 and [v.version for v in versions] == [2, 1]
    assert (await store.get("s")).content == won[0].version.content


@pytest.mark.parametrize("expected", [1, None])
async def test_a_forced_race_has_one_winner_per_number(
    store: ArtifactStore,
    lockstep: Callable[[int], None],
    cas_rowcounts: list[int],
    expected: int | None,
) -> None:
    await store.put("s", "reward_spec", SPEC)
    lockstep(5)
    results = await asyncio.gather(
        *(
            store.put("s", "reward_spec", spec(10.0 + i), expected_version=expected)
            for i in range(5)
        ),
        return_exceptions=True,
    )
    saved = [r for r in results if not isinstance(r, BaseException)]
    if expected is None:  # everyone retries onto the next free number
        assert sorted(r.version.version for r in saved) == [2, 3, 4, 5, 6]
    else:
        assert [r.version.version for r in saved] == [2]
        assert sum(isinstance(r, Conflict) for r in results) == 4
    # The losers were stopped by the compare-and-set itself, not only by the unique index.
    assert cas_rowcounts.count(0) >= 4 and cas_rowcounts.count(1) == len(saved)


async def test_concurrent_writers_without_expectation_get_distinct_numbers(
    store: ArtifactStore,
) -> None:
    results = await asyncio.gather(
        *(store.put("s", "reward_spec", spec(float(i))) for i in range(8))
    )
    numbers = sorted(r.version.version for r in results)
    assert numbers == list(range(1, 9)) and all(r.created for r in results)
    versions, total = await store.list_versions("s", limit=100)
    assert total == 8 and len(versions) == 8
    # Every version's parent is the version current when it was written: a chain.
    parents = {v.version: v.parent_version for v in versions}
    assert parents[1] is None and all(parents[n] == n - 1 for n in range(2, 9))
    history, events = await store.history("s")
    assert events == 8 and {e.action for e in history} == {"create"}


async def test_identical_concurrent_writes_make_one_version(store: ArtifactStore) -> None:
    results = await asyncio.gather(*(store.put("s", "reward_spec", SPEC) for _ in range(6)))
    assert sum(r.created for r in results) == 1
    assert {r.version.version for r in results} == {1}


async def test_rollback_and_promote_are_recorded_and_history_is_kept(store: ArtifactStore) -> None:
    for weight in (1.0, 2.0, 3.0):
        await store.put("s", "reward_spec", spec(weight), owner="key_w")
    moved = await store.rollback("s", 1, owner="key_admin", note="v3 hacked the judge")
    assert moved.artifact.current_version == 1 and moved.artifact.latest_version == 3
    assert moved.event is not None
    assert (moved.event.action, moved.event.from_version, moved.event.to_version) == (
        "rollback",
        3,
        1,
    )
    assert (await store.get("s")).content == spec(1.0)
    # The versions are all still there, unchanged.
    assert (await store.get("s", 3)).content == spec(3.0)
    # A write after a rollback builds on the rolled-back version.
    after = await store.put("s", "reward_spec", spec(4.0), expected_version=1)
    assert (after.version.version, after.version.parent_version) == (4, 1)
    promoted = await store.promote("s", 3, owner="key_admin")
    assert promoted.event is not None and promoted.event.action == "promote"
    assert (await store.promote("s", 3)).event is None  # already current: nothing recorded
    history, total = await store.history("s")
    assert total == 6
    assert [(e.action, e.from_version, e.to_version) for e in history] == [
        ("promote", 4, 3),
        ("create", 1, 4),
        ("rollback", 3, 1),
        ("create", 2, 3),
        ("create", 1, 2),
        ("create", None, 1),
    ]
    assert history[3].owner == "key_w" and history[2].note == "v3 hacked the judge"
    page, _ = await store.history("s", limit=2, offset=1)
    assert [e.action for e in page] == ["create", "rollback"]


async def test_bad_moves(store: ArtifactStore) -> None:
    await store.put("s", "reward_spec", SPEC)
    await store.put("s", "reward_spec", spec(2.0))
    await store.rollback("s", 1)
    with pytest.raises(InvalidInput, match="a rollback goes back"):
        await store.rollback("s", 2)
    with pytest.raises(NotFound):
        await store.rollback("s", 9)
    with pytest.raises(NotFound):
        await store.promote("nobody", 1)
    with pytest.raises(Conflict):
        await store.promote("s", 2, expected_version=2)


async def test_concurrent_rollbacks_with_one_expected_version(store: ArtifactStore) -> None:
    for weight in (1.0, 2.0, 3.0):
        await store.put("s", "reward_spec", spec(weight))
    results = await asyncio.gather(
        store.rollback("s", 1, expected_version=3),
        store.rollback("s", 2, expected_version=3),
        return_exceptions=True,
    )
    assert sum(isinstance(r, Conflict) for r in results) == 1
    _, total = await store.history("s")
    assert total == 4


async def test_unknown_names_and_versions(store: ArtifactStore) -> None:
    with pytest.raises(NotFound, match="no artifact named 'nope'"):
        await store.get("nope")
    await store.put("s", "reward_spec", SPEC)
    with pytest.raises(NotFound, match="has no version 5"):
        await store.get("s", 5)
    with pytest.raises(NotFound):
        await store.get_ref("s@5")
    with pytest.raises(InvalidInput):
        await store.get_ref("s@five")
    with pytest.raises(NotFound):
        await store.list_versions("nope")
    with pytest.raises(NotFound):
        await store.history("nope")


async def test_resolve_is_422_for_request_references(store: ArtifactStore) -> None:
    await store.put("s", "reward_spec", SPEC)
    await store.put("s", "reward_spec", spec(2.0))
    assert (await store.resolve("s@1", "reward_spec", param="spec")).content == SPEC
    assert (await store.resolve("s", "reward_spec")).version == 2
    for ref, message in [("s@9", "no version 9"), ("t", "unknown"), ("s@x", "bad version")]:
        with pytest.raises(InvalidInput, match=message) as caught:
            await store.resolve(ref, "reward_spec", param="spec")
        assert caught.value.param == "spec"
    with pytest.raises(InvalidInput, match="is a reward_spec, not a rubric"):
        await store.resolve("s", "rubric", param="rubric_id")


async def test_listing_pages_and_kind_filter(store: ArtifactStore) -> None:
    for name in ("b", "a", "c"):
        await store.put(name, "rubric", {"criteria": []})
    await store.put("spec-1", "reward_spec", SPEC)
    items, total = await store.list_artifacts()
    assert total == 4 and [i.name for i in items] == ["a", "b", "c", "spec-1"]
    page, total = await store.list_artifacts(kind="rubric", limit=2, offset=1)
    assert total == 3 and [i.name for i in page] == ["b", "c"]
    assert await store.list_artifacts(kind="karma_model") == ([], 0)


async def test_diff_between_versions(store: ArtifactStore) -> None:
    base = {"criteria": [{"id": "c1", "text": "Says 7 minutes", "weight": 3}]}
    reworded = {"criteria": [{"id": "c1", "text": "Says 6 to 7 minutes", "weight": 3}]}
    await store.put("boil", "rubric", base, metadata={"source": "hand"})
    await store.put("boil", "rubric", reworded, metadata={"source": "memory"})
    diff = await store.diff("boil")  # current against its parent
    assert (diff.from_version, diff.to_version, diff.identical) == (1, 2, False)
    assert [c.path for c in diff.changed] == ["criteria[id=c1].text"]
    assert not diff.added and not diff.removed
    assert [c.path for c in diff.metadata.changed] == ["source"]
    back = await store.diff("boil", 2, 1)
    assert back.changed[0].old == "Says 6 to 7 minutes"
    first = await store.diff("boil", to_version=1)
    assert first.from_version is None and [a.path for a in first.added] == ["criteria"]
    assert (await store.diff("boil", 1, 1)).identical
    with pytest.raises(NotFound):
        await store.diff("boil", 1, 7)


async def test_content_must_be_plain_json(store: ArtifactStore) -> None:
    with pytest.raises(InvalidInput, match="content is not plain JSON"):
        await store.put("s", "reward_spec", {"w": float("inf")})
    with pytest.raises(InvalidInput):
        await store.put("bad name", "reward_spec", SPEC)
    with pytest.raises(InvalidInput):
        await store.put("s", "Bad Kind", SPEC)
    with pytest.raises(InvalidInput, match="at most 500"):
        await store.put("s", "reward_spec", SPEC, note="x" * 501)
    with pytest.raises(NotFound):
        await store.info("s")
