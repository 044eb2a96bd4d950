"""Which actions of a trace one forward pass can score: the plan behind one-pass scoring.

An action's example is its prior context followed by the action, so each example's text begins with
the previous one's, and tokenised segment by segment (`inference.tokenize`) its ids begin with the
previous one's too. A causal decoder's hidden state at a token depends only on the tokens before it,
so when an action's tokens are a prefix of the trace's last example, the score head at that action's
last token, read from ONE pass over the last example, is the score of the action on its own. An
example longer than the token limit breaks that: it is left-truncated, so it starts elsewhere, and
is scored in its own window. The prefix is checked, not assumed, so a tokenizer that appends a
special token (an eos after every text) only costs speed: its actions get windows too. Plain Python,
so the rule can be tested without a model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class TracePass:
    """One trace's plan: the tokens of its one pass, where each covered action ends, and the rest."""

    tokens: tuple[int, ...]  # empty when no action can share the pass
    positions: Mapping[int, int]  # action number → index of its last token in `tokens`
    windows: tuple[int, ...]  # action numbers scored on their own (not a token prefix, or too long)


def is_prefix(prefix: Sequence[int], sequence: Sequence[int]) -> bool:
    """Whether `sequence` begins with `prefix`."""
    return len(prefix) <= len(sequence) and list(sequence[: len(prefix)]) == list(prefix)


def plan_pass(examples: Sequence[Sequence[int]], max_length: int) -> TracePass:
    """Plan one trace from its actions' untruncated token ids, in step order.

    The pass runs over the last example, cut after the last token any covered action needs; an action
    is covered when its tokens fit `max_length` and are a prefix of the last example's.
    """
    if not examples:
        return TracePass((), {}, ())
    last = examples[-1]
    positions = {
        number: len(tokens) - 1
        for number, tokens in enumerate(examples)
        if 0 < len(tokens) <= max_length and is_prefix(tokens, last)
    }
    windows = tuple(number for number in range(len(examples)) if number not in positions)
    length = max(positions.values(), default=-1) + 1
    return TracePass(tuple(last[:length]), positions, windows)
