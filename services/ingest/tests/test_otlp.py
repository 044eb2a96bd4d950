"""Reading OTLP protobuf requests: the fast converter gives what `json_format` would, and bad spans
are rejected alone."""

import json

import pytest
from google.protobuf import json_format
from google.protobuf.internal.encoder import _VarintBytes
from google.protobuf.message import DecodeError
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from stash_common.errors import InvalidArgument
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

    fast = [span for _, span in proto_spans(request.SerializeToString(), "body")]
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


def _resource(key: str) -> ProtoResource:
    return ProtoResource(attributes=[KeyValue(key=key, value=AnyValue(string_value="v"))])


def test_proto_spans_read_every_resource_and_scope_where_they_stand() -> None:
    def scope(name: str) -> ScopeSpans:
        return ScopeSpans(spans=[Span(span_id=bytes([n + 1] * 8), name=f"{name}{n}") for n in range(2)])

    resources = [ResourceSpans(resource=_resource(f"r{r}"), scope_spans=[scope(f"{r}a"), scope(f"{r}b")]) for r in "xy"]
    raw = ExportTraceServiceRequest(resource_spans=resources).SerializeToString()

    spans = list(proto_spans(raw, "body"))

    assert [where for where, _ in spans][-1] == "body: resourceSpans[1].scopeSpans[1].spans[1]"
    assert [span["name"] for _, span in spans] == ["xa0", "xa1", "xb0", "xb1", "ya0", "ya1", "yb0", "yb1"]
    assert [span["resource"]["attributes"][0]["key"] for _, span in spans] == ["rx"] * 4 + ["ry"] * 4


def test_proto_spans_merge_a_resource_written_twice_and_after_its_spans() -> None:
    # Protobuf allows fields in any order and merges a repeated singular field, as the whole decode did.
    resource_spans = b"".join(
        ResourceSpans(**fields).SerializeToString()
        for fields in [{"scope_spans": [ScopeSpans(spans=[Span(name="s")])]}, {"resource": _resource("a")}]
        + [{"resource": _resource("b")}]
    )
    raw = b"\x0a" + _VarintBytes(len(resource_spans)) + resource_spans

    [(_, span)] = proto_spans(raw, "body")

    expected = ExportTraceServiceRequest.FromString(raw).resource_spans[0].resource.attributes
    assert [item["key"] for item in span["resource"]["attributes"]] == [item.key for item in expected] == ["a", "b"]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"{}", id="json"),
        pytest.param(_request().SerializeToString()[:-3], id="truncated"),
        pytest.param(
            ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[Span(name="ok")])])])
            .SerializeToString()
            .replace(b"ok", b"\xff\xfe"),
            id="not-utf8",
        ),
    ],
)
def test_a_body_that_is_not_a_request_is_refused_as_the_whole_decode_refused_it(raw: bytes) -> None:
    with pytest.raises(DecodeError) as whole:
        ExportTraceServiceRequest.FromString(raw)

    with pytest.raises(InvalidArgument) as caught:
        list(proto_spans(raw, "body"))

    assert str(caught.value) == f"body: is not a protobuf ExportTraceServiceRequest ({whole.value})"
