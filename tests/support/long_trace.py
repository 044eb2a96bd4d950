"""A long agent trace in the Stash format: the web UI's test and benchmark of a 5,000-step trace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

_START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def long_trace_line(step_count: int, external_id: str = "long-session") -> str:
    """One Stash JSONL line: a system prompt, a request, then rounds of a tool call, its result and a
    short note, with a code fence now and then, ending with an answer the user accepts."""
    steps: list[dict[str, object]] = [
        {"role": "system", "content": "You are a coding agent working in a large repository."},
        {"role": "user", "content": "Find every caller of parse_date and make them pass a time zone."},
    ]
    while len(steps) < step_count - 2:
        steps.append(_round_step(len(steps)))
    steps.append({"role": "assistant", "content": "Every caller now passes a time zone."})
    steps.append({"role": "user", "content": "Perfect, thanks!"})
    for index, step in enumerate(steps):
        step["metadata"] = {"timestamp": (_START + timedelta(seconds=3 * index)).isoformat()}
    return orjson.dumps(
        {"id": external_id, "title": f"A {len(steps)}-step refactoring session", "steps": steps}
    ).decode()


def _round_step(n: int) -> dict[str, object]:
    """Step `n` of the repeated rounds: a Read call, its result, a note with a code fence."""
    module = n // 3
    if n % 3 == 2:
        return {
            "role": "assistant",
            "content": "",
            "tool_name": "Read",
            "tool_input": {"file_path": f"src/m{module}.py"},
        }
    if n % 3 == 0:
        return {
            "role": "tool",
            "content": f"def f{module}(value):\n    return parse_date(value)\n",
            "tool_name": "Read",
        }
    return {
        "role": "assistant",
        "content": f"Module m{module} calls it once:\n```python\nparse_date(value, tz=UTC)\n```",
    }
