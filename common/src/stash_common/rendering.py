"""The plain-text transcript a reward model reads, for training and for scoring alike.

An action example is the prior context followed by the target action, so it ends before any later
tool result or user message. System steps are never rendered: personal models omit system context.
Steps are separated by a blank line and read like this:

    User: I want a refund for order 1182

    Assistant called lookup_order({"order_id": "1182"})

    Tool lookup_order returned: {"status": "delivered"}

    Assistant: Your refund is on its way.

A tool call with text renders the text first (`Assistant: Let me check.`) and the call on the next
line; assistant messages without text are skipped. Texts are kept whole: the worker left-truncates
them to its token limit with the tokenizer.

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
    """A user message, tool result or assistant action as one transcript entry."""
    if step.role == "user":
        return f"User: {step.content}"
    if step.role == "tool":
        return f"Tool {step.tool_name} returned: {step.content}" if step.tool_name else f"Tool returned: {step.content}"
    return render_action(step)


def is_rendered(step: TraceStep) -> bool:
    """Whether a step appears in a transcript: not a system step, nor an assistant message without text."""
    return step.role in ("user", "tool") or step.is_action


def render_context(steps: Sequence[TraceStep], action_index: int) -> str:
    """Everything before step `action_index`, without system steps (empty when nothing precedes it)."""
    if not 0 <= action_index < len(steps):
        raise IndexError(f"the trace has no step {action_index} (it has {len(steps)} steps)")
    return SEPARATOR.join(render_step(step) for step in steps[:action_index] if is_rendered(step))


def render_example(steps: Sequence[TraceStep], action_index: int, action: TraceStep | None = None) -> str:
    """The prior context of step `action_index` followed by that action, or by `action` in its place."""
    context = render_context(steps, action_index)
    target = action if action is not None else steps[action_index]
    rendered = render_action(target)
    return f"{context}{SEPARATOR}{rendered}" if context else rendered


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
