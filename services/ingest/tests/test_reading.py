"""The shared readers: recorded times in every form the formats write them, and JSON type names for errors."""

from typing import Any

import pytest

from stash_ingest.adapters.reading import (
    epoch_ns,
    json_type,
    normalize_timestamp,
    timestamp_from_ns,
    timestamp_metadata,
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-01-02T03:04:05.123Z", "2025-01-02T03:04:05.123000+00:00"),
        ("2025-01-02T04:04:05+01:00", "2025-01-02T03:04:05.000000+00:00"),
        ("2024-12-04T19:59:29.690211", "2024-12-04T19:59:29.690211+00:00"),  # naive: UTC (LangSmith, OpenAI)
        (1700000000, "2023-11-14T22:13:20.000000+00:00"),  # epoch seconds (OpenAI `created`)
        (1735787045123, "2025-01-02T03:04:05.123000+00:00"),  # epoch milliseconds (JavaScript SDKs)
        (1700000000.5, "2023-11-14T22:13:20.500000+00:00"),
    ],
)
def test_normalize_timestamp_reads_iso_text_and_epoch_numbers_as_utc_microseconds(value: Any, expected: str) -> None:
    assert normalize_timestamp(value) == expected
    assert timestamp_metadata(value) == {"timestamp": expected}


@pytest.mark.parametrize(
    "value",
    [None, True, "", "yesterday", "2024-13-45", [], {}, "0001-01-01T00:30:00+01:00", 1e300],
)
def test_normalize_timestamp_is_none_for_unreadable_or_out_of_range_values(value: Any) -> None:
    assert normalize_timestamp(value) is None
    assert epoch_ns(value) is None
    assert timestamp_metadata(value) == {}


def test_epoch_ns_and_timestamp_from_ns_agree_to_the_microsecond() -> None:
    nanos = epoch_ns("2025-01-02T03:04:05.123456Z")
    assert nanos == 1_735_787_045_123_456_000
    assert timestamp_from_ns(nanos + 999) == "2025-01-02T03:04:05.123456+00:00"
    assert timestamp_from_ns(-1) == "1969-12-31T23:59:59.999999+00:00"
    assert timestamp_from_ns(10**30) is None


@pytest.mark.parametrize(
    ("value", "plain", "shown"),
    [
        (None, "null", "null"),
        (False, "a boolean", "a boolean"),
        (7, "a number", "a number (7)"),
        (1.5, "a number", "a number (1.5)"),
        ("x" * 50, "a string", f"a string ({'x' * 40!r})"),
        ([1], "an array", "an array"),
        ({"a": 1}, "an object", "an object"),
    ],
)
def test_json_type_names_the_type_and_shows_short_values_on_request(value: Any, plain: str, shown: str) -> None:
    assert json_type(value) == plain
    assert json_type(value, show_value=True) == shown
