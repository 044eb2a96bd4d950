"""Fixtures of the worker tests: job directories, generated preference pairs and a tiny local decoder."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from stash_trainer.worker.pairs import Pair
from support.reward_models import save_tiny_qwen3, word_tokenizer

# Support answers that follow, or ignore, the customer's explicit request. Each request kind has two
# opposite wishes, so no answer is better on its own: the model has to read the request.
ITEMS = {
    "train": ["espresso machine", "yoga mat", "desk lamp", "winter jacket", "phone case", "air fryer", "toaster"],
    "eval": ["rice cooker", "tennis racket", "gaming mouse", "blender", "picture frame"],
}
NAMES = {"train": ["Anna", "Ben", "Carla", "David", "Elena", "Hugo"], "eval": ["Priya", "Kenji", "Mateo", "Noor"]}
WISHES: dict[str, tuple[tuple[str, Callable[[str, str], str]], ...]] = {
    "language": (
        ("Please reply in English.", lambda name, item: f"Hi {name}, your {item} ships tomorrow."),
        ("Please reply in Spanish.", lambda name, item: f"Hola {name}, su {item} se envía mañana."),
    ),
    "link": (
        ("Send me the tracking link.", lambda name, item: f"Hi {name}, track your {item} at https://t.example/x."),
        ("No links, please.", lambda name, item: f"Hi {name}, your {item} is with the courier."),
    ),
    "resolution": (
        ("I want my money back.", lambda name, item: f"Hi {name}, we refunded the {item} to your card."),
        ("Please send a new one.", lambda name, item: f"Hi {name}, a new {item} is on its way."),
    ),
}


def constraint_pair(rng: random.Random, split: str, trace_id: str) -> Pair:
    """One pair: the customer's question and wish, answered by following (chosen) or flipping (rejected) it."""
    name, item = rng.choice(NAMES[split]), rng.choice(ITEMS[split])
    wishes = WISHES[rng.choice(sorted(WISHES))]
    wanted = rng.randrange(2)
    prompt = f"user: Hello, I'm {name}. About my {item}: {wishes[wanted][0]}\nassistant: "
    return Pair(prompt + wishes[wanted][1](name, item), prompt + wishes[1 - wanted][1](name, item), (trace_id,))


def every_text() -> list[str]:
    """Every prompt and answer the generator can produce (a complete vocabulary for a word-level tokenizer)."""
    return [
        f"user: Hello, I'm {name}. About my {item}: {wish}\nassistant: {answer(name, item)}"
        for split in ITEMS
        for name in NAMES[split]
        for item in ITEMS[split]
        for wishes in WISHES.values()
        for wish, answer in wishes
    ]


@pytest.fixture
def constraint_pairs() -> Callable[[int, str, int], list[Pair]]:
    """`make(count, split, seed)`: generated pairs, one trace each; eval uses names and items train never saw."""

    def make(count: int, split: str, seed: int) -> list[Pair]:
        rng = random.Random(seed)
        return [constraint_pair(rng, split, f"{split}-{seed}-{number}") for number in range(count)]

    return make


def pair_line(pair: Pair, **extra: Any) -> dict[str, Any]:
    """A `pairs.jsonl` record of `pair`."""
    record = {
        "chosen": pair.chosen,
        "rejected": pair.rejected,
        "trace_ids": list(pair.trace_ids),
        "granularity": pair.granularity,
        "action_type": pair.action_type,
    }
    return {**record, **extra}


def write_lines(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write JSON lines."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def job_dir(tmp_path: Path) -> Callable[..., Path]:
    """`write(job={...}, pairs=[Pair...], score_items=[...], action_score_items=[...])`: a job directory."""

    def write(
        job: Mapping[str, Any],
        pairs: Iterable[Pair],
        score_items: Iterable[Mapping[str, Any]] = (),
        action_score_items: Iterable[Mapping[str, Any]] = (),
    ) -> Path:
        directory = tmp_path / "job"
        directory.mkdir()
        (directory / "job.json").write_text(json.dumps({"kind": "train", "max_pairs": 4000, "seed": 0, **job}))
        write_lines(directory / "pairs.jsonl", map(pair_line, pairs))
        write_lines(directory / "score_items.jsonl", score_items)
        write_lines(directory / "action_score_items.jsonl", action_score_items)
        return directory

    return write


@pytest.fixture(scope="session")
def tiny_decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Qwen3 reward model and a word-level tokenizer with an eos but no pad token, built offline."""
    return save_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"), word_tokenizer(every_text()))
