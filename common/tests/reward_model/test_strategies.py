"""The scoring strategies: all three equal scoring each action alone; one pass covers a trace in one call."""

from typing import Any

import pytest
import torch

from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.inference import tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_common.reward_model.passes import plan_pass
from stash_common.reward_model.strategies import (
    STRATEGIES,
    ScoringModel,
    choose_strategy,
    score_in_one_pass,
    score_one_by_one,
    score_sorted_batches,
    strategy,
)
from support.agent_traces import action_examples, conversation, corpus
from support.reward_models import MERGING_PATTERN, QWEN2_SPLIT, bpe_tokenizer, save_tiny_qwen3, word_tokenizer

# Either tokenizer: the 32-action trace fits (751 and 538 tokens), the 48-action one does not (1131 and 808).
MAX_LENGTH = 800
TRACES = [conversation("long", 32, seed=32), conversation("short", 6, seed=6), conversation("over", 48, seed=48)]
EXAMPLES = [[text for _, text in action_examples(steps)] for steps in TRACES]
# Both glue punctuation to the blank line after it when they read a whole text, as Qwen's tokenizer does.
TOKENIZERS = {
    "merging words": lambda: word_tokenizer(corpus(*TRACES), MERGING_PATTERN),
    "Qwen2 split BPE": lambda: bpe_tokenizer(corpus(*TRACES), QWEN2_SPLIT, vocab_size=500),
}


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def qwen3(request: Any, tmp_path_factory: pytest.TempPathFactory) -> ScoringModel:
    directory = save_tiny_qwen3(tmp_path_factory.mktemp("qwen3"), TOKENIZERS[request.param]())
    model, tokenizer = load_checkpoint(directory, "cpu", MAX_LENGTH)
    return ScoringModel(model, tokenizer, "cpu", MAX_LENGTH, batch_size=2)


@pytest.fixture(scope="module")
def minilm() -> ScoringModel:
    model, tokenizer = load_checkpoint(packaged_model_dir(), "cpu", 128)
    return ScoringModel(model, tokenizer, "cpu", 128, batch_size=4)


def flat(scores: list[list[float]]) -> list[float]:
    return [score for trace in scores for score in trace]


def test_one_pass_equals_scoring_each_action_alone(qwen3: ScoringModel) -> None:
    alone = score_one_by_one(qwen3, EXAMPLES)

    together = score_in_one_pass(qwen3, EXAMPLES)

    assert [len(trace) for trace in together] == [32, 6, 48]
    assert flat(together) == pytest.approx(flat(alone), abs=1e-3)
    assert all(torch.isfinite(torch.tensor(flat(together))))


def test_one_pass_covers_every_action_that_fits_and_windows_only_the_others(qwen3: ScoringModel) -> None:
    tokens = [tokenize(qwen3.tokenizer, examples, None) for examples in EXAMPLES]
    long, short, over = (plan_pass(trace, MAX_LENGTH) for trace in tokens)

    # Replies ending in "." or ")" too: tokenised segment by segment, nothing merges with the blank line after them.
    assert any(text.endswith(".") for text in EXAMPLES[0])
    assert (len(long.positions), long.windows, len(short.positions), short.windows) == (32, (), 6, ())
    assert over.windows == tuple(number for number, ids in enumerate(tokens[2]) if len(ids) > MAX_LENGTH)
    assert over.windows and len(over.tokens) <= MAX_LENGTH and len(over.positions) == 48 - len(over.windows)


def test_padding_next_to_other_traces_changes_no_score(qwen3: ScoringModel) -> None:
    batched = score_in_one_pass(qwen3, EXAMPLES)

    each = [score_in_one_pass(qwen3, [examples])[0] for examples in EXAMPLES]

    assert flat(batched) == pytest.approx(flat(each), abs=1e-5)


def test_sorted_batches_equal_scoring_each_action_alone(minilm: ScoringModel) -> None:
    examples = [trace[:8] for trace in EXAMPLES]

    assert flat(score_sorted_batches(minilm, examples)) == pytest.approx(
        flat(score_one_by_one(minilm, examples)), abs=1e-4
    )


def test_a_decoder_s_sorted_batches_need_no_padding_mask(qwen3: ScoringModel) -> None:
    examples = [trace[::3] for trace in EXAMPLES]  # lengths from a few tokens to past the limit

    assert flat(score_sorted_batches(qwen3, examples)) == pytest.approx(
        flat(score_one_by_one(qwen3, examples)), abs=1e-4
    )


def test_the_strategy_follows_the_model(qwen3: ScoringModel, minilm: ScoringModel) -> None:
    assert choose_strategy(qwen3.model) == "one_pass"
    assert choose_strategy(minilm.model) == "sorted_batches"
    with pytest.raises(ValueError, match="one-pass scoring needs a causal decoder, not BertForSequenceClassification"):
        score_in_one_pass(minilm, EXAMPLES)


def test_an_unknown_strategy_lists_the_registered_ones() -> None:
    assert strategy("one_pass") is STRATEGIES["one_pass"]
    with pytest.raises(ValueError, match="unknown scoring strategy 'fast': use one of one_by_one, sorted_batches"):
        strategy("fast")


def test_a_trace_without_actions_scores_nothing(qwen3: ScoringModel) -> None:
    assert score_in_one_pass(qwen3, [[], EXAMPLES[1]])[0] == []
