"""The step label schema: what a step *is*, without judging it.

A label belongs to a chunk (a user message, an agent message, or a tool call with its result) and is
copied onto every step of that chunk as `steps[].metadata.label`. User chunks carry `intent`,
`verdict`, `verdict_target` and `sentiment`; agent chunks carry `type`, `effect`, `result`,
`duplicate_of`, `is_output`, `outcome`, `stance` and `coverage`. Both carry `evidence` and `note`.

Vocabularies (the scoring rules in `scoring/rule_scores.py` read exactly these):

- intent: request (starts a new task), follow_up, correction (continue it), answer (replies to the
  agent's question), feedback (only reacts), other
- verdict: accepted, partially_accepted, rejected, none — the reaction to the answer `verdict_target`
- sentiment: positive, neutral, negative
- type: lookup (a call that reads), change (a call that changes something), question (to the user),
  answer (handed to the user), message (narration between actions)
- effect: read, write, none; result: ok, error, not_found, empty, none (messages)
- is_output: whether the user is meant to read it (answers and questions)
- outcome: done, partial, failed, none — what an answer claims about the task
- stance: confident, hedged, none; coverage: complete, partial, none
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Intent = Literal["request", "follow_up", "correction", "answer", "feedback", "other"]
Verdict = Literal["accepted", "partially_accepted", "rejected", "none"]
Sentiment = Literal["positive", "neutral", "negative"]
ActionType = Literal["lookup", "change", "question", "answer", "message"]
Effect = Literal["read", "write", "none"]
Result = Literal["ok", "error", "not_found", "empty", "none"]
Outcome = Literal["done", "partial", "failed", "none"]
Stance = Literal["confident", "hedged", "none"]
Coverage = Literal["complete", "partial", "none"]

EVIDENCE_MAX_CHARS = 500
REQUIRED_FIELDS = {
    "user": ("intent", "verdict", "sentiment"),
    "agent": ("type", "effect", "result", "is_output", "outcome", "stance", "coverage"),
}
ACTOR_FIELDS = {
    "user": (*REQUIRED_FIELDS["user"], "verdict_target"),
    "agent": (*REQUIRED_FIELDS["agent"], "duplicate_of"),
}


class LabelSource(StrEnum):
    """What produced a label."""

    IMPORTED = "imported"
    LLM = "llm"
    RULES = "rules"


class StepLabel(BaseModel):
    """One chunk's label, in the spec's schema; unknown keys and values outside the vocabularies are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunk_id: str = Field(min_length=1)
    task_id: str = Field(min_length=1)
    actor: Literal["user", "agent"]
    intent: Intent | None = None
    verdict: Verdict | None = None
    verdict_target: str | None = None
    sentiment: Sentiment | None = None
    type: ActionType | None = None
    effect: Effect | None = None
    result: Result | None = None
    duplicate_of: str | None = None
    is_output: bool | None = None
    outcome: Outcome | None = None
    stance: Stance | None = None
    coverage: Coverage | None = None
    evidence: str | None = Field(None, max_length=EVIDENCE_MAX_CHARS)
    note: str | None = Field(None, max_length=EVIDENCE_MAX_CHARS)

    @model_validator(mode="after")
    def _fields_of_the_actor(self) -> StepLabel:
        other = "agent" if self.actor == "user" else "user"
        missing = [name for name in REQUIRED_FIELDS[self.actor] if getattr(self, name) is None]
        foreign = [name for name in ACTOR_FIELDS[other] if getattr(self, name) is not None]
        if missing:
            raise ValueError(f"a {self.actor} label needs {', '.join(missing)}")
        if foreign:
            raise ValueError(f"a {self.actor} label cannot have {', '.join(foreign)}")
        return self

    @classmethod
    def trusted(cls, **fields: Any) -> StepLabel:
        """A label from fields our own rules built, not validated again: what `model_construct` does without its
        per-field default and alias handling.

        Validating each rule label took an eighth of in-process labelling, and `model_construct` is slower than
        validating; the tests validate every label the rules give on the golden traces instead.
        """
        label = cls.__new__(cls)
        object.__setattr__(label, "__dict__", {**UNSET_FIELDS, **fields})
        object.__setattr__(label, "__pydantic_fields_set__", set(fields))
        object.__setattr__(label, "__pydantic_extra__", None)
        object.__setattr__(label, "__pydantic_private__", None)
        return label

    @property
    def is_answer(self) -> bool:
        """An answer handed to the user."""
        return self.actor == "agent" and self.type == "answer"

    @property
    def reacted(self) -> bool:
        """A user verdict about an earlier answer."""
        return self.actor == "user" and self.verdict not in (None, "none") and self.verdict_target is not None

    def as_metadata(self) -> dict[str, object]:
        """The label as `steps[].metadata.label`, without unset fields.

        Equal to `model_dump(exclude_none=True)`: every field is a str or a bool, so reading the fields in
        their declared order is the dump, at a fraction of pydantic's cost (this runs once per chunk).
        """
        return {name: value for name, value in self.__dict__.items() if value is not None}


# Every field unset, in declared order: `trusted` fills these in, so its labels dump their fields in that order.
UNSET_FIELDS: dict[str, None] = dict.fromkeys(StepLabel.model_fields)
