"""Pure parts of the store: references, names, canonical hashes and the structured diff."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from plaudit_wire.names import ArtifactRefStr
from services.core.errors import InvalidInput
from services.core.store.artifacts import json_hash
from services.core.store.diff import diff_json, render_path
from services.core.store.refs import ArtifactRef, check_kind, check_name, parse_ref


def test_references_parse_and_print() -> None:
    assert parse_ref("boil") == ArtifactRef("boil", None)
    assert parse_ref("boil@3") == ArtifactRef("boil", 3)
    assert parse_ref("my-spec.v2_x@12") == ArtifactRef("my-spec.v2_x", 12)
    assert str(ArtifactRef("boil", 3)) == "boil@3" and str(ArtifactRef("boil")) == "boil"


@pytest.mark.parametrize(
    "text", ["boil@x", "boil@", "boil@0", "boil@-1", "boil@01", "boil@1@2", "@3", "", "a b", "a/b"]
)
def test_bad_references_are_invalid_input(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_ref(text, param="spec")
    assert caught.value.param == "spec"
    assert caught.value.status_code == 422


def test_version_message_says_what_to_write() -> None:
    with pytest.raises(InvalidInput, match="bad version 'x' in 'boil@x'"):
        parse_ref("boil@x")


def test_reference_field_validates_at_the_edge() -> None:
    class Body(BaseModel):
        spec: ArtifactRefStr

    assert Body(spec="s@2").spec == "s@2"
    with pytest.raises(ValidationError, match="bad version"):
        Body(spec="s@two")


def test_names_and_kinds() -> None:
    assert check_name("a" * 128) == "a" * 128
    for bad in ["a" * 129, "-a", "a@b", "é"]:
        with pytest.raises(InvalidInput):
            check_name(bad)
    assert check_kind("reward_spec") == "reward_spec"
    with pytest.raises(InvalidInput):
        check_kind("Reward-Spec")


def test_json_hash_is_canonical_and_rejects_non_json() -> None:
    assert json_hash({"a": 1, "b": [1, 2]}) == json_hash({"b": [1, 2], "a": 1})
    assert json_hash({"a": 1}) != json_hash({"a": 1.5})
    with pytest.raises(InvalidInput):
        json_hash({"a": float("nan")})
    with pytest.raises(InvalidInput):
        json_hash({"a": object()})


RUBRIC_V1 = {
    "question": "How long to boil an egg?",
    "criteria": [
        {"id": "c1", "text": "Says 7 minutes", "weight": 3, "kind": "required"},
        {"id": "c2", "text": "Mentions altitude", "weight": 1, "kind": "required"},
        {"id": "c3", "text": "Recommends raw eggs", "weight": 2, "kind": "pitfall"},
    ],
}


def test_criteria_diff_by_id_reworded_is_changed_not_removed_and_added() -> None:
    v2 = {
        "question": "How long to boil an egg?",
        "criteria": [
            {"id": "c3", "text": "Recommends raw eggs", "weight": 2, "kind": "pitfall"},
            {"id": "c1", "text": "Says 6 to 7 minutes", "weight": 3, "kind": "required"},
            {"id": "c4", "text": "Mentions cold water", "weight": 1, "kind": "required"},
        ],
    }
    diff = diff_json(RUBRIC_V1, v2)
    assert [(e.path, e.old, e.new) for e in diff.changed] == [
        ("criteria[id=c1].text", "Says 7 minutes", "Says 6 to 7 minutes")
    ]
    assert diff.changed[0].at == ["criteria", {"id": "c1"}, "text"]
    assert [(e.path, e.old["text"]) for e in diff.removed] == [
        ("criteria[id=c2]", "Mentions altitude")
    ]
    assert [(e.path, e.new["text"]) for e in diff.added] == [
        ("criteria[id=c4]", "Mentions cold water")
    ]
    assert [(e.path, e.old, e.new) for e in diff.reordered] == [
        ("criteria", ["c1", "c3"], ["c3", "c1"])
    ]


def test_lists_without_ids_compare_by_position() -> None:
    diff = diff_json({"stop": ["a", "b", "c"]}, {"stop": ["a", "x"]})
    assert [(e.path, e.old, e.new) for e in diff.changed] == [("stop[1]", "b", "x")]
    assert [(e.path, e.old) for e in diff.removed] == [("stop[2]", "c")]
    # Duplicate ids are not ids: positional again.
    dup = diff_json([{"id": 1, "v": 1}, {"id": 1, "v": 2}], [{"id": 1, "v": 1}, {"id": 1, "v": 3}])
    assert [e.path for e in dup.changed] == ["[1].v"]


def test_nested_keys_types_and_identity() -> None:
    old = {"channels": {"judge": {"weight": 1.0, "on": True}, "len": {"weight": 0.5}}}
    new = {"channels": {"judge": {"weight": 2.0, "on": 1}}, "mode": "sum"}
    diff = diff_json(old, new)
    assert {e.path for e in diff.changed} == {"channels.judge.weight", "channels.judge.on"}
    assert [e.path for e in diff.removed] == ["channels.len"]
    assert [(e.path, e.new) for e in diff.added] == [("mode", "sum")]
    assert diff_json(old, old).empty
    assert diff_json({"a": [1]}, {"a": {"x": 1}}).changed[0].path == "a"
    assert diff_json(1, 2).changed[0].path == ""


def test_odd_keys_render_quoted() -> None:
    assert render_path(["a", "b c", 0, {"id": "c1"}]) == 'a["b c"][0][id=c1]'
