"""A training job launched by the trainer: inputs from object storage, progress and result over gRPC.

The worker downloads the job's files (`INPUT_FILES`) from under its key into its own scratch
directory, trains there (`run_job`), uploads the checkpoint archive to the key `job.json` names and
its outputs (`OUTPUT_FILES`) beside the inputs, and reports to `TrainerService`: each optimizer step
through `ReportJobProgress` (at most every PROGRESS_INTERVAL_S), the end through `CompleteJob`. The
scratch directory disappears with the job; the trainer never sees it.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
import orjson
from google.protobuf import struct_pb2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from stash.rm.v1 import common_pb2, trainer_pb2, trainer_pb2_grpc
from stash_common.channels import open_channel
from stash_common.errors import FailedPrecondition, InvalidArgument, StashError
from stash_common.jobs.files import describe
from stash_common.jobs.reports import REPORT_TIMEOUT_S, send_report
from stash_common.jobs.transfer import download_files, upload_files
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings, store_checkpoint
from stash_trainer import job_contract as contract
from stash_trainer.worker.runner import run_job

LOG = logging.getLogger(__name__)
PROGRESS_INTERVAL_S = 2.0


class ReportTo(BaseModel):
    """The keys of `job.json` that say which launch this is, where it reports, and where the checkpoint goes."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    job_id: str = Field(min_length=1)
    owner_id: str = Field(min_length=1)
    reward_model_id: str = Field(min_length=1)
    archive_key: str = Field(min_length=1)
    report_address: str = Field(min_length=1)


def run_stored_job(key: str) -> int:
    """Run the training job stored under `key`; 0 when it succeeded and the trainer recorded it, else 1."""
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="stash-train-") as scratch:
        job_dir = Path(scratch)
        try:
            download_files(objects, key, job_dir, contract.INPUT_FILES)
            target = read_report_to(job_dir)
        except StashError as error:
            LOG.error("training job %s cannot start: %s", key, error.message)
            return 1
        with TrainerReports(target) as reports:
            code = run_job(job_dir, reports.progress)
            try:
                outcome = _outcome(job_dir, code)
                if outcome.succeeded:
                    store_checkpoint(objects, target.archive_key, job_dir / contract.MODEL_DIR)
                upload_files(objects, key, job_dir, contract.OUTPUT_FILES)
            except StashError as error:
                outcome = _Outcome(False, error=f"uploading the training outputs failed: {error.message}")
            try:
                reports.complete(outcome)
            except grpc.RpcError:
                return 1  # the trainer fails the model when this worker ends unreported
    return 0 if outcome.succeeded else 1


def read_report_to(job_dir: Path) -> ReportTo:
    """The launch and report keys of `job.json`."""
    path = job_dir / contract.JOB_FILE
    if not path.is_file():
        raise FailedPrecondition(f"{contract.JOB_FILE} is missing from the job's files in object storage")
    try:
        return ReportTo.model_validate_json(path.read_bytes())
    except ValidationError as error:
        raise InvalidArgument(contract.JOB_FILE, describe(error)) from error


@dataclass(frozen=True)
class _Outcome:
    """How the training ended: its metrics, or its error."""

    succeeded: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def _outcome(job_dir: Path, code: int) -> _Outcome:
    result = orjson.loads((job_dir / contract.RESULT_FILE).read_bytes())  # run_job always writes it
    if code == 0 and "metrics" in result:
        return _Outcome(True, metrics=result["metrics"])
    return _Outcome(False, error=str(result.get("error") or f"the training worker exited with code {code}"))


class TrainerReports:
    """Progress and the result of one training job, sent to the trainer that launched it."""

    def __init__(self, target: ReportTo) -> None:
        self.target = target
        self._channel = open_channel(target.report_address, wait_for_ready=True)
        self._stub = trainer_pb2_grpc.TrainerServiceStub(self._channel)
        self._last_sent = -math.inf

    def __enter__(self) -> TrainerReports:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._channel.close()

    def progress(self, step: int, total: int, loss: float) -> None:
        """Report a step, unless one was sent within PROGRESS_INTERVAL_S (the last step is always sent)."""
        now = time.monotonic()
        if now - self._last_sent < PROGRESS_INTERVAL_S and step != total:
            return
        self._last_sent = now
        progress = struct_pb2.Struct()
        progress.update({"step": step, "total_steps": total, "loss": loss if math.isfinite(loss) else None})
        target = self.target
        request = trainer_pb2.ReportJobProgressRequest(
            owner_id=target.owner_id, reward_model_id=target.reward_model_id, job_id=target.job_id, progress=progress
        )
        try:
            self._stub.ReportJobProgress(request, timeout=REPORT_TIMEOUT_S)
        except grpc.RpcError as error:  # progress is informative: training goes on
            LOG.warning("progress not reported: %s %s", error.code().name, error.details())

    def complete(self, outcome: _Outcome) -> None:
        """Report the end of the job; the trainer's refusal, or its absence after retries, is raised."""
        target = self.target
        request = trainer_pb2.CompleteJobRequest(
            owner_id=target.owner_id, reward_model_id=target.reward_model_id, job_id=target.job_id
        )
        if outcome.succeeded:
            request.status, request.artifact_key = common_pb2.JOB_STATUS_SUCCEEDED, target.archive_key
            request.metrics.update(outcome.metrics)
        else:
            request.status, request.error = common_pb2.JOB_STATUS_FAILED, outcome.error
        send_report(lambda: self._stub.CompleteJob(request, timeout=REPORT_TIMEOUT_S), "the training result")
