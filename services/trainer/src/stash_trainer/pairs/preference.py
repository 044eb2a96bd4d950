"""A preference pair: a chosen and a rejected rendered text, their source traces, and the evidence behind them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from stash_common.rendering import render_example, strip_marks
from stash_common.steps import TraceStep
from stash_trainer.pairs.inputs import SourceTrace

Granularity = Literal["action", "trace"]
ActionType = Literal["tool_call", "response", "mixed"]
EXPORT_FIELDS = ("chosen", "rejected", "trace_ids", "granularity", "action_type")


@dataclass(frozen=True)
class PreferencePair:
    """`chosen` should score higher than `rejected`; `evidence` records why (source, steps, credits, quotes)."""

    chosen: str
    rejected: str
    trace_ids: tuple[str, ...]
    granularity: Granularity
    action_type: ActionType | None
    evidence: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """What makes two pairs duplicates: the same chosen and rejected texts."""
        return (self.chosen, self.rejected)

    def to_export_line(self) -> dict[str, Any]:
        """The `GET /export/pairs` shape: `{chosen, rejected, trace_ids, granularity, action_type}`."""
        return export_line(self.to_job_line())

    def to_job_line(self) -> dict[str, Any]:
        """A `pairs.jsonl` line of the job directory contract, as recorded too: the export fields, then the evidence."""
        return {
            "chosen": self.chosen,
            "rejected": self.rejected,
            "trace_ids": list(self.trace_ids),
            "granularity": self.granularity,
            "action_type": self.action_type,
            **self.evidence,
        }


def export_line(job_line: Mapping[str, Any]) -> dict[str, Any]:
    """The export shape of a `pairs.jsonl` line or a recorded pair: its EXPORT_FIELDS, without the evidence."""
    return unmarked({key: job_line.get(key) for key in EXPORT_FIELDS})


def unmarked(job_line: Mapping[str, Any]) -> dict[str, Any]:
    """A `pairs.jsonl` line or recorded pair as it leaves the trainer: texts without input version 3's section marks."""
    return {**job_line, "chosen": strip_marks(job_line["chosen"]), "rejected": strip_marks(job_line["rejected"])}


def action_type(step: TraceStep) -> Literal["tool_call", "response"]:
    """What kind of action a step is."""
    return "tool_call" if step.is_tool_call else "response"


def pair_action_type(chosen: TraceStep, rejected: TraceStep) -> ActionType:
    """The pair's action type: the sides' common kind, or "mixed" when a tool call meets a response."""
    kind = action_type(chosen)
    return kind if kind == action_type(rejected) else "mixed"


def sorted_trace_ids(*trace_ids: str) -> tuple[str, ...]:
    """The distinct source trace ids of a pair, sorted."""
    return tuple(sorted(set(trace_ids)))


def action_pair(
    chosen: tuple[SourceTrace, TraceStep],
    rejected: tuple[SourceTrace, TraceStep],
    evidence: Mapping[str, Any],
    sections: bool = False,
) -> PreferencePair:
    """A pair of two actions, each rendered as its trace's context ending at that step (one trace or two);
    `sections`: with input version 3's marked context sections."""
    (chosen_trace, chosen_step), (rejected_trace, rejected_step) = chosen, rejected
    return PreferencePair(
        chosen=render_example(chosen_trace.steps, chosen_step.index, sections=sections),
        rejected=render_example(rejected_trace.steps, rejected_step.index, sections=sections),
        trace_ids=sorted_trace_ids(chosen_trace.id, rejected_trace.id),
        granularity="action",
        action_type=pair_action_type(chosen_step, rejected_step),
        evidence=evidence,
    )
