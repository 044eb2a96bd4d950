"""The last encoder layer computed for the one position a BERT classification head reads.

`BertForSequenceClassification` scores a text from the first token's final hidden state (its pooler
reads `[:, 0]`), so in the last layer every other position's query, attention output and feed-forward
are computed and thrown away: a sixth of MiniLM's training FLOPs. While `first_token_only` is active
that layer still reads every position (keys and values, through the model's configured attention
function) but computes only the first one, which gives the head the same input, the same gradients
to every parameter and the same checkpoint (the weights are untouched: only the layer's `forward` is
replaced, on the instance, and restored on exit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from transformers import BertForSequenceClassification, PreTrainedModel
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertLayer, eager_attention_forward


@contextmanager
def first_token_only(model: PreTrainedModel) -> Iterator[None]:
    """Compute only the first position in the last layer of a BERT classifier; other models run as they are."""
    layer = last_bert_layer(model)
    if layer is None:
        yield
        return
    layer.forward = first_token_forward(layer)
    try:
        yield
    finally:
        del layer.forward


def last_bert_layer(model: PreTrainedModel) -> BertLayer | None:
    """The last encoder layer of a plain BERT classifier (no cross-attention), else None."""
    if not isinstance(model, BertForSequenceClassification) or model.config.is_decoder:
        return None
    layer = model.bert.encoder.layer[-1]
    return layer if isinstance(layer, BertLayer) else None


def first_token_forward(layer: BertLayer) -> Callable[..., torch.Tensor]:
    """`layer`'s forward, returning only the first position's output (shape batch × 1 × hidden)."""
    attention = layer.attention.self

    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, *_: Any, **__: Any) -> torch.Tensor:
        rows = hidden_states.shape[0]
        first = hidden_states[:, :1]
        heads = (rows, -1, attention.num_attention_heads, attention.attention_head_size)
        query = attention.query(first).view(heads).transpose(1, 2)
        key = attention.key(hidden_states).view(heads).transpose(1, 2)
        value = attention.value(hidden_states).view(heads).transpose(1, 2)
        mask = None if attention_mask is None else attention_mask[:, :, :1]  # the first query's row
        attend = ALL_ATTENTION_FUNCTIONS.get_interface(attention.config._attn_implementation, eager_attention_forward)
        dropout = attention.dropout.p if attention.training else 0.0
        attended, _ = attend(attention, query, key, value, mask, dropout=dropout, scaling=attention.scaling)
        attention_output = layer.attention.output(attended.reshape(rows, 1, -1), first)
        output: torch.Tensor = layer.feed_forward_chunk(attention_output)
        return output

    return forward
