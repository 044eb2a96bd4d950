"""GepaServicer: the GepaService API, published before its behaviour.

Every RPC is declared with its generated request and response types and answers UNIMPLEMENTED
with a message naming the RPC and the issue that builds it (issue 13), so the gateway and the
tests can be written against the API today and a caller learns why nothing happens. Raising
`stash_common.errors.Unimplemented` keeps the one interceptor in charge of turning it into a status.
"""

from __future__ import annotations

from typing import NoReturn

import grpc

from stash.rm.v1 import gepa_pb2, gepa_pb2_grpc
from stash_common.errors import Unimplemented


class GepaServicer(gepa_pb2_grpc.GepaServiceServicer):
    """GEPA runs that write a SKILL.md against a trained reward model, over gRPC; not built yet."""

    def CreateGepaRun(
        self, request: gepa_pb2.CreateGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.CreateGepaRunResponse:
        """Queue a GEPA run for one of the owner's succeeded reward models."""
        not_built("CreateGepaRun")

    def ListGepaRuns(
        self, request: gepa_pb2.ListGepaRunsRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.ListGepaRunsResponse:
        """The owner's GEPA runs, newest first."""
        not_built("ListGepaRuns")

    def GetGepaRun(
        self, request: gepa_pb2.GetGepaRunRequest, context: grpc.ServicerContext
    ) -> gepa_pb2.GetGepaRunResponse:
        """One GEPA run."""
        not_built("GetGepaRun")

    def GetSkill(self, request: gepa_pb2.GetSkillRequest, context: grpc.ServicerContext) -> gepa_pb2.GetSkillResponse:
        """The best skill of a succeeded run as a rendered SKILL.md."""
        not_built("GetSkill")


def not_built(rpc: str) -> NoReturn:
    """UNIMPLEMENTED for an RPC of the published API whose behaviour has not landed."""
    raise Unimplemented(
        f"GepaService.{rpc} is not built yet: writing a SKILL.md against a trained reward model arrives with issue 13"
    )
