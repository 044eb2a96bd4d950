"""The schemathesis command line of the OpenAPI conformance test and bench: checks, exclusions, bounds.

The checks left out judge semantics the schema cannot express: `positive_data_acceptance` (an SQL text that
does not parse is schema-valid, and 422 is right) and `negative_data_rejection` (pydantic's lax mode accepts
`0` for a boolean). POST /api/v1/me/transcripts is left out because its body is JSONL, which schemathesis
cannot serialise, and DELETE /keys/{key_id} because the stateful phase would revoke the run's own key.
"""

from __future__ import annotations

import sys
from pathlib import Path

from support.stack import RunningStack

EXCLUDED_CHECKS = "positive_data_acceptance,negative_data_rejection"
EXCLUDED_OPERATIONS = ("delete_key_api_v1_rm_keys__key_id__delete", "upload_transcript_api_v1_me_transcripts_post")


ALL_PHASES = "examples,coverage,fuzzing,stateful"


def schemathesis_command(
    stack: RunningStack, key: str, examples: int, seed: int, max_time_s: int | None = None, phases: str = ALL_PHASES
) -> list[str]:
    """The `schemathesis run` command line against the stack's gateway, signed in with `key`: at most `examples`
    cases per operation and phase; with `max_time_s`, fuzzing and stateful testing repeat until it is spent."""
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "run",
        f"{stack.gateway_url}/openapi.json",
        "--header",
        f"Authorization: Bearer {key}",
        "--checks",
        "all",
        "--exclude-checks",
        EXCLUDED_CHECKS,
        "--max-examples",
        str(examples),
        "--seed",
        str(seed),
        "--phases",
        phases,
        "--workers",
        "2",
        "--generation-with-security-parameters",
        "false",
    ]
    if max_time_s is not None:
        command += ["--max-time", str(max_time_s)]
    for operation in EXCLUDED_OPERATIONS:
        command += ["--exclude-operation-id", operation]
    return command
