"""The score job files the dispatcher writes, and why a run the worker never reported failed."""

from pathlib import Path

from stash_common.jobs.launch import JobEnd
from stash_common.rendering import render_example, render_trace, strip_marks
from stash_scorer.dispatcher import unreported_error, write_job_dir
from stash_scorer.inputs import ScorerTrace
from stash_scorer.job_contract import (
    ScoreJob,
    ScoreRun,
    read_action_score_items,
    read_job,
    read_score_items,
)
from support.steps import SUPPORT, build_steps

TRACE = ScorerTrace(id="t", owner_id="o", revision=2, steps=build_steps("t", SUPPORT))
JOB = ScoreJob(
    job_id="j",
    reward_model_id="m",
    reward_model_key="reward-models/o/m.tar.gz",
    scorer_address="127.0.0.1:1",
    runs=[ScoreRun(scoring_run_id="r", owner_id="o", trace_id="t", trace_revision=2)],
)


def test_the_job_directory_holds_the_job_and_every_eligible_action_rendered_as_in_training(tmp_path: Path) -> None:
    write_job_dir(tmp_path, JOB, [TRACE])

    assert read_job(tmp_path) == JOB
    items = read_action_score_items(tmp_path)
    assert [item.step_id for item in items] == ["t:2", "t:4", "t:6"]
    assert [item.text for item in items] == [render_example(TRACE.steps, index, sections=True) for index in (2, 4, 6)]
    assert strip_marks(items[0].text) == (
        'User: I want a refund for order 1182\n\nAssistant called lookup_order({"order_id": "1182"})'
    )
    assert [(item.trace_id, item.text) for item in read_score_items(tmp_path)] == [("t", render_trace(TRACE.steps))]


def test_a_worker_that_ends_early_is_named_by_how_it_ended() -> None:
    detail = "the worker exited with code -9; stash-score-j.log: MemoryError: out of memory"

    assert unreported_error(JobEnd(False, detail, -9)) == (
        f"the scoring worker ended before reporting this trace: {detail}"
    )
    assert unreported_error(JobEnd(True, exit_code=0)) == "the scoring worker ended before reporting this trace"
