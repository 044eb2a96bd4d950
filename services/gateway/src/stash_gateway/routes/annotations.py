"""Annotations: ratings and comments on a trace or one of its steps."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response, status
from google.protobuf import field_mask_pb2
from pydantic import Field

from stash.rm.v1 import common_pb2, ingest_pb2
from stash_gateway.auth import Writer
from stash_gateway.openapi import ClosedBody, RequestBody
from stash_gateway.rest_json import annotation_json
from stash_gateway.routes import API_PREFIX
from stash_gateway.state import Services, Settings

router = APIRouter(prefix=API_PREFIX, tags=["annotations"])


class QuoteBody(ClosedBody):
    """The highlighted text inside a step, with the text around it."""

    text: str = Field(min_length=1)
    prefix: str = ""
    suffix: str = ""


class CreateAnnotationBody(RequestBody):
    """`{step_id?, rating?, comment?, quote?}`: null step_id annotates the whole trace."""

    step_id: str | None = None
    rating: int | None = Field(None, ge=-1, le=1, description="1, -1 or null")
    comment: str | None = None
    quote: QuoteBody | None = None


class UpdateAnnotationBody(RequestBody):
    """`{rating?, comment?, label_error?, label_error_note?}`: only the fields sent change; null clears."""

    rating: int | None = Field(None, ge=-1, le=1, description="1, -1 or null")
    comment: str | None = None
    label_error: bool | None = None
    label_error_note: str | None = None


@router.post(
    "/traces/{trace_id}/annotations", status_code=status.HTTP_201_CREATED, summary="Annotate a trace or a step"
)
def create_annotation(
    services: Services, settings: Settings, trace_id: str, body: CreateAnnotationBody, principal: Writer
) -> dict[str, Any]:
    """The new `Annotation`; a quote's text must occur in the step's content (422 otherwise)."""
    message = ingest_pb2.CreateAnnotationRequest(
        owner_id=principal.user_id,
        author_name=principal.user_name,
        trace_id=trace_id,
        step_id=body.step_id,
        rating=body.rating,
        comment=body.comment,
        quote=common_pb2.Quote(**body.quote.model_dump()) if body.quote else None,
    )
    return annotation_json(services.ingest.CreateAnnotation(message, timeout=settings.rpc_timeout_s).annotation)


@router.patch("/annotations/{annotation_id}", summary="Change an annotation")
def update_annotation(
    services: Services, settings: Settings, annotation_id: str, body: UpdateAnnotationBody, principal: Writer
) -> dict[str, Any]:
    """The changed `Annotation`; flag a wrong label with `label_error` and say why in `label_error_note`."""
    sent = body.model_dump(include=body.model_fields_set)
    message = ingest_pb2.UpdateAnnotationRequest(
        owner_id=principal.user_id,
        annotation_id=annotation_id,
        update_mask=field_mask_pb2.FieldMask(paths=sorted(sent)),
        **{field: value for field, value in sent.items() if value is not None},
    )
    return annotation_json(services.ingest.UpdateAnnotation(message, timeout=settings.rpc_timeout_s).annotation)


@router.delete("/annotations/{annotation_id}", status_code=status.HTTP_204_NO_CONTENT, summary="Delete an annotation")
def delete_annotation(services: Services, settings: Settings, annotation_id: str, principal: Writer) -> Response:
    """Remove the annotation."""
    message = ingest_pb2.DeleteAnnotationRequest(owner_id=principal.user_id, annotation_id=annotation_id)
    services.ingest.DeleteAnnotation(message, timeout=settings.rpc_timeout_s)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
