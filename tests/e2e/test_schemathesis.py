"""OpenAPI conformance of a real gateway: schemathesis generates a few hundred requests from the gateway's own
OpenAPI document against a whole embedded stack, and every answer must be documented (status code, content
type, headers, body schema) and none may be a 5xx (every service is up).

The checks left out judge semantics the schema cannot express: `positive_data_acceptance` (an SQL text that
does not parse is schema-valid, and 422 is right) and `negative_data_rejection` (pydantic's lax mode accepts
`0` for a boolean). POST /api/v1/me/transcripts is left out because its body is JSONL, which schemathesis
cannot serialise (tests/integration/gateway/test_transcripts.py covers it), and DELETE /keys/{key_id}
because the stateful phase would revoke the key the run authenticates with (support/schemathesis.py).
bench/openapi_fuzz.py runs the same with many more cases.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.schemathesis import schemathesis_command
from support.stack import RunningStack, running_stack


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    with running_stack(tmp_path_factory.mktemp("schemathesis")) as running:
        yield running


def test_every_answer_of_a_bounded_run_is_documented_and_none_is_a_server_error(
    stack: RunningStack, tmp_path: Path
) -> None:
    key = stack.create_user("fuzzer")
    command = schemathesis_command(stack, key, examples=5, seed=20)

    # In tmp_path: schemathesis keeps its state in ./.schemathesis.
    run = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path)

    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]
    generated = re.search(r"(\d+) generated", run.stdout)
    assert generated is not None and int(generated.group(1)) >= 200, run.stdout[-2_000:]
