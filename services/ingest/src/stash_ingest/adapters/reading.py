"""Reading raw payloads: JSON or JSONL records, nested JSON strings, message content as text, times.

Shared by every adapter. JSONL is split on LF only, so U+2028 and U+2029 inside strings
survive (Python's `str.splitlines` would cut them). Integers are parsed exactly: OTLP
nanosecond times exceed 2**53. Every recorded time becomes one canonical text,
"YYYY-MM-DDTHH:MM:SS.ffffff+00:00", whatever form the format wrote it in.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import ijson
import orjson

from stash_common.errors import InvalidArgument
from stash_ingest.adapters.prompts import Prompts, check_prompts
from stash_ingest.limits import DEFAULT_LIMITS, TraceLimits, check_spans_read, check_steps_read, check_traces_read

Record = tuple[str, Any]  # (where it came from, e.g. "line 3", the parsed JSON value)
# A format's own count of the items at a path, streamed one at a time: (items, where, limits) → raises at the
# first item over a limit. For items that count as more than one thing (OTLP spans: per trace, and traces).
ItemCounter = Callable[[bytes, Iterator[Any], str, TraceLimits], None]
# An adapter's arrays whose items are each at least one step, span or trace: an ijson path in one JSON
# document to one small value per item ("steps.item.role", or "item" for a top-level array) → what each
# item counts as, or the counter that counts the items themselves. Counting a small field of each item
# spares building the item itself. An ijson path to LLM calls → where they keep their prompts (`Prompts`).
Counted = Mapping[str, Literal["steps", "spans", "traces"] | ItemCounter | Prompts]

# A JSON document (a line, or the whole payload) at least this large has its counted arrays counted by
# streaming before it is parsed whole: parsing builds every value (about five times the bytes), counting
# stops at the first item over the limit.
STREAM_FROM = 1 << 20

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECONDS_FROM = 1e11  # epoch seconds stay below this until the year 5138; larger numbers are milliseconds


def load_json(data: bytes | str, where: str) -> Any:
    """Parse one JSON document; bad JSON is an InvalidArgument naming `where`."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise InvalidArgument(where, f"is not valid JSON ({error})") from None


def split_jsonl(raw: bytes) -> Iterator[Record]:
    """Each non-blank LF-separated line parsed as JSON when it is reached, labelled `line N` (1-based); a reader
    that stops early (at a limit) has cut out only the lines before it."""
    for number, line in _each_line(raw):
        yield f"line {number}", load_json(line, f"line {number}")


def _each_line(raw: bytes) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines with their numbers, each cut out of `raw` when it is reached."""
    start = 0
    for number in itertools.count(1):
        end = raw.find(b"\n", start)
        line = raw[start:] if end < 0 else raw[start:end]
        if line and not line.isspace():
            yield number, line
        if end < 0:
            return
        start = end + 1


def _starts_jsonl(raw: bytes) -> bool:
    """True when the first non-blank line is JSON by itself and another line follows: JSONL. (A parse of the whole
    payload would fail after that line too, but orjson's error then costs about twelve times the payload.)"""
    lines = _each_line(raw)
    first, second = next(lines, None), next(lines, None)
    if first is None or second is None:
        return False
    try:
        orjson.loads(first[1])
    except orjson.JSONDecodeError:
        return False
    return True


def split_growing_jsonl(raw: bytes) -> Iterator[Record]:
    """`split_jsonl` for a log an agent is still appending to (Claude Code, Codex).

    A snapshot can catch the last line mid-write: an unterminated last line that is not valid JSON
    yet is left out, and the next, longer snapshot holds it whole.
    """
    last_newline = raw.rfind(b"\n")
    tail = raw[last_newline + 1 :]
    if last_newline >= 0 and tail.strip():
        try:
            orjson.loads(tail)
        except orjson.JSONDecodeError:
            raw = raw[: last_newline + 1]
    return split_jsonl(raw)


class Records:
    """The payload as records, each parsed only when it is reached: a JSON array gives its items, a JSON
    object itself, anything else JSONL lines. `len` counts them without parsing a line, so a payload with
    more records than an import may hold is refused before any is read; a large document's `counted`
    arrays are counted before it is parsed.

    `lines_first` reads a payload whose first line is JSON by itself as JSONL even when it is one line (named
    `line 1`, not `document`; a one-line array still gives its items): the Stash format's rule."""

    def __init__(
        self,
        raw: bytes,
        counted: Counted | None = None,
        limits: TraceLimits = DEFAULT_LIMITS,
        lines_first: bool = False,
    ) -> None:
        self.counted = counted or {}
        self.limits = limits
        self.values: list[Record] | None = None
        self.jsonl = b""  # the payload, when it is read line by line
        self.first_line: Record | None = None  # the first line, when it was parsed to decide the shape
        if lines_first and self._read_as_lines(raw):
            return
        self._check_counts(raw, "document")
        if _starts_jsonl(raw):
            self.jsonl = raw
            return
        try:
            whole = orjson.loads(raw)
        except orjson.JSONDecodeError:
            self.jsonl = raw  # not JSON: each line is read, and refused, as it is reached
        else:
            self.values = _items(whole) if isinstance(whole, list) else [("document", whole)]

    def _read_as_lines(self, raw: bytes) -> bool:
        lines = _each_line(raw)
        start = next(lines, None)
        if start is None:
            return False
        number, line = start
        self._check_counts(line, f"line {number}")
        try:
            first = orjson.loads(line)
        except orjson.JSONDecodeError:
            return False  # a pretty-printed document, or not JSON at all
        if next(lines, None) is None and isinstance(first, list):
            self.values = _items(first)
        else:
            self.jsonl, self.first_line = raw, (f"line {number}", first)
        return True

    def __len__(self) -> int:
        """The records; of JSONL, the non-blank lines, counted without keeping any."""
        return len(self.values) if self.values is not None else sum(1 for _ in _each_line(self.jsonl))

    def __iter__(self) -> Iterator[Record]:
        if self.values is not None:
            return iter(self.values)
        return self._line_records()

    def _line_records(self) -> Iterator[Record]:
        for index, (number, line) in enumerate(_each_line(self.jsonl)):
            yield self.first_line if index == 0 and self.first_line is not None else self._line(number, line)

    def _line(self, number: int, line: bytes) -> Record:
        self._check_counts(line, f"line {number}")
        return f"line {number}", load_json(line, f"line {number}")

    def _check_counts(self, data: bytes, where: str) -> None:
        check_counted(data, self.counted, where, self.limits)

    def first(self) -> Record | None:
        """The first record, or None for an empty payload."""
        return next(iter(self), None)


def check_counted(data: bytes, counted: Counted, where: str, limits: TraceLimits) -> None:
    """For a large document (of a JSONL payload, a line): its `counted` arrays within the limits, counted by
    streaming before the document is built, so the first item over a limit ends the reading."""
    if len(data) < STREAM_FROM:
        return
    is_array = data[:4096].lstrip()[:1] == b"["
    for path, counts_as in counted.items():
        if (path == "item" or path.startswith("item.")) != is_array:
            continue  # a path of the other shape would be scanned to the end for nothing
        if isinstance(counts_as, Prompts):
            check_prompts(data, path, counts_as, where, limits)
            continue
        if callable(counts_as):
            counts_as(data, stream_items(data, path), where, limits)
            continue
        most = {"steps": limits.steps_per_trace, "spans": limits.spans_per_trace}.get(
            counts_as, limits.traces_per_import
        )
        count = count_items(data, path, most)
        if counts_as == "steps":
            check_steps_read(count, where, limits)
        elif counts_as == "spans":
            check_spans_read(count, where, limits)
        else:
            check_traces_read(count, limits)


def stream_items(data: bytes, path: str) -> Iterator[Any]:
    """The items at `path` of the first JSON document in `data`, each built when it is reached, with every string
    of over LONG_STRING bytes read as a mark of where it stands (a count needs ids, and building a text of tens of
    MB would cost more than the count saves: `count_long_string_items` counts one); invalid JSON ends them where it
    starts (parsing reports it)."""
    try:
        yield from ijson.items(_Chunks(_without_long_strings(data)), path, use_float=True)
    except ijson.JSONError:
        return


LONG_STRING = 1 << 16
# From a place outside any string: structure and whole strings, in C, each byte read once (possessive).
# A string's characters are matched unrolled (runs of plain characters between escapes): twice as fast as an
# alternation of the two on text full of escapes, such as JSON written into a string.
_STRUCTURE_AND_STRINGS = re.compile(rb'(?:[^"]++|"[^"\\]*+(?:\\.[^"\\]*+)*+")*+')
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"')


def _without_long_strings(data: bytes) -> Iterator[bytes]:
    """The document in pieces of about LONG_STRING bytes, each string longer than that read as ""."""
    position = 0
    while position < len(data):
        window = _STRUCTURE_AND_STRINGS.match(data, position, position + LONG_STRING)
        end = window.end() if window else position
        if end > position:
            yield data[position:end]
            position = end
            continue
        string = _STRING.match(data, position)  # a string that goes on past the window
        if string is None:
            yield data[position : position + LONG_STRING]  # an unterminated string: the parser reports it
            return
        long = string.end() - position > LONG_STRING
        yield b'"%s%d:%d"' % (_LONG_MARK, position, string.end()) if long else data[position : string.end()]
        position = string.end()


_LONG_MARK = b"\\u0000long:"  # as JSON text; U+0000 is refused in any payload, so no real string reads as a mark
_MARK = re.compile("\x00long:([0-9]+):([0-9]+)")
# Escaped string text cut only between whole escapes (a surrogate pair is one).
_ESCAPED = re.compile(rb"(?:[^\\]++|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[0-9a-fA-F]{4}|\\u[0-9a-fA-F]{4}|\\.)*+")


def count_long_string_items(data: bytes, value: Any, most: int) -> int:
    """Of a string `stream_items` read as a mark: how many items the JSON array written in it holds, up to
    `most + 1`, counted while the string is unescaped piece by piece; 0 for any other value."""
    mark = _MARK.fullmatch(value) if isinstance(value, str) else None
    if mark is None:
        return 0
    start, end = int(mark[1]), int(mark[2])
    return count_items(_Chunks(_unescaped(memoryview(data)[start + 1 : end - 1])), "item", most)


def count_buffer_items(text: memoryview, most: int) -> int:
    """How many items the JSON array written as UTF-8 text in `text` holds, up to `most + 1`, streamed from the
    buffer piece by piece rather than copied whole."""
    pieces = (bytes(text[start : start + LONG_STRING]) for start in range(0, len(text), LONG_STRING))
    return count_items(_Chunks(pieces), "item", most)


def _unescaped(text: memoryview) -> Iterator[bytes]:
    position = 0
    while position < len(text):
        end = _ESCAPED.match(text, position, position + LONG_STRING).end()  # type: ignore[union-attr]
        try:
            yield orjson.loads(b'"' + bytes(text[position:end]) + b'"').encode()
        except (orjson.JSONDecodeError, UnicodeEncodeError):
            return  # a bad escape: decoding the document reports it
        position = end


class _Chunks:
    """Pieces of bytes as a file that ijson reads."""

    def __init__(self, pieces: Iterator[bytes]) -> None:
        self.pieces = pieces

    def read(self, size: int = -1) -> bytes:
        return next(self.pieces, b"") if size else b""  # ijson reads 0 bytes first to learn the type


def read_records(raw: bytes, counted: Counted | None = None, limits: TraceLimits = DEFAULT_LIMITS) -> Records:
    """The payload's records (see `Records`), read lazily."""
    return Records(raw, counted, limits)


def _items(array: list[Any]) -> list[Record]:
    return [(f"item {index}", item) for index, item in enumerate(array)]


def count_items(data: bytes | _Chunks, path: str, most: int) -> int:
    """How many items the longest array at `path` of the first JSON document in `data` holds, up to `most + 1`:
    the items are streamed one at a time and the count stops past `most`. The last `item` segment of the path
    marks the array's items (`observations.item.input.item.role`: each observation's input, counting its items
    that have a role); an array nested in another's items occurs once per outer item, and each is counted alone.
    Invalid JSON ends the count where it starts; parsing the document reports it."""
    segments = path.split(".")
    array = segments[: len(segments) - 1 - segments[::-1].index("item")]
    counts = _nested_counts(data, ".".join(array), path) if "item" in array else _counts(data, path)
    longest = 0
    try:
        for count in counts:
            longest = max(longest, count)
            if count > most:
                break
    except ijson.JSONError:
        pass
    return longest


def _counts(data: bytes | _Chunks, path: str) -> Iterator[int]:
    """The running count of the items at `path` of the document's one such array (filtered in C)."""
    return (number for number, _ in enumerate(ijson.items(data, path, use_float=True), 1))


def _nested_counts(data: bytes | _Chunks, array: str, path: str) -> Iterator[int]:
    """The running count of the items at `path`, starting again at each array at `array`."""
    count = 0
    for prefix, event, _ in ijson.parse(data, use_float=True):
        if prefix == array and event == "start_array":
            count = 0
        elif prefix == path and event in _VALUE_STARTS:
            count += 1
            yield count


_VALUE_STARTS = frozenset({"start_map", "start_array", "string", "number", "boolean", "null"})


def first_value(raw: bytes, counted: Counted | None = None, limits: TraceLimits = DEFAULT_LIMITS) -> Any:
    """The first JSON value of a payload (the document, the first array item, or the first line), or None; a large
    document's `counted` arrays are counted before it is parsed (see `Records`)."""
    try:
        first = read_records(raw, counted, limits).first()
    except InvalidArgument as error:
        if error.field.endswith((": steps", ": spans")):
            raise
        return None
    return first[1] if first else None


# How much of a large payload `first_sample` reads, and the pieces of JSON it reads it as.
SAMPLE_BYTES = 1 << 16
# Possessive: a string cut off by the sample costs no backtracking state (about 100 bytes a character).
_TOKEN = re.compile(rb'\s*(?:("(?:[^"\\]++|\\.)*+")|([\[{])|([\]}])|(,)|(:)|([^\s\[\]{},:"]+))')


def first_sample(raw: bytes) -> Any:
    """The first JSON value of a payload as its first `SAMPLE_BYTES` show it, or None: a value cut off there is
    closed after its last whole item (`{"steps": [{...}, {...}]}` of a million steps shows its first few). Enough to
    tell a large document's likely format before it is parsed; what follows the cut is not seen, and a value with
    no whole array item in those bytes gives None."""
    head, position = raw[:SAMPLE_BYTES], 0
    closers: list[bytes] = []  # what closes each open array and object, innermost last
    whole = b""  # the sample so far: the text up to the last whole value, closed
    key_next = False  # in an object, before a key
    while (token := _TOKEN.match(head, position)) is not None:
        position = token.end()
        string, opener, closer = token.group(1), token.group(2), token.group(3)
        if opener:
            closers.append(b"}" if opener == b"{" else b"]")
            key_next = opener == b"{"
        elif token.group(4):  # a comma
            key_next = closers[-1:] == [b"}"]
        elif token.group(5) or (string and key_next):  # a colon, or a key
            key_next = False
        else:  # a value ends here: a string, a number or literal, or a closed array or object
            if closer:
                closers.pop()
            if not closers:
                whole = head[:position]
                break
            if closers[-1] == b"]":  # a whole item of an array: a place to cut
                whole = head[:position] + b"".join(reversed(closers))
    try:
        return orjson.loads(whole)
    except orjson.JSONDecodeError:
        return None


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
