"""The services' own RPCs walked as some caller on an owner's ids, shared by the isolation and reviewer walks.

The services trust the owner_id they are given and must scope every query by it; a reviewer's calls carry the
reviewer's own id, and only ingest (which owns traces and grants) may answer them with the owner's rows. Every
RPC of the five services is called with each id field filled with the owner's id, and its outcome is classed:
`NOT_FOUND`, `PERMISSION_DENIED`, another status with its details, `own rows` (nothing of the owner's in the
answer) or `owner's rows` (naming which of the owner's ids the answer showed). The RPCs come from the protos'
descriptors, so a new one, or a new id field, fails the walks until it has an expectation here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc
import orjson
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from stash.rm.v1 import (
    common_pb2,
    gepa_pb2,
    gepa_pb2_grpc,
    ingest_pb2,
    ingest_pb2_grpc,
    labeler_pb2,
    labeler_pb2_grpc,
    scorer_pb2,
    scorer_pb2_grpc,
    trainer_pb2,
    trainer_pb2_grpc,
)
from stash_common.channels import open_channel
from support.fixtures import real_fixture
from support.ingest import stash_line
from support.otlp import otlp_document, span_dict
from support.stack import RunningStack

CLAUDE_CODE_SESSION = "claude-code/spotter-v2.1-tool-heavy.jsonl"


class OwnerIds(Protocol):
    """One of everything an owner has, by id, as the walk fills request fields with them."""

    @property
    def user_id(self) -> str: ...
    @property
    def trace(self) -> str: ...
    @property
    def traces(self) -> list[str]: ...
    @property
    def step(self) -> str: ...
    @property
    def annotation(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def scoring_run(self) -> str: ...
    @property
    def gepa_run(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def reviewer_id(self) -> str: ...


STUBS = {
    "IngestService": (ingest_pb2, ingest_pb2_grpc.IngestServiceStub, "ingest"),
    "LabelerService": (labeler_pb2, labeler_pb2_grpc.LabelerServiceStub, "labeler"),
    "ScorerService": (scorer_pb2, scorer_pb2_grpc.ScorerServiceStub, "scorer"),
    "TrainerService": (trainer_pb2, trainer_pb2_grpc.TrainerServiceStub, "trainer"),
    "GepaService": (gepa_pb2, gepa_pb2_grpc.GepaServiceStub, "gepa"),
}
# Request fields that carry an owner's id, and which of the owner's ids each one takes.
ID_FIELDS = {"trace_id": "trace", "annotation_id": "annotation", "reward_model_id": "model", "step_id": "step"}
ID_FIELDS |= {"gepa_run_id": "gepa_run", "scoring_run_id": "scoring_run", "task_id": "task", "source_id": "source"}
# The owner's job ids are never shown, not even to the owner: its model's id stands in, which names no job of
# the caller's either. Every one of the owner's traces: a model needs at least two, and a lone trace would be
# refused for its count.
ID_FIELDS |= {"trace_ids": "traces", "job_id": "model"}
# The owner's reviewer, and the owner as the owner of traces shared with the caller.
ID_FIELDS |= {"reviewer_id": "reviewer_id", "trace_owner_id": "user_id", "source_ids": "source"}
# RPCs that answer the caller with the caller's own rows: lists and batch reads filter by owner, names are per
# owner.
OWN_ROWS = {
    "IngestService/ImportTraces": "adds the caller's own trace under that source id",
    "IngestService/IngestOtlpSpans": "adds the caller's own spans under that source id",
    "IngestService/UploadTranscript": "adds the caller's own trace under that source id",
    "IngestService/ListTraces": "a filter: the owner's ids match none of the caller's traces",
    "IngestService/PutReviewGrant": "the caller shares the caller's own traces with the owner's reviewer",
    "IngestService/ListReviewGrants": "the grants the caller gave",
    "IngestService/DeleteReviewGrant": "revokes the caller's own grant to the owner's reviewer",
    "IngestService/ListTraceSources": "the caller's own sources",
    "IngestService/RenameTraceSource": "names are per owner: the caller names its own source of that id",
    "IngestService/ExportTraces": "a filter over the caller's traces",
    "IngestService/ExportAnnotations": "a filter over the caller's annotations",
    "IngestService/ListTraceRevisions": "the caller's own revisions",
    "IngestService/BatchGetTraceRevisions": "a batch read: the owner's traces are answered not found, naming nothing",
    "IngestService/StreamOwnerRows": "the caller's own rows",
    "IngestService/GetOwnerVersion": "the caller's own version counter",
    "LabelerService/AnnounceTraceRevisions": "skips the owner's traces (they have the owner's evaluations)",
    "LabelerService/GetTraceEvaluation": "answers no evaluation for an id the caller has none for",
    "LabelerService/BatchGetEvaluationSummaries": "a batch read keyed by the caller's traces",
    "LabelerService/ListProcessPatterns": "a filter over the caller's patterns",
    "LabelerService/RecordTrajectoryEvents": "task ids are per owner: the caller records its own task of that name",
    "LabelerService/GetCourseCorrection": "task ids are per owner: the caller's own task of that name",
    "LabelerService/StreamOwnerRows": "the caller's own rows",
    "LabelerService/GetOwnerVersion": "the caller's own version counter",
    "ScorerService/ListTraceScores": "a filter over the caller's scores",
    "ScorerService/ListActionScores": "a filter over the caller's scores",
    "ScorerService/ListScoringRuns": "a filter over the caller's runs",
    "ScorerService/BatchGetLatestScores": "a batch read keyed by the caller's traces",
    "ScorerService/GetEvaluatorScores": "the shared evaluator's scores of the caller's trace of that id: none",
    "ScorerService/BatchGetEvaluatorScores": "a batch read keyed by the caller's traces",
    "ScorerService/StreamOwnerRows": "the caller's own rows",
    "ScorerService/GetOwnerVersion": "the caller's own version counter",
    "ScorerService/ForgetRewardModel": "forgets the caller's own scores of a model of that id: there are none",
    "TrainerService/ListRewardModels": "the caller's own models",
    "GepaService/ListGepaRuns": "the caller's own runs",
}
NOT_OWNER_SCOPED_RPCS = {
    "IngestService/ListFormats": "the same formats for everyone",
    "GepaService/GetGepaDefaults": "the same default models for everyone",
    "ScorerService/PublishEvaluatorRelease": "one release for every account (sent by the trainer)",
}
# What a reviewer who sees the owner's trace gets that a stranger does not. The reviewer's calls carry their own
# id as owner_id: ingest alone decides reviewer access (reads and annotating succeed, the owner's actions and
# other authors' annotations are refused with the reason), and every other service finds nothing of the owner's.
READ_AS_REVIEWER = {
    "IngestService/GetTrace": "owner's rows",
    "IngestService/AuthorizeTrace": "owner's rows",
    "IngestService/CreateAnnotation": "owner's rows",
    "IngestService/BatchGetTraces": "PERMISSION_DENIED",
    "IngestService/DeleteTrace": "PERMISSION_DENIED",
    "IngestService/UpdateAnnotation": "PERMISSION_DENIED",
    "IngestService/DeleteAnnotation": "PERMISSION_DENIED",
}


# The RPCs that only read, by the verb of their name.
READ_VERBS = ("Get", "BatchGet", "List", "Export", "Authorize")
REFUSALS = ("NOT_FOUND", "PERMISSION_DENIED")


def otlp_json() -> bytes:
    """A one-span OTLP/JSON export request (synthetic)."""
    return orjson.dumps(otlp_document(span_dict("00f067aa0ba902b7", 1_000)))


# What a request needs besides ids to pass validation, so that only ownership can refuse it.
EXTRA_FIELDS: dict[str, Callable[[OwnerIds], dict[str, Any]]] = {
    "IngestService/ImportTraces": lambda _: {"format": "stash", "data": stash_line("rpc").encode()},
    "IngestService/IngestOtlpSpans": lambda _: {"export_trace_service_request_json": otlp_json()},
    "IngestService/UploadTranscript": lambda _: {"agent": "auto", "data": real_fixture(CLAUDE_CODE_SESSION)},
    "IngestService/RenameTraceSource": lambda _: {"name": "the caller's name"},
    "IngestService/CreateAnnotation": lambda _: {"rating": 1},
    "IngestService/UpdateAnnotation": lambda _: {"comment": "changed", "update_mask": {"paths": ["comment"]}},
    "IngestService/GetTraceRevision": lambda _: {"revision": 1},
    "IngestService/BatchGetTraceRevisions": lambda ids: {"wanted": [{"trace_id": ids.trace, "revision": 1}]},
    "IngestService/ListTraceRevisions": lambda _: {"limit": 100},
    # A revision of the owner's trace not evaluated yet: queued for the caller, it would find no trace and
    # forget the owner's labels.
    "LabelerService/AnnounceTraceRevision": lambda _: {"revision": 2},
    "LabelerService/AnnounceTraceRevisions": lambda ids: {"revisions": [{"trace_id": ids.trace, "revision": 2}]},
    "LabelerService/RecordTrajectoryEvents": lambda _: {"events": [{"action": "read"}]},
    "LabelerService/SummarizeSections": lambda ids: {"ranges": [{"first_step_id": ids.step, "last_step_id": ids.step}]},
    "TrainerService/CreateRewardModel": lambda _: {"name": "theirs"},
    "TrainerService/CompleteJob": lambda _: {"status": common_pb2.JOB_STATUS_FAILED, "error": "stopped"},
    "ScorerService/ReportScoringResult": lambda _: {"status": common_pb2.JOB_STATUS_SUCCEEDED, "trace_revision": 1},
    "ScorerService/PublishTrainingScores": lambda _: {"job_key": "jobs/trainer/no-such-job"},
}


def rpc_methods() -> Iterator[tuple[str, Any]]:
    """("Service/Method", method descriptor) for every RPC of the five services."""
    for service, (module, _stub, _address) in STUBS.items():
        for method in module.DESCRIPTOR.services_by_name[service].methods:
            yield f"{service}/{method.name}", method


def rpc_request(name: str, method: Any, caller_id: str, ids: OwnerIds) -> Message:
    """The RPC's request as the caller, every id field filled with the owner's id."""
    fields: dict[str, Any] = {"owner_id": caller_id}
    for field in method.input_type.fields:
        if field.name.endswith(("_id", "_ids")) and field.name != "owner_id":
            assert field.name in ID_FIELDS, f"{name}.{field.name}: add it to ID_FIELDS with the owner's id it takes"
            value = getattr(ids, ID_FIELDS[field.name])
            fields[field.name] = [value] if field.is_repeated and isinstance(value, str) else value
    extra = EXTRA_FIELDS[name](ids) if name in EXTRA_FIELDS else {}
    return GetMessageClass(method.input_type)(**fields, **extra)


def invoke(stack: RunningStack, name: str, request: Message) -> Any:
    """Call the RPC on the running service; a streaming answer is read to its end."""
    service, rpc = name.split("/")
    module, stub_class, address = STUBS[service]
    method = module.DESCRIPTOR.services_by_name[service].methods_by_name[rpc]
    channel = open_channel(stack.env[f"STASH_{address.upper()}_ADDRESS"])
    try:
        answer = getattr(stub_class(channel), rpc)(request, timeout=30)
        return list(answer) if method.server_streaming else answer
    finally:
        channel.close()


def owner_s_ids(ids: OwnerIds) -> list[str]:
    """The ids whose appearance in an answer shows the owner's rows."""
    return [ids.user_id, *ids.traces, ids.step, ids.annotation, ids.model, ids.scoring_run]


def rpc_outcomes(stack: RunningStack, caller_id: str, ids: OwnerIds) -> dict[str, str]:
    """The outcome of every owner-scoped RPC called as `caller_id` on the owner's ids."""
    return {
        name: rpc_outcome(stack, name, method, rpc_request(name, method, caller_id, ids), ids)
        for name, method in rpc_methods()
        if name not in NOT_OWNER_SCOPED_RPCS
    }


def owner_read_outcomes(stack: RunningStack, ids: OwnerIds) -> dict[str, str]:
    """The outcome of every read that takes one of the owner's ids, called as the owner: the ids are real, so
    what refuses the others above is who calls, not the id."""
    return {
        name: rpc_outcome(stack, name, method, rpc_request(name, method, ids.user_id, ids), ids)
        for name, method in rpc_methods()
        if name.split("/")[1].startswith(READ_VERBS) and _takes_an_id(method)
    }


def _takes_an_id(method: Any) -> bool:
    return any(field.name in ID_FIELDS for field in method.input_type.fields)


def refused(outcomes: dict[str, str]) -> dict[str, str]:
    """The outcomes that found nothing or were not allowed."""
    return {name: outcome for name, outcome in outcomes.items() if outcome.startswith(REFUSALS)}


def rpc_outcome(stack: RunningStack, name: str, method: Any, request: Message, ids: OwnerIds) -> str:
    """`NOT_FOUND`, `PERMISSION_DENIED`, another status code with its details, `own rows`, or `owner's rows`
    with which of the owner's ids the answer showed."""
    try:
        answer = invoke(stack, name, request)
    except grpc.RpcError as error:
        if error.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.PERMISSION_DENIED):
            return f"{error.code().name}: {error.details()}"
        return f"{error.code()}: {error.details()}"
    shown = "".join(map(str, answer)) if method.server_streaming else str(answer)
    leaked = [value for value in owner_s_ids(ids) if value in shown]
    return f"owner's rows: {leaked}" if leaked else "own rows"


def expected_outcome(name: str) -> str:
    """Lists, filters and per-owner names answer the caller with its own rows; everything else finds nothing."""
    return "own rows" if name in OWN_ROWS else "NOT_FOUND"


def expected_outcomes(outcomes: dict[str, str], sees_trace: bool) -> dict[str, str]:
    """What a stranger (or a reviewer who does not see the owner's trace) gets, and what a reviewer of it gets."""
    expected = {name: expected_outcome(name) for name in outcomes}
    return expected | READ_AS_REVIEWER if sees_trace else expected


def unexpected(outcomes: dict[str, str], expected: dict[str, str]) -> dict[str, str]:
    """The outcomes whose kind (before any `:` with details) is not the expected one."""
    return {name: outcome for name, outcome in outcomes.items() if outcome.split(":")[0] != expected[name]}


def shared_trace_ids(stack: RunningStack, reviewer_id: str, owner_id: str) -> list[str]:
    """The owner's traces ingest lists as shared with the reviewer, sorted."""
    request = ingest_pb2.ListTracesRequest(owner_id=reviewer_id, shared_with_me=True, trace_owner_id=owner_id)
    return sorted(trace.id for trace in invoke(stack, "IngestService/ListTraces", request).traces)


def reviewed_trace_owner(stack: RunningStack, reviewer_id: str, trace_id: str) -> tuple[str, bool]:
    """(the trace's owner, whether the caller reads it as a reviewer) as ingest decides it."""
    request = ingest_pb2.AuthorizeTraceRequest(owner_id=reviewer_id, trace_id=trace_id)
    access = invoke(stack, "IngestService/AuthorizeTrace", request)
    return access.trace_owner_id, access.reviewer
