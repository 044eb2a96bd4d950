"""Fuzzing every import adapter: what a parse of hostile input may do (succeed with valid traces or refuse
with InvalidArgument, nothing else), the seeds (real fixtures), and each format's vocabulary.

Shared by the bounded Hypothesis tests (services/ingest/tests/test_adapter_fuzz.py) and the million-input
bench (bench/adapter_fuzz.py). Random bytes rarely get past a JSON parser, so inputs are built from the
format's own words (the keys and short strings of its real fixtures) and from mutated real fixture lines.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from functools import cache
from typing import Any

import orjson

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.registry import ADAPTERS, Adapter
from stash_ingest.traces import validate_trace
from support.fixtures import REAL_FIXTURES
from support.ingest import stash_line

FIXTURE_DIRS = {
    "otel": "otlp",
    "langfuse": "langfuse",
    "langsmith": "langsmith",
    "claude_code": "claude-code",
    "codex": "codex",
    "anthropic_messages": "anthropic-messages",
    "openai_chat": "openai-chat",
}
SEED_LINES = 6  # the first lines of each fixture file: whole files would make each input slow to parse
VOCABULARY_SIZE = 120


def parse_outcome(adapter: Adapter, data: bytes) -> str:
    """`parsed` (every trace valid) or `refused` (InvalidArgument); any other exception propagates."""
    try:
        traces = adapter.parse(data)
    except InvalidArgument:
        return "refused"
    for trace in traces:
        validate_trace(trace, "fuzzed")
    return "parsed"


@cache
def seeds(name: str) -> tuple[bytes, ...]:
    """Real inputs of the format: the first lines of each fixture file (a whole file when it is one document)."""
    if name == "stash":
        return (stash_line("seed").encode(),)
    found = []
    for path in sorted((REAL_FIXTURES / FIXTURE_DIRS[name]).iterdir()):
        raw = path.read_bytes()
        if path.suffix == ".json" and len(raw) < 200_000:
            found.append(raw)
        else:
            found.append(b"\n".join(raw.split(b"\n")[:SEED_LINES]))
    return tuple(found)


@cache
def vocabulary(name: str) -> tuple[str, ...]:
    """The format's most frequent object keys and short strings, from its seeds."""
    counts: Counter[str] = Counter()
    for seed in seeds(name):
        for document in _documents(seed):
            counts.update(_words(document))
    return tuple(word for word, _ in counts.most_common(VOCABULARY_SIZE))


def _documents(seed: bytes) -> list[Any]:
    """A seed as JSON: the whole document, or each line that parses."""
    try:
        return [orjson.loads(seed)]
    except orjson.JSONDecodeError:
        pass
    documents = []
    for line in seed.split(b"\n"):
        try:
            documents.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return documents


def _words(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield key
            yield from _words(child)
    elif isinstance(value, list):
        for child in value:
            yield from _words(child)
    elif isinstance(value, str) and len(value) <= 30:
        yield value


ADAPTER_NAMES = tuple(ADAPTERS)
