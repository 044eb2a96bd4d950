"""The message pieces Langfuse and LangSmith share: content sorted into steps, and calls that resend the history."""

from typing import Any

from stash_ingest.adapters.messages import (
    Parts,
    attach_reasoning,
    call_steps,
    find_call,
    media_text,
    merge_calls,
    message_steps,
    result_step,
)
from stash_ingest.limits import DEFAULT_LIMITS
from stash_ingest.traces import Step

SYSTEM, ASK = Step("system", "be brief"), Step("user", "weather in Oslo?")
CALL = Step("assistant", "", tool_name="weather", tool_input={"city": "Oslo"}, tool_call_id="c1")
RESULT = Step("tool", "rain", tool_call_id="c1")
ANSWER = Step("assistant", "It rains.")


def test_merge_calls_adds_only_what_each_call_adds_to_the_history_it_resends() -> None:
    calls = {0: ([SYSTEM, ASK], [CALL]), 2: ([SYSTEM, ASK, CALL, RESULT], [ANSWER])}
    steps, contributed = merge_calls(calls, {}, lambda run, steps, answered: None)
    assert steps == [SYSTEM, ASK, CALL, Step("tool", "rain", tool_name="weather", tool_call_id="c1"), ANSWER]
    assert contributed == {0: (0, 1, 2), 2: (3, 4)}


def test_merge_calls_keeps_a_fresh_conversation_whole_and_asks_tool_runs_in_timeline_order() -> None:
    asked: list[tuple[Any, list[Step]]] = []

    def answer(run: dict[str, Any], steps: list[Step], answered: set[str | None]) -> Step | None:
        asked.append((run["name"], list(steps)))
        return result_step("c1", None, "rain", is_error=False) if "c1" not in answered else None

    calls = {0: ([ASK], [CALL]), 2: ([Step("user", "and Bergen?")], [ANSWER])}
    steps, contributed = merge_calls(calls, {1: {"name": "weather"}}, answer)
    assert [step.content for step in steps] == ["weather in Oslo?", "", "rain", "and Bergen?", "It rains."]
    assert asked == [("weather", [ASK, CALL])]
    assert contributed == {0: (0, 1), 1: (2,), 2: (3, 4)}


def test_find_call_matches_by_id_else_by_name_and_input_and_skips_answered_calls() -> None:
    other = Step("assistant", "", tool_name="weather", tool_input={"city": "Bergen"}, tool_call_id="c2")
    steps = [CALL, other]
    assert find_call(steps, set(), "c2", None, None) is other
    assert find_call(steps, set(), None, "weather", {"city": "Oslo"}) is CALL
    assert find_call(steps, set(), None, "weather", {"input": {"city": "Oslo"}}) is CALL  # as a tool run wraps it
    assert find_call(steps, set(), None, "weather", None) is None  # two candidates, no input to tell them apart
    assert find_call(steps, {"c1"}, None, "weather", None) is other


def test_message_steps_put_assistant_text_first_and_user_tool_results_first() -> None:
    parts = Parts(texts=["a", "", "b"], calls=[CALL], results=[RESULT])
    assert message_steps("assistant", parts) == [Step("assistant", "a\nb"), CALL, RESULT]
    assert message_steps("user", parts) == [RESULT, Step("user", "a\nb"), CALL]
    assert message_steps("user", Parts(texts=[" "])) == []


def test_attach_reasoning_goes_to_the_next_step_made_even_by_a_later_item() -> None:
    steps = attach_reasoning([([], ["think"]), ([], ["more"]), ([ANSWER, CALL], [])], "trace", DEFAULT_LIMITS)
    assert steps == [Step("assistant", "It rains.", metadata={"reasoning": "think\nmore"}), CALL]


def test_call_steps_need_a_name_and_read_arguments_as_an_object() -> None:
    assert call_steps("c1", "", "{}") == []
    assert call_steps(" ", "weather", '{"city": "Oslo"}') == [
        Step("assistant", "", tool_name="weather", tool_input={"city": "Oslo"})
    ]


def test_media_text_keeps_only_fetchable_addresses() -> None:
    assert media_text("https://example.com/cat.png") == "[image: https://example.com/cat.png]"
    assert media_text("data:image/png;base64,AAAA") == "[image]"
    assert media_text(None, "audio") == "[audio]"
