"""The shared forward pass: left truncation, length-sorted batches that keep input order."""

import pytest
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.inference import score_texts, tokenize
from stash_common.reward_model.packaged import packaged_model_dir

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
