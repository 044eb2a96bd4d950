"""The plain-text transcript a reward model reads, for training and for scoring alike.

An action example is the prior context followed by the target action, so it ends before any later
tool result or user message. Personal models omit system context (action input versions 1 and 3);
the shared evaluator's input version 2 includes it, each system step as `System: <text>`.
Steps are separated by a blank line and read like this:

    User: I want a refund for order 1182

    Assistant called lookup_order({"order_id": "1182"})

    Tool lookup_order returned: {"status": "delivered"}

    Assistant: Your refund is on its way.

A tool call with text renders the text first (`Assistant: Let me check.`) and the call on the next
line; assistant messages without text are skipped. Texts are kept whole: the worker left-truncates
them to its token limit with the tokenizer.

Input version 3 renders the same text with its context in sections (`sections=True`): the steps
before the current request (`earlier`), the request (the last user message before the action),
the work since (`recent`), then the target `action`. Each section's first step begins with its mark,
a control character (`SECTION_MARKS`), so that the worker's tokenizer can give each section its own
token budget (`stash_common.reward_model.window`); the marks are taken out of the text before it is
tokenised and of everything shown to people (`strip_marks`), and out of step texts before marking.

It lives in the shared package and takes plain steps because the trainer renders its training pairs
and the scorer the actions it scores with it: one renderer, so the two cannot drift. The rendering is
prefix-consistent (an action's example begins with the examples of the actions before it), and so are
its `segments`, the pieces a tokenizer reads one by one, which lets a causal model score every action
of a trace in one pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from stash_common.steps import TraceStep

SEPARATOR = "\n\n"
# Input version 3's sections in text order, and the control character that begins each one.
SECTIONS = ("earlier", "request", "recent", "action")
SECTION_MARKS = "\x1c\x1d\x1e\x1f"
_MARKS = re.compile(f"[{SECTION_MARKS}]")
# Before a separator that a non-newline character follows, never at the very start of the text.
SEGMENT_START = re.compile(r"(?!^)(?=\n\n[^\n])")


def render_action(step: TraceStep) -> str:
    """An assistant action: its text, then the call with the actual tool name and arguments."""
    if not step.is_action:
        raise ValueError(f"step {step.index} is not an assistant response or tool call")
    if not step.is_tool_call:
        return f"Assistant: {step.content}"
    call = f"Assistant called {step.tool_name}({json.dumps(step.tool_input or {}, ensure_ascii=False)})"
    return f"Assistant: {step.content}\n{call}" if step.content.strip() else call


def render_step(step: TraceStep) -> str:
    """A system or user message, tool result or assistant action as one transcript entry."""
    if step.role == "system":
        return f"System: {step.content}"
    if step.role == "user":
        return f"User: {step.content}"
    if step.role == "tool":
        return f"Tool {step.tool_name} returned: {step.content}" if step.tool_name else f"Tool returned: {step.content}"
    return render_action(step)


def is_rendered(step: TraceStep, with_system: bool = False) -> bool:
    """Whether a step appears in a transcript: never an assistant message without text; a system step
    only `with_system` (input version 2) and when it has text."""
    if step.role == "system":
        return with_system and bool(step.content)
    return step.role in ("user", "tool") or step.is_action


def render_context(steps: Sequence[TraceStep], action_index: int, with_system: bool = False) -> str:
    """Everything before step `action_index` (empty when nothing precedes it); system steps only `with_system`."""
    if not 0 <= action_index < len(steps):
        raise IndexError(f"the trace has no step {action_index} (it has {len(steps)} steps)")
    return SEPARATOR.join(render_step(step) for step in steps[:action_index] if is_rendered(step, with_system))


def render_example(
    steps: Sequence[TraceStep],
    action_index: int,
    action: TraceStep | None = None,
    with_system: bool = False,
    sections: bool = False,
) -> str:
    """The prior context of step `action_index` followed by that action, or by `action` in its place;
    with `sections`, input version 3's marked sections (the same text once `strip_marks` removes the marks)."""
    if sections:
        return SEPARATOR.join(_marked_sections(steps, action_index, action))
    context = render_context(steps, action_index, with_system)
    rendered = render_action(action if action is not None else steps[action_index])
    return f"{context}{SEPARATOR}{rendered}" if context else rendered


def _marked_sections(steps: Sequence[TraceStep], action_index: int, action: TraceStep | None) -> list[str]:
    """The nonempty sections of an example, each beginning with its mark (system steps are left out)."""
    if not 0 <= action_index < len(steps):
        raise IndexError(f"the trace has no step {action_index} (it has {len(steps)} steps)")
    target = action if action is not None else steps[action_index]
    context = [step for step in steps[:action_index] if is_rendered(step)]
    users = [position for position, step in enumerate(context) if step.role == "user"]
    if users:
        request = users[-1]
        groups = (context[:request], context[request : request + 1], context[request + 1 :])
    else:
        groups = ([], [], context)
    texts = [SEPARATOR.join(strip_marks(render_step(step)) for step in group) for group in groups]
    texts.append(strip_marks(render_action(target)))
    return [f"{mark}{text}" for mark, text in zip(SECTION_MARKS, texts, strict=True) if text]


def strip_marks(text: str) -> str:
    """`text` without section marks: what a marked example reads as, and what it shows."""
    return _MARKS.sub("", text)


def section_of(piece: str) -> int | None:
    """The index in SECTIONS of the section a segment (`segments`) begins, or None when it continues one."""
    head = piece[2:3] if piece.startswith(SEPARATOR) else piece[:1]
    position = SECTION_MARKS.find(head) if head else -1
    return position if position >= 0 else None


def render_trace(steps: Sequence[TraceStep]) -> str:
    """The whole trace without system steps, for trace-level comparisons."""
    return SEPARATOR.join(render_step(step) for step in steps if is_rendered(step))


def segments(text: str) -> list[str]:
    """`text` cut before every separator that is followed by text (not by another newline).

    Tokenised piece by piece, an action's example gives exactly the first tokens of every later
    example of its trace, whatever the tokenizer merges: a later example is the earlier one, a
    separator and a step that begins with a letter, and a cut depends only on the three characters
    after it, so the earlier example's pieces are the later one's first pieces, its last one ending
    where the later one's next separator begins. Without the cuts a BPE can merge an action's
    closing `.` with the blank line after it. Any text can be cut, rendered or not.
    """
    return SEGMENT_START.split(text)
