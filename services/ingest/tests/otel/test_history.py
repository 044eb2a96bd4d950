"""The history merge rule (stash_ingest.otel.history) on synthetic traces: calls that resend the history, retries,
independent calls, and the spans each call contributed."""

from __future__ import annotations

from typing import Any

import orjson

from stash_ingest.adapters.otel import parse_otel
from stash_ingest.otel.traces import build_trace
from support.otlp import (
    SYSTEM,
    TRACE_ID,
    chat_span,
    otlp_document,
    parse_one,
    span_dict,
    text_message,
    tool_call_message,
    tool_result_message,
)
from support.traces import jsonl, tool_calls

SUPPORT_HISTORY = [
    text_message("system", SYSTEM),
    text_message("user", "Where is A-1?"),
    tool_call_message("c1", "lookup_order", {"order_id": "A-1"}),
    tool_result_message("c1", {"status": "shipped"}),
]
ANSWER = {
    "role": "assistant",
    "parts": [{"type": "reasoning", "content": "It is shipped."}, text_message("", "Shipped.")["parts"][0]],
}


def _agent_run() -> list[dict[str, Any]]:
    """An agent span, two calls resending the history around a tool span, a subagent call, a follow-up call."""
    history = SUPPORT_HISTORY
    root = span_dict("a000000000000001", 500, {"gen_ai.operation.name": "invoke_agent"}, name="invoke_agent", kind=1)
    tool_attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.arguments": '{"order_id": "A-1"}'}
    tool = span_dict("b000000000000002", 2_000, tool_attributes, parentSpanId=root["spanId"], kind="SPAN_KIND_INTERNAL")
    research = [text_message("system", "You research."), text_message("user", "Find X")]
    follow_up = [*history, text_message("assistant", "Shipped."), text_message("user", "Thanks")]
    usage = {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2}
    return [  # children before parents, out of start order
        chat_span("b000000000000005", 5_000, follow_up, [text_message("assistant", "Welcome")], **usage),
        chat_span("b000000000000004", 4_000, research, [text_message("assistant", "X found")]),
        tool,
        chat_span("b000000000000003", 3_000, history, [ANSWER]),
        chat_span("b000000000000001", 1_000, history[:2], [history[2]]),
        root,
    ]


def test_parse_otel_prefix_merges_calls_that_resend_the_growing_history() -> None:
    """Synthetic: calls resend the history; a subagent's independent call keeps its own messages."""
    spans = _agent_run()
    trace = parse_one(jsonl(*(otlp_document(span) for span in spans)))
    assert [(step.role, step.content) for step in trace.steps] == [
        ("system", SYSTEM),
        ("user", "Where is A-1?"),
        ("assistant", ""),
        ("tool", '{"status":"shipped"}'),
        ("assistant", "Shipped."),
        ("system", "You research."),
        ("user", "Find X"),
        ("assistant", "X found"),
        ("user", "Thanks"),
        ("assistant", "Welcome"),
    ]
    assert tool_calls(trace) == [("lookup_order", {"order_id": "A-1"}, "c1")]
    assert (trace.steps[3].tool_name, trace.steps[3].tool_call_id) == ("lookup_order", "c1")
    assert trace.steps[4].metadata == {"reasoning": "It is shipped.", "timestamp": "1970-01-01T00:00:00.000003+00:00"}
    assert "timestamp" not in trace.steps[3].metadata
    assert trace.metadata == {
        "service_name": "agent",
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "llm_calls": 4,
    }


def test_parse_otel_records_every_span_with_the_steps_it_contributed() -> None:
    """Synthetic: the agent run's spans, ordered by start time, with kinds and step indices."""
    trace = parse_one(jsonl(*(otlp_document(span) for span in _agent_run())))
    assert [(span.id[-1], span.kind, span.step_indices) for span in trace.spans] == [
        ("1", "agent", ()),
        ("1", "llm", (0, 1, 2)),
        ("2", "tool", ()),
        ("3", "llm", (3, 4)),
        ("4", "llm", (5, 6, 7)),
        ("5", "llm", (8, 9)),
    ]
    assert trace.spans[0].parent_id is None and trace.spans[2].parent_id == "a000000000000001"
    assert trace.spans[2].input == {"order_id": "A-1"}


def test_parse_otel_adds_only_the_new_output_of_a_retried_call() -> None:
    """Synthetic: the same request sent twice (a retry) adds its input once and both outputs."""
    inputs = [text_message("user", "Hi")]
    first = chat_span("c000000000000001", 1_000, inputs, [text_message("assistant", "Hel")])
    retry = chat_span("c000000000000002", 2_000, inputs, [text_message("assistant", "Hello")])
    trace = parse_one(orjson.dumps(otlp_document(first, retry)))
    assert [step.content for step in trace.steps] == ["Hi", "Hel", "Hello"]
    assert [span.step_indices for span in trace.spans] == [(0, 1), (2,)]


def test_parse_otel_groups_one_trace_per_trace_id_across_lines() -> None:
    """Synthetic: two traces interleaved over three JSONL lines, returned in first-seen order."""
    a = chat_span("d000000000000001", 1_000, [text_message("user", "A?")], [text_message("assistant", "A.")])
    b = {
        **chat_span("d000000000000002", 1_000, [text_message("user", "B?")], [text_message("assistant", "B.")]),
        "traceId": "ff" * 16,
    }
    a_again = chat_span(
        "d000000000000003",
        2_000,
        [text_message("user", "A?"), text_message("assistant", "A."), text_message("user", "More")],
        [],
    )
    traces = parse_otel(jsonl(otlp_document(a), otlp_document(b), otlp_document(a_again)))
    assert [trace.external_id for trace in traces] == [TRACE_ID, "ff" * 16]
    assert [step.content for step in traces[0].steps] == ["A?", "A.", "More"]


def test_build_trace_keeps_one_copy_of_a_span_exported_twice() -> None:
    """Synthetic: a retried export repeats a span; the later copy wins."""
    span = chat_span("e000000000000001", 1_000, [text_message("user", "Hi")], [text_message("assistant", "Hello")])
    trace = build_trace(TRACE_ID, [span, {**span, "name": "renamed"}])
    assert trace is not None and [s.name for s in trace.spans] == ["renamed"]
    assert len(trace.steps) == 2


def test_build_trace_returns_none_for_system_instructions_alone() -> None:
    """Synthetic: a call that recorded only its system instructions is not a conversation yet."""
    span = span_dict(
        "e000000000000002", 1_000, {"gen_ai.system_instructions": '[{"type": "text", "content": "Be brief."}]'}
    )
    assert build_trace(TRACE_ID, [span]) is None


def test_parse_otel_is_deterministic() -> None:
    raw = jsonl(*(otlp_document(span) for span in _agent_run()))
    assert parse_otel(raw) == parse_otel(raw)
