"""Input version 3's token window: 4,096 tokens, each context section with its own budget.

An example rendered with sections (`stash_common.rendering.render_example(..., sections=True)`) has
the steps before the current request, the request, the work since, and the target action. The
tokenizer (`inference.tokenize`) tells which section each token came from; `kept_positions` chooses
the tokens a model reads:

- special tokens ([CLS]/[SEP]) are always kept;
- the target action is never cut to make room for context: it takes what it needs, and only an
  action longer than the whole window is cut, to its first tokens (the tool name and the start of
  its arguments);
- the room left is shared by the context sections: each gets its share (`SHARES`), keeping its
  last tokens (left-truncated within the section, so the text nearest the action stays); room a
  short section leaves unused goes to the sections that need more, nearest the action first.

When the whole example fits, nothing is cut and the tokens are exactly those of the unsectioned
text, so one-pass scoring (`passes.py`) covers the actions whose examples fit. A checkpoint trained
with this window says so in `input_window.json`, which the scorer's worker reads: legacy
checkpoints have none and keep input version 1's left truncation. Plain Python, no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from stash_common.errors import FailedPrecondition
from stash_common.jobs.files import describe, write_json
from stash_common.rendering import SECTIONS

WINDOW_TOKENS = 4096
INPUT_WINDOW_FILE = "input_window.json"
ACTION = SECTIONS.index("action")
# Each context section's share of the room the action leaves: the request is kept whole far more
# often than version 1's left truncation managed, and the recent work the action answers gets most.
SHARES: Mapping[int, float] = {
    SECTIONS.index("earlier"): 1 / 8,
    SECTIONS.index("request"): 1 / 4,
    SECTIONS.index("recent"): 5 / 8,
}
# Who gets room another section leaves unused: the nearest to the action first.
GROWTH_ORDER = tuple(SECTIONS.index(name) for name in ("recent", "request", "earlier"))
# Tokens of a text without marks (a whole trace) count as recent work: plain left truncation.
UNMARKED = SECTIONS.index("recent")


def section_budgets(lengths: Mapping[int, int], room: int) -> dict[int, int]:
    """How many tokens each context section keeps of its `lengths` within `room`: its share, then what
    other sections leave unused. When the lengths add up to at most `room`, every section is kept whole."""
    kept = {section: min(lengths.get(section, 0), int(share * room)) for section, share in SHARES.items()}
    left = room - sum(kept.values())
    for section in GROWTH_ORDER:
        extra = min(lengths.get(section, 0) - kept[section], left)
        kept[section] += extra
        left -= extra
    return kept


def kept_positions(sections: Sequence[int | None], limit: int) -> list[int]:
    """The positions of the tokens to keep, in order, of a tokenised example of at most `limit` tokens;
    `sections[i]` is token i's section (an index into SECTIONS), None for a special token."""
    special: list[int] = []
    positions: dict[int, list[int]] = {}
    for position, section in enumerate(sections):
        if section is None:
            special.append(position)
        else:
            positions.setdefault(section, []).append(position)
    action = positions.pop(ACTION, [])[: max(0, limit - len(special))]
    room = max(0, limit - len(special) - len(action))
    budgets = section_budgets({section: len(found) for section, found in positions.items()}, room)
    kept = special + action
    for section, found in positions.items():
        kept += found[len(found) - budgets[section] :]
    return sorted(kept)


class _WindowFile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    input_version: int
    window_tokens: int


def write_input_window(model_dir: Path) -> None:
    """Record in a checkpoint that it reads input version 3's sectioned window."""
    write_json(model_dir / INPUT_WINDOW_FILE, {"input_version": 3, "window_tokens": WINDOW_TOKENS})


def read_input_window(model_dir: Path) -> int | None:
    """The sectioned window a checkpoint was trained with, in tokens; None for input version 1's truncation."""
    path = model_dir / INPUT_WINDOW_FILE
    if not path.is_file():
        return None
    try:
        saved = _WindowFile.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise FailedPrecondition(f"the checkpoint's {INPUT_WINDOW_FILE} is malformed: {describe(error)}") from error
    if saved.input_version != 3 or saved.window_tokens < 8:
        raise FailedPrecondition(
            f"the checkpoint's {INPUT_WINDOW_FILE} names input version {saved.input_version} with"
            f" {saved.window_tokens} tokens; this worker reads input version 3 windows of at least 8 tokens"
        )
    return saved.window_tokens
