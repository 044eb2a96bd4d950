"""The trainer's own view of traces, annotations and step credit."""

from __future__ import annotations

import pytest

from stash_common.errors import InvalidArgument
from stash_common.steps import TraceStep
from stash_trainer.pairs.inputs import Annotation, SourceTrace


def test_source_trace_requires_step_indices_to_be_positions() -> None:
    with pytest.raises(InvalidArgument, match=r"steps\[0\].index: is 3, expected 0"):
        SourceTrace("t1", (TraceStep("s", 3, "user", "hi"),))


def test_usable_rating_ignores_flagged_and_missing_ratings() -> None:
    assert Annotation("a", None, 1, None).usable_rating == 1
    assert Annotation("a", None, -1, None, label_error=True).usable_rating is None
    assert Annotation("a", None, None, "nice").usable_rating is None
