"""Write the small dataset samples shipped in ``services/datasets/samples`` (issue 21).

The samples are made up by this script (templated texts, seeded), in the same form as the
full datasets, so demos and examples run on a fresh clone: ``plaudit data fetch NAME --sample``.
Run from the repository root: ``python scripts/make_data_samples.py``.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "services" / "datasets" / "samples"

TOPICS = [
    "financial aid",
    "dorm life",
    "choosing a major",
    "graduate school",
    "internships",
    "study habits",
    "transfer credits",
    "professors",
    "roommates",
    "application essays",
]
GOOD = [
    "Talk to the {t} office early; they answered every question I had within a week.",
    "What worked for me with {t}: write down deadlines, ask a senior, and compare two "
    "options side by side before deciding.",
    "I went through the same thing with {t}. Give it a semester, keep notes, and ask your "
    "advisor for a concrete plan.",
    "Check the official page on {t} first, then email a specific person; a named contact "
    "gets answers much faster than the general inbox.",
]
WEAK = [
    "lol same",
    "idk, {t} is weird",
    "just vibe",
    "this",
    "good luck i guess",
    "nobody cares about {t} tbh",
]


def _gz(path: Path, rows: list[dict[str, Any]]) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
        out.writelines((json.dumps(r) + "\n").encode() for r in rows)


def _split(i: int, n: int) -> str:
    return "test" if i >= n * 0.9 else "dev" if i >= n * 0.8 else "train"


def reddit_karma(rng: random.Random) -> None:
    threads, comments, pairs = [], [], []
    count = 40
    for i in range(count):
        tid, topic, split = f"t{i:03d}", TOPICS[i % len(TOPICS)], _split(i, count)
        threads.append(
            {
                "thread_id": tid,
                "split": split,
                "subreddit": "College",
                "title": f"Question about {topic}",
                "score": rng.randint(3, 90),
                "text": f"I am a first-year student and unsure about {topic}. Advice?",
            }
        )
        siblings = []
        for j in range(6):
            good = j % 2 == 1  # later, helpful comments out-score earlier, short ones
            text = rng.choice(GOOD if good else WEAK).format(t=topic)
            score = rng.randint(8, 40) if good else rng.randint(1, 3)
            row = {
                "id": f"c{i:03d}{j}",
                "split": split,
                "thread_id": tid,
                "parent_id": None,
                "depth": 0,
                "text": text,
                "score": score,
                "created": 1_600_000_000 + j * 60,
            }
            comments.append(row)
            siblings.append(row)
        for a in siblings:
            for b in siblings:
                later = b["created"] > a["created"]
                if later and b["score"] >= 2 * max(a["score"], 1) and b["score"] - a["score"] >= 2:
                    pairs.append(
                        {
                            "split": split,
                            "thread_id": tid,
                            "parent_id": None,
                            "preferred": b["id"],
                            "other": a["id"],
                            "score_preferred": b["score"],
                            "score_other": a["score"],
                        }
                    )
    out = OUT / "reddit_karma"
    out.mkdir(parents=True, exist_ok=True)
    _gz(out / "threads.jsonl.gz", threads)
    _gz(out / "comments.jsonl.gz", comments)
    _gz(out / "pairs.jsonl.gz", pairs)


USS_TURNS = {
    "sgd": [
        ("I need a table for two tonight.", "INFORM_INTENT"),
        ("Which city are you in?", "REQUEST"),
        ("San Jose, around seven.", "INFORM"),
        ("I found a table at Luna Bistro at 7 pm.", "OFFER"),
        ("Great, book it please.", "AFFIRM"),
    ],
    "mwoz": [
        ("I am looking for a cheap hotel in the centre.", "INFORM"),
        ("The Alpha Lodge is cheap and central. Shall I book it?", "OFFER"),
        ("No, I asked for parking too, did you not hear me?", "NEGATE"),
        ("Sorry. The City Inn is cheap, central and has parking.", "OFFER"),
        ("Fine, two nights from Friday.", "INFORM"),
    ],
    "ccpe": [
        ("Do you like science fiction films?", "ENTITY_GENRE"),
        ("Yeah, um, I like the older ones mostly.", "ENTITY_GENRE"),
        ("What do you like about them?", "OTHER"),
        ("The, uh, practical effects, they feel real.", "OTHER"),
        ("Thanks, that is helpful.", "OTHER"),
    ],
}


def uss(rng: random.Random) -> None:
    out = OUT / "uss"
    out.mkdir(parents=True, exist_ok=True)
    for domain, script in USS_TURNS.items():
        rows, count = [], 20
        for i in range(count):
            turns = []
            starts_with_user = domain != "ccpe"
            for k, (text, act) in enumerate(script):
                user = (k % 2 == 0) == starts_with_user
                base = 2 if "did you not hear" in text else 3 + (rng.random() < 0.2)
                sat = [max(1, min(5, base + rng.choice([-1, 0, 0, 1]))) for _ in range(3)]
                turns.append(
                    {
                        "role": "user" if user else "system",
                        "text": text,
                        "action": act,
                        "satisfaction": sat if user else None,
                    }
                )
            rows.append(
                {
                    "id": f"{domain}-{i:04d}",
                    "domain": domain,
                    "turns": turns,
                    "overall_satisfaction": [rng.randint(3, 5) for _ in range(3)],
                    "split": _split(i, count),
                }
            )
        _gz(out / f"{domain}.jsonl.gz", rows)


QUESTIONS = [
    ("writing", "Write a two-sentence thank-you note to a teacher."),
    ("math", "What is 17 times 23? Explain briefly."),
    ("reasoning", "If all bloops are razzies and no razzies are lazzies, can a bloop be a lazzy?"),
    ("coding", "Write a Python function that reverses a string."),
    ("stem", "Why is the sky blue, in one paragraph?"),
    ("roleplay", "Pretend to be a tour guide greeting a group in Rome."),
]
ANSWERS = {
    "writing": (
        "Dear Ms. Lee, thank you for a year of patient teaching. Your lessons "
        "made me love reading.",
        "thanks teacher",
    ),
    "math": ("17 x 23 = 391 (17 x 20 = 340, plus 17 x 3 = 51).", "17 x 23 = 401"),
    "reasoning": (
        "No. Every bloop is a razzy, and no razzy is a lazzy, so no bloop is a lazzy.",
        "Yes, maybe.",
    ),
    "coding": ("def reverse(s: str) -> str:\n    return s[::-1]", "use a loop somehow"),
    "stem": (
        "Air molecules scatter short (blue) wavelengths of sunlight far more than "
        "long ones (Rayleigh scattering), so blue light reaches us from all "
        "directions.",
        "Because of the ocean.",
    ),
    "roleplay": (
        "Benvenuti! Welcome to Rome. Stay close, drink water, and in ten minutes "
        "you will see the Colosseum.",
        "Hello. Rome is old.",
    ),
}


def mtbench_human(rng: random.Random) -> None:
    out = OUT / "mtbench_human"
    out.mkdir(parents=True, exist_ok=True)
    for split, parity in (("dev", 1), ("test", 0)):
        rows = []
        for n in range(12):
            qid = 2 * n + (1 if parity else 2)
            category, question = QUESTIONS[n % len(QUESTIONS)]
            good, bad = ANSWERS[category]
            swap = rng.random() < 0.5
            a, b = (bad, good) if swap else (good, bad)
            winner = "b" if swap else "a"
            human = "tie" if n % 6 == 5 else winner
            rows.append(
                {
                    "id": f"sample-{qid}-t1",
                    "question_id": qid,
                    "category": category,
                    "turn": 1,
                    "model_a": "model-x" if not swap else "model-y",
                    "model_b": "model-y" if not swap else "model-x",
                    "conversation_a": [
                        {"role": "user", "content": question},
                        {"role": "assistant", "content": a},
                    ],
                    "conversation_b": [
                        {"role": "user", "content": question},
                        {"role": "assistant", "content": b},
                    ],
                    "human_judge": "sample",
                    "human_winner": human,
                    "gpt4_winner": winner,
                }
            )
        (out / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


ARTICLES = {
    "Bicycle": (
        "Transport",
        "A bicycle is a pedal-driven vehicle with two wheels in line. The "
        "rider steers with handlebars and balances by small steering corrections.",
    ),
    "Photosynthesis": (
        "Biology",
        "Photosynthesis is how plants, algae and some bacteria turn "
        "light, water and carbon dioxide into sugars, releasing oxygen.",
    ),
    "Volcano": (
        "Geology",
        "A volcano is an opening in a planet's crust where molten rock, ash "
        "and gases escape. Many form where tectonic plates meet.",
    ),
    "Printing press": (
        "Technology",
        "The printing press presses inked type onto paper. "
        "Movable metal type made books cheaper and spread literacy in Europe.",
    ),
    "Honey bee": (
        "Biology",
        "Honey bees live in colonies with one queen, many workers and "
        "some drones. Workers collect nectar and pollen and make honey.",
    ),
    "Prime number": (
        "Mathematics",
        "A prime number is a whole number greater than one whose "
        "only divisors are one and itself. There are infinitely many primes.",
    ),
    "Lighthouse": (
        "Architecture",
        "A lighthouse is a tower with a bright lamp that guides "
        "ships at night and warns them of rocks and shallow water.",
    ),
    "Vaccine": (
        "Medicine",
        "A vaccine trains the immune system to recognise a pathogen, "
        "so a later infection is fought off faster and is less severe.",
    ),
    "Glacier": (
        "Geography",
        "A glacier is a large body of ice that forms where snow "
        "accumulates faster than it melts, and slowly flows under its own weight.",
    ),
    "Chess": (
        "Games",
        "Chess is a two-player board game on an eight-by-eight grid. Each side "
        "tries to checkmate the other's king.",
    ),
    "Telescope": (
        "Astronomy",
        "A telescope gathers and focuses light with lenses or mirrors, "
        "making distant objects look brighter and larger.",
    ),
    "Bread": (
        "Food",
        "Bread is baked from a dough of flour and water, usually leavened with "
        "yeast, which makes gas bubbles that let the dough rise.",
    ),
}


def wikipedia() -> None:
    out = OUT / "wikipedia"
    out.mkdir(parents=True, exist_ok=True)
    data = {
        title: {"title": title, "extract": text, "topic": topic}
        for title, (topic, text) in ARTICLES.items()
    }
    (out / "summaries_en-us.json").write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    reddit_karma(random.Random(0))
    uss(random.Random(1))
    mtbench_human(random.Random(2))
    wikipedia()
