"""Reading OTLP protobuf requests: the fast converter gives what `json_format` would, and bad spans
are rejected alone."""

import json

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stash_ingest.otel.documents import spans_of
from stash_ingest.otel.protobuf import proto_spans
from stash_ingest.otel.traces import build_trace
from stash_ingest.otlp import OtlpRequest, accept_spans, read_spans


def _request() -> ExportTraceServiceRequest:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent", "deployment.replicas": 3}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("chat") as span:
        span.set_attribute("gen_ai.operation.name", "chat")
        span.set_attribute(
            "gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}])
        )
        span.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "hello"}]}]),
        )
        span.set_attribute("gen_ai.response.finish_reasons", ["stop"])
        span.set_attribute("gen_ai.request.temperature", 0.5)
        span.set_attribute("gen_ai.is_streaming", False)
        span.add_event("gen_ai.choice", {"index": 0})
    return encode_spans(memory.get_finished_spans())


def test_proto_spans_build_the_same_trace_as_json_format() -> None:
    request = _request()
    document = json_format.MessageToDict(request)

    fast = [span for _, span in proto_spans(request)]
    slow = [span for _, span in spans_of(document, "body")]
    trace_id = fast[0]["traceId"]

    assert build_trace(trace_id, fast) == build_trace(trace_id, slow)
    assert [step.content for step in build_trace(trace_id, fast).steps] == ["hi", "hello"]


def test_span_without_a_span_id_is_rejected_alone() -> None:
    request = _request()
    request.resource_spans[0].scope_spans[0].spans.add().CopyFrom(request.resource_spans[0].scope_spans[0].spans[0])
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b""

    accepted, rejected = accept_spans(read_spans(OtlpRequest("owner", protobuf=request.SerializeToString())))

    assert len(accepted) == 1 and len(rejected) == 1
    assert "spans[1]" in rejected[0] and "spanId" in rejected[0]
