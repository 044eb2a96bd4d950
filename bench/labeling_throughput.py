"""Labeling throughput and provider calls for growing traces.

1. Rule-based labelling + scoring of the 100k-step set (the same conversations as the import
   benchmark), in this process: chunking, labels, scores and the per-step layout the API returns.
2. Provider calls per trace for a growing trace: a conversation evaluated after every new turn
   with the LLM labeler (the real `openai` client against the local stand-in server that speaks
   the OpenAI wire protocol), keeping unchanged chunks' labels, against labeling every chunk again.

    .venv/bin/python bench/labeling_throughput.py [--steps 100000] [--turns 20]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import openai
import orjson
from rich.console import Console
from rich.table import Table

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1] / "tests")]

from fakes.llm_server import FakeLLM  # noqa: E402
from import_throughput import make_payload  # noqa: E402

from stash_common.steps import TraceStep  # noqa: E402
from stash_ingest.adapters.stash import parse_stash  # noqa: E402
from stash_labeler.chunks import cut_chunks  # noqa: E402
from stash_labeler.evaluation import KeptLabel, evaluate  # noqa: E402
from stash_labeler.labeling.llm import OpenAILabeler  # noqa: E402
from stash_labeler.labeling.rules import RuleLabeler, label_chunks  # noqa: E402
from stash_labeler.traces import LabelerTrace  # noqa: E402


def labeler_traces(payload: bytes) -> list[LabelerTrace]:
    """The payload's traces as the labeler reads them (what GetTraceRevision would return)."""
    traces = []
    for number, trace in enumerate(parse_stash(payload)):
        steps = tuple(
            TraceStep(
                f"{number}-{index}", index, step.role, step.content, step.tool_name,
                dict(step.tool_input) if step.tool_input is not None else None, step.tool_call_id, dict(step.metadata),
            )
            for index, step in enumerate(trace.steps)
        )  # fmt: skip
        traces.append(LabelerTrace(f"trace-{number}", "bench", 1, "stash", steps))
    return traces


def rule_throughput(traces: list[LabelerTrace]) -> float:
    """Seconds to label and score every trace with the rule-based labeler."""
    labeler = RuleLabeler()
    started = time.perf_counter()
    for trace in traces:
        evaluate(trace, labeler, {})
    return time.perf_counter() - started


def growing_conversation(turns: int) -> list[LabelerTrace]:
    """Snapshots of one conversation after each turn (a request, a tool call with its result, an answer)."""
    steps: list[TraceStep] = [TraceStep("s0", 0, "system", "You are a support agent.")]
    snapshots = []
    for turn in range(turns):
        n = len(steps)
        steps += [
            TraceStep(f"s{n}", n, "user", f"Where is order {turn}? It should have arrived."),
            TraceStep(f"s{n + 1}", n + 1, "assistant", "", "lookup_order", {"order_id": str(turn)}, f"call_{turn}"),
            TraceStep(f"s{n + 2}", n + 2, "tool", '{"status": "in transit"}', "lookup_order", f"call_{turn}"),
            TraceStep(f"s{n + 3}", n + 3, "assistant", f"Order {turn} is in transit."),
        ]
        snapshots.append(LabelerTrace("growing", "bench", turn + 1, "stash", tuple(steps)))
    return snapshots


def answer_like_a_labeler(_path: str, body: dict[str, Any]) -> str:
    """The stand-in's answer: the rule-based label of the chunk the request names."""
    transcript = "\n".join(str(message.get("content")) for message in body["messages"])
    target = re.findall(r"\bc\d+\b", str(body["messages"][-1]["content"]))[-1]
    chunk_count = max(int(found[1:]) for found in re.findall(r"\bc\d+\b", transcript)) + 1
    return orjson.dumps(_rule_labels(chunk_count)[target]).decode()


def _rule_labels(chunk_count: int) -> dict[str, dict[str, Any]]:
    snapshot = growing_conversation((chunk_count + 2) // 3)[-1]
    return {label.chunk_id: label.model_dump(exclude_none=True) for label in label_chunks(cut_chunks(snapshot))}


def provider_calls(turns: int) -> tuple[int, int, float]:
    """Calls made while a conversation grows turn by turn: incremental, and labeling every chunk each time."""
    fake = FakeLLM().start()
    fake.reply = answer_like_a_labeler
    try:
        client = openai.OpenAI(api_key="bench", base_url=f"{fake.url}/v1", max_retries=0)
        labeler = OpenAILabeler(client, "bench-model")
        kept: dict[str, KeptLabel] = {}
        started = time.perf_counter()
        for snapshot in growing_conversation(turns):
            kept = evaluate(snapshot, labeler, kept).labels
        seconds = time.perf_counter() - started
        incremental = len(fake.requests)
    finally:
        fake.stop()
    every_chunk = sum(len(cut_chunks(snapshot)) for snapshot in growing_conversation(turns))
    return incremental, every_chunk, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--steps-per-trace", type=int, default=100)
    parser.add_argument("--turns", type=int, default=20)
    args = parser.parse_args()
    traces = labeler_traces(make_payload(args.steps, args.steps_per_trace))
    seconds = rule_throughput(traces)
    table = Table("measure", "value", title="Labeling")
    table.add_row(f"rule labels + scores, {args.steps:,} steps in {len(traces):,} traces", f"{seconds:.2f} s")
    table.add_row("throughput", f"{args.steps / seconds:,.0f} steps/s")
    incremental, every_chunk, llm_seconds = provider_calls(args.turns)
    table.add_row(f"provider calls, a trace growing over {args.turns} turns (incremental)", f"{incremental}")
    table.add_row("provider calls if every chunk were relabeled each time", f"{every_chunk}")
    table.add_row("calls per evaluated revision (incremental)", f"{incremental / args.turns:.1f}")
    table.add_row("LLM labeling wall time against the local stand-in", f"{llm_seconds:.2f} s")
    Console().print(table)


if __name__ == "__main__":
    main()
