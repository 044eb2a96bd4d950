"""The rule-based labeler: the observable facts a trace states about itself, used when no model is configured.

User chunks
- The first user message, and any later one that is not a reaction, a follow-up or an answer, is a
  `request` and starts a new task.
- A reply right after the agent asked a question is an `answer`.
- The reaction lexicon below decides `verdict` and `sentiment`: a negative phrase rejects the latest
  answer (`correction` when the message asks for something else, `feedback` otherwise); a positive
  phrase accepts it, or partly accepts it when a reservation follows ("but", "however", …).
  `verdict_target` is the latest answer before the message.
- A message opening with a follow-up phrase ("also", "what about", …) is a `follow_up` in the same task.

Agent chunks
- A tool call is a `change` when its tool name (or shell command) names a writing verb, a `lookup`
  otherwise. A shell command is a lookup only when it starts with a read-only command.
- `result`: `error` for a result flagged as an error or with a non-zero exit code, `empty` for an
  empty result, `not_found` for the not-found phrases, `none` without a result, `ok` otherwise.
- `duplicate_of`: the earlier call with the same tool and the same arguments.
- An agent message followed by more agent work before the user speaks is narration (`message`); the
  last message of a turn is a `question` when it ends with a question mark, an `answer` otherwise.
  An answer's `outcome` is `failed` or `partial` by the phrases below, `done` otherwise; its `stance`
  is `hedged` when it hedges, `confident` otherwise; `coverage` follows the outcome.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

import orjson

from stash_labeler.chunks import Chunk
from stash_labeler.label_schema import EVIDENCE_MAX_CHARS, LabelSource, StepLabel
from stash_labeler.traces import LabelerTrace


class Phrases:
    """Whole-phrase, case-insensitive search for any of a lexicon's phrases.

    The full expression checks the surroundings of every phrase at every position; in ASCII text (where
    ignoring case is exactly lowering it) a phrase can only match where its lowered spelling occurs, which
    a plain alternation finds much faster, so text without any of them is answered without the full one.
    """

    def __init__(self, *words: str) -> None:
        self.pattern = re.compile(r"(?<![\w'])(" + "|".join(re.escape(w) for w in words) + r")(?![\w'])", re.IGNORECASE)
        self.spellings = re.compile("|".join(re.escape(word.lower()) for word in words))

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """The first phrase at or after `pos`, like `re.Pattern.search`."""
        if text.isascii() and self.spellings.search(text.lower(), pos) is None:
            return None
        return self.pattern.search(text, pos)


class Lexicons:
    """Several lexicons searched in the same text: one plain search for all their spellings rules out at once the
    many texts that hold none of them."""

    def __init__(self, *lexicons: Phrases) -> None:
        self.spellings = re.compile("|".join(lexicon.spellings.pattern for lexicon in lexicons))

    def absent(self, text: str) -> bool:
        """Whether no phrase of any of the lexicons can occur in `text`."""
        return text.isascii() and self.spellings.search(text.lower()) is None


POSITIVE = Phrases(
    "thanks", "thank you", "thx", "great", "perfect", "awesome", "excellent", "that works", "works now",
    "it works", "exactly", "looks good", "lgtm", "nice", "correct", "brilliant", "helpful", "solved", "fixed it",
)  # fmt: skip
NEGATIVE = Phrases(
    "wrong", "incorrect", "not what i asked", "doesn't work", "does not work", "didn't work", "did not work",
    "still broken", "still failing", "not right", "that's not", "that is not", "useless", "no,", "nope",
    "you didn't", "you did not", "you broke", "broke", "mistake", "not helpful", "stop", "undo", "revert",
)  # fmt: skip
RESERVATION = Phrases("but", "however", "except", "although", "almost", "mostly", "partly")
FOLLOW_UP = re.compile(r"^\s*(also|and|what about|how about|one more|another thing|additionally|then)\b", re.I)
NOT_FOUND = Phrases("not found", "no such", "does not exist", "doesn't exist", "no results", "0 results", "404")
FAILED = Phrases(
    "i couldn't", "i could not", "i can't", "i cannot", "unable to", "not able to", "failed to", "unfortunately",
    "i was not able", "i wasn't able", "no way to",
)  # fmt: skip
PARTIAL = Phrases("partially", "some of", "part of", "for now", "remaining", "still need", "not yet")
HEDGED = Phrases(
    "i think", "might", "may", "maybe", "probably", "possibly", "not sure", "it seems", "seems", "likely",
    "should work", "i believe", "perhaps", "if i understand",
)  # fmt: skip
REACTIONS = Lexicons(NEGATIVE, POSITIVE)
CLAIMS = Lexicons(FAILED, PARTIAL, HEDGED)
WRITE_VERBS = frozenset(
    "create update delete remove write edit set send post put patch apply cancel refund book submit insert add "
    "move rename upload publish modify replace issue charge reset commit push merge deploy install multiedit "
    "notebookedit".split()
)
READ_ONLY_COMMANDS = frozenset(
    "ls cat head tail less grep rg find pwd echo wc sed awk tree stat file which git-status git-diff git-log "
    "git-show diff du df env printenv type".split()
)
SHELL_TOOLS = frozenset({"bash", "shell", "exec_command", "local_shell", "run_command", "terminal"})


class RuleLabeler:
    """Labels every target from the trace alone; never calls a model."""

    source = LabelSource.RULES

    def label(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        targets: Sequence[str],
        known: Mapping[str, StepLabel],
    ) -> dict[str, StepLabel]:
        """Label the whole trace in one pass (task ids need every earlier chunk) and return the targets."""
        wanted = set(targets)
        return {label.chunk_id: label for label in label_chunks(chunks) if label.chunk_id in wanted}


def label_chunks(chunks: Sequence[Chunk]) -> list[StepLabel]:
    """Labels of every chunk, in order; each request starts the next task (agent work before it joins t0)."""
    labels: list[StepLabel] = []
    first_calls: dict[bytes, str] = {}  # call signature → the first chunk that made that call
    tasks_started = 0  # the first user message starts the first task, so 0 also means no user spoke yet
    latest_answer: StepLabel | None = None  # what a user's verdict is about
    for chunk, ends_turn in zip(chunks, _turn_ends(chunks), strict=True):
        signature = _call_signature(chunk) if chunk.kind == "tool_call" and chunk.action.role == "assistant" else None
        if chunk.kind == "user":
            reaction = _Reaction.of(chunk.action.content)
            intent = _user_intent(chunk.action.content, reaction, labels, latest_answer, tasks_started == 0)
            tasks_started += intent == "request"
            label = _user_label(chunk, reaction, latest_answer, intent, _task(tasks_started))
        else:
            repeat_of = first_calls.get(signature) if signature is not None else None
            label = _agent_label(chunk, ends_turn, _task(tasks_started), repeat_of)
            latest_answer = label if label.is_answer else latest_answer
        if signature is not None:
            first_calls.setdefault(signature, chunk.chunk_id)
        labels.append(label)
    return labels


def _turn_ends(chunks: Sequence[Chunk]) -> list[bool]:
    """Whether each chunk ends its turn: no tool call follows it before the user speaks again (one pass backwards)."""
    ends = [True] * len(chunks)
    call_ahead = False
    for position in range(len(chunks) - 1, -1, -1):
        ends[position] = not call_ahead
        kind = chunks[position].kind
        call_ahead = kind == "tool_call" or (call_ahead and kind != "user")
    return ends


def _task(tasks_started: int) -> str:
    return f"t{max(tasks_started - 1, 0)}"


class _Reaction:
    """What the reaction lexicon finds in a user message: each lexicon is searched once."""

    __slots__ = ("negative", "positive", "text")

    def __init__(self, text: str, negative: re.Match[str] | None, positive: re.Match[str] | None) -> None:
        self.text, self.negative, self.positive = text, negative, positive

    @classmethod
    def of(cls, text: str) -> _Reaction:
        if REACTIONS.absent(text):
            return cls(text, None, None)
        return cls(text, NEGATIVE.search(text), POSITIVE.search(text))

    def verdict(self) -> tuple[str, re.Match[str] | None]:
        """The verdict on the latest answer, and the phrase that decided it."""
        if self.negative:
            return "rejected", self.negative
        if self.positive:
            reserved = RESERVATION.search(self.text, self.positive.end())
            return ("partially_accepted" if reserved else "accepted"), self.positive
        return "none", None

    def sentiment(self) -> str:
        return "negative" if self.negative else "positive" if self.positive else "neutral"


def _user_label(
    chunk: Chunk, reaction: _Reaction, latest_answer: StepLabel | None, intent: str, task_id: str
) -> StepLabel:
    verdict, phrase = reaction.verdict() if latest_answer is not None else ("none", None)
    return StepLabel.trusted(
        chunk_id=chunk.chunk_id,
        task_id=task_id,
        actor="user",
        intent=intent,
        verdict=verdict,
        verdict_target=latest_answer.chunk_id if verdict != "none" and latest_answer else None,
        sentiment=reaction.sentiment(),
        evidence=_excerpt(phrase.group(0)) if phrase else None,
        note=f"reaction lexicon: {phrase.group(0)!r}" if phrase else None,
    )


def _user_intent(
    text: str, reaction: _Reaction, earlier: Sequence[StepLabel], latest_answer: StepLabel | None, first: bool
) -> str:
    if first:
        return "request"
    if earlier[-1].type == "question":
        return "answer"
    verdict = reaction.verdict()[0] if latest_answer else "none"
    if verdict == "rejected":
        return "correction" if len(text.split()) > 6 else "feedback"
    if verdict != "none":
        return "feedback" if len(text.split()) <= 12 and "?" not in text else "follow_up"
    return "follow_up" if FOLLOW_UP.match(text) else "request"


def _agent_label(chunk: Chunk, ends_turn: bool, task_id: str, repeat_of: str | None) -> StepLabel:
    if chunk.kind == "tool_call":
        return _tool_label(chunk, repeat_of, task_id)
    text = chunk.action.content
    if not ends_turn:
        return _agent_message(chunk, task_id, "message", outcome="none", stance="none", coverage="none")
    if text.rstrip().endswith("?"):
        return _agent_message(chunk, task_id, "question", outcome="none", stance="none", coverage="none")
    failed = partial = hedged = None
    if not CLAIMS.absent(text):
        failed = FAILED.search(text)
        partial = None if failed else PARTIAL.search(text)  # a failure decides the outcome and the evidence
        hedged = HEDGED.search(text)
    outcome = "failed" if failed else "partial" if partial else "done"
    return _agent_message(
        chunk,
        task_id,
        "answer",
        outcome=outcome,
        stance="hedged" if hedged else "confident",
        coverage={"done": "complete", "partial": "partial", "failed": "none"}[outcome],
        evidence=(failed or partial or hedged),
    )


def _agent_message(
    chunk: Chunk,
    task_id: str,
    kind: str,
    *,
    outcome: str,
    stance: str,
    coverage: str,
    evidence: re.Match[str] | None = None,
) -> StepLabel:
    return StepLabel.trusted(
        chunk_id=chunk.chunk_id,
        task_id=task_id,
        actor="agent",
        type=kind,
        effect="none",
        result="none",
        is_output=kind in ("answer", "question"),
        outcome=outcome,
        stance=stance,
        coverage=coverage,
        evidence=_excerpt(evidence.group(0)) if evidence else None,
    )


def _tool_label(chunk: Chunk, repeat_of: str | None, task_id: str) -> StepLabel:
    """`repeat_of`: the earlier chunk that made the same call."""
    call = chunk.action
    writes = _writes(call.tool_name or "", call.tool_input or {})
    result, evidence = _result(chunk)
    return StepLabel.trusted(
        chunk_id=chunk.chunk_id,
        task_id=task_id,
        actor="agent",
        type="change" if writes else "lookup",
        effect="write" if writes else "read",
        result=result,
        duplicate_of=repeat_of,
        is_output=False,
        outcome="none",
        stance="none",
        coverage="none",
        evidence=evidence,
        note=f"tool {call.tool_name}" if call.tool_name else None,
    )


def _writes(tool_name: str, tool_input: Mapping[str, object]) -> bool:
    if tool_name.lower() in SHELL_TOOLS:
        return not _read_only_command(_command(tool_input))
    return _names_a_write(tool_name)


@lru_cache(maxsize=4096)
def _names_a_write(tool_name: str) -> bool:
    """Whether a tool's name has a writing verb in it (a trace calls the same few tools again and again)."""
    return any(word in WRITE_VERBS for word in re.split(r"[^a-z]+", _split_camel(tool_name).lower()) if word)


def _split_camel(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name)


def _command(tool_input: Mapping[str, object]) -> str:
    command = tool_input.get("command", tool_input.get("cmd", ""))
    if isinstance(command, list):
        command = " ".join(str(part) for part in command)
    return str(command)


def _read_only_command(command: str) -> bool:
    """Every command of a chain or pipeline starts with a read-only program and nothing is redirected to a file."""
    script = command.replace("bash -lc", "").strip(" '\"")
    segments = [segment.split() for segment in re.split(r"&&|\|\||;|\|", script)]
    if not script or re.search(r"(^|[^>&0-9])>[^&]", script):
        return False
    return all(segment and _read_only_program(segment) for segment in segments)


def _read_only_program(words: list[str]) -> bool:
    head = f"git-{words[1]}" if words[0] == "git" and len(words) > 1 else words[0]
    if head == "sed" and any(word.startswith("-i") or word.startswith("--in-place") for word in words[1:]):
        return False
    return head in READ_ONLY_COMMANDS


def _result(chunk: Chunk) -> tuple[str, str | None]:
    result = chunk.result if chunk.action.role != "tool" else chunk.action
    if result is None:
        return "none", None
    exit_code = result.metadata.get("exit_code")
    failed_exit = isinstance(exit_code, int | float) and not isinstance(exit_code, bool) and exit_code != 0
    if result.metadata.get("is_error") is True or failed_exit:
        return "error", _excerpt(result.content) or None
    if not result.content.strip():
        return "empty", None
    not_found = NOT_FOUND.search(result.content)
    if not_found:
        return "not_found", _excerpt(not_found.group(0))
    return "ok", None


def _call_signature(chunk: Chunk) -> bytes:
    return orjson.dumps([chunk.action.tool_name, chunk.action.tool_input], option=orjson.OPT_SORT_KEYS)


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_MAX_CHARS else text[: EVIDENCE_MAX_CHARS - 1] + "…"
