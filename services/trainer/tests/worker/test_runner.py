"""Whole training jobs through the job directory: outputs, metrics, failures and the command line."""

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from stash_common.jobs.worker import main
from stash_common.rendering import render_example
from stash_common.reward_model.checkpoint import load_checkpoint
from stash_common.reward_model.inference import tokenize
from stash_common.reward_model.packaged import packaged_model_dir
from stash_common.reward_model.strategies import ScoringModel, score_in_one_pass
from stash_common.reward_model.window import WINDOW_TOKENS, read_input_window
from stash_common.steps import TraceStep
from stash_common.training_metrics import TRAINING_METRIC_KEYS
from stash_trainer.job_contract import TrainJob
from stash_trainer.worker import training
from stash_trainer.worker.pairs import Pair
from stash_trainer.worker.runner import PreparedJob, run_job, training_metrics
from stash_trainer.worker.split import TraceSplit
from stash_trainer.worker.stats import EvalReport

PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _mixed_pairs(make: Callable[[int, str, int], list[Pair]]) -> list[Pair]:
    """24 pairs over 12 traces: trace-level, response and tool-call comparisons, and one crossing pair."""
    kinds = [("trace", None), ("action", "response"), ("action", "tool_call")]
    pairs = [
        Pair(p.chosen, p.rejected, (f"trace-{n % 12}",), *kinds[n % 3]) for n, p in enumerate(make(23, "train", 0))
    ]
    return [*pairs, Pair(pairs[0].chosen, pairs[0].rejected, ("trace-0", "trace-1", "trace-2"), "trace")]


def test_training_metrics_and_seconds_are_exactly_the_shared_key_set() -> None:
    job = TrainJob(kind="train", base_model=PACKAGED_MODEL, epochs=1, max_pairs=2, seed=0)
    split = TraceSplit((Pair("a", "b", ("t1",), "trace"),), (), 0)
    prepared = PreparedJob(job, split, (), (), Path("model"))

    metrics = training_metrics(prepared, EvalReport(), 0, 0.5, "cpu")

    assert {*metrics, "seconds"} == TRAINING_METRIC_KEYS and "seconds" not in metrics


def test_training_job_writes_checkpoint_stats_scores_and_consistent_metrics(
    job_dir: Callable[..., Path], constraint_pairs: Callable[[int, str, int], list[Pair]]
) -> None:
    pairs = _mixed_pairs(constraint_pairs)
    directory = job_dir(
        {"base_model": PACKAGED_MODEL, "epochs": 1, "max_length": 64, "batch_size": 4, "seed": 3},
        pairs,
        score_items=[{"trace_id": "trace-1", "text": pairs[1].chosen}, {"trace_id": "trace-2", "text": "hi"}],
        action_score_items=[{"trace_id": "trace-1", "step_id": f"s{n}", "text": pairs[n].chosen} for n in range(4)],
    )
    progress: list[tuple[int, int, float]] = []

    assert run_job(directory, lambda *step: progress.append(step)) == 0

    metrics = json.loads((directory / "result.json").read_text())["metrics"]
    assert set(metrics) == TRAINING_METRIC_KEYS
    assert metrics["train_pairs"] + metrics["eval_pairs"] + metrics["excluded_cross_trace_pairs"] == 24
    assert metrics["eval_pairs"] > 0 and 0 <= metrics["eval_accuracy"] <= 1
    assert metrics["action_eval_pairs"] <= metrics["eval_pairs"]
    assert metrics["tool_eval_pairs"] <= metrics["action_eval_pairs"]
    assert (metrics["eval_split"], metrics["action_scoring_version"], metrics["epochs"]) == ("trace", 1, 1)
    assert metrics["action_train_pairs"] == sum(p.is_action for p in pairs) - metrics["action_eval_pairs"]
    assert math.isfinite(metrics["final_loss"]) and metrics["device"] == "cpu" and metrics["seconds"] > 0
    steps = math.ceil(metrics["train_pairs"] / 4)
    assert [step[:2] for step in progress] == [(step, steps) for step in range(1, steps + 1)]
    assert json.loads((directory / "progress.json").read_text()) == {
        "step": steps,
        "total_steps": steps,
        "loss": progress[-1][2],
    }
    _assert_checkpoint_trained(directory / "model")
    _assert_scores_written(directory)


def _assert_checkpoint_trained(model_dir: Path) -> None:
    saved, base = load_file(model_dir / "model.safetensors"), load_file(packaged_model_dir() / "model.safetensors")
    name = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(saved[f"bert.{name}"], base[name])
    assert json.loads((model_dir / "config.json").read_text())["pad_token_id"] == 0
    tokenizer_config = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert (tokenizer_config["truncation_side"], tokenizer_config["model_max_length"]) == ("left", 64)
    for stats_file in ("reward_stats.json", "action_reward_stats.json"):
        stats = json.loads((model_dir / stats_file).read_text())
        assert math.isfinite(stats["mean"]) and stats["std"] > 0


def _assert_scores_written(directory: Path) -> None:
    scores = _read_lines(directory / "scores.jsonl")
    assert [row["trace_id"] for row in scores] == ["trace-1", "trace-2"]
    assert all(math.isfinite(row["score"]) for row in scores)
    stats = json.loads((directory / "model" / "action_reward_stats.json").read_text())
    actions = _read_lines(directory / "action_scores.jsonl")
    assert [row["step_id"] for row in actions] == ["s0", "s1", "s2", "s3"]
    for row in actions:
        assert -1 <= row["credit"] <= 1
        assert row["credit"] == pytest.approx(math.tanh((row["score"] - stats["mean"]) / (2 * stats["std"])))


def test_decoder_job_on_one_trace_trains_on_everything_without_evaluation(
    job_dir: Callable[..., Path], constraint_pairs: Callable[[int, str, int], list[Pair]], tiny_decoder: Path
) -> None:
    pairs = [Pair(p.chosen, p.rejected, ("only",)) for p in constraint_pairs(6, "train", 0)]
    directory = job_dir(
        {"base_model": str(tiny_decoder), "epochs": 2, "max_length": 32},
        pairs,
        score_items=[{"trace_id": "only", "text": pairs[0].chosen}],
        action_score_items=[{"trace_id": "only", "step_id": "s1", "text": pairs[0].chosen}],
    )

    assert run_job(directory) == 0

    metrics = json.loads((directory / "result.json").read_text())["metrics"]
    assert (metrics["train_pairs"], metrics["eval_pairs"], metrics["eval_accuracy"]) == (6, 0, None)
    assert (metrics["action_scoring_version"], metrics["action_train_pairs"], metrics["tool_eval_accuracy"]) == (
        None,
        0,
        None,
    )
    config = json.loads((directory / "model" / "config.json").read_text())
    assert config["pad_token_id"] == config["eos_token_id"]
    assert len(_read_lines(directory / "scores.jsonl")) == 1
    assert not (directory / "model" / "action_reward_stats.json").exists()
    assert not (directory / "action_scores.jsonl").exists()


def test_a_diverged_run_fails_with_advice(
    job_dir: Callable[..., Path],
    constraint_pairs: Callable[[int, str, int], list[Pair]],
    tiny_decoder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(training, "train_reward_model", lambda *args: training.TrainOutcome(1, math.nan))
    directory = job_dir({"base_model": str(tiny_decoder), "epochs": 1}, constraint_pairs(4, "train", 0))

    assert run_job(directory) == 1

    error = json.loads((directory / "result.json").read_text())["error"]
    assert error == "training diverged: the training loss contains NaN or infinity; lower learning_rate and retry"


@pytest.fixture
def no_model_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every attempt to load a tokenizer or a model."""
    loads: list[str] = []
    for cls in (AutoModelForSequenceClassification, AutoTokenizer):
        monkeypatch.setattr(cls, "from_pretrained", lambda *a, _name=cls.__name__, **k: loads.append(_name))
    return loads


def test_fewer_than_two_pairs_fail_before_any_model_loads(
    job_dir: Callable[..., Path], constraint_pairs: Callable[[int, str, int], list[Pair]], no_model_loads: list[str]
) -> None:
    directory = job_dir({"base_model": PACKAGED_MODEL, "epochs": 1}, constraint_pairs(1, "train", 0))

    assert run_job(directory) == 1

    error = json.loads((directory / "result.json").read_text())["error"]
    assert "1 preference pair(s) but training needs at least 2" in error
    assert no_model_loads == []
    assert "needs at least 2" in (directory / "worker.log").read_text()


@pytest.mark.parametrize(
    ("job", "message"),
    [
        ({"base_model": PACKAGED_MODEL, "epochs": 0}, "job.json: epochs: Input should be greater than or equal to 1"),
        ({"base_model": "acme/not-downloaded", "epochs": 1}, "base_model: 'acme/not-downloaded' is unknown; allowed:"),
    ],
)
def test_invalid_jobs_fail_with_the_reason_before_any_model_loads(
    job_dir: Callable[..., Path],
    constraint_pairs: Callable[[int, str, int], list[Pair]],
    no_model_loads: list[str],
    job: dict[str, Any],
    message: str,
) -> None:
    directory = job_dir(job, constraint_pairs(4, "train", 0))

    assert run_job(directory) == 1

    assert message in json.loads((directory / "result.json").read_text())["error"]
    assert no_model_loads == []


def test_command_line_exits_non_zero_and_writes_the_error(
    job_dir: Callable[..., Path], constraint_pairs: Callable[[int, str, int], list[Pair]]
) -> None:
    directory = job_dir({"base_model": PACKAGED_MODEL, "epochs": 1}, [])

    done = subprocess.run(
        [sys.executable, "-m", "stash_common.jobs.worker", "train", str(directory)], capture_output=True
    )

    assert done.returncode == 1
    assert "0 preference pair(s)" in json.loads((directory / "result.json").read_text())["error"]


def test_command_line_runs_offline(
    job_dir: Callable[..., Path],
    constraint_pairs: Callable[[int, str, int], list[Pair]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)

    assert (
        main(["train", str(job_dir({"base_model": PACKAGED_MODEL, "epochs": 1}, constraint_pairs(1, "train", 0)))]) == 1
    )

    assert os.environ["HF_HUB_OFFLINE"] == "1"


def _sectioned_example(request: str, answer: str, filler_words: int) -> str:
    """An input version 3 example: the request, a tool result longer than the window, then the answer."""
    steps = (
        TraceStep("u", 0, "user", request),
        TraceStep("c", 1, "assistant", "", "lookup_order", {"order": 1}),
        TraceStep("r", 2, "tool", "delivered " * filler_words, "lookup_order"),
        TraceStep("a", 3, "assistant", answer),
    )
    return render_example(steps, 3, sections=True)


def test_an_input_version_3_job_trains_and_scores_in_the_sectioned_window(
    job_dir: Callable[..., Path], constraint_pairs: Callable[[int, str, int], list[Pair]], tiny_decoder: Path
) -> None:
    pairs = []
    for number, pair in enumerate(constraint_pairs(8, "train", 0)):
        request, chosen = pair.chosen.removeprefix("user: ").split("\nassistant: ")
        rejected = pair.rejected.split("\nassistant: ")[1]
        texts = (_sectioned_example(request, answer, 5000) for answer in (chosen, rejected))
        pairs.append(Pair(*texts, (f"trace-{number % 4}",), "action", "response"))
    items = [{"trace_id": "trace-0", "step_id": f"s{n}", "text": pairs[n].chosen} for n in range(2)]
    directory = job_dir(
        {"base_model": str(tiny_decoder), "epochs": 1, "max_length": 32, "batch_size": 4, "input_version": 3},
        pairs,
        action_score_items=items,
    )

    assert run_job(directory) == 0

    model_dir = directory / "model"
    assert read_input_window(model_dir) == WINDOW_TOKENS
    assert json.loads((model_dir / "tokenizer_config.json").read_text())["model_max_length"] == WINDOW_TOKENS
    # The scorer reads the checkpoint back and scores the same examples the same way (the request kept, the
    # 5,000-word tool result cut to its budget), not with the job's 32-token left truncation.
    model, tokenizer = load_checkpoint(model_dir, "cpu", WINDOW_TOKENS)
    scoring = ScoringModel(model, tokenizer, "cpu", tokenizer.model_max_length, 4, sectioned=True)
    written = [row["score"] for row in _read_lines(directory / "action_scores.jsonl")]
    assert score_in_one_pass(scoring, [[item["text"] for item in items]])[0] == pytest.approx(written, abs=1e-4)
    read = tokenize(tokenizer, [items[0]["text"]], WINDOW_TOKENS, sectioned=True)[0]
    assert len(read) == WINDOW_TOKENS and "Hello" in tokenizer.decode(read[:8])
