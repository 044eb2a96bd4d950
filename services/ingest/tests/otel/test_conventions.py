"""The convention readers (stash_ingest.otel.conventions) on synthetic spans: OpenInference, OpenLLMetry and the
GenAI semantic conventions' attributes and events, and which spans are not LLM calls."""

from __future__ import annotations

from typing import Any

import orjson

from support.otlp import (
    attribute,
    chat_span,
    otlp_document,
    parse_one,
    span_dict,
)
from support.traces import roles, tool_calls


def test_parse_otel_reads_openinference_indices_as_integers_with_gaps() -> None:
    """Synthetic: OpenInference messages 0..11 without 5 (10 sorts after 9), images, tool calls and results."""
    attributes: dict[str, Any] = {"openinference.span.kind": "LLM"}
    for index in (*range(5), *range(6, 12)):
        attributes[f"llm.input_messages.{index}.message.role"] = "user" if index % 2 == 0 else "assistant"
        attributes[f"llm.input_messages.{index}.message.content"] = f"m{index}"
    image = "llm.input_messages.12.message.contents"
    attributes |= {
        f"{image}.0.message_content.type": "text",
        f"{image}.0.message_content.text": "Look:",
        f"{image}.1.message_content.type": "image",
        f"{image}.1.message_content.image.image.url": "data:image/png;base64,AAAA",
        "llm.input_messages.12.message.role": "user",
        "llm.input_messages.13.message.role": "tool",
        "llm.input_messages.13.message.tool_call_id": "t1",
        "llm.input_messages.13.message.content": "42",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "Calling.",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "t2",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"q": "x"}',
    }
    trace = parse_one(
        orjson.dumps(otlp_document(span_dict("f000000000000001", 1_000, attributes, kind="SPAN_KIND_INTERNAL")))
    )
    contents = [step.content for step in trace.steps]
    assert contents[:11] == [f"m{index}" for index in (*range(5), *range(6, 12))]
    assert contents[11:] == ["Look:\n[image]", "42", "Calling.", ""]
    assert roles(trace)[11:] == ["user", "tool", "assistant", "assistant"]
    assert tool_calls(trace) == [("search", {"q": "x"}, "t2")]
    assert trace.steps[12].tool_call_id == "t1"


def test_parse_otel_skips_embedding_spans_of_openllmetry() -> None:
    """Synthetic: an OpenLLMetry embeddings span records its input as gen_ai.prompt.0.content; it is no message."""
    embedding = {"llm.request.type": "embedding", "gen_ai.prompt.0.content": "embed me"}
    chat = {"llm.request.type": "chat", "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "Hi"}
    trace = parse_one(
        orjson.dumps(otlp_document(span_dict("f00000000000000b", 1, embedding), span_dict("f00000000000000c", 2, chat)))
    )
    assert [(step.role, step.content) for step in trace.steps] == [("user", "Hi")]
    assert [span.kind for span in trace.spans] == ["client", "llm"]


def test_parse_otel_skips_openinference_tool_and_chain_spans() -> None:
    """Synthetic: llm.input_messages on a CHAIN span are not read; the LLM span's are."""
    chain = {"openinference.span.kind": "CHAIN", "llm.input_messages.0.message.role": "user"}
    chain["llm.input_messages.0.message.content"] = "ignored"
    llm = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user"}
    llm["llm.input_messages.0.message.content"] = "read"
    trace = parse_one(
        orjson.dumps(otlp_document(span_dict("f000000000000002", 1, chain), span_dict("f000000000000003", 2, llm)))
    )
    assert [step.content for step in trace.steps] == ["read"]
    assert [span.kind for span in trace.spans] == ["chain", "llm"]


def test_parse_otel_reads_legacy_openllmetry_indexed_prompts_and_completions() -> None:
    """Synthetic: gen_ai.prompt.N / gen_ai.completion.N with list content as JSON text and tool calls."""
    attributes = {
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.usage.prompt_tokens": 7,
        "gen_ai.usage.completion_tokens": 3,
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": '[{"type": "text", "text": "Weather?"}]',
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_call",
        "gen_ai.completion.0.tool_calls.0.id": "w1",
        "gen_ai.completion.0.tool_calls.0.name": "weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '"{\\"city\\": \\"Oslo\\"}"',
    }
    trace = parse_one(orjson.dumps(otlp_document(span_dict("f000000000000004", 1_000, attributes))))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("assistant", ""),
    ]
    assert tool_calls(trace) == [("weather", {"city": "Oslo"}, "w1")]
    assert trace.metadata["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert (trace.metadata["provider"], trace.metadata["model"]) == ("Anthropic", "claude-x")


def test_parse_otel_reads_the_inference_details_event_and_system_instructions() -> None:
    """Synthetic: gen_ai.client.inference.operation.details with structured (not JSON-text) messages."""
    details = {
        "gen_ai.system_instructions": [{"type": "text", "content": "Be brief."}],
        "gen_ai.input.messages": [{"role": "user", "parts": [{"type": "text", "content": "Hi"}]}],
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "Hello"}]}]',
    }
    event = {"timeUnixNano": "900", "name": "gen_ai.client.inference.operation.details"}
    event["attributes"] = [attribute(key, value) for key, value in details.items()]
    trace = parse_one(
        orjson.dumps(
            otlp_document(span_dict("f000000000000005", 1_000, {"gen_ai.operation.name": "chat"}, events=[event]))
        )
    )
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Hi"),
        ("assistant", "Hello"),
    ]


def test_parse_otel_reads_deprecated_per_message_span_events() -> None:
    """Synthetic: gen_ai.system.message / user.message / tool.message / choice as span events."""
    events = [
        {"timeUnixNano": "1", "name": "gen_ai.system.message", "attributes": [attribute("content", "Be brief.")]},
        {"timeUnixNano": "2", "name": "gen_ai.user.message", "attributes": [attribute("content", "Weather?")]},
        {
            "timeUnixNano": "3",
            "name": "gen_ai.tool.message",
            "attributes": [attribute("content", "sunny"), attribute("id", "w0")],
        },
        {
            "timeUnixNano": "4",
            "name": "gen_ai.choice",
            "attributes": [attribute("index", 0), attribute("message", {"content": "Sunny."})],
        },
    ]
    trace = parse_one(orjson.dumps(otlp_document(span_dict("f000000000000006", 1_000, {}, events=events))))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", "Be brief."),
        ("user", "Weather?"),
        ("tool", "sunny"),
        ("assistant", "Sunny."),
    ]
    assert trace.steps[2].tool_call_id == "w0"


def test_parse_otel_replaces_image_data_with_placeholders() -> None:
    """Synthetic: GenAI blob/uri parts never put data into content."""
    parts = [
        {"type": "text", "content": "See"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AAAA"},
        {"type": "uri", "modality": "image", "uri": "https://example.com/a.png"},
    ]
    trace = parse_one(
        orjson.dumps(otlp_document(chat_span("f00000000000000a", 1, [{"role": "user", "parts": parts}], [])))
    )
    assert trace.steps[0].content == "See\n[image]\n[image: https://example.com/a.png]"


def test_parse_otel_reads_span_as_llm_call_when_operation_name_is_not_a_string() -> None:
    """Synthetic: a list-valued `gen_ai.operation.name` names no operation; the chat span is still read."""
    attributes = {
        "gen_ai.operation.name": ["chat", "execute_tool"],
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Hi",
    }
    trace = parse_one(orjson.dumps(otlp_document(span_dict("f00000000000000d", 1, attributes))))
    assert [(step.role, step.content) for step in trace.steps] == [("user", "Hi")]
