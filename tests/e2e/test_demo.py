"""The main job (`stash-rm demo`) end to end on the embedded profile: import → label → train → score → skill.

GEPA's task and reflection models are the tests' stand-in OpenAI-compatible server, configured the way a
user configures the demo (`STASH_TASK_MODEL`, `STASH_TASK_API_BASE`, `STASH_REFLECTION_MODEL`).
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.llm_server import FakeLLM

from support.processes import stack_env, stash_rm

DEMO_TIMEOUT_S = 900


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


def test_the_main_job_imports_labels_trains_scores_and_writes_a_skill(tmp_path: Path, llm: FakeLLM) -> None:
    env = stack_env(
        tmp_path,
        STASH_TRAINER_DEVICE="cpu",
        STASH_TASK_MODEL="openai/stand-in-task",
        STASH_TASK_API_BASE=f"{llm.url}/v1",
        STASH_REFLECTION_MODEL="openai/stand-in-reflection",
        STASH_GEPA_REFLECTION_API_BASE=f"{llm.url}/v1",
        COLUMNS="200",
    )

    result = stash_rm("demo", env=env, timeout_s=DEMO_TIMEOUT_S)

    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout
    for expected in ("Imported", "Reward model demo reward model", "credits most and least", "Done."):
        assert expected in output, output
    assert f"Saved the best skill to {tmp_path / 'SKILL.md'}" in output.replace("\n", ""), output
    skill = (tmp_path / "SKILL.md").read_text()
    assert skill.startswith("---\nname: support-desk\ndescription: Use when a customer needs help")
    assert any(body["model"] == "stand-in-task" for _, body in llm.requests)
