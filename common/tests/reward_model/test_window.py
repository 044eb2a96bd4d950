"""Input version 3's window: each context section its own budget, left-truncated within it, the action never cut."""

from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerBase

from stash_common.errors import FailedPrecondition
from stash_common.rendering import render_example, strip_marks
from stash_common.reward_model.checkpoint import load_tokenizer
from stash_common.reward_model.inference import tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_common.reward_model.window import (
    INPUT_WINDOW_FILE,
    WINDOW_TOKENS,
    kept_positions,
    read_input_window,
    section_budgets,
    write_input_window,
)
from stash_common.steps import TraceStep
from support.agent_traces import action_examples, conversation

EARLIER, REQUEST, RECENT, ACTION = range(4)


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerBase:
    return load_tokenizer(packaged_model_dir(), WINDOW_TOKENS)


def long_trace() -> tuple[TraceStep, ...]:
    """An old request and its work, a new request, a long tool result, then the answer (step 6)."""
    texts = [
        ("user", "old request " + "alpha " * 300),
        ("assistant", "old answer " + "beta " * 300),
        ("user", "REQUEST-START please refund order 1182 " + "gamma " * 300 + "REQUEST-END"),
        ("assistant", "", "lookup_order", {"order_id": "1182"}),
        ("tool", "RESULT-START " + "delta " * 600 + "RESULT-END", "lookup_order"),
        ("system", "hidden rules"),
        ("assistant", "ACTION-START " + "epsilon " * 40 + "ACTION-END"),
    ]
    return tuple(TraceStep(f"s{index}", index, *spec) for index, spec in enumerate(texts))


def test_sectioned_examples_mark_the_earlier_work_the_request_the_recent_work_and_the_action() -> None:
    steps = long_trace()

    text = render_example(steps, 6, sections=True)

    assert strip_marks(text) == render_example(steps, 6)
    starts = [text.index(mark) for mark in "\x1c\x1d\x1e\x1f"]
    assert starts == sorted(starts) and starts[0] == 0
    assert text[starts[1] + 1 :].startswith("User: REQUEST-START")
    assert text[starts[3] + 1 :].startswith("Assistant: ACTION-START")
    assert "hidden rules" not in text


def test_marks_inside_step_texts_are_dropped_so_they_cannot_start_a_section() -> None:
    steps = (TraceStep("a", 0, "user", "odd \x1f text\n\n\x1cUser: x"), TraceStep("b", 1, "assistant", "ok"))

    text = render_example(steps, 1, sections=True)

    assert text == "\x1dUser: odd  text\n\nUser: x\n\n\x1fAssistant: ok"


def test_without_a_user_message_all_context_is_recent_work() -> None:
    steps = (TraceStep("a", 0, "tool", "boot", "init"), TraceStep("b", 1, "assistant", "ok"))

    assert render_example(steps, 1, sections=True) == "\x1eTool init returned: boot\n\n\x1fAssistant: ok"


def test_each_section_gets_its_share_and_the_room_others_leave_unused() -> None:
    assert section_budgets({EARLIER: 100, REQUEST: 100, RECENT: 100}, 80) == {EARLIER: 10, REQUEST: 20, RECENT: 50}
    # A short request leaves its share to the recent work first, then to the earlier work.
    assert section_budgets({EARLIER: 100, REQUEST: 5, RECENT: 100}, 80) == {EARLIER: 10, REQUEST: 5, RECENT: 65}
    assert section_budgets({EARLIER: 100, REQUEST: 5, RECENT: 0}, 80) == {EARLIER: 75, REQUEST: 5, RECENT: 0}
    # Whatever fits the room is kept whole.
    assert section_budgets({EARLIER: 30, REQUEST: 30, RECENT: 20}, 80) == {EARLIER: 30, REQUEST: 30, RECENT: 20}


def test_sections_keep_their_last_tokens_and_the_action_all_of_its_own() -> None:
    sections = [None] + [EARLIER] * 10 + [REQUEST] * 10 + [RECENT] * 10 + [ACTION] * 6 + [None]

    kept = kept_positions(sections, 24)

    # 2 special + 6 action tokens leave 16: earlier 2, request 4, recent 10 (its 10 plus nothing more to take).
    assert kept == [0, 9, 10, 17, 18, 19, 20, *range(21, 31), *range(31, 37), 37]


def test_an_action_longer_than_the_window_keeps_its_first_tokens_and_no_context() -> None:
    sections = [None] + [REQUEST] * 5 + [ACTION] * 30 + [None]

    assert kept_positions(sections, 12) == [0, *range(6, 16), 36]


def test_the_window_keeps_the_request_the_recent_work_s_end_and_the_whole_action(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    text = render_example(long_trace(), 6, sections=True)

    ids = tokenize(tokenizer, [text], 256, sectioned=True)[0]
    plain = tokenize(tokenizer, [text], 256)[0]

    read = tokenizer.decode(ids, skip_special_tokens=True)
    assert len(ids) == 256
    assert "action - start" in read and read.endswith("action - end")
    assert "result - end" in read and "result - start" not in read
    assert "request - end" in read and "request - start" not in read
    assert "beta" in read and "alpha" not in read  # the earlier work keeps its end too
    # Version 1's left truncation of the same text keeps only the tool result's end and the action.
    assert "request" not in tokenizer.decode(plain, skip_special_tokens=True)


def test_examples_that_fit_read_exactly_the_unsectioned_tokens(tokenizer: PreTrainedTokenizerBase) -> None:
    steps = conversation("t", 12, seed=4)
    marked = [render_example(steps, step.index, sections=True) for step in steps if step.is_action]

    windowed = tokenize(tokenizer, marked, WINDOW_TOKENS, sectioned=True)

    assert windowed == tokenize(tokenizer, [text for _, text in action_examples(steps)], None)


def test_the_limit_is_what_the_model_embeds() -> None:
    tokenizer = load_tokenizer(packaged_model_dir(), 512)  # as load_checkpoint caps it for MiniLM
    text = render_example(long_trace(), 6, sections=True)

    assert len(tokenize(tokenizer, [text], WINDOW_TOKENS, sectioned=True)[0]) == 512


def test_a_checkpoint_records_its_window_and_a_legacy_one_has_none(tmp_path: Path) -> None:
    assert read_input_window(tmp_path) is None

    write_input_window(tmp_path)

    assert read_input_window(tmp_path) == WINDOW_TOKENS
    (tmp_path / INPUT_WINDOW_FILE).write_text('{"input_version": 2, "window_tokens": 4096}')
    with pytest.raises(FailedPrecondition, match="names input version 2"):
        read_input_window(tmp_path)
