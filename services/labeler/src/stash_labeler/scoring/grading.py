"""The grader: one multiple-choice question per open step to a grading model, read as a probability distribution.

The scoring rules name the steps whose labels leave the outcome open (a tool call, a question, an
answer nobody reacted to); each gets one question about that step, shown after the conversation
before it. The options A to F are the five substantive credit labels, from strongly negative to
strongly positive, then `insufficient_evidence`, each phrased for the kind of step. The model answers
with one letter; the probabilities of the first output token's top alternatives, summed per letter
over its tokenizations ("B", " B") and normalised over the six options, are the distribution. A
response without logprobs counts as certain of the letter it names. A step that cannot be graded is
logged and left without a distribution, so it keeps its rule points.

The OpenAI client is only a type here (the caller builds it), so importing the grader's protocol
does not load the OpenAI library.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import structlog

from stash_labeler.chunks import Chunk
from stash_labeler.label_schema import StepLabel
from stash_labeler.scoring.credit import CREDIT_LABELS
from stash_labeler.traces import LabelerTrace
from stash_labeler.transcript import opening_request, render_chunk

if TYPE_CHECKING:
    import openai
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

log = structlog.get_logger(__name__)

LETTERS = "ABCDEF"
TOP_LOGPROBS = 10
OPTIONS: dict[str, tuple[str, ...]] = {
    "tool call": (
        "harmful or wrong call: it damaged something, or its result misled the work",
        "poor call: wrong tool, wrong target or malformed input, so its result was of little use",
        "harmless but unnecessary call: the work would have gone the same without it",
        "useful call: it moved the task forward",
        "necessary and well-formed call: exactly what the task needed at this point",
        "the conversation does not show enough to judge this call",
    ),
    "question": (
        "harmful question: it derailed the task or asked the user for something they had clearly ruled out",
        "needless question: the answer was already available in the conversation or the tools",
        "neither helps nor hurts: the agent could have proceeded without asking",
        "useful question: it clarified something that improved the result",
        "necessary question: the task could not be done correctly without asking it",
        "the conversation does not show enough to judge this question",
    ),
    "answer": (
        "wrong or harmful answer: it states false results or would mislead the user",
        "poor answer: mostly wrong, or it does not address the request",
        "mixed answer: partly right, or right but leaving out much of the request",
        "good answer: correct and addresses the request, with minor gaps",
        "excellent answer: correct, complete, and exactly what the user asked for",
        "the conversation does not show enough to judge this answer",
    ),
}
STEP_KINDS = {"lookup": "tool call", "change": "tool call", "question": "question", "answer": "answer"}
INSTRUCTIONS = (
    "You review one step of a recorded conversation between a user and an AI agent. The conversation "
    "before the step is shown first, each chunk with its id and its label (what the step is, not how good "
    "it was); text marked as omitted was cut to fit. Then comes a multiple-choice question about the step. "
    "Judge only what the conversation shows. Answer with the single letter of the best option and nothing else."
)


class Grader(Protocol):
    """A grading model asked one multiple-choice question per open chunk."""

    def grade(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        labels: Mapping[str, StepLabel],
        open_chunk_ids: Sequence[str],
    ) -> dict[str, dict[str, float]]:
        """Distributions over the credit labels, by chunk id; a chunk that failed is left out."""
        ...


class OpenAIGrader:
    """Asks `model` one multiple-choice question per open step through the Chat Completions API."""

    def __init__(self, client: openai.OpenAI, model: str, max_chars: int = 200_000) -> None:
        self.client = client
        self.model = model
        self.max_chars = max_chars

    def grade(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        labels: Mapping[str, StepLabel],
        open_chunk_ids: Sequence[str],
    ) -> dict[str, dict[str, float]]:
        """Distributions over the credit labels by chunk id; a step whose question failed is left out."""
        positions = {chunk.chunk_id: position for position, chunk in enumerate(chunks)}
        graded: dict[str, dict[str, float]] = {}
        for chunk_id in open_chunk_ids:
            # A quality check is optional: whatever goes wrong with one step, it keeps its rule points.
            try:
                graded[chunk_id] = self._grade_step(chunks, positions[chunk_id], labels)
            except Exception as error:
                log.warning("quality check failed", trace_id=trace.id, chunk_id=chunk_id, error=repr(error))
        return graded

    def _grade_step(self, chunks: Sequence[Chunk], position: int, labels: Mapping[str, StepLabel]) -> dict[str, float]:
        chunk = chunks[position]
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": render_context(chunks, position, labels, self.max_chars)},
            {"role": "user", "content": render_question(chunk, labels[chunk.chunk_id])},
        ]
        completion = self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            logprobs=True,
            top_logprobs=TOP_LOGPROBS,
            max_completion_tokens=1,
        )
        return read_distribution(completion)


def render_context(chunks: Sequence[Chunk], position: int, labels: Mapping[str, StepLabel], max_chars: int) -> str:
    """The step at `position` after as many chunks before it as fit in `max_chars`, plus the request that opened it."""
    limit = max_chars // 4
    step = render_chunk(chunks[position], labels.get(chunks[position].chunk_id), limit)
    shown: list[str] = []
    used = len(step)
    for earlier in range(position - 1, -1, -1):
        block = render_chunk(chunks[earlier], labels.get(chunks[earlier].chunk_id), limit)
        if used + len(block) > max_chars - limit:
            break
        shown.insert(0, block)
        used += len(block)
    opening = opening_request(chunks, position, labels)
    if opening is not None and opening < position - len(shown):
        carried = render_chunk(chunks[opening], labels.get(chunks[opening].chunk_id), limit)
        shown.insert(0, f"Carried over: the user request that opened the task.\n{carried}")
    return "\n\n".join([*shown, f"The step to judge:\n{step}"])


def render_question(chunk: Chunk, label: StepLabel) -> str:
    """The multiple-choice question about one step, its options phrased for the kind of step."""
    kind = STEP_KINDS.get(label.type or "")
    if kind is None:
        raise ValueError(f"{chunk.chunk_id} is a {label.actor} {label.type or 'step'}, which has no quality question")
    options = "\n".join(f"{letter}. {text}" for letter, text in zip(LETTERS, OPTIONS[kind], strict=True))
    return f"How good was the {kind} {chunk.chunk_id}?\n{options}\nAnswer with one letter: A, B, C, D, E or F."


def read_distribution(completion: ChatCompletion) -> dict[str, float]:
    """The credit-label distribution of an answer: from its first token's logprobs, else its letter for certain."""
    choice = completion.choices[0]
    content = choice.logprobs.content if choice.logprobs is not None else None
    if content:
        distribution = distribution_from_logprobs((top.token, top.logprob) for top in content[0].top_logprobs)
        if distribution is not None:
            return distribution
    letter = re.search(r"\b([A-F])\b", choice.message.content or "")
    if letter is None:
        raise ValueError(f"the answer names no option: {choice.message.content!r}")
    return {label: float(option == letter.group(1)) for option, label in zip(LETTERS, CREDIT_LABELS, strict=True)}


def distribution_from_logprobs(alternatives: Iterable[tuple[str, float]]) -> dict[str, float] | None:
    """Token alternatives (token, logprob) as a distribution over the options; None when no option is among them."""
    mass = dict.fromkeys(LETTERS, 0.0)
    for token, logprob in alternatives:
        letter = token.strip().strip("().:")
        if letter in mass:
            mass[letter] += math.exp(logprob)
    total = math.fsum(mass.values())
    if total <= 0.0:
        return None
    return {label: mass[letter] / total for letter, label in zip(LETTERS, CREDIT_LABELS, strict=True)}
