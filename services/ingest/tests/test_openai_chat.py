"""The OpenAI chat adapter on the real fixtures in tests/fixtures/real/openai-chat, plus synthetic gaps."""

from __future__ import annotations

import os
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.openai_chat import looks_like_openai_chat, parse_openai_chat
from stash_ingest.adapters.reading import first_value
from stash_ingest.traces import Step, Trace, validate_trace
from support.fixtures import REAL_FIXTURES, real_fixture
from support.json_strategies import json_values
from support.traces import assert_not_detected, assert_parses_or_refuses, jsonl, roles

COOKBOOK = "openai-chat/cookbook-drone-finetune-first6.jsonl"
REQUEST = "openai-chat/pydantic-ai-tool-then-image.chat-completions.request.json"
RESPONSE = "openai-chat/pydantic-ai-tool-then-image.chat-completions.response.json"
DRONE_SYSTEM_PREFIX = "You are an intelligent AI that controls a drone. Given a command or request from the user,\ncall"


def _parse(name: str) -> list[Trace]:
    traces = parse_openai_chat(real_fixture(name))
    for index, trace in enumerate(traces):
        validate_trace(trace, f"{name} trace {index}")
    return traces


def test_parse_reads_the_cookbook_fine_tuning_file_one_trace_per_line() -> None:
    traces = _parse(COOKBOOK)
    assert len(traces) == 6
    assert all(roles(trace) == ["system", "user", "assistant"] for trace in traces)
    assert all(trace.steps[0].content.startswith(DRONE_SYSTEM_PREFIX) for trace in traces)
    assert [trace.steps[1].content for trace in traces] == [
        "Let's get the drone in the air, can you make it take off",
        "Can you lift the drone to 100 feet off the ground",
        "Can you safely bring the drone down to the ground here?",
        "Let's land the drone now, right where we are",
        "Bring the drone back home and land it safely",
        "Can you make the drone land at the base station?",
    ]
    assert all(trace.external_id is None and trace.title is None for trace in traces)


def test_parse_decodes_single_and_double_encoded_cookbook_arguments() -> None:
    calls = [trace.steps[2] for trace in _parse(COOKBOOK)]
    assert [call.tool_name for call in calls] == ["takeoff_drone"] * 2 + ["land_drone"] * 4
    assert [call.tool_input for call in calls] == [
        {"altitude": 100},
        {"altitude": 100},
        {"location": "current"},  # lines 3-6: arguments double-encoded
        {"location": "current"},
        {"location": "home_base"},
        {"location": "home_base"},
    ]
    assert all(call.content == "" and call.tool_call_id == "call_id" for call in calls)


def test_parse_keeps_cookbook_tool_list_and_parallel_flag_as_trace_metadata() -> None:
    metadata = _parse(COOKBOOK)[0].metadata
    assert metadata["parallel_tool_calls"] is False
    assert len(metadata["tools"]) == 16
    assert metadata["tools"][:2] == ["takeoff_drone", "land_drone"] and metadata["tools"][-1] == "reject_request"
    assert all(not step.metadata for trace in _parse(COOKBOOK) for step in trace.steps)  # untimed stays untimed


def test_parse_reads_the_chat_completions_request_with_tool_result_and_image() -> None:
    [trace] = _parse(REQUEST)
    assert roles(trace) == ["user", "assistant", "tool", "user"]
    assert trace.steps[0] == Step("user", "What food is in the image you can get from the get_image tool?")
    assert trace.steps[1] == Step("assistant", "", "get_image", {}, "call_4hrT4QP9jfojtK69vGiFCFjG")
    assert trace.steps[2] == Step("tool", "See file bd38f5", "get_image", None, "call_4hrT4QP9jfojtK69vGiFCFjG")
    url = "https://t3.ftcdn.net/jpg/00/85/79/92/360_F_85799278_0BBGV9OAdQDTLnKwAPBCcg1J7QtiieJY.jpg"
    assert trace.steps[3].content == f"This is file bd38f5:\n[image: {url}]"
    assert trace.metadata == {"model": "gpt-4o", "tools": ["get_image"]}
    assert trace.external_id is None


def test_parse_reads_the_chat_completions_response_as_assistant_steps() -> None:
    [trace] = _parse(RESPONSE)
    assert trace.steps == (
        Step("assistant", "The image shows a potato.", metadata={"timestamp": "2025-04-29T21:08:00.000000+00:00"}),
    )
    assert trace.external_id == "chatcmpl-BRmTI0Y2zmkGw27kLarhsmiFQTGxR"
    assert trace.metadata == {
        "model": "gpt-4o-2024-08-06",
        "finish_reason": "stop",
        "usage": {"completion_tokens": 8, "prompt_tokens": 503, "total_tokens": 511},
    }


def test_parse_is_deterministic_for_every_fixture() -> None:
    for name in sorted(os.listdir(REAL_FIXTURES / "openai-chat")):
        raw = real_fixture(f"openai-chat/{name}")
        assert parse_openai_chat(raw) == parse_openai_chat(raw)


def test_looks_like_openai_chat_claims_every_fixture() -> None:
    for name in sorted(os.listdir(REAL_FIXTURES / "openai-chat")):
        assert looks_like_openai_chat(first_value(real_fixture(f"openai-chat/{name}"))), name


def test_looks_like_openai_chat_rejects_other_shapes_synthetic() -> None:
    assert not looks_like_openai_chat({"steps": [{"role": "user", "content": "hi"}]})
    assert not looks_like_openai_chat({"resourceSpans": [{"scopeSpans": []}]})
    assert not looks_like_openai_chat({"type": "session_meta", "timestamp": "2025-01-01T00:00:00Z", "payload": {}})
    claude_code = {"type": "user", "sessionId": "s", "message": {"role": "user", "content": "hi"}}
    assert not looks_like_openai_chat(claude_code)
    assert not looks_like_openai_chat({"trace": {"id": "t"}, "observations": []})
    assert not looks_like_openai_chat({"run_type": "llm", "inputs": {"messages": []}})
    assert not looks_like_openai_chat({"messages": []})
    assert not looks_like_openai_chat({"messages": [{"role": ["user"], "content": "x"}]})
    assert not looks_like_openai_chat("messages")


def test_looks_like_openai_chat_claims_a_bare_message_and_a_message_list_synthetic() -> None:
    assert looks_like_openai_chat({"role": "user", "content": "hi"})
    assert looks_like_openai_chat([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
    assert looks_like_openai_chat({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})


def test_parse_reads_a_json_array_of_messages_as_one_trace_synthetic() -> None:
    raw = orjson.dumps(
        [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
        ]
    )
    [trace] = parse_openai_chat(raw)
    assert trace.steps == (Step("system", "Be brief."), Step("user", "hi"), Step("assistant", "hello"))


def test_parse_splits_text_and_parallel_tool_calls_and_pairs_results_synthetic() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
        {"id": "c2", "type": "function", "function": {"name": "time", "arguments": '"{\\"tz\\": \\"CET\\"}"'}},
    ]
    messages = [
        {"role": "user", "content": "Weather and time in Paris?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "sunny"}, {"type": "text", "text": "20C"}],
        },
        {"role": "assistant", "content": None, "refusal": "I cannot say more."},
    ]
    [trace] = parse_openai_chat(jsonl({"messages": messages}))
    assert trace.steps == (
        Step("user", "Weather and time in Paris?"),
        Step("assistant", "Checking both."),
        Step("assistant", "", "weather", {"city": "Paris"}, "c1"),
        Step("assistant", "", "time", {"tz": "CET"}, "c2"),
        Step("tool", "12:00", "time", None, "c2"),
        Step("tool", "sunny\n20C", "weather", None, "c1"),
        Step("assistant", "I cannot say more."),
    )


def test_parse_reads_legacy_function_call_and_function_role_synthetic() -> None:
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": None, "function_call": {"name": "calc", "arguments": '{"expr": "2+2"}'}},
        {"role": "function", "name": "calc", "content": "4"},
    ]
    [trace] = parse_openai_chat(jsonl({"messages": messages, "functions": [{"name": "calc"}]}))
    assert trace.steps[1:] == (Step("assistant", "", "calc", {"expr": "2+2"}), Step("tool", "4", "calc"))
    assert trace.metadata == {"tools": ["calc"]}


def test_parse_wraps_non_object_arguments_and_reads_custom_tool_calls_synthetic() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "not json"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "[1, 2]"}},
        {"id": "c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}},
    ]
    [trace] = parse_openai_chat(
        jsonl({"messages": [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": calls}]})
    )
    assert [step.tool_input for step in trace.steps[1:]] == [
        {"input": "not json"},
        {"input": [1, 2]},
        {"input": "*** Begin Patch"},
    ]
    assert [step.tool_name for step in trace.steps[1:]] == ["f", "g", "apply_patch"]


def test_parse_never_puts_data_urls_into_content_synthetic() -> None:
    parts = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 5000}},
        {"type": "input_audio", "input_audio": {"data": "UklGR", "format": "wav"}},
        {"type": "file", "file": {"filename": "report.pdf", "file_data": "data:application/pdf;base64,JVBER"}},
    ]
    [trace] = parse_openai_chat(jsonl({"messages": [{"role": "user", "content": parts}]}))
    assert trace.steps[0].content == "What is this?\n[image]\n[input_audio]\n[file: report.pdf]"


def test_parse_keeps_reasoning_weight_and_timestamps_on_message_steps_synthetic() -> None:
    messages = [
        {"role": "user", "content": "hi", "timestamp": "2025-01-02T03:04:05.123Z", "name": "ana"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "think",
            "weight": 0,
            "created_at": 1735787045123,
            "tool_calls": [{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "x", "content": "ok", "timestamp": "2025-01-02T03:04:06"},
        {"role": "assistant", "content": "done", "timestamp": "2025-01-02T04:04:07+01:00"},
    ]
    [trace] = parse_openai_chat(jsonl({"messages": messages}))
    assert trace.steps[0].metadata == {"timestamp": "2025-01-02T03:04:05.123000+00:00", "name": "ana"}
    assert trace.steps[1].metadata == {
        "reasoning": "think",
        "timestamp": "2025-01-02T03:04:05.123000+00:00",
        "weight": 0,
    }
    assert trace.steps[2].metadata["timestamp"] == "2025-01-02T03:04:06.000000+00:00"
    assert trace.steps[3].metadata == {"timestamp": "2025-01-02T03:04:07.000000+00:00"}


def test_parse_keeps_line_separators_inside_jsonl_strings_synthetic() -> None:
    text = "one\u2028two\u2029three"
    raw = jsonl({"messages": [{"role": "user", "content": text}]}, {"messages": [{"role": "user", "content": "x"}]})
    first, second = parse_openai_chat(raw)
    assert first.steps[0].content == text and second.steps[0].content == "x"


def test_parse_makes_one_trace_per_choice_of_a_multi_choice_response_synthetic() -> None:
    response = {
        "id": "chatcmpl-1",
        "created": 1700000000,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"},
            {"index": 1, "message": {"role": "assistant", "content": "B"}, "finish_reason": "length"},
        ],
    }
    first, second = parse_openai_chat(orjson.dumps(response))
    assert (first.external_id, second.external_id) == ("chatcmpl-1#0", "chatcmpl-1#1")
    assert (first.steps[0].content, second.metadata["finish_reason"]) == ("A", "length")
    assert first.steps[0].metadata == {"timestamp": "2023-11-14T22:13:20.000000+00:00"}


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            {"messages": [{"role": "user", "content": "x"}, {"role": "bot", "content": "y"}]},
            r"^line 2: messages\[1\]\.role: must be one of system, developer, user, assistant, tool, function, not",
        ),
        (
            {"messages": [{"role": "user", "content": 42}]},
            r"^line 2: messages\[0\]\.content: must be a string, null or an array of content parts, not a number",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]},
            r"^line 2: messages\[0\]\.content\[0\]\.text: must be a string",
        ),
        ({"messages": "hello"}, r"^line 2: messages: must be an array of messages, not a string"),
        ({"messages": ["hello"]}, r"^line 2: messages\[0\]: must be a message object with `role`, not a string"),
        (
            {"messages": [{"role": "assistant", "tool_calls": {"id": "x"}}]},
            r"^line 2: messages\[0\]\.tool_calls: must be an array",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "function": {}}]}]},
            r"^line 2: messages\[0\]\.tool_calls\[0\]\.function\.name: must be a string",
        ),
        (
            {"messages": [{"role": "tool", "tool_call_id": 7, "content": "x"}]},
            r"^line 2: messages\[0\]\.tool_call_id: must be a string",
        ),
        ({"messages": []}, r"^line 2: steps: a trace needs at least one step"),
        ({"messages": [{"role": "system", "content": "only"}]}, r"^line 2: steps: a trace with only system steps"),
        ({"prompt": "hi", "completion": "there"}, r"^line 2: expected an object with `messages`"),
        ({"choices": [{"delta": {"content": "x"}}]}, r"^line 2: choices\[0\]\.message: must be a message object"),
    ],
)
def test_parse_rejects_bad_lines_naming_line_and_field(line: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        parse_openai_chat(jsonl({"messages": [{"role": "user", "content": "ok"}]}, line))


def test_parse_rejects_invalid_json_and_empty_payloads() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: is not valid JSON"):
        parse_openai_chat(b'{"messages": [{"role": "user", "content": "ok"}]}\n{"messages": [\n')
    with pytest.raises(InvalidArgument, match=r"^payload: is empty"):
        parse_openai_chat(b"\n")


_JSON = json_values(
    [
        "messages",
        "role",
        "content",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "type",
        "id",
        "tool_call_id",
        "choices",
        "message",
        "text",
        "image_url",
        "url",
        "function_call",
        "refusal",
        "reasoning_content",
        "custom",
        "timestamp",
        "tools",
        "created",
        "usage",
        "weight",
        "user",
        "assistant",
        "system",
        "tool",
        "developer",
        "input",
    ]
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_parse_and_looks_like_fail_only_with_invalid_argument_on_arbitrary_json(value: Any) -> None:
    assert_parses_or_refuses(parse_openai_chat, looks_like_openai_chat, value)


@pytest.mark.parametrize("directory", ["anthropic-messages", "claude-code", "codex", "langfuse", "langsmith", "otlp"])
def test_looks_like_openai_chat_is_false_for_other_formats_real_fixtures(directory: str) -> None:
    assert_not_detected(looks_like_openai_chat, directory)


def test_a_recorded_requests_id_is_its_external_id_synthetic() -> None:
    request = {"id": "travel-lisbon-1", "messages": [{"role": "user", "content": "Weather in Lisbon?"}]}

    [trace] = parse_openai_chat(orjson.dumps(request))

    assert trace.external_id == "travel-lisbon-1"
