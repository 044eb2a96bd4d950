"""What every labeler promises: labels for the target chunks of a trace, given what is already known."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from stash_labeler.chunks import Chunk
from stash_labeler.label_schema import LabelSource, StepLabel
from stash_labeler.traces import LabelerTrace


class LabelingError(Exception):
    """Labels could not be produced; the message names the chunk and what went wrong."""


@dataclass(frozen=True, slots=True)
class ChunkLabel:
    """A chunk's label with what produced it."""

    label: StepLabel
    source: LabelSource
    model: str | None = None
    fingerprint: str = ""


class Labeler(Protocol):
    """Labels chunks of one trace."""

    @property
    def source(self) -> LabelSource:
        """What this labeler records as the source of its labels."""
        ...

    def label(
        self,
        trace: LabelerTrace,
        chunks: Sequence[Chunk],
        targets: Sequence[str],
        known: Mapping[str, StepLabel],
    ) -> dict[str, StepLabel]:
        """Labels for the chunk ids in `targets`; `known` holds the kept labels of the other chunks.

        Raises LabelingError when a target cannot be labeled.
        """
        ...
