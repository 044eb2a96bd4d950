"""Hypothesis strategies for fuzzing adapters: arbitrary JSON that often looks like the format under test."""

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st


def json_values(words: Sequence[str]) -> st.SearchStrategy[Any]:
    """Any JSON value of up to 20 leaves, its object keys and many of its strings drawn from `words`.

    `words` are the format's field names and enum values (`messages`, `role`, `tool_use`, …): random
    text would almost never reach the parser past its first shape check.
    """
    word = st.sampled_from(list(words))
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63)
        | st.floats(allow_nan=False)
        | word
        | st.text(max_size=5)
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(word, inner, max_size=5),
        max_leaves=20,
    )
