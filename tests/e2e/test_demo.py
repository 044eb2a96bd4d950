"""The main job (`stash-rm demo`) end to end on the embedded profile: import → label → train → score → skill.

GEPA's task and reflection models are the tests' stand-in OpenAI-compatible server, configured the way a
user configures the demo (`STASH_TASK_MODEL`, `STASH_TASK_API_BASE`, `STASH_REFLECTION_MODEL`). The demo
runs as CI runs it: its output captured, no terminal and no COLUMNS, so what is asserted is what a log shows.
"""

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.llm_server import FakeLLM

from stash_cli.practice import PRACTICE_TRACES
from support.processes import stack_env, stash_rm
from support.stack import running_stack

DEMO_TIMEOUT_S = 900
SAMPLE_TRACES = 7 + PRACTICE_TRACES
SNAKE_CASE_KEYS = ("eval_accuracy", "train_pairs", "final_loss", "excluded_cross_trace_pairs", "partial_success")


def _stand_in(path: str, body: dict[str, Any]) -> str:
    prompt = body["messages"][-1]["content"]
    if body["model"] != "stand-in-reflection":
        return "Done: I looked it up and here is the answer."
    if prompt.startswith("You name a skill"):
        return '{"name": "support-desk", "description": "Use when a customer needs help with an order or a trip."}'
    return "# Helping customers\n\n1. Look the facts up with a tool first.\n2. Answer in one short paragraph."


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    fake.reply = _stand_in
    yield fake
    fake.stop()


def _demo_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = stack_env(data_dir, STASH_TRAINER_DEVICE="cpu", **extra)
    env.pop("COLUMNS", None)  # as in CI: rich has no terminal to measure
    return env


def _processes_of(data_dir: Path) -> list[int]:
    """Every process started for this data directory (the services and their workers inherit its variable)."""
    marker = f"STASH_DATA_DIR={data_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue  # it ended meanwhile, or is not ours to read
    return [pid for pid in found if pid != os.getpid()]


# Two demos and a stack start, each demo allowed DEMO_TIMEOUT_S: the suite's 300 s would stop the second on a
# loaded machine.
@pytest.mark.timeout(2 * DEMO_TIMEOUT_S + 120)
def test_the_main_job_imports_labels_trains_scores_writes_a_skill_and_says_where_to_look(
    tmp_path: Path, llm: FakeLLM
) -> None:
    env = _demo_env(
        tmp_path,
        STASH_TASK_MODEL="openai/stand-in-task",
        STASH_TASK_API_BASE=f"{llm.url}/v1",
        STASH_REFLECTION_MODEL="openai/stand-in-reflection",
        STASH_GEPA_REFLECTION_API_BASE=f"{llm.url}/v1",
    )

    first = stash_rm("demo", env=env, timeout_s=DEMO_TIMEOUT_S)

    assert first.returncode == 0, first.stdout + first.stderr
    output = first.stdout
    for expected in (
        "Imported 2 anthropic messages trace(s) from coding.anthropic.jsonl as coding",
        "automatic trace score",
        "What's the weather in Lisbon right now? I'm deciding whether to pack a jacket.",
        "Please change the delivery address of order 4410 to 12 Harbour Street, Bristol.",
        "Labeling and scoring every step…",
        "Training a reward model on the samples…",
        "Held-out accuracy",
        f"Imported {PRACTICE_TRACES} synthetic practice traces",
        "held-out pairs scored the right way round (95 % interval",
        "(chance is ln 2 = 0.693; Bradley–Terry, lower is better)",
        "credits most and least, of ",
        "credit (−1…+1)",
        "raw score",
        f"stash-rm up --data-dir {tmp_path}",
        f"then open {env_url(env)}/ and sign in",
        f"The SKILL.md GEPA wrote is at {tmp_path / 'SKILL.md'}",
        "Done.",
    ):
        assert expected in output, f"{expected!r} not in:\n{output}"
    assert not any(key in output for key in SNAKE_CASE_KEYS), output
    assert "Warning" not in output and "too few held-out pairs" not in output, output
    assert not re.search(r"[-−]0\.0+(?![0-9])", output), output  # no negative zero
    skill = (tmp_path / "SKILL.md").read_text()
    assert skill.startswith("---\nname: support-desk\ndescription: Use when a customer needs help")
    assert any(body["model"] == "stand-in-task" for _, body in llm.requests)

    second = stash_rm("demo", env=env, timeout_s=DEMO_TIMEOUT_S)

    assert second.returncode == 0, second.stdout + second.stderr
    assert "Replaced the earlier run's demo reward model (1 GEPA run(s) with it)." in second.stdout
    key = re.search(r"full access\):\s+(\S+)", second.stdout)
    assert key is not None, second.stdout
    _assert_one_of_each(env, tmp_path, key.group(1))


def env_url(env: dict[str, str]) -> str:
    return f"http://127.0.0.1:{env['STASH_GATEWAY_PORT']}"


def _assert_one_of_each(env: dict[str, str], data_dir: Path, key: str) -> None:
    """What two demos left, seen through `stash-rm up` on their data directory: the samples, one key, one model
    and one GEPA run, never two."""
    with running_stack(data_dir) as stack, stack.client(key) as client:
        traces = client.get("/traces", params={"limit": 500}).json()
        keys = client.get("/keys").json()
        models = client.get("/reward-models").json()
        runs = client.get("/gepa-runs").json()
    assert traces["total"] == SAMPLE_TRACES, traces
    assert [item["name"] for item in keys] == ["demo"]
    assert [(model["name"], model["status"]) for model in models] == [("demo reward model", "succeeded")]
    # It learned, and says so honestly: loss well below chance, a held-out interval above a coin toss.
    quality, metrics = models[0]["quality"], models[0]["metrics"]
    assert quality["loss"]["moved"] and metrics["final_loss"] < 0.5, metrics
    assert quality["eval"]["measured"] and quality["eval"]["interval"][0] > 0.5, quality["eval"]
    assert (models[0]["epochs"], models[0]["max_pairs"]) == (1, 4000)  # the API's defaults
    assert [(run["reward_model_id"], run["status"]) for run in runs] == [(models[0]["id"], "succeeded")]


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_a_failed_stage_exits_non_zero_naming_it_and_leaves_nothing_running(tmp_path: Path) -> None:
    env = _demo_env(tmp_path, STASH_TRAINER_BASE_MODEL=str(tmp_path / "no-such-model"))

    result = stash_rm("demo", env=env, timeout_s=DEMO_TIMEOUT_S)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: the demo failed while training the reward model:" in " ".join(result.stderr.split())
    assert "no-such-model" in result.stderr
    assert "Done." not in result.stdout
    assert _processes_of(tmp_path) == []
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{env_url(env)}/healthz", timeout=2)
