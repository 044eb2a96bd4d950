"""Long waits on the command line: a spinner on a terminal, a progress line now and then when piped.

A spinner draws nothing into a file or a CI log, so a piped run would sit silent for minutes; there the
wait prints what it waits for at once and then a line with the latest detail every PROGRESS_EVERY_S.
"""

from __future__ import annotations

from time import monotonic
from types import TracebackType

from rich.console import Console
from rich.status import Status

PROGRESS_EVERY_S = 15.0


class Waiting:
    """`with Waiting(console, "Training") as wait: wait.update("step 3 of 40")`."""

    def __init__(self, console: Console, what: str, every_s: float = PROGRESS_EVERY_S) -> None:
        self.console = console
        self.what = what
        self.every_s = every_s
        self.status: Status | None = None
        self.started = self.printed = monotonic()

    def __enter__(self) -> Waiting:
        self.started = self.printed = monotonic()
        if self.console.is_terminal:
            self.status = self.console.status(f"{self.what}…")
            self.status.__enter__()
        else:
            self.console.print(f"{self.what}…")
        return self

    def update(self, detail: str) -> None:
        """Show the latest detail: at once on a terminal, in the next progress line when piped."""
        now = monotonic()
        if self.status is not None:
            self.status.update(f"{self.what}… {detail}")
        elif now - self.printed >= self.every_s:
            self.printed = now
            self.console.print(f"{self.what}… {detail} ({now - self.started:.0f} s so far)")

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.status is not None:
            self.status.__exit__(kind, error, trace)
