"""The shared forward pass: segment-wise tokens, left truncation, length-sorted batches that keep input order."""

import pytest
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.inference import score_texts, sorted_batches, tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from support.agent_traces import action_examples, conversation, corpus
from support.reward_models import QWEN2_SPLIT, bpe_tokenizer

Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase]


@pytest.fixture(scope="module")
def minilm() -> Loaded:
    return load_checkpoint(packaged_model_dir(), "cpu", max_length=64)


def test_long_texts_keep_their_end(minilm: Loaded) -> None:
    _, tokenizer = minilm
    text = "earlier context " * 200 + "the final tool call"

    ids = tokenize(tokenizer, [text], 16)[0]

    assert len(ids) == 16
    assert tokenizer.decode(ids, skip_special_tokens=True).endswith("the final tool call")


def test_score_texts_keeps_input_order(minilm: Loaded) -> None:
    model, tokenizer = minilm
    texts = ["short", "a somewhat longer text than that", "mid length text"]

    forward = score_texts(model, tokenizer, texts, 64, "cpu", batch_size=2)

    assert score_texts(model, tokenizer, texts[::-1], 64, "cpu", batch_size=2) == pytest.approx(forward[::-1], abs=1e-5)


def test_the_token_limit_stops_at_the_positions_the_model_embeds() -> None:
    model, tokenizer = load_checkpoint(packaged_model_dir(), "cpu", max_length=1024)

    scores = score_texts(model, tokenizer, ["word " * 900 + "the final tool call"], 1024, "cpu")

    assert tokenizer.model_max_length == model.config.max_position_embeddings == 512
    assert len(tokenize(tokenizer, ["word " * 900], 1024)[0]) == 512 and len(scores) == 1


def test_each_example_s_tokens_begin_the_next_one_s_where_whole_texts_would_not() -> None:
    trace = conversation("t", 20, seed=3)
    tokenizer = bpe_tokenizer(corpus(trace), QWEN2_SPLIT, vocab_size=500)
    examples = [text for _, text in action_examples(trace)]

    ids, whole = tokenize(tokenizer, examples, None), tokenizer(examples)["input_ids"]

    assert all(later[: len(earlier)] == earlier for earlier, later in zip(ids, ids[1:], strict=False))
    # The same tokenizer on whole texts glues a closing "." to the blank line after it.
    assert not all(later[: len(earlier)] == earlier for earlier, later in zip(whole, whole[1:], strict=False))


def test_wordpiece_tokens_are_those_of_the_whole_text_truncated_or_not(minilm: Loaded) -> None:
    _, tokenizer = minilm
    texts = [text for _, text in action_examples(conversation("t", 12, seed=4))]

    assert tokenize(tokenizer, texts, None) == tokenizer(texts, verbose=False)["input_ids"]
    assert tokenize(tokenizer, texts, 40) == tokenizer(texts, truncation=True, max_length=40)["input_ids"]


def test_cpu_batches_stop_at_the_token_budget_and_other_devices_at_the_row_count() -> None:
    lengths = [1000, 10, 1500, 20, 900, 30, 3000]

    assert sorted_batches(lengths, 4, "cpu") == [[1, 3, 5], [4, 0], [2], [6]]
    assert sorted_batches(lengths, 4, "cuda") == [[1, 3, 5, 4], [0, 2, 6]]
    assert sorted_batches([], 4, "cpu") == []
