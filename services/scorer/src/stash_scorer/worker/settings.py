"""ScoringWorkerSettings: where the worker finds the checkpoint archives (the object store the trainer fills).

The worker reads the same variables as the services (STASH_DATA_DIR, STASH_S3_*, STASH_SIGNING_KEY) and
nothing else, so a Job on another machine needs only those and the job directory.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from stash_common.settings import default_data_dir, shared
from stash_common.storage import ObjectStore, make_object_store


class ScoringWorkerSettings(BaseSettings):
    """The object-storage settings of a scoring worker."""

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
        # The worker only downloads: it never signs a URL, so the public URL of local downloads is moot.
        return make_object_store(
            self.data_dir, self.s3_bucket, self.s3_endpoint_url, self.s3_region, "", self.signing_key
        )
