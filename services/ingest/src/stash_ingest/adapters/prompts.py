"""Counting the steps of LLM calls' prompts while a large document streams by (Langfuse, LangSmith).

Langfuse generations and LangSmith llm runs hold, for every call, the whole history it was sent: a trace far
over the step limit is one call whose prompt holds a million messages, deep inside the document. Parsing the
document to find that out builds about five times its bytes; here its JSON events stream by (ijson), each
message of a prompt is built alone and dropped once counted, and the count stops at the first step over the
limit.

The count never exceeds what the adapter will make of the document, so nothing within the limits is refused:
a call counts once its own fields say it is an LLM call (`type`, `run_type`), wherever they stand in it; a list
counts where the adapter takes its items for the prompt; each message counts the steps the adapter's own rule
makes of it (an unknown role, none). What cannot be told while streaming is left out of the count: a later
record updating the same call, a prompt written as JSON text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import ijson
from ijson.common import ObjectBuilder

from stash_ingest.limits import TraceLimits, check_spans_read, check_steps_read

# An object's members as far as it has been read: scalars as they are, an object as {}, an array as [].
Fields = Mapping[str, Any]


@dataclass(frozen=True)
class Prompts:
    """Where one format's LLM calls keep their prompts, and how many steps the adapter makes of a message.

    `lists`: the path below a call of each list whose items may be the prompt → the test, on the members of the
    object holding the list, that the adapter reads that list (applied once the holder has been read whole), or
    None where it always does. `nested`: what a list inside a prompt list is: more messages (`flatten`, Langfuse),
    or, as its first item, the prompt itself (`first`: LangChain logs one message list per batched prompt and the
    first is read; a later list, or a list after a message, makes no step that can be told without reading it).
    `spans`: every object at the calls' prefix is a span, one per distinct id (Langfuse merges observations by id),
    so they are counted in the same pass."""

    is_call: Callable[[Fields], bool]
    lists: Mapping[str, Callable[[Fields], bool] | None]
    steps: Callable[[Any], int]
    nested: Literal["flatten", "first"]
    spans: bool = False


def check_prompts(data: bytes, calls: str, prompts: Prompts, where: str, limits: TraceLimits) -> None:
    """INVALID_ARGUMENT naming `where` at the first call at `calls` (an ijson prefix) whose prompt makes more steps
    than a trace may hold, read from the document's events; invalid JSON ends the count (parsing reports it)."""
    reader = _CallReader(calls, prompts, where, limits)
    try:
        for prefix, event, value in ijson.parse(data, buf_size=_READ_BYTES, use_float=True):
            reader.read(prefix, event, value)
    except ijson.JSONError:
        return


# ijson's C parser queues the events of each piece it reads (about 25 bytes of events a byte): pieces of this size
# keep that queue near the size of the messages counted.
_READ_BYTES = 1 << 13
_SCALARS = frozenset({"string", "number", "boolean", "null"})
_OPENERS = frozenset({"start_map", "start_array"})
_CLOSERS = frozenset({"end_map", "end_array"})


class _Value:
    """One JSON value read from its events: built, or only passed over."""

    def __init__(self, keep: bool) -> None:
        self.builder = ObjectBuilder() if keep else None
        self.depth = 0

    def read(self, event: str, value: Any) -> bool:
        """Take one event of the value; True once it is whole."""
        if self.builder is not None:
            self.builder.event(event, value)
        self.depth += (event in _OPENERS) - (event in _CLOSERS)
        return self.depth == 0

    @property
    def built(self) -> Any:
        return self.builder.value if self.builder is not None else None


@dataclass
class _PromptList:
    """One list of a call that may be its prompt, as it streams by: the steps of its messages so far."""

    prefix: str
    prompts: Prompts
    most: int
    steps: int = 0
    value: _Value | None = None  # the message being built, or a value being passed over
    first_is_list: bool | None = None  # `first`: whether the list's first item is the prompt
    done: bool = False  # `first`: the prompt has been read; what follows makes no step

    def read(self, prefix: str, event: str, value: Any) -> bool:
        """Take one event inside the list; True at its end."""
        if self.value is not None:
            if self.value.read(event, value):
                self.steps += self.prompts.steps(self.value.built) if self.value.builder is not None else 0
                self.value = None
            return False
        if event == "end_array":
            if prefix == self.prefix:
                return True
            self.done = self.done or self.prompts.nested == "first"  # the first item, a list, was the prompt
            return False
        self._start(prefix[len(self.prefix) :].count(".item"), event, value)
        return False

    def _start(self, depth: int, event: str, value: Any) -> None:
        """A value starts `depth` lists deep (1: an item of this list)."""
        if self.prompts.nested == "first" and depth == 1 and self.first_is_list is None:
            self.first_is_list = event == "start_array"
            if self.first_is_list:
                return
        if event == "start_array" and (self.prompts.nested == "flatten" or self.done):
            return  # its items are read as they come
        is_message = event != "start_array" and not self.done and self.steps <= self.most
        if self.prompts.nested == "first":
            is_message = is_message and depth == (2 if self.first_is_list else 1)
        if event in _SCALARS:
            self.steps += self.prompts.steps(value) if is_message else 0
            return
        self.value = _Value(keep=is_message)
        self.value.read(event, value)


@dataclass
class _Call:
    """One call as it streams by: the members of the call and of the prompts' holders, and whether a prompt list
    was over the limit."""

    members: dict[str, dict[str, Any]] = field(default_factory=dict)  # prefix of an object → its members so far
    waiting: set[str] = field(default_factory=set)  # lists over the limit, until their holder passes its test
    over: bool = False


class _CallReader:
    """The document's events, read for the calls at one prefix."""

    def __init__(self, calls: str, prompts: Prompts, where: str, limits: TraceLimits) -> None:
        self.calls, self.prompts, self.where, self.limits = calls, prompts, where, limits
        self.most = max(limits.steps_per_trace, 2)  # a list of two strings may be one LangChain message pair
        base = f"{calls}." if calls else ""
        self.gates = {base + path: gate for path, gate in prompts.lists.items()}
        self.holders = {calls, *(path.rpartition(".")[0] for path in self.gates)}
        self.call: _Call | None = None
        self.list: _PromptList | None = None
        self.member: tuple[str, str] | None = None  # (object prefix, key) of the member whose value comes next
        self.span_ids: set[str] = set()
        self.spans_without_id = 0

    def read(self, prefix: str, event: str, value: Any) -> None:
        """Take the document's next event."""
        if self.call is None:
            if prefix == self.calls and event == "start_map":
                self.call = _Call({self.calls: {}})
            return
        if self.list is not None:
            if self.list.read(prefix, event, value):
                self._list_read(self.list)
            elif self.list.steps > self.most and self.gates[self.list.prefix] is None and not self.call.over:
                self._over()
            return
        self._read_member(prefix, event, value)

    def _read_member(self, prefix: str, event: str, value: Any) -> None:
        call = self.call
        assert call is not None
        if self.member is not None:
            holder, key = self.member
            call.members[holder][key] = value if event in _SCALARS else ({} if event == "start_map" else [])
            self.member = None
        if prefix in self.gates and event == "start_array":
            self.list = _PromptList(prefix, self.prompts, self.most)
        elif prefix in self.holders and event == "map_key":
            self.member = (prefix, value)
        elif prefix in self.holders and event == "start_map":
            call.members[prefix] = {}
        elif prefix in self.holders and event == "end_map":
            self._holder_read(prefix)

    def _list_read(self, prompt: _PromptList) -> None:
        assert self.call is not None
        self.list = None
        if prompt.steps > self.most and self.gates[prompt.prefix] is None:
            self._over()
        elif prompt.steps > self.most:
            self.call.waiting.add(prompt.prefix)

    def _holder_read(self, holder: str) -> None:
        """At the end of an object holding prompt lists (or of the call): over the limit if one of the lists over it
        is what the adapter reads."""
        assert self.call is not None
        members = self.call.members[holder]
        held = {path for path in self.call.waiting if (path.rpartition(".")[0] or self.calls) == holder}
        if any(gate(members) for path in held if (gate := self.gates[path]) is not None):
            self._over()
        self.call.waiting -= held
        if holder == self.calls:
            if self.call.over and self.prompts.is_call(members):
                check_steps_read(self.most + 1, self.where, self.limits)
            if self.prompts.spans:
                self._count_span(members)
            self.call = None

    def _count_span(self, call: Fields) -> None:
        span_id = call.get("id")
        if isinstance(span_id, str) and span_id.strip():
            self.span_ids.add(span_id)
        else:
            self.spans_without_id += 1
        check_spans_read(len(self.span_ids) + self.spans_without_id, self.where, self.limits)

    def _over(self) -> None:
        """A prompt list of the current call makes more steps than a trace may hold: refused once it is a call."""
        assert self.call is not None
        self.call.over = True
        if self.prompts.is_call(self.call.members[self.calls]):
            check_steps_read(self.most + 1, self.where, self.limits)
