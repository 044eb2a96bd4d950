"""SkillAdapter with a counting metric: what GEPA gets back for a batch, and what reflection reads."""

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from fakes.llm_server import FakeLLM

from stash_gepa.job_contract import GepaExample, Message
from stash_gepa.worker.adapter import SkillAdapter
from stash_gepa.worker.models import ChatModel
from stash_gepa.worker.skill import COMPONENT, SkillIdentity

IDENTITY = SkillIdentity(name="refunds", description="Use for refunds.")


class LengthMetric:
    """Scores a conversation by its length; remembers every call."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def scores(self, conversations: Sequence[str]) -> list[float]:
        self.calls.append(list(conversations))
        return [min(1.0, len(text) / 1000) for text in conversations]


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    fake = FakeLLM().start()
    fake.reply = lambda _path, body: "Refund approved." if "be generous" in body["messages"][0]["content"] else "No."
    fake.status_of = lambda _path, body: 400 if "order 3" in body["messages"][-1]["content"] else None
    yield fake
    fake.stop()


def _example(number: int) -> GepaExample:
    return GepaExample(
        trace_id=f"t{number}",
        system=None,
        messages=[Message(role="user", content=f"Refund order {number}?")],
        feedback=[f"A reviewer commented on the whole trace: note {number}"],
    )


def _adapter(llm: FakeLLM, metric: Any) -> SkillAdapter:
    task = ChatModel("task", "openai/task", f"{llm.url}/v1", "task_model")
    reflection = ChatModel("reflection", "openai/reflect", f"{llm.url}/v1", "reflection_model")
    return SkillAdapter(IDENTITY, task, reflection, metric, concurrency=4)


def test_the_answered_examples_are_scored_in_one_call_and_a_failed_one_scores_zero(llm: FakeLLM) -> None:
    metric = LengthMetric()
    adapter = _adapter(llm, metric)

    batch = adapter.evaluate([_example(1), _example(2), _example(3)], {COMPONENT: "be generous"}, capture_traces=True)

    assert metric.calls == [
        ["User: Refund order 1?\n\nAssistant: Refund approved.", "User: Refund order 2?\n\nAssistant: Refund approved."]
    ]
    assert batch.outputs == ["Refund approved.", "Refund approved.", ""]
    assert batch.scores[2] == 0.0 and batch.scores[0] == batch.scores[1] > 0
    assert list(adapter.failures) == ["t3"] and "BadRequestError" in adapter.failures["t3"]
    assert batch.trajectories is not None and len(batch.trajectories) == 3


def test_without_traces_requested_no_trajectories_come_back(llm: FakeLLM) -> None:
    batch = _adapter(llm, LengthMetric()).evaluate([_example(1)], {COMPONENT: "be generous"})

    assert batch.trajectories is None


def test_reflection_records_carry_the_input_the_reply_and_feedback_never_empty(llm: FakeLLM) -> None:
    adapter = _adapter(llm, LengthMetric())
    batch = adapter.evaluate([_example(1), _example(3)], {COMPONENT: "be generous"}, capture_traces=True)

    records = adapter.make_reflective_dataset({COMPONENT: "be generous"}, batch, [COMPONENT])[COMPONENT]

    assert records[0]["Inputs"] == "User: Refund order 1?"
    assert records[0]["Generated Outputs"] == "Refund approved."
    assert records[0]["Feedback"] == (
        "Reward model score: 0.050 (0 to 1; higher is better).\n- A reviewer commented on the whole trace: note 1"
    )
    assert records[1]["Generated Outputs"] == "(no reply)"
    assert records[1]["Feedback"].startswith("The agent could not answer (score 0): the task model openai/task failed")


def test_a_proposal_is_the_reflection_models_body(llm: FakeLLM) -> None:
    llm.reply = lambda _path, _body: "```\n# New body\n```"
    adapter = _adapter(llm, LengthMetric())
    records = [{"Inputs": "User: x", "Generated Outputs": "No.", "Feedback": "Reward model score: 0.1"}]

    proposed = adapter.propose_new_texts({COMPONENT: "old"}, {COMPONENT: records}, [COMPONENT])

    assert proposed == {COMPONENT: "# New body"}
    (prompt,) = [body["messages"][0]["content"] for _, body in llm.requests]
    assert "# Current body\nold" in prompt and "### Feedback\nReward model score: 0.1" in prompt
