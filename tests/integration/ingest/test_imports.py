"""Importing through the real IngestServicer: all-or-nothing, upserts, sources, titles."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest
from google.protobuf import json_format

from stash.rm.v1 import ingest_pb2
from support.fixtures import REAL_FIXTURES
from support.ingest import OWNER, import_payload, stash_line, trace_total


def _get(stub: Any, trace_id: str, owner: str = OWNER) -> Any:
    return stub.GetTrace(ingest_pb2.GetTraceRequest(owner_id=owner, trace_id=trace_id), timeout=30)


def _error(call: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


def test_import_stores_steps_in_order_with_tool_fields(ingest: Any) -> None:
    response = import_payload(ingest, stash_line("order-1182"))

    assert (response.format, response.imported) == ("stash", 1)
    trace = _get(ingest, response.trace_ids[0]).trace
    assert [step.index for step in trace.steps] == [0, 1, 2, 3, 4]
    assert trace.steps[2].tool_name == "lookup_order"
    assert dict(trace.steps[2].tool_input) == {"order_id": "1182"}
    assert trace.steps[3].tool_call_id == "call_1"
    assert trace.external_id == "order-1182"


def test_one_bad_trace_rejects_the_payload_and_stores_nothing(ingest: Any) -> None:
    bad = orjson.dumps({"steps": [{"role": "robot", "content": "beep"}]}).decode()
    payload = "\n".join([stash_line("a"), stash_line("b"), bad])

    error = _error(lambda: import_payload(ingest, payload))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "line 3: steps[0].role" in error.details()
    assert trace_total(ingest) == 0


def test_trace_with_only_system_steps_is_rejected(ingest: Any) -> None:
    payload = orjson.dumps({"steps": [{"role": "system", "content": "You are helpful."}]}).decode()

    error = _error(lambda: import_payload(ingest, payload))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "only system steps" in error.details()
    assert trace_total(ingest) == 0


def test_auto_detection_failure_names_every_format_tried(ingest: Any) -> None:
    error = _error(lambda: import_payload(ingest, '{"hello": "world"}', fmt="auto"))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    for name in ("stash", "openai_chat", "anthropic_messages", "otel", "langfuse", "langsmith", "claude_code", "codex"):
        assert name in error.details()


def test_unknown_format_lists_the_supported_ones(ingest: Any) -> None:
    error = _error(lambda: import_payload(ingest, stash_line(), fmt="csv"))

    assert "unknown format 'csv'" in error.details() and "langsmith" in error.details()


def test_reimport_replaces_steps_and_deletes_their_annotations(ingest: Any) -> None:
    trace_id = import_payload(ingest, stash_line("t1")).trace_ids[0]
    step = _get(ingest, trace_id).trace.steps[4]
    for step_id in (step.id, None):
        ingest.CreateAnnotation(
            ingest_pb2.CreateAnnotationRequest(
                owner_id=OWNER, trace_id=trace_id, step_id=step_id, rating=1, author_name="alice"
            ),
            timeout=30,
        )
    changed = orjson.loads(stash_line("t1"))
    changed["steps"][4]["content"] = "I cannot refund a delivered order."

    response = import_payload(ingest, orjson.dumps(changed).decode())

    assert response.results[0].result == ingest_pb2.IMPORT_RESULT_REPLACED
    detail = _get(ingest, trace_id)
    assert detail.trace.steps[4].content == "I cannot refund a delivered order."
    assert [annotation.HasField("step_id") for annotation in detail.annotations] == [False]
    assert detail.trace.revision == 2


def test_identical_reimport_changes_nothing(ingest: Any) -> None:
    first = import_payload(ingest, stash_line("same"))

    again = import_payload(ingest, stash_line("same"))

    assert again.trace_ids == first.trace_ids
    assert again.results[0].result == ingest_pb2.IMPORT_RESULT_UNCHANGED
    assert _get(ingest, first.trace_ids[0]).trace.revision == 1


def test_same_external_id_of_another_owner_is_another_trace(ingest: Any) -> None:
    mine = import_payload(ingest, stash_line("shared-id")).trace_ids[0]
    theirs = import_payload(ingest, stash_line("shared-id"), owner="owner-b").trace_ids[0]

    assert mine != theirs
    error = _error(lambda: _get(ingest, mine, owner="owner-b"))
    assert error.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    ("metadata", "explicit", "expected"),
    [
        ({"source_id": "src", "agent": "bot", "source": "web"}, None, "src"),
        ({"agent": "bot", "source": "web"}, None, "bot"),
        ({"source": "web"}, None, "web"),
        ({}, None, "stash"),
        ({"source_id": "src"}, "team-a", "team-a"),
    ],
)
def test_source_id_follows_the_fallback_order(ingest: Any, metadata: dict, explicit: str | None, expected: str) -> None:
    fields = {"source_id": explicit} if explicit else {}

    trace_id = import_payload(ingest, stash_line("s", metadata=metadata), **fields).trace_ids[0]

    assert _get(ingest, trace_id).summary.source_id == expected


def test_explicit_source_id_survives_a_later_upsert_without_one(ingest: Any) -> None:
    trace_id = import_payload(ingest, stash_line("keep", metadata={"agent": "bot"}), source_id="team-a").trace_ids[0]

    import_payload(ingest, stash_line("keep", metadata={"agent": "bot", "v": 2}))

    assert _get(ingest, trace_id).summary.source_id == "team-a"


def test_source_id_longer_than_200_characters_is_rejected(ingest: Any) -> None:
    error = _error(lambda: import_payload(ingest, stash_line(), source_id="x" * 201))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "source_id" in error.details()


def test_title_is_derived_from_the_first_user_request_without_a_model(ingest: Any) -> None:
    trace_id = import_payload(ingest, stash_line()).trace_ids[0]

    assert _get(ingest, trace_id).summary.title == "I want a refund for order 1182"


def test_recorded_title_is_kept(ingest: Any) -> None:
    trace_id = import_payload(ingest, stash_line(title="Refund for 1182")).trace_ids[0]

    assert _get(ingest, trace_id).summary.title == "Refund for 1182"


def test_trace_sources_can_be_renamed_per_owner(ingest: Any) -> None:
    import_payload(ingest, stash_line("s1", metadata={"agent": "support-bot"}))

    renamed = ingest.RenameTraceSource(
        ingest_pb2.RenameTraceSourceRequest(owner_id=OWNER, source_id="support-bot", name="Support"), timeout=30
    )
    listed = ingest.ListTraceSources(ingest_pb2.ListTraceSourcesRequest(owner_id=OWNER), timeout=30)
    others = ingest.ListTraceSources(ingest_pb2.ListTraceSourcesRequest(owner_id="owner-b"), timeout=30)

    assert (renamed.source.name, renamed.source.trace_count) == ("Support", 1)
    assert [(source.source_id, source.name) for source in listed.sources] == [("support-bot", "Support")]
    assert list(others.sources) == []


def test_nul_character_in_content_is_refused_by_name(ingest: Any) -> None:
    line = orjson.loads(stash_line())
    line["steps"][1]["content"] = "binary\x00output"

    error = _error(lambda: import_payload(ingest, orjson.dumps(line).decode()))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "line 1: steps[1].content" in error.details() and "U+0000" in error.details()
    assert trace_total(ingest) == 0


# The real fixtures, auto-detected and stored; the two OTLP files without LLM spans have nothing to import.
FIXTURE_FORMATS = {
    "anthropic-messages": "anthropic_messages",
    "claude-code": "claude_code",
    "codex": "codex",
    "langfuse": "langfuse",
    "langsmith": "langsmith",
    "openai-chat": "openai_chat",
    "otlp": "otel",
}
WITHOUT_LLM_SPANS = {"otel-proto-examples-trace.json", "otel-spec-file-exporter-traces.jsonl"}


@pytest.mark.parametrize(
    "path",
    sorted(path for folder in FIXTURE_FORMATS for path in (REAL_FIXTURES / folder).iterdir()),
    ids=lambda path: path.name,
)
def test_every_real_fixture_is_detected_and_stored(ingest: Any, path: Path) -> None:
    data = path.read_text(encoding="utf-8")
    if path.name in WITHOUT_LLM_SPANS:
        assert _error(lambda: import_payload(ingest, data, fmt="auto")).code() == grpc.StatusCode.INVALID_ARGUMENT
        return

    response = import_payload(ingest, data, fmt="auto")

    assert response.format == FIXTURE_FORMATS[path.parent.name]
    for trace_id in response.trace_ids:
        assert len(_get(ingest, trace_id).trace.steps) >= 1


def test_imported_labels_and_rewards_are_kept_as_they_are(ingest: Any) -> None:
    label = {"chunk_id": "c4", "task_id": "t1", "actor": "agent", "type": "answer", "is_output": True}
    line = orjson.loads(stash_line("labelled", metadata={"rubric_summary": {"score": 0.8}}))
    line["steps"][4]["metadata"] = {"label": label, "reward": {"points": 1.0, "credit": 0.7}}

    trace_id = import_payload(ingest, orjson.dumps(line).decode()).trace_ids[0]

    trace = _get(ingest, trace_id).trace
    assert json_format.MessageToDict(trace.steps[4].metadata) == {
        "label": label,
        "reward": {"points": 1.0, "credit": 0.7},
    }
    assert json_format.MessageToDict(trace.metadata)["rubric_summary"] == {"score": 0.8}


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda ingest: ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id="alice", trace_id="t\x00")), "trace_id"),
        (
            lambda ingest: ingest.BatchGetTraces(
                ingest_pb2.BatchGetTracesRequest(owner_id="alice", trace_ids=["ok", "t\x00"])
            ),
            "trace_ids[1]",
        ),
        (lambda ingest: ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id="alice\x00")), "owner_id"),
    ],
)
def test_nul_character_in_an_id_is_refused_by_name_before_any_lookup(ingest: Any, call: Any, field: str) -> None:
    """PostgreSQL refuses U+0000 even in a lookup: without the check this was INTERNAL."""
    error = _error(lambda: call(ingest))

    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"{field}: contains U+0000" in error.details()


def test_two_imports_of_the_same_new_traces_at_once_both_succeed(ingest: Any) -> None:
    # Both find no trace with these ids and create them; the one that commits second conflicts and retries.
    payload = "\n".join(stash_line(f"race-{number}") for number in range(500))
    with ThreadPoolExecutor(2) as pool:
        responses = list(pool.map(lambda _: import_payload(ingest, payload), range(2)))

    results = sorted(tuple(sorted({item.result for item in response.results})) for response in responses)
    assert [response.imported for response in responses] == [500, 500]
    assert results == [(ingest_pb2.IMPORT_RESULT_CREATED,), (ingest_pb2.IMPORT_RESULT_UNCHANGED,)]
    assert responses[0].trace_ids == responses[1].trace_ids
