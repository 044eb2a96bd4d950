"""Mixed-precision training: bf16 products on AMX CPUs, attention kept in fp32, the kernel cache capped."""

import os

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from stash_common.reward_model.inference import collate, rewards, tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_trainer.worker.first_token import first_token_only
from stash_trainer.worker.precision import (
    FP32_ATTENTION,
    ONEDNN_KERNEL_CACHE,
    bf16_training,
    cap_kernel_cache,
    sdpa_in_fp32,
    training_attention,
    training_autocast,
)
from stash_trainer.worker.training import load_reward_model

TEXTS = ["Refund sent.", "Your replacement ships on Monday; the order number is 4411.", "We are checking it."]


@pytest.fixture
def amx(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as on a CPU with AMX tiles, whatever this machine has (bf16 autocast works without them, slower)."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: True)


@pytest.fixture
def no_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)


def _minilm() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    return load_reward_model(packaged_model_dir(), "cpu", max_length=64, seed=0)


@pytest.mark.usefixtures("amx")
def test_a_cpu_with_amx_trains_in_bf16() -> None:
    assert bf16_training("cpu")
    assert not bf16_training("mps")
    with training_autocast("cpu"):
        assert torch.nn.Linear(4, 2)(torch.ones(1, 4)).dtype == torch.bfloat16


@pytest.mark.usefixtures("no_amx")
def test_a_cpu_without_amx_trains_in_fp32() -> None:
    model, _ = _minilm()

    assert not bf16_training("cpu")
    with training_autocast("cpu"), training_attention(model, "cpu"):
        assert torch.nn.Linear(4, 2)(torch.ones(1, 4)).dtype == torch.float32
        assert model.config._attn_implementation == "sdpa"


@pytest.mark.usefixtures("amx")
def test_attention_runs_in_fp32_while_training_and_is_restored() -> None:
    model, _ = _minilm()

    with training_attention(model, "cpu"):
        assert model.config._attn_implementation == FP32_ATTENTION

    assert model.config._attn_implementation == "sdpa"


@pytest.mark.usefixtures("amx")
def test_attention_in_fp32_keeps_the_padding_mask() -> None:
    model, tokenizer = _minilm()
    ids, mask = collate(tokenize(tokenizer, TEXTS, 64), tokenizer.pad_token_id, "cpu")
    assert not bool(mask.all())  # padded rows are part of the check

    with torch.no_grad():
        plain = rewards(model, ids, mask, "cpu")
        with training_attention(model, "cpu"):
            in_fp32 = rewards(model, ids, mask, "cpu")

    assert torch.allclose(plain, in_fp32, atol=1e-5)


def test_sdpa_in_fp32_computes_in_fp32_and_answers_in_the_callers_dtype() -> None:
    module = _minilm()[0].bert.encoder.layer[0].attention.self
    query, key, value = (torch.randn(2, 12, 5, 32, generator=torch.Generator().manual_seed(n)) for n in range(3))
    mask = torch.zeros(2, 1, 5, 5)
    mask[1, ..., 3:] = torch.finfo(torch.float32).min

    with torch.autocast("cpu", dtype=torch.bfloat16):
        output, _ = sdpa_in_fp32(module, query.bfloat16(), key.bfloat16(), value.bfloat16(), mask, scaling=0.2)
    expected, _ = sdpa_attention_forward(
        module, query.bfloat16().float(), key.bfloat16().float(), value.bfloat16().float(), mask, scaling=0.2
    )

    assert output.dtype == torch.bfloat16
    assert torch.equal(output, expected.bfloat16())


@pytest.mark.usefixtures("amx")
def test_bf16_training_keeps_fp32_weights_and_gradients_and_close_rewards() -> None:
    model, tokenizer = _minilm()
    ids, mask = collate(tokenize(tokenizer, TEXTS, 64), tokenizer.pad_token_id, "cpu")
    with torch.no_grad():
        fp32 = rewards(model, ids, mask, "cpu")

    with first_token_only(model), training_attention(model, "cpu"):
        with training_autocast("cpu"):
            mixed = rewards(model, ids, mask, "cpu")
        mixed.sum().backward()

    assert mixed.dtype == torch.float32
    assert mixed.detach() == pytest.approx(fp32, abs=0.05)
    trained = [parameter for parameter in model.parameters() if parameter.requires_grad]
    assert (
        {parameter.dtype for parameter in trained} == {parameter.grad.dtype for parameter in trained} == {torch.float32}
    )


def test_the_kernel_cache_is_capped_unless_the_environment_says_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", raising=False)
    cap_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == str(ONEDNN_KERNEL_CACHE)

    monkeypatch.setenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "512")
    cap_kernel_cache()
    assert os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "512"
