"""The `otel` import format: OTLP/JSON traces in a file, one trace per `traceId`.

A file holds one OTLP/JSON document (an export request or TracesData), a JSON array of them, or
Collector file-exporter JSONL (one document per line). The adapter only composes the shared pieces
in `stash_ingest.otel` — documents to span dicts, span dicts to a trace — and adds what a file
import needs on top: every trace is validated, and a file with no LLM messages at all is an error
(the live receiver, by contrast, keeps such spans and waits for the LLM spans to arrive).
"""

from __future__ import annotations

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import read_records
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, TraceReader
from stash_ingest.otel.documents import COUNTED, group_records, looks_like_otel
from stash_ingest.otel.spans import trace_where
from stash_ingest.otel.traces import build_trace
from stash_ingest.traces import Trace

__all__ = ["COUNTED", "looks_like_otel", "parse_otel"]

NO_MESSAGES = "no LLM messages found in any span (looked for gen_ai.*, llm.*_messages, gen_ai.prompt.*)"


def parse_otel(raw: bytes, limits: TraceLimits = DEFAULT_LIMITS) -> list[Trace]:
    """Parse OTLP/JSON (one document, an array of them, or file-exporter JSONL) into one trace per traceId."""
    records = read_records(raw, COUNTED, limits)
    if not records:
        raise InvalidArgument("payload", "is empty; expected an OTLP/JSON document with resourceSpans")
    reader = TraceReader(limits)
    for trace_id, spans in group_records(records, limits).items():
        trace = build_trace(trace_id, spans, limits)
        if trace is not None:
            reader.add(trace, trace_where(trace_id))
    if not reader.traces:
        raise InvalidArgument("resourceSpans", NO_MESSAGES)
    return reader.traces
