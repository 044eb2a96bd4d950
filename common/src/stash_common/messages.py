"""Small conversions between Python values and the protobuf well-known types every service uses."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, overload

from google.protobuf import struct_pb2, timestamp_pb2

from stash.rm.v1 import common_pb2
from stash_common.jobs.lifecycle import FAILED, QUEUED, RUNNING, SUCCEEDED

_EXACT_FLOAT_INT = 2**53
# A job-backed row's status (`stash_common.jobs.lifecycle`) as the API's JobStatus.
JOB_STATUSES = {
    QUEUED: common_pb2.JOB_STATUS_QUEUED,
    RUNNING: common_pb2.JOB_STATUS_RUNNING,
    SUCCEEDED: common_pb2.JOB_STATUS_SUCCEEDED,
    FAILED: common_pb2.JOB_STATUS_FAILED,
}


def json_of(message: struct_pb2.Struct | struct_pb2.Value | struct_pb2.ListValue) -> Any:
    """A Struct, Value or ListValue message as plain JSON, integral numbers as ints again (protobuf stores every
    number as a double).

    Walked directly rather than through `json_format.MessageToDict`, which costs several times more: every
    step the labeler and the trainer read carries two of these.
    """
    if isinstance(message, struct_pb2.Struct):
        return _json_object(message)
    if isinstance(message, struct_pb2.ListValue):
        return [_json_value(value) for value in message.values]
    return _json_value(message)


def _json_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return _number(value.number_value)
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return _json_object(value.struct_value)
    if kind == "list_value":
        return [_json_value(item) for item in value.list_value.values]
    if kind == "null_value":
        return None
    raise ValueError("a Value message must have a value")  # as json_format says of an empty one


def _json_object(message: struct_pb2.Struct) -> dict[str, Any]:
    # By key, not `fields.items()`: the map's items view goes through the Mapping ABC, twice the cost.
    fields = message.fields
    return {key: _json_value(fields[key]) for key in fields}


def _number(number: float) -> float | int:
    if math.isinf(number) or math.isnan(number):
        raise ValueError("a Value's number_value cannot be Infinity or NaN in JSON")
    return int(number) if number.is_integer() and abs(number) < _EXACT_FLOAT_INT else number


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
