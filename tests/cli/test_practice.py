"""The demo's practice traces: stable, and labeled so that automatic credit gives a learnable preference.

The labeling and pair building are the real ones (the labeler's rules and the trainer's automatic pairs),
so a change to either that leaves the demo's model nothing to learn fails here, before a demo run.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from stash_cli.practice import PRACTICE_TRACES, practice_jsonl, practice_traces
from stash_common.rendering import strip_marks
from stash_common.steps import TraceStep
from stash_labeler.evaluation import evaluate
from stash_labeler.labeling.rule_labeler import RuleLabeler
from stash_labeler.traces import LabelerTrace
from stash_trainer.pairs.automatic import automatic_pairs
from stash_trainer.pairs.inputs import SourceTrace, StepCredit


def _steps(trace: dict[str, Any]) -> tuple[TraceStep, ...]:
    return tuple(
        TraceStep(
            id=f"{trace['id']}-{index}",
            index=index,
            role=step["role"],
            content=step["content"],
            tool_name=step.get("tool_name"),
            tool_input=step.get("tool_input"),
            tool_call_id=step.get("tool_call_id"),
        )
        for index, step in enumerate(trace["steps"])
    )


def _labeled(trace: dict[str, Any]) -> SourceTrace:
    steps = _steps(trace)
    evaluation = evaluate(LabelerTrace(trace["id"], "owner", 1, "stash", steps), RuleLabeler(), {})
    credits = tuple(
        StepCredit(step["step_id"], step.get("expected_credit"), step.get("ordinal_credit"))
        for step in evaluation.body["steps"]
    )
    return SourceTrace(trace["id"], steps, (), credits)


def test_the_practice_traces_are_the_same_every_run_with_stable_ids() -> None:
    traces = practice_traces()

    assert len(traces) == PRACTICE_TRACES
    assert practice_jsonl() == practice_jsonl()
    assert len({trace["id"] for trace in traces}) == PRACTICE_TRACES and traces[0]["id"] == "practice-001"
    assert [json.loads(line) for line in practice_jsonl(4).splitlines()] == practice_traces(4)
    assert practice_traces(4, seed=8) != practice_traces(4)


def test_automatic_credit_ranks_a_grounded_answer_over_its_lookup_over_a_guess() -> None:
    pairs = automatic_pairs([_labeled(trace) for trace in practice_traces(20)])

    # A checked trace makes one pair (answer over lookup); a guessed one three (answer and lookup over the guess).
    assert len(pairs) == 10 * 1 + 10 * 3
    kinds = Counter(
        (_kind(pair.chosen, pair.evidence["chosen_credit"]), _kind(pair.rejected, pair.evidence["rejected_credit"]))
        for pair in pairs
    )
    assert kinds == {("answer", "lookup"): 20, ("answer", "guess"): 10, ("lookup", "guess"): 10}, kinds
    assert all(pair.evidence["chosen_credit"] - pair.evidence["rejected_credit"] >= 0.25 for pair in pairs)


def _kind(text: str, credit: float) -> str:
    if strip_marks(text).rsplit("\n\n", 1)[-1].startswith("Assistant called"):
        return "lookup"
    return "answer" if credit > 0 else "guess"
