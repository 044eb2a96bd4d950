"""Reading raw payloads: JSON or JSONL records, nested JSON strings, message content as text.

Shared by every adapter. JSONL is split on LF only, so U+2028 and U+2029 inside strings
survive (Python's `str.splitlines` would cut them). Integers are parsed exactly: OTLP
nanosecond times exceed 2**53.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from stash_common.errors import InvalidArgument

Record = tuple[str, Any]  # (where it came from, e.g. "line 3", the parsed JSON value)


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
