"""Chat messages as frameworks log them, turned into steps, and the merge of LLM calls that resend them.

Langfuse observations and LangSmith runs hold, for every LLM call, the whole history that call was
sent, as OpenAI chat messages, Responses-API items, Anthropic content blocks or OTel GenAI parts.
Each adapter finds the messages in its own envelope and reads the block types its frameworks write
(a table of `BlockReader`s each: they fall back to different keys). What is the same is here: a
message's content sorted into `Parts`, the order parts become steps, tool calls and results as
steps, and `merge_calls`, which keeps each message once however many calls resend it.

`media_text` and `with_metadata` serve every adapter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from stash_ingest.adapters.reading import as_object, nonblank, normalize_timestamp, to_json_text
from stash_ingest.limits import TraceLimits, check_steps_read
from stash_ingest.traces import Step

# The role names frameworks write, as canonical roles.
ROLES: Mapping[str, str] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
}
_TEXT_BLOCKS = ("text", "input_text", "output_text")
_IMAGE_BLOCKS = ("image", "image_url", "input_image")


@dataclass
class Parts:
    """One message's content, sorted by what becomes of it."""

    texts: list[str] = field(default_factory=list)
    calls: list[Step] = field(default_factory=list)
    results: list[Step] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)


BlockReader = Callable[[Parts, dict[str, Any]], None]  # adds one content block to the parts
Call = tuple[list[Step], list[Step]]  # one LLM call's input steps and output steps
# A tool run, the steps so far and the call ids answered → the run's result step, or None.
ToolAnswer = Callable[[dict[str, Any], list[Step], set[str | None]], Step | None]


# --- one message -------------------------------------------------------------------------------


def read_parts(content: Any, readers: Mapping[str, BlockReader]) -> Parts:
    """A message's content (text, one block or a list of both) as parts; blocks without a reader are skipped."""
    parts = Parts()
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.texts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("type"), str) and block["type"] in readers:
            readers[block["type"]](parts, block)
    return parts


def message_steps(role: str, parts: Parts) -> list[Step]:
    """Text first for an assistant (then its calls); tool results first for a user turn."""
    text = "\n".join(piece for piece in parts.texts if piece)
    message = [Step(role, text)] if text.strip() else []
    if role == "assistant":
        return [*message, *parts.calls, *parts.results]
    return [*parts.results, *message, *parts.calls]


def attach_reasoning(items: Iterable[tuple[list[Step], list[str]]], where: str, limits: TraceLimits) -> list[Step]:
    """The steps of successive items; each item's reasoning goes to the first step it or a later item makes.

    One LLM call's messages all end up in the trace, so more of them than a trace may hold stops the reading
    of `items` (a generator) at once, naming the trace read at `where`."""
    steps: list[Step] = []
    reasoning: list[str] = []
    for produced, thoughts in items:
        reasoning.extend(thoughts)
        if produced and reasoning:
            produced[0] = with_metadata(produced[0], {"reasoning": "\n".join(reasoning)})
            reasoning = []
        steps.extend(produced)
        check_steps_read(len(steps), where, limits)
    return steps


def call_steps(call_id: Any, name: Any, arguments: Any) -> list[Step]:
    """A tool call as one assistant step (arguments as an object), or none when it has no name."""
    if not isinstance(name, str) or not name:
        return []
    return [Step("assistant", "", tool_name=name, tool_input=as_object(arguments), tool_call_id=nonblank(call_id))]


def result_step(call_id: Any, name: Any, text: str, is_error: bool) -> Step:
    """A tool step answering `call_id`; `metadata["is_error"]` only when the tool failed."""
    metadata = {"is_error": True} if is_error else {}
    return Step("tool", text, tool_name=nonblank(name), tool_call_id=nonblank(call_id), metadata=metadata)


def result_text(value: Any, url_key: str) -> str:
    """A tool result as text: strings as they are, block lists joined by newlines, objects as JSON."""
    if isinstance(value, list):
        return "\n".join(_block_text(block, url_key) for block in value)
    return "" if value is None else to_json_text(value)


def _block_text(block: Any, url_key: str) -> str:
    if isinstance(block, dict) and block.get("type") in _TEXT_BLOCKS:
        return str(block.get("text", ""))
    if isinstance(block, dict) and block.get("type") in _IMAGE_BLOCKS:
        return image_text(block, url_key)
    return to_json_text(block)


def image_text(block: dict[str, Any], url_key: str) -> str:
    """An image block's place in text, with the URL from `image_url`, else `url_key`, else an Anthropic url source.

    `url_key` is where the adapter's frameworks put a bare URL: `uri` in OTel parts, `url` in LangChain blocks.
    """
    url = block.get("image_url", block.get(url_key))
    if isinstance(url, dict):
        url = url.get("url")
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "url":
        url = source.get("url")
    return media_text(url)


def media_text(url: Any, modality: str = "image") -> str:
    """An image's place in text: "[image: <url>]" for an http(s) URL, else "[image]" (`modality` names other media).

    Data URLs and inline bytes can be megabytes of base64; only a fetchable address is worth keeping.
    """
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return f"[{modality}: {url}]"
    return f"[{modality}]"


def collect_texts(value: Any) -> list[str]:
    """The non-blank texts of a string, or of a list of strings and `{text}` objects (a reasoning summary)."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list):
        entries = (entry.get("text") if isinstance(entry, dict) else entry for entry in value)
        return [text for entry in entries for text in collect_texts(entry)]
    return []


def with_metadata(step: Step, extra: Mapping[str, Any]) -> Step:
    """The step with `extra` added to its metadata (a key already there takes the new value)."""
    return replace(step, metadata={**step.metadata, **extra})


def stamp_steps(steps: list[Step], value: Any) -> list[Step]:
    """The steps with `metadata["timestamp"]` from a recorded time; as they are when the time is unreadable."""
    timestamp = normalize_timestamp(value)
    if timestamp is None:
        return steps
    return [with_metadata(step, {"timestamp": timestamp}) for step in steps]


# --- calls that resend the history -------------------------------------------------------------


class _History:
    """The merged conversation, plus a trie of every call's messages to find what a call repeats."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._trie: dict[tuple[int, tuple[Any, ...]], int] = {}

    def add_call(self, inputs: list[Step], outputs: list[Step]) -> tuple[int, ...]:
        """Append the input beyond the longest known history, then the output; the new step indices."""
        known = self._known(inputs)
        node = 0
        for step in [*inputs, *outputs]:
            node = self._trie.setdefault((node, _key(step)), len(self._trie) + 1)
        return self.add_steps([*inputs[known:], *outputs])

    def add_steps(self, steps: list[Step]) -> tuple[int, ...]:
        """Append steps as they are; the new step indices."""
        start = len(self.steps)
        self.steps.extend(steps)
        return tuple(range(start, len(self.steps)))

    def _known(self, steps: list[Step]) -> int:
        node = 0
        for depth, step in enumerate(steps):
            child = self._trie.get((node, _key(step)))
            if child is None:
                return depth
            node = child
        return len(steps)


def _key(step: Step) -> tuple[Any, ...]:
    # Timestamps differ between the call that produced a message and the calls that resend it,
    # and a resent tool result may lack the tool name, so neither takes part in the comparison.
    tool_input = None if step.tool_input is None else to_json_text(step.tool_input)
    tool_name = step.tool_name if step.role == "assistant" else None
    return step.role, step.content.strip(), tool_name, step.tool_call_id, tool_input


def merge_calls(
    calls: Mapping[int, Call], tools: Mapping[int, dict[str, Any]], answer: ToolAnswer
) -> tuple[list[Step], dict[int, tuple[int, ...]]]:
    """The merged steps of a timeline of LLM calls and tool runs (keyed by position), and what each position added.

    Each call adds its input beyond the longest history already seen (any earlier call's input plus
    output), then its output. A tool run adds the step `answer` makes of it given the steps so far
    and the call ids already answered: a result that no LLM call's input carries.
    """
    answered = {step.tool_call_id for pair in calls.values() for step in (*pair[0], *pair[1]) if step.role == "tool"}
    history = _History()
    contributed: dict[int, tuple[int, ...]] = {}
    for index in sorted({*calls, *tools}):
        if index in calls:
            contributed[index] = history.add_call(*calls[index])
            continue
        result = answer(tools[index], history.steps, answered)
        if result is not None:
            answered.add(result.tool_call_id)
            contributed[index] = history.add_steps([result])
    return name_tool_results(history.steps), contributed


def find_call(
    steps: list[Step], answered: set[str | None], call_id: str | None, name: str | None, tool_input: Any
) -> Step | None:
    """The unanswered call a tool run answers: by call id, else by tool name; of several, the one with its input."""
    pending = [
        step
        for step in steps
        if step.role == "assistant" and step.tool_call_id and step.tool_call_id not in answered
        if (step.tool_call_id == call_id if call_id else step.tool_name == name)
    ]
    matching = [step for step in pending if tool_input in (step.tool_input, {"input": step.tool_input})]
    if matching:
        return matching[0]
    return pending[0] if len(pending) == 1 else None


def name_tool_results(steps: list[Step]) -> list[Step]:
    """Tool results without a tool name take the name of the call they answer."""
    names = {step.tool_call_id: step.tool_name for step in steps if step.role == "assistant" and step.tool_name}
    return [
        replace(step, tool_name=names[step.tool_call_id])
        if step.role == "tool" and step.tool_name is None and step.tool_call_id in names
        else step
        for step in steps
    ]
