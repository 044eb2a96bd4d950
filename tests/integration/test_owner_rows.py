"""What ingest, the labeler and the scorer give the gateway's SQL: the owner's rows as Arrow IPC streams
(StreamOwnerRows) and a change marker (GetOwnerVersion) that moves with every write of those rows and only then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf.field_mask_pb2 import FieldMask

from stash.rm.v1 import common_pb2, ingest_pb2, labeler_pb2, scorer_pb2
from stash_common.owner_rows import read_chunks
from stash_ingest.titles import derive_title
from support.backend import Backend, serve_backend
from support.ingest import OTHER_OWNER, OWNER, import_payload, serve_ingest, stash_line
from support.otlp import chat_span, otlp_document, text_message
from support.scorer import finished_run, wait_until


@pytest.fixture(params=["postgresql", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'stash.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def ingest(database_url: str) -> Iterator[Any]:
    stub, stop = serve_ingest(database_url, derive_title)
    yield stub
    stop()


@pytest.fixture
def backend(postgres_url: str, tmp_path: Path) -> Iterator[Backend]:
    with serve_backend(postgres_url, tmp_path / "scoring-jobs") as running:
        yield running


def version(stub: Any, owner_id: str = OWNER) -> str:
    return str(stub.GetOwnerVersion(common_pb2.GetOwnerVersionRequest(owner_id=owner_id), timeout=10).version)


def streamed(stub: Any, owner_id: str = OWNER) -> tuple[set[str], dict[str, Any]]:
    """(the markers the stream carried, each table read back from its chunks)."""
    chunks: dict[str, list[bytes]] = {}
    markers = set()
    for message in stub.StreamOwnerRows(common_pb2.StreamOwnerRowsRequest(owner_id=owner_id), timeout=30):
        chunks.setdefault(message.table, []).append(message.arrow_ipc)
        markers.add(message.version)
    return markers, {name: read_chunks(parts) for name, parts in chunks.items()}


def _changes(stub: Any, write: Any) -> bool:
    """Whether `write()` gave the owner a new marker (and left the other owner's alone)."""
    before, other = version(stub), version(stub, OTHER_OWNER)
    write()
    return version(stub) != before and version(stub, OTHER_OWNER) == other


def test_every_ingest_write_moves_the_owners_marker_and_reads_do_not(ingest: Any) -> None:
    assert version(ingest) == ""
    trace_id = import_payload(ingest, stash_line("refund")).trace_ids[0]
    step_id = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id)).trace.steps[4].id
    created: list[str] = []

    def annotate() -> None:
        request = ingest_pb2.CreateAnnotationRequest(owner_id=OWNER, trace_id=trace_id, step_id=step_id, rating=1)
        created.append(ingest.CreateAnnotation(request).annotation.id)

    def update() -> None:
        mask = FieldMask(paths=["rating"])
        request = ingest_pb2.UpdateAnnotationRequest(
            owner_id=OWNER, annotation_id=created[0], update_mask=mask, rating=-1
        )
        ingest.UpdateAnnotation(request, timeout=10)

    def otlp() -> None:
        span = chat_span("b000000000000002", 1000, [text_message("user", "hi")], [text_message("assistant", "hello")])
        document = orjson.dumps(otlp_document(span))
        ingest.IngestOtlpSpans(
            ingest_pb2.IngestOtlpSpansRequest(owner_id=OWNER, export_trace_service_request_json=document)
        )

    assert version(ingest) != ""
    assert not _changes(ingest, lambda: ingest.ListTraces(ingest_pb2.ListTracesRequest(owner_id=OWNER)))
    assert not _changes(ingest, lambda: streamed(ingest))
    assert _changes(ingest, annotate)
    assert _changes(ingest, update)
    assert _changes(ingest, lambda: ingest.DeleteAnnotation(
        ingest_pb2.DeleteAnnotationRequest(owner_id=OWNER, annotation_id=created[0])
    ))  # fmt: skip
    assert _changes(ingest, lambda: import_payload(ingest, stash_line("refund", title="renamed")))
    assert _changes(ingest, otlp)
    assert _changes(
        ingest, lambda: ingest.DeleteTrace(ingest_pb2.DeleteTraceRequest(owner_id=OWNER, trace_id=trace_id))
    )


def test_ingest_streams_only_the_owners_rows_and_every_table_even_when_empty(ingest: Any) -> None:
    import_payload(ingest, "\n".join([stash_line("a"), stash_line("b")]))
    import_payload(ingest, stash_line("a"), owner=OTHER_OWNER)

    markers, tables = streamed(ingest)
    _, empty = streamed(ingest, "nobody")

    assert markers == {version(ingest)}
    assert (tables["traces"].num_rows, tables["steps"].num_rows, tables["annotations"].num_rows) == (2, 10, 0)
    assert sorted(tables["traces"].column("external_id").to_pylist()) == ["a", "b"]
    assert tables["steps"].column("step_index").to_pylist()[:5] == [0, 1, 2, 3, 4]
    assert [table.num_rows for table in empty.values()] == [0, 0, 0]
    assert {name: table.schema for name, table in empty.items()} == {name: t.schema for name, t in tables.items()}


def test_the_labelers_marker_moves_as_evaluations_are_queued_and_saved(backend: Backend) -> None:
    labeler = backend.labeler.stub
    assert version(labeler) == ""
    trace_id = import_payload(backend.ingest, stash_line("refund")).trace_ids[0]

    def labels() -> Any:
        _, tables = streamed(labeler)
        statuses = tables["evaluations"].column("status").to_pylist()
        return tables if statuses == ["succeeded"] and tables["step_labels"].num_rows else None

    tables = wait_until(labels, what="the evaluation saved")
    saved = version(labeler)
    relabel = labeler_pb2.RelabelTraceRequest(owner_id=OWNER, trace_id=trace_id)

    assert tables["step_labels"].column("step_index").to_pylist() == [1, 2, 3, 4]
    assert tables["step_labels"].column("type").to_pylist() == [None, "lookup", "lookup", "answer"]
    assert version(labeler, OTHER_OWNER) == ""
    assert _changes(labeler, lambda: labeler.RelabelTrace(relabel, timeout=10))
    assert wait_until(lambda: version(labeler) != saved and labels(), what="the evaluation saved again")


def test_the_scorers_marker_moves_when_scores_are_published(backend: Backend) -> None:
    scorer = backend.scorer.stub
    trace_id = import_payload(backend.ingest, stash_line("refund")).trace_ids[0]
    model_id = backend.trainer.add_model(OWNER)
    before = version(scorer)

    request = scorer_pb2.ScoreTraceRequest(owner_id=OWNER, trace_id=trace_id, reward_model_id=model_id)
    run = scorer.ScoreTrace(request, timeout=30).scoring_run
    assert finished_run(scorer, OWNER, run.id).status == common_pb2.JOB_STATUS_SUCCEEDED

    markers, tables = streamed(scorer)
    assert markers == {version(scorer)} != {before}
    assert tables["action_scores"].column("score").to_pylist() == [0.5, 1.0]
    assert tables["action_scores"].column("step_index").to_pylist() == [2, 4]
    assert tables["scores"].column("score").to_pylist() == [1.5]
    assert version(scorer, OTHER_OWNER) == ""
