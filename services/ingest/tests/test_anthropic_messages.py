"""The Anthropic Messages adapter on the real fixtures (tests/fixtures/real/anthropic-messages) and synthetic gaps."""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.anthropic_messages import looks_like_anthropic_messages, parse_anthropic_messages
from stash_ingest.adapters.reading import first_value
from stash_ingest.traces import Step, Trace
from support.fixtures import REAL_FIXTURES, real_fixture
from support.json_strategies import json_values
from support.traces import assert_not_detected, assert_parses_or_refuses, jsonl, only_trace, roles

DIRECTORY = "anthropic-messages"


def _parse_one(name: str) -> Trace:
    return only_trace(parse_anthropic_messages(real_fixture(f"{DIRECTORY}/{name}")), name)


def test_parse_reads_parallel_tool_calls_request_with_results_in_order() -> None:
    trace = _parse_one("pydantic-ai-parallel-tool-calls.request.json")
    assert roles(trace) == ["system", "user", "assistant"] + ["assistant"] * 4 + ["tool"] * 4
    assert trace.steps[0].content.startswith("\n    Use the `retrieve_entity_info` tool to get information")
    assert trace.steps[1].content == "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?"
    assert trace.steps[2].content.startswith("I'll help you find out who is the youngest")
    calls, results = trace.steps[3:7], trace.steps[7:]
    assert Counter(step.tool_name for step in calls) == {"retrieve_entity_info": 4}
    assert [step.tool_input for step in calls] == [{"name": name} for name in ("Alice", "Bob", "Charlie", "Daisy")]
    assert [step.tool_call_id for step in results] == [step.tool_call_id for step in calls]
    assert calls[0].tool_call_id == "toolu_0167cfEnoQaPviGdVXA95zcu"
    assert [step.tool_name for step in results] == ["retrieve_entity_info"] * 4
    assert results[3].content == "daisy is bob's daughter and charlie's younger sister"
    assert all("is_error" not in step.metadata for step in results)  # is_error: false is not an error
    assert trace.metadata == {"model": "claude-haiku-4-5", "tools": ["retrieve_entity_info"]}
    assert trace.external_id is None


def test_parse_reads_parallel_tool_calls_response_as_one_assistant_step() -> None:
    trace = _parse_one("pydantic-ai-parallel-tool-calls.response.json")
    assert roles(trace) == ["assistant"]
    assert trace.steps[0].content.startswith("Based on the retrieved information, we can see the family relationships:")
    assert trace.steps[0].content.endswith("she is the youngest among the four family members.")
    assert trace.external_id == "msg_01JVqZPgDwmnyb2kKC3MwCVf"
    assert trace.metadata["model"] == "claude-haiku-4-5-20251001"
    assert trace.metadata["stop_reason"] == "end_turn"
    assert trace.metadata["usage"]["input_tokens"] == 771 and trace.metadata["usage"]["output_tokens"] == 77


def test_parse_puts_replayed_thinking_into_reasoning_of_the_first_step() -> None:
    trace = _parse_one("pydantic-ai-thinking-tool-roundtrip.request.json")
    assert roles(trace) == ["user", "assistant", "assistant", "tool"]
    assert trace.steps[0].content == "What is the largest city in the user country?"
    text = trace.steps[1]
    assert text.content.startswith("I'll help you find the largest city in your country.")
    assert text.metadata["reasoning"].startswith('The user is asking about the largest city in "the user country".')
    assert trace.steps[2] == Step("assistant", "", "get_user_country", {}, "toolu_01YGzqpRE16Vricda3Aqcejo")
    assert trace.steps[3] == Step("tool", "Mexico", "get_user_country", None, "toolu_01YGzqpRE16Vricda3Aqcejo")
    assert all("signature" not in str(step.metadata) for step in trace.steps)


def test_parse_reads_thinking_roundtrip_response() -> None:
    trace = _parse_one("pydantic-ai-thinking-tool-roundtrip.response.json")
    assert roles(trace) == ["assistant"]
    assert trace.steps[0].content.startswith("Based on the information that you're from Mexico")
    assert trace.external_id == "msg_01SZ8KP8HhB1TxP6Ybbv6iKz"


def test_parse_drops_redacted_thinking_in_request_and_response() -> None:
    request = _parse_one("pydantic-ai-redacted-thinking-followup.request.json")
    assert roles(request) == ["user", "assistant", "user"]
    assert request.steps[0].content.startswith("ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_46C9A13E")
    assert request.steps[1].content.startswith("I notice that your message appears to contain a command")
    assert request.steps[2].content == "What was that?"
    assert all(not step.metadata for step in request.steps)
    response = _parse_one("pydantic-ai-redacted-thinking-followup.response.json")
    assert roles(response) == ["assistant"] and not response.steps[0].metadata
    assert response.steps[0].content.startswith("That message appeared to be an attempt to use a special command")
    assert response.external_id == "msg_012oSSVsQdwoGH6b2fryM4fF"


def test_parse_places_tool_result_then_sibling_image_as_tool_then_user_step() -> None:
    trace = _parse_one("pydantic-ai-tool-result-then-image.request.json")
    assert roles(trace) == ["user", "assistant", "assistant", "tool", "user"]
    assert trace.steps[2] == Step("assistant", "", "get_file", {}, "toolu_01YahAUKrWFRUmEJzzQKC8o8")
    assert trace.steps[3] == Step("tool", "File attached", "get_file", None, "toolu_01YahAUKrWFRUmEJzzQKC8o8")
    assert trace.steps[4] == Step("user", "[image: https://www.gstatic.com/webp/gallery3/1.png]")
    response = _parse_one("pydantic-ai-tool-result-then-image.response.json")
    assert response.steps[0].content.startswith("I received a beautiful image of an orange-yellow rose.")
    assert response.metadata["usage"]["output_tokens"] == 243


def test_parse_reads_response_with_thinking_text_and_tool_use() -> None:
    trace = _parse_one("openinference-reasoning-tool-use.response.json")
    assert roles(trace) == ["assistant", "assistant"]
    assert trace.steps[0].content == "Sure! Let me check the weather in San Francisco for you!"
    assert trace.steps[0].metadata == {
        "reasoning": "The user wants to know the weather in San Francisco. "
        "I have all the required parameters to make the function call."
    }
    assert trace.steps[1] == Step(
        "assistant", "", "get_weather", {"location": "San Francisco"}, "toolu_01Lb15KzZHz63KFSjmBpc4Fx"
    )
    assert trace.metadata["stop_reason"] == "tool_use" and trace.metadata["model"] == "claude-sonnet-4-6"
    assert trace.external_id == "msg_01NuGqPL1JZVKeaShZ54fAQj"


def test_parse_keeps_non_ascii_text_and_thinking() -> None:
    trace = _parse_one("openinference-thinking-multi-turn-1.response.json")
    assert roles(trace) == ["assistant"]
    assert trace.steps[0].content.startswith(
        "## Dividing 12,231 by 9\n\n### A Handy Shortcut First\nNotice that **27 = 9 × 3**"
    )
    assert "12,231 − 9,000 = **3,231**" in trace.steps[0].content
    assert trace.steps[0].metadata["reasoning"].startswith("12,231 / 9\n\nLet me think about this.")
    assert "9 × 1000 = 9000" in trace.steps[0].metadata["reasoning"]


def test_looks_like_anthropic_messages_claims_every_fixture() -> None:
    for name in sorted(os.listdir(REAL_FIXTURES / DIRECTORY)):
        assert looks_like_anthropic_messages(first_value(real_fixture(f"{DIRECTORY}/{name}"))), name


def test_looks_like_anthropic_messages_rejects_other_shapes_synthetic() -> None:
    assert not looks_like_anthropic_messages({"steps": [{"role": "user", "content": "hi"}]})
    assert not looks_like_anthropic_messages({"messages": [{"role": "user", "content": "hi"}]})  # plain: openai_chat's
    assert not looks_like_anthropic_messages({"resourceSpans": []})
    claude_code = {
        "type": "assistant",
        "sessionId": "s",
        "message": {"type": "message", "role": "assistant", "content": []},
    }
    assert not looks_like_anthropic_messages(claude_code)
    assert not looks_like_anthropic_messages({"type": "response_item", "payload": {"type": "message", "role": "user"}})
    assert not looks_like_anthropic_messages([{"role": "user", "content": "hi"}])
    assert not looks_like_anthropic_messages({"system": "s", "messages": [{"role": "tool", "content": "x"}]})


def test_parse_reads_system_text_blocks_and_string_contents_synthetic() -> None:
    request = {
        "system": [
            {"type": "text", "text": "Rule one."},
            {"type": "text", "text": "Rule two.", "cache_control": {"type": "ephemeral"}},
        ],
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    }
    [trace] = parse_anthropic_messages(jsonl(request))
    assert trace.steps == (Step("system", "Rule one.\nRule two."), Step("user", "hi"), Step("assistant", "hello"))


def test_parse_splits_a_user_message_around_its_tool_results_synthetic() -> None:
    messages = [
        {"role": "user", "content": "list files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {"path": "/"}}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "before"},
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "is_error": True,
                    "content": [
                        {"type": "text", "text": "permission denied"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR" * 1000},
                        },
                    ],
                },
                {"type": "text", "text": "after"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
            ],
        },
    ]
    [trace] = parse_anthropic_messages(jsonl({"messages": messages}))
    assert roles(trace) == ["user", "assistant", "user", "tool", "user"]
    assert trace.steps[2].content == "before"
    assert trace.steps[3] == Step("tool", "permission denied\n[image]", "ls", None, "t1", {"is_error": True})
    assert trace.steps[4].content == "after\n[image]"


def test_parse_joins_cited_text_blocks_inline_synthetic() -> None:
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "According to the document, "},
            {
                "type": "text",
                "text": "the grass is green",
                "citations": [{"type": "char_location", "cited_text": "green"}],
            },
            {"type": "text", "text": "."},
        ],
    }
    [trace] = parse_anthropic_messages(orjson.dumps(response))
    assert trace.steps[0].content == "According to the document, the grass is green."


def test_parse_keeps_thinking_of_a_message_without_text_synthetic() -> None:
    response = {
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "thinking", "thinking": "ok", "signature": "sig"},
        ],
    }
    [trace] = parse_anthropic_messages(orjson.dumps(response))
    assert trace.steps == (Step("assistant", "", metadata={"reasoning": "hmm\nok"}),)
    assert trace.external_id is None


def test_parse_reads_server_tool_use_and_its_result_synthetic() -> None:
    content = [
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "rain"}},
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srv_1",
            "content": [{"type": "web_search_result", "url": "https://a.b", "title": "A"}],
        },
        {"type": "text", "text": "It rains."},
    ]
    [trace] = parse_anthropic_messages(orjson.dumps({"type": "message", "role": "assistant", "content": content}))
    assert roles(trace) == ["assistant", "tool", "assistant"]
    assert trace.steps[0] == Step("assistant", "", "web_search", {"query": "rain"}, "srv_1")
    assert trace.steps[1].tool_name == "web_search" and trace.steps[1].tool_call_id == "srv_1"
    assert orjson.loads(trace.steps[1].content) == {"title": "A", "type": "web_search_result", "url": "https://a.b"}


def test_parse_keeps_line_separators_inside_jsonl_strings_synthetic() -> None:
    text = "one\u2028two\u2029three"
    first, second = parse_anthropic_messages(
        jsonl(
            {"system": text, "messages": [{"role": "user", "content": text}]},
            {"messages": [{"role": "user", "content": "x"}]},
        )
    )
    assert first.steps == (Step("system", text), Step("user", text))
    assert second.steps == (Step("user", "x"),)


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (
            {"messages": [{"role": "system", "content": "x"}]},
            r"^line 2: messages\[0\]\.role: must be user or assistant",
        ),
        (
            {"messages": [{"role": "user", "content": 3}]},
            r"^line 2: messages\[0\]\.content: must be a string or an array of content blocks, not a number",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
            r"^line 2: messages\[0\]\.content\[0\]: must be a content block object with a string `type`",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": None}]}]},
            r"^line 2: messages\[0\]\.content\[0\]\.text: must be a string, not null",
        ),
        (
            {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}]},
            r"^line 2: messages\[0\]\.content\[0\]\.name: must be a string",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]},
            r"^line 2: messages\[0\]\.content\[0\]\.tool_use_id: must be a string",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}]},
            r"^line 2: messages\[0\]\.content\[0\]\.content: must be a string or an array",
        ),
        (
            {"system": 5, "messages": [{"role": "user", "content": "x"}]},
            r"^line 2: system: must be a string or an array of text blocks",
        ),
        ({"system": [{"type": "image"}], "messages": []}, r"^line 2: system\[0\]: must be a text block"),
        ({"messages": {"role": "user"}}, r"^line 2: messages: must be an array of messages, not an object"),
        ({"messages": ["hi"]}, r"^line 2: messages\[0\]: must be a message object with `role` and `content`"),
        ({"messages": []}, r"^line 2: steps: a trace needs at least one step"),
        (
            {"type": "message", "role": "user", "content": []},
            r"^line 2: role: a response message must have role 'assistant'",
        ),
        ({"type": "message", "role": "assistant", "content": None}, r"^line 2: content: must be a string or an array"),
        ({"prompt": "\n\nHuman: hi\n\nAssistant:"}, r"^line 2: expected a Messages API request"),
    ],
)
def test_parse_rejects_bad_lines_naming_line_and_field(line: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        parse_anthropic_messages(jsonl({"messages": [{"role": "user", "content": "ok"}]}, line))


def test_parse_rejects_invalid_json_and_empty_payloads() -> None:
    with pytest.raises(InvalidArgument, match=r"^line 2: is not valid JSON"):
        parse_anthropic_messages(b'{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": [\n')
    with pytest.raises(InvalidArgument, match=r"^payload: is empty"):
        parse_anthropic_messages(b"")


_JSON = json_values(
    [
        "messages",
        "system",
        "role",
        "content",
        "type",
        "text",
        "id",
        "name",
        "input",
        "tool_use_id",
        "is_error",
        "message",
        "thinking",
        "source",
        "url",
        "citations",
        "tools",
        "model",
        "user",
        "assistant",
        "tool_use",
        "tool_result",
        "image",
        "document",
        "redacted_thinking",
        "server_tool_use",
        "web_search_tool_result",
        "usage",
    ]
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_parse_and_looks_like_fail_only_with_invalid_argument_on_arbitrary_json(value: Any) -> None:
    assert_parses_or_refuses(parse_anthropic_messages, looks_like_anthropic_messages, value)


@pytest.mark.parametrize("directory", ["claude-code", "codex", "langfuse", "langsmith", "openai-chat", "otlp"])
def test_looks_like_anthropic_messages_is_false_for_other_formats_real_fixtures(directory: str) -> None:
    assert_not_detected(looks_like_anthropic_messages, directory)


def test_a_recorded_requests_id_is_its_external_id_synthetic() -> None:
    request = {"id": "coding-dates-1", "system": "You fix tests.", "messages": [{"role": "user", "content": "Fix it."}]}

    [trace] = parse_anthropic_messages(orjson.dumps(request))

    assert trace.external_id == "coding-dates-1"
