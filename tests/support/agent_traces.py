"""Deterministic support conversations with many actions, for the scoring tests.

Every fifth action is a tool call followed by its result, every third a user turn follows, and every
seventh reply ends with a full stop; the others end with a word. Tokenised whole by MERGING_PATTERN's
or QWEN2_SPLIT's tokenizer (punctuation keeps the whitespace after it) a reply ending in `.` or `)` is
no token prefix of the later examples; tokenised segment by segment, as the workers do, every one is.
"""

from __future__ import annotations

import random

from stash_common.rendering import render_example, render_trace
from stash_common.steps import Role, TraceStep

ITEMS = ("espresso machine", "yoga mat", "desk lamp", "winter jacket", "air fryer", "rice cooker", "blender")
REPLIES = ("your {item} ships tomorrow", "we refunded the {item} to your card", "a new {item} is on its way")
ASKS = ("where is my {item}", "can I return the {item}", "the {item} arrived broken")


def conversation(trace_id: str, actions: int, seed: int = 0) -> tuple[TraceStep, ...]:
    """A trace of `actions` assistant actions (replies and tool calls) between user turns and tool results."""
    rng = random.Random(seed)
    steps: list[TraceStep] = []

    def add(role: Role, content: str, tool: str | None = None, tool_input: dict[str, str] | None = None) -> None:
        steps.append(TraceStep(f"{trace_id}:{len(steps)}", len(steps), role, content, tool, tool_input))

    add("system", "You are a support agent.")
    add("user", rng.choice(ASKS).format(item=rng.choice(ITEMS)))
    for number in range(actions):
        item = rng.choice(ITEMS)
        if number % 5 == 4:
            add("assistant", "", "lookup_order", {"item": item})
            add("tool", f'{{"item": "{item}", "status": "delivered"}}', "lookup_order")
        else:
            add("assistant", rng.choice(REPLIES).format(item=item) + ("." if number % 7 == 6 else ""))
        if number % 3 == 2:
            add("user", rng.choice(ASKS).format(item=rng.choice(ITEMS)))
    return tuple(steps)


def action_examples(steps: tuple[TraceStep, ...]) -> list[tuple[str, str]]:
    """(step id, rendered example) of every eligible action, in step order."""
    return [(step.id, render_example(steps, step.index)) for step in steps if step.is_action]


def corpus(*traces: tuple[TraceStep, ...]) -> list[str]:
    """Every text a tokenizer for these traces must know: each trace rendered whole."""
    return [render_trace(steps) for steps in traces]
