"""Loading a checkpoint to score, and scoring traces: a whole text shares its actions' passes, scores unchanged."""

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from stash_common.rendering import render_example, render_trace
from stash_common.reward_model import inference
from stash_common.reward_model.window import WINDOW_TOKENS, write_input_window
from stash_common.steps import TraceStep
from stash_scorer.job_contract import ActionScoreItem, ScoreJob, ScoreRun
from stash_scorer.worker.scoring import load_scoring_model, score_traces
from stash_scorer.worker.traces import TraceInput
from support.agent_traces import conversation, corpus
from support.reward_models import save_tiny_qwen3, word_tokenizer

JOB = ScoreJob(
    job_id="j",
    reward_model_id="m",
    reward_model_key="reward-models/o/m.tar.gz",
    max_length=64,
    scorer_address="127.0.0.1:1",
    runs=[ScoreRun(scoring_run_id="r", owner_id="o", trace_id="t", trace_revision=1)],
)


def test_an_input_version_3_checkpoint_scores_in_its_window_and_a_legacy_one_in_the_job_s_limit(
    tmp_path: Path,
) -> None:
    model_dir = save_tiny_qwen3(tmp_path / "model", word_tokenizer(corpus(conversation("t", 4, seed=1))))

    legacy, _ = load_scoring_model(model_dir, JOB)
    write_input_window(model_dir)
    sectioned, _ = load_scoring_model(model_dir, JOB)

    assert (legacy.max_length, legacy.sectioned) == (64, False)
    assert (sectioned.max_length, sectioned.sectioned) == (WINDOW_TOKENS, True)


# Ends after a tool result, after a user turn, and with an action (its whole text is that action's example).
WHOLE_TEXT_TRACES = {
    "t-tool": conversation("t-tool", 5, seed=2),
    "t-user": conversation("t-user", 24, seed=1),
    "t-action": conversation("t-action", 7, seed=3),
}


def trace_input(trace_id: str, steps: tuple[TraceStep, ...]) -> TraceInput:
    """A trace as the dispatcher writes it: section-marked action examples and the whole text."""
    actions = tuple(
        ActionScoreItem(trace_id=trace_id, step_id=step.id, text=render_example(steps, step.index, sections=True))
        for step in steps
        if step.is_action
    )
    run = ScoreRun(scoring_run_id=f"run-{trace_id}", owner_id="o", trace_id=trace_id, trace_revision=1)
    return TraceInput(run, actions, render_trace(steps))


@pytest.mark.parametrize("max_length", [64, 256])
@pytest.mark.parametrize("checkpoint", ["encoder_checkpoint", "decoder_checkpoint"])
def test_whole_texts_scored_with_their_actions_equal_actions_and_texts_scored_apart(
    checkpoint: str, max_length: int, request: pytest.FixtureRequest
) -> None:
    scoring, score_actions = load_scoring_model(request.getfixturevalue(checkpoint), job_of(max_length))
    traces = [trace_input(trace_id, steps) for trace_id, steps in WHOLE_TEXT_TRACES.items()]

    together = score_traces(scoring, score_actions, traces)

    for trace, (actions, trace_score) in zip(traces, together, strict=True):
        apart = score_actions(scoring, [[item.text for item in trace.actions]])[0]
        assert actions == pytest.approx(apart, abs=1e-5)
        assert trace_score == pytest.approx(scoring.score_texts([trace.trace_text or ""], batch_size=1)[0], abs=1e-5)


def test_an_encoder_reads_a_whole_text_equal_to_its_last_action_s_example_once(
    encoder_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scoring, score_actions = load_scoring_model(encoder_checkpoint, job_of(256))
    traces = [trace_input(trace_id, steps) for trace_id, steps in WHOLE_TEXT_TRACES.items()]
    rows: list[int] = []
    real_collate = inference.collate

    def counted(sequences: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
        rows.append(len(sequences))
        return real_collate(sequences, pad_id, device)

    monkeypatch.setattr(inference, "collate", counted)

    score_traces(scoring, score_actions, traces)

    assert sum(rows) == sum(len(trace.actions) for trace in traces) + 2  # t-action's whole text adds no row


def job_of(max_length: int) -> ScoreJob:
    return JOB.model_copy(update={"max_length": max_length})
