"""Mixed precision for training: bf16 matrix products with fp32 weights where the hardware multiplies bf16.

On CUDA devices with bf16 and on CPUs with AMX tiles (Intel Xeon Sapphire Rapids and later), training runs
under bf16 autocast: the linear layers multiply in bf16 while weights, gradients, AdamW state and the loss
stay fp32, so a checkpoint is the same fp32 model either way. On CPU, attention still runs in fp32: oneDNN's
bf16 flash-attention backward measured 4.5x slower than fp32 there (MiniLM, 16 rows of 60-200 tokens),
which undid the 3.7x that the bf16 products gained. Elsewhere (CPUs without AMX, MPS) training is fp32.
Scoring never uses the CPU path (`stash_common.reward_model.inference.autocast` says why).

oneDNN compiles an AMX kernel for every new matrix shape and caches up to 1,024 of them; with length-
bucketed batches nearly every batch is a new shape, and the cache grew a 3-epoch MiniLM run's peak memory
from 1.3 GB to 2.0 GB. Training caps it at `ONEDNN_KERNEL_CACHE` kernels (the same speed within noise;
`ONEDNN_PRIMITIVE_CACHE_CAPACITY` in the worker's environment overrides it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from transformers import AttentionInterface, AttentionMaskInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

FP32_ATTENTION = "sdpa_fp32"
ONEDNN_KERNEL_CACHE = 8


def sdpa_in_fp32(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention computed in fp32 whatever autocast says, returned in the query's dtype."""
    with torch.autocast(query.device.type, enabled=False):
        output, weights = sdpa_attention_forward(
            module, query.float(), key.float(), value.float(), attention_mask, **kwargs
        )
    return output.to(query.dtype), weights


AttentionInterface.register(FP32_ATTENTION, sdpa_in_fp32)
# Without a mask function of its own, transformers gives a custom attention no padding mask at all.
AttentionMaskInterface.register(FP32_ATTENTION, sdpa_mask)


def bf16_training(device: str) -> bool:
    """Whether training on `device` multiplies in bf16 (see the module docstring)."""
    if device == "cuda":
        return torch.cuda.is_bf16_supported()
    return device == "cpu" and torch.cpu._is_amx_tile_supported()


def cap_kernel_cache() -> None:
    """Cap oneDNN's kernel cache (see the module docstring); it reads the setting once, at its first kernel."""
    os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", str(ONEDNN_KERNEL_CACHE))


def training_autocast(device: str) -> AbstractContextManager[None]:
    """The forward pass's precision on `device`: bf16 autocast where `bf16_training`, else fp32."""
    return torch.autocast(device_type=device, dtype=torch.bfloat16) if bf16_training(device) else nullcontext()


@contextmanager
def training_attention(model: PreTrainedModel, device: str) -> Iterator[None]:
    """While training on a bf16 CPU, `model`'s SDPA attention runs in fp32; restored on exit."""
    attention = model.config._attn_implementation
    switch = device == "cpu" and bf16_training(device) and attention == "sdpa"
    if switch:
        model.set_attn_implementation(FP32_ATTENTION)
    try:
        yield
    finally:
        if switch:
            model.set_attn_implementation(attention)
