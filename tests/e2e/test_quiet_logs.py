"""An idle, healthy stack logs no warning and no error, in either profile, through start, a training and idle time.

Every record a service writes above info level is something an operator is asked to look at; when a healthy
stack writes them (a Redis read timing out on schedule, a sweep failing on SQLite's datetimes) the ones that
matter drown. The test reads the services' own log files, as an operator would.
"""

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from support.ingest import stash_line
from support.logs import complaints
from support.models import new_bucket, offline_training_env
from support.stack import RunningStack, cluster_env, running_stack

TRAINING_WAIT_S = 300
IDLE_S = 20.0  # more than three rounds of every queue loop's blocking wait


@pytest.fixture(params=["embedded", "cluster"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningStack]:
    env: dict[str, str] = {}
    if request.param == "cluster":
        s3_url = request.getfixturevalue("s3_endpoint_url")
        env |= cluster_env(request.getfixturevalue("empty_postgres_url"), request.getfixturevalue("redis_url"))
        env |= offline_training_env(new_bucket(s3_url, "stash-quiet"), s3_url)
    else:
        env["STASH_TRAINER_MAX_LENGTH"] = "128"
    with running_stack(tmp_path, **env) as running:
        yield running


def _train(client: httpx.Client) -> dict:
    trace_ids = []
    for number in range(4):
        trace = orjson.loads(stash_line(f"quiet-{number}"))
        trace["steps"][1]["content"] = f"I want a refund for order {1100 + number}"  # four different traces
        trace_id = client.post("/traces/import", json={"format": "stash", "data": orjson.dumps(trace).decode()})
        trace_ids.append(trace_id.json()["trace_ids"][0])
        steps = client.get(f"/traces/{trace_ids[-1]}").json()["steps"]
        for step, rating in ((steps[2], 1), (steps[4], -1)):
            client.post(f"/traces/{trace_ids[-1]}/annotations", json={"step_id": step["id"], "rating": rating})
    model = client.post("/reward-models", json={"name": "quiet", "trace_ids": trace_ids, "epochs": 1}).json()
    deadline = time.monotonic() + TRAINING_WAIT_S
    while model["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
        model = client.get(f"/reward-models/{model['id']}").json()
    return model


def test_a_healthy_stack_that_trains_and_idles_logs_no_warning_or_error(stack: RunningStack) -> None:
    with stack.client(stack.create_user("quiet")) as client:
        model = _train(client)
        time.sleep(IDLE_S)
        ready = httpx.get(f"{stack.gateway_url}/readyz")

    assert model["status"] == "succeeded", model["error"]
    assert ready.status_code == 200, ready.text
    assert complaints(stack.data_dir) == []
