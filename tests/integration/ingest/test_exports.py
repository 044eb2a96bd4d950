"""Exports: canonical JSONL re-imports to the same traces; annotations export in the spec's shape."""

import uuid
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stash.rm.v1 import ingest_pb2
from stash_ingest.adapters.stash import parse_stash
from support.ingest import OWNER, import_payload, stash_line


def _export(stub: Any, owner: str) -> bytes:
    return b"".join(chunk.data for chunk in stub.ExportTraces(ingest_pb2.ExportTracesRequest(owner_id=owner)))


# U+0000 is refused at import (PostgreSQL text cannot hold it): see test_imports.
storable = st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
text = st.text(storable, max_size=40)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), text)
json_object = st.dictionaries(st.text(storable, min_size=1, max_size=8), json_leaf, max_size=3)
steps = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool"]), "content": text},
        optional={"tool_name": text, "tool_input": json_object, "tool_call_id": text, "metadata": json_object},
    ),
    min_size=1,
    max_size=6,
)
traces = st.fixed_dictionaries(
    {"id": st.uuids().map(str), "steps": steps}, optional={"title": text.filter(str.strip), "metadata": json_object}
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(traces, min_size=1, max_size=3))
def test_import_export_import_gives_identical_traces(ingest: Any, batch: list[dict]) -> None:
    owner, again_owner = f"o-{uuid.uuid4().hex}", f"o-{uuid.uuid4().hex}"
    payload = "\n".join(orjson.dumps(trace).decode() for trace in batch)
    import_payload(ingest, payload, owner=owner)
    exported = _export(ingest, owner)

    import_payload(ingest, exported.decode(), owner=again_owner)

    assert parse_stash(_export(ingest, again_owner)) == parse_stash(exported)
    exported_steps = {trace.external_id: trace.steps for trace in parse_stash(exported)}
    assert exported_steps == {trace.external_id: trace.steps for trace in parse_stash(payload.encode())}


def test_export_keeps_source_id_and_title(ingest: Any) -> None:
    import_payload(ingest, stash_line("t", metadata={"agent": "bot"}), source_id="team-a")

    (trace,) = parse_stash(_export(ingest, OWNER))

    assert trace.metadata["source_id"] == "team-a"
    assert trace.title == "I want a refund for order 1182"
    assert trace.external_id == "t"


def test_annotation_export_has_the_spec_shape(ingest: Any) -> None:
    trace_id = import_payload(ingest, stash_line("t")).trace_ids[0]
    step = ingest.GetTrace(ingest_pb2.GetTraceRequest(owner_id=OWNER, trace_id=trace_id), timeout=30).trace.steps[4]
    ingest.CreateAnnotation(
        ingest_pb2.CreateAnnotationRequest(
            owner_id=OWNER, author_name="henry", trace_id=trace_id, step_id=step.id, rating=-1, comment="No check"
        ),
        timeout=30,
    )

    chunks = ingest.ExportAnnotations(ingest_pb2.ExportAnnotationsRequest(owner_id=OWNER))
    (line,) = b"".join(chunk.data for chunk in chunks).splitlines()

    record = orjson.loads(line)
    assert {key: record[key] for key in ("trace_id", "trace_external_id", "step_index", "rating", "author")} == {
        "trace_id": trace_id,
        "trace_external_id": "t",
        "step_index": 4,
        "rating": -1,
        "author": "henry",
    }
    assert record["created_at"].endswith("Z") and record["quote"] is None


def test_export_contains_only_the_owners_traces(ingest: Any) -> None:
    import_payload(ingest, stash_line("mine"))

    assert _export(ingest, "owner-b") == b""
