"""OTLP spans sent over several requests (synthetic spans): each request rebuilds its traces from every span stored."""

from typing import Any

import orjson

from stash.rm.v1 import common_pb2, ingest_pb2
from support.ingest import OWNER
from support.otlp import chat_span, otlp_document, text_message

QUESTION = [text_message("user", "Where is order 1182?")]


def _sent(ingest: Any, *spans: dict[str, Any]) -> Any:
    document = orjson.dumps(otlp_document(*spans))
    request = ingest_pb2.IngestOtlpSpansRequest(owner_id=OWNER, export_trace_service_request_json=document)
    return ingest.IngestOtlpSpans(request, timeout=30)


def _answer(span_id: str, start: int, text: str) -> dict[str, Any]:
    return chat_span(span_id, start, QUESTION, [text_message("assistant", text)])


def test_a_span_sent_again_replaces_its_earlier_copy_and_later_spans_append(ingest: Any) -> None:
    first = _sent(
        ingest, _answer("b000000000000002", 1000, "Looking it up."), _answer("b000000000000003", 2000, "Shipped.")
    )

    second = _sent(
        ingest,
        _answer("b000000000000002", 1000, "Looking it up now."),  # a retried export with a changed span
        _answer("b000000000000004", 3000, "It arrives on Monday."),
    )

    assert list(second.trace_ids) == list(first.trace_ids)
    trace = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=second.trace_ids[0]), timeout=30).trace
    assert sorted(span.id for span in trace.spans) == ["b000000000000002", "b000000000000003", "b000000000000004"]
    answers = [step.content for step in trace.steps if step.role == common_pb2.STEP_ROLE_ASSISTANT]
    assert answers == ["Looking it up now.", "Shipped.", "It arrives on Monday."]
