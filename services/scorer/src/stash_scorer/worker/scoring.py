"""Scoring with torch: load the unpacked checkpoint, then score one trace's actions and its whole text.

The strategy follows the model: one forward pass per trace for causal decoders, length-sorted batches
for encoders (`stash_common.reward_model.strategies`); both equal scoring each action on its own.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from stash_common.errors import ResourceExhausted
from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.device import configure_threads, select_device
from stash_common.reward_model.strategies import ActionScorer, ScoringModel, choose_strategy, strategy
from stash_common.reward_model.window import read_input_window
from stash_scorer.job_contract import ScoreJob
from stash_scorer.worker.traces import TraceInput

LOG = logging.getLogger(__name__)


def load_scoring_model(model_dir: Path, job: ScoreJob) -> tuple[ScoringModel, ActionScorer]:
    """The checkpoint at `model_dir` on the best device, and the strategy that scores its actions."""
    device = select_device()
    threads = configure_threads(device)
    window = read_input_window(model_dir)
    limit = job.max_length if window is None else window
    model, tokenizer = load_checkpoint(model_dir, device, limit, field="reward_model_key")
    name = choose_strategy(model)
    LOG.info("scoring with %s on %s (%d threads), strategy %s", type(model).__name__, device, threads, name)
    # The limit is the checkpoint's sectioned window, else the job's (left truncation), capped at what the model
    # embeds (MiniLM: 512 positions).
    scoring = ScoringModel(model, tokenizer, device, tokenizer.model_max_length, job.batch_size, window is not None)
    return scoring, strategy(name)


def score_trace(
    scoring: ScoringModel, score_actions: ActionScorer, trace: TraceInput
) -> tuple[list[float], float | None]:
    """Raw scores of the trace's actions in step order, and of the whole trace when it has a text.

    Running out of device memory fails this trace alone (ResourceExhausted), not the rest of the batch.
    """
    try:
        actions = score_actions(scoring, [[item.text for item in trace.actions]])[0]
        trace_score = scoring.score_texts([trace.trace_text])[0] if trace.trace_text else None
    except torch.OutOfMemoryError as error:
        raise ResourceExhausted(
            f"the device ran out of memory scoring trace {trace.run.trace_id} at max_length {scoring.max_length}"
            f" and batch_size {scoring.batch_size}: lower either in the scorer's settings and retry"
        ) from error
    return actions, trace_score
