"""Scoring with torch: load the unpacked checkpoint, then score the actions and whole texts of many traces.

The strategy follows the model: one forward pass per trace for causal decoders, length-sorted batches
for encoders (`stash_common.reward_model.strategies`); both equal scoring each action on its own. The
traces of a chunk share their forward passes: on a CPU a forward call of a trace's two or three short
actions costs nearly as much as one of a full batch (200 support traces, MiniLM, 2 cores: 5.1 actions/s
trace by trace, 13.9 in chunks of 64). A trace's whole text is scored with its actions, as one more
example after its last: it is that action's example, or continues it, so the work is shared (`examples_of`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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


def score_traces(
    scoring: ScoringModel, score_actions: ActionScorer, traces: Sequence[TraceInput]
) -> list[tuple[list[float], float | None]]:
    """For each trace, the raw scores of its actions in step order and of its whole text when it has one.

    Running out of device memory raises ResourceExhausted, naming the trace when there is only one: the
    caller scores a chunk that ran out trace by trace, so that it fails the trace that does alone.
    """
    try:
        scored = score_actions(scoring, [examples_of(trace) for trace in traces])
    except torch.OutOfMemoryError as error:
        which = f"trace {traces[0].run.trace_id}" if len(traces) == 1 else f"{len(traces)} traces"
        raise ResourceExhausted(
            f"the device ran out of memory scoring {which} at max_length {scoring.max_length}"
            f" and batch_size {scoring.batch_size}: lower either in the scorer's settings and retry"
        ) from error
    return [
        (scores[:-1], scores[-1]) if trace.trace_text else (scores, None)
        for scores, trace in zip(scored, traces, strict=True)
    ]


def examples_of(trace: TraceInput) -> list[str]:
    """The texts to score of `trace`: its actions' examples in step order, then its whole text when it has one.

    The whole text goes last: it continues the last action's example, so a decoder's one pass over it scores
    every action and the trace, and an encoder scores it once when its ids are that example's (the trace ends
    with that action: `inference.score_texts` scores equal ids once).
    """
    return [item.text for item in trace.actions] + ([trace.trace_text] if trace.trace_text else [])
