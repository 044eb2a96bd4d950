"""Action scoring: one forward call per action (a), length-sorted batches (b), one pass per trace (c).

    .venv/bin/python bench/action_scoring.py [--every 50] [--long-traces 4] [--repeat 3] [--device cpu]
        [--qwen3 small]

The workload is 10,000 actions from 500 support traces of mixed lengths (2 to 54 actions, a third of the
traces 20 or more: user turns, replies, tool calls and their results), generated deterministically and
rendered with `stash_common.rendering` exactly as the scorer renders them. The strategies are the ones in
`stash_common.reward_model.strategies`, run on the packaged all-MiniLM-L6-v2 ((a) and (b); an encoder has
no one-pass strategy) and on a Qwen3 built from a config with random weights ((a), (b), (c)): `small`
(hidden 256, 4 layers, 4 heads of 64, 2 key-value heads, MLP 768; 3-4M parameters with the trained
vocabulary) fits a 2-core CPU, `0.6b` (Qwen3-0.6B's shape: hidden 1024, 28 layers, 16 heads of 128, 8
key-value heads, MLP 3072, vocabulary 151,936) is for a GPU. Qwen3's tokenizer is a byte-level BPE
trained on the workload with the GPT-2 split rule; a second Qwen3 row uses Qwen2's split rule (Qwen3's
own), which glues punctuation to the newlines after it. Texts are tokenised segment by segment
(`stash_common.reward_model.inference.tokenize`), so with either rule every action whose example fits
the token limit shares its trace's pass ("in pass" counts them); the others get windows.

On a 2-core CPU the whole workload takes too long for one-by-one scoring, so by default every 50th trace
(10 traces, about 200 actions, a mix of lengths) is scored by every strategy: ratios compare identical
inputs. `--every 1` scores all 10,000. The (c)/(a) ratio is measured on `--long-traces` traces with 20+
actions. Every run is its own process, one after another, so "peak MB" (ru_maxrss, or torch's peak on
CUDA) is that run's alone; "+MB" is what scoring added to the loaded model. Each process first scores
two actions to warm up, untimed. All runs are repeated `--repeat` times, interleaved ((a), (b), (c), (a),
...), so that other work on a shared machine slows every strategy alike, and each run's median try
(by seconds) is reported, so a ratio compares two typical tries, not two lucky ones; on a busy machine
tries still spread widely, so compare rows of one table only (the title gives the load).
"calls" counts forward passes, "tokens" the real (unpadded) tokens the model reads and "µs/token" the
time per such token: on a CPU (a) is already compute-bound at a few hundred tokens, so (b) can only
win back per-call overhead, while (c) reads far fewer tokens. Max length 1024 tokens (MiniLM: its 512
positions), batch size 16 (and on CPU at most `CPU_BATCH_TOKENS` padded tokens per batch).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from stash_common.rendering import render_example, render_trace
from stash_common.steps import Role, TraceStep

sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

from support.reward_models import GPT2_SPLIT, QWEN2_SPLIT, bpe_tokenizer  # noqa: E402

TRACES, ACTIONS, SEED = 500, 10_000, 0
MAX_LENGTH, BATCH_SIZE = 1024, 16
QWEN3_SIZES: dict[str, dict[str, int]] = {
    "small": {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 768,
    },
    "0.6b": {
        "hidden_size": 1024,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 3072,
        "vocab_size": 151_936,
    },
}
STRATEGY_LABELS = {"one_by_one": "(a) one by one", "sorted_batches": "(b) sorted batches", "one_pass": "(c) one pass"}
ITEMS = ("espresso machine", "yoga mat", "desk lamp", "winter jacket", "air fryer", "rice cooker", "phone case")
ASKS = (
    "Where is my {item}?",
    "Can I return the {item}",
    "The {item} arrived broken!",
    "I want a refund for the {item}",
)
REPLIES = (
    "Your {item} ships tomorrow.",
    "We refunded the {item} to your card",
    "A new {item} is on its way.",
    "Let me check the {item} order for you",
    "Sorry about the {item}, I can help with that!",
)
TOOLS = ("lookup_order", "refund_order", "track_parcel")


def parse_args() -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--every", type=int, default=50, help="score every n-th trace of the 500 (1: all)")
    parser.add_argument("--long-traces", type=int, default=4, help="traces with 20+ actions for the (c)/(a) ratio")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--qwen3", choices=sorted(QWEN3_SIZES), default="small", help="the Qwen3 config's size")
    parser.add_argument("--repeat", type=int, default=3, help="run everything n times, keep each run's fastest")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # child mode: run the spec in this file
    return parser.parse_args()


def action_counts(rng: random.Random) -> list[int]:
    """Actions per trace: 25% short (2-9), 40% medium (10-19), 35% long (20-60), summing to exactly ACTIONS."""
    short, medium = int(TRACES * 0.25), int(TRACES * 0.4)
    counts = [rng.randint(2, 9) for _ in range(short)] + [rng.randint(10, 19) for _ in range(medium)]
    long = TRACES - short - medium
    left = ACTIONS - sum(counts)
    counts += [min(60, max(20, left // long + rng.randint(-16, 16))) for _ in range(long)]
    position = len(counts) - 1
    while sum(counts) != ACTIONS:  # spread the rounding over the long traces, within 20..60
        step = 1 if sum(counts) < ACTIONS else -1
        if 20 <= counts[position] + step <= 60:
            counts[position] += step
        position = position - 1 if position > short + medium else len(counts) - 1
    rng.shuffle(counts)
    return counts


def trace(number: int, actions: int, rng: random.Random) -> tuple[TraceStep, ...]:
    """One support conversation with `actions` assistant actions."""
    steps: list[TraceStep] = []

    def add(role: Role, content: str, tool: str | None = None, tool_input: dict[str, Any] | None = None) -> None:
        steps.append(TraceStep(f"t{number}:{len(steps)}", len(steps), role, content, tool, tool_input))

    add("system", "You are a support agent for an online shop.")
    add("user", rng.choice(ASKS).format(item=rng.choice(ITEMS)))
    for _ in range(actions):
        item = rng.choice(ITEMS)
        if rng.random() < 0.35:
            tool = rng.choice(TOOLS)
            add("assistant", "", tool, {"order_id": str(rng.randint(1000, 9999))})
            add("tool", json.dumps({"status": rng.choice(["delivered", "in transit", "refunded"])}), tool)
        else:
            add("assistant", rng.choice(REPLIES).format(item=item))
            if rng.random() < 0.5:
                add("user", rng.choice(ASKS).format(item=rng.choice(ITEMS)))
    return tuple(steps)


def workload() -> list[tuple[TraceStep, ...]]:
    """The 500 traces of the benchmark, the same on every run."""
    rng = random.Random(SEED)
    return [trace(number, actions, rng) for number, actions in enumerate(action_counts(rng))]


def examples(steps: tuple[TraceStep, ...]) -> list[str]:
    """Every eligible action's example, in step order."""
    return [render_example(steps, step.index) for step in steps if step.is_action]


def save_qwen3(directory: Path, tokenizer: Any, size: str) -> Path:
    """A seeded random Qwen3 reward model of `size` with `tokenizer`, saved as a checkpoint."""
    import torch
    from transformers import Qwen3Config, Qwen3ForSequenceClassification

    shape = {"vocab_size": len(tokenizer), **QWEN3_SIZES[size]}
    config = Qwen3Config(eos_token_id=tokenizer.eos_token_id, num_labels=1, max_position_embeddings=4096, **shape)
    torch.manual_seed(0)
    tokenizer.save_pretrained(directory)
    Qwen3ForSequenceClassification(config).save_pretrained(directory)
    return directory


def save_minilm(directory: Path) -> Path:
    """The packaged MiniLM with a seeded fresh reward head, saved as a checkpoint."""
    import torch

    from stash_common.reward_model.checkpoint import load_checkpoint
    from stash_common.reward_model.packaged import packaged_model_dir

    torch.manual_seed(0)
    model, tokenizer = load_checkpoint(packaged_model_dir(), "cpu", MAX_LENGTH)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def checkpoints(directory: Path, traces: Sequence[tuple[TraceStep, ...]], size: str) -> dict[str, Path]:
    """The benchmark's models, by the name the table shows."""
    corpus = [render_trace(steps) for steps in traces]
    return {
        "MiniLM-L6": save_minilm(directory / "minilm"),
        f"Qwen3 {size}": save_qwen3(directory / "qwen3", bpe_tokenizer(corpus, GPT2_SPLIT), size),
        f"Qwen3 {size}, Qwen2 split": save_qwen3(directory / "qwen3-qwen2", bpe_tokenizer(corpus, QWEN2_SPLIT), size),
    }


def peak_mb(device: str) -> float:
    """This process's peak memory: resident set on CPU, torch's allocations on CUDA."""
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def tokens_read(name: str, scoring: Any, traces: list[list[str]]) -> tuple[int, int]:
    """(actions a pass covers, real tokens the model reads): every truncated example, or passes and windows."""
    from stash_common.reward_model.inference import tokenize
    from stash_common.reward_model.passes import plan_pass

    if name != "one_pass":
        return 0, sum(len(ids) for texts in traces for ids in tokenize(scoring.tokenizer, texts, scoring.max_length))
    plans = [(plan_pass(tokenize(scoring.tokenizer, texts, None), scoring.max_length), texts) for texts in traces]
    windows = [texts[number] for plan, texts in plans for number in plan.windows]
    passes = sum(len(plan.tokens) for plan, _ in plans)
    covered = sum(len(plan.positions) for plan, _ in plans)
    return covered, passes + sum(map(len, tokenize(scoring.tokenizer, windows, scoring.max_length)))


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    """Load one checkpoint, warm up on two actions, then score the spec's traces with one strategy."""
    import torch

    from stash_common.reward_model.checkpoint import load_checkpoint
    from stash_common.reward_model.device import configure_threads
    from stash_common.reward_model.strategies import ScoringModel, strategy

    device, name = spec["device"], spec["strategy"]
    configure_threads(device)
    model, tokenizer = load_checkpoint(Path(spec["checkpoint"]), device, MAX_LENGTH)
    scoring = ScoringModel(model, tokenizer, device, tokenizer.model_max_length, BATCH_SIZE)
    traces: list[list[str]] = spec["traces"]
    covered, tokens = tokens_read(name, scoring, traces)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    loaded = peak_mb(device)
    strategy(name)(scoring, [traces[0][:2]])
    calls: list[None] = []
    model.get_submodule(model.base_model_prefix).register_forward_pre_hook(lambda *_: calls.append(None))
    started = time.perf_counter()
    scores = strategy(name)(scoring, traces)
    if device == "cuda":
        torch.cuda.synchronize()
    actions, seconds = sum(map(len, scores)), time.perf_counter() - started
    return {
        "actions": actions,
        "seconds": seconds,
        "actions_per_s": actions / seconds,
        "tokens": tokens,
        "us_per_token": seconds / tokens * 1e6,
        "calls": len(calls),
        "peak_mb": peak_mb(device),
        "added_mb": peak_mb(device) - loaded,
        "in_pass": covered if name == "one_pass" else None,
        "threads": torch.get_num_threads(),
        "parameters": sum(parameter.numel() for parameter in model.parameters()),
    }


def measure(scratch: Path, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Run one spec in a fresh process and read back its record."""
    spec_file = scratch / f"{name}.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    subprocess.run([sys.executable, __file__, "--child", str(spec_file)], check=True, env=env)
    return json.loads((scratch / f"{name}.result.json").read_text())


def plan_runs(
    models: dict[str, Path], mixed: list[list[str]], long: list[list[str]]
) -> list[tuple[str, str, str, list[list[str]]]]:
    """(model, strategy, set name, traces) of every run: (a) and (b) on MiniLM, (a), (b), (c) on Qwen3."""
    minilm, qwen3, qwen2_split = models
    runs = [(minilm, strategy, "mixed", mixed) for strategy in ("one_by_one", "sorted_batches")]
    runs += [(qwen3, strategy, "mixed", mixed) for strategy in STRATEGY_LABELS]
    runs += [(qwen3, strategy, "20+", long) for strategy in ("one_by_one", "one_pass")]
    runs += [(qwen2_split, strategy, "20+", long) for strategy in ("one_by_one", "one_pass")]
    return runs


def table(rows: list[dict[str, Any]], title: str) -> Table:
    """The results, one row per run."""
    view = Table(title=title)
    columns = ("model", "params", "strategy", "traces", "actions", "in pass", "calls", "tokens", "µs/token")
    for column in (*columns, "actions/s", "s", "peak MB", "+MB"):
        view.add_column(column, justify="left" if column in ("model", "strategy", "traces") else "right")
    for row in rows:
        view.add_row(
            row["model"],
            f"{row['parameters'] / 1e6:.1f}M",
            STRATEGY_LABELS[row["strategy"]],
            row["set"],
            str(row["actions"]),
            "" if row["in_pass"] is None else str(row["in_pass"]),
            str(row["calls"]),
            str(row["tokens"]),
            f"{row['us_per_token']:.0f}",
            f"{row['actions_per_s']:.1f}",
            f"{row['seconds']:.1f}",
            f"{row['peak_mb']:.0f}",
            f"{row['added_mb']:.0f}",
        )
    return view


def ratios(rows: list[dict[str, Any]]) -> list[str]:
    """(b)/(a) and (c)/(a) in actions/s, per model and trace set, against the issue's goals (3x and 10x)."""
    speed = {(row["model"], row["strategy"], row["set"]): row["actions_per_s"] for row in rows}
    lines = []
    for (model, name, traces), value in speed.items():
        if name != "one_by_one" and (model, "one_by_one", traces) in speed:
            goal = "≥ 3x" if name == "sorted_batches" else "≥ 10x on 20+"
            letter = "(b)" if name == "sorted_batches" else "(c)"
            ratio = value / speed[(model, "one_by_one", traces)]
            lines.append(f"{model}, {traces} traces: {letter}/(a) = {ratio:.1f}x (goal {goal})")
    return lines


def median_try(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """The try with the median seconds (of an even number, the faster of the two middle ones)."""
    ordered = sorted(tries, key=lambda record: record["seconds"])
    return ordered[(len(ordered) - 1) // 2]


def main() -> None:
    """Generate the workload, build the models, run every strategy in its own process, print the table."""
    args = parse_args()
    if args.child:
        record = run_child(json.loads(args.child.read_text()))
        args.child.with_name(args.child.stem + ".result.json").write_text(json.dumps(record))
        return
    traces = workload()
    mixed = [examples(steps) for steps in traces[:: args.every]]
    many = [steps for steps in traces if sum(step.is_action for step in steps) >= 20]
    long = [examples(steps) for steps in many[:: len(many) // args.long_traces][: args.long_traces]]
    console = Console(width=200)
    with tempfile.TemporaryDirectory(prefix="action-scoring-") as scratch:
        models = checkpoints(Path(scratch), traces, args.qwen3)
        runs = plan_runs(models, mixed, long)
        records: list[list[dict[str, Any]]] = [[] for _ in runs]
        for repetition in range(args.repeat):  # interleaved, so that other work slows every run alike
            for number, (model, strategy, set_name, chosen) in enumerate(runs):
                spec = {"checkpoint": str(models[model]), "strategy": strategy, "traces": chosen, "device": args.device}
                records[number].append(measure(Path(scratch), f"{number}-{repetition}", spec))
                rate = records[number][-1]["actions_per_s"]
                console.print(f"{model}: {STRATEGY_LABELS[strategy]} on {set_name}, try {repetition + 1}: {rate:.1f}/s")
    rows = [
        {"model": model, "strategy": strategy, "set": set_name, **median_try(tries)}
        for (model, strategy, set_name, _), tries in zip(runs, records, strict=True)
    ]
    total = sum(map(len, mixed))
    title = (
        f"Action scoring on {args.device} ({rows[0]['threads']} threads): mixed = every {args.every}th of"
        f" {TRACES} traces ({len(mixed)} traces, {total} of {ACTIONS} actions); 20+ = {len(long)} traces,"
        f" {sum(map(len, long))} actions; the median of {args.repeat} tries; load {os.getloadavg()[0]:.1f}"
        f" on {os.cpu_count()} cores"
    )
    console.print(table(rows, title))
    for line in ratios(rows):
        console.print(line)


if __name__ == "__main__":
    main()
