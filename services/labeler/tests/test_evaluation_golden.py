"""Rule labels and scores stay byte for byte what they were: the API body, the kept labels and the headline numbers
of the real fixtures and of varied synthetic support conversations, against a golden file of their digests (the
whole evaluations would be 3 MB).

The hot path of the rule labeler and the per-step layout are tuned for speed (docs/benchmarks.md, "Labeling
throughput"); this pins what they produce. After an intended change of labels or scores, rewrite the file with
`STASH_WRITE_GOLDEN=1 .venv/bin/pytest services/labeler/tests/test_evaluation_golden.py` and review its diff.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from stash_common.steps import TraceStep
from stash_ingest.adapters.registry import ADAPTERS, detect
from stash_ingest.limits import DEFAULT_LIMITS
from stash_labeler.evaluation import Evaluation, evaluate
from stash_labeler.label_schema import StepLabel
from stash_labeler.labeling.rule_labeler import RuleLabeler
from stash_labeler.traces import LabelerTrace
from support.fixtures import REAL_FIXTURES

GOLDEN = Path(__file__).parent / "golden" / "rule_evaluations.txt"
FIXTURE_FORMATS = ("claude-code", "codex", "langfuse", "langsmith", "openai-chat", "anthropic-messages")
USER_LINES = (
    "Where is order {n}? It should have arrived.",
    "Thanks, that works!",
    "Great, but the invoice is still missing.",
    "No, that's wrong. I asked about the other order, the one from last week.",
    "Also, what about my refund?",
    "nope",
    "Perfect, thank you.",
    "You broke it. Please revert what you did to my account settings right now.",
    "Café order {n}: merci, c'est parfait",
)
ANSWERS = (
    "Your order {n} is in transit.",
    "I couldn't find order {n}.",
    "I think it might arrive tomorrow.",
    "I refunded part of order {n}; the remaining items still need approval.",
    "Could you confirm the order number?",
    "Done: order {n} is cancelled.",
)
CALLS = (
    ("lookup_order", {"order_id": "{n}"}, '{"status": "in transit"}', {}),
    ("cancelOrder", {"order_id": "{n}"}, "", {}),
    ("search_orders", {"query": "{n}"}, "No results for {n}", {}),
    ("bash", {"command": "ls -la && cat notes.txt"}, "notes", {"exit_code": 0}),
    ("bash", {"command": "rm -rf build > log.txt"}, "permission denied", {"exit_code": 1}),
    ("refund", {"order_id": "{n}"}, "error: card declined", {"is_error": True}),
    ("lookup_order", {"order_id": "1"}, '{"status": "delivered"}', {}),
)


def synthetic_trace(seed: int) -> LabelerTrace:
    """A support conversation with reactions, questions, narration, errors, repeats and calls without ids."""
    pick = random.Random(seed)
    steps = [TraceStep("s0", 0, "system", "You are a support agent.")]

    def add(role: str, content: str, *extra: Any) -> None:
        steps.append(TraceStep(f"s{len(steps)}", len(steps), role, content, *extra))

    for turn in range(pick.randint(1, 8)):
        add("user", _numbered(pick.choice(USER_LINES), turn))
        for call in range(pick.randint(0, 3)):
            name, arguments, output, metadata = pick.choice(CALLS)
            call_id = f"call_{turn}_{call}" if pick.random() < 0.8 else None
            arguments = {key: _numbered(value, turn) for key, value in arguments.items()}
            add("assistant", pick.choice(("", "Let me check.")), name, arguments, call_id)
            if pick.random() < 0.9:
                add("tool", _numbered(output, turn), name if call_id is None else None, None, call_id, metadata)
        if pick.random() < 0.3:
            add("assistant", "Checking one more thing.")
        if pick.random() < 0.9:
            add("assistant", _numbered(pick.choice(ANSWERS), turn))
    return LabelerTrace(f"synthetic-{seed}", "golden", 1, "stash", tuple(steps))


def _numbered(text: str, turn: int) -> str:
    return text.replace("{n}", str(turn))


def fixture_traces() -> list[LabelerTrace]:
    """Every trace of the real fixtures of the formats above, as the labeler reads them."""
    traces = []
    for path in sorted(p for name in FIXTURE_FORMATS for p in (REAL_FIXTURES / name).iterdir()):
        raw = path.read_bytes()
        for number, trace in enumerate(ADAPTERS[detect(raw)].parse(raw, DEFAULT_LIMITS)):
            steps = tuple(
                TraceStep(
                    f"{path.stem}-{index}", index, step.role, step.content, step.tool_name,
                    dict(step.tool_input) if step.tool_input is not None else None, step.tool_call_id,
                    dict(step.metadata),
                )
                for index, step in enumerate(trace.steps)
            )  # fmt: skip
            traces.append(
                LabelerTrace(f"{path.parent.name}/{path.name}#{number}", "golden", 1, path.parent.name, steps)
            )
    return traces


def as_line(trace: LabelerTrace, evaluation: Evaluation) -> str:
    """The trace's name and the digest of what the API answers and the store keeps of its evaluation, as JSON in
    the order it is built."""
    labels = {
        chunk_id: [
            evaluation.label_metadata[chunk_id],
            kept.label.source.value,
            kept.label.model,
            kept.label.fingerprint,
        ]
        + [kept.distribution]
        for chunk_id, kept in evaluation.labels.items()
    }
    headline = [evaluation.trace_score, evaluation.outcome, evaluation.labeler.value, evaluation.labeled_now]
    kept = orjson.dumps({"headline": headline, "body": evaluation.body, "labels": labels})
    return f"{trace.id} {hashlib.sha256(kept).hexdigest()}"


def golden_traces() -> list[LabelerTrace]:
    return fixture_traces() + [synthetic_trace(seed) for seed in range(200)]


def evaluated_lines() -> list[str]:
    labeler = RuleLabeler()
    return [as_line(trace, evaluate(trace, labeler, {})) for trace in golden_traces()]


def test_rule_evaluations_match_the_golden_file() -> None:
    lines = evaluated_lines()
    if os.environ.get("STASH_WRITE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text("\n".join(lines) + "\n")
        pytest.skip(f"wrote {GOLDEN}")
    golden = GOLDEN.read_text().splitlines()
    assert len(lines) == len(golden)
    for line, expected in zip(lines, golden, strict=True):
        assert line == expected


def test_rule_labels_pass_the_validation_they_skip() -> None:
    labeler = RuleLabeler()
    for trace in golden_traces():
        for kept in evaluate(trace, labeler, {}).labels.values():
            label = kept.label.label
            assert StepLabel.model_validate(label.as_metadata()) == label, (trace.id, label)
