"""The Langfuse adapter on the real tRPC and UI-download files, and synthetic public-API bodies."""

from collections import Counter
from typing import Any

import orjson
import pytest

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.langfuse import looks_like_langfuse, parse_langfuse
from stash_ingest.traces import Trace
from support.fixtures import real_fixture
from support.traces import assert_fixture_parses, called_tools, only_trace, roles

FIXTURES = (
    "langfuse/trpc-openai-agents-2025-09-30.trace.json",
    "langfuse/trpc-claude-agent-sdk-2025-12-22.trace.json",
    "langfuse/ui-download-pydantic-ai-tools-2025-12-04.json",
    "langfuse/ui-download-openai-assistants-2024-05-29.json",
)


def _only(raw: bytes) -> Trace:
    return only_trace(parse_langfuse(raw))


def _generation(observation_id: str, start: str, end: str, input: Any, output: Any, **fields: Any) -> dict[str, Any]:
    return {
        "id": observation_id,
        "type": "GENERATION",
        "name": "chat",
        "startTime": start,
        "endTime": end,
        "input": input,
        "output": output,
        **fields,
    }


def _public_trace(trace_id: str, observations: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """The flat shape of GET /api/public/traces/{traceId} (synthetic: no real body was found)."""
    return {"id": trace_id, "timestamp": "2025-01-02T03:04:05.000Z", "observations": observations, **fields}


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_parses_and_validates_when_real(name: str) -> None:
    assert_fixture_parses(parse_langfuse, looks_like_langfuse, name)


def test_openai_agents_trace_merges_responses_items_when_trpc_download() -> None:
    trace = _only(real_fixture("langfuse/trpc-openai-agents-2025-09-30.trace.json"))

    assert trace.external_id == "fee618f96dc31e0ca38b2f7b26eb8b29"
    assert trace.title == "Agent workflow"
    assert roles(trace) == ["system", "user", "assistant", "tool", "assistant"]
    system, user, call, result, answer = trace.steps
    assert system.content == "You are a helpful agent."  # only in the Responses object's `instructions`
    assert user.content == "What's the weather in Tokyo?"
    assert (call.tool_name, call.tool_input, call.tool_call_id) == (
        "get_weather",
        {"city": "Tokyo"},
        "call_Kud0j0DxWSmLzv9W5m6qVqXn",
    )
    assert (result.content, result.tool_name, result.tool_call_id) == (
        "The weather in Tokyo is sunny.",
        "get_weather",
        "call_Kud0j0DxWSmLzv9W5m6qVqXn",
    )
    assert answer.content.startswith("The weather in Tokyo is currently sunny.")
    assert user.metadata["timestamp"] == "2025-09-30T09:03:59.963000+00:00"
    assert answer.metadata["timestamp"] == "2025-09-30T09:04:02.151000+00:00"


def test_openai_agents_trace_records_spans_and_facts_when_trpc_download() -> None:
    trace = _only(real_fixture("langfuse/trpc-openai-agents-2025-09-30.trace.json"))

    spans = {span.id: span for span in trace.spans}
    assert [span.kind for span in trace.spans] == ["agent", "agent", "generation", "tool", "generation"]
    assert spans["98870087af69bf06"].step_indices == (0, 1, 2)
    assert spans["90d94774e8e3724d"].step_indices == (3, 4)
    assert spans["90d94774e8e3724d"].parent_id == "d950b668796240b5"
    assert spans["e5a76f27f51ad40e"].parent_id is None
    assert spans["98870087af69bf06"].start_ns == 1_759_223_039_963_000_000
    assert spans["98870087af69bf06"].end_ns == 1_759_223_040_999_000_000
    assert spans["5b99c3e3411ed17b"].input == {"city": "Tokyo"}
    assert trace.metadata["model"] == "gpt-4.1-2025-04-14"
    assert trace.metadata["usage"] == {"input_tokens": 140, "output_tokens": 44, "total_tokens": 184}
    assert [score["name"] for score in trace.metadata["scores"]] == ["toxicity", "hallucination"]


def test_claude_agent_trace_skips_garbage_input_and_answers_calls_from_tool_observations_when_trpc() -> None:
    trace = _only(real_fixture("langfuse/trpc-claude-agent-sdk-2025-12-22.trace.json"))

    assert trace.external_id == "097f1d8982fa909b8cffb14a166ec272"
    assert trace.title == "claude.conversation"
    assert roles(trace) == ["user", "assistant", "assistant", "assistant", "tool", "tool", "assistant"]
    assert trace.steps[0].content == "What's the weather like in Berlin and New York?"
    assert trace.steps[1].content == "I'll check the weather in both Berlin and New York for you."
    assert all(step.content != "role" for step in trace.steps)  # the {"content":"role"} inputs
    calls, results = trace.steps[2:4], trace.steps[4:6]
    assert [call.tool_input for call in calls] == [{"city": "Berlin"}, {"city": "New York"}]
    assert [call.tool_call_id for call in calls] == ["toolu_01TKoqQLvY2UWuC49qnD48y7", "toolu_01NtVat4vJLFfVd5TqdLHcA7"]
    assert [result.tool_call_id for result in results] == [call.tool_call_id for call in calls]
    assert [result.content for result in results] == [
        "Weather in Berlin: Cloudy, 59°F",
        "Weather in New York: Sunny, 75°F",
    ]
    assert {result.tool_name for result in results} == {"mcp__weather__get_weather"}
    assert trace.steps[-1].content.startswith("Great! Here's the current weather for both cities:")
    spans = {span.id: span for span in trace.spans}
    assert (spans["f411dab686a064b1"].step_indices, spans["edbd987c5f361fdf"].step_indices) == ((4,), (5,))
    assert [score["name"] for score in trace.metadata["scores"]] == ["correctness", "hallucination", "toxicity"]


def test_pydantic_ai_trace_keeps_parallel_calls_and_second_agent_when_ui_download() -> None:
    trace = _only(real_fixture("langfuse/ui-download-pydantic-ai-tools-2025-12-04.json"))

    assert trace.external_id == "7a38edd8123db47ad8dcb8aa4c5e3926"
    assert trace.title == "joke-generator"
    assert len(trace.steps) == 14
    assert Counter(roles(trace)) == {"system": 2, "user": 3, "assistant": 6, "tool": 3}
    assert called_tools(trace) == [
        "get_pun_suggestion",
        "get_dad_joke_suggestion",
        "get_one_liner_suggestion",
        "final_result",
    ]
    calls, results = trace.steps[2:5], trace.steps[5:8]
    assert [result.tool_call_id for result in results] == [call.tool_call_id for call in calls]
    assert [result.tool_name for result in results] == [call.tool_name for call in calls]
    assert results[0].content.startswith("Pun idea: Play on words related to 'programming'")
    assert trace.steps[9].content.startswith("Now write a funny joke about 'programming'")
    assert trace.steps[10].content == "Why do programmers hate nature?  \nIt has too many bugs!"
    assert trace.steps[11].content == "You are a joke critic. Evaluate if the joke is funny and well-crafted."
    assert trace.steps[13].tool_input["quality"] == "good"
    assert trace.metadata["tags"] == ["example", "joke-generator"]
    assert trace.metadata["usage"]["input_tokens"] == 1315
    assert len(trace.spans) == 12


def test_assistants_trace_reads_plain_messages_and_string_output_when_old_sdk() -> None:
    trace = _only(real_fixture("langfuse/ui-download-openai-assistants-2024-05-29.json"))

    assert trace.external_id == "b3b7b128-5664-4f42-9fab-31999da9e2f1"
    assert trace.title == "run_math_tutor"
    assert roles(trace) == ["assistant", "user", "assistant"]
    assert trace.steps[1].content == "I need to solve the equation `3x + 11 = 14`. Can you help me?"
    assert trace.steps[2].content.startswith("Sure, first subtract 11 from both sides")
    assert trace.steps[2].metadata["timestamp"] == "2024-05-29T13:46:19.963000+00:00"
    generation = next(span for span in trace.spans if span.kind == "generation")
    assert generation.end_ns == generation.start_ns  # endTime is null: no duration is invented
    assert generation.step_indices == (0, 1, 2)
    assert trace.metadata["model"] == "gpt-4"


def test_public_api_array_gives_one_trace_each_when_synthetic() -> None:
    first = _public_trace(
        "t-1",
        [_generation("g1", "2025-01-02T03:04:05Z", "2025-01-02T03:04:06Z", [{"role": "user", "content": "hi"}], "hey")],
        name="greeting",
        userId="u-7",
        sessionId="s-9",
        release="1.2.0",
        version="v3",
        tags=["prod"],
    )
    second = _public_trace(
        "t-2", [_generation("g2", "2025-01-02T03:05:00Z", "2025-01-02T03:05:01Z", "question?", "answer.")]
    )

    traces = parse_langfuse(orjson.dumps([first, second]))

    assert [trace.external_id for trace in traces] == ["t-1", "t-2"]
    assert traces[0].metadata == {
        "trace_name": "greeting",
        "user_id": "u-7",
        "session_id": "s-9",
        "tags": ["prod"],
        "release": "1.2.0",
        "version": "v3",
    }
    assert [(step.role, step.content) for step in traces[1].steps] == [("user", "question?"), ("assistant", "answer.")]
    assert traces[1].title is None


def test_openai_chat_history_is_prefix_merged_when_synthetic() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '"{\\"id\\": 7}"'}}
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Find 7"}]
    first = _generation(
        "g1", "2025-01-02T03:04:05Z", "2025-01-02T03:04:06Z", history, {"role": "assistant", "tool_calls": [call]}
    )
    resent = [
        *history,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": '{"ok":true}'},
    ]
    second = _generation(
        "g2", "2025-01-02T03:04:07Z", "2025-01-02T03:04:08Z", orjson.dumps(resent).decode(), "Found it."
    )

    trace = _only(orjson.dumps(_public_trace("t", [second, first])))

    assert roles(trace) == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.steps[2].tool_input == {"id": 7}  # arguments encoded twice
    assert (trace.steps[3].tool_name, trace.steps[3].content) == ("lookup", '{"ok":true}')
    assert [span.step_indices for span in trace.spans] == [(0, 1, 2), (3, 4)]


def test_interleaved_agents_are_not_repeated_when_synthetic() -> None:
    agent_a = [{"role": "system", "content": "A"}, {"role": "user", "content": "task a"}]
    agent_b = [{"role": "system", "content": "B"}, {"role": "user", "content": "task b"}]
    observations = [
        _generation("a1", "2025-01-02T03:00:00Z", "2025-01-02T03:00:01Z", agent_a, "answer a"),
        _generation("b1", "2025-01-02T03:00:02Z", "2025-01-02T03:00:03Z", agent_b, "answer b"),
        _generation(
            "a2",
            "2025-01-02T03:00:04Z",
            "2025-01-02T03:00:05Z",
            [*agent_a, {"role": "assistant", "content": "answer a"}, {"role": "user", "content": "more a"}],
            "done a",
        ),
    ]

    trace = _only(orjson.dumps(_public_trace("t", observations)))

    assert [step.content for step in trace.steps] == [
        "A",
        "task a",
        "answer a",
        "B",
        "task b",
        "answer b",
        "more a",
        "done a",
    ]


def test_anthropic_blocks_map_thinking_images_and_errors_when_synthetic() -> None:
    request = {
        "system": "You fetch pictures.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Describe these"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0"}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Need the file.", "signature": "sig"},
                    {"type": "text", "text": "Fetching."},
                    {"type": "tool_use", "id": "toolu_1", "name": "fetch", "input": {"path": "/a"}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "denied", "is_error": True}],
            },
        ],
    }
    response = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "I could not fetch it."}]}

    trace = _only(
        orjson.dumps(
            _public_trace("t", [_generation("g", "2025-01-02T03:04:05Z", "2025-01-02T03:04:06Z", request, response)])
        )
    )

    assert roles(trace) == ["system", "user", "assistant", "assistant", "tool", "assistant"]
    assert trace.steps[1].content == "Describe these\n[image]\n[image: https://example.com/cat.png]"
    assert trace.steps[2].metadata["reasoning"] == "Need the file."
    assert (trace.steps[4].tool_name, trace.steps[4].metadata["is_error"]) == ("fetch", True)


def test_garbage_items_are_skipped_and_reasoning_carried_when_synthetic() -> None:
    items = [
        {"content": "role"},
        42,
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Say hello back."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
    ]

    trace = _only(
        orjson.dumps(_public_trace("t", [_generation("g", "2025-01-02T03:04:05Z", None, items, {"content": "role"})]))
    )

    assert [(step.role, step.content) for step in trace.steps] == [("user", "hi"), ("assistant", "hello")]
    assert trace.steps[1].metadata["reasoning"] == "Say hello back."


def test_item_that_is_not_a_trace_fails_naming_it() -> None:
    raw = orjson.dumps(
        [_public_trace("t", [_generation("g", "2025-01-02T03:04:05Z", None, "hi", "yo")]), {"steps": []}]
    )

    with pytest.raises(InvalidArgument, match=r"item 1: observations: expected a Langfuse trace"):
        parse_langfuse(raw)


def test_trace_without_generations_fails_naming_observations() -> None:
    raw = orjson.dumps(_public_trace("t", [{"id": "s", "type": "SPAN", "startTime": "2025-01-02T03:04:05Z"}]))

    with pytest.raises(InvalidArgument, match=r"document: observations: no GENERATION observation"):
        parse_langfuse(raw)


def test_observation_that_is_not_an_object_fails_naming_its_index() -> None:
    with pytest.raises(InvalidArgument, match=r"document: observations\[0\]: must be an object"):
        parse_langfuse(orjson.dumps(_public_trace("t", ["GENERATION"])))


def test_bad_json_and_empty_payload_fail_naming_where() -> None:
    with pytest.raises(InvalidArgument, match=r"line 1: is not valid JSON"):
        parse_langfuse(b'{"observations": [\n')
    with pytest.raises(InvalidArgument, match=r"payload: is empty"):
        parse_langfuse(b"  \n")


def test_jsonl_lines_keep_line_separators_inside_strings_when_synthetic() -> None:
    text = "first\u2028second\u2029third"
    lines = [
        orjson.dumps(_public_trace(trace_id, [_generation("g", "2025-01-02T03:04:05Z", None, text, "ok")]))
        for trace_id in ("t", "u")
    ]

    traces = parse_langfuse(b"\n".join(lines) + b"\n")

    assert [trace.external_id for trace in traces] == ["t", "u"]
    assert traces[1].steps[0].content == text


@pytest.mark.parametrize(
    "value",
    [
        {"steps": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"resourceSpans": []},
        {"run_type": "llm", "trace_id": "t"},
        {"sessionId": "s", "type": "user", "message": {}},
        {"type": "session_meta", "payload": {}},
        [{"observations": []}],
        None,
        "observations",
    ],
)
def test_looks_like_langfuse_is_false_for_other_shapes(value: Any) -> None:
    assert not looks_like_langfuse(value)


def test_looks_like_langfuse_is_true_for_trace_shapes() -> None:
    assert looks_like_langfuse({"id": "t", "observations": []})
    assert looks_like_langfuse({"trace": {"id": "t", "observations": []}})
