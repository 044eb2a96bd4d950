"""Reading raw payloads: JSON or JSONL records, nested JSON strings, message content as text, times.

Shared by every adapter. JSONL is split on LF only, so U+2028 and U+2029 inside strings
survive (Python's `str.splitlines` would cut them). Integers are parsed exactly: OTLP
nanosecond times exceed 2**53. Every recorded time becomes one canonical text,
"YYYY-MM-DDTHH:MM:SS.ffffff+00:00", whatever form the format wrote it in.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from stash_common.errors import InvalidArgument

Record = tuple[str, Any]  # (where it came from, e.g. "line 3", the parsed JSON value)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECONDS_FROM = 1e11  # epoch seconds stay below this until the year 5138; larger numbers are milliseconds


def load_json(data: bytes | str, where: str) -> Any:
    """Parse one JSON document; bad JSON is an InvalidArgument naming `where`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise InvalidArgument(where, f"is not valid JSON ({error})") from None


def split_jsonl(raw: bytes) -> Iterator[Record]:
    """Each non-blank LF-separated line parsed as JSON, labelled `line N` (1-based)."""
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            yield f"line {number}", load_json(line, f"line {number}")


def split_growing_jsonl(raw: bytes) -> Iterator[Record]:
    """`split_jsonl` for a log an agent is still appending to (Claude Code, Codex).

    A snapshot can catch the last line mid-write: an unterminated last line that is not valid JSON
    yet is left out, and the next, longer snapshot holds it whole.
    """
    body, newline, tail = raw.rpartition(b"\n")
    if newline and tail.strip():
        try:
            orjson.loads(tail)
        except orjson.JSONDecodeError:
            raw = body + newline
    return split_jsonl(raw)


def read_records(raw: bytes) -> list[Record]:
    """The payload as records: a JSON array gives its items, a JSON object itself, anything else JSONL."""
    try:
        whole = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return list(split_jsonl(raw))
    if isinstance(whole, list):
        return [(f"item {index}", item) for index, item in enumerate(whole)]
    return [("document", whole)]


def first_value(raw: bytes) -> Any:
    """The first JSON value of a payload (the document, the first array item, or the first line), or None."""
    try:
        records = read_records(raw)
    except InvalidArgument:
        first_line = next((line for line in raw.split(b"\n") if line.strip()), b"")
        try:
            return orjson.loads(first_line)
        except orjson.JSONDecodeError:
            return None
    return records[0][1] if records else None


def decode_nested(value: Any, depth: int = 3) -> Any:
    """Decode JSON that was encoded into a string, possibly more than once; other values pass through."""
    for _ in range(depth):
        if not isinstance(value, str) or value[:1] not in ("{", "[", '"'):
            return value
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def to_json_text(value: Any) -> str:
    """Compact JSON for a value that must become step content (a tool result object, say)."""
    return value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def as_object(value: Any) -> dict[str, Any]:
    """A tool input as an object: decoded when it is JSON text, wrapped as {"input": value} otherwise."""
    decoded = decode_nested(value)
    if isinstance(decoded, dict):
        return decoded
    if decoded is None or decoded == "":
        return {}
    return {"input": decoded}


def nonblank(value: Any) -> str | None:
    """The value when it is a string with more than white space in it, else None (for ids, names and titles)."""
    return value if isinstance(value, str) and value.strip() else None


def object_or_empty(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else {}: an optional object that is missing or malformed reads as empty."""
    return value if isinstance(value, dict) else {}


def list_or_empty(value: Any) -> list[Any]:
    """The value when it is a JSON array, else []: an optional list that is missing or malformed reads as empty."""
    return value if isinstance(value, list) else []


def text_or_none(value: Any) -> str | None:
    """The value when it is a string (blank ones too, unlike `nonblank`), else None."""
    return value if isinstance(value, str) else None


def json_type(value: Any, *, show_value: bool = False) -> str:
    """The JSON type of a parsed value for an error message: "must be a string, not a number".

    `show_value` adds a look at a number or string ("a number (7)", "a string ('abc')"), as strict formats do.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})" if show_value else "a number"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})" if show_value else "a string"
    return "an array" if isinstance(value, list) else "an object"


# --- time --------------------------------------------------------------------------------------


def normalize_timestamp(value: Any) -> str | None:
    """A recorded time as ISO-8601 UTC with microseconds ("2025-01-02T03:04:05.123000+00:00"), or None.

    Read: ISO-8601 text with `Z`, an offset, or none (naive times are UTC, as LangSmith and OpenAI
    write them), and epoch seconds or milliseconds (JavaScript SDKs). Anything else, or a time
    beyond the years 1 to 9999, is None.
    """
    moment = _moment(value)
    return None if moment is None else moment.isoformat(timespec="microseconds")


def timestamp_metadata(value: Any) -> dict[str, Any]:
    """Step metadata holding a recorded time: `{"timestamp": normalize_timestamp(value)}`, or {} when unreadable."""
    timestamp = normalize_timestamp(value)
    return {"timestamp": timestamp} if timestamp else {}


def epoch_ns(value: Any) -> int | None:
    """A recorded time (what `normalize_timestamp` reads) as nanoseconds since the epoch, or None."""
    moment = _moment(value)
    return None if moment is None else (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def timestamp_from_ns(nanos: int) -> str | None:
    """Nanoseconds since the epoch (OTLP's unit) as `normalize_timestamp` writes times; None out of range."""
    try:
        moment = _EPOCH + timedelta(microseconds=nanos // 1000)
    except OverflowError:
        return None
    return moment.isoformat(timespec="microseconds")


def _moment(value: Any) -> datetime | None:
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            unit = timedelta(milliseconds=value) if abs(value) >= _MILLISECONDS_FROM else timedelta(seconds=value)
            return _EPOCH + unit
        if not isinstance(value, str):
            return None
        moment = datetime.fromisoformat(value)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None
