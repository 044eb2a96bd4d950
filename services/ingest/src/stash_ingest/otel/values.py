"""OTLP/JSON scalars and attribute values, decoded once into plain Python values.

Emitters disagree on the encoding of the same field, and every variant here comes from a real
emitter: ids in hex of either case or in base64 (what `MessageToDict` of an opentelemetry-proto
message writes), 64-bit integers as decimal strings or JSON numbers, enums as integers or names.
They are all normalised here, at the edge, so no later piece sees an encoding: ids become
lower-case hex ("" when empty or all zero, which OTLP calls invalid), times become integer
nanoseconds, and AnyValue attribute lists become dicts of decoded values.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.reading import list_or_empty

_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")


def hex_id(value: Any, where: str) -> str:
    """Lower-case hex from hex of either case or base64; empty and all-zero ids (invalid in OTLP) are ""."""
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise InvalidArgument(where, "must be a hex or base64 id string")
    if _HEX.fullmatch(value):
        hex_value = value.lower()
    else:
        try:
            hex_value = base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True).hex()
        except (binascii.Error, ValueError):
            raise InvalidArgument(where, f"must be a hex or base64 id, not {value!r}") from None
    return hex_value if hex_value.strip("0") else ""


def nanos(value: Any, where: str) -> int:
    """Nanoseconds since the epoch from a decimal string or a JSON number; absent is 0."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise InvalidArgument(where, f"must be nanoseconds since the epoch (a decimal string or integer), not {value!r}")


def attributes(items: Any) -> dict[str, Any]:
    """OTLP key/value attributes as a plain dict of decoded values (later keys win)."""
    if isinstance(items, Mapping):
        return dict(items)
    pairs = (item for item in list_or_empty(items) if isinstance(item, Mapping) and isinstance(item.get("key"), str))
    return {item["key"]: any_value(item.get("value")) for item in pairs}


def any_value(value: Any) -> Any:
    """An OTLP/JSON AnyValue (`{"stringValue": …}`, `{"arrayValue": …}`, …) as a Python value."""
    if not isinstance(value, Mapping):
        return value
    for key, read in _VALUE_READERS.items():
        if key in value:
            return read(value[key])
    return None


def int_value(value: Any) -> Any:
    """An integer written as a decimal string, as an int; any other value as it is."""
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _double_value(value: Any) -> Any:
    return float(value) if isinstance(value, str | int) and not isinstance(value, bool) else value


_VALUE_READERS: Mapping[str, Callable[[Any], Any]] = {
    "stringValue": lambda value: value,
    "boolValue": lambda value: value,
    "intValue": int_value,
    "doubleValue": _double_value,
    "arrayValue": lambda value: [any_value(item) for item in list_or_empty((value or {}).get("values"))],
    "kvlistValue": lambda value: attributes((value or {}).get("values")),
    "bytesValue": lambda value: value,  # kept as base64 text
}
