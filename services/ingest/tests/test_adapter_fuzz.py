"""Every adapter's parse on hostile input: JSON made of the format's own words, and real fixture lines with
bytes cut, inserted or replaced. The only outcome besides valid traces is InvalidArgument; any other exception
fails the test. Bounded here (bench/adapter_fuzz.py runs a million inputs)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stash_ingest.adapters.registry import ADAPTERS
from support.adapter_fuzz import ADAPTER_NAMES, parse_outcome, seeds, vocabulary
from support.json_strategies import json_values

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mutated(draw: st.DrawFn, seed_list: tuple[bytes, ...]) -> bytes:
    """A seed with one to three edits: a slice cut out, bytes inserted, or one byte replaced."""
    data = bytearray(draw(st.sampled_from(seed_list)))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["cut", "insert", "replace"]))
        if edit == "cut":
            del data[at : at + draw(st.integers(1, 64))]
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8) | st.sampled_from([b'"', b"{", b"]", b"\\u0000"]))
        elif data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
    return bytes(data)


@pytest.mark.parametrize("name", ADAPTER_NAMES)
def test_json_in_the_formats_words_parses_or_is_refused_with_invalid_argument(name: str) -> None:
    @FUZZ
    @given(value=json_values(vocabulary(name)))
    def check(value: Any) -> None:
        parse_outcome(ADAPTERS[name], orjson.dumps(value))

    check()


@pytest.mark.parametrize("name", ADAPTER_NAMES)
def test_mutated_real_inputs_parse_or_are_refused_with_invalid_argument(name: str) -> None:
    @FUZZ
    @given(data=mutated(seeds(name)))
    def check(data: bytes) -> None:
        parse_outcome(ADAPTERS[name], data)

    check()


@pytest.mark.parametrize("name", ADAPTER_NAMES)
def test_every_seed_parses(name: str) -> None:
    outcomes = {parse_outcome(ADAPTERS[name], seed) for seed in seeds(name)}

    assert "parsed" in outcomes
