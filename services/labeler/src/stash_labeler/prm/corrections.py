"""Course corrections: the advice a detected pattern turns into, at most once per pattern per task.

A correction's fingerprint is `taxonomy:pattern`. `next_correction` skips patterns whose fingerprint
the task has already been given, so a pattern that was acted on does not re-prompt every step,
while a different pattern can still fire once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, computed_field

from stash_labeler.prm.patterns import Pattern, PatternName, Taxonomy, by_severity

SUGGESTION_MAX_CHARS = 500

SUGGESTIONS: Mapping[PatternName, str] = {
    "stuck_on_test": (
        "The same tests have failed three runs in a row. Read the actual failure output, not just the "
        "summary, check whether the test's assumptions match the code's contract, and change something "
        "before running them again."
    ),
    "expansion_drift": (
        "The set of files you touch keeps growing while nothing succeeds. Narrow the scope: find the "
        "smallest single change that unblocks progress and stop adding files."
    ),
    "context_thrash": (
        "You have switched between unrelated files five times in a row, which spreads your context thin "
        "and produces shallow changes. Pick one area and finish the work there before moving on."
    ),
    "ping_pong": (
        "You have alternated between the same two files four times. Decide which one needs the change "
        "and make one coherent edit before switching."
    ),
    "repetition_loop": (
        "You have made the same call on the same files three times in a row. Repeating it will not give "
        "a different result: inspect the output, question the assumption behind it, or try another approach."
    ),
}


def fingerprint_of(taxonomy: str, pattern: str) -> str:
    """The identity of a correction for the one-per-task cap: `taxonomy:pattern`."""
    return f"{taxonomy}:{pattern}"


class CourseCorrection(BaseModel):
    """Advice for a task's next step, rendered as a markdown block to add to the agent's prompt."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    taxonomy: Taxonomy
    pattern: PatternName
    suggestion: str = Field(min_length=1, max_length=SUGGESTION_MAX_CHARS)
    created_at: AwareDatetime

    @classmethod
    def from_pattern(cls, task_id: str, pattern: Pattern, created_at: datetime | None = None) -> CourseCorrection:
        """The default correction for a pattern, with the suggestion from `SUGGESTIONS`."""
        return cls(
            task_id=task_id,
            taxonomy=pattern.taxonomy,
            pattern=pattern.name,
            suggestion=SUGGESTIONS[pattern.name],
            created_at=created_at or datetime.now(UTC),
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def fingerprint(self) -> str:
        """`taxonomy:pattern`: the same for every correction of one pattern."""
        return fingerprint_of(self.taxonomy, self.pattern)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prompt_block(self) -> str:
        """The markdown block spliced into the next prompt."""
        return f"## COURSE CORRECTION\n\n{self.taxonomy}: {self.pattern}\n\nSuggested adjustment: {self.suggestion}\n"


def next_correction(
    task_id: str,
    patterns: Sequence[Pattern],
    emitted: Collection[str],
    created_at: datetime | None = None,
) -> CourseCorrection | None:
    """The correction for the most severe pattern whose fingerprint is not in `emitted`, or None.

    The caller records the returned correction's fingerprint; `TaskLog.emit_correction` does so.
    """
    for pattern in by_severity(patterns):
        if fingerprint_of(pattern.taxonomy, pattern.name) not in emitted:
            return CourseCorrection.from_pattern(task_id, pattern, created_at)
    return None
