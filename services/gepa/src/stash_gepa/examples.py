"""GEPA's examples: each selected trace's input before its first assistant step, with the feedback on it.

- `system` is the trace's system steps joined by blank lines (None without any); the input is every
  non-system step before the first assistant step. A trace without such input is skipped; a run
  with no example left fails with that reason.
- Feedback is what the reflection model reads besides the reward score: every comment reviewers
  left on the trace or its steps that nobody flagged as a label error, then the evidence the model
  trained on (the feedback classifier's findings included in training, and the recorded preference
  pairs drawn from this trace), people's words first, within `FEEDBACK_TOKENS` (estimated at
  `CHARS_PER_TOKEN` characters a token). No comment is ever dropped: when the comments alone exceed
  the budget, the short ones stay whole and the long ones share the rest, each cut to an excerpt that
  says so ("[excerpt: 400 of 2,310 characters]"). Training evidence fills what is left, and a last
  line counts the evidence lines left out.
- The split into GEPA's train and validation sets is a deterministic hash order of the trace ids.

Policy on plain values: `stash_gepa.clients` turns the peers' messages into these dataclasses.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stash_common.errors import FailedPrecondition
from stash_common.rendering import render_step
from stash_common.steps import TraceStep
from stash_gepa.job_contract import GepaExample, Message

FEEDBACK_TOKENS = 1500  # per example: the reflection model reads a minibatch of examples at once
CHARS_PER_TOKEN = 4  # a conservative estimate for English text; GEPA has no tokenizer of the task model
MIN_EXCERPT_CHARS = 80  # a comment's excerpt is never shorter, even when that overruns the budget
EXCERPT_CHARS = 160
VALIDATION_SHARE = 3  # one example in three validates (at least one)


@dataclass(frozen=True)
class Comment:
    """A comment of the owner or a reviewer on a trace (step_id None) or one of its steps, with its author's name."""

    step_id: str | None
    text: str
    quote: str | None
    label_error: bool
    author: str = ""


@dataclass(frozen=True)
class Finding:
    """A feedback classifier's finding recorded with the reward model."""

    step_index: int
    label: str
    confidence: str
    reason: str
    quote: str | None
    included_in_training: bool


@dataclass(frozen=True)
class ExampleTrace:
    """A selected trace with what reviewers and training said about it."""

    id: str
    steps: tuple[TraceStep, ...]
    comments: tuple[Comment, ...]
    findings: tuple[Finding, ...]
    pairs: tuple[Mapping[str, Any], ...]  # recorded training pairs that name this trace, with their evidence


def build_examples(traces: Sequence[ExampleTrace]) -> list[GepaExample]:
    """The examples of the traces that have input before their first assistant step."""
    examples = [example for trace in traces if (example := build_example(trace)) is not None]
    if not examples:
        raise FailedPrecondition(
            f"none of the reward model's {len(traces)} selected traces has input before its first assistant step,"
            " so GEPA has no example to run the skill on; train a model on traces that start with a request"
        )
    return examples


def build_example(trace: ExampleTrace) -> GepaExample | None:
    """The trace's example, or None when nothing but system steps precedes its first assistant step."""
    system = "\n\n".join(step.content for step in trace.steps if step.role == "system" and step.content.strip())
    first_assistant = next((step.index for step in trace.steps if step.role == "assistant"), len(trace.steps))
    inputs = [step for step in trace.steps[:first_assistant] if step.role != "system" and step.content.strip()]
    if not inputs:
        return None
    return GepaExample(
        trace_id=trace.id,
        system=system or None,
        messages=[Message(role="user", content=_message_text(step)) for step in inputs],
        feedback=feedback_lines(trace),
    )


def _message_text(step: TraceStep) -> str:
    # Only user messages open a conversation; a tool result there (rare) is passed on as the user's text.
    return step.content if step.role == "user" else render_step(step)


def feedback_lines(trace: ExampleTrace, budget_tokens: int = FEEDBACK_TOKENS) -> list[str]:
    """Every unflagged comment (long ones as marked excerpts when over budget), then the training evidence
    that fits the rest of `budget_tokens`, then how many evidence lines were left out."""
    steps = {step.id: step for step in trace.steps}
    budget = budget_tokens * CHARS_PER_TOKEN
    comments = fit_comments([_comment_line(c, steps) for c in trace.comments if not c.label_error], budget)
    findings = [_finding_line(finding, trace.steps) for finding in trace.findings if finding.included_in_training]
    pairs = [line for pair in trace.pairs if (line := _pair_line(pair, trace.id, steps)) is not None]
    room = budget - sum(map(len, comments))
    evidence: list[str] = []
    for line in [*findings, *pairs]:
        if len(line) > room:
            break
        evidence.append(line)
        room -= len(line)
    left_out = len(findings) + len(pairs) - len(evidence)
    note = [f"({left_out} more training evidence line(s) left out: the feedback token budget is spent)"]
    return [*comments, *evidence, *(note if left_out else [])]


def fit_comments(lines: Sequence[str], budget_chars: int) -> list[str]:
    """All `lines`, in order; over budget, the longest cut to equal shares of it (water-filling), marked."""
    if sum(map(len, lines)) <= budget_chars:
        return list(lines)
    share, remaining, left = budget_chars, budget_chars, len(lines)
    for length in sorted(map(len, lines)):  # the short lines stay whole; the long ones split what is left
        share = max(MIN_EXCERPT_CHARS, remaining // left)
        if length > share:
            break
        remaining, left = remaining - length, left - 1
    return [line if len(line) <= share else _excerpt_of(line, share) for line in lines]


def _excerpt_of(line: str, chars: int) -> str:
    return f"{line[:chars].rstrip()}… [excerpt: {chars:,} of {len(line):,} characters]"


def _comment_line(comment: Comment, steps: Mapping[str, TraceStep]) -> str:
    step = steps.get(comment.step_id) if comment.step_id else None
    where = f"step {step.index} ({_excerpt(step)})" if step is not None else "the whole trace"
    about = f' about "{comment.quote}"' if comment.quote else ""
    by = f" (by {comment.author})" if comment.author else ""
    return f"A reviewer commented on {where}{about}: {comment.text}{by}"


def _finding_line(finding: Finding, steps: Sequence[TraceStep]) -> str:
    step = steps[finding.step_index] if 0 <= finding.step_index < len(steps) else None
    where = f"step {finding.step_index}" + (f" ({_excerpt(step)})" if step is not None else "")
    evidence = f' Evidence: "{finding.quote}"' if finding.quote else ""
    return f"Training judged {where} {finding.label} ({finding.confidence} confidence): {finding.reason}.{evidence}"


def _pair_line(pair: Mapping[str, Any], trace_id: str, steps: Mapping[str, TraceStep]) -> str | None:
    source = pair.get("source", "training")
    chosen, rejected = steps.get(str(pair.get("chosen_step_id"))), steps.get(str(pair.get("rejected_step_id")))
    if chosen is not None or rejected is not None:
        # A side from another selected trace is quoted from the end of its rendered example: its action.
        better = _step_phrase(chosen) if chosen else f"another trace's action ending {_tail(pair.get('chosen'))}"
        worse = _step_phrase(rejected) if rejected else f"another trace's action ending {_tail(pair.get('rejected'))}"
        return f"Training preferred {better} over {worse} ({source}{_credits(pair)})"
    if pair.get("granularity") == "trace":
        ranked = "above" if pair.get("chosen_trace_id") == trace_id else "below"
        return f"Training ranked this whole trace {ranked} another of the selected traces ({source})"
    return None


def _step_phrase(step: TraceStep) -> str:
    return f"step {step.index} ({_excerpt(step)})"


def _tail(text: Any) -> str:
    flat = " ".join(str(text or "").split())
    return f"“{flat if len(flat) <= EXCERPT_CHARS else '…' + flat[-EXCERPT_CHARS + 1 :]}”"


def _credits(pair: Mapping[str, Any]) -> str:
    chosen, rejected = pair.get("chosen_credit"), pair.get("rejected_credit")
    if isinstance(chosen, int | float) and isinstance(rejected, int | float):
        return f", credit {chosen:.2f} against {rejected:.2f}"
    return ""


def _excerpt(step: TraceStep) -> str:
    text = " ".join(render_step(step).split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def validation_ids(examples: Sequence[GepaExample], seed: int) -> list[str]:
    """The examples GEPA validates on: a third (at least one) in a seeded hash order; one example is both sets."""
    ordered = sorted(examples, key=lambda example: hashlib.sha256(f"{seed}:{example.trace_id}".encode()).digest())
    count = max(1, len(ordered) // VALIDATION_SHARE)
    return [example.trace_id for example in ordered[:count]]


def budget_warning(max_metric_calls: int, validation: int, minibatch: int) -> str | None:
    """Why the budget lets GEPA propose at most one candidate, or None when it allows more.

    GEPA spends V calls on the seed's validation, then each proposal costs a minibatch of R for the
    parent and R for the child, and V more when the child is accepted: under V + 3(R + V) there is
    room for at most one proposal.
    """
    needed = validation + 3 * (minibatch + validation)
    if max_metric_calls >= needed:
        return None
    return (
        f"max_metric_calls {max_metric_calls} is below {needed} (V + 3(R + V) with V = {validation} validation"
        f" examples and R = {minibatch} reflection examples): GEPA proposes at most one candidate;"
        f" raise max_metric_calls to {needed} or more"
    )
