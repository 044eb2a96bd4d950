"""U+0000 is refused wherever it hides in a JSON value, naming the path; nesting is bounded when asked."""

from types import MappingProxyType

import pytest

from stash_common.errors import InvalidArgument
from stash_common.text_checks import check_storable, check_storable_json


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"a": ["ok", {"b": "x\x00"}]}, "body.a[1].b"),
        ({"k\x00": 1}, "body (key 'k\\x00')"),
        (["\x00"], "body[0]"),
    ],
)
def test_nul_anywhere_is_refused_naming_its_path(value: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_storable_json(value, "body")

    assert caught.value.field == field


def test_a_top_level_object_without_a_name_gives_bare_keys() -> None:
    with pytest.raises(InvalidArgument) as caught:
        check_storable_json({"name": "a\x00"}, "")

    assert caught.value.field == "name"


def test_nesting_past_the_depth_is_refused_and_at_it_accepted() -> None:
    check_storable_json([[["x"]]], "v", max_depth=3)
    with pytest.raises(InvalidArgument, match="nests deeper than 2 levels"):
        check_storable_json([[["x"]]], "v", max_depth=2)


def test_plain_text_without_nul_passes() -> None:
    check_storable("hello", "content")
    check_storable(None, "content")


def test_read_only_mappings_and_tuples_are_judged_like_dicts_and_lists() -> None:
    check_storable_json(MappingProxyType({"a": ("x", 1, None)}), "v", max_depth=3)
    with pytest.raises(InvalidArgument) as caught:
        check_storable_json(MappingProxyType({"a": ("ok", "x\x00")}), "v")

    assert caught.value.field == "v.a[1]"
