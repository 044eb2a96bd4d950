"""A worker's reports to the service that launched it: one gRPC call, retried while the service is out of reach.

A worker reports its progress and its result over gRPC (its inputs and outputs travel through object
storage, `stash_common.jobs.transfer`). A replica that restarts or a Service that is briefly without
endpoints is retried a few times; a refusal (a superseded launch, an invalid result) is not.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

LOG = logging.getLogger(__name__)
REPORT_TIMEOUT_S = 30.0
RETRY_DELAYS_S = (0.5, 1.0, 2.0, 4.0)  # after each failed attempt to reach the service
RETRIED_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
Response = TypeVar("Response")


def send_report(send: Callable[[], Response], what: str) -> Response:
    """`send()`, retried while the service is out of reach; a refusal, or the last attempt's error, is raised."""
    for delay in RETRY_DELAYS_S:
        try:
            return send()
        except grpc.RpcError as error:
            if error.code() not in RETRIED_CODES:
                LOG.error("%s not accepted: %s %s", what, error.code().name, error.details())
                raise
            LOG.warning("%s: the service is out of reach (%s); retrying", what, error.code().name)
        time.sleep(delay)
    return send()
