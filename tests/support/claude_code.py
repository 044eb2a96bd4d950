"""Claude Code session files in the shape Claude Code writes them, for traces with a known trajectory."""

from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

SESSION_ID = "5f0c2a5e-8d7b-4c61-9a0e-3b2f1e4d6c70"
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class SessionWriter:
    """Appends user, assistant and tool-result lines with chained uuids and advancing timestamps."""

    def __init__(self, session_id: str = SESSION_ID) -> None:
        self.session_id = session_id
        self.lines: list[dict[str, Any]] = []
        self._calls = 0

    def user(self, text: str) -> None:
        """A typed user message."""
        self._line("user", {"role": "user", "content": text})

    def tool(self, name: str, tool_input: dict[str, Any], result: str, is_error: bool = False) -> None:
        """An assistant tool call and its result."""
        self._calls += 1
        call_id = f"toolu_{self._calls:04d}"
        content = [{"type": "tool_use", "id": call_id, "name": name, "input": tool_input}]
        self._line("assistant", {"role": "assistant", "model": "claude-opus-4-6", "content": content})
        block = {"tool_use_id": call_id, "type": "tool_result", "content": result, "is_error": is_error}
        self._line("user", {"role": "user", "content": [block]})

    def say(self, text: str) -> None:
        """An assistant text message."""
        self._line(
            "assistant", {"role": "assistant", "model": "claude-opus-4-6", "content": [{"type": "text", "text": text}]}
        )

    def jsonl(self) -> str:
        """The session file's text."""
        return "\n".join(orjson.dumps(line).decode() for line in self.lines) + "\n"

    def _line(self, kind: str, message: dict[str, Any]) -> None:
        number = len(self.lines)
        self.lines.append(
            {
                "parentUuid": self.lines[-1]["uuid"] if self.lines else None,
                "isSidechain": False,
                "userType": "external",
                "cwd": "/home/dev/project",
                "sessionId": self.session_id,
                "version": "2.1.38",
                "type": kind,
                "message": message,
                "uuid": f"00000000-0000-4000-8000-{number:012d}",
                "timestamp": (START + timedelta(seconds=7 * number)).isoformat().replace("+00:00", "Z"),
            }
        )


def looping_test_session() -> str:
    """An agent that reruns the same failing test three times, then edits code and test back and forth."""
    session = SessionWriter()
    session.user("The test test_parse_dates fails. Please fix it.")
    for _run in range(3):
        _run_tests(session)
    for attempt in range(2):
        for path in ("src/dates.py", "tests/test_dates.py"):
            session.tool(
                "Edit",
                {
                    "file_path": f"/home/dev/project/{path}",
                    "old_string": f"v{attempt}",
                    "new_string": f"v{attempt + 1}",
                },
                f"The file /home/dev/project/{path} has been updated.",
            )
    _run_tests(session)
    session.say("I could not make the test pass yet.")
    return session.jsonl()


def _run_tests(session: SessionWriter) -> None:
    session.tool(
        "Bash",
        {"command": "pytest tests/test_dates.py", "description": "Run the date tests"},
        "FAILED tests/test_dates.py::test_parse_dates - AssertionError\nExit code 1",
        is_error=True,
    )
