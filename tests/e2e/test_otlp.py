"""OTLP end to end: the OpenTelemetry SDK's own exporters (HTTP protobuf, HTTP JSON, gRPC) sending
GenAI, OpenInference and OpenLLMetry spans to the gateway, which stores them through ingest."""

import gzip
import json
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.json.http.trace_exporter import OTLPSpanExporter as JsonHttpExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as ProtobufHttpExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from support.fixtures import REAL_FIXTURES
from support.stack import RunningStack, running_stack

SYSTEM = "You are a support agent. Use the tools you are given."
QUESTION = "Where is order A-1187?"
TOOL_RESULT = '{"status": "shipped"}'
ANSWER = "Order A-1187 has shipped."
TOOL_CALL = {"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": {"order_id": "A-1187"}}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, module_postgres_url: str) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("otlp"),
        STASH_INGEST_DATABASE_URL=module_postgres_url,
        STASH_GATEWAY_DATABASE_URL=module_postgres_url,
        STASH_GATEWAY_MAX_BODY_BYTES="2000000",
        STASH_GATEWAY_OTLP_MAX_DECOMPRESSED_BYTES="4000000",
    ) as running:
        yield running


def _receiver(stack: RunningStack) -> str:
    return f"{stack.api_url}/otel/v1/traces"


def _send(exporter: SpanExporter, emit: Callable[[Any], None], batch_size: int = 512) -> str:
    """Emit spans through a real TracerProvider and BatchSpanProcessor; returns the trace id (hex)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(exporter, max_export_batch_size=batch_size, schedule_delay_millis=20)
    )
    tracer = provider.get_tracer("support-agent")
    with tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        emit(tracer)
    trace_id = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    provider.shutdown()
    return trace_id


def _genai_calls(tracer: Any) -> None:
    """Two chat calls following the GenAI semantic conventions; the second resends the history."""
    first_input = [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
    ]
    first_output = [{"role": "assistant", "parts": [TOOL_CALL], "finish_reason": "tool_calls"}]
    tool_turn = [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": TOOL_RESULT}]}]
    second_output = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        _chat_attributes(span, first_input, first_output)
    with tracer.start_as_current_span("execute_tool lookup_order") as span:
        span.set_attribute("gen_ai.operation.name", "execute_tool")
    with tracer.start_as_current_span("chat gpt-4o-mini") as span:
        _chat_attributes(span, first_input + first_output + tool_turn, second_output)


def _chat_attributes(span: Any, inputs: list, outputs: list) -> None:
    span.set_attribute("gen_ai.operation.name", "chat")
    span.set_attribute("gen_ai.provider.name", "openai")
    span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
    span.set_attribute("gen_ai.input.messages", json.dumps(inputs))
    span.set_attribute("gen_ai.output.messages", json.dumps(outputs))


def _openinference_call(tracer: Any) -> None:
    """One LLM span with OpenInference's flattened, indexed attributes."""
    with tracer.start_as_current_span("ChatCompletion") as span:
        span.set_attribute("openinference.span.kind", "LLM")
        span.set_attribute("llm.model_name", "gpt-4o-mini")
        for index, (role, content) in enumerate([("system", SYSTEM), ("user", QUESTION)]):
            span.set_attribute(f"llm.input_messages.{index}.message.role", role)
            span.set_attribute(f"llm.input_messages.{index}.message.content", content)
        prefix = "llm.output_messages.0.message"
        span.set_attribute(f"{prefix}.role", "assistant")
        span.set_attribute(f"{prefix}.tool_calls.0.tool_call.id", "call_1")
        span.set_attribute(f"{prefix}.tool_calls.0.tool_call.function.name", "lookup_order")
        span.set_attribute(f"{prefix}.tool_calls.0.tool_call.function.arguments", '{"order_id": "A-1187"}')


def _openllmetry_calls(tracer: Any) -> None:
    """OpenLLMetry: a workflow span around an `openai.chat` span with indexed prompt/completion attributes."""
    with tracer.start_as_current_span("support_triage.workflow") as workflow:
        workflow.set_attribute("traceloop.span.kind", "workflow")
        workflow.set_attribute("traceloop.entity.output", json.dumps(json.dumps({"ok": True})))
        with tracer.start_as_current_span("openai.chat") as span:
            span.set_attribute("gen_ai.system", "openai")
            span.set_attribute("gen_ai.request.model", "gpt-4o-mini")
            span.set_attribute("gen_ai.prompt.0.role", "system")
            span.set_attribute("gen_ai.prompt.0.content", SYSTEM)
            span.set_attribute("gen_ai.prompt.1.role", "user")
            span.set_attribute("gen_ai.prompt.1.content", QUESTION)
            span.set_attribute("gen_ai.completion.0.role", "assistant")
            span.set_attribute("gen_ai.completion.0.content", ANSWER)


def _trace(api: httpx.Client, trace_id: str) -> dict[str, Any]:
    listing = api.get("/traces", params={"limit": 500}).json()["traces"]
    matches = [trace for trace in listing if trace["external_id"] == trace_id]
    assert matches, f"trace {trace_id} not listed"
    return api.get(f"/traces/{matches[0]['id']}").json()


def _conversation(trace: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(step["role"], step["content"], step["tool_name"]) for step in trace["steps"]]


EXPECTED = [
    ("system", SYSTEM, None),
    ("user", QUESTION, None),
    ("assistant", "", "lookup_order"),
    ("tool", TOOL_RESULT, "lookup_order"),
    ("assistant", ANSWER, None),
]


def test_http_protobuf_exporter_delivers_genai_spans(stack: RunningStack, key: str, api: httpx.Client) -> None:
    exporter = ProtobufHttpExporter(endpoint=_receiver(stack), headers={"Authorization": f"Bearer {key}"})

    trace_id = _send(exporter, _genai_calls)

    trace = _trace(api, trace_id)
    assert trace["source_format"] == "otel"
    assert _conversation(trace) == EXPECTED
    assert len(trace["spans"]) == 4
    assert all(span["start_ns"].isdigit() for span in trace["spans"])


def test_batches_of_one_span_rebuild_the_whole_trace_in_order(stack: RunningStack, key: str, api: httpx.Client) -> None:
    exporter = ProtobufHttpExporter(endpoint=_receiver(stack), headers={"Authorization": f"Bearer {key}"})

    trace_id = _send(exporter, _genai_calls, batch_size=1)

    assert _conversation(_trace(api, trace_id)) == EXPECTED


def test_http_json_exporter_delivers_openinference_spans(stack: RunningStack, key: str, api: httpx.Client) -> None:
    exporter = JsonHttpExporter(endpoint=_receiver(stack), headers={"Authorization": f"Bearer {key}"})

    trace_id = _send(exporter, _openinference_call)

    assert _conversation(_trace(api, trace_id)) == EXPECTED[:3]


def test_grpc_exporter_delivers_openllmetry_spans(stack: RunningStack, key: str, api: httpx.Client) -> None:
    port = stack.env["STASH_GATEWAY_OTLP_GRPC_PORT"]
    exporter = GrpcExporter(
        endpoint=f"127.0.0.1:{port}",
        insecure=True,
        headers=(("authorization", f"Bearer {key}"), ("x-stash-trace-source", "triage-bot")),
    )

    trace_id = _send(exporter, _openllmetry_calls)

    trace = _trace(api, trace_id)
    assert _conversation(trace) == [("system", SYSTEM, None), ("user", QUESTION, None), ("assistant", ANSWER, None)]
    assert trace["source_id"] == "triage-bot"


def _request(emit: Callable[[Any], None]) -> ExportTraceServiceRequest:
    """What the SDK would send, captured by an in-memory exporter and encoded with the SDK's encoder."""
    memory = InMemorySpanExporter()
    _send(memory, emit)
    return encode_spans(memory.get_finished_spans())


def _post(stack: RunningStack, key: str | None, body: bytes, content_type: str, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.post(
        _receiver(stack), content=body, headers={"Content-Type": content_type, **auth, **headers}, timeout=60
    )


def test_retried_request_duplicates_nothing(stack: RunningStack, key: str, api: httpx.Client) -> None:
    body = _request(_genai_calls).SerializeToString()

    first = _post(stack, key, body, "application/x-protobuf")
    before = api.get("/traces").json()["total"]
    again = _post(stack, key, body, "application/x-protobuf")

    assert first.status_code == again.status_code == 200
    assert ExportTraceServiceResponse.FromString(again.content) == ExportTraceServiceResponse()
    assert api.get("/traces").json()["total"] == before


def test_gzip_bodies_are_accepted_and_bombs_refused(stack: RunningStack, key: str, api: httpx.Client) -> None:
    request = _request(_genai_calls)
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    bomb = gzip.compress(b"\0" * 5_000_000)

    accepted = _post(
        stack, key, gzip.compress(request.SerializeToString()), "application/x-protobuf", **{"Content-Encoding": "gzip"}
    )
    refused = _post(stack, key, bomb, "application/x-protobuf", **{"Content-Encoding": "gzip"})

    assert accepted.status_code == 200
    assert _conversation(_trace(api, trace_id)) == EXPECTED
    assert refused.status_code == 413 and "decompressed" in status_pb2.Status.FromString(refused.content).message


@pytest.mark.parametrize(("content_type", "encoding"), [("text/plain", "identity"), ("application/x-protobuf", "br")])
def test_other_content_types_and_encodings_get_415(
    stack: RunningStack, key: str, content_type: str, encoding: str
) -> None:
    response = _post(stack, key, b"{}", content_type, **{"Content-Encoding": encoding})

    assert response.status_code == 415


def test_json_content_type_with_charset_is_answered_in_json(stack: RunningStack, key: str) -> None:
    body = json_format.MessageToJson(_request(_genai_calls)).encode()

    response = _post(stack, key, body, "application/json; charset=utf-8")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {}


def test_unparseable_messages_get_400_and_store_nothing(stack: RunningStack, key: str, api: httpx.Client) -> None:
    def broken(tracer: Any) -> None:
        with tracer.start_as_current_span("chat") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.input.messages", "[not json")

    request = _request(broken)
    trace_id = request.resource_spans[0].scope_spans[0].spans[0].trace_id.hex()
    before = api.get("/traces").json()["total"]

    response = _post(stack, key, request.SerializeToString(), "application/x-protobuf")

    assert response.status_code == 400
    assert "gen_ai.input.messages" in response.text
    assert api.get("/traces").json()["total"] == before
    # The rejected request left no raw span behind: a later good call makes a trace of it alone.
    good = _request(_genai_calls)
    for resource_spans in good.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                span.trace_id = bytes.fromhex(trace_id)
    assert _post(stack, key, good.SerializeToString(), "application/x-protobuf").status_code == 200
    assert _conversation(_trace(api, trace_id)) == EXPECTED


def test_span_without_ids_is_rejected_alone(stack: RunningStack, key: str, api: httpx.Client) -> None:
    request = _request(_genai_calls)
    request.resource_spans[0].scope_spans[0].spans[0].span_id = b""
    spans_sent = sum(len(scope.spans) for resource in request.resource_spans for scope in resource.scope_spans)

    response = _post(stack, key, request.SerializeToString(), "application/x-protobuf")

    answer = ExportTraceServiceResponse.FromString(response.content)
    assert response.status_code == 200 and spans_sent > 1
    assert answer.partial_success.rejected_spans == 1
    assert "spanId" in answer.partial_success.error_message


def test_trace_without_llm_spans_is_listed_once_one_arrives(stack: RunningStack, key: str, api: httpx.Client) -> None:
    full = _request(_genai_calls)
    spans = [span for resource in full.resource_spans for scope in resource.scope_spans for span in scope.spans]
    trace_id = spans[0].trace_id.hex()
    root_only = ExportTraceServiceRequest()
    root_only.CopyFrom(full)
    scope = root_only.resource_spans[0].scope_spans[0]
    kept = [span for span in scope.spans if span.name == "invoke_agent support"]
    del scope.spans[:]
    scope.spans.extend(kept)

    assert _post(stack, key, root_only.SerializeToString(), "application/x-protobuf").status_code == 200
    listed = {trace["external_id"] for trace in api.get("/traces", params={"limit": 500}).json()["traces"]}
    assert trace_id not in listed

    assert _post(stack, key, full.SerializeToString(), "application/x-protobuf").status_code == 200
    assert _conversation(_trace(api, trace_id)) == EXPECTED


def test_keys_are_required_and_must_be_full_access(stack: RunningStack, key: str) -> None:
    body = _request(_genai_calls).SerializeToString()
    read_key = httpx.post(
        f"{stack.api_url}/keys", json={"read_only": True}, headers={"Authorization": f"Bearer {key}"}
    ).json()["key"]

    assert _post(stack, None, body, "application/x-protobuf").status_code == 401
    assert _post(stack, read_key, body, "application/x-protobuf").status_code == 403


@pytest.mark.parametrize(
    "fixture",
    [
        "otlp/genai-interlingua-otel-util-genai-1.1b0.json",
        "otlp/genai-interlingua-openinference-openai-0.1.58.json",
        "otlp/genai-interlingua-openllmetry-0.62.3.json",
    ],
)
def test_fixture_over_the_wire_equals_the_fixture_imported_as_a_file(stack: RunningStack, fixture: str) -> None:
    raw = (REAL_FIXTURES / fixture).read_bytes()
    name = fixture.split("/")[1]
    sender, importer = stack.create_user(f"wire-{name}"), stack.create_user(f"file-{name}")

    assert _post(stack, sender, raw, "application/json").status_code == 200
    with stack.client(importer) as client:
        assert client.post("/traces/import", json={"format": "otel", "data": raw.decode()}).status_code == 200
        imported = client.get(f"/traces/{client.get('/traces').json()['traces'][0]['id']}").json()
    with stack.client(sender) as client:
        received = client.get(f"/traces/{client.get('/traces').json()['traces'][0]['id']}").json()

    assert received["external_id"] == imported["external_id"]
    fields = ("role", "content", "tool_name", "tool_input", "tool_call_id")
    assert [{f: s[f] for f in fields} for s in received["steps"]] == [
        {f: s[f] for f in fields} for s in imported["steps"]
    ]
    assert [span["id"] for span in received["spans"]] == [span["id"] for span in imported["spans"]]


def test_grpc_export_without_a_key_is_unauthenticated(stack: RunningStack) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{stack.env['STASH_GATEWAY_OTLP_GRPC_PORT']}")
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)

    with pytest.raises(grpc.RpcError) as caught:
        stub.Export(_request(_genai_calls), timeout=30)

    channel.close()
    assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_grpc_export_of_bytes_that_are_not_otlp_is_invalid_argument(
    stack: RunningStack, key: str, api: httpx.Client
) -> None:
    # The gateway hands the request's bytes to ingest undecoded; ingest's reader names what is wrong.
    before = api.get("/traces").json()["total"]
    with grpc.insecure_channel(f"127.0.0.1:{stack.env['STASH_GATEWAY_OTLP_GRPC_PORT']}") as channel:
        export: grpc.UnaryUnaryMultiCallable[bytes, bytes]
        export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
        with pytest.raises(grpc.RpcError) as caught:
            export(b"\x0a\xff\xff\xff\xff\x0f", metadata=(("authorization", f"Bearer {key}"),), timeout=30)

    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a protobuf ExportTraceServiceRequest" in (caught.value.details() or "")
    assert api.get("/traces").json()["total"] == before
