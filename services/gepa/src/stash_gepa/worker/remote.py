"""A GEPA job launched by the gepa service: inputs and result in object storage, reports over gRPC.

The worker downloads the job's files (`INPUT_FILES`) from under its key into its own scratch
directory, optimises there (`run_job`), uploads `result.json` beside the inputs, and reports to
`GepaService`: the metric calls used whenever GEPA spends budget (`ReportGepaProgress`), the
end (`CompleteGepaJob`, which names only the job: the service reads the stored `result.json`). The
scratch directory disappears with the job.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from types import TracebackType

import grpc

from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc
from stash_common.channels import open_channel
from stash_common.errors import StashError
from stash_common.jobs.reports import REPORT_TIMEOUT_S, send_report
from stash_common.jobs.transfer import download_files, upload_files
from stash_common.settings import load
from stash_common.worker_storage import WorkerStorageSettings
from stash_gepa.job_contract import INPUT_FILES, OUTPUT_FILES, GepaJob, read_job
from stash_gepa.worker.runner import run_job

LOG = logging.getLogger(__name__)


def run_stored_job(key: str) -> int:
    """Run the GEPA job stored under `key`; 0 when it succeeded and the service recorded it, else 1."""
    objects = load(WorkerStorageSettings).object_store()
    with tempfile.TemporaryDirectory(prefix="stash-gepa-") as scratch:
        job_dir = Path(scratch)
        try:
            download_files(objects, key, job_dir, INPUT_FILES)
            job = read_job(job_dir)
        except StashError as error:
            LOG.error("GEPA job %s cannot start: %s", key, error.message)
            return 1
        with GepaReports(job) as reports:
            code = run_job(job_dir, reports.progress)  # it always writes result.json
            try:
                upload_files(objects, key, job_dir, OUTPUT_FILES)
                reports.complete()
            except (StashError, grpc.RpcError):
                return 1  # the service fails the run when this worker ends unreported
    return code


class GepaReports:
    """Progress and the result of one GEPA job, sent to the service that launched it."""

    def __init__(self, job: GepaJob) -> None:
        self.job = job
        self._channel = open_channel(job.report_address, wait_for_ready=True)
        self._stub = gepa_pb2_grpc.GepaServiceStub(self._channel)

    def __enter__(self) -> GepaReports:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._channel.close()

    def progress(self, metric_calls_used: int) -> None:
        """Report the budget spent; a failed report is logged and optimisation goes on."""
        request = gepa_pb2.ReportGepaProgressRequest(
            owner_id=self.job.owner_id,
            gepa_run_id=self.job.gepa_run_id,
            job_id=self.job.job_id,
            metric_calls_used=metric_calls_used,
        )
        try:
            self._stub.ReportGepaProgress(request, timeout=REPORT_TIMEOUT_S)
        except grpc.RpcError as error:
            LOG.warning("progress not reported: %s %s", error.code().name, error.details())

    def complete(self) -> None:
        """Report that the job ended, its `result.json` stored; the refusal, or the absence after retries, is raised."""
        request = gepa_pb2.CompleteGepaJobRequest(
            owner_id=self.job.owner_id, gepa_run_id=self.job.gepa_run_id, job_id=self.job.job_id
        )
        send_report(lambda: self._stub.CompleteGepaJob(request, timeout=REPORT_TIMEOUT_S), "the GEPA result")
