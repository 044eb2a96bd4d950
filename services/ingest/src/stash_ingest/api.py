"""IngestServicer: proto ⇄ domain for the IngestService; errors become statuses in the interceptor."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeGuard, TypeVar, get_args

import grpc
from google.protobuf import json_format
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from stash.rm.v1 import common_pb2, ingest_pb2, ingest_pb2_grpc
from stash_common.db import transaction
from stash_common.errors import FailedPrecondition, InvalidArgument, Unavailable
from stash_common.messages import struct_of, timestamp_of
from stash_common.owner_rpcs import OwnerRowsServicer
from stash_common.requests import owner_of, page_of
from stash_ingest import exports, reviews, store
from stash_ingest.adapters.registry import ADAPTERS
from stash_ingest.annotations import (
    Annotation,
    AnnotationDraft,
    Author,
    Quote,
    create_annotation,
    delete_annotation,
    list_annotations,
    update_annotation,
)
from stash_ingest.imports import ImportedTrace, ImportRequest, ImportResult, Titler, import_traces, upload_transcript
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits
from stash_ingest.otlp import OtlpRequest, OtlpResult, ingest_otlp
from stash_ingest.revisions import Announcer, current_revisions, list_revisions
from stash_ingest.traces import Span, StoredStep, StoredTrace, TraceSummary

REVISION_PAGE_MAX = 1000
REVISION_BATCH_MAX = 500  # revisions BatchGetTraceRevisions reads in one call
USE_IN_JOBS = "train, score or run GEPA on it"  # what BatchGetTraces serves: the owner's jobs
CONFLICT_ATTEMPTS = 3
SOURCE_ORDERS: dict[int, Literal["ascending", "descending"] | None] = {
    ingest_pb2.TRACE_ORDER_UNSPECIFIED: None,
    ingest_pb2.TRACE_ORDER_SOURCE_ASCENDING: "ascending",
    ingest_pb2.TRACE_ORDER_SOURCE_DESCENDING: "descending",
}
T = TypeVar("T")
Changeable = Literal["rating", "comment", "label_error", "label_error_note"]  # what UpdateAnnotation may change
CHANGEABLE: tuple[Changeable, ...] = get_args(Changeable)
_RESULTS = {
    ImportResult.CREATED: ingest_pb2.IMPORT_RESULT_CREATED,
    ImportResult.REPLACED: ingest_pb2.IMPORT_RESULT_REPLACED,
    ImportResult.APPENDED: ingest_pb2.IMPORT_RESULT_APPENDED,
    ImportResult.UNCHANGED: ingest_pb2.IMPORT_RESULT_UNCHANGED,
}
_ROLES = {
    "system": common_pb2.STEP_ROLE_SYSTEM,
    "user": common_pb2.STEP_ROLE_USER,
    "assistant": common_pb2.STEP_ROLE_ASSISTANT,
    "tool": common_pb2.STEP_ROLE_TOOL,
}


class IngestServicer(OwnerRowsServicer, ingest_pb2_grpc.IngestServiceServicer):
    """Traces, annotations, sources and exports of every owner, over gRPC."""

    owner_versions = store.OwnerVersionRow.__table__
    owner_tables = "stash_ingest.owner_tables"

    def __init__(
        self,
        sessions: sessionmaker[Session],
        titler: Titler,
        announcer: Announcer | None = None,
        revision_settle: timedelta = timedelta(seconds=30),
        limits: TraceLimits = DEFAULT_LIMITS,
    ) -> None:
        self.sessions = sessions
        self.titler = titler
        self.announcer = announcer
        self.revision_settle = revision_settle
        self.limits = limits

    def ListFormats(
        self, request: ingest_pb2.ListFormatsRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ListFormatsResponse:
        """Every importable format with what it reads."""
        formats = [ingest_pb2.Format(name=a.name, description=a.description) for a in ADAPTERS.values()]
        return ingest_pb2.ListFormatsResponse(formats=formats)

    def ImportTraces(
        self, request: ingest_pb2.ImportTracesRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ImportTracesResponse:
        """Import a payload all-or-nothing: one bad trace stores nothing."""
        source_id = request.source_id if request.HasField("source_id") else None
        job = ImportRequest(owner_of(request), request.format or "auto", request.data, source_id, self.limits)

        def work(session: Session) -> tuple[str, list[ImportedTrace]]:
            imported = import_traces(session, job, self.titler)
            # Also when every trace is unchanged: such an import may still change a trace's source id.
            store.touch_owner(session, job.owner_id)
            return imported

        # A concurrent import may create the same external ids first; the retry finds and updates its traces.
        format_name, imported = self._retrying_conflicts(work)
        results = [_imported_message(item) for item in imported]
        trace_ids = [item.trace_id for item in imported]
        self._announce([item.trace_id for item in imported if item.result != ImportResult.UNCHANGED])
        return ingest_pb2.ImportTracesResponse(
            format=format_name, imported=len(imported), trace_ids=trace_ids, results=results
        )

    def UploadTranscript(
        self, request: ingest_pb2.UploadTranscriptRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.UploadTranscriptResponse:
        """Store one native transcript: created, appended or unchanged; a divergent one fails with trace_sync_error."""
        source_id = request.source_id if request.HasField("source_id") else None
        job = ImportRequest(owner_of(request), request.agent or "auto", request.data, source_id, self.limits)

        def work(session: Session) -> tuple[str, ImportedTrace]:
            uploaded = upload_transcript(session, job, self.titler, request.owner_name.strip())
            store.touch_owner(session, job.owner_id)
            return uploaded

        agent, imported = self._retrying_conflicts(work)
        if imported.result != ImportResult.UNCHANGED:
            self._announce([imported.trace_id])
        return ingest_pb2.UploadTranscriptResponse(agent=agent, trace=_imported_message(imported))

    def IngestOtlpSpans(
        self, request: ingest_pb2.IngestOtlpSpansRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.IngestOtlpSpansResponse:
        """Store OTLP spans and rebuild the traces they touch; spans rejected alone are reported, not fatal."""
        job = OtlpRequest(
            owner_id=owner_of(request),
            protobuf=request.export_trace_service_request,
            json=request.export_trace_service_request_json,
            source_id=request.source_id if request.HasField("source_id") else None,
            limits=self.limits,
        )
        result = self._retrying_conflicts(lambda session: self._ingest_otlp(session, job))
        self._announce(result.trace_ids)
        return ingest_pb2.IngestOtlpSpansResponse(
            rejected_spans=result.rejected_spans, error_message=result.error_message, trace_ids=result.trace_ids
        )

    def _ingest_otlp(self, session: Session, job: OtlpRequest) -> OtlpResult:
        result = ingest_otlp(session, job, self.titler)
        if result.trace_ids:
            store.touch_owner(session, job.owner_id)
        return result

    def _announce(self, trace_ids: Sequence[str]) -> None:
        """Tell the labeler about the committed revisions of these traces."""
        if self.announcer is None or not trace_ids:
            return
        with transaction(self.sessions) as session:
            self.announcer.announce(current_revisions(session, trace_ids))

    def ListTraceRevisions(
        self, request: ingest_pb2.ListTraceRevisionsRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ListTraceRevisionsResponse:
        """Traces changed after the cursor (all owners unless one is named), oldest change first."""
        limit = request.limit or 500
        if not 1 <= limit <= REVISION_PAGE_MAX:
            raise InvalidArgument("limit", f"must be 1 to {REVISION_PAGE_MAX}")
        owner_id = request.owner_id if request.HasField("owner_id") else None
        settle = timedelta(0) if request.include_unsettled else self.revision_settle
        with transaction(self.sessions) as session:
            revisions, cursor = list_revisions(session, request.cursor, limit, settle, owner_id)
        return ingest_pb2.ListTraceRevisionsResponse(
            revisions=[
                ingest_pb2.TraceRevision(
                    owner_id=item.owner_id,
                    trace_id=item.trace_id,
                    revision=item.revision,
                    updated_at=timestamp_of(item.updated_at),
                )
                for item in revisions
            ],
            next_cursor=cursor,
        )

    def GetTraceRevision(
        self, request: ingest_pb2.GetTraceRevisionRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.GetTraceRevisionResponse:
        """The trace and its annotations, if `revision` is still the current one."""
        with transaction(self.sessions) as session:
            row = store.find_trace_row(session, owner_of(request), request.trace_id)
            if row.revision != request.revision:
                raise FailedPrecondition(f"trace {row.id} is at revision {row.revision}, not {request.revision}")
            trace = store.load_trace(session, row)
            annotations = list_annotations(session, [row.id])
        return ingest_pb2.GetTraceRevisionResponse(
            trace=trace_to_proto(trace), annotations=[annotation_to_proto(item) for item in annotations]
        )

    def BatchGetTraceRevisions(
        self, request: ingest_pb2.BatchGetTraceRevisionsRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.BatchGetTraceRevisionsResponse:
        """Several of the owner's traces (steps and metadata, no spans), each where the revision wanted is still its
        current one, in request order; a trace not found or superseded is said so in its own result."""
        owner_id = owner_of(request)
        if len(request.wanted) > REVISION_BATCH_MAX:
            raise InvalidArgument("wanted", f"at most {REVISION_BATCH_MAX} revisions a call")
        with transaction(self.sessions) as session:
            rows = store.owned_trace_rows(session, owner_id, [wanted.trace_id for wanted in request.wanted])
            wanted_revisions = {(wanted.trace_id, wanted.revision) for wanted in request.wanted}
            current = [row.id for row in rows.values() if (row.id, row.revision) in wanted_revisions]
            steps = store.step_rows_by_trace(session, current)
        return ingest_pb2.BatchGetTraceRevisionsResponse(
            results=[_revision_result(wanted, rows.get(wanted.trace_id), steps) for wanted in request.wanted]
        )

    def _retrying_conflicts(self, work: Callable[[Session], T]) -> T:
        """Run `work` in a transaction, again when a concurrent request created the same trace first."""
        for attempt in range(CONFLICT_ATTEMPTS):
            try:
                with transaction(self.sessions) as session:
                    return work(session)
            except IntegrityError:
                if attempt == CONFLICT_ATTEMPTS - 1:
                    raise Unavailable("concurrent writes to the same traces kept conflicting; retry") from None
        raise AssertionError("unreachable")

    def ListTraces(
        self, request: ingest_pb2.ListTracesRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ListTracesResponse:
        """One page of the owner's traces (or, `shared_with_me`, those shared with them), newest import first or by
        source (`order`)."""
        if request.HasField("process_pattern"):
            raise InvalidArgument("process_pattern", "ingest holds no findings; pass the labeler's trace_ids")
        where = store.TraceFilter(
            source_id=request.source_id if request.HasField("source_id") else None,
            created_after=_time(request, "created_after"),
            created_before=_time(request, "created_before"),
            trace_ids=list(request.trace_ids),
        )
        if request.order not in SOURCE_ORDERS:
            raise InvalidArgument("order", f"unknown trace order {request.order}")
        order = SOURCE_ORDERS[request.order]
        limit, offset = page_of(request.page)
        with transaction(self.sessions) as session:
            rows, total = store.list_trace_rows(session, _list_scope(request), where, limit, offset, order)
            summaries = store.summarise(session, rows)
        return ingest_pb2.ListTracesResponse(
            traces=[summary_to_proto(summary) for summary in summaries], page_info=common_pb2.PageInfo(total=total)
        )

    def GetTrace(
        self, request: ingest_pb2.GetTraceRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.GetTraceResponse:
        """One trace with steps (all, or the page asked for), spans and annotations, to its owner or a reviewer."""
        offset, limit = _steps_page(request)
        with transaction(self.sessions) as session:
            row, _access = reviews.readable_trace(session, owner_of(request), request.trace_id)
            trace = store.load_trace(session, row, offset, limit)
            annotations = list_annotations(session, [row.id])
        return ingest_pb2.GetTraceResponse(
            trace=trace_to_proto(trace),
            summary=summary_to_proto(trace.summary),
            annotations=[annotation_to_proto(annotation) for annotation in annotations],
        )

    def BatchGetTraces(
        self, request: ingest_pb2.BatchGetTracesRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.BatchGetTracesResponse:
        """Several traces in request order, with their annotations when asked; NOT_FOUND names the first unowned id."""
        owner_id = owner_of(request)
        with transaction(self.sessions) as session:
            rows = [reviews.own_trace(session, owner_id, trace_id, USE_IN_JOBS) for trace_id in request.trace_ids]
            traces = [store.load_trace(session, row) for row in rows]
            annotations = list_annotations(session, [row.id for row in rows]) if request.include_annotations else []
        return ingest_pb2.BatchGetTracesResponse(
            traces=[trace_to_proto(trace) for trace in traces],
            annotations=[annotation_to_proto(annotation) for annotation in annotations],
        )

    def DeleteTrace(
        self, request: ingest_pb2.DeleteTraceRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.DeleteTraceResponse:
        """Delete a trace with its steps, spans and annotations."""
        with transaction(self.sessions) as session:
            session.delete(reviews.own_trace(session, owner_of(request), request.trace_id, "delete it"))
            store.touch_owner(session, owner_of(request))
        return ingest_pb2.DeleteTraceResponse()

    def ListTraceSources(
        self, request: ingest_pb2.ListTraceSourcesRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ListTraceSourcesResponse:
        """The owner's source ids with display names and trace counts; `shared_with_me`: the sources of the traces
        shared with the caller, under their owners' names, counting only what the caller may read."""
        owner_id = owner_of(request)
        listed = _shared_sources if request.shared_with_me else _own_sources
        with transaction(self.sessions) as session:
            return ingest_pb2.ListTraceSourcesResponse(sources=listed(session, owner_id))

    def RenameTraceSource(
        self, request: ingest_pb2.RenameTraceSourceRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.RenameTraceSourceResponse:
        """Give one of the owner's source ids a display name."""
        owner_id, name = owner_of(request), request.name.strip()
        if not 1 <= len(request.source_id) <= 200:
            raise InvalidArgument("source_id", "must be 1 to 200 characters")
        if not 1 <= len(name) <= 120:
            raise InvalidArgument("name", "must be 1 to 120 characters")
        with transaction(self.sessions) as session:
            store.save_source_name(session, owner_id, request.source_id, name)
            count = store.source_counts(session, owner_id).get(request.source_id, 0)
        return ingest_pb2.RenameTraceSourceResponse(source=_source(owner_id, request.source_id, name, count))

    def CreateAnnotation(
        self, request: ingest_pb2.CreateAnnotationRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.CreateAnnotationResponse:
        """Annotate a trace or one of its steps."""
        draft = AnnotationDraft(
            rating=request.rating if request.HasField("rating") else None,
            comment=request.comment if request.HasField("comment") else None,
            quote=Quote(request.quote.text, request.quote.prefix, request.quote.suffix)
            if request.HasField("quote")
            else None,
        )
        author = Author(owner_of(request), request.author_name or owner_of(request))
        with transaction(self.sessions) as session:
            row, _access = reviews.readable_trace(session, author.id, request.trace_id)
            step_id = request.step_id if request.HasField("step_id") else None
            annotation = create_annotation(session, row, step_id, draft, author)
            store.touch_owner(session, row.owner_id)
        return ingest_pb2.CreateAnnotationResponse(annotation=annotation_to_proto(annotation))

    def UpdateAnnotation(
        self, request: ingest_pb2.UpdateAnnotationRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.UpdateAnnotationResponse:
        """Change the fields named in the update mask; a named field left unset becomes null."""
        changes = {path: _optional(request, path) for path in request.update_mask.paths}
        if "label_error" in changes:
            changes["label_error"] = bool(changes["label_error"])
        with transaction(self.sessions) as session:
            annotation, trace_owner_id = update_annotation(session, owner_of(request), request.annotation_id, changes)
            store.touch_owner(session, trace_owner_id)
        return ingest_pb2.UpdateAnnotationResponse(annotation=annotation_to_proto(annotation))

    def DeleteAnnotation(
        self, request: ingest_pb2.DeleteAnnotationRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.DeleteAnnotationResponse:
        """Delete one of the owner's annotations."""
        with transaction(self.sessions) as session:
            trace_owner_id = delete_annotation(session, owner_of(request), request.annotation_id)
            store.touch_owner(session, trace_owner_id)
        return ingest_pb2.DeleteAnnotationResponse()

    def PutReviewGrant(
        self, request: ingest_pb2.PutReviewGrantRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.PutReviewGrantResponse:
        """Give or replace a reviewer's grant to the owner's traces."""
        owner_id = owner_of(request)
        with transaction(self.sessions) as session:
            grant, created = reviews.save_grant(
                session, owner_id, request.reviewer_id, request.all_sources, list(request.source_ids)
            )
        return ingest_pb2.PutReviewGrantResponse(grant=grant_to_proto(grant), created=created)

    def ListReviewGrants(
        self, request: ingest_pb2.ListReviewGrantsRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.ListReviewGrantsResponse:
        """The grants the caller gave, or (`shared_with_me`) received."""
        caller_id = owner_of(request)
        mine = {"reviewer_id": caller_id} if request.shared_with_me else {"owner_id": caller_id}
        with transaction(self.sessions) as session:
            grants = reviews.list_grants(session, **mine)
        return ingest_pb2.ListReviewGrantsResponse(grants=[grant_to_proto(grant) for grant in grants])

    def DeleteReviewGrant(
        self, request: ingest_pb2.DeleteReviewGrantRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.DeleteReviewGrantResponse:
        """Revoke a reviewer's grant."""
        with transaction(self.sessions) as session:
            reviews.revoke_grant(session, owner_of(request), request.reviewer_id)
        return ingest_pb2.DeleteReviewGrantResponse()

    def AuthorizeTrace(
        self, request: ingest_pb2.AuthorizeTraceRequest, context: grpc.ServicerContext
    ) -> ingest_pb2.AuthorizeTraceResponse:
        """The trace's owner and whether the caller reads it as a reviewer; NOT_FOUND when they may not read it."""
        with transaction(self.sessions) as session:
            _row, access = reviews.readable_trace(session, owner_of(request), request.trace_id)
        return ingest_pb2.AuthorizeTraceResponse(trace_owner_id=access.owner_id, reviewer=access.reviewer)

    def ExportTraces(
        self, request: ingest_pb2.ExportTracesRequest, context: grpc.ServicerContext
    ) -> Iterator[ingest_pb2.ExportTracesResponse]:
        """The owner's traces as canonical JSONL, streamed in chunks."""
        for chunk in exports.export_traces(self.sessions, owner_of(request), list(request.trace_ids)):
            yield ingest_pb2.ExportTracesResponse(data=chunk)

    def ExportAnnotations(
        self, request: ingest_pb2.ExportAnnotationsRequest, context: grpc.ServicerContext
    ) -> Iterator[ingest_pb2.ExportAnnotationsResponse]:
        """The owner's annotations as JSONL, streamed in chunks."""
        for chunk in exports.export_annotations(self.sessions, owner_of(request), list(request.trace_ids)):
            yield ingest_pb2.ExportAnnotationsResponse(data=chunk)


def _list_scope(request: ingest_pb2.ListTracesRequest) -> ColumnElement[bool]:
    """Which traces a ListTraces walks: the caller's own, or those shared with them; `trace_owner_id` keeps one
    owner's (on the caller's own list, any other owner matches nothing)."""
    caller_id = owner_of(request)
    scope = reviews.shared_with(caller_id) if request.shared_with_me else store.TraceRow.owner_id == caller_id
    if request.HasField("trace_owner_id"):
        scope = scope & (store.TraceRow.owner_id == request.trace_owner_id)
    return scope


def grant_to_proto(grant: reviews.Grant) -> ingest_pb2.ReviewGrant:
    """A review grant as its message."""
    return ingest_pb2.ReviewGrant(
        owner_id=grant.owner_id,
        reviewer_id=grant.reviewer_id,
        all_sources=grant.all_sources,
        source_ids=list(grant.source_ids),
        created_at=timestamp_of(grant.created_at),
        updated_at=timestamp_of(grant.updated_at),
    )


def _steps_page(request: ingest_pb2.GetTraceRequest) -> tuple[int, int | None]:
    """(offset, limit) of the steps a GetTrace asks for; limit None: every step from the offset on."""
    offset = request.steps_offset if request.HasField("steps_offset") else 0
    limit = request.steps_limit if request.HasField("steps_limit") else None
    if offset < 0:
        raise InvalidArgument("steps_offset", "must be at least 0")
    if limit is not None and limit < 1:
        raise InvalidArgument("steps_limit", "must be at least 1")
    return offset, limit


def _time(request: ingest_pb2.ListTracesRequest, field: Literal["created_after", "created_before"]) -> datetime | None:
    timestamp: Timestamp = getattr(request, field)
    return timestamp.ToDatetime(tzinfo=UTC) if request.HasField(field) else None


def _is_changeable(field: str) -> TypeGuard[Changeable]:
    return field in CHANGEABLE


def _optional(request: ingest_pb2.UpdateAnnotationRequest, field: str) -> Any:
    if not _is_changeable(field):
        raise InvalidArgument(field, "cannot be changed")
    return getattr(request, field) if request.HasField(field) else None


def _own_sources(session: Session, owner_id: str) -> list[ingest_pb2.TraceSource]:
    """The owner's source ids, named or with traces, with display names and trace counts."""
    counts = store.source_counts(session, owner_id)
    names = store.source_names(session, owner_id)
    return [
        _source(owner_id, source_id, names.get(source_id, source_id), counts.get(source_id, 0))
        for source_id in sorted(set(counts) | set(names))
    ]


def _shared_sources(session: Session, reviewer_id: str) -> list[ingest_pb2.TraceSource]:
    """The sources of the traces shared with the reviewer, with the owners' aliases and the shared counts."""
    counts = store.shared_source_counts(session, reviews.shared_with(reviewer_id))
    names = store.owners_source_names(session, {owner_id for owner_id, _ in counts})
    return [
        _source(owner_id, source_id, names.get((owner_id, source_id), source_id), count)
        for (owner_id, source_id), count in sorted(counts.items())
    ]


def _source(owner_id: str, source_id: str, name: str, count: int) -> ingest_pb2.TraceSource:
    return ingest_pb2.TraceSource(source_id=source_id, name=name, owner_id=owner_id, trace_count=count)


def summary_to_proto(summary: TraceSummary) -> common_pb2.TraceSummary:
    """A trace list row as its message."""
    return common_pb2.TraceSummary(
        id=summary.id,
        external_id=summary.external_id,
        title=summary.title,
        source_format=summary.source_format,
        step_count=summary.step_count,
        positive_count=summary.positive_count,
        negative_count=summary.negative_count,
        comment_count=summary.comment_count,
        label_error_count=summary.label_error_count,
        created_at=timestamp_of(summary.created_at),
        updated_at=timestamp_of(summary.updated_at),
        source_id=summary.source_id,
        source_name=summary.source_name,
        source_owner_id=summary.owner_id,
        revision=summary.revision,
    )


def step_to_proto(stored: StoredStep) -> common_pb2.Step:
    """One stored step as its message."""
    step = stored.step
    return _step_message(
        stored.id, stored.index, step.role, step.content, step.tool_name, step.tool_input, step.tool_call_id,
        step.metadata,
    )  # fmt: skip


def _step_message(
    step_id: str,
    index: int,
    role: str,
    content: str,
    tool_name: str | None,
    tool_input: Mapping[str, Any] | None,
    tool_call_id: str | None,
    metadata: Mapping[str, Any] | None,
) -> common_pb2.Step:
    """A step's message from its fields, in the order of `store.STEP_ROW_COLUMNS`."""
    return common_pb2.Step(
        id=step_id,
        index=index,
        role=_ROLES[role],
        content=content,
        tool_name=tool_name,
        tool_input=struct_of(tool_input),
        tool_call_id=tool_call_id,
        metadata=struct_of(metadata or {}),
    )


def span_to_proto(span: Span) -> common_pb2.Span:
    """One span as its message."""
    message = common_pb2.Span(
        id=span.id,
        parent_id=span.parent_id,
        name=span.name,
        kind=span.kind,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        step_indices=list(span.step_indices),
    )
    if span.input is not None:
        json_format.ParseDict(span.input, message.input)
    if span.output is not None:
        json_format.ParseDict(span.output, message.output)
    return message


def trace_to_proto(trace: StoredTrace) -> common_pb2.Trace:
    """A stored trace with its steps and spans as its message."""
    steps = [step_to_proto(step) for step in trace.steps]
    return _trace_message(trace.summary, trace.metadata, steps, [span_to_proto(span) for span in trace.spans])


def _trace_message(
    head: TraceSummary | store.TraceRow,
    metadata: Mapping[str, Any],
    steps: Sequence[common_pb2.Step],
    spans: Sequence[common_pb2.Span] = (),
) -> common_pb2.Trace:
    """A trace's message from its summary or its row (the labeler's read needs no annotation counts)."""
    return common_pb2.Trace(
        id=head.id,
        external_id=head.external_id,
        title=head.title,
        source_format=head.source_format,
        source_id=head.source_id,
        metadata=struct_of(metadata),
        steps=steps,
        spans=spans,
        created_at=timestamp_of(head.created_at),
        updated_at=timestamp_of(head.updated_at),
        revision=head.revision,
    )


def annotation_to_proto(annotation: Annotation) -> common_pb2.Annotation:
    """One annotation as its message."""
    quote = annotation.quote
    return common_pb2.Annotation(
        id=annotation.id,
        trace_id=annotation.trace_id,
        step_id=annotation.step_id,
        rating=annotation.rating,
        comment=annotation.comment,
        quote=common_pb2.Quote(text=quote.text, prefix=quote.prefix, suffix=quote.suffix) if quote else None,
        label_error=annotation.label_error,
        label_error_note=annotation.label_error_note,
        author_id=annotation.author_id,
        author_name=annotation.author_name,
        created_at=timestamp_of(annotation.created_at),
    )


def _revision_result(
    wanted: ingest_pb2.WantedRevision, row: store.TraceRow | None, steps: Mapping[str, Sequence[tuple[Any, ...]]]
) -> ingest_pb2.TraceRevisionResult:
    """One wanted revision's result: the trace, or why there is none (by position: the message names no id)."""
    if row is None:
        return ingest_pb2.TraceRevisionResult(state=ingest_pb2.REVISION_STATE_NOT_FOUND, error_message="not found")
    if row.revision != wanted.revision:
        return ingest_pb2.TraceRevisionResult(
            state=ingest_pb2.REVISION_STATE_SUPERSEDED,
            error_message=f"the trace is at revision {row.revision}, not {wanted.revision}",
        )
    trace = _trace_message(row, row.trace_metadata or {}, [_step_message(*step) for step in steps[row.id]])
    return ingest_pb2.TraceRevisionResult(state=ingest_pb2.REVISION_STATE_FOUND, trace=trace)


def _imported_message(item: ImportedTrace) -> ingest_pb2.ImportedTrace:
    return ingest_pb2.ImportedTrace(trace_id=item.trace_id, external_id=item.external_id, result=_RESULTS[item.result])
