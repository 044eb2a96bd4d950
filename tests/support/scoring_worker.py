"""A stand-in scoring worker (`python -m support.scoring_worker <kind> --job <key>`) for tests about the scorer service.

Like the real worker it downloads the job's files from object storage (the one STASH_DATA_DIR names)
into its own scratch directory and reports fixed scores over real gRPC, without loading a model:
action k of a trace scores 0.5·(k + 1) with credit tanh(score / 2), and the trace scores the sum.
`STASH_TEST_SCORING_WORKER` picks a behaviour: `report` (the default), `hold` (wait for a `release`
object beside the job's files first), `exit` (exit with code 3 without reporting), `fail` (report every
trace failed, retryably), or a broken result that validation must refuse: `nan` (a NaN score),
`unknown_step` (a step id the trace does not have), `credit` (credit 1.5).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time
from pathlib import Path

from stash.rm.v1 import common_pb2, scorer_pb2, scorer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.jobs.transfer import download_files
from stash_common.parent_death import follow_parent
from stash_common.settings import load
from stash_common.storage import ObjectStore
from stash_common.worker_storage import WorkerStorageSettings
from stash_scorer.job_contract import INPUT_FILES, ActionScoreItem, read_action_score_items, read_job

MODE_VARIABLE = "STASH_TEST_SCORING_WORKER"
RELEASE_FILE = "release"
HOLD_S = 60.0


def action_results(mode: str, items: list[ActionScoreItem]) -> list[scorer_pb2.ActionScoreResult]:
    """The fixed scores of one trace's actions, broken as `mode` asks."""
    results = [
        scorer_pb2.ActionScoreResult(step_id=item.step_id, score=0.5 * (k + 1), credit=math.tanh(0.25 * (k + 1)))
        for k, item in enumerate(items)
    ]
    if mode == "nan":
        results[0].score = math.nan
    elif mode == "unknown_step":
        results[0].step_id = "no-such-step"
    elif mode == "credit":
        results[0].credit = 1.5
    return results


def main(key: str) -> int:
    """Download the job stored under `key` and run it; the process's exit code."""
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="fake-score-") as scratch:
        download_files(objects, key, Path(scratch), INPUT_FILES)
        return run(objects, key, Path(scratch))


def run(objects: ObjectStore, key: str, job_dir: Path) -> int:
    """Report every run of the job as `STASH_TEST_SCORING_WORKER` says; the process's exit code."""
    mode = os.environ.get(MODE_VARIABLE, "report")
    job = read_job(job_dir)
    print(f"fake scoring worker: {mode} {len(job.runs)} traces", file=sys.stderr, flush=True)
    if mode == "exit":
        print("the fake worker exits before reporting, on purpose", file=sys.stderr, flush=True)
        return 3
    if mode == "hold":
        deadline = time.monotonic() + HOLD_S
        while not objects.exists(f"{key}/{RELEASE_FILE}") and time.monotonic() < deadline:
            time.sleep(0.05)
    items = read_action_score_items(job_dir)
    stub = scorer_pb2_grpc.ScorerServiceStub(open_channel(job.scorer_address))
    for run in job.runs:
        own = [item for item in items if item.trace_id == run.trace_id]
        request = scorer_pb2.ReportScoringResultRequest(
            owner_id=run.owner_id,
            scoring_run_id=run.scoring_run_id,
            job_id=job.job_id,
            trace_id=run.trace_id,
            trace_revision=run.trace_revision,
        )
        if mode == "fail":
            request.status, request.error = common_pb2.JOB_STATUS_FAILED, "the fake worker failed on purpose"
        else:
            request.status = common_pb2.JOB_STATUS_SUCCEEDED
            request.action_scores.extend(action_results(mode, own))
            request.trace_score = sum(0.5 * (k + 1) for k in range(len(own)))
        try:
            stub.ReportScoringResult(request, timeout=30)
        except Exception as error:  # a refused result is what some tests expect; the service records why
            print(f"report refused: {error}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    follow_parent()  # as every worker does first
    raise SystemExit(main(sys.argv[-1]))  # argv: <kind> --job <key>
