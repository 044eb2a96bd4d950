"""A scoring job launched by the scorer: its files from object storage into the worker's own scratch directory.

The worker downloads the job's files (`INPUT_FILES`) from under its key and scores them there
(`run_job`), which reports each trace to `ScorerService.ReportScoringResult` over gRPC as it goes;
those reports are the job's output. The scratch directory disappears with the job.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from stash_common.jobs.transfer import download_files
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings
from stash_scorer.job_contract import INPUT_FILES
from stash_scorer.worker.runner import run_job

LOG = logging.getLogger(__name__)


def run_stored_job(key: str) -> int:
    """Run the scoring job stored under `key`; 0 on success, 1 on failure."""
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="stash-score-") as scratch:
        found = download_files(objects, key, Path(scratch), INPUT_FILES)
        LOG.info("scoring job %s: downloaded %s", key, ", ".join(found) or "nothing")
        return run_job(Path(scratch))
