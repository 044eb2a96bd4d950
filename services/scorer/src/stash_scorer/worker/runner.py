"""One scoring job, start to finish: read the directory, fetch the checkpoint once, score the traces in chunks
that share their forward passes (`CHUNK_TRACES`), and report each trace.

Everything that can fail without a model (the job files, the archive, the action statistics) is
checked before torch is imported. A failure of the whole job reports every run not yet reported as
failed, permanently when retrying cannot help (a missing checkpoint, a model without action scoring);
a failure of one trace fails that run alone and the job goes on. `result.json` is always written.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from stash_common.errors import FailedPrecondition, ResourceExhausted, StashError
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
CHUNK_TRACES = 64  # traces scored together: more share the passes better, fewer are reported sooner


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
        from stash_scorer.worker.scoring import load_scoring_model, score_traces

        scoring, score_actions = load_scoring_model(model_dir, job)
        count = 0
        for start in range(0, len(traces), CHUNK_TRACES):
            scorable = []
            for trace in traces[start : start + CHUNK_TRACES]:
                if trace.actions:
                    scorable.append(trace)
                else:
                    fail_trace(reporter, trace, no_actions(trace))
            try:
                scored = list(zip(scorable, score_traces(scoring, score_actions, scorable), strict=True))
            except ResourceExhausted:  # score the chunk trace by trace: only a trace that does not fit fails
                scored = []
                for trace in scorable:
                    try:
                        scored.append((trace, score_traces(scoring, score_actions, [trace])[0]))
                    except ResourceExhausted as error:
                        fail_trace(reporter, trace, error)
            for trace, (actions, trace_score) in scored:
                reporter.succeeded(trace_result(trace, actions, trace_score, stats))
                count += len(actions)
    return count


def fail_trace(reporter: Reporter, trace: TraceInput, error: StashError) -> None:
    """Report that one trace could not be scored; the job goes on."""
    LOG.warning("trace %s failed: %s", trace.run.trace_id, error.message)
    reporter.failed(trace.run, error.message, error.permanent)


def no_actions(trace: TraceInput) -> FailedPrecondition:
    """Why a trace the job holds none of the actions of fails (nothing to score)."""
    return FailedPrecondition(
        f"trace {trace.run.trace_id} has no scorable action (an assistant response or tool call) in the job"
    )
