"""Training with torch: dropout and frozen embeddings, the decoder path, the ids scoring reads, real learning."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.reward_model.inference import score_texts, tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_common.reward_model.strategies import ScoringModel, score_in_one_pass, score_one_by_one
from stash_trainer.job_contract import TrainJob
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.training import load_reward_model, train_reward_model
from support.agent_traces import action_examples, conversation, corpus
from support.reward_models import QWEN2_SPLIT, bpe_tokenizer, save_tiny_qwen3

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


@contextmanager
def model_inputs(model: PreTrainedModel) -> Iterator[set[tuple[int, ...]]]:
    """Every row of ids the model's base reads while the block runs, without the padding on its right.

    Scoring a decoder passes no padding mask, so the padding is cut by its id (no text here holds an eos).
    """
    rows: set[tuple[int, ...]] = set()

    def record(_: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        for row in ids.tolist():
            while row[-1] == model.config.pad_token_id:
                row.pop()
            rows.add(tuple(row))

    hook = model.get_submodule(model.base_model_prefix).register_forward_pre_hook(record, with_kwargs=True)
    try:
        yield rows
    finally:
        hook.remove()


def test_scoring_reads_each_action_with_the_ids_training_read(tmp_path: Path) -> None:
    trace = conversation("t", 20, seed=5)
    texts = [text for _, text in action_examples(trace)]
    directory = save_tiny_qwen3(tmp_path, bpe_tokenizer(corpus(trace), QWEN2_SPLIT, vocab_size=500))
    model, tokenizer = load_reward_model(directory, "cpu", max_length=200, seed=0)
    pairs = [Pair(later, earlier, ("t",), "action") for earlier, later in zip(texts, texts[1:], strict=False)]

    with model_inputs(model) as trained:
        train_reward_model(model, tokenizer, pairs, _job(max_length=200, batch_size=4), "cpu")
    scoring = ScoringModel(model, tokenizer, "cpu", 200, batch_size=4)
    with model_inputs(model) as alone:
        score_one_by_one(scoring, [texts])
    with model_inputs(model) as in_pass:
        score_in_one_pass(scoring, [texts])

    assert max(map(len, tokenize(tokenizer, texts, None))) > 200  # the later actions are left-truncated
    assert trained == alone and len(alone) == len(texts)
    assert all(any(row[: len(ids)] == ids for row in in_pass) for ids in trained)


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
