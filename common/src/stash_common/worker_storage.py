"""What a worker needs to reach object storage, and the reward-model checkpoint it downloads from there.

Workers (scoring, GEPA) read the same variables as the services (STASH_DATA_DIR, STASH_S3_*,
STASH_SIGNING_KEY) and nothing else, so a Job on another machine needs only those and its job files.
The training worker stores a checkpoint's `model/` folder as a tar.gz (`store_checkpoint`); a worker
unpacks it into its own temporary workspace, which disappears with the job. Plain Python: a missing
archive fails the job before torch is imported.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_common.errors import FailedPrecondition, NotFound
from stash_common.settings import default_data_dir, shared
from stash_common.storage import ObjectStore, make_object_store

ARCHIVE_DIR = "model"  # the folder name inside the trainer's archive
# Weights barely compress (a MiniLM checkpoint by 8 % at gzip's best, for 4 s of CPU per 90 MB, and every
# reader paid 0.3 s more to inflate it): the archive stays gzip, as every reader expects, but stored as is.
ARCHIVE_COMPRESSLEVEL = 0


class WorkerStorageSettings(BaseSettings):
    """The object-storage settings of a worker (and of the gepa and scorer services, for their jobs' files)."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    data_dir: Path = Field(
        default_factory=default_data_dir,
        validation_alias="STASH_DATA_DIR",
        description="directory for the embedded profile's files (local artifacts)",
    )
    s3_bucket: str | None = shared("STASH_S3_BUCKET", None, "S3 bucket for checkpoints; unset: the local data dir")
    s3_endpoint_url: str | None = shared("STASH_S3_ENDPOINT_URL", None, "S3-compatible endpoint URL")
    s3_region: str | None = shared("STASH_S3_REGION", None, "S3 region")
    signing_key: str | None = shared("STASH_SIGNING_KEY", None, "secret that signs local download URLs")

    def object_store(self) -> ObjectStore:
        """The store holding the checkpoint archives."""
        # A worker only downloads: it never signs a URL, so the public URL of local downloads is moot.
        return make_object_store(
            self.data_dir, self.s3_bucket, self.s3_endpoint_url, self.s3_region, "", self.signing_key
        )


def fetch_checkpoint(objects: ObjectStore, reward_model_id: str, key: str, scratch: Path) -> Path:
    """Download and unpack reward model `reward_model_id`'s archive `key` under `scratch`; the checkpoint dir."""
    archive = scratch / "checkpoint.tar.gz"
    try:
        objects.download(key, archive)
    except NotFound as error:
        raise NotFound(
            f"the checkpoint of reward model {reward_model_id} is missing from object storage ({key}):"
            " train the model again"
        ) from error
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(scratch, filter="data")  # the data filter refuses paths that escape `scratch`
    archive.unlink()
    model_dir = scratch / ARCHIVE_DIR
    if not (model_dir / "config.json").is_file():
        raise FailedPrecondition(
            f"the checkpoint archive {key} holds no {ARCHIVE_DIR}/config.json: train the model again"
        )
    return model_dir


def store_checkpoint(objects: ObjectStore, key: str, model_dir: Path) -> None:
    """The checkpoint directory as a tar.gz (uncompressed gzip blocks) whose top folder is `model/`, stored
    under `key`."""
    with tempfile.TemporaryDirectory(prefix="stash-archive-") as scratch:
        archive = Path(scratch) / "model.tar.gz"
        with tarfile.open(archive, "w:gz", compresslevel=ARCHIVE_COMPRESSLEVEL) as tar:
            tar.add(model_dir, arcname=ARCHIVE_DIR)
        objects.put_file(key, archive)
