"""BERT's last layer computed for the first position only: the same rewards, gradients and weights."""

from pathlib import Path
from typing import Any

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from stash_common.reward_model.inference import collate, rewards, tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_trainer.worker.first_token import first_token_only
from stash_trainer.worker.training import load_reward_model
from support.reward_models import QWEN2_SPLIT, bpe_tokenizer, save_tiny_qwen3

TEXTS = ["Refund sent.", "Your replacement ships on Monday; the order number is 4411.", "We are checking it."]


def _rewards_and_gradients(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    scores = rewards(model, ids, mask, "cpu")
    (scores * torch.arange(1.0, len(scores) + 1)).sum().backward()
    gradients = [parameter.grad for parameter in model.parameters() if parameter.requires_grad]
    assert all(gradient is not None for gradient in gradients)
    return [scores.detach(), *gradients]


def test_bert_rewards_and_gradients_match_the_full_forward_on_a_padded_batch() -> None:
    model, tokenizer = load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)
    ids, mask = collate(tokenize(tokenizer, TEXTS, 64), tokenizer.pad_token_id, "cpu")
    assert not bool(mask.all())  # padded rows are part of the check

    full = _rewards_and_gradients(model, ids, mask)
    with first_token_only(model):
        first = _rewards_and_gradients(model, ids, mask)

    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(full, first, strict=True))


def test_the_last_layer_attends_through_the_models_attention_function_for_the_first_position_only() -> None:
    model, tokenizer = load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)
    ids, mask = collate(tokenize(tokenizer, TEXTS, 64), tokenizer.pad_token_id, "cpu")
    query_lengths: list[int] = []

    def recording_sdpa(module: torch.nn.Module, query: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        query_lengths.append(query.shape[2])
        return sdpa_attention_forward(module, query, *args, **kwargs)

    AttentionInterface.register("recording_sdpa", recording_sdpa)
    model.set_attn_implementation("recording_sdpa")
    with first_token_only(model):
        rewards(model, ids, mask, "cpu")

    assert query_lengths == [ids.shape[1]] * 5 + [1]


def test_the_layer_forward_is_restored_on_exit() -> None:
    model, _ = load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)
    last = model.bert.encoder.layer[-1]

    with first_token_only(model):
        assert "forward" in vars(last)

    assert "forward" not in vars(last)
    assert all("forward" not in vars(module) for module in model.modules())


def test_a_decoder_runs_unchanged(tmp_path: Path) -> None:
    directory = save_tiny_qwen3(tmp_path, bpe_tokenizer(TEXTS, QWEN2_SPLIT, vocab_size=300))
    model, _ = load_reward_model(directory, "cpu", max_length=64, seed=0)

    with first_token_only(model):
        assert all("forward" not in vars(module) for module in model.modules())
