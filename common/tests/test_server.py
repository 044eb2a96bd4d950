"""freeze_start_up: start-up's garbage is collected, what start-up keeps leaves the collector's reach."""

import gc
import weakref
from collections.abc import Iterator

import pytest

from stash_common.server import freeze_start_up


class _Node:
    def __init__(self) -> None:
        self.peer: _Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()  # the other tests of this process run with their objects in reach again


def test_start_ups_cycles_are_collected_and_what_it_keeps_is_frozen(unfrozen: None) -> None:
    garbage, kept = _Node(), _Node()
    garbage.peer, kept.peer = garbage, kept  # cycles: only the collector frees the one nobody holds
    gone = weakref.ref(garbage)
    del garbage
    frozen_before = gc.get_freeze_count()

    freeze_start_up()

    assert gone() is None  # collected first, not frozen for good
    assert gc.get_freeze_count() > frozen_before
    assert not any(item is kept for item in gc.get_objects())  # out of every generation the collector walks
