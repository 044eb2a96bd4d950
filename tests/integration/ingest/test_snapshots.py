"""Growing snapshots of native transcripts (Claude Code, Codex), on the real fixture files."""

from typing import Any

import grpc
import orjson
import pytest

from stash.rm.v1 import ingest_pb2
from support.fixtures import real_fixture
from support.ingest import OWNER, import_payload

CLAUDE = "claude-code/spotter-v2.1-tool-heavy.jsonl"
CODEX = "codex/localpush-codex-desktop-0.104-redacted-parallel-calls.jsonl"


def _cut(raw: bytes, fraction: float) -> bytes:
    """The transcript as it stood earlier: its first lines, cut at a line boundary near `fraction`."""
    lines = raw.split(b"\n")
    return b"\n".join(lines[: int(len(lines) * fraction)]) + b"\n"


def _steps(stub: Any, trace_id: str) -> list[Any]:
    return list(stub.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30).trace.steps)


@pytest.mark.parametrize(("fixture", "fmt"), [(CLAUDE, "claude_code"), (CODEX, "codex")])
def test_longer_snapshot_appends_and_keeps_step_ids_and_annotations(ingest: Any, fixture: str, fmt: str) -> None:
    full = real_fixture(fixture)
    early = _cut(full, 0.6)
    trace_id = import_payload(ingest, early.decode(), fmt=fmt).trace_ids[0]
    before = _steps(ingest, trace_id)
    annotated = next(step for step in before if step.role == 3)
    ingest.CreateAnnotation(
        ingest_pb2.CreateAnnotationRequest(owner_id=OWNER, trace_id=trace_id, step_id=annotated.id, rating=1),
        timeout=30,
    )

    response = import_payload(ingest, full.decode(), fmt=fmt)

    after = _steps(ingest, trace_id)
    assert response.trace_ids == [trace_id]
    assert response.results[0].result == ingest_pb2.IMPORT_RESULT_APPENDED
    assert len(after) > len(before)
    assert [step.id for step in after[: len(before)]] == [step.id for step in before]
    detail = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30)
    assert [annotation.step_id for annotation in detail.annotations] == [annotated.id]


@pytest.mark.parametrize(("fixture", "fmt"), [(CLAUDE, "claude_code"), (CODEX, "codex")])
def test_duplicate_or_older_snapshot_is_a_no_op(ingest: Any, fixture: str, fmt: str) -> None:
    full = real_fixture(fixture)
    trace_id = import_payload(ingest, full.decode(), fmt=fmt).trace_ids[0]
    before = _steps(ingest, trace_id)

    again = import_payload(ingest, full.decode(), fmt=fmt)
    older = import_payload(ingest, _cut(full, 0.5).decode(), fmt=fmt)

    assert again.results[0].result == older.results[0].result == ingest_pb2.IMPORT_RESULT_UNCHANGED
    assert [step.id for step in _steps(ingest, trace_id)] == [step.id for step in before]


def test_divergent_snapshot_is_a_sync_error_and_keeps_the_trace(ingest: Any) -> None:
    full = real_fixture(CLAUDE)
    trace_id = import_payload(ingest, full.decode(), fmt="claude_code").trace_ids[0]
    before = _steps(ingest, trace_id)
    first_prompt = next(step.content for step in before if step.role == 2)
    rewritten = full.replace(orjson.dumps(first_prompt)[1:-1], b"a different request", 1)

    with pytest.raises(grpc.RpcError) as caught:
        import_payload(ingest, rewritten.decode(), fmt="claude_code")

    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert caught.value.details().startswith("trace_sync_error")
    assert [(step.id, step.content) for step in _steps(ingest, trace_id)] == [
        (step.id, step.content) for step in before
    ]
