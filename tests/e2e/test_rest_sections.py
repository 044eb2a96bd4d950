"""Trace sections over REST: the grouped tree, section summaries and completion, on the embedded stack.

The stack's fast model is the real anthropic client in the labeler (and ingest's titles) talking to
the local stand-in; two users check that another owner's trace is 404 before any model call.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fakes.llm_server import FakeLLM

from support.fixtures import real_fixture
from support.stack import RunningStack, running_stack


@pytest.fixture(scope="module")
def model() -> Iterator[FakeLLM]:
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, model: FakeLLM) -> Iterator[RunningStack]:
    with running_stack(
        tmp_path_factory.mktemp("sections"), STASH_ANTHROPIC_API_KEY="test-key", STASH_ANTHROPIC_BASE_URL=model.url
    ) as running:
        yield running


@pytest.fixture(scope="module")
def session_trace(alice: httpx.Client) -> dict[str, Any]:
    data = real_fixture("claude-code/spotter-v2.1-task-subagent-parent.jsonl").decode()
    response = alice.post("/traces/import", json={"format": "claude_code", "data": data})
    assert response.status_code == 200, response.text
    return alice.get(f"/traces/{response.json()['trace_ids'][0]}").json()


def _answer(checkpoints: dict[str, str]) -> Any:
    """Titles for ingest; for assessments, every schema field answered with its bound step ids."""
    return lambda _path, body: _fields(body, checkpoints) if body.get("tools") else "Draft and create beads"


def _fields(body: dict[str, Any], checkpoints: dict[str, str]) -> str:
    answer = {}
    for field, schema in body["tools"][0]["input_schema"]["properties"].items():
        bound = {name: schema["properties"][name]["const"] for name in ("first_step_id", "last_step_id")}
        if field.startswith("range_"):
            answer[field] = bound | {"title": field, "summary": "s", "objective": "o", "score": 0.5, "reason": "r"}
        else:
            checkpoint = {"step_id": checkpoints[field], "completion": 0.8, "reason": "mostly done"}
            answer[field] = bound | {"objective": "o", "checkpoints": [checkpoint]}
    return json.dumps(answer)


def test_sections_are_the_grouped_tree_of_the_trace(alice: httpx.Client, session_trace: dict[str, Any]) -> None:
    ids = [step["id"] for step in session_trace["steps"]]

    response = alice.get(f"/traces/{session_trace['id']}/sections")

    assert response.status_code == 200, response.text
    tasks = response.json()["tasks"]
    assert [(task["title"], task["first_step_id"], task["last_step_id"]) for task in tasks] == [
        ("/handgemacht:create-beads", ids[0], ids[32]),
        ("create the beads", ids[33], ids[42]),
    ]
    assert len(tasks[0]["children"]) == 6 and tasks[1]["children"] == []
    assert [i for child in tasks[0]["children"] for i in child["step_ids"]] == ids[:33]


def test_summaries_and_completion_come_from_the_fast_model_then_the_cache(
    alice: httpx.Client, session_trace: dict[str, Any], model: FakeLLM
) -> None:
    ids = [step["id"] for step in session_trace["steps"]]
    model.reply = _answer({"task_1": ids[31], "task_2": ids[42]})
    calls = len(model.requests)
    ranges = [{"first_step_id": ids[0], "last_step_id": ids[10]}, {"first_step_id": ids[33], "last_step_id": ids[42]}]

    summaries = alice.post(f"/traces/{session_trace['id']}/section-summaries", json={"ranges": ranges})
    completion = alice.post(f"/traces/{session_trace['id']}/completion")
    again = alice.post(f"/traces/{session_trace['id']}/section-summaries", json={"ranges": ranges[1:]})

    assert summaries.status_code == 200, summaries.text
    assert [(s["first_step_id"], s["title"], s["score"], s["pending"]) for s in summaries.json()["summaries"]] == [
        (ids[0], "range_1", 0.5, False),
        (ids[33], "range_2", 0.5, False),
    ]
    assert completion.status_code == 200, completion.text
    body = completion.json()
    assert (body["pending"], body["unavailable"]) == (False, False)
    assert [task["checkpoints"] for task in body["tasks"]] == [
        [{"step_id": ids[30], "completion": 0.8, "reason": "mostly done"}],  # the tool result's call
        [{"step_id": ids[42], "completion": 0.8, "reason": "mostly done"}],
    ]
    assert again.json()["summaries"][0]["title"] == "range_2"
    assert len(model.requests) == calls + 2


@pytest.mark.parametrize("count", [0, 5])
def test_one_to_four_ranges_or_422(alice: httpx.Client, session_trace: dict[str, Any], count: int) -> None:
    step = session_trace["steps"][0]["id"]
    ranges = [{"first_step_id": step, "last_step_id": step}] * count

    response = alice.post(f"/traces/{session_trace['id']}/section-summaries", json={"ranges": ranges})

    assert response.status_code == 422


def test_another_owners_trace_is_404_without_a_model_call(
    bob: httpx.Client, session_trace: dict[str, Any], model: FakeLLM
) -> None:
    calls, step = len(model.requests), session_trace["steps"][0]["id"]
    trace = session_trace["id"]

    responses = [
        bob.get(f"/traces/{trace}/sections"),
        bob.post(
            f"/traces/{trace}/section-summaries", json={"ranges": [{"first_step_id": step, "last_step_id": step}]}
        ),
        bob.post(f"/traces/{trace}/completion"),
    ]

    assert [response.status_code for response in responses] == [404, 404, 404]
    assert len(model.requests) == calls
