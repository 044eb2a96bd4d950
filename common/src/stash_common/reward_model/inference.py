"""Tokenising, padding and the forward pass that turns texts into rewards.

Texts are tokenised segment by segment (`stash_common.rendering.segments`: each blank-line-separated
piece on its own, so an action's ids are a prefix of every later example's ids of its trace, whatever
the tokenizer), left-truncated to the token limit, batched with dynamic padding (each batch as wide as
its longest sequence, on the right) and scored by the model's own head: for decoders that is the score
at the last non-pad token, for encoders the pooled first token. Training tokenises its pairs with the
same `tokenize`, so a model reads the ids at scoring that it read in training.

Scoring batches are length-sorted and, on CPU, hold at most `CPU_BATCH_TOKENS` padded tokens: one
sequence of a few hundred tokens already keeps the cores busy, and bigger batches spill the caches
(on a 2-core CPU, 16 rows of 1024 tokens cost 15 % more per token than one row at a time). A causal
decoder's batches carry no padding mask: right padding comes after every real token, and a real
token never attends to a later one, so the mask changes no score; without it attention takes the
causal kernel, which skips the masked half (with a mask, attention cost twice as much).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.modeling_layers import GenericForSequenceClassification

from stash_common.rendering import section_of, segments, strip_marks
from stash_common.reward_model.window import UNMARKED, kept_positions

CPU_BATCH_TOKENS = 2048


def tokenize(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_length: int | None, sectioned: bool = False
) -> list[list[int]]:
    """Token ids of each text, its segments tokenised one by one, keeping its last `max_length` tokens.

    The tokenizer adds its special tokens once around the whole text and truncates on its own side
    (`load_checkpoint` makes that the left: the action is at the end), never past its
    `model_max_length`, which `load_checkpoint` sets to what the model embeds; `None` keeps every token.
    Section marks are read, then dropped: `sectioned` (input version 3) fits each section into the
    window with its own budget instead (`window.kept_positions`).
    """
    if not texts:
        return []
    marked = [segments(text) for text in texts]
    pieces = [[strip_marks(piece) for piece in text] for text in marked]
    if max_length is None:
        whole: list[list[int]] = tokenizer(pieces, is_split_into_words=True, verbose=False)["input_ids"]
        return whole
    limit = min(max_length, tokenizer.model_max_length)
    if sectioned:
        return _windowed(tokenizer, marked, pieces, limit)
    encoded = tokenizer(pieces, is_split_into_words=True, truncation=True, max_length=limit)
    truncated: list[list[int]] = encoded["input_ids"]
    return truncated


def _windowed(
    tokenizer: PreTrainedTokenizerBase, marked: Sequence[Sequence[str]], pieces: Sequence[Sequence[str]], limit: int
) -> list[list[int]]:
    """Each text's tokens chosen section by section (input version 3's window of `limit` tokens)."""
    if not tokenizer.is_fast:
        raise ValueError(f"input version 3 needs a fast tokenizer (one that maps tokens to text); {tokenizer} is not")
    encoded = tokenizer(list(pieces), is_split_into_words=True, verbose=False)
    windowed = []
    for row, text in enumerate(marked):
        piece_sections = _piece_sections(text)
        token_sections = [None if word is None else piece_sections[word] for word in encoded.word_ids(row)]
        ids = encoded["input_ids"][row]
        windowed.append([ids[position] for position in kept_positions(token_sections, limit)])
    return windowed


def _piece_sections(pieces: Sequence[str]) -> list[int]:
    """Each segment's section: the one it starts, else the one the segment before it is in."""
    sections, current = [], UNMARKED
    for piece in pieces:
        started = section_of(piece)
        current = current if started is None else started
        sections.append(current)
    return sections


def collate(sequences: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids and attention mask, as wide as the longest sequence."""
    ids = torch.full((len(sequences), max(map(len, sequences))), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids.to(device), mask.to(device)


def autocast(device: str) -> AbstractContextManager[None]:
    """bf16 autocast on CUDA devices that support it; a no-op elsewhere, so an enclosing autocast still holds.

    CPU scoring stays fp32 even on CPUs that multiply bf16 natively (training uses them): bf16 rounding
    would make a text's score depend on the batch it is scored in.
    """
    if device == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return nullcontext()


def rewards(model: PreTrainedModel, ids: torch.Tensor, mask: torch.Tensor | None, device: str) -> torch.Tensor:
    """One fp32 reward per row, from the model's head (decoders: at the last non-pad token)."""
    with autocast(device):
        logits: torch.Tensor = model(input_ids=ids, attention_mask=mask).logits
        return logits.squeeze(-1).float()


def is_causal_decoder(model: PreTrainedModel) -> bool:
    """Whether the model is a decoder whose score head reads every position (Qwen3, Llama, Mistral, ...)."""
    return isinstance(model, GenericForSequenceClassification) and isinstance(
        getattr(model, "score", None), torch.nn.Linear
    )


def sorted_batches(lengths: Sequence[int], batch_size: int, device: str) -> list[list[int]]:
    """Indices of `lengths`, shortest first, in batches of at most `batch_size` rows (and on CPU
    `CPU_BATCH_TOKENS` padded tokens, unless one sequence alone is longer)."""
    budget = CPU_BATCH_TOKENS if device == "cpu" else math.inf
    batches: list[list[int]] = []
    for index in sorted(range(len(lengths)), key=lengths.__getitem__):
        if batches and len(batches[-1]) < batch_size and lengths[index] * (len(batches[-1]) + 1) <= budget:
            batches[-1].append(index)
        else:
            batches.append([index])
    return batches


def score_texts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    max_length: int,
    device: str,
    batch_size: int = 32,
    sectioned: bool = False,
) -> list[float]:
    """The reward of each text, in input order; batches are sorted by length to spare padding.

    Texts with the same token ids are scored once: a trace's whole text is often its last action's
    example (the trace ends with that action), and a reward depends on nothing but the ids.
    """
    sequences = [tuple(ids) for ids in tokenize(tokenizer, texts, max_length, sectioned)]
    distinct = list(dict.fromkeys(sequences))
    masked = not is_causal_decoder(model)
    scores: dict[tuple[int, ...], float] = {}
    model.train(False)
    with torch.inference_mode():
        for batch in sorted_batches([len(sequence) for sequence in distinct], batch_size, device):
            ids, mask = collate([distinct[i] for i in batch], tokenizer.pad_token_id, device)
            for i, score in zip(batch, rewards(model, ids, mask if masked else None, device).tolist(), strict=True):
                scores[distinct[i]] = score
    return [scores[sequence] for sequence in sequences]
