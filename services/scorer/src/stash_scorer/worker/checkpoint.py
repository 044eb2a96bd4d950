"""The reward model's checkpoint: its archive from object storage, unpacked, and its action statistics.

The trainer stores `model/` as `reward-models/<owner>/<model>.tar.gz`; the worker unpacks it into a
temporary directory that disappears with the job. A checkpoint without `action_reward_stats.json`
trained no action comparisons, so it has no action credit to give: that fails every run permanently.
Plain Python: a missing archive or statistics file fails the job before torch is imported.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from stash_common.errors import FailedPrecondition, NotFound
from stash_common.reward_model.stats import ACTION_REWARD_STATS_FILE, RewardStats, read_stats
from stash_common.storage import ObjectStore
from stash_scorer.job_contract import ScoreJob

ARCHIVE_DIR = "model"  # the folder name inside the trainer's archive


def fetch_checkpoint(objects: ObjectStore, job: ScoreJob, scratch: Path) -> Path:
    """Download and unpack the job's checkpoint archive under `scratch`; the checkpoint's directory."""
    archive = scratch / "checkpoint.tar.gz"
    try:
        objects.download(job.reward_model_key, archive)
    except NotFound as error:
        raise NotFound(
            f"the checkpoint of reward model {job.reward_model_id} is missing from object storage"
            f" ({job.reward_model_key}): train the model again"
        ) from error
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(scratch, filter="data")  # the data filter refuses paths that escape `scratch`
    archive.unlink()
    model_dir = scratch / ARCHIVE_DIR
    if not (model_dir / "config.json").is_file():
        raise FailedPrecondition(
            f"the checkpoint archive {job.reward_model_key} holds no {ARCHIVE_DIR}/config.json: train the model again"
        )
    return model_dir


def action_stats(model_dir: Path, job: ScoreJob) -> RewardStats:
    """The statistics that turn an action's score into credit; refused when the model has no action scoring."""
    try:
        return read_stats(model_dir / ACTION_REWARD_STATS_FILE)
    except FailedPrecondition as error:
        raise FailedPrecondition(
            f"reward model {job.reward_model_id} has no action scoring ({error.message}): it trained no action"
            " comparisons; rate or comment on assistant responses and tool calls, then train a new model"
        ) from error
