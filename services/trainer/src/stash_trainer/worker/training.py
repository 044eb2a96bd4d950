"""Bradley–Terry training of `AutoModelForSequenceClassification(num_labels=1)`.

Loading, tokenisation, padding and scoring are the shared runtime (`stash_common.reward_model`), so the
scorer reads a checkpoint exactly as it was trained. Speed on small CPUs comes from dynamic padding
over length-bucketed batches (`batches.py`), a last BERT layer computed only for the position the
head reads (`first_token.py`), bf16 matrix products on CPUs with AMX and on CUDA (`precision.py`;
weights stay fp32), fused AdamW, frozen token embeddings and gradient-free evaluation. On CUDA
activations are recomputed (gradient checkpointing, TRL's default) to keep a 0.6B decoder's
activations at 16 sequences of 1024 tokens small on an A10G.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from stash_common.errors import ResourceExhausted
from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.inference import collate, rewards, tokenize
from stash_common.reward_model.window import WINDOW_TOKENS
from stash_trainer.job_contract import TrainJob
from stash_trainer.worker.batches import plan_batches
from stash_trainer.worker.first_token import first_token_only
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.precision import cap_kernel_cache, training_attention, training_autocast

ProgressCallback = Callable[[int, int, float], None]
FINAL_LOSS_STEPS = 10  # final_loss averages this many last steps: one batch alone is noise


@dataclass(frozen=True)
class TrainOutcome:
    """What a training run reports: optimizer steps taken and the mean loss of the last steps."""

    steps: int
    final_loss: float


def token_window(job: TrainJob) -> tuple[int, bool]:
    """The job's token limit and whether it is input version 3's sectioned window (else left truncation)."""
    return (WINDOW_TOKENS, True) if job.input_version == 3 else (job.max_length, False)


def load_reward_model(
    path: Path, device: str, max_length: int, seed: int
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The checkpoint at `path` with a fresh one-output head (seeded), and its left-truncating tokenizer."""
    torch.manual_seed(seed)
    model, tokenizer = load_checkpoint(path, device, max_length)
    disable_dropout(model)
    # Token embeddings stay as pretrained: a few hundred pairs barely move them, while their gradient and
    # AdamW state are the largest buffers (a quarter of Qwen3-0.6B; ~150 MB of peak memory for MiniLM on CPU).
    model.get_input_embeddings().weight.requires_grad_(False)
    if device == "cuda" and model.supports_gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, tokenizer


def disable_dropout(model: torch.nn.Module) -> None:
    """Turn every dropout off: on a few hundred pairs it only slows the fit (TRL's `disable_dropout`)."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        if isinstance(getattr(module, "attention_dropout", None), float):
            # A plain float attribute of the attention modules, set dynamically as it is read: torch types
            # `Module.__setattr__` for tensors and submodules only.
            setattr(module, "attention_dropout", 0.0)  # noqa: B010


def make_optimizer(
    model: PreTrainedModel, learning_rate: float, total_steps: int, device: str
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW (no weight decay, fused where torch has the kernel) with a linear decay to zero."""
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(
        trainable, lr=learning_rate, weight_decay=0.0, fused=True if device in ("cuda", "cpu") else None
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: max(0.0, 1.0 - step / total_steps))
    return optimizer, schedule


def train_reward_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    pairs: Sequence[Pair],
    job: TrainJob,
    device: str,
    on_progress: ProgressCallback | None = None,
) -> TrainOutcome:
    """Fit `model` to prefer each pair's chosen text with the Bradley–Terry loss −log σ(r(chosen) − r(rejected)).

    `on_progress(step, total_steps, loss)` is called after every optimizer step.
    """
    cap_kernel_cache()
    limit, sectioned = token_window(job)
    chosen = tokenize(tokenizer, [pair.chosen for pair in pairs], limit, sectioned)
    rejected = tokenize(tokenizer, [pair.rejected for pair in pairs], limit, sectioned)
    lengths = [max(len(c), len(r)) for c, r in zip(chosen, rejected, strict=True)]
    total = math.ceil(len(pairs) / job.batch_size) * job.epochs
    optimizer, schedule = make_optimizer(model, job.learning_rate, total, device)
    rng, losses = random.Random(job.seed), []
    model.train()
    with first_token_only(model), training_attention(model, device):
        for _ in range(job.epochs):
            for batch in plan_batches(lengths, job.batch_size, rng):
                ids, mask = collate(
                    [chosen[i] for i in batch] + [rejected[i] for i in batch], tokenizer.pad_token_id, device
                )
                losses.append(train_step(model, optimizer, schedule, ids, mask, device))
                if on_progress is not None:
                    on_progress(len(losses), total, losses[-1])
    model.eval()
    tail = losses[-FINAL_LOSS_STEPS:]
    return TrainOutcome(steps=len(losses), final_loss=sum(tail) / len(tail))


@contextmanager
def out_of_memory_advice(job: TrainJob) -> Iterator[None]:
    """Turn the device running out of memory into an error that says which job values to lower."""
    try:
        yield
    except torch.OutOfMemoryError as error:
        limit, sectioned = token_window(job)
        lower = "batch_size" if sectioned else "batch_size or max_length"  # input version 3's window is fixed
        raise ResourceExhausted(
            f"the device ran out of memory at batch_size {job.batch_size} and {limit}-token inputs:"
            f" lower {lower} (or pick a smaller base_model) and retry"
        ) from error


def train_step(
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LRScheduler,
    ids: torch.Tensor,
    mask: torch.Tensor,
    device: str,
) -> float:
    """One optimizer step on a batch whose first half is chosen texts and second half rejected ones."""
    with training_autocast(device):
        chosen, rejected = rewards(model, ids, mask, device).chunk(2)
    loss = -functional.logsigmoid(chosen - rejected).mean()
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    return loss.item()
