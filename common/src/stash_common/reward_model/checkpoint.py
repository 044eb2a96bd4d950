"""Loading `AutoModelForSequenceClassification(num_labels=1)` and its tokenizer from a checkpoint directory.

Nothing is downloaded: the directory holds every file. The tokenizer left-truncates (the action a text
is scored for is at its end) and pads with eos when it has no pad token; the model is told the pad id,
because decoders read their score at the last non-pad token. The token limit never exceeds what the
model's position embeddings hold (MiniLM: 512), so a long trace is truncated instead of crashing the
forward pass. Training and scoring load through here, so a saved model is read back exactly as it was
trained.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from stash_common.errors import InvalidArgument


def load_tokenizer(path: Path, max_length: int, field: str = "base_model") -> PreTrainedTokenizerBase:
    """The tokenizer at `path`, left-truncating to `max_length`, with a pad token (eos when it has none)."""
    tokenizer = AutoTokenizer.from_pretrained(path, truncation_side="left", local_files_only=True)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise InvalidArgument(field, f"the tokenizer of {path} has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.model_max_length = max_length  # saved with the checkpoint: scoring truncates the same way
    return tokenizer


def load_checkpoint(
    path: Path, device: str, max_length: int, field: str = "base_model"
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The one-output sequence classifier at `path` in fp32 on `device`, and its tokenizer.

    The tokenizer's `model_max_length` is the effective token limit: `max_length`, or less when the
    model's positions end sooner. A base checkpoint without a reward head gets a fresh one (seed torch
    first for a reproducible one); `field` names the job value to blame when the tokenizer is unusable.
    """
    tokenizer = load_tokenizer(path, max_length, field)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, num_labels=1, dtype=torch.float32, local_files_only=True
    )
    model.config.pad_token_id = tokenizer.pad_token_id
    tokenizer.model_max_length = token_limit(model, max_length)
    return model.to(device), tokenizer


def token_limit(model: PreTrainedModel, max_length: int) -> int:
    """`max_length`, capped at the number of positions the model can embed."""
    positions = getattr(model.config, "max_position_embeddings", None)
    return min(max_length, positions) if isinstance(positions, int) else max_length
