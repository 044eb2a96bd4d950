"""A million hostile inputs through every import adapter's parse: the only outcomes allowed are valid traces
and InvalidArgument; the table counts each per adapter, and any other exception (a crash) with its first
example. Inputs are seeded random JSON in the format's own words and real fixture lines with bytes cut,
inserted or replaced (`tests/support/adapter_fuzz.py`), spread over worker processes.

    .venv/bin/python bench/adapter_fuzz.py [--inputs 1000000] [--workers 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parents[1] / "tests")]

from stash_ingest.adapters.registry import ADAPTERS  # noqa: E402
from support.adapter_fuzz import ADAPTER_NAMES, parse_outcome, seeds, vocabulary  # noqa: E402

MUTATED_SHARE = 0.2  # mutated fixtures are larger and slower to parse than generated JSON
SPECIALS = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\u0000", b"\xff", b"null", b"1e999"]


def random_json(rng: random.Random, words: tuple[str, ...], depth: int = 0) -> Any:
    """A JSON value of a few levels whose keys and many strings are the format's words."""
    kind = rng.random()
    if depth >= 4 or kind < 0.35:
        return rng.choice(
            [None, True, False, rng.randint(-(2**63), 2**63), rng.random() * 1e6, rng.choice(words), "", "\x00"]
        )
    if kind < 0.55:
        return [random_json(rng, words, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(words): random_json(rng, words, depth + 1) for _ in range(rng.randint(0, 5))}


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One to three edits of `data`: a slice cut out, bytes inserted, or one byte replaced."""
    edited = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(edited))
        edit = rng.random()
        if edit < 0.34:
            del edited[at : at + rng.randint(1, 64)]
        elif edit < 0.67:
            edited[at:at] = rng.choice(SPECIALS) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 8))
        elif edited:
            edited[min(at, len(edited) - 1)] = rng.randint(0, 255)
    return bytes(edited)


def fuzz(name: str, count: int, seed: int) -> tuple[str, Counter[str], float, str]:
    """`count` inputs through one adapter: outcome counts, seconds, and the first crash's traceback."""
    rng = random.Random(seed)
    adapter, words, originals = ADAPTERS[name], vocabulary(name) or ("role",), seeds(name)
    outcomes: Counter[str] = Counter()
    first_crash = ""
    started = time.perf_counter()
    for _ in range(count):
        if rng.random() < MUTATED_SHARE:
            data = mutate(rng, rng.choice(originals))
        else:
            data = orjson.dumps(random_json(rng, words))
        try:
            outcomes[parse_outcome(adapter, data)] += 1
        except Exception:  # noqa: BLE001 (a crash is what the bench counts)
            outcomes["crashed"] += 1
            first_crash = first_crash or f"{data[:200]!r}\n{traceback.format_exc(limit=-3)}"
    return name, outcomes, time.perf_counter() - started, first_crash


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    per_adapter = args.inputs // len(ADAPTER_NAMES)
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(
            pool.map(fuzz, ADAPTER_NAMES, [per_adapter] * len(ADAPTER_NAMES), range(args.seed, args.seed + 100))
        )
    table = Table("adapter", "inputs", "parsed", "refused (InvalidArgument)", "crashed", "inputs/s", title="Fuzzing")
    for name, outcomes, seconds, _ in results:
        table.add_row(
            name,
            f"{sum(outcomes.values()):,}",
            f"{outcomes['parsed']:,}",
            f"{outcomes['refused']:,}",
            f"{outcomes['crashed']:,}",
            f"{sum(outcomes.values()) / seconds:,.0f}",
        )
    console = Console(width=140)
    console.print(table)
    for name, _, _, crash in results:
        if crash:
            console.print(f"[bold]first crash of {name}[/bold]\n{crash}")


if __name__ == "__main__":
    main()
