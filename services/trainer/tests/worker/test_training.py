"""Training with torch: dropout and frozen embeddings, the decoder path and a real learning check."""

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.reward_model.inference import score_texts
from stash_common.reward_model.packaged import packaged_model_dir
from stash_trainer.worker.job import TrainJob
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.training import load_reward_model, train_reward_model

Loaded = tuple[PreTrainedModel, PreTrainedTokenizerBase]


def _job(**changes: object) -> TrainJob:
    values = {"kind": "train", "base_model": "local", "epochs": 1, "max_pairs": 4000, "seed": 0, "max_length": 64}
    return TrainJob(**{**values, **changes})


@pytest.fixture(scope="module")
def minilm() -> Loaded:
    return load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)


def test_dropout_is_off(minilm: Loaded) -> None:
    model, _ = minilm

    assert {module.p for module in model.modules() if isinstance(module, torch.nn.Dropout)} == {0.0}


def test_only_token_embeddings_are_frozen(minilm: Loaded) -> None:
    model, _ = minilm

    frozen = [name for name, parameter in model.named_parameters() if not parameter.requires_grad]

    assert frozen == ["bert.embeddings.word_embeddings.weight"]


def test_decoder_pads_with_eos_and_scores_the_last_real_token(
    tiny_decoder: Path, constraint_pairs: Callable[[int, str, int], list[Pair]]
) -> None:
    model, tokenizer = load_reward_model(tiny_decoder, "cpu", max_length=64, seed=0)
    pairs = constraint_pairs(16, "train", 0)
    before = model.score.weight.detach().clone()
    steps: list[tuple[int, int, float]] = []

    outcome = train_reward_model(model, tokenizer, pairs, _job(batch_size=4), "cpu", lambda *s: steps.append(s))

    assert tokenizer.pad_token == tokenizer.eos_token == "<eos>"
    assert model.config.pad_token_id == tokenizer.eos_token_id
    assert [(step, total) for step, total, _ in steps] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert torch.isfinite(torch.tensor(outcome.final_loss))
    assert not torch.equal(before, model.score.weight)
    texts = [pairs[0].chosen, pairs[1].chosen + " and a much longer ending than the first one has"]
    alone = [score_texts(model, tokenizer, [text], 64, "cpu")[0] for text in texts]
    assert score_texts(model, tokenizer, texts, 64, "cpu") == pytest.approx(alone, abs=1e-5)


@pytest.mark.timeout(300)
def test_reward_model_learns_to_prefer_answers_that_follow_the_request(
    constraint_pairs: Callable[[int, str, int], list[Pair]],
) -> None:
    model, tokenizer = load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)
    held_out = constraint_pairs(100, "eval", 1)

    train_reward_model(model, tokenizer, constraint_pairs(160, "train", 0), _job(epochs=3), "cpu")

    chosen = score_texts(model, tokenizer, [pair.chosen for pair in held_out], 64, "cpu")
    rejected = score_texts(model, tokenizer, [pair.rejected for pair in held_out], 64, "cpu")
    accuracy = sum(c > r for c, r in zip(chosen, rejected, strict=True)) / len(held_out)
    assert accuracy > 0.8
