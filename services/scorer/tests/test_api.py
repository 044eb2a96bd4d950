"""The ScorerService's messages: reports and training scores in, runs and scores out, statuses by enum."""

from datetime import UTC, datetime

import pytest

from stash.rm.v1 import common_pb2, scorer_pb2
from stash_common.errors import InvalidArgument
from stash_scorer import store
from stash_scorer.api import action_score_to_proto, report_from_proto, run_to_proto
from stash_scorer.publishing import ActionResult

WHEN = datetime(2025, 5, 1, 12, 30, tzinfo=UTC)


def _run(**fields: object) -> store.ScoringRunRow:
    values = {
        "id": "r",
        "owner_id": "o",
        "trace_id": "t",
        "trace_revision": 4,
        "reward_model_id": "m",
        "reward_model_name": "refunds",
        "artifact_key": "reward-models/o/m.tar.gz",
        "status": store.QUEUED,
        "explicit": True,
        "attempts": 0,
        "permanent": False,
        "created_at": WHEN,
        **fields,
    }
    return store.ScoringRunRow(**values)


def test_a_report_becomes_a_run_report_with_its_actions_and_optional_fields() -> None:
    request = scorer_pb2.ReportScoringResultRequest(
        owner_id="o",
        scoring_run_id="r",
        job_id="j",
        trace_id="t",
        trace_revision=4,
        status=common_pb2.JOB_STATUS_SUCCEEDED,
        action_scores=[scorer_pb2.ActionScoreResult(step_id="s", score=0.5, credit=-0.25)],
        trace_score=1.5,
    )

    report = report_from_proto(request)

    assert (report.succeeded, report.trace_revision, report.error, report.trace_score) == (True, 4, None, 1.5)
    assert report.actions == (ActionResult("s", 0.5, -0.25),)


@pytest.mark.parametrize("status", [common_pb2.JOB_STATUS_UNSPECIFIED, common_pb2.JOB_STATUS_QUEUED])
def test_only_a_finished_status_can_be_reported(status: int) -> None:
    request = scorer_pb2.ReportScoringResultRequest(owner_id="o", scoring_run_id="r", status=status)

    with pytest.raises(InvalidArgument, match="^status: must be JOB_STATUS_SUCCEEDED or JOB_STATUS_FAILED$"):
        report_from_proto(request)


def test_a_report_names_its_owner() -> None:
    with pytest.raises(InvalidArgument, match="^owner_id: "):
        report_from_proto(scorer_pb2.ReportScoringResultRequest(status=common_pb2.JOB_STATUS_FAILED))


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (store.QUEUED, common_pb2.JOB_STATUS_QUEUED),
        (store.RUNNING, common_pb2.JOB_STATUS_RUNNING),
        (store.SUCCEEDED, common_pb2.JOB_STATUS_SUCCEEDED),
        (store.FAILED, common_pb2.JOB_STATUS_FAILED),
    ],
)
def test_a_run_carries_its_status_as_the_enum(status: str, expected: int) -> None:
    assert run_to_proto(_run(status=status)).status == expected


def test_a_queued_run_leaves_its_error_and_later_times_unset() -> None:
    message = run_to_proto(_run())

    assert (message.id, message.trace_id, message.reward_model_id, message.trace_revision) == ("r", "t", "m", 4)
    assert message.created_at.ToDatetime(tzinfo=UTC) == WHEN
    assert not any(message.HasField(name) for name in ("error", "started_at", "finished_at"))


def test_an_action_score_carries_its_trace_and_step_index() -> None:
    row = store.ActionScoreRow(
        reward_model_id="m",
        step_id="s",
        owner_id="o",
        trace_id="t",
        step_index=6,
        reward_model_name="refunds",
        trace_revision=4,
        score=0.5,
        credit=0.25,
        scoring_run_id="r",
        created_at=WHEN,
    )

    message = action_score_to_proto(row)

    assert (message.trace_id, message.step_id, message.step_index, message.score, message.credit) == (
        "t",
        "s",
        6,
        0.5,
        0.25,
    )
    assert message.reward_model_name == "refunds"
