"""Trajectory PRM cost: analyze() after every append to a 50-event TaskLog, on long event streams.

Streams (seeded, so runs compare):

- `random`: uniformly random verbs, 0–3 files out of 12, 60% success; few patterns fire.
- `agent loop`: explore (read/search), then edit → test cycles where a test fails 0–4 times in
  a row before passing, with occasional rereads; stuck_on_test, repetition_loop and
  ping_pong fire regularly.
- `real transcripts`: the events derived from every Claude Code and Codex fixture in
  `tests/fixtures/real/`, repeated to length.

Each row appends N events one by one and runs `TaskLog.analyze()` after each append, as a
caller that checks before every dispatch would. A last row times `events_from_steps` on the
real transcripts (per step, parsing excluded).

    .venv/bin/python bench/prm_analyze.py [--events 100000] [--seed 7]
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from stash_common.steps import TraceStep
from stash_ingest.adapters.registry import ADAPTERS
from stash_labeler.prm import MAX_EVENTS, TaskLog, TrajectoryEvent, events_from_steps

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real"
START = datetime(2026, 5, 1, tzinfo=UTC)
FILES = tuple(f"src/module_{n}.py" for n in range(12))


@dataclass(frozen=True)
class StreamResult:
    """What analysing one stream cost."""

    events: int
    seconds: float
    flagged: int  # events after which at least one pattern was found

    @property
    def microseconds_per_event(self) -> float:
        """Append plus analyze, per event."""
        return self.seconds / self.events * 1e6

    @property
    def events_per_second(self) -> float:
        """How many events one core can append and analyse per second."""
        return self.events / self.seconds


def analyze_stream(events: Iterable[TrajectoryEvent], capacity: int = MAX_EVENTS) -> StreamResult:
    """Append each event to one TaskLog and analyse after every append; reusable by end-to-end benchmarks."""
    log = TaskLog("bench", capacity)
    count = flagged = 0
    started = time.perf_counter()
    for event in events:
        log.append(event)
        flagged += bool(log.analyze())
        count += 1
    return StreamResult(count, time.perf_counter() - started, flagged)


def event(number: int, action: str, files: tuple[str, ...], success: bool) -> TrajectoryEvent:
    """One event, a second after the previous one."""
    return TrajectoryEvent(START + timedelta(seconds=number), "agent", action, files, success, 0.5)


def random_stream(count: int, rng: random.Random) -> list[TrajectoryEvent]:
    """Uniformly random events."""
    actions = ("edit", "read", "test", "run", "search")
    return [
        event(n, rng.choice(actions), tuple(rng.sample(FILES, rng.randint(0, 3))), rng.random() < 0.6)
        for n in range(count)
    ]


def agent_loop_stream(count: int, rng: random.Random) -> list[TrajectoryEvent]:
    """Explore, then edit/test cycles with streaks of failing tests, like a coding agent."""
    return list(itertools.islice(_agent_loop(rng), count))


def _agent_loop(rng: random.Random) -> Iterator[TrajectoryEvent]:
    number = itertools.count()
    while True:
        target = rng.choice(FILES)
        test_file = (target.replace("src/", "tests/test_"),)
        for path in rng.sample(FILES, rng.randint(1, 6)):
            yield event(next(number), rng.choice(("read", "search")), (path,), True)
        for _ in range(rng.randint(0, 4)):  # failing runs, each after an edit or none
            if rng.random() < 0.5:
                yield event(next(number), "edit", (target,), True)
            yield event(next(number), "test", test_file, False)
        yield event(next(number), "edit", (target,), True)
        yield event(next(number), "test", test_file, True)


def real_steps() -> list[tuple[list[TraceStep], str]]:
    """Every real transcript's steps, as the labeler sees them, with the trace's role."""
    traces = []
    for adapter, folder in (("claude_code", "claude-code"), ("codex", "codex")):
        for path in sorted((FIXTURES / folder).glob("*.jsonl")):
            trace = ADAPTERS[adapter].parse(path.read_bytes())[0]
            steps = [
                TraceStep(f"s{i}", i, s.role, s.content, s.tool_name, s.tool_input, s.tool_call_id, dict(s.metadata))
                for i, s in enumerate(trace.steps)
            ]
            traces.append((steps, str(trace.metadata.get("agent_id", "agent"))))
    return traces


def real_stream(count: int, traces: list[tuple[list[TraceStep], str]]) -> list[TrajectoryEvent]:
    """The real transcripts' events, repeated to `count`."""
    events = [item.event for steps, role in traces for item in events_from_steps(steps, role)]
    return list(itertools.islice(itertools.cycle(events), count))


def derivation_seconds(traces: list[tuple[list[TraceStep], str]], rounds: int) -> tuple[int, float]:
    """Steps read and seconds spent deriving events from the real transcripts `rounds` times."""
    started = time.perf_counter()
    for _ in range(rounds):
        for steps, role in traces:
            events_from_steps(steps, role)
    return rounds * sum(len(steps) for steps, _ in traces), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    traces = real_steps()
    streams = {
        "random": random_stream(args.events, rng),
        "agent loop": agent_loop_stream(args.events, rng),
        "real transcripts": real_stream(args.events, traces),
    }
    print(f"analyze() after every append, window {MAX_EVENTS}, {args.events:,} events per stream\n")
    print("| stream | events | µs/event (append + analyze) | events/s | events with a pattern |")
    print("|---|---:|---:|---:|---:|")
    for name, events in streams.items():
        result = analyze_stream(events)
        print(
            f"| {name} | {result.events:,} | {result.microseconds_per_event:.2f} | "
            f"{result.events_per_second:,.0f} | {result.flagged / result.events:.1%} |"
        )
    steps, seconds = derivation_seconds(traces, rounds=200)
    print(
        f"| events_from_steps (real transcripts) | {steps:,} steps | {seconds / steps * 1e6:.2f} per step | "
        f"{steps / seconds:,.0f} steps/s | |"
    )


if __name__ == "__main__":
    main()
