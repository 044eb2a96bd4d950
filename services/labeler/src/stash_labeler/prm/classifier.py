"""The optional LLM classifier, which finds the same five patterns with a confidence, and the merge policy.

The classifier takes any `prompt → text` coroutine, so it works with every provider and tests stub
it. It never raises: a failing completer or an unreadable answer gives [] and the rules stand alone.
The answer is read defensively: the first JSON object with a `patterns` list
(`{"patterns": [{"name": "stuck_on_test", "confidence": 0.85}]}`), else `name: confidence` pairs
found by regular expressions. Unknown names and confidences below the threshold are dropped, so an
answer can only select from the known patterns, never add prompt text.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import structlog

from stash_labeler.prm.config import PRMConfig
from stash_labeler.prm.events import TrajectoryEvent
from stash_labeler.prm.patterns import PATTERN_KINDS, PATTERN_NAMES, Pattern, by_severity

log = structlog.get_logger(__name__)

LLMCompleter = Callable[[str], Awaitable[str]]

_MAX_ANSWER_CHARS = 10_000  # an answer is ~100 tokens; this bounds the JSON search on a runaway one
_JSON_ENTRY = re.compile(r'"name"\s*:\s*"(?P<name>\w+)"[^{}]*?"confidence"\s*:\s*"?(?P<confidence>\d*\.?\d+)')
_PAIR = re.compile(r"(?P<name>[A-Za-z_]+)[\"']?\s*[:=]\s*[\"']?(?P<confidence>\d*\.?\d+)")


def build_classify_prompt(events: Sequence[TrajectoryEvent], threshold: float) -> str:
    """The classification prompt: the pattern names, the answer format and one line per event."""
    lines = [
        f"{number}. [{event.role}:{event.action}] files={','.join(event.target_files) or '-'} "
        f"ok={'true' if event.success else 'false'} duration={event.duration_s:.1f}s"
        for number, event in enumerate(events, start=1)
    ]
    return (
        "You classify the trajectory of an AI agent: its tool calls in order. Name the failure patterns "
        f"you see, from this list only: {', '.join(PATTERN_NAMES)}.\n"
        "Patterns may overlap. Answer with one JSON line and nothing else:\n"
        '{"patterns": [{"name": "<pattern>", "confidence": <0.0-1.0>}]}\n'
        f'Only include patterns with confidence >= {threshold:.2f}; answer {{"patterns": []}} if none.\n\n'
        "Trajectory:\n" + "\n".join(lines) + "\n"
    )


def parse_classify_response(text: str, threshold: float) -> list[Pattern]:
    """The known patterns named with confidence ≥ threshold, most severe first; a name's first such mention counts."""
    answer = text[:_MAX_ANSWER_CHARS]
    entries = _json_entries(answer)
    found: dict[str, Pattern] = {}
    for name, raw_confidence in entries if entries is not None else _regex_entries(answer):
        confidence = _confidence(raw_confidence)
        known = isinstance(name, str) and name in PATTERN_KINDS and name not in found
        if known and confidence is not None and confidence >= threshold:
            found[name] = Pattern(name=name, source="ml", confidence=confidence)
    return by_severity(found.values())


class LLMTrajectoryClassifier:
    """Finds trajectory patterns with an LLM; advisory, so it returns [] rather than raising."""

    def __init__(self, completer: LLMCompleter, threshold: float = 0.7, min_events: int = 3) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        if min_events < 1:
            raise ValueError(f"min_events must be at least 1, got {min_events}")
        self._completer = completer
        self.threshold = threshold
        self.min_events = min_events

    @classmethod
    def from_config(cls, completer: LLMCompleter, config: PRMConfig) -> LLMTrajectoryClassifier:
        """A classifier with the config's `ml_threshold` and `ml_min_events`."""
        return cls(completer, threshold=config.ml_threshold, min_events=config.ml_min_events)

    async def classify(self, events: Sequence[TrajectoryEvent]) -> list[Pattern]:
        """The patterns the LLM sees in the events; [] below `min_events` (no call) or on any error."""
        if len(events) < self.min_events:
            return []
        try:
            answer = await self._completer(build_classify_prompt(events, self.threshold))
            return parse_classify_response(answer, self.threshold)
        except Exception as error:  # the PRM is advisory: an LLM failure must never block the caller
            log.warning("prm.ml_classify_failed", error=repr(error), events=len(events))
            return []


def merge_patterns(rule_patterns: Sequence[Pattern], ml_patterns: Sequence[Pattern]) -> list[Pattern]:
    """Rule patterns, then LLM patterns the rules did not find, one per name, most severe first (stable)."""
    merged: dict[str, Pattern] = {}
    for pattern in [*rule_patterns, *ml_patterns]:
        merged.setdefault(pattern.name, pattern)
    return by_severity(merged.values())


def _json_entries(text: str) -> list[tuple[Any, Any]] | None:
    """(name, confidence) of each entry of the first JSON object with a `patterns` list; None if there is none."""
    for value in _json_objects(text):
        if isinstance(value.get("patterns"), list):
            return [
                (entry.get("name"), entry.get("confidence")) for entry in value["patterns"] if isinstance(entry, dict)
            ]
    return None


def _json_objects(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects embedded in prose, in order."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON here, or nested too deep to be an answer
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            yield value
        start = text.find("{", end)


def _regex_entries(text: str) -> list[tuple[str, str]]:
    """`"name": "x", … "confidence": 0.8` and `x: 0.8` pairs, in the order they appear."""
    found = [*_JSON_ENTRY.finditer(text), *_PAIR.finditer(text)]
    return [(match["name"], match["confidence"]) for match in sorted(found, key=lambda match: match.start())]


def _confidence(value: Any) -> float | None:
    """A confidence in [0, 1] from a number or numeric text; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) and 0.0 <= number <= 1.0 else None
