"""Whole scoring jobs: a real checkpoint from object storage, real gRPC reports, failures and the command line."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from stash.rm.v1 import common_pb2
from stash_common.errors import ResourceExhausted
from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.strategies import ActionScorer, ScoringModel, score_one_by_one
from stash_common.storage import ObjectStore
from stash_scorer.worker import scoring
from stash_scorer.worker.runner import run_job
from stash_scorer.worker.traces import TraceInput
from support.agent_traces import action_examples, conversation

from .conftest import ACTION_STATS, TRACES, JobWriter, Scorer, upload_checkpoint

SUCCEEDED, FAILED = common_pb2.JOB_STATUS_SUCCEEDED, common_pb2.JOB_STATUS_FAILED


def result_of(directory: Path) -> dict[str, object]:
    return json.loads((directory / "result.json").read_text())


def alone(checkpoint: Path, texts: list[str], max_length: int = 256) -> list[float]:
    """The reward of each text scored on its own: what every reported score must equal."""
    model, tokenizer = load_checkpoint(checkpoint, "cpu", max_length)
    return score_one_by_one(ScoringModel(model, tokenizer, "cpu", max_length, 1), [texts])[0]


def test_every_action_is_scored_with_its_credit_and_each_trace_reported_when_done(
    job_dir: JobWriter,
    scorer: Scorer,
    objects: ObjectStore,
    decoder_checkpoint: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upload_checkpoint(objects, decoder_checkpoint)
    directory = job_dir()
    real_score_traces = scoring.score_traces

    def recorded(
        model: ScoringModel, score_actions: ActionScorer, traces: Sequence[TraceInput]
    ) -> list[tuple[list[float], float | None]]:
        scorer.events.append(f"score {' '.join(trace.run.trace_id for trace in traces)}")
        return real_score_traces(model, score_actions, traces)

    monkeypatch.setattr(scoring, "score_traces", recorded)

    assert run_job(directory) == 0

    assert scorer.events == ["score t-long t-short", "report t-long", "report t-short"]  # one chunk, shared passes
    reports = scorer.by_trace()
    for trace_id, steps in TRACES.items():
        report = reports[trace_id]
        examples = action_examples(steps)
        assert (report.status, report.owner_id, report.job_id) == (SUCCEEDED, "owner-1", "job-1")
        assert (report.scoring_run_id, report.trace_revision) == (f"run-{trace_id}", 3)
        assert [action.step_id for action in report.action_scores] == [step_id for step_id, _ in examples]
        scores = [action.score for action in report.action_scores]
        assert all(math.isfinite(score) for score in scores)
        assert scores == pytest.approx(alone(decoder_checkpoint, [text for _, text in examples]), abs=1e-3)
        for action in report.action_scores:
            expected = math.tanh((action.score - ACTION_STATS["mean"]) / (2 * ACTION_STATS["std"]))
            assert action.credit == pytest.approx(expected) and -1 <= action.credit <= 1
        assert report.HasField("trace_score") and math.isfinite(report.trace_score)
    assert len(reports["t-long"].action_scores) == 24
    assert result_of(directory) == {"action_count": sum(len(action_examples(s)) for s in TRACES.values())}


def test_a_chunk_that_runs_out_of_memory_is_scored_trace_by_trace_and_only_the_trace_too_big_fails(
    job_dir: JobWriter,
    scorer: Scorer,
    objects: ObjectStore,
    decoder_checkpoint: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    upload_checkpoint(objects, decoder_checkpoint)
    real_score_traces = scoring.score_traces

    def out_of_memory_with_t_long(
        model: ScoringModel, score_actions: ActionScorer, traces: Sequence[TraceInput]
    ) -> list[tuple[list[float], float | None]]:
        if any(trace.run.trace_id == "t-long" for trace in traces):
            raise ResourceExhausted("the device ran out of memory")
        return real_score_traces(model, score_actions, traces)

    monkeypatch.setattr(scoring, "score_traces", out_of_memory_with_t_long)

    assert run_job(job_dir()) == 0

    reports = scorer.by_trace()
    assert (reports["t-long"].status, reports["t-long"].error) == (FAILED, "the device ran out of memory")
    assert reports["t-short"].status == SUCCEEDED and len(reports["t-short"].action_scores) > 0


def test_an_encoder_checkpoint_is_scored_in_sorted_batches(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore, encoder_checkpoint: Path
) -> None:
    upload_checkpoint(objects, encoder_checkpoint)
    steps = TRACES["t-short"]

    assert run_job(job_dir({"t-short": steps})) == 0

    report = scorer.by_trace()["t-short"]
    texts = [text for _, text in action_examples(steps)]
    assert report.status == SUCCEEDED
    assert [action.score for action in report.action_scores] == pytest.approx(
        alone(encoder_checkpoint, texts), abs=1e-4
    )


def test_a_missing_checkpoint_fails_every_run_permanently(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore
) -> None:
    directory = job_dir()

    assert run_job(directory) == 1

    reports = scorer.by_trace()
    assert set(reports) == set(TRACES)
    for report in reports.values():
        assert (report.status, report.permanent, list(report.action_scores)) == (FAILED, True, [])
        assert "checkpoint of reward model model-1 is missing from object storage" in report.error
    assert "missing from object storage" in str(result_of(directory)["error"])


def test_a_model_without_action_statistics_fails_every_run_permanently(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore, decoder_checkpoint: Path, tmp_path: Path
) -> None:
    bare = tmp_path / "bare" / "model"
    bare.mkdir(parents=True)
    for item in decoder_checkpoint.iterdir():
        if item.name != "action_reward_stats.json":
            (bare / item.name).write_bytes(item.read_bytes())
    upload_checkpoint(objects, bare)

    assert run_job(job_dir()) == 1

    reports = scorer.by_trace()
    assert {(report.status, report.permanent) for report in reports.values()} == {(FAILED, True)}
    assert all("has no action scoring" in report.error for report in reports.values())
    assert all("action_reward_stats.json" in report.error for report in reports.values())


def test_a_trace_without_actions_fails_alone(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore, decoder_checkpoint: Path
) -> None:
    upload_checkpoint(objects, decoder_checkpoint)
    silent = conversation("t-silent", 0, seed=3)

    assert run_job(job_dir({"t-silent": silent, "t-short": TRACES["t-short"]})) == 0

    reports = scorer.by_trace()
    assert (reports["t-silent"].status, reports["t-silent"].permanent) == (FAILED, True)
    assert "trace t-silent has no scorable action" in reports["t-silent"].error
    assert reports["t-short"].status == SUCCEEDED


def test_a_refused_report_does_not_stop_the_other_traces(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore, decoder_checkpoint: Path
) -> None:
    upload_checkpoint(objects, decoder_checkpoint)
    scorer.servicer.refused.add("t-long")
    directory = job_dir()

    assert run_job(directory) == 0

    assert [report.trace_id for report in scorer.servicer.reports] == ["t-long", "t-short"]
    assert "report of trace t-long not accepted: FAILED_PRECONDITION" in (directory / "worker.log").read_text()


def test_the_command_line_scores_a_job_in_its_own_process(
    job_dir: JobWriter, scorer: Scorer, objects: ObjectStore, decoder_checkpoint: Path
) -> None:
    upload_checkpoint(objects, decoder_checkpoint)
    directory = job_dir()

    done = subprocess.run(
        [sys.executable, "-m", "stash_common.jobs.worker", "score", str(directory)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "STASH_DATA_DIR": os.environ["STASH_DATA_DIR"]},
    )

    assert done.returncode == 0, done.stderr
    assert {report.status for report in scorer.servicer.reports} == {SUCCEEDED}
    assert "action_count" in result_of(directory)


def test_an_invalid_job_file_fails_with_the_field(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps({"kind": "score", "job_id": "j"}))

    assert run_job(tmp_path) == 1

    assert "job.json: reward_model_id: Field required" in str(result_of(tmp_path)["error"])
