"""Loading a checkpoint to score: the token window it was trained with decides how its inputs are cut."""

from pathlib import Path

from stash_common.reward_model.window import WINDOW_TOKENS, write_input_window
from stash_scorer.job_contract import ScoreJob, ScoreRun
from stash_scorer.worker.scoring import load_scoring_model
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
