"""ScorerServicer: the ScorerService API, published before its behaviour.

Every RPC is declared with its generated request and response types and answers UNIMPLEMENTED
with a message naming the RPC and the issue that builds it (issue 12), so the gateway and the
tests can be written against the API today and a caller learns why nothing happens. Raising
`stash_common.errors.Unimplemented` keeps the one interceptor in charge of turning it into a status.
"""

from __future__ import annotations

from typing import NoReturn

import grpc

from stash.rm.v1 import scorer_pb2, scorer_pb2_grpc
from stash_common.errors import Unimplemented


class ScorerServicer(scorer_pb2_grpc.ScorerServiceServicer):
    """Scores of every action of a trace from a trained reward model, over gRPC; not built yet."""

    def ScoreTrace(
        self, request: scorer_pb2.ScoreTraceRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ScoreTraceResponse:
        """Queue scoring of a trace with a reward model."""
        not_built("ScoreTrace")

    def ListTraceScores(
        self, request: scorer_pb2.ListTraceScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListTraceScoresResponse:
        """A trace's latest raw score per reward model."""
        not_built("ListTraceScores")

    def ListActionScores(
        self, request: scorer_pb2.ListActionScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListActionScoresResponse:
        """A trace's latest action scores per reward model."""
        not_built("ListActionScores")

    def ListScoringRuns(
        self, request: scorer_pb2.ListScoringRunsRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ListScoringRunsResponse:
        """A trace's latest scoring run per reward model."""
        not_built("ListScoringRuns")

    def GetScoringRun(
        self, request: scorer_pb2.GetScoringRunRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.GetScoringRunResponse:
        """One scoring run."""
        not_built("GetScoringRun")

    def BatchGetLatestScores(
        self, request: scorer_pb2.BatchGetLatestScoresRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.BatchGetLatestScoresResponse:
        """The latest score of several traces."""
        not_built("BatchGetLatestScores")

    def ReportScoringResult(
        self, request: scorer_pb2.ReportScoringResultRequest, context: grpc.ServicerContext
    ) -> scorer_pb2.ReportScoringResultResponse:
        """Publish a scoring job's result for one trace."""
        not_built("ReportScoringResult")


def not_built(rpc: str) -> NoReturn:
    """UNIMPLEMENTED for an RPC of the published API whose behaviour has not landed."""
    raise Unimplemented(
        f"ScorerService.{rpc} is not built yet: scoring with a trained reward model arrives with issue 12"
    )
