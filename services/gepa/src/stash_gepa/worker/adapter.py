"""SkillAdapter: the GEPAAdapter that runs a skill on the examples, scores replies, and asks for a better body.

- `evaluate`: the task model answers every example of the batch with the candidate's skill in its
  system message (calls in flight at once, up to the job's concurrency); the conversations with
  their replies are scored by the reward model in one batched call. An example whose task-model call
  failed scores 0 and its reason is recorded; a provider that cannot be used at all stops the run.
- `make_reflective_dataset`: each example's input, the reply, and its feedback: the score, every
  non-flagged reviewer comment on the trace and the evidence of the model's training pairs.
- `propose_new_texts`: the reflection model, told it writes only the body of a SKILL.md.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from gepa import EvaluationBatch, GEPAAdapter

from stash_common.rendering import render_trace
from stash_common.steps import TraceStep
from stash_gepa.job_contract import GepaExample
from stash_gepa.worker.models import ChatModel, ProviderError
from stash_gepa.worker.skill import (
    COMPONENT,
    SkillIdentity,
    parse_body,
    reflection_prompt,
    render_skill,
    task_messages,
)


class Metric(Protocol):
    """Scores rendered conversations from 0 to 1 (the reward model)."""

    def scores(self, conversations: Sequence[str]) -> list[float]:
        """GEPA's score of each conversation."""
        ...


@dataclass(frozen=True)
class Rollout:
    """One example answered with one skill: the reply (None when the call failed), its score, and why it failed."""

    example: GepaExample
    reply: str | None
    score: float
    error: str | None


class SkillAdapter(GEPAAdapter[GepaExample, "Rollout", str]):
    """Evaluates skill bodies for GEPA with the task model and the reward model."""

    def __init__(
        self, identity: SkillIdentity, task: ChatModel, reflection: ChatModel, metric: Metric, concurrency: int
    ) -> None:
        self.identity = identity
        self.task = task
        self.reflection = reflection
        self.metric = metric
        self.concurrency = concurrency
        # Wall time of the task-model phases (their calls overlap), the reward model's scoring and reflection.
        self.task_seconds = 0.0
        self.metric_seconds = 0.0
        self.reflection_seconds = 0.0
        self.failures: dict[str, str] = {}  # trace id → the latest reason its task-model call failed

    def evaluate(
        self, batch: list[GepaExample], candidate: dict[str, str], capture_traces: bool = False
    ) -> EvaluationBatch[Rollout, str]:
        """Answer and score every example of `batch` with the candidate's skill."""
        skill_md = render_skill(self.identity, candidate[COMPONENT])
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batch))) as pool:
            replies = list(pool.map(lambda example: self._answer(example, skill_md), batch))
        self.task_seconds += time.perf_counter() - started
        answered = [(example, reply) for example, reply in zip(batch, replies, strict=True) if reply[0] is not None]
        started = time.perf_counter()
        scores = iter(self.metric.scores([conversation(example, reply[0] or "") for example, reply in answered]))
        self.metric_seconds += time.perf_counter() - started
        rollouts = [
            Rollout(example, text, next(scores) if text is not None else 0.0, error)
            for example, (text, error) in zip(batch, replies, strict=True)
        ]
        return EvaluationBatch(
            outputs=[rollout.reply or "" for rollout in rollouts],
            scores=[rollout.score for rollout in rollouts],
            trajectories=rollouts if capture_traces else None,
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: EvaluationBatch[Rollout, str], components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        """For the skill body: each example's input, the agent's reply and the feedback on it."""
        records = [reflection_record(rollout) for rollout in eval_batch.trajectories or []]
        return {component: records for component in components_to_update}

    def propose_new_texts(
        self,
        candidate: dict[str, str],
        reflective_dataset: Mapping[str, Sequence[Mapping[str, Any]]],
        components_to_update: list[str],
    ) -> dict[str, str]:
        """A new body for each component to update, written by the reflection model."""
        return {
            component: self._propose(candidate[component], reflective_dataset[component])
            for component in components_to_update
        }

    def _propose(self, body: str, records: Sequence[Mapping[str, Any]]) -> str:
        prompt = reflection_prompt(body, records)
        started = time.perf_counter()
        try:
            return parse_body(self.reflection.complete([{"role": "user", "content": prompt}]))
        finally:
            self.reflection_seconds += time.perf_counter() - started

    def _answer(self, example: GepaExample, skill_md: str) -> tuple[str | None, str | None]:
        try:
            return self.task.complete(task_messages(example, self.identity, skill_md)), None
        except ProviderError as error:
            self.failures[example.trace_id] = error.message
            return None, error.message


def input_steps(example: GepaExample) -> list[TraceStep]:
    """The example's input messages as steps (the renderer's input)."""
    return [
        TraceStep(id=f"input-{index}", index=index, role=message.role, content=message.content)
        for index, message in enumerate(example.messages)
    ]


def conversation(example: GepaExample, reply: str) -> str:
    """The rendered conversation the reward model scores: the input, then the reply (no system message)."""
    steps = input_steps(example)
    return render_trace([*steps, TraceStep(id="reply", index=len(steps), role="assistant", content=reply)])


def reflection_record(rollout: Rollout) -> dict[str, Any]:
    """GEPA's reflective record of one rollout: `Inputs`, `Generated Outputs`, `Feedback` (never empty)."""
    return {
        "Inputs": render_trace(input_steps(rollout.example)),
        "Generated Outputs": rollout.reply if rollout.reply is not None else "(no reply)",
        "Feedback": feedback(rollout),
    }


def feedback(rollout: Rollout) -> str:
    """The score, then the reviewers' comments and the training evidence for this trace."""
    if rollout.error is not None:
        lines = [f"The agent could not answer (score 0): {rollout.error}"]
    else:
        lines = [f"Reward model score: {rollout.score:.3f} (0 to 1; higher is better)."]
    lines.extend(f"- {note}" for note in rollout.example.feedback)
    return "\n".join(lines)
