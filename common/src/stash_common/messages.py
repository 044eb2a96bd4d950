"""Small conversions between Python values and the protobuf well-known types every service uses."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, overload

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from stash.rm.v1 import common_pb2
from stash_common.job_lifecycle import FAILED, QUEUED, RUNNING, SUCCEEDED

_EXACT_FLOAT_INT = 2**53
# A job-backed row's status (`stash_common.job_lifecycle`) as the API's JobStatus.
JOB_STATUSES = {
    QUEUED: common_pb2.JOB_STATUS_QUEUED,
    RUNNING: common_pb2.JOB_STATUS_RUNNING,
    SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    FAILED: common_pb2.JOB_STATUS_FAILED,
}


def plain(value: Any) -> Any:
    """JSON read from a Struct with integral numbers as ints again (protobuf stores every number as a double)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _EXACT_FLOAT_INT:
        return int(value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def json_of(message: Message) -> Any:
    """A Struct or Value message as plain JSON."""
    return plain(json_format.MessageToDict(message))


@overload
def struct_of(value: Mapping[str, Any]) -> struct_pb2.Struct: ...
@overload
def struct_of(value: None) -> None: ...
def struct_of(value: Mapping[str, Any] | None) -> struct_pb2.Struct | None:
    """A JSON object as a Struct (None stays None: the field is left unset)."""
    if value is None:
        return None
    message = struct_pb2.Struct()
    message.update(value)
    return message


@overload
def timestamp_of(moment: datetime) -> timestamp_pb2.Timestamp: ...
@overload
def timestamp_of(moment: None) -> None: ...
def timestamp_of(moment: datetime | None) -> timestamp_pb2.Timestamp | None:
    """A datetime as a Timestamp (None stays None: the field is left unset)."""
    if moment is None:
        return None
    message = timestamp_pb2.Timestamp()
    message.FromDatetime(moment)
    return message
