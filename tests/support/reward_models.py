"""Tiny reward-model checkpoints built offline: a word-level or byte-level BPE tokenizer trained on the test's
own texts and a randomly initialised Qwen3 sequence classifier from a config (train nothing, download nothing)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

# Punctuation keeps the whitespace after it, as Qwen's BPE does: "now." ends an action, "now.\n\n" the context.
MERGING_PATTERN = r"[^\w\s]+\s*|\w+|\s+"
# How byte-level BPEs split words before merging: GPT-2's rule, and Qwen2's (Qwen3's tokenizer), which glues
# punctuation to the newlines after it, so a whole text tokenises "now.\n\n" as one piece.
GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def word_tokenizer(corpus: Iterable[str], pattern: str | None = None) -> Any:
    """A fast tokenizer with `<unk>` and `<eos>` (no pad) whose vocabulary is every word of `corpus`.

    Words split on whitespace (dropped) unless `pattern` is given: then each match of it is a token.
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel(unk_token="<unk>"))
    words.pre_tokenizer = (
        pre_tokenizers.Whitespace() if pattern is None else pre_tokenizers.Split(Regex(pattern), "isolated")
    )
    words.train_from_iterator(list(corpus), trainers.WordLevelTrainer(special_tokens=["<unk>", "<eos>"]))
    return PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="<eos>")


def bpe_tokenizer(corpus: Iterable[str], split: str, vocab_size: int = 4000) -> Any:
    """A byte-level BPE with an eos token (no pad), trained on `corpus`, splitting words with the regex `split`."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(list(corpus), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")


def save_tiny_qwen3(directory: Path, tokenizer: Any, seed: int = 0, **sizes: int) -> Path:
    """Save `tokenizer` and a seeded random Qwen3 reward model (2 layers, width 32 unless `sizes` says)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    shape = {
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": 64,
        "head_dim": 16,
        **sizes,
    }
    config = Qwen3Config(vocab_size=len(tokenizer), eos_token_id=tokenizer.eos_token_id, num_labels=1, **shape)
    torch.manual_seed(seed)
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(directory)
    Qwen3ForSequenceClassification(config).save_pretrained(directory)
    return directory
