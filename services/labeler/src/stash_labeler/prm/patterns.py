"""The five trajectory failure patterns: their severity and taxonomy, and what a detection says.

| pattern | severity | taxonomy | what it catches |
|---|---|---|---|
| stuck_on_test | 5 | coordination_error | the same failing test run, again and again |
| expansion_drift | 4 | specification_error | a growing set of files touched without a success |
| context_thrash | 3 | coordination_error | rapid switching between unrelated files |
| ping_pong | 2 | reasoning_error | bouncing between two sets of files |
| repetition_loop | 1 | reasoning_error | the same call on the same files, three times in a row |

Severity decides which course correction is emitted when several patterns fire at once. Adding a
pattern means a row here, a detector in `detectors.py` and a suggestion in `corrections.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

PatternName = Literal["stuck_on_test", "expansion_drift", "context_thrash", "ping_pong", "repetition_loop"]
Taxonomy = Literal["coordination_error", "specification_error", "reasoning_error"]
Source = Literal["rules", "ml"]


@dataclass(frozen=True)
class PatternKind:
    """What every detection of one pattern shares."""

    severity: int
    taxonomy: Taxonomy


# Ordered by severity, highest first.
PATTERN_KINDS: Mapping[PatternName, PatternKind] = {
    "stuck_on_test": PatternKind(5, "coordination_error"),
    "expansion_drift": PatternKind(4, "specification_error"),
    "context_thrash": PatternKind(3, "coordination_error"),
    "ping_pong": PatternKind(2, "reasoning_error"),
    "repetition_loop": PatternKind(1, "reasoning_error"),
}
PATTERN_NAMES: tuple[PatternName, ...] = tuple(PATTERN_KINDS)


class Pattern(BaseModel):
    """A detected pattern; `source` says whether the rules or the LLM classifier found it."""

    model_config = ConfigDict(frozen=True)

    name: PatternName
    source: Source = "rules"
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def taxonomy(self) -> Taxonomy:
        """The failure class, from the pattern table."""
        return PATTERN_KINDS[self.name].taxonomy

    @computed_field  # type: ignore[prop-decorator]
    @property
    def severity(self) -> int:
        """1 (least) to 5 (most severe), from the pattern table."""
        return PATTERN_KINDS[self.name].severity


@dataclass(frozen=True)
class PatternMatch:
    """A rule detection and the positions, in the analysed event sequence, of the events behind it."""

    pattern: Pattern
    positions: tuple[int, ...]


def by_severity(patterns: Iterable[Pattern]) -> list[Pattern]:
    """The patterns, most severe first; equal severities keep their order."""
    return sorted(patterns, key=lambda pattern: -pattern.severity)
