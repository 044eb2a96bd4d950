"""What the demo prints, piece by piece: numbers that say what they are, words for keys, progress when piped,
and the stage named when the gateway fails it."""

from __future__ import annotations

import io
from contextlib import closing

import pytest
from rich.console import Console

from stash_cli.client import ApiError, GatewayClient
from stash_cli.demo import DemoFailed, model_lines, show_model, signed, wait_for_evaluations, words
from stash_cli.waiting import Waiting
from stash_common.model_quality import model_quality
from stash_common.training_metrics import TRAINING_METRIC_KEYS
from support.processes import free_port

METRICS = {
    "train_pairs": 18,
    "eval_pairs": 3,
    "eval_accuracy": 2 / 3,
    "eval_split": "trace",
    "excluded_cross_trace_pairs": 1,
    "action_scoring_version": 1,
    "action_train_pairs": 18,
    "action_eval_pairs": 0,
    "action_eval_accuracy": None,
    "tool_eval_pairs": 0,
    "tool_eval_accuracy": None,
    "final_loss": 0.68191,
    "epochs": 1,
    "device": "cpu",
    "seconds": 26.4,
}


def test_a_signed_number_never_reads_negative_zero() -> None:
    assert [signed(value) for value in (0.351, -1.0, 0.0, -0.004, -0.0, None)] == [
        "+0.35",
        "−1.00",
        "0.00",
        "0.00",
        "0.00",
        "—",
    ]
    assert signed(-0.1234, 3) == "−0.123"


def test_the_models_metrics_are_words_with_the_samples_behind_them() -> None:
    assert set(METRICS) == TRAINING_METRIC_KEYS
    model = {"metrics": METRICS, "quality": model_quality(METRICS), "num_pairs": 21}

    lines = dict(model_lines(model))

    assert lines == {
        "Held-out accuracy": "too few held-out pairs to measure (3 held-out pairs; at least 10)",
        "Action accuracy": "not measured: no held-out action pairs",
        "Trained on": "18 pairs (18 compare two actions) of 21 built",
        "Held out": "3 pairs from whole traces the model never saw; 1 pair left out because they span both sides",
        "Final training loss": "0.6819 (chance is ln 2 = 0.693; Bradley–Terry, lower is better)",
        "Run": "1 epoch on cpu in 26 s",
    }
    assert words("partial_success") == "partial success"


def test_a_model_left_at_chance_prints_a_warning_and_a_learned_one_its_interval() -> None:
    stuck = {"name": "demo", "metrics": METRICS, "quality": model_quality(METRICS), "num_pairs": 21}
    learned_metrics = {**METRICS, "eval_pairs": 40, "eval_accuracy": 0.9, "final_loss": 0.2}
    learned = {**stuck, "metrics": learned_metrics, "quality": model_quality(learned_metrics)}

    shown = [_shown(model) for model in (stuck, learned)]

    assert "Warning: training did not move the loss off chance" in shown[0]
    assert "Warning" not in shown[1]
    assert "90 % of 40 held-out pairs scored the right way round (95 % interval 77 %–96 %)" in shown[1]


def _shown(model: dict[str, object]) -> str:
    output = io.StringIO()
    show_model(model, Console(file=output, width=200))
    return " ".join(output.getvalue().split())


def test_a_piped_wait_prints_what_it_waits_for_and_then_progress_lines() -> None:
    output = io.StringIO()
    console = Console(file=output, width=120)
    assert not console.is_terminal

    with Waiting(console, "Training", every_s=0.0) as wait:
        wait.update("step 1 of 3")
        wait.update("step 2 of 3")

    lines = output.getvalue().splitlines()
    assert lines[0] == "Training…"
    assert [line.split(" (")[0] for line in lines[1:]] == ["Training… step 1 of 3", "Training… step 2 of 3"]
    assert all(line.endswith(" s so far)") for line in lines[1:])


def test_a_gateway_gone_while_labeling_fails_the_demo_naming_the_stage() -> None:
    client = GatewayClient(f"http://127.0.0.1:{free_port()}", "demo-key", timeout_s=2)

    with closing(client), pytest.raises(DemoFailed) as failed:
        wait_for_evaluations(client, Console(file=io.StringIO()), ["trace-1"])

    assert failed.value.stage == "labeling the samples"
    assert str(failed.value).startswith("the demo failed while labeling the samples: cannot reach the gateway at")


def test_a_health_check_the_gateway_does_not_answer_is_the_api_error_a_stage_names() -> None:
    client = GatewayClient(f"http://127.0.0.1:{free_port()}", "demo-key", timeout_s=2)

    with closing(client), pytest.raises(ApiError, match="^cannot reach the gateway at http://127.0.0.1:"):
        client.health()
