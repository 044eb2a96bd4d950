"""The action statistics of a scoring job's checkpoint (downloaded by `stash_common.worker_storage`).

A checkpoint without `action_reward_stats.json` trained no action comparisons, so it has no action
credit to give: that fails every run permanently. Plain Python: a missing statistics file fails the
job before torch is imported.
"""

from __future__ import annotations

from pathlib import Path

from stash_common.errors import FailedPrecondition
from stash_common.reward_model.stats import ACTION_REWARD_STATS_FILE, RewardStats, read_stats
from stash_scorer.job_contract import ScoreJob


def action_stats(model_dir: Path, job: ScoreJob) -> RewardStats:
    """The statistics that turn an action's score into credit; refused when the model has no action scoring."""
    try:
        return read_stats(model_dir / ACTION_REWARD_STATS_FILE)
    except FailedPrecondition as error:
        raise FailedPrecondition(
            f"reward model {job.reward_model_id} has no action scoring ({error.message}): it trained no action"
            " comparisons; rate or comment on assistant responses and tool calls, then train a new model"
        ) from error
