"""One scoring job, start to finish: read the directory, fetch the checkpoint, score and report each trace.

Everything that can fail without a model (the job files, the archive, the action statistics) is
checked before torch is imported. A failure of the whole job reports every run not yet reported as
failed, permanently when retrying cannot help (a missing checkpoint, a model without action scoring);
a failure of one trace fails that run alone and the job goes on. `result.json` is always written.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from stash_common.errors import FailedPrecondition, StashError
from stash_common.jobs.files import job_log
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings, fetch_checkpoint
from stash_scorer.job_contract import (
    LOG_FILE,
    ScoreJob,
    read_action_score_items,
    read_job,
    read_score_items,
    write_error,
    write_result,
)
from stash_scorer.worker.checkpoint import action_stats
from stash_scorer.worker.reports import Reporter
from stash_scorer.worker.traces import TraceInput, trace_inputs, trace_result

LOG = logging.getLogger(__name__)


def run_job(job_dir: Path) -> int:
    """Run the scoring job in `job_dir`, always writing `result.json`; 0 on success, 1 on failure."""
    with job_log(job_dir / LOG_FILE):
        try:
            job = read_job(job_dir)
        except StashError as error:
            LOG.error("scoring job failed: %s", error.message)
            write_error(job_dir, error.message)
            return 1
        with Reporter(job) as reporter:
            try:
                count = score_job(job_dir, job, reporter)
            except StashError as error:
                return fail_job(job_dir, reporter, error.message, error.permanent)
            except Exception as error:  # the job must still report its runs and leave a result.json behind
                LOG.exception("scoring job failed unexpectedly")
                message = f"scoring failed: {type(error).__name__}: {error} (worker.log has details)"
                return fail_job(job_dir, reporter, message, permanent=False)
        write_result(job_dir, count)
        LOG.info("scoring job %s succeeded: %d actions", job.job_id, count)
    return 0


def fail_job(job_dir: Path, reporter: Reporter, message: str, permanent: bool) -> int:
    """Fail every run not yet reported and write the error; the exit code of a failed job."""
    LOG.error("scoring job failed: %s", message)
    reporter.fail_unreported(message, permanent)
    write_error(job_dir, message)
    return 1


def score_job(job_dir: Path, job: ScoreJob, reporter: Reporter) -> int:
    """Score and report every run of `job`; the number of actions scored."""
    traces = trace_inputs(job, read_action_score_items(job_dir), read_score_items(job_dir))
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="stash-score-") as scratch:
        model_dir = fetch_checkpoint(objects, job.reward_model_id, job.reward_model_key, Path(scratch))
        stats = action_stats(model_dir, job)
        # Imported here: torch and transformers take seconds to load, and every check above runs first.
        from stash_scorer.worker.scoring import load_scoring_model, score_trace

        scoring, score_actions = load_scoring_model(model_dir, job)
        count = 0
        for trace in traces:
            try:
                actions, trace_score = score_trace(scoring, score_actions, require_actions(trace))
                reporter.succeeded(trace_result(trace, actions, trace_score, stats))
                count += len(actions)
            except StashError as error:
                LOG.warning("trace %s failed: %s", trace.run.trace_id, error.message)
                reporter.failed(trace.run, error.message, error.permanent)
    return count


def require_actions(trace: TraceInput) -> TraceInput:
    """The trace, or FailedPrecondition when the job holds none of its actions (nothing to score)."""
    if not trace.actions:
        raise FailedPrecondition(
            f"trace {trace.run.trace_id} has no scorable action (an assistant response or tool call) in the job"
        )
    return trace
