"""The reward model as GEPA's metric: the checkpoint in eval mode, and GEPA's 0..1 score of a reply.

GEPA's score is sigmoid((reward − mean) / std) with the mean and spread of the model's rewards over
its training texts (`reward_stats.json`): raw rewards saturate a sigmoid (a confident model gives a
decent reply ~0.99) and would leave GEPA no headroom. Every conversation of a minibatch is scored in
one call, and each score and the feedback quoting it come from that same call. The model scores in
eval mode, so a conversation seen before (GEPA re-runs a parent on each new minibatch, and a task model
at temperature 0 repeats its replies) gets its earlier score back instead of another forward pass.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.device import configure_threads, select_device
from stash_common.reward_model.stats import REWARD_STATS_FILE, RewardStats, read_stats
from stash_common.reward_model.strategies import ScoringModel
from stash_gepa.job_contract import GepaJob

LOG = logging.getLogger(__name__)


def gepa_score(reward: float, stats: RewardStats) -> float:
    """sigmoid((reward − mean) / std); a zero spread counts as 1."""
    return 1.0 / (1.0 + math.exp(-(reward - stats.mean) / (stats.std or 1.0)))


class RewardMetric:
    """Scores rendered conversations with the job's checkpoint."""

    def __init__(self, model_dir: Path, job: GepaJob) -> None:
        self.stats = read_stats(model_dir / REWARD_STATS_FILE)
        device = select_device()
        threads = configure_threads(device)
        model, tokenizer = load_checkpoint(model_dir, device, job.max_length, field="reward_model_key")
        LOG.info("reward model %s on %s (%d threads)", type(model).__name__, device, threads)
        self.scoring = ScoringModel(model, tokenizer, device, tokenizer.model_max_length, job.batch_size)
        self._known: dict[str, float] = {}  # conversation → GEPA score

    def scores(self, conversations: Sequence[str]) -> list[float]:
        """GEPA's score of each conversation; those not seen before are scored in one batched call."""
        new = list(dict.fromkeys(text for text in conversations if text not in self._known))
        if new:
            for text, reward in zip(new, self.scoring.score_texts(new), strict=True):
                self._known[text] = gepa_score(reward, self.stats)
        return [self._known[text] for text in conversations]
