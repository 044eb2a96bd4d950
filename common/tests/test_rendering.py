"""Rendering: prior context then the target action, without system steps or anything after the action."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stash_common.rendering import render_action, render_context, render_example, render_trace, segments
from stash_common.steps import TraceStep
from support.steps import SUPPORT, build_steps


def test_render_example_excludes_system_steps() -> None:
    text = render_example(build_steps("t1", SUPPORT), 4)

    assert "support agent" not in text
    assert text.startswith("User: I want a refund for order 1182")


def test_input_version_2_renders_system_context_first() -> None:
    steps = build_steps("t1", SUPPORT)

    text = render_example(steps, 2, with_system=True)

    assert text == (
        "System: You are a support agent.\n\nUser: I want a refund for order 1182\n\n"
        'Assistant called lookup_order({"order_id": "1182"})'
    )
    assert render_example(steps, 4, with_system=True).startswith(text)


def test_render_example_ends_at_the_action_before_later_results_and_messages() -> None:
    steps = build_steps("t1", SUPPORT)

    call = render_example(steps, 2)
    answer = render_example(steps, 4)

    assert call == 'User: I want a refund for order 1182\n\nAssistant called lookup_order({"order_id": "1182"})'
    assert answer.endswith('returned: {"status": "delivered"}\n\nAssistant: Your refund for order 1182 is on its way.')
    assert "wrong order" not in answer


def test_render_context_is_everything_rendered_before_the_action() -> None:
    steps = build_steps("t1", SUPPORT)

    assert render_context(steps, 2) == "User: I want a refund for order 1182"
    assert render_context(steps, 4).endswith('Tool lookup_order returned: {"status": "delivered"}')
    assert render_context(steps, 1) == ""


def test_render_action_shows_tool_text_then_the_call() -> None:
    step = TraceStep("s", 3, "assistant", "Let me check.", "lookup_order", {"order_id": 1182, "full": True})

    assert (
        render_action(step)
        == 'Assistant: Let me check.\nAssistant called lookup_order({"order_id": 1182, "full": true})'
    )


def test_render_action_renders_a_call_without_input_as_empty_arguments() -> None:
    assert render_action(TraceStep("s", 0, "assistant", "", "list_orders")) == "Assistant called list_orders({})"


@pytest.mark.parametrize(
    "step",
    [
        TraceStep("s", 0, "user", "hello"),
        TraceStep("s", 0, "tool", "ok", "lookup_order"),
        TraceStep("s", 0, "system", "rules"),
        TraceStep("s", 0, "assistant", "   "),
    ],
)
def test_render_action_refuses_steps_that_are_not_actions(step: TraceStep) -> None:
    with pytest.raises(ValueError, match="not an assistant response or tool call"):
        render_action(step)


def test_render_example_refuses_a_step_past_the_end() -> None:
    with pytest.raises(IndexError, match=r"the trace has no step 8 \(it has 8 steps\)"):
        render_example(build_steps("t1", SUPPORT), 8)


def test_render_trace_is_the_whole_trace_without_system_or_blank_assistant_steps() -> None:
    steps = build_steps(
        "t1",
        [("system", "secret rules"), ("user", "hi"), ("assistant", ""), ("tool", None, "pong"), ("assistant", "Hello")],
    )

    assert render_trace(steps) == "User: hi\n\nTool returned: pong\n\nAssistant: Hello"


def test_segments_begin_at_blank_lines_that_text_follows() -> None:
    text = "User: is it here?\n\nAssistant: Yes.\n\n\nTool returned: ok\n\n"

    assert segments(text) == ["User: is it here?", "\n\nAssistant: Yes.\n", "\n\nTool returned: ok\n\n"]
    assert segments("") == [""] and segments("\n\nUser: hi") == ["\n\nUser: hi"]


# Contents full of newlines and blank lines, at their ends too, where a cut could go wrong.
CONTENTS = st.lists(st.sampled_from(["\n", "\n\n", " ", ".", "a", "User: "]), max_size=8).map("".join)
STEPS = st.lists(
    st.tuples(st.sampled_from(["user", "assistant", "tool"]), CONTENTS, st.booleans()), min_size=1, max_size=8
)


@given(STEPS)
def test_each_example_s_segments_begin_every_later_example_s_segments(drawn: list[tuple[str, str, bool]]) -> None:
    steps = [
        TraceStep(f"s{index}", index, role, content, "lookup" if call else None, {"id": 1} if call else None)
        for index, (role, content, call) in enumerate(drawn)
    ]
    texts = [render_example(steps, step.index) for step in steps if step.is_action]
    examples = [segments(text) for text in texts]

    assert ["".join(pieces) for pieces in examples] == texts
    for earlier, later in zip(examples, examples[1:], strict=False):
        assert later[: len(earlier)] == earlier
