"""What no store can hold: U+0000, which PostgreSQL's `text` and `json` refuse even in a lookup.

Every service that takes text from callers checks it here first, so the caller gets INVALID_ARGUMENT
naming the field instead of a failed write. Plain domain code: it imports neither grpc nor the protos.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stash_common.errors import InvalidArgument


def check_storable(text: str | None, where: str) -> None:
    """INVALID_ARGUMENT when a string holds U+0000, which neither PostgreSQL's text nor its json can store."""
    if text is not None and "\x00" in text:
        raise InvalidArgument(where, "contains U+0000 (NUL), which cannot be stored; remove or escape it")


def check_storable_json(value: Any, where: str, max_depth: int | None = None) -> None:
    """Every string and key of a JSON value free of U+0000, nested at most `max_depth` levels of objects and
    arrays (unbounded when None); the error names the path inside the value (`where.query[2]`)."""
    if plainly_storable_json(value, max_depth):
        return  # the common case, walked without building a path for every value
    pending: list[tuple[Any, str, int]] = [(value, where, 1)]
    while pending:
        item, path, depth = pending.pop()
        if isinstance(item, str):
            check_storable(item, path)
            continue
        if not isinstance(item, Mapping | list | tuple):
            continue
        if max_depth is not None and depth > max_depth:
            raise InvalidArgument(path, f"nests deeper than {max_depth} levels of objects and arrays")
        if isinstance(item, Mapping):
            for key, child in item.items():
                check_storable(str(key), f"{path} (key {str(key)[:40]!r})")
                pending.append((child, f"{path}.{key}" if path else str(key), depth + 1))
        else:
            pending.extend((child, f"{path}[{index}]", depth + 1) for index, child in enumerate(item))


def plainly_storable_json(value: Any, max_depth: int | None = None) -> bool:
    """True for nothing, or plain JSON (dicts with string keys, lists, strings, numbers, null) free of U+0000 and
    within the depth: a check without names, for the common case; `check_storable_json` judges and names the rest."""
    return not value or _plainly_storable(value, 1, max_depth)


def _plainly_storable(value: Any, depth: int, max_depth: int | None) -> bool:
    """True for plain JSON (dicts with string keys, lists, strings, numbers, null) free of U+0000 and within the
    depth; False for anything else, which the full walk then judges and names."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value
    if kind is dict or kind is list:
        if max_depth is not None and depth > max_depth:
            return False
        if kind is list:
            return all(_plainly_storable(child, depth + 1, max_depth) for child in value)
        return all(
            type(key) is str and "\x00" not in key and _plainly_storable(child, depth + 1, max_depth)
            for key, child in value.items()
        )
    return value is None or kind is int or kind is float or kind is bool
