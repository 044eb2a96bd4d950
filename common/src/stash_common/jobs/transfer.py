"""A job's files in object storage: the service uploads its inputs, the worker brings them into its scratch space.

Workers share no filesystem with services, in either profile. The service writes a job's files
(`job.json` and its JSONL) into a temporary directory and uploads them under the job's key,
`jobs/<service>/<job id>/`; the worker (`python -m <module> --job <key>`) downloads them into its
own scratch directory, runs there, uploads its outputs (result, scores) under the same key, and
reports progress and its result to the owning service over gRPC (`stash_common.jobs.reports`). When
the job has ended the service deletes the job's files. No gRPC here: the services' job policies use it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from pathlib import Path

from stash_common.errors import NotFound
from stash_common.storage import ObjectStore

LOG = logging.getLogger(__name__)


def job_key(service: str, job_id: str) -> str:
    """Where job `job_id` of `service` keeps its files in object storage."""
    return f"jobs/{service}/{job_id}"


def upload_files(objects: ObjectStore, key: str, folder: Path, names: Collection[str]) -> None:
    """Store each of `names` that exists in `folder` under `key`."""
    for name in names:
        if (folder / name).is_file():
            objects.put_file(f"{key}/{name}", folder / name)


def download_files(objects: ObjectStore, key: str, folder: Path, names: Collection[str]) -> list[str]:
    """Download each of `names` stored under `key` into `folder`; the names that were there."""
    found = []
    for name in names:
        try:
            objects.download(f"{key}/{name}", folder / name)
        except NotFound:
            continue  # the reader of the file says whether it may be absent
        found.append(name)
    return found


def delete_files(objects: ObjectStore, key: str, names: Collection[str]) -> None:
    """Remove the job's files (inputs and outputs) once it has ended; a failure is logged, not raised."""
    for name in names:
        try:
            objects.delete(f"{key}/{name}")
        except Exception:  # leftover job files cost storage, not correctness
            LOG.warning("could not delete job file %s/%s", key, name, exc_info=True)
