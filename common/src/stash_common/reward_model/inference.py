"""Tokenising, padding and the forward pass that turns texts into rewards.

Texts are tokenised whole and left-truncated to the token limit, batched with dynamic padding (each
batch as wide as its longest sequence, on the right) and scored by the model's own head: for decoders
that is the score at the last non-pad token, for encoders the pooled first token.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase


def tokenize(tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids of each text, keeping its last `max_length` tokens (the action is at the end).

    Never more than the tokenizer's `model_max_length`, which `load_checkpoint` sets to what the model embeds.
    """
    limit = min(max_length, tokenizer.model_max_length)
    return tokenizer(list(texts), truncation=True, max_length=limit)["input_ids"]


def collate(sequences: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask, as wide as the longest sequence."""
    ids = torch.full((len(sequences), max(map(len, sequences))), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids.to(device), mask.to(device)


def autocast(device: str) -> AbstractContextManager[None]:
    """bf16 autocast on CUDA devices that support it; a no-op elsewhere (on CPU it measured slower)."""
    enabled = device == "cuda" and torch.cuda.is_bf16_supported()
    return torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=enabled)


def rewards(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor, device: str) -> torch.Tensor:
    """One fp32 reward per row, from the model's head (decoders: at the last non-pad token)."""
    with autocast(device):
        return model(input_ids=ids, attention_mask=mask).logits.squeeze(-1).float()


def score_texts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    max_length: int,
    device: str,
    batch_size: int = 32,
) -> list[float]:
    """The reward of each text, in input order; batches are sorted by length to spare padding."""
    if not texts:
        return []
    sequences = tokenize(tokenizer, texts, max_length)
    order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
    scores = [0.0] * len(sequences)
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            ids, mask = collate([sequences[i] for i in batch], tokenizer.pad_token_id, device)
            for i, score in zip(batch, rewards(model, ids, mask, device).tolist(), strict=True):
                scores[i] = score
    return scores
